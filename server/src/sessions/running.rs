//! A running session: its browser, its tabs, its activity clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use tokio::sync::Mutex;

use crate::cdp::{BrowserConn, CdpError};
use crate::domain::{SessionId, TenantId};
use crate::egress::{EgressListener, Refusals};
use crate::recording::RecordMode;
use crate::sandbox::Sandbox;
use crate::time::now_ms;

use super::request::{CredentialMode, Viewport};

/// The operator driving a session from the live view; agent tool calls are
/// refused meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlHolder {
    /// `op_…`.
    pub operator_id: String,
    /// Their login name (shown to the agent and on the page).
    pub name: String,
    /// Unix ms.
    pub since: i64,
}

/// Per-session browser state that tool calls share; holding its lock
/// serialises tool calls on one session.
#[derive(Default)]
pub struct Tabs {
    /// The tab tools act on (the first page when unset or closed).
    pub active: Option<TargetId>,
    /// Refs from the last snapshot.
    pub refs: HashMap<String, BackendNodeId>,
}

/// One open session.
pub struct RunningSession {
    /// Id.
    pub id: SessionId,
    /// Owner.
    pub tenant: TenantId,
    /// Recording mode.
    pub record: RecordMode,
    /// Clean, operator (injected) or refresh.
    pub mode: CredentialMode,
    /// Domains asked for (operator and refresh modes).
    pub domains: Vec<String>,
    viewport: std::sync::Mutex<Viewport>,
    /// Who holds control from the live view (none: the agent drives).
    control: tokio::sync::watch::Sender<Option<ControlHolder>>,
    control_changes: AtomicU64,
    /// Unix ms after which it is closed.
    pub deadline_at: i64,
    last_activity: AtomicI64,
    pub(super) last_move_audited: AtomicI64,
    pub(super) last_wheel_audited: AtomicI64,
    screenshot_seq: AtomicU64,
    /// Screencasts stopped (a tab has one; whoever else used it restarts).
    screencast_stops: AtomicU64,
    /// The sandbox running its browser.
    pub sandbox: Sandbox,
    /// Its id as drawn (`sandbox.id` is its text, for the driver).
    pub sandbox_id: crate::domain::SandboxId,
    pub(super) conn: BrowserConn,
    pub(super) egress: Mutex<Option<EgressListener>>,
    /// What its egress listener refused lately.
    pub(super) refusals: Refusals,
    /// Tab state; lock it for the duration of a tool call.
    pub tabs: Mutex<Tabs>,
    /// One acting call of an agent at a time, from the risk gate's check
    /// to the end of its action (`tool::pipeline`): no other call of the
    /// session can move the focus or the page between what the gate
    /// judged and what the action does. Let go while an approval waits.
    pub(super) acting: std::sync::Arc<Mutex<()>>,
    /// Its downloads, when it allows them.
    pub downloads: Option<std::sync::Arc<super::files::Downloads>>,
    /// Numbers each `upload` call's folder.
    upload_seq: AtomicU64,
    /// Scripts every new tab gets before its first page (operator mode's
    /// stored localStorage); set once after injection.
    init_scripts: std::sync::Mutex<Vec<super::injection::InitScript>>,
    /// The risk gate's last approval of raw input (`run_task`'s double
    /// clicks and drags are several events at one point): what was
    /// approved, where, and when.
    pub(super) input_approval: std::sync::Mutex<Option<InputApproval>>,
    /// Hosts outside `domains` an operator let the agent go to (an
    /// approved off-list navigation): the navigation guard loads them.
    allowed_hosts: std::sync::Mutex<std::collections::HashSet<String>>,
    /// CDP clients connected now (`sessions::cdp`).
    pub(super) cdp_clients: std::sync::atomic::AtomicUsize,
    /// Operator mode: the grant allowed CDP (`cdp: true`).
    pub cdp_granted: bool,
    /// A refresh session: the operator who started it. Nobody else
    /// watches, drives or saves it.
    refresh_operator: Option<String>,
    /// Operator mode: the grant allowed typing TOTP codes (`totp: true`).
    pub totp_granted: bool,
    /// Operator mode: the grant token it was opened with and when that
    /// expires (Unix ms). The session ends when the grant is revoked or
    /// expires (`lifecycle.rs`).
    pub grant: Option<(crate::domain::GrantTokenId, i64)>,
    /// Codes `type_totp` typed, kept until they are worthless so that no
    /// tool answer shows them (`tool/totp.rs`).
    pub(super) typed_codes: std::sync::Mutex<Vec<super::tool::TypedCodeMark>>,
}

