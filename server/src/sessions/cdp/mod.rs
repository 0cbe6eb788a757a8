//! The CDP endpoint's engine: a filtering proxy between one CDP client
//! (Playwright, Puppeteer, browser-use) and the session's browser, on a
//! connection of its own to the browser. Every command is parsed and
//! decided before it reaches Chromium (`rules.rs`); every event of an
//! operator-mode session loses its cookies before it reaches the client
//! (`seal.rs`). Commands that act are refused while an operator holds
//! control, judged by the risk gate like the tool API's (presses,
//! activation keys, typing, navigations), and audited as the agent with
//! `"via": "cdp"`. The web layer (`api::cdp`) only authenticates, upgrades
//! and pumps frames through two bounded channels.

mod rules;
mod seal;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::target::TargetId;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

pub use rules::{Act, Context, Verdict, decide, url_allowed};
pub use seal::{REDACTED, seal as seal_event};

use super::tool::{LiveInput, Tool, ToolError};
use super::{CredentialMode, LiveSession, SessionError, SessionManager};
use crate::audit::{Actor, NewEvent};
use crate::store::api_keys::ApiKeyOwner;

/// The largest message a client may send (a script, a page's content).
pub const MAX_CLIENT_MESSAGE: usize = 16 << 20;
/// CDP connections one session serves at once.
pub const MAX_CONNECTIONS: usize = 4;
/// Commands one connection may send in one second; more closes it.
pub const MAX_COMMANDS_PER_SECOND: u32 = 1_000;
/// How long a client may leave its messages unread before it is cut off.
pub const SLOW_CLIENT: Duration = Duration::from_secs(10);
/// Heavy commands (screenshots, PDFs, snapshots) of one connection the
/// browser may hold at once (sent, not yet answered): a client that floods
/// its tab with them waits for its own answers instead of queueing work in
/// front of the tool API's and the live view's. Other commands are not
/// held back (a client's setup sends dozens at once, some answered only
/// after a later one runs).
pub const MAX_IN_FLIGHT: usize = 8;

/// Whether a command is heavy for the renderer ([`MAX_IN_FLIGHT`]).
fn heavy(method: &str) -> bool {
    matches!(
        method,
        "Page.captureScreenshot" | "Page.printToPDF" | "Page.captureSnapshot"
    )
}

/// The id of a response as Chromium writes it (`{"id":12,…`).
fn response_id(text: &str) -> Option<u64> {
    let rest = text.strip_prefix("{\"id\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}
/// The most a client's unread messages may hold, KiB (64 MiB).
pub const MAX_UNREAD_KIB: u32 = 64 * 1024;

/// The way to the client: a bounded channel whose messages each hold a
/// share of a byte budget, so a client that does not read pins at most
/// [`MAX_UNREAD_KIB`] of memory and is cut off after [`SLOW_CLIENT`].
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Outgoing>,
    budget: Arc<tokio::sync::Semaphore>,
}

/// One message on its way to the client.
pub struct Outgoing {
    /// The JSON text.
    pub text: String,
    _share: tokio::sync::OwnedSemaphorePermit,
}

/// Why a message could not be queued.
enum Cut {
    /// The client left its messages unread too long.
    Slow,
    /// The client is gone.
    Closed,
}

/// A new way to the client, and its receiving end (for the web layer's
/// writer).
pub fn outbound() -> (Outbound, mpsc::Receiver<Outgoing>) {
    let (tx, rx) = mpsc::channel(1024);
    let budget = Arc::new(tokio::sync::Semaphore::new(MAX_UNREAD_KIB as usize));
    (Outbound { tx, budget }, rx)
}

impl Outbound {
    async fn send(&self, text: String) -> Result<(), Cut> {
        let kib = u32::try_from(text.len() / 1024 + 1)
            .unwrap_or(u32::MAX)
            .min(MAX_UNREAD_KIB);
        let deadline = tokio::time::Instant::now() + SLOW_CLIENT;
        let share = tokio::time::timeout_at(deadline, self.budget.clone().acquire_many_owned(kib))
            .await
            .map_err(|_| Cut::Slow)?
            .map_err(|_| Cut::Closed)?;
        tokio::time::timeout_at(
            deadline,
            self.tx.send(Outgoing {
                text,
                _share: share,
            }),
        )
        .await
        .map_err(|_| Cut::Slow)?
        .map_err(|_| Cut::Closed)
    }
}

/// A frame from the client.
#[derive(Debug)]
pub enum FromClient {
    /// A text frame (one CDP command).
    Text(String),
    /// A binary frame (not CDP).
    Binary,
    /// A frame over [`MAX_CLIENT_MESSAGE`].
    TooLarge,
}

/// How a connection ended: the WebSocket close code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closing {
    /// RFC 6455 close code.
    pub code: u16,
    /// Why (short, no secrets).
    pub reason: &'static str,
}

