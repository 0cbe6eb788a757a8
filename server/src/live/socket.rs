//! `GET /live/{session}?ticket=…`: the live view's WebSocket.
//!
//! Before the upgrade: the dashboard cookie's operator (the auth middleware
//! put it into the request), a ticket issued to that operator for that
//! session, and a running session. Every refusal is audited
//! (`session.watch`, `denied: <code>`) and answered with the dashboard's
//! error shape. After it: frames and page state out; messages in, each
//! checked (size, shape, role, control) and turned into tool calls that run
//! through the one pipeline as the operator, in order, on a worker of their
//! own so a slow navigation does not stall the stream.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{Notify, mpsc};

use app::api::auth::{Operator, Role};
use app::api::live::{
    ClientMsg, ControlState, FrameMeta, KeyAction, MAX_CLIENT_MESSAGE, MAX_TEXT_CHARS, MouseAction,
    MouseButton, PageState, ServerMsg, TabInfo,
};
use app::error::UiError;

use super::stream::{Encoding, Frame, Screencast, Slot};
use crate::audit::{Actor, NewEvent};
use crate::auth::middleware::ui_error;
use crate::cdp::{Button, MouseKind};
use crate::domain::TargetUrl;
use crate::error::ApiError;
use crate::ids::token_hash;
use crate::sessions::{LiveInput, RunningSession, SessionError, Tool, ToolCall, Viewport};
use crate::state::AppState;

/// The query string.
#[derive(Deserialize)]
pub struct TicketQuery {
    #[serde(default)]
    ticket: String,
}

/// How often the page state is read and the session checked.
const TICK: Duration = Duration::from_millis(250);
/// How often the dashboard session and the operator are checked.
const AUTH_CHECK: Duration = Duration::from_secs(5);
/// How long control stays with an operator whose last view closed.
const RELEASE_AFTER: Duration = Duration::from_secs(30);
/// Input messages waiting for the browser; more are refused.
const INPUT_QUEUE: usize = 512;
/// How long a release waits for room in a full input queue.
const RELEASE_WAIT: Duration = Duration::from_secs(2);
/// What a live link's user is told when an operator has taken over.
const OPERATOR_HAS_CONTROL: &str =
    "an operator has taken control; input waits until they hand it back";

/// The WebSocket upgrade.
pub async fn handler(
    State(state): State<AppState>,
    Path(session): Path<String>,
    Query(q): Query<TicketQuery>,
    op: Option<Extension<Operator>>,
    dash: Option<Extension<tower_sessions::Session>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Some(Extension(op)) = op else {
        return ui_error(&UiError::Unauthorized);
    };
    let refuse = |e: UiError| {
        let state = state.clone();
        let (op, session) = (op.clone(), session.clone());
        async move {
            let event = NewEvent::new(Actor::Operator(op.id.clone()), "session.watch")
                .params(json!({ "session": session.chars().take(64).collect::<String>() }))
                .outcome(format!("denied: {}", e.code()));
            if let Err(err) = state.store.audit_append(event).await {
                tracing::error!(error = %format!("{err:#}"), "failed to audit a refused live view");
            }
            ui_error(&e)
        }
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return refuse(UiError::invalid(
                "upgrade",
                format!("not a WebSocket request: {e}"),
            ))
            .await;
        }
    };
    if let Err(e) = state
        .live
        .tickets
        .redeem(&state.store, &q.ticket, &op.id, &session)
        .await
    {
        return refuse(UiError::forbidden(e.to_string())).await;
    }
    let found = match crate::sessions::session_id(&session) {
        Ok(sid) => state.sessions.find_live(&sid).await,
        Err(e) => Err(e),
    };
    let live = match found {
        Ok(live) => live,
        Err(SessionError::NotFound) => {
            return refuse(UiError::not_found(format!("session {session}"))).await;
        }
        Err(SessionError::Gone { state: s, .. }) => {
            return refuse(UiError::conflict(format!("the session is {s}"))).await;
        }
        Err(e) => {
            tracing::error!(error = %e, "live view: session lookup failed");
            return ui_error(&UiError::internal("the session could not be read"));
        }
    };
    let dash = dash
        .and_then(|Extension(s)| s.id())
        .map(|id| token_hash(&id.to_string()));
    serve_view(state, live, op, dash, ws)
}

/// Who watches through a live view.
#[derive(Debug, Clone)]
pub enum Viewer {
    /// An operator in the dashboard; `dash` is the hash of the dashboard
    /// session behind the view, checked while it runs.
    Operator {
        /// The operator.
        op: Operator,
        /// `token_hash` of their dashboard session's id.
        dash: Option<String>,
    },
    /// The user of a live link: what they do runs as the agent that asked
    /// for the link, and they never hold control.
    Link(crate::live::link::Link),
}

impl Viewer {
    /// Who the view's actions are audited as.
    fn actor(&self) -> Actor {
        match self {
            Self::Operator { op, .. } => Actor::Operator(op.id.clone()),
            Self::Link(l) => Actor::Agent(l.key_id.clone()),
        }
    }