/// An operator's approval of an agent's raw input at a point, which the
/// rest of the same gesture shares: a click's up, a double click's second
/// down and up (the same facts at the same point, within seconds, each
/// event once, the click count going up). Another click, however soon,
/// is judged, and waits, anew.
#[derive(Debug, Clone)]
pub(super) struct InputApproval {
    /// The approved assessment's reasons.
    pub reasons: Vec<String>,
    /// What the gate saw (`tool::gate::seen`).
    pub seen: serde_json::Value,
    /// The point, CSS pixels.
    pub at: (f64, f64),
    /// When it was approved.
    pub when: std::time::Instant,
    /// The click count of the gesture's latest button down.
    pub last_down: i64,
    /// How many more events may share it.
    pub left: i64,
}

/// A raw button going down or up: where, which, and its click count.
#[derive(Debug, Clone, Copy)]
pub(super) struct Gesture {
    /// CSS pixels.
    pub at: (f64, f64),
    /// Down (true) or up.
    pub down: bool,
    /// 1, 2 (a double click's second), …
    pub clicks: i64,
}

impl Gesture {
    /// The events of a gesture that may follow this one under its
    /// approval: up to a double click's (down, up, down, up).
    fn rest(self) -> i64 {
        const MOST_CLICKS: i64 = 2;
        (2 * (MOST_CLICKS - self.clicks) + i64::from(self.down)).max(0)
    }
}

impl RunningSession {
    pub(super) fn new(
        id: SessionId,
        tenant: TenantId,
        req: &super::OpenRequest,
        deadline_at: i64,
        warm: super::pool::Warm,
        downloads: Option<std::sync::Arc<super::files::Downloads>>,
    ) -> Self {
        Self {
            id,
            tenant,
            record: req.record,
            mode: req.credential_mode,
            domains: req.domains.clone(),
            viewport: std::sync::Mutex::new(req.viewport),
            control: tokio::sync::watch::Sender::new(None),
            control_changes: AtomicU64::new(0),
            deadline_at,
            last_activity: AtomicI64::new(now_ms()),
            last_move_audited: AtomicI64::new(0),
            last_wheel_audited: AtomicI64::new(0),
            screenshot_seq: AtomicU64::new(0),
            screencast_stops: AtomicU64::new(0),
            acting: std::sync::Arc::default(),
            tabs: Mutex::new(Tabs {
                active: Some(warm.page.target_id().clone()),
                refs: HashMap::new(),
            }),
            sandbox: warm.sandbox,
            sandbox_id: warm.sandbox_id,
            conn: warm.conn,
            refusals: warm.egress.refusals(),
            egress: Mutex::new(Some(warm.egress)),
            init_scripts: std::sync::Mutex::default(),
            input_approval: std::sync::Mutex::default(),
            allowed_hosts: std::sync::Mutex::default(),
            cdp_clients: std::sync::atomic::AtomicUsize::new(0),
            cdp_granted: req.cdp_granted,
            refresh_operator: req.refresh_operator.clone(),
            totp_granted: req.totp_granted,
            grant: req.grant.clone(),
            typed_codes: std::sync::Mutex::new(Vec::new()),
            downloads,
            upload_seq: AtomicU64::new(0),
        }
    }

    /// Whether an operator approved `assessment` for raw input at (about)
    /// `at` in the last few seconds: the other events of one gesture (a
    /// double click's four, a click's up) share its approval.
    /// Uses up one event of it when it does.
    pub(super) fn shares_input_approval(
        &self,
        assessment: &crate::policy::Assessment,
        seen: &serde_json::Value,
        g: Gesture,
    ) -> bool {
        const SAME_GESTURE: std::time::Duration = std::time::Duration::from_secs(5);
        let mut approval = self.input_approval.lock().expect("approval lock");
        let Some(a) = approval.as_mut() else {
            return false;
        };
        let shares = a.reasons == assessment.reasons
            && a.seen == *seen
            && (a.at.0 - g.at.0).abs() <= 4.0
            && (a.at.1 - g.at.1).abs() <= 4.0
            && a.when.elapsed() < SAME_GESTURE
            && a.left > 0
            && (!g.down || g.clicks > a.last_down);
        if shares {
            a.left -= 1;
            if g.down {
                a.last_down = g.clicks;
            }
        }
        shares
    }