impl Closing {
    const fn new(code: u16, reason: &'static str) -> Self {
        Self { code, reason }
    }
}

/// A client's place on a session, given back when dropped.
pub struct Slot {
    session: Arc<LiveSession>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.session.cdp_clients.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slot {
    /// The session.
    pub fn session(&self) -> &Arc<LiveSession> {
        &self.session
    }
}

/// Why a CDP connection cannot start.
#[derive(Debug, thiserror::Error)]
pub enum CdpRefusal {
    /// The session cannot be reached (unknown, another tenant's, ended).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// An operator-mode session whose grant did not ask for CDP.
    #[error(
        "this session carries logins from the vault and its grant did not allow CDP: ask for the grant with \"cdp\": true"
    )]
    NotGranted,
    /// [`MAX_CONNECTIONS`] clients are connected already.
    #[error("this session already serves {MAX_CONNECTIONS} CDP connections; close one first")]
    TooMany,
}

/// What the connection knows while it runs.
struct Conn {
    session: Arc<LiveSession>,
    owner: ApiKeyOwner,
    actor: Actor,
    ctx: Context,
    /// CDP session id → (target id, target type), from the browser's
    /// `Target.attachedToTarget` events.
    targets: Arc<std::sync::Mutex<HashMap<String, (String, String)>>>,
    /// Scripts already audited on this connection (SHA-256).
    scripts: HashSet<String>,
    /// Commands by outcome, for the `cdp.disconnected` row.
    counts: HashMap<&'static str, u64>,
    /// Each CDP session's last mouse event, when it was a move: its point.
    pointer: HashMap<String, (f64, f64)>,
}

/// What to do with one client message.
enum Step {
    /// Send it on; `Some(id)`: a heavy command ([`MAX_IN_FLIGHT`]).
    Forward(String, Option<u64>),
    Reply(String),
    /// A last answer (if any), then close.
    End(Option<String>, Closing),
}

/// A one-second window of commands.
struct Rate {
    since: Instant,
    seen: u32,
}

impl Rate {
    fn take(&mut self) -> bool {
        if self.since.elapsed() >= Duration::from_secs(1) {
            self.since = Instant::now();
            self.seen = 0;
        }
        self.seen += 1;
        self.seen <= MAX_COMMANDS_PER_SECOND
    }
}

impl SessionManager {
    /// A place for one more CDP client on the agent's session `id` (404 for
    /// another tenant's, a refresh session or an unknown one, like the
    /// tool API).
    pub async fn cdp_slot(&self, owner: &ApiKeyOwner, id: &str) -> Result<Slot, CdpRefusal> {
        let session = self.get(&owner.tenant, id).await?;
        if session.mode == CredentialMode::Operator && !session.cdp_granted {
            return Err(CdpRefusal::NotGranted);
        }
        let before = session.cdp_clients.fetch_add(1, Ordering::SeqCst);
        let slot = Slot { session };
        if before >= MAX_CONNECTIONS {
            return Err(CdpRefusal::TooMany);
        }
        Ok(slot)
    }