    /// The surface the view's actions come through.
    fn surface(&self) -> crate::audit::Surface {
        match self {
            Self::Operator { .. } => crate::audit::Surface::Live,
            Self::Link(_) => crate::audit::Surface::LiveLink,
        }
    }
}

/// How often a live link's view re-checks its link (revoked, expired).
const LINK_CHECK: Duration = Duration::from_secs(1);

/// Runs the view of `live` for the user of `link` on an accepted upgrade
/// (the caller has checked the link, and that `live` is its session).
pub fn serve_link_view(
    state: AppState,
    live: Arc<RunningSession>,
    link: crate::live::link::Link,
    ws: WebSocketUpgrade,
) -> Response {
    if !state.live.link_opened(link.id.as_str()) {
        return ApiError::TooManyRequests {
            message: format!(
                "this live link already has {} open views",
                crate::live::link::MAX_VIEWS_PER_LINK
            ),
            retry_after_s: 5,
        }
        .into_response();
    }
    // Counted back when the view ends, or when its upgrade never happens
    // (the closure is dropped unrun): a client that hangs up mid-upgrade
    // does not use up the link's views.
    let counted = LinkView {
        state: state.clone(),
        id: link.id.to_string(),
    };
    ws.max_message_size(MAX_CLIENT_MESSAGE * 4)
        .max_frame_size(MAX_CLIENT_MESSAGE * 4)
        .on_upgrade(move |socket| async move {
            let _counted = counted;
            Connection::run(state, live, Viewer::Link(link), socket).await;
        })
        .into_response()
}

/// One open view of a live link, counted back when dropped.
struct LinkView {
    state: AppState,
    id: String,
}

impl Drop for LinkView {
    fn drop(&mut self) {
        self.state.live.link_closed(&self.id);
    }
}

/// How long the socket may take to take one message: a viewer that
/// stops reading is cut off then (its socket dropped), not waited for.
const WRITE_BOUND: Duration = Duration::from_secs(10);

/// The most characters of a tab's address or title a view is sent (a
/// page may make either megabytes long), and the most tabs listed.
const MAX_PAGE_TEXT: usize = 2048;
const MAX_TABS_SHOWN: usize = 100;

/// What a link's user is told when an operator denied an action (never
/// who).
const DENIED: &str = "an operator denied this action; do not retry it without a new reason";

/// Runs the view of `live` for `op` on an accepted upgrade (`dash`: the
/// hash of the dashboard session behind it, checked while it runs).
pub fn serve_view(
    state: AppState,
    live: Arc<RunningSession>,
    op: Operator,
    dash: Option<String>,
    ws: WebSocketUpgrade,
) -> Response {
    // A session of a tenant outside the operator's scope does not exist
    // for them (whichever replica the view reached).
    if !op.sees(live.tenant.as_str()) || !live.open_to(&op.id) {
        let tenant = live.tenant.to_string();
        tokio::spawn(async move {
            state
                .auth
                .out_of_scope(&op.id, "watch a session", &tenant)
                .await;
        });
        return ui_error(&UiError::not_found(format!("session {}", live.id)));
    }
    ws.max_message_size(MAX_CLIENT_MESSAGE * 4)
        .max_frame_size(MAX_CLIENT_MESSAGE * 4)
        .on_upgrade(move |socket| async move {
            Connection::run(state, live, Viewer::Operator { op, dash }, socket).await;
        })
        .into_response()
}

/// One open live view.
struct Connection {
    state: AppState,
    live: Arc<RunningSession>,
    viewer: Viewer,
    out: mpsc::Sender<ServerMsg>,
    input: mpsc::Sender<ToolCall>,
    refused_input_audited: bool,
    /// How much input this view may still send (`limit.rs`).
    limit: super::limit::InputLimit,
    /// The view went over its limit once: audited once.
    limited_audited: bool,
    /// When the view was last told its input queue was full.
    busy_told: Option<std::time::Instant>,
    /// The viewer left its messages unread until the queue filled: the
    /// view ends (it would not read an ending either).
    stalled: std::sync::atomic::AtomicBool,
}