    /// Whether a tab's main frame may load `host`: the session's domains
    /// cover it, an operator approved going there, or an operator holds
    /// control (the person drives).
    pub(super) fn may_load(&self, host: &str) -> bool {
        self.domains
            .iter()
            .any(|d| crate::policy::assess::covered(host, d))
            || self.control().is_some()
            || self
                .allowed_hosts
                .lock()
                .expect("hosts lock")
                .contains(&host.to_ascii_lowercase())
    }

    /// Lets the navigation guard load `host` (an approved off-list action).
    pub(super) fn allow_host(&self, host: &str) {
        self.allowed_hosts
            .lock()
            .expect("hosts lock")
            .insert(host.trim_matches(['[', ']']).to_ascii_lowercase());
    }

    /// Whether `operator_id` may watch, drive and save this session: any
    /// operator in scope may any other session; a refresh session is its
    /// operator's alone (another operator is told it does not exist).
    pub fn open_to(&self, operator_id: &str) -> bool {
        self.mode != super::CredentialMode::Refresh
            || self.refresh_operator.as_deref() == Some(operator_id)
    }

    /// Records an operator's approval of raw input at `at`.
    pub(super) fn remember_input_approval(
        &self,
        assessment: &crate::policy::Assessment,
        seen: &serde_json::Value,
        g: Gesture,
    ) {
        *self.input_approval.lock().expect("approval lock") = Some(InputApproval {
            reasons: assessment.reasons.clone(),
            seen: seen.clone(),
            at: g.at,
            when: std::time::Instant::now(),
            last_down: g.clicks,
            left: g.rest(),
        });
    }

    /// Counts a screencast stopped on one of its tabs: Chromium has one
    /// per tab, so another user of it (a task's pictures) starts it again.
    pub fn screencast_stopped(&self) {
        self.screencast_stops.fetch_add(1, Ordering::SeqCst);
    }

    /// Screencasts stopped so far.
    pub fn screencast_stops(&self) -> u64 {
        self.screencast_stops.load(Ordering::SeqCst)
    }

    /// The page's viewport now (the live view may resize it).
    pub fn viewport(&self) -> Viewport {
        *self.viewport.lock().expect("viewport lock")
    }

    /// Records a new viewport (after the page was resized).
    pub(super) fn set_viewport(&self, v: Viewport) {
        *self.viewport.lock().expect("viewport lock") = v;
    }

    /// The operator holding control, if any.
    pub fn control(&self) -> Option<ControlHolder> {
        self.control.borrow().clone()
    }

    /// Follows control changes.
    pub fn watch_control(&self) -> tokio::sync::watch::Receiver<Option<ControlHolder>> {
        self.control.subscribe()
    }

    /// Gives control to `holder` (or back to the agent with `None`);
    /// answers the previous holder.
    pub(super) fn set_control(&self, holder: Option<ControlHolder>) -> Option<ControlHolder> {
        self.control_changes.fetch_add(1, Ordering::SeqCst);
        self.control.send_replace(holder)
    }

    /// How many times control changed hands (a take and a hand-back
    /// quicker than a watcher looks still count).
    pub fn control_changes(&self) -> u64 {
        self.control_changes.load(Ordering::SeqCst)
    }

    /// Keeps the scripts injection installed on the first tab, for the
    /// tabs [`Self::open_tab`] opens later.
    pub(super) fn set_init_scripts(&self, scripts: Vec<super::injection::InitScript>) {
        *self.init_scripts.lock().expect("init scripts lock") = scripts;
    }

    /// Marks activity now (resets the idle timer).
    pub fn touch(&self) {
        self.last_activity.store(now_ms(), Ordering::Relaxed);
    }

