//! The session engine: registry, warm pool, lifecycle state machine
//! (starting → ready → closing → closed | failed), deadlines, idle timeout,
//! per-tenant and per-host limits, and the orphan reaper.

mod injection;
mod live;
mod pool;
mod reaper;
pub mod request;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use serde_json::json;

use crate::audit::{Actor, NewEvent};
use crate::config::{SandboxDriverSetting, Settings};
use crate::domain::{SessionId, TenantId};
use crate::egress::EgressGuard;
use crate::recording::Recorder;
use crate::sandbox::bwrap::BwrapDriver;
use crate::sandbox::process::ProcessDriver;
use crate::sandbox::{Driver, DriverKind};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::audit::now_ms;
use crate::store::sessions::SessionRow;

pub use injection::cookie_param;
pub use live::{LiveSession, Tabs};
pub use reaper::ReapReport;
pub use request::{CredentialMode, OpenRequest, OpenRequestError, Viewport};

/// Session settings, from [`Settings`].
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Warm browsers kept ready.
    pub pool_size: usize,
    /// Pause between a take and the replacement's start.
    pub pool_refill_delay: Duration,
    /// Default lifetime.
    pub deadline_default_s: u64,
    /// Longest lifetime.
    pub deadline_max_s: u64,
    /// Idle timeout.
    pub idle: Duration,
    /// Open sessions per tenant.
    pub max_per_tenant: usize,
    /// Open sessions on this host.
    pub max_total: usize,
    /// Bound of one tool call.
    pub tool_timeout: Duration,
    /// Checks run after injecting a domain's cookies.
    pub smoke_probes: BTreeMap<String, crate::config::SmokeProbe>,
    /// How long egress log rows are kept.
    pub egress_log_retention: Duration,
}

impl SessionConfig {
    /// Reads the session settings.
    pub fn from_settings(s: &Settings) -> Self {
        Self {
            pool_size: s.pool_size as usize,
            pool_refill_delay: Duration::from_millis(s.pool_refill_delay_ms),
            deadline_default_s: s.session_deadline_s,
            deadline_max_s: s.session_deadline_max_s,
            idle: Duration::from_secs(s.session_idle_s),
            max_per_tenant: s.max_sessions_per_tenant as usize,
            max_total: s.max_sessions as usize,
            tool_timeout: Duration::from_secs(s.tool_timeout_s),
            smoke_probes: s.smoke_probes.clone(),
            egress_log_retention: Duration::from_secs(s.egress_log_retention_days * 24 * 3600),
        }
    }
}