impl Connection {
    async fn run(state: AppState, live: Arc<RunningSession>, viewer: Viewer, socket: WebSocket) {
        let (mut sink, mut stream) = socket.split();
        let slot = Arc::new(Slot::default());
        let (out, mut out_rx) = mpsc::channel::<ServerMsg>(64);
        let writer_slot = slot.clone();
        let writer = tokio::spawn(async move {
            let mut seq = 0u64;
            loop {
                tokio::select! {
                    biased;
                    msg = out_rx.recv() => {
                        let Some(msg) = msg else { break };
                        let end = matches!(msg, ServerMsg::Ended { .. });
                        if !matches!(tokio::time::timeout(WRITE_BOUND, sink.send(text(&msg))).await, Ok(Ok(()))) {
                            break;
                        }
                        if end {
                            let _ = tokio::time::timeout(WRITE_BOUND, sink.send(Message::Close(None))).await;
                            break;
                        }
                    }
                    frame = writer_slot.next() => {
                        seq += 1;
                        let meta = ServerMsg::Frame(FrameMeta {
                            seq,
                            ts: frame.ts,
                            width: frame.width,
                            height: frame.height,
                            offset_top: frame.offset_top,
                            page_scale: frame.page_scale,
                            scroll_x: frame.scroll_x,
                            scroll_y: frame.scroll_y,
                        });
                        let bytes = frame.jpeg.len();
                        let sent = async {
                            sink.send(text(&meta)).await.is_ok()
                                && sink.send(Message::Binary(frame.jpeg.into())).await.is_ok()
                        };
                        let sent = tokio::time::timeout(WRITE_BOUND, sent).await.unwrap_or(false);
                        // Only now may Chromium send the next frame.
                        Frame::ack(&frame.page, frame.acks).await;
                        if !sent {
                            break;
                        }
                        metrics::counter!("cordon_live_frames_sent_total").increment(1);
                        metrics::counter!("cordon_live_bytes_sent_total").increment(bytes as u64);
                    }
                }
            }
        });
        let nudge = Arc::new(Notify::new());
        let (input, mut input_rx) = mpsc::channel::<ToolCall>(INPUT_QUEUE);
        let worker = {
            let (state, live, out, nudge) =
                (state.clone(), live.clone(), out.clone(), nudge.clone());
            let (actor, surface) = (viewer.actor(), viewer.surface());
            let link = matches!(viewer, Viewer::Link(_));
            tokio::spawn(async move {
                // A press refused (held and denied, or refused outright)
                // never reached the page: its release is dropped too, not
                // judged as a second click.
                let mut refused_press: Option<Button> = None;
                while let Some(call) = input_rx.recv().await {
                    let press = match &call.tool {
                        Tool::Input(LiveInput::Mouse {
                            kind: MouseKind::Down,
                            button,
                            ..
                        }) => Some(*button),
                        Tool::Input(LiveInput::Mouse {
                            kind: MouseKind::Up,
                            button,
                            ..
                        }) if refused_press == Some(*button) => {
                            refused_press = None;
                            continue;
                        }
                        _ => None,
                    };
                    let tabs = matches!(
                        call.tool,
                        Tool::TabOpen { .. } | Tool::TabFocus { .. } | Tool::TabClose { .. }
                    );
                    if let Err(e) = state
                        .sessions
                        .run_tool(&live, actor.clone(), surface, call)
                        .await
                    {
                        if press.is_some() {
                            refused_press = press;
                        }
                        let e = ApiError::from(e);
                        let code = e.code().to_owned();
                        // A link's user is not told which operator took over,
                        // nor who denied.
                        let message = match code.as_str() {
                            "operator_has_control" if link => OPERATOR_HAS_CONTROL.to_owned(),
                            "denied_by_operator" if link => DENIED.to_owned(),
                            _ => e.to_string(),
                        };
                        // A full queue: the viewer is not reading; the
                        // main loop ends the view.
                        let _ = out.try_send(ServerMsg::Error { code, message });
                    }
                    if tabs {
                        nudge.notify_one();
                    }
                }
            })
        };
        let mut watch = NewEvent::new(viewer.actor(), "session.watch")
            .tenant(&live.tenant)
            .session(live.id.as_str())
            .outcome("opened");
        match &viewer {
            Viewer::Operator { op, .. } => state.live.opened(live.id.as_str(), &op.id),
            Viewer::Link(l) => {
                watch = watch
                    .params(json!({ "via": "live_link", "link": l.id, "mode": l.mode.as_str() }));
            }
        }
        if let Err(e) = state.store.audit_append(watch).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a live view");
        }
        let mut conn = Self {
            state: state.clone(),
            live: live.clone(),
            viewer: viewer.clone(),
            out,
            input,
            refused_input_audited: false,
            limit: super::limit::InputLimit::new(std::time::Instant::now()),
            limited_audited: false,
            busy_told: None,
            stalled: std::sync::atomic::AtomicBool::new(false),
        };
        let v = live.viewport();
        conn.send(ServerMsg::Hello {
            session: live.id.to_string(),
            mode: live.mode.as_str().to_owned(),
            width: v.width,
            height: v.height,
        })
        .await;
        // Nobody else drives a refresh session: its operator has control
        // from the start.
        if let Viewer::Operator { op, .. } = &viewer
            && live.mode == crate::sessions::CredentialMode::Refresh
            && op.role.allows(Role::Operator)
            && live.control().is_none()
            && let Err(e) = state.sessions.take_control(&live, &op.id, &op.name).await
        {
            tracing::error!(error = %e, "live view: cannot take control of a refresh session");
        }
        conn.send(ServerMsg::Control(conn.control_state())).await;
        let ended = conn.main_loop(&mut stream, slot, &nudge).await;
        if let Some(reason) = ended {
            conn.send(ServerMsg::Ended { reason }).await;
        }
        drop(conn);
        worker.abort();
        // The writer ends after sending `ended` (or when its socket fails);
        // one still writing to a viewer that does not read is stopped.
        let mut writer = writer;
        if tokio::time::timeout(Duration::from_secs(2), &mut writer)
            .await
            .is_err()
        {
            writer.abort();
        }
        let Viewer::Operator { op, .. } = viewer else {
            return;
        };
        // A refresh session's control is never handed back: it has no agent.
        if state.live.closed(live.id.as_str(), &op.id) == 0
            && live.mode != crate::sessions::CredentialMode::Refresh
            && live.control().is_some_and(|h| h.operator_id == op.id)
        {
            tokio::spawn(release_later(state, live, op.id));
        }
    }

    /// Reads messages and keeps the view in step until the socket closes
    /// (`None`) or the session or the dashboard session ends (the reason).
    async fn main_loop(
        &mut self,
        stream: &mut futures::stream::SplitStream<WebSocket>,
        slot: Arc<Slot>,
        nudge: &Notify,
    ) -> Option<String> {
        let enc = Encoding {
            quality: self.state.settings.live.live_jpeg_quality,
            max_width: self.state.settings.live.live_max_width,
            max_height: self.state.settings.live.live_max_height,
        };
        let mut control = self.live.watch_control();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut cast: Option<Screencast> = None;
        let mut last_page: Option<PageState> = None;
        let mut seen: HashSet<String> = HashSet::new();
        let mut checked_auth = tokio::time::Instant::now();
        let auth_check = match self.viewer {
            Viewer::Operator { .. } => AUTH_CHECK,
            Viewer::Link(_) => LINK_CHECK,
        };
        let stopped = self.state.store.changes().clone();
        let ended = loop {
            // Input is only parsed and queued here; the page is looked at
            // on the tick, after tab tools and control changes, never once
            // per message (a moving pointer sends sixty a second).
            let look = tokio::select! {
                msg = stream.next() => match msg {
                    Some(Ok(Message::Text(t))) => {
                        self.on_text(t.as_str()).await;
                        false
                    }
                    Some(Ok(Message::Binary(_))) => {
                        self.error("bad_message", "binary messages are not accepted").await;
                        false
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break None,
                    Some(Ok(_)) => false,
                },
                changed = control.changed() => {
                    if changed.is_err() {
                        break Some("the session ended".to_owned());
                    }
                    self.send(ServerMsg::Control(self.control_state())).await;
                    true
                }
                () = stopped.stopped() => break Some("Cordon is shutting down".to_owned()),
                _ = tick.tick() => true,
                () = nudge.notified() => true,
            };
            if self.stalled.load(std::sync::atomic::Ordering::Relaxed) {
                break None;
            }
            if !look {
                continue;
            }
            // Is the session still there, and which tab is shown?
            if let Some(reason) = self.session_ended().await {
                break Some(reason);
            }
            if checked_auth.elapsed() >= auth_check {
                checked_auth = tokio::time::Instant::now();
                if let Err(why) = self.still_allowed().await {
                    break Some(why.to_owned());
                }
            }
            self.follow(&mut cast, &slot, enc, &mut seen, &mut last_page)
                .await;
        };
        if let Some(c) = cast {
            c.stop().await;
            self.live.screencast_stopped();
        }
        ended
    }

    /// Whether this view's operator holds control (a link's user never does).
    fn holds_control(&self) -> bool {
        match &self.viewer {
            Viewer::Operator { op, .. } => {
                self.live.control().is_some_and(|h| h.operator_id == op.id)
            }
            Viewer::Link(_) => false,
        }
    }

    fn control_state(&self) -> ControlState {
        let holder = self.live.control();
        match &self.viewer {
            Viewer::Operator { op, .. } => ControlState {
                yours: holder.as_ref().is_some_and(|h| h.operator_id == op.id),
                holder: holder.map(|h| h.name),
                may_control: op.role.allows(Role::Operator),
            },
            // A link's user learns that an operator took over, not who.
            Viewer::Link(_) => ControlState {
                yours: false,
                holder: holder.map(|_| "An operator".to_owned()),
                may_control: false,
            },
        }
    }

    /// Queues `msg` for the viewer; a full queue (a viewer that does not
    /// read) ends the view instead of waiting on it.
    async fn send(&self, msg: ServerMsg) {
        // Full: the viewer does not read; closed: the writer gave up on it.
        if self.out.try_send(msg).is_err() {
            self.stalled
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    async fn error(&self, code: &str, message: impl Into<String>) {
        self.send(ServerMsg::Error {
            code: code.to_owned(),
            message: message.into(),
        })
        .await;
    }

    /// The reason, once the session has ended.
    async fn session_ended(&self) -> Option<String> {
        // A session being closed has no reason yet: wait a moment for it.
        for _ in 0..30 {
            match self.state.sessions.find_live(&self.live.id).await {
                Ok(_) => return None,
                Err(SessionError::Gone {
                    state,
                    reason: Some(r),
                }) => return Some(format!("the session is {state} ({})", r.as_str())),
                Err(SessionError::Gone { reason: None, .. }) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(_) => break,
            }
        }
        Some("the session ended".to_owned())
    }

    /// Whether the viewer may still watch: for an operator, the dashboard
    /// session behind this view is still valid, its operator still enabled
    /// and still scoped to the session's tenant; for a link, the link is
    /// still in force. Else why not.
    async fn still_allowed(&self) -> Result<(), &'static str> {
        const LOGGED_OUT: &str = "your dashboard session ended; log in again";
        let (op, dash) = match &self.viewer {
            Viewer::Operator { op, dash } => (op, dash.as_deref()),
            Viewer::Link(l) => {
                let settings = &self.state.settings.live.tenant_live_links;
                return match crate::live::link::recheck(&self.state.store, &l.id, |t| {
                    settings.get(t).cloned()
                })
                .await
                {
                    Ok(_) => Ok(()),
                    Err(crate::live::link::LinkError::Expired) => Err("the live link expired"),
                    Err(crate::live::link::LinkError::Internal(e)) => {
                        // A database blip does not end the view; the next check decides.
                        tracing::warn!(error = %format!("{e:#}"), "live link: re-check failed");
                        Ok(())
                    }
                    Err(_) => Err("the live link was revoked"),
                };
            }
        };
        let Some(hash) = dash else {
            return Err(LOGGED_OUT);
        };
        let alive = self
            .state
            .store
            .dashboard_session_load(hash, crate::time::now_ms())
            .await
            .is_ok_and(|s| s.is_some());
        let row = match op.id.parse::<crate::domain::OperatorId>() {
            Ok(id) => self.state.auth.get(&id).await.ok().flatten(),
            Err(_) => None,
        };
        let Some(row) = row.filter(|o| o.disabled_at.is_none() && alive) else {
            return Err(LOGGED_OUT);
        };
        // A scope changed while watching ends the view.
        let in_scope = self
            .state
            .auth
            .dashboard_operator(row)
            .await
            .is_ok_and(|o| o.sees(self.live.tenant.as_str()));
        if in_scope {
            Ok(())
        } else {
            Err("this session's tenant is no longer in your scope")
        }
    }

    /// Shows the session's active tab (following a popup the operator's
    /// page opened), and sends the page state when it changed.
    async fn follow(
        &mut self,
        cast: &mut Option<Screencast>,
        slot: &Arc<Slot>,
        enc: Encoding,
        seen: &mut HashSet<String>,
        last: &mut Option<PageState>,
    ) {
        let Ok(targets) = self.live.tab_targets().await else {
            return;
        };
        let mine = self.holds_control();
        let first = seen.is_empty();
        for t in &targets {
            let id = t.target_id.inner().clone();
            if seen.insert(id.clone()) && !first && mine && t.opener_id.is_some() {
                // A popup (an OAuth window): show and drive it.
                let _ = self
                    .input
                    .try_send(ToolCall::new(Tool::TabFocus { tab: id }));
            }
        }
        seen.retain(|id| targets.iter().any(|t| t.target_id.inner() == id));
        // The tab tools act on; a running tool holds the lock: keep what
        // is shown until it is done.
        let active = match self.live.tabs.try_lock() {
            Ok(tabs) => tabs.active.as_ref().map(|a| a.inner().clone()),
            Err(_) => cast.as_ref().map(|c| c.page.target_id().inner().clone()),
        };
        let shown = active
            .filter(|a| targets.iter().any(|t| t.target_id.inner() == a))
            .or_else(|| targets.first().map(|t| t.target_id.inner().clone()));
        let Some(shown) = shown else { return };
        // Chromium has one screencast per tab: another view of it (or a
        // task) that stopped it stopped this one's too. Started again.
        if cast
            .as_ref()
            .is_some_and(|c| c.stops != self.live.screencast_stops())
            && let Some(old) = cast.take()
        {
            old.abandon();
        }
        if cast
            .as_ref()
            .is_none_or(|c| c.page.target_id().inner() != &shown)
        {
            if let Some(old) = cast.take() {
                old.stop().await;
                self.live.screencast_stopped();
            }
            slot.clear();
            if let Ok(pages) = self.live.pages().await
                && let Some(page) = pages.into_iter().find(|p| p.target_id().inner() == &shown)
            {
                match Screencast::start(page, slot.clone(), enc).await {
                    Ok(mut c) => {
                        c.stops = self.live.screencast_stops();
                        *cast = Some(c);
                    }
                    Err(e) => {
                        self.error("browser_error", format!("cannot show the tab: {e}"))
                            .await;
                    }
                }
            }
        }
        let loading = cast
            .as_ref()
            .is_some_and(|c| c.loading.load(std::sync::atomic::Ordering::Relaxed));
        // A code typed lately (a site that takes it by GET) is no more
        // shown to viewers, a live link's included, than to the agent.
        let scrubbed = |text: &str| {
            let mut text = text.to_owned();
            self.live.scrub_codes(&mut text);
            text
        };
        let cut = |text: &str| scrubbed(&text.chars().take(MAX_PAGE_TEXT).collect::<String>());
        // A link's user sees the tab shown, not the session's other tabs.
        let link = matches!(self.viewer, Viewer::Link(_));
        let tabs: Vec<TabInfo> = targets
            .iter()
            .filter(|t| !link || t.target_id.inner() == &shown)
            .take(MAX_TABS_SHOWN)
            .map(|t| TabInfo {
                id: t.target_id.inner().clone(),
                url: cut(&t.url),
                title: cut(&t.title),
                active: t.target_id.inner() == &shown,
            })
            .collect();
        let current = tabs.iter().find(|t| t.active);
        let dialog = targets
            .iter()
            .find(|t| t.target_id.inner() == &shown)
            .and_then(|t| self.live.dialog_on(&t.target_id))
            .map(|d| app::api::live::DialogView {
                kind: d.kind.as_str().to_owned(),
                message: scrubbed(&d.message),
                default_prompt: d.default_prompt.as_deref().map(scrubbed),
            });
        let page = PageState {
            url: current.map(|t| t.url.clone()).unwrap_or_default(),
            title: current.map(|t| t.title.clone()).unwrap_or_default(),
            loading,
            tabs,
            dialog,
        };
        if last.as_ref() != Some(&page) {
            *last = Some(page.clone());
            self.send(ServerMsg::Page(page)).await;
        }
    }

    /// One text message from the browser.
    async fn on_text(&mut self, text: &str) {
        if text.len() > MAX_CLIENT_MESSAGE {
            self.error(
                "too_large",
                format!("messages are at most {MAX_CLIENT_MESSAGE} bytes; this one was dropped"),
            )
            .await;
            return;
        }
        let msg: ClientMsg = match serde_json::from_str(text) {
            Ok(m) => m,
            Err(e) => {
                self.error("bad_message", format!("message dropped: {e}"))
                    .await;
                return;
            }
        };
        if let super::limit::Admit::Drop { tell } =
            self.limit.admit(&msg, std::time::Instant::now())
        {
            metrics::counter!("cordon_live_input_dropped_total").increment(1);
            if tell {
                self.over_limit().await;
            }
            return;
        }
        let op = match &self.viewer {
            Viewer::Operator { op, .. } => op.clone(),
            Viewer::Link(link) => {
                let link = link.clone();
                return self.on_link_input(&link, msg).await;
            }
        };
        if !op.role.allows(Role::Operator) {
            self.refuse_viewer().await;
            return;
        }
        match msg {
            ClientMsg::TakeControl {} => {
                if let Err(e) = self
                    .state
                    .sessions
                    .take_control(&self.live, &op.id, &op.name)
                    .await
                {
                    self.error("internal", format!("cannot take control: {e}"))
                        .await;
                }
            }
            ClientMsg::ReleaseControl {} => {
                if self.holds_control()
                    && let Err(e) = self
                        .state
                        .sessions
                        .release_control(&self.live, Actor::Operator(op.id.clone()))
                        .await
                {
                    self.error("internal", format!("cannot hand control back: {e}"))
                        .await;
                }
            }
            input => {
                if !self.holds_control() {
                    self.error("not_in_control", "take control before driving the browser")
                        .await;
                    return;
                }
                self.queue(input).await;
            }
        }
    }

    /// A message from a live link's user: in a `control` link, pointer,
    /// wheel, keys and text run as the link's agent, unless an operator
    /// holds control; nothing else is taken (no navigation, tabs, resizing
    /// or control).
    async fn on_link_input(&mut self, link: &crate::live::link::Link, msg: ClientMsg) {
        // A dialog's answer is the pointer's too (a button of the page's);
        // OK is judged by the risk gate as the link's agent's.
        let input = matches!(
            msg,
            ClientMsg::Mouse { .. }
                | ClientMsg::Wheel { .. }
                | ClientMsg::Key { .. }
                | ClientMsg::Text { .. }
                | ClientMsg::Dialog { .. }
        );
        let refused = if link.mode != crate::live::link::LinkMode::Control {
            Some((
                "view_only",
                "this link is for watching; it does not drive the browser",
            ))
        } else if !input {
            Some((
                "forbidden",
                "a live link drives with the pointer and keyboard only (no navigation, tabs, resizing or control)",
            ))
        } else {
            None
        };
        if let Some((code, why)) = refused {
            self.error(code, why).await;
            if !self.refused_input_audited {
                self.refused_input_audited = true;
                let event = NewEvent::new(self.viewer.actor(), "live_link.refused")
                    .tenant(&self.live.tenant)
                    .session(self.live.id.as_str())
                    .params(json!({ "via": "live_link", "link": link.id, "why": code }))
                    .outcome(format!("denied: {code}"));
                if let Err(e) = self.state.store.audit_append(event).await {
                    tracing::error!(error = %format!("{e:#}"), "failed to audit a refused input");
                }
            }
            return;
        }
        if self.live.control().is_some() {
            self.error("operator_has_control", OPERATOR_HAS_CONTROL)
                .await;
            return;
        }
        self.queue(msg).await;
    }

    /// Turns an input message into tool calls and queues them for the
    /// input worker (a full queue drops the rest, and says so).
    async fn queue(&mut self, msg: ClientMsg) {
        match calls(msg) {
            Ok(calls) => {
                for call in calls {
                    // A release goes in whatever the queue holds (bounded):
                    // its press has gone down in the browser.
                    if is_release(&call) {
                        let queued =
                            tokio::time::timeout(RELEASE_WAIT, self.input.send(call)).await;
                        if !matches!(queued, Ok(Ok(()))) {
                            tracing::debug!("live view: a release could not be queued");
                        }
                        continue;
                    }
                    if self.input.try_send(call).is_err() {
                        // Said once a second at most: saying it for every
                        // message dropped would fill the viewer's queue.
                        let now = std::time::Instant::now();
                        if self
                            .busy_told
                            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
                        {
                            self.busy_told = Some(now);
                            self.error(
                                "busy",
                                "too much input at once; what did not fit was dropped",
                            )
                            .await;
                        }
                        return;
                    }
                }
            }
            Err(m) => self.error("bad_message", m).await,
        }
    }

    /// The view sends more than its limit: told (once a second, by the
    /// caller), and audited once per view.
    async fn over_limit(&mut self) {
        self.error(
            "rate_limited",
            format!(
                "too much input: at most {} pointer moves and wheel turns a second, and {} other events; what is over is dropped",
                super::limit::MOVES_PER_S,
                super::limit::ACTS_PER_S
            ),
        )
        .await;
        if !self.limited_audited {
            self.limited_audited = true;
            let event = NewEvent::new(self.viewer.actor(), "live.rate_limited")
                .tenant(&self.live.tenant)
                .session(self.live.id.as_str())
                .params(json!({ "via": self.viewer.surface().as_str() }))
                .outcome("denied: rate_limited");
            if let Err(e) = self.state.store.audit_append(event).await {
                tracing::error!(error = %format!("{e:#}"), "failed to audit a view over its limit");
            }
        }
    }

    /// A viewer sent input or asked for control: refused, and audited once
    /// per view.
    async fn refuse_viewer(&mut self) {
        self.error(
            "forbidden",
            "viewers may watch; taking control needs the operator role",
        )
        .await;
        if !self.refused_input_audited {
            self.refused_input_audited = true;
            let event = NewEvent::new(self.viewer.actor(), "operator.refused")
                .tenant(&self.live.tenant)
                .session(self.live.id.as_str())
                .params(json!({ "what": "drive a session", "why": "forbidden" }))
                .outcome("denied: forbidden");
            if let Err(e) = self.state.store.audit_append(event).await {
                tracing::error!(error = %format!("{e:#}"), "failed to audit a refused input");
            }
        }
    }
}

/// Whether `call` lets a button or a key up.
fn is_release(call: &ToolCall) -> bool {
    matches!(
        call.tool,
        Tool::Input(LiveInput::Mouse {
            kind: MouseKind::Up,
            ..
        }) | Tool::Input(LiveInput::Key { down: false, .. })
    )
}

/// A server message as a text frame.
fn text(msg: &ServerMsg) -> Message {
    Message::Text(serde_json::to_string(msg).unwrap_or_default().into())
}

/// Hands control back if its holder has not opened a view again within
/// [`RELEASE_AFTER`]: an operator who closed the tab does not block the
/// agent forever.
async fn release_later(state: AppState, live: Arc<RunningSession>, operator: String) {
    tokio::time::sleep(RELEASE_AFTER).await;
    if state.live.open_views(live.id.as_str(), &operator) == 0
        && live.control().is_some_and(|h| h.operator_id == operator)
        && let Err(e) = state.sessions.release_control(&live, Actor::System).await
    {
        tracing::error!(error = %e, "live view: cannot hand control back");
    }
}

/// A browser message as tool calls (a click is a press and a release).
/// Public only for the fuzz bench (`server/benches/fuzz/`), which feeds it
/// what `on_text` would after the size check and `serde_json`.
#[doc(hidden)]
pub fn calls(msg: ClientMsg) -> Result<Vec<ToolCall>, String> {
    let one = |t: Tool| Ok(vec![ToolCall::new(t)]);
    let button = |b: MouseButton| match b {
        MouseButton::None => Button::None,
        MouseButton::Left => Button::Left,
        MouseButton::Middle => Button::Middle,
        MouseButton::Right => Button::Right,
        MouseButton::Back => Button::Back,
        MouseButton::Forward => Button::Forward,
    };
    let url = |u: &str| TargetUrl::parse(u).map_err(|e| format!("cannot open that address: {e}"));
    match msg {
        ClientMsg::Mouse {
            action,
            x,
            y,
            button: b,
            buttons,
            click_count,
            modifiers,
        } => {
            let mouse = |kind, buttons| {
                ToolCall::new(Tool::Input(LiveInput::Mouse {
                    kind,
                    x,
                    y,
                    button: button(b),
                    buttons,
                    click_count: i64::from(click_count.max(u8::from(kind != MouseKind::Move))),
                    modifiers: i64::from(modifiers),
                }))
            };
            Ok(match action {
                MouseAction::Move => vec![mouse(MouseKind::Move, i64::from(buttons))],
                MouseAction::Down => vec![mouse(MouseKind::Down, i64::from(buttons))],
                MouseAction::Up => vec![mouse(MouseKind::Up, i64::from(buttons))],
                MouseAction::Click => vec![
                    mouse(MouseKind::Down, i64::from(buttons.max(1))),
                    mouse(MouseKind::Up, 0),
                ],
            })
        }
        ClientMsg::Wheel {
            x,
            y,
            dx,
            dy,
            modifiers,
        } => one(Tool::Input(LiveInput::Wheel {
            x,
            y,
            dx,
            dy,
            modifiers: i64::from(modifiers),
        })),
        ClientMsg::Key {
            action,
            key,
            code,
            modifiers,
        } => {
            if key.is_empty() || key.chars().count() > 32 || code.chars().count() > 32 {
                return Err("key and code are names of at most 32 characters".into());
            }
            one(Tool::Input(LiveInput::Key {
                down: action == KeyAction::Down,
                key,
                code,
                modifiers: i64::from(modifiers),
            }))
        }
        ClientMsg::Text { text } => {
            if text.is_empty() || text.chars().count() > MAX_TEXT_CHARS {
                return Err(format!("text must be 1–{MAX_TEXT_CHARS} characters"));
            }
            one(Tool::Input(LiveInput::Text(text)))
        }
        ClientMsg::Navigate { url: u } => one(Tool::Navigate {
            url: url(&u)?,
            wait: crate::cdp::WaitUntil::Load,
        }),
        ClientMsg::Back {} => one(Tool::Back),
        ClientMsg::Forward {} => one(Tool::Forward),
        ClientMsg::Reload {} => one(Tool::Reload),
        ClientMsg::TabOpen { url: u } => one(Tool::TabOpen {
            url: u.as_deref().map(url).transpose()?,
        }),
        ClientMsg::TabSwitch { id } => one(Tool::TabFocus { tab: id }),
        ClientMsg::TabClose { id } => one(Tool::TabClose { tab: id }),
        ClientMsg::Resize { width, height } => {
            one(Tool::Input(LiveInput::Resize(Viewport { width, height })))
        }
        ClientMsg::Dialog { accept, text } => {
            if text
                .as_ref()
                .is_some_and(|t| t.chars().count() > MAX_TEXT_CHARS)
            {
                return Err(format!(
                    "a prompt's text is at most {MAX_TEXT_CHARS} characters"
                ));
            }
            one(Tool::Dialog {
                accept,
                text,
                tab: None,
            })
        }
        ClientMsg::TakeControl {} | ClientMsg::ReleaseControl {} => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_click_is_a_press_and_a_release() {
        let c = calls(ClientMsg::Mouse {
            action: MouseAction::Click,
            x: 5.0,
            y: 6.0,
            button: MouseButton::Left,
            buttons: 0,
            click_count: 0,
            modifiers: 0,
        })
        .unwrap();
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(matches!(
            &c[0].tool,
            Tool::Input(LiveInput::Mouse {
                kind: MouseKind::Down,
                buttons: 1,
                click_count: 1,
                ..
            })
        ));
        assert!(matches!(
            &c[1].tool,
            Tool::Input(LiveInput::Mouse {
                kind: MouseKind::Up,
                buttons: 0,
                click_count: 1,
                ..
            })
        ));
    }

    #[test]
    fn bad_urls_keys_and_texts_are_refused_with_a_reason() {
        for msg in [
            ClientMsg::Navigate {
                url: "javascript:alert(1)".into(),
            },
            ClientMsg::Navigate {
                url: "file:///etc/passwd".into(),
            },
            ClientMsg::Key {
                action: KeyAction::Down,
                key: String::new(),
                code: String::new(),
                modifiers: 0,
            },
            ClientMsg::Key {
                action: KeyAction::Down,
                key: "k".repeat(33),
                code: String::new(),
                modifiers: 0,
            },
            ClientMsg::Text {
                text: String::new(),
            },
            ClientMsg::Text {
                text: "x".repeat(MAX_TEXT_CHARS + 1),
            },
        ] {
            let shown = format!("{msg:?}");
            let err = calls(msg).expect_err(&shown);
            assert!(!err.is_empty(), "{shown}");
        }
    }
}