    /// Whether an input sampled by `last` (a pointer move, a wheel turn)
    /// should be audited now: one a second at most.
    pub(super) fn sample(&self, last_audited: &AtomicI64) -> bool {
        let now = now_ms();
        let last = last_audited.load(Ordering::Relaxed);
        now - last >= 1000
            && last_audited
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Unix ms of the last tool call.
    pub fn last_activity(&self) -> i64 {
        self.last_activity.load(Ordering::Relaxed)
    }

    /// The next `upload` call's number (from 1).
    pub(super) fn next_upload_seq(&self) -> u64 {
        self.upload_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The next screenshot number (from 1).
    pub fn next_screenshot_seq(&self) -> u64 {
        self.screenshot_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether the browser connection has ended.
    pub fn browser_gone(&self) -> bool {
        self.conn.is_closed()
    }

    /// All open tabs (page targets), in creation order.
    pub async fn pages(&self) -> Result<Vec<Page>, CdpError> {
        if self.conn.is_closed() {
            return Err(CdpError::BrowserGone);
        }
        self.conn.pages().await
    }

    /// Every tab as Chromium describes it (URL, title, opener), in
    /// creation order.
    pub async fn tab_targets(
        &self,
    ) -> Result<Vec<chromiumoxide::cdp::browser_protocol::target::TargetInfo>, CdpError> {
        use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
        if self.conn.is_closed() {
            return Err(CdpError::BrowserGone);
        }
        let mut targets = self
            .conn
            .browser()
            .execute(GetTargetsParams::default())
            .await?
            .result
            .target_infos;
        targets.retain(|t| t.r#type == "page");
        // Chromium lists the newest first.
        targets.reverse();
        Ok(targets)
    }

    /// The active tab (falling back to the first open one).
    pub async fn page(&self, tabs: &mut Tabs) -> Result<Page, CdpError> {
        let pages = self.pages().await?;
        if let Some(active) = &tabs.active
            && let Some(p) = pages.iter().find(|p| p.target_id() == active)
        {
            return Ok(p.clone());
        }
        let first = pages
            .into_iter()
            .next()
            .ok_or_else(|| CdpError::NotFound("no tab is open".into()))?;
        tabs.active = Some(first.target_id().clone());
        tabs.refs.clear();
        Ok(first)
    }

    /// The JavaScript dialog open in tab `target`, if any.
    pub fn dialog_on(&self, target: &TargetId) -> Option<crate::cdp::Dialog> {
        self.conn.dialogs().open_on(target.inner())
    }

    /// The tabs with a JavaScript dialog open.
    pub fn dialog_tabs(&self) -> Vec<String> {
        self.conn.dialogs().open_tabs()
    }

    /// The browser's product and protocol versions (`Browser.getVersion`).
    pub async fn browser_version(
        &self,
    ) -> Result<chromiumoxide::cdp::browser_protocol::browser::GetVersionReturns, CdpError> {
        use chromiumoxide::cdp::browser_protocol::browser::GetVersionParams;
        if self.conn.is_closed() {
            return Err(CdpError::BrowserGone);
        }
        Ok(self
            .conn
            .browser()
            .execute(GetVersionParams::default())
            .await?
            .result)
    }

    /// The tab with target id `id` (whoever opened it: a CDP client's
    /// tabs too).
    pub async fn page_of(&self, id: &TargetId) -> Result<Page, CdpError> {
        self.pages()
            .await?
            .into_iter()
            .find(|p| p.target_id() == id)
            .ok_or_else(|| CdpError::TabNotFound(format!("no tab has id {}", id.inner())))
    }

    /// Opens a tab (optionally at `url`) and makes it active. The tab opens
    /// blank, lets its workers start ([`crate::cdp::release_new_targets`]),
    /// gets the init scripts, and only then loads `url`.
    pub async fn open_tab(&self, tabs: &mut Tabs, url: Option<&str>) -> Result<Page, CdpError> {
        let sources: Vec<AddScriptToEvaluateOnNewDocumentParams> = self
            .init_scripts
            .lock()
            .expect("init scripts lock")
            .iter()
            .map(super::injection::InitScript::params)
            .collect();
        let page = self.conn.new_page("about:blank").await?;
        for params in sources {
            page.execute(params).await?;
        }
        let v = self.viewport();
        crate::cdp::size_viewport(&page, v.width, v.height).await?;
        if let Some(url) = url {
            page.goto(url).await?;
        }
        tabs.active = Some(page.target_id().clone());
        tabs.refs.clear();
        Ok(page)
    }
}