    /// Serves one CDP client until it leaves, the browser goes, or a rule
    /// cuts it off; answers how to close its WebSocket.
    pub async fn serve_cdp(
        &self,
        slot: Slot,
        owner: ApiKeyOwner,
        mut inbound: mpsc::Receiver<FromClient>,
        outbound: Outbound,
    ) -> Closing {
        let session = slot.session.clone();
        let Ok((mut up, mut down)) = crate::cdp::connect_raw(&session.sandbox.cdp_url).await else {
            return Closing::new(1011, "the session's browser is gone");
        };
        let sealed = session.mode == CredentialMode::Operator;
        let mut conn = Conn {
            ctx: Context {
                sealed,
                download_dir: session
                    .downloads
                    .as_ref()
                    .map(|_| session.sandbox.downloads().inside.display().to_string()),
            },
            actor: Actor::Agent(owner.key_id.clone()),
            owner,
            session: session.clone(),
            targets: Arc::default(),
            scripts: HashSet::new(),
            counts: HashMap::new(),
            pointer: HashMap::new(),
        };
        self.cdp_audit(&conn, "cdp.connected", json!({}), "ok")
            .await;
        let (targets, out) = (conn.targets.clone(), outbound.clone());
        let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
        let heavy_ids: Arc<std::sync::Mutex<HashSet<u64>>> = Arc::default();
        let (answered, answered_ids) = (in_flight.clone(), heavy_ids.clone());
        let mut from_browser = tokio::spawn(async move {
            while let Some(text) = down.next().await {
                if let Some(id) = response_id(&text)
                    && answered_ids.lock().expect("heavy ids").remove(&id)
                {
                    answered.add_permits(1);
                }
                track_targets(&text, &targets);
                let text = if sealed { seal::seal(text) } else { text };
                match out.send(text).await {
                    Ok(()) => {}
                    Err(Cut::Slow) => {
                        return Closing::new(1008, "the client left its messages unread");
                    }
                    Err(Cut::Closed) => return Closing::new(1000, "closed"),
                }
            }
            Closing::new(1011, "the session's browser is gone")
        });
        let mut rate = Rate {
            since: Instant::now(),
            seen: 0,
        };
        let closing = loop {
            tokio::select! {
                ended = &mut from_browser => {
                    break ended.unwrap_or(Closing::new(1011, "internal error"));
                }
                frame = inbound.recv() => {
                    let text = match frame {
                        None => break Closing::new(1000, "closed"),
                        Some(FromClient::Binary) => {
                            break Closing::new(1003, "CDP messages are JSON text frames");
                        }
                        Some(FromClient::TooLarge) => {
                            break Closing::new(1009, "message over 16 MiB");
                        }
                        Some(FromClient::Text(t)) => t,
                    };
                    if !rate.take() {
                        break Closing::new(1008, "over 1000 commands in one second");
                    }
                    match self.cdp_command(&mut conn, &text).await {
                        Step::Forward(t, Some(id)) => {
                            // Given back when its answer passes (above).
                            tokio::select! {
                                permit = in_flight.clone().acquire_owned() => match permit {
                                    Ok(p) => p.forget(),
                                    Err(_) => break Closing::new(1011, "internal error"),
                                },
                                ended = &mut from_browser => {
                                    break ended.unwrap_or(Closing::new(1011, "internal error"));
                                }
                                () = tokio::time::sleep(SLOW_CLIENT * 6) => {
                                    break Closing::new(1011, "the browser does not answer");
                                }
                            }
                            heavy_ids.lock().expect("heavy ids").insert(id);
                            if up.send(t).await.is_err() {
                                break Closing::new(1011, "the session's browser is gone");
                            }
                        }
                        Step::Forward(t, None) => {
                            if up.send(t).await.is_err() {
                                break Closing::new(1011, "the session's browser is gone");
                            }
                        }
                        Step::Reply(t) => {
                            if outbound.send(t).await.is_err() {
                                break Closing::new(1008, "the client left its messages unread");
                            }
                        }
                        Step::End(last, c) => {
                            if let Some(t) = last {
                                let _ = outbound.send(t).await;
                            }
                            break c;
                        }
                    }
                }
            }
        };
        from_browser.abort();
        up.close().await;
        let counts = std::mem::take(&mut conn.counts);
        self.cdp_audit(
            &conn,
            "cdp.disconnected",
            json!({ "commands": counts, "close_code": closing.code }),
            closing.reason,
        )
        .await;
        closing
    }