/// What opening or using a session can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No such session for this tenant.
    #[error("session not found")]
    NotFound,
    /// The session has ended.
    #[error("session is {state} ({reason})")]
    Gone {
        /// `closed` or `failed`.
        state: String,
        /// Why.
        reason: String,
    },
    /// A limit is reached.
    #[error("{message}")]
    Limit {
        /// Which.
        message: String,
        /// Seconds until a retry may succeed.
        retry_after_s: u64,
    },
    /// The request is invalid.
    #[error(transparent)]
    Invalid(#[from] OpenRequestError),
    /// The operator grant token was refused.
    #[error(transparent)]
    Grant(#[from] crate::grants::GrantError),
    /// The browser could not be started.
    #[error("the browser could not be started")]
    StartFailed(#[source] anyhow::Error),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The public face of a session.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionInfo {
    /// Id.
    pub session_id: String,
    /// State.
    pub state: String,
    /// `clean` or `operator`.
    pub credential_mode: String,
    /// Domains asked for.
    pub domains: Vec<String>,
    /// Recording mode.
    pub record: String,
    /// Viewport.
    pub viewport: Viewport,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub deadline_at: String,
    /// RFC 3339, once ended.
    pub closed_at: Option<String>,
    /// Why it ended.
    pub close_reason: Option<String>,
    /// A failure's message.
    pub error: Option<String>,
    /// Whether it came from the warm pool (only on open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_pool: Option<bool>,
    /// Operator mode, on open only: cookies injected per domain (counts,
    /// never values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected: Option<BTreeMap<String, usize>>,
    /// Operator mode, on open only: each configured smoke probe's result
    /// (`ok`, or what failed) for the injected domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoke: Option<BTreeMap<String, String>>,
}

impl SessionInfo {
    /// From a stored row.
    pub fn from_row(r: &SessionRow) -> Self {
        use crate::dashboard::rfc3339_ms;
        Self {
            session_id: r.id.clone(),
            state: r.state.clone(),
            credential_mode: r.credential_mode.clone(),
            domains: serde_json::from_str(&r.domains).unwrap_or_default(),
            record: r.record.clone(),
            viewport: Viewport {
                width: u32::try_from(r.viewport_w).unwrap_or_default(),
                height: u32::try_from(r.viewport_h).unwrap_or_default(),
            },
            created_at: rfc3339_ms(r.created_at),
            deadline_at: rfc3339_ms(r.deadline_at),
            closed_at: r.closed_at.map(rfc3339_ms),
            close_reason: r.close_reason.clone(),
            error: r.error.clone(),
            from_pool: None,
            injected: None,
            smoke: None,
        }
    }
}

#[derive(Default)]
struct Slots {
    total: usize,
    per_tenant: HashMap<TenantId, usize>,
}

pub(crate) struct Inner {
    store: Store,
    vault: crate::vault::Vault,
    driver: Arc<dyn Driver>,
    egress: EgressGuard,
    recorder: Recorder,
    cfg: SessionConfig,
    host: String,
    run_dir: PathBuf,
    live: std::sync::Mutex<HashMap<SessionId, Arc<LiveSession>>>,
    slots: std::sync::Mutex<Slots>,
    /// Sandboxes this process started and has not stopped (the reaper skips them).
    known: std::sync::Mutex<HashSet<String>>,
    /// Sessions being opened right now (the reaper skips them).
    opening: std::sync::Mutex<HashSet<String>>,
    pool: pool::Pool,
    shutdown: AtomicBool,
    /// How long `audit` screenshots are kept.
    retention: Duration,
}

impl Inner {
    fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    async fn dispose(&self, warm: pool::Warm) {
        if let Err(e) = self.driver.stop(&warm.sandbox).await {
            tracing::warn!(error = %format!("{e:#}"), "failed to stop a sandbox");
        }
        let _ = self.store.sandbox_stopped(&warm.sandbox.id).await;
        self.known
            .lock()
            .expect("known lock")
            .remove(&warm.sandbox.id);
        warm.egress.close().await;
    }
}

/// Sets the page's viewport (the window may be larger).
pub(crate) fn metrics_override(v: Viewport) -> SetDeviceMetricsOverrideParams {
    SetDeviceMetricsOverrideParams::new(i64::from(v.width), i64::from(v.height), 1.0, false)
}

/// The session engine; cheap to clone.
#[derive(Clone)]
pub struct SessionManager(Arc<Inner>);

/// How often deadlines, idle timeouts and crashed browsers are checked.
const TICK: Duration = Duration::from_millis(500);
/// How often the reaper runs after start.
const REAP_EVERY: Duration = Duration::from_secs(60);

impl SessionManager {
    /// Picks the driver, reaps what a previous run left behind, and starts
    /// the warm pool and the lifecycle ticker.
    pub async fn start(
        settings: &Settings,
        store: Store,
        egress: EgressGuard,
        vault: crate::vault::Vault,
    ) -> anyhow::Result<Self> {
        let chromium = settings.chromium_path.clone();
        let bwrap = || {
            BwrapDriver::probe(&chromium)?;
            BwrapDriver::new(chromium.clone())
        };
        let driver: Arc<dyn Driver> = match settings.sandbox_driver {
            SandboxDriverSetting::Process => Arc::new(ProcessDriver::new(chromium.clone())),
            SandboxDriverSetting::Exec => Arc::new(crate::sandbox::exec::ExecDriver::new(
                settings.exec_create.as_deref().unwrap_or_default(),
                settings.exec_destroy.as_deref().unwrap_or_default(),
            )?),
            SandboxDriverSetting::Bwrap => Arc::new(
                bwrap()
                    .context("sandbox_driver = \"bwrap\": bubblewrap cannot run sandboxes here")?,
            ),
            SandboxDriverSetting::Auto => match bwrap() {
                Ok(d) => Arc::new(d),
                Err(e) => {
                    tracing::warn!(
                        reason = %format!("{e:#}"),
                        "sandbox_driver = auto: bwrap is not usable here, using the process driver"
                    );
                    Arc::new(ProcessDriver::new(chromium.clone()))
                }
            },
        };
        let run_dir = settings.data_dir.join("run");
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("data_dir: cannot create {}", run_dir.display()))?;
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        let inner = Arc::new(Inner {
            store,
            vault,
            driver,
            egress,
            recorder: Recorder::new(&settings.data_dir),
            cfg: SessionConfig::from_settings(settings),
            host,
            run_dir,
            live: Default::default(),
            slots: Default::default(),
            known: Default::default(),
            opening: Default::default(),
            pool: Default::default(),
            shutdown: AtomicBool::new(false),
            retention: Duration::from_secs(settings.recording_retention_days * 24 * 3600),
        });
        let manager = Self(inner.clone());
        let report = manager.reap().await?;
        if report.sessions_closed + report.sandboxes_killed > 0 {
            tracing::info!(?report, "reaper: cleaned up after a previous run");
        }
        tokio::spawn(pool::refill_loop(inner.clone()));
        tokio::spawn(manager.clone().ticker());
        Ok(manager)
    }

    /// The driver in use.
    pub fn driver_kind(&self) -> DriverKind {
        self.0.driver.kind()
    }

    /// Warm browsers ready now.
    pub fn pool_ready(&self) -> usize {
        self.0.pool.len()
    }

    /// Warm browsers being started now.
    pub fn pool_starting(&self) -> usize {
        self.0.pool.starting()
    }

    /// Open sessions on this host.
    pub fn open_count(&self) -> usize {
        self.0.live.lock().expect("live lock").len()
    }

    /// The recorder (screenshots).
    pub fn recorder(&self) -> &Recorder {
        &self.0.recorder
    }

    /// Tool-call bound.
    pub fn tool_timeout(&self) -> Duration {
        self.0.cfg.tool_timeout
    }

    fn reserve(&self, tenant: &TenantId) -> Result<(), SessionError> {
        let mut slots = self.0.slots.lock().expect("slots lock");
        if slots.total >= self.0.cfg.max_total {
            return Err(SessionError::Limit {
                message: format!(
                    "this host runs its maximum of {} sessions",
                    self.0.cfg.max_total
                ),
                retry_after_s: 5,
            });
        }
        let mine = slots.per_tenant.get(tenant).copied().unwrap_or(0);
        if mine >= self.0.cfg.max_per_tenant {
            return Err(SessionError::Limit {
                message: format!(
                    "tenant {tenant} has its maximum of {} open sessions",
                    self.0.cfg.max_per_tenant
                ),
                retry_after_s: 5,
            });
        }
        slots.total += 1;
        *slots.per_tenant.entry(tenant.clone()).or_default() += 1;
        Ok(())
    }

    fn release(&self, tenant: &TenantId) {
        let mut slots = self.0.slots.lock().expect("slots lock");
        slots.total = slots.total.saturating_sub(1);
        if let Some(n) = slots.per_tenant.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                slots.per_tenant.remove(tenant);
            }
        }
    }

    /// Opens a session for the key's tenant.
    #[tracing::instrument(skip_all, fields(tenant.id = %owner.tenant))]
    pub async fn open(
        &self,
        owner: &ApiKeyOwner,
        req: OpenRequest,
    ) -> Result<SessionInfo, SessionError> {
        let deadline_s = req.validate(self.0.cfg.deadline_default_s, self.0.cfg.deadline_max_s)?;
        if self.0.shutting_down() {
            return Err(SessionError::Limit {
                message: "the server is shutting down".into(),
                retry_after_s: 5,
            });
        }
        self.reserve(&owner.tenant)?;
        let id = SessionId::generate();
        self.0
            .opening
            .lock()
            .expect("opening lock")
            .insert(id.to_string());
        let result = async {
            // The grant is checked (and a single-use one consumed) before
            // any browser starts, so losers of a race are refused at once.
            if req.credential_mode == CredentialMode::Operator {
                let domains = req.vault_domains()?;
                let token = req.grant_token.as_deref().unwrap_or_default();
                crate::grants::redeem(&self.0.store, owner, id.as_str(), token, &domains).await?;
            }
            self.open_reserved(owner, &req, &id, deadline_s).await
        }
        .await;
        self.0
            .opening
            .lock()
            .expect("opening lock")
            .remove(id.as_str());
        if result.is_err() {
            self.release(&owner.tenant);
        }
        result
    }

    async fn open_reserved(
        &self,
        owner: &ApiKeyOwner,
        req: &OpenRequest,
        id: &SessionId,
        deadline_s: u64,
    ) -> Result<SessionInfo, SessionError> {
        let inner = &self.0;
        let now = now_ms();
        let domains = serde_json::to_string(&req.domains).unwrap_or_else(|_| "[]".into());
        inner
            .store
            .audit_append(
                NewEvent::new(Actor::Agent(owner.key_id.clone()), "session.open")
                    .tenant(&owner.tenant)
                    .session(id.as_str())
                    .params(json!({
                        "credential_mode": req.credential_mode.as_str(),
                        "domains": req.domains,
                        "record": req.record.as_str(),
                        "deadline_s": deadline_s,
                        "viewport": req.viewport,
                    }))
                    .outcome("requested"),
            )
            .await?;
        let mut row = SessionRow {
            id: id.to_string(),
            tenant_id: owner.tenant.to_string(),
            api_key_id: Some(owner.key_id.clone()),
            state: "starting".into(),
            close_reason: None,
            error: None,
            credential_mode: req.credential_mode.as_str().into(),
            domains,
            record: req.record.as_str().into(),
            viewport_w: i64::from(req.viewport.width),
            viewport_h: i64::from(req.viewport.height),
            sandbox_id: None,
            host: inner.host.clone(),
            created_at: now,
            ready_at: None,
            closed_at: None,
            deadline_at: now + i64::try_from(deadline_s).unwrap_or(i64::MAX / 2) * 1000,
            last_activity_at: now,
        };
        inner.store.session_insert(&row).await?;
        let (warm, from_pool) = match inner.pool.take() {
            Some(w) if !w.conn.is_closed() => (w, true),
            stale => {
                if let Some(w) = stale {
                    inner.dispose(w).await;
                }
                match pool::start_browser(inner, "assigned").await {
                    Ok(w) => (w, false),
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "session open: browser start failed");
                        let msg = "the browser could not be started";
                        let _ = inner
                            .store
                            .session_end(id.as_str(), true, "start_failed", Some(msg), now)
                            .await;
                        let _ = inner
                            .store
                            .audit_append(
                                NewEvent::new(Actor::System, "session.open")
                                    .tenant(&owner.tenant)
                                    .session(id.as_str())
                                    .outcome("failed: browser start"),
                            )
                            .await;
                        return Err(SessionError::StartFailed(e));
                    }
                }
            }
        };
        let setup = async {
            let assign = async {
                inner
                    .store
                    .sandbox_assign(&warm.sandbox.id, id.as_str())
                    .await
                    .map_err(anyhow::Error::from)
            };
            let viewport = async {
                warm.page
                    .execute(metrics_override(req.viewport))
                    .await
                    .context("failed to set the viewport")
            };
            tokio::try_join!(assign, viewport)?;
            let injected = if req.credential_mode == CredentialMode::Operator {
                Some(injection::inject(inner, owner, id, req, &warm.page).await?)
            } else {
                None
            };
            inner
                .store
                .session_ready(id.as_str(), &warm.sandbox.id)
                .await?;
            anyhow::Ok(injected)
        }
        .await;
        let live = Arc::new(LiveSession::new(
            id.clone(),
            owner.tenant.clone(),
            req.record,
            req.viewport,
            row.deadline_at,
            warm,
        ));
        inner
            .live
            .lock()
            .expect("live lock")
            .insert(id.clone(), live.clone());
        if let Ok(Some((_, smoke))) = &setup
            && !smoke.is_empty()
        {
            // Off the open's critical path, but ahead of every tool call.
            let (locked, is_locked) = tokio::sync::oneshot::channel();
            tokio::spawn(injection::reset_to_blank(live, locked));
            let _ = is_locked.await;
        }
        let injected = match setup {
            Ok(injected) => injected,
            Err(e) => {
                self.end(
                    id,
                    "start_failed",
                    Some("the browser could not be prepared".into()),
                    Actor::System,
                )
                .await;
                return Err(SessionError::StartFailed(e));
            }
        };
        row.state = "ready".into();
        let mut info = SessionInfo::from_row(&row);
        info.from_pool = Some(from_pool);
        if let Some((counts, smoke)) = injected {
            info.injected = Some(counts);
            info.smoke = (!smoke.is_empty()).then_some(smoke);
        }
        Ok(info)
    }

    /// A live session of `tenant`; `Gone` if it has ended, `NotFound` if it
    /// never existed for this tenant.
    pub async fn get(&self, tenant: &TenantId, id: &str) -> Result<Arc<LiveSession>, SessionError> {
        let parsed: Option<SessionId> = id.parse().ok();
        if let Some(sid) = &parsed {
            let found = self.0.live.lock().expect("live lock").get(sid).cloned();
            if let Some(s) = found.filter(|s| &s.tenant == tenant) {
                return Ok(s);
            }
        }
        match parsed {
            Some(sid) => match self
                .0
                .store
                .session_get(tenant.as_str(), sid.as_str())
                .await?
            {
                Some(row)
                    if row.state == "closed" || row.state == "failed" || row.state == "closing" =>
                {
                    Err(SessionError::Gone {
                        state: row.state,
                        reason: row.close_reason.unwrap_or_else(|| "closing".into()),
                    })
                }
                // Starting on another request, or owned by a crashed run
                // the reaper has not seen yet.
                Some(_) | None => Err(SessionError::NotFound),
            },
            None => Err(SessionError::NotFound),
        }
    }

    /// The stored view of a session of `tenant`.
    pub async fn info(&self, tenant: &TenantId, id: &str) -> Result<SessionInfo, SessionError> {
        let sid: SessionId = id.parse().map_err(|_| SessionError::NotFound)?;
        let row = self
            .0
            .store
            .session_get(tenant.as_str(), sid.as_str())
            .await?
            .ok_or(SessionError::NotFound)?;
        Ok(SessionInfo::from_row(&row))
    }

    /// Closes a session at its owner's request.
    pub async fn close(&self, owner: &ApiKeyOwner, id: &str) -> Result<SessionInfo, SessionError> {
        let live = self.get(&owner.tenant, id).await?;
        self.end(&live.id, "client", None, Actor::Agent(owner.key_id.clone()))
            .await;
        self.info(&owner.tenant, id).await
    }

    /// Marks a session failed because its browser is gone, and stops it.
    pub async fn fail(&self, id: &SessionId, reason: &str, error: &str) {
        self.end(id, reason, Some(error.to_owned()), Actor::System)
            .await;
    }

    /// Ends a live session: audit, stop the sandbox, keep or drop screenshots,
    /// record the outcome. Safe to call twice (the second does nothing).
    async fn end(&self, id: &SessionId, reason: &str, error: Option<String>, actor: Actor) {
        let inner = &self.0;
        let Some(live) = inner.live.lock().expect("live lock").remove(id) else {
            return;
        };
        let failed = error.is_some();
        let _ = inner.store.session_closing(id.as_str()).await;
        if let Err(e) = inner
            .store
            .audit_append(
                NewEvent::new(actor, "session.close")
                    .tenant(&live.tenant)
                    .session(id.as_str())
                    .params(json!({ "reason": reason }))
                    .outcome("requested"),
            )
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a session close");
        }
        // Wait for a running tool call to let go of the tabs, but not forever.
        let _tabs = tokio::time::timeout(Duration::from_secs(2), live.tabs.lock()).await;
        if let Err(e) = inner.driver.stop(&live.sandbox).await {
            tracing::error!(error = %format!("{e:#}"), sandbox.id = %live.sandbox.id, "failed to stop a sandbox");
        }
        inner
            .known
            .lock()
            .expect("known lock")
            .remove(&live.sandbox.id);
        if let Some(egress) = live.egress.lock().await.take() {
            egress.close().await;
        }
        let _ = inner.store.sandbox_stopped(&live.sandbox.id).await;
        if let Err(e) = inner
            .recorder
            .finish(live.record, live.tenant.as_str(), id.as_str())
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to remove transient screenshots");
        }
        if let Err(e) = inner
            .store
            .session_end(
                id.as_str(),
                failed,
                reason,
                error.as_deref(),
                live.last_activity(),
            )
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to record a session's end");
        }
        self.release(&live.tenant);
        metrics::counter!("cordon_sessions_closed_total", "reason" => reason.to_owned())
            .increment(1);
    }

    /// Closes sessions past their deadline or idle timeout, fails those
    /// whose browser died, runs the reaper every minute and the screenshot
    /// GC every hour.
    async fn ticker(self) {
        let mut since_reap = Duration::ZERO;
        let mut since_gc = Duration::from_secs(3600);
        while !self.0.shutting_down() {
            tokio::time::sleep(TICK).await;
            let now = now_ms();
            let idle_ms = i64::try_from(self.0.cfg.idle.as_millis()).unwrap_or(i64::MAX);
            let sessions: Vec<Arc<LiveSession>> = self
                .0
                .live
                .lock()
                .expect("live lock")
                .values()
                .cloned()
                .collect();
            for s in sessions {
                if s.browser_gone() {
                    self.fail(&s.id, "browser_exited", "the browser exited unexpectedly")
                        .await;
                } else if now >= s.deadline_at {
                    self.end(&s.id, "deadline", None, Actor::System).await;
                } else if now - s.last_activity() >= idle_ms {
                    self.end(&s.id, "idle", None, Actor::System).await;
                }
            }
            since_reap += TICK;
            if since_reap >= REAP_EVERY {
                since_reap = Duration::ZERO;
                if let Err(e) = self.reap().await {
                    tracing::error!(error = %format!("{e:#}"), "reaper failed");
                }
                match crate::grants::gc(&self.0.store).await {
                    Ok((0, 0)) => {}
                    Ok((tokens, requests)) => {
                        tracing::info!(tokens, requests, "grants: expired rows collected")
                    }
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "grant GC failed"),
                }
            }
            since_gc += TICK;
            if since_gc >= Duration::from_secs(3600) {
                since_gc = Duration::ZERO;
                match self.0.recorder.gc(self.retention()).await {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(removed = n, "recording: expired screenshot folders removed")
                    }
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "recording GC failed"),
                }
                let keep_ms =
                    i64::try_from(self.0.cfg.egress_log_retention.as_millis()).unwrap_or(i64::MAX);
                match self.0.store.egress_prune(now.saturating_sub(keep_ms)).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "egress log: expired rows removed"),
                    Err(e) => tracing::error!(error = %format!("{e:#}"), "egress log GC failed"),
                }
            }
        }
    }

    fn retention(&self) -> Duration {
        self.0.retention
    }

    /// Kills every browser this manager runs, at once and without waiting
    /// (SIGKILL to each process group). For a process that is going away
    /// without a graceful shutdown, such as a test that panicked.
    pub fn kill_all_now(&self) {
        self.0.shutdown.store(true, Ordering::SeqCst);
        let mut sandboxes: Vec<crate::sandbox::Sandbox> = self
            .0
            .live
            .lock()
            .expect("live lock")
            .values()
            .map(|s| s.sandbox.clone())
            .collect();
        sandboxes.extend(self.0.pool.drain().into_iter().map(|w| w.sandbox));
        for sb in sandboxes {
            if let Some(pid) = sb.pid
                && crate::sandbox::is_alive(pid, &sb.marker)
            {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    /// Stops everything: open sessions (reason `shutdown`) and the warm pool.
    pub async fn shutdown(&self) {
        self.0.shutdown.store(true, Ordering::SeqCst);
        self.0.pool.wake.notify_one();
        let ids: Vec<SessionId> = self
            .0
            .live
            .lock()
            .expect("live lock")
            .keys()
            .cloned()
            .collect();
        for id in ids {
            self.end(&id, "shutdown", None, Actor::System).await;
        }
        // Let browsers that are still starting finish, then stop them too.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.0.pool.starting() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for warm in self.0.pool.drain() {
            self.0.dispose(warm).await;
        }
    }
}