    /// Decides one client message.
    async fn cdp_command(&self, conn: &mut Conn, text: &str) -> Step {
        let Ok(msg) = serde_json::from_str::<Value>(text) else {
            return Step::Reply(error_reply(
                None,
                None,
                -32700,
                "Cordon: the message is not JSON",
            ));
        };
        let session_id = msg.get("sessionId").and_then(Value::as_str);
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            return Step::Reply(error_reply(
                None,
                session_id,
                -32600,
                "Cordon: each command needs an integer id",
            ));
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            return Step::Reply(error_reply(
                Some(id),
                session_id,
                -32600,
                "Cordon: each command needs a method",
            ));
        };
        let params = msg.get("params").unwrap_or(&Value::Null);
        // Where the client left the pointer in this tab before this event.
        let pointer = session_id.and_then(|s| conn.pointer.get(s).copied());
        if method == "Input.dispatchMouseEvent"
            && let Some(s) = session_id
        {
            let at = (params["x"].as_f64(), params["y"].as_f64());
            match (params["type"].as_str(), at) {
                (Some("mouseMoved"), (Some(x), Some(y))) => {
                    conn.pointer.insert(s.to_owned(), (x, y));
                }
                _ => {
                    conn.pointer.remove(s);
                }
            }
        }
        match decide(method, params, &conn.ctx) {
            Verdict::Pass => {
                *conn.counts.entry("passed").or_default() += 1;
                Step::Forward(text.to_owned(), heavy(method).then_some(id))
            }
            Verdict::Rewrite(p) => {
                *conn.counts.entry("rewritten").or_default() += 1;
                let mut msg = msg.clone();
                msg["params"] = p;
                Step::Forward(msg.to_string(), None)
            }
            Verdict::Refuse { rule, why } => {
                *conn.counts.entry("refused").or_default() += 1;
                self.cdp_audit(
                    conn,
                    &format!("cdp.{method}"),
                    json!({ "rule": rule }),
                    &format!("refused: {rule}"),
                )
                .await;
                Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!("Cordon refused {method} ({rule}): {why}"),
                ))
            }
            Verdict::CloseSession => {
                let closed = self.close(&conn.owner, conn.session.id.as_str()).await;
                let reply = match closed {
                    Ok(_) => json!({ "id": id, "result": {} }).to_string(),
                    Err(e) => error_reply(Some(id), session_id, -32000, &e.to_string()),
                };
                // The answer goes out before the socket closes.
                Step::End(Some(reply), Closing::new(1000, "the session was closed"))
            }
            Verdict::Act(act) => {
                let there = matches!(act, Act::Press { x, y } if pointer == Some((x, y)));
                self.cdp_act(conn, (id, method, session_id), act, there, text)
                    .await
            }
        }
    }

    /// A command that acts: control, the risk gate, the audit row.
    /// `there`: a press at the point the client's last move put the pointer
    /// (and, as clients await their moves, the page has handled the hover
    /// there): judged where it is, without moving again.
    async fn cdp_act(
        &self,
        conn: &mut Conn,
        (id, method, session_id): (u64, &str, Option<&str>),
        act: Act,
        there: bool,
        text: &str,
    ) -> Step {
        let session = conn.session.clone();
        if let Some(holder) = session.control() {
            *conn.counts.entry("refused").or_default() += 1;
            let e = ToolError::OperatorHasControl(holder.name);
            return Step::Reply(error_reply(
                Some(id),
                session_id,
                -32000,
                &format!("Cordon refused {method} ({}): {e}", e.code()),
            ));
        }
        let tab = session_id.and_then(|s| {
            let targets = conn.targets.lock().expect("targets lock");
            targets
                .get(s)
                .filter(|(_, kind)| kind == "page")
                .map(|(t, _)| TargetId::from(t.clone()))
        });
        let tool = match &act {
            Act::Press { x, y } if there => {
                Some(Tool::Click(super::tool::ElementTarget::Point(*x, *y)))
            }
            Act::Press { x, y } => Some(Tool::Input(LiveInput::Mouse {
                kind: crate::cdp::MouseKind::Down,
                x: *x,
                y: *y,
                button: crate::cdp::Button::Left,
                buttons: 1,
                click_count: 1,
                modifiers: 0,
            })),
            Act::Key(key) => Some(Tool::Press { key: key.clone() }),
            Act::Text(t) => Some(Tool::Type {
                text: t.clone(),
                target: None,
                submit: false,
            }),
            Act::Navigate(url) => {
                crate::domain::TargetUrl::parse(url)
                    .ok()
                    .map(|url| Tool::Navigate {
                        url,
                        wait: crate::cdp::WaitUntil::Load,
                    })
            }
            Act::OpenTab(Some(url)) => crate::domain::TargetUrl::parse(url)
                .ok()
                .map(|url| Tool::TabOpen { url: Some(url) }),
            _ => None,
        };
        let params = audit_params(method, &act);
        let event = NewEvent::new(conn.actor.clone(), format!("cdp.{method}"))
            .tenant(&session.tenant)
            .session(session.id.as_str())
            .params(params.clone());
        if let Some(tool) = &tool {
            // What acts on a tab needs that tab: a flattened session of a page.
            let needs_tab = !matches!(act, Act::OpenTab(_));
            if needs_tab && tab.is_none() {
                *conn.counts.entry("refused").or_default() += 1;
                return Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!(
                        "Cordon refused {method} (no_tab): input and navigation go to a tab's own session (attach with flatten: true)"
                    ),
                ));
            }
            if let Err(e) = self
                .gate_in_tab(&session, &conn.actor, tool, &event, tab.as_ref())
                .await
            {
                *conn.counts.entry("refused").or_default() += 1;
                return Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!("Cordon refused {method} ({}): {e}", e.code()),
                ));
            }
        }
        session.touch();
        *conn.counts.entry("acted").or_default() += 1;
        let audit = match &act {
            Act::Script(src) => conn.scripts.insert(sha256(src)),
            a => a.audited(),
        };
        if audit {
            self.cdp_audit(conn, &format!("cdp.{method}"), params, "ok")
                .await;
        }
        Step::Forward(text.to_owned(), None)
    }

    /// Appends a row about this connection (a failure is logged, never
    /// answered to the client).
    async fn cdp_audit(&self, conn: &Conn, action: &str, mut params: Value, outcome: &str) {
        params["via"] = json!(crate::audit::Surface::Cdp.as_str());
        let event = NewEvent::new(conn.actor.clone(), action)
            .tenant(&conn.session.tenant)
            .session(conn.session.id.as_str())
            .params(params)
            .outcome(outcome);
        if let Err(e) = self.0.store.audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a CDP command");
        }
    }
}

/// The audit row's parameters of an act: never typed text, a script or a
/// URL (which may carry tokens): lengths, hashes and hosts.
fn audit_params(method: &str, act: &Act) -> Value {
    let host = |url: &str| {
        url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
    };
    let mut p = match act {
        Act::Press { x, y } => json!({ "x": x, "y": y }),
        Act::Key(key) => json!({ "key": key }),
        Act::Text(t) => json!({ "text_len": t.chars().count() }),
        Act::Navigate(url) => json!({ "host": host(url) }),
        Act::OpenTab(url) => json!({ "host": url.as_deref().and_then(host) }),
        Act::Script(src) => json!({ "script_sha256": sha256(src), "script_len": src.len() }),
        Act::History | Act::Targets | Act::Motion | Act::Change => json!({}),
    };
    p["method"] = json!(method);
    p["via"] = json!(crate::audit::Surface::Cdp.as_str());
    p
}

fn sha256(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// A CDP error answer.
fn error_reply(id: Option<u64>, session_id: Option<&str>, code: i64, message: &str) -> String {
    let mut v = json!({ "error": { "code": code, "message": message } });
    if let Some(id) = id {
        v["id"] = json!(id);
    }
    if let Some(s) = session_id {
        v["sessionId"] = json!(s);
    }
    v.to_string()
}

/// Notes the browser's attach and detach events (which CDP session is
/// which tab).
fn track_targets(text: &str, targets: &std::sync::Mutex<HashMap<String, (String, String)>>) {
    let Some(method) = seal::event_method(text) else {
        return;
    };
    if method != "Target.attachedToTarget" && method != "Target.detachedFromTarget" {
        return;
    }
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let p = &v["params"];
    let Some(sid) = p["sessionId"].as_str() else {
        return;
    };
    let mut map = targets.lock().expect("targets lock");
    if method == "Target.attachedToTarget" {
        if let (Some(t), Some(kind)) = (
            p["targetInfo"]["targetId"].as_str(),
            p["targetInfo"]["type"].as_str(),
        ) {
            map.insert(sid.to_owned(), (t.to_owned(), kind.to_owned()));
        }
    } else {
        map.remove(sid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_and_detach_events_map_sessions_to_tabs() {
        let map = std::sync::Mutex::new(HashMap::new());
        track_targets(
            r#"{"method":"Target.attachedToTarget","params":{"sessionId":"S1","targetInfo":{"targetId":"T1","type":"page"},"waitingForDebugger":false}}"#,
            &map,
        );
        assert_eq!(
            map.lock().unwrap().get("S1"),
            Some(&("T1".to_owned(), "page".to_owned()))
        );
        track_targets(
            r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"S1"}}"#,
            &map,
        );
        assert!(map.lock().unwrap().is_empty());
    }

    #[test]
    fn audit_params_never_carry_text_scripts_or_urls() {
        let p = audit_params("Input.insertText", &Act::Text("hunter2".into()));
        assert_eq!(p["text_len"], 7);
        assert!(!p.to_string().contains("hunter2"));
        let p = audit_params(
            "Page.navigate",
            &Act::Navigate("https://a.example/x?token=SECRET".into()),
        );
        assert_eq!(p["host"], "a.example");
        assert!(!p.to_string().contains("SECRET"));
        let p = audit_params("Runtime.evaluate", &Act::Script("secret()".into()));
        assert_eq!(p["script_len"], 8);
        assert!(!p.to_string().contains("secret()"));
        assert_eq!(p["via"], "cdp");
    }

    #[test]
    fn errors_keep_the_commands_id_and_session() {
        let e: Value =
            serde_json::from_str(&error_reply(Some(3), Some("S"), -32000, "no")).unwrap();
        assert_eq!(e["id"], 3);
        assert_eq!(e["sessionId"], "S");
        assert_eq!(e["error"]["code"], -32000);
        let e: Value = serde_json::from_str(&error_reply(None, None, -32700, "bad")).unwrap();
        assert!(e.get("id").is_none());
    }

    #[test]
    fn heavy_commands_and_response_ids_are_recognised() {
        assert!(heavy("Page.captureScreenshot") && heavy("Page.printToPDF"));
        assert!(!heavy("Page.enable") && !heavy("Runtime.evaluate"));
        assert_eq!(response_id(r#"{"id":42,"result":{}}"#), Some(42));
        assert_eq!(response_id(r#"{"method":"Page.loadEventFired"}"#), None);
        assert_eq!(response_id(r#"{"id":}"#), None);
    }

    #[test]
    fn a_burst_over_the_rate_is_cut() {
        let mut r = Rate {
            since: Instant::now(),
            seen: 0,
        };
        let passed = (0..2_000).filter(|_| r.take()).count();
        assert_eq!(passed, MAX_COMMANDS_PER_SECOND as usize);
    }
}
