//! The session engine: registry, warm pool, lifecycle state machine
//! (starting → ready → closing → closed | failed), deadlines, idle timeout,
//! per-tenant and per-host limits, and the orphan reaper.

pub mod cdp;
mod codes;
mod control;
pub mod files;
pub mod harvest;
mod injection;
mod lifecycle;
mod live;
mod navguard;
mod open;
mod pool;
mod reaper;
pub mod request;
pub mod tool;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;

use crate::audit::Actor;
use crate::domain::{CloseReason, SessionId, SessionState, TenantId};
use crate::egress::EgressGuard;
use crate::recording::Recorder;
use crate::sandbox::{Driver, DriverKind};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::sessions::SessionRow;

pub use harvest::{
    CookieMeta, CredentialDiff, DomainPreview, DomainSaved, HarvestError, HarvestPreview,
    OriginKeys, SaveReport,
};
pub use injection::SmokeProbe;
pub use live::{ControlHolder, LiveSession, Tabs};
pub use reaper::ReapReport;
pub use request::{CredentialMode, DownloadPolicy, OpenRequest, OpenRequestError, Viewport};
pub use tool::{LiveInput, Tool, ToolCall, ToolError, ToolOutput};

/// Session settings, built by `config`.
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
    pub smoke_probes: BTreeMap<String, SmokeProbe>,
    /// Tenants' own session limits.
    pub tenant_limits: BTreeMap<String, crate::sandbox::limits::TenantLimits>,
    /// Largest download kept, bytes.
    pub download_max_bytes: u64,
    /// What one session's downloads may take together, bytes.
    pub download_session_max_bytes: u64,
    /// Largest total of one `upload` call, bytes.
    pub upload_max_bytes: u64,
    /// `upload` sends its files through the page, not the upload directory.
    pub upload_in_page: bool,
}

/// What starting the engine needs from the settings, built by `config`.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The sandbox driver's.
    pub sandbox: crate::sandbox::SandboxSettings,
    /// `session_limits`: enforce per-session limits through cgroups.
    pub enforce_limits: bool,
    /// The limits every session's sandbox gets (`session_*`).
    pub limits: crate::sandbox::limits::Limits,
    /// `data_dir`.
    pub data_dir: PathBuf,
    /// Where screenshots and kept downloads live (`shared_dir` or `data_dir`).
    pub files_dir: PathBuf,
    /// Whether `files_dir` is shared by replicas (`shared_dir`).
    pub shared_files: bool,
    /// This replica's name.
    pub replica_name: String,
    /// `recording_quota_mb`, in bytes.
    pub recording_quota_bytes: u64,
    /// The sessions' own settings.
    pub sessions: SessionConfig,
    /// The risk gate's.
    pub risk: crate::policy::RiskSettings,
}

/// What opening or using a session can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No such session for this tenant.
    #[error("session not found")]
    NotFound,
    /// The session has ended.
    #[error("session is {state} ({})", reason.map_or("closing", CloseReason::as_str))]
    Gone {
        /// `closing`, `closed` or `failed`.
        state: SessionState,
        /// Why (none while it is still closing).
        reason: Option<CloseReason>,
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
    pub state: SessionState,
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
    pub close_reason: Option<CloseReason>,
    /// A failure's message.
    pub error: Option<String>,
    /// Whether it came from the warm pool (only on open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_pool: Option<bool>,
    /// Whether its browser may download files (on open, and while it runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downloads: Option<DownloadPolicy>,
    /// Operator mode, on open only: cookies injected per domain (counts,
    /// never values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected: Option<BTreeMap<String, usize>>,
    /// Operator mode, on open only: localStorage items installed per
    /// domain (counts, never keys or values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected_storage: Option<BTreeMap<String, usize>>,
    /// Operator mode, on open only: each configured smoke probe's result
    /// (`ok`, or what failed) for the injected domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoke: Option<BTreeMap<String, String>>,
    /// Operator mode, on open only: domains asked for that the tenant has
    /// no stored credential for, so nothing was injected for them (present
    /// only when there are some).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_credentials: Vec<String>,
    /// The session's CDP WebSocket URL (`ws(s)://…/cdp/{id}`; send the
    /// API key as `Authorization: Bearer`, or get a single-use URL from
    /// `POST /api/sessions/{id}/cdp_token`), while it is open. Set by the
    /// web layer, which knows the address clients reach Cordon at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdp_url: Option<String>,
}

impl SessionInfo {
    /// From a stored row.
    pub fn from_row(r: &SessionRow) -> Self {
        use crate::time::rfc3339_ms;
        Self {
            session_id: r.id.clone(),
            state: r.state,
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
            close_reason: r.close_reason,
            error: r.error.clone(),
            from_pool: None,
            downloads: None,
            injected: None,
            injected_storage: None,
            smoke: None,
            missing_credentials: Vec::new(),
            cdp_url: None,
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
    /// How this host bounds each sandbox.
    limits: crate::sandbox::limits::Enforcer,
    egress: EgressGuard,
    recorder: Recorder,
    cfg: SessionConfig,
    host: String,
    run_dir: PathBuf,
    /// `<shared_dir or data_dir>/downloads`: each allowing session's finished downloads.
    downloads_root: PathBuf,
    live: std::sync::Mutex<HashMap<SessionId, Arc<LiveSession>>>,
    slots: std::sync::Mutex<Slots>,
    /// Sandboxes this process started and has not stopped (the reaper skips them).
    known: std::sync::Mutex<HashSet<String>>,
    /// Sessions being opened right now (the reaper skips them).
    opening: std::sync::Mutex<HashSet<String>>,
    /// Sessions being ended right now (out of `live`, not yet recorded as
    /// ended): the reaper skips them too.
    ending: std::sync::Mutex<HashSet<String>>,
    pool: pool::Pool,
    shutdown: AtomicBool,
    /// Every tenant's risk rules.
    policy: crate::policy::Policy,
    /// Agent actions waiting for an operator's decision.
    approvals: crate::policy::Approvals,
}

impl Inner {
    fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    async fn dispose(&self, warm: pool::Warm) {
        if let Err(e) = self.driver.stop(&warm.sandbox).await {
            tracing::warn!(error = %format!("{e:#}"), "failed to stop a sandbox");
        }
        if let Some(limits) = &warm.sandbox.limits {
            limits.remove().await;
        }
        if let Err(e) = self.store.sandbox_stopped(&warm.sandbox.id).await {
            tracing::error!(error = %format!("{e:#}"), sandbox.id = %warm.sandbox.id, "failed to record a sandbox's stop");
        }
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

impl SessionManager {
    /// Picks the driver, reaps what a previous run left behind, and starts
    /// the warm pool and the lifecycle ticker.
    pub async fn start(
        settings: &EngineSettings,
        store: Store,
        egress: EgressGuard,
        vault: crate::vault::Vault,
    ) -> anyhow::Result<Self> {
        let driver = crate::sandbox::build(&settings.sandbox).await?;
        let limits = if settings.enforce_limits {
            crate::sandbox::limits::Enforcer::detect(
                settings.limits,
                std::path::Path::new("/sys/fs/cgroup"),
            )
        } else {
            crate::sandbox::limits::Enforcer::disabled(settings.limits)
        };
        let status = limits.status();
        if status.memory && status.pids {
            tracing::info!(
                cgroups = status.cgroups,
                cpu = status.cpu,
                "per-session limits enforced"
            );
        } else {
            tracing::warn!(
                cgroups = status.cgroups,
                reason = status.reason.as_deref().unwrap_or_default(),
                "PER-SESSION LIMITS ARE NOT ENFORCED: one page can take this host's memory. \
                 Fix: run Cordon where it can create cgroups (the shipped systemd unit with \
                 Delegate=yes, root, or a container that owns its cgroup v2 subtree)"
            );
        }
        if driver.caps().remote && !settings.sessions.tenant_limits.is_empty() {
            tracing::warn!(
                driver = driver.kind().as_str(),
                "tenant_limits do not reach this sandbox driver (exec, kube): its sandboxes get the \
                 default limits (CORDON_LIMIT_*, a pod's memory limit), since warm sandboxes are made \
                 before their tenant is known"
            );
        }
        if driver.caps().devtools_open_locally {
            tracing::warn!(
                driver = driver.kind().as_str(),
                "sandbox driver \"process\": each browser's DevTools port is open to every local \
                 process, which could drive it and read an operator session's cookies; use bwrap \
                 on a shared host"
            );
        }
        let run_dir = settings.data_dir.join("run");
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("data_dir: cannot create {}", run_dir.display()))?;
        // Sessions and sandboxes are recorded under this replica's name.
        let host = settings.replica_name.clone();
        let approvals = crate::policy::Approvals::new(store.changes().clone());
        let inner = Arc::new(Inner {
            store,
            vault,
            driver,
            limits,
            egress,
            recorder: {
                let r = Recorder::with_quotas(
                    &settings.files_dir,
                    settings.recording_quota_bytes,
                    settings
                        .sessions
                        .tenant_limits
                        .iter()
                        .filter_map(|(t, l)| Some((t.clone(), l.recording_quota_mb? << 20)))
                        .collect(),
                );
                if settings.shared_files { r.shared() } else { r }
            },
            cfg: settings.sessions.clone(),
            host,
            run_dir,
            downloads_root: settings.files_dir.join("downloads"),
            live: Default::default(),
            slots: Default::default(),
            known: Default::default(),
            opening: Default::default(),
            ending: Default::default(),
            pool: Default::default(),
            shutdown: AtomicBool::new(false),
            policy: crate::policy::Policy::from_settings(&settings.risk),
            approvals,
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

    /// This control plane's host name (sessions and tasks are recorded
    /// with it).
    pub fn host(&self) -> &str {
        &self.0.host
    }

    /// The driver in use.
    pub fn driver_kind(&self) -> DriverKind {
        self.0.driver.kind()
    }

    /// What the driver in use can do.
    pub fn driver_caps(&self) -> crate::sandbox::Caps {
        self.0.driver.caps()
    }

    /// What this host enforces per session.
    pub fn limits_status(&self) -> crate::sandbox::limits::LimitsStatus {
        self.0.limits.status()
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

    /// Whether this replica runs session `id` (or is opening it).
    pub fn is_local(&self, id: &str) -> bool {
        let Ok(sid) = id.parse::<SessionId>() else {
            return false;
        };
        self.0.live.lock().expect("live lock").contains_key(&sid)
            || self.0.opening.lock().expect("opening lock").contains(id)
    }

    /// The recorder (screenshots).
    pub fn recorder(&self) -> &Recorder {
        &self.0.recorder
    }

    /// Tool-call bound.
    pub fn tool_timeout(&self) -> Duration {
        self.0.cfg.tool_timeout
    }

    /// A live session of `tenant` as its agents see it; `Gone` if it has
    /// ended, `NotFound` if it never existed for this tenant. A refresh
    /// session is the operator's alone (an agent could read what the
    /// operator types, or point the login tab elsewhere before the save):
    /// to agents it does not exist, running or ended.
    pub async fn get(&self, tenant: &TenantId, id: &str) -> Result<Arc<LiveSession>, SessionError> {
        let parsed: Option<SessionId> = id.parse().ok();
        if let Some(sid) = &parsed {
            let found = self.0.live.lock().expect("live lock").get(sid).cloned();
            if let Some(s) = found.filter(|s| &s.tenant == tenant) {
                if s.mode == CredentialMode::Refresh {
                    return Err(SessionError::NotFound);
                }
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
                Some(row) if row.credential_mode == CredentialMode::Refresh.as_str() => {
                    Err(SessionError::NotFound)
                }
                Some(row) if row.state.is_ended() => Err(SessionError::Gone {
                    state: row.state,
                    reason: row.close_reason,
                }),
                // Starting on another request, or owned by a crashed run
                // the reaper has not seen yet.
                Some(_) | None => Err(SessionError::NotFound),
            },
            None => Err(SessionError::NotFound),
        }
    }

    /// The stored view of a session of `tenant`, as its agents see it (a
    /// refresh session is not theirs: `NotFound`).
    pub async fn info(&self, tenant: &TenantId, id: &str) -> Result<SessionInfo, SessionError> {
        let sid: SessionId = id.parse().map_err(|_| SessionError::NotFound)?;
        let row = self
            .0
            .store
            .session_get(tenant.as_str(), sid.as_str())
            .await?
            .filter(|row| row.credential_mode != CredentialMode::Refresh.as_str())
            .ok_or(SessionError::NotFound)?;
        let mut info = SessionInfo::from_row(&row);
        // Known while it runs (the row does not keep it).
        info.downloads = self
            .0
            .live
            .lock()
            .expect("live lock")
            .get(&sid)
            .map(|live| match live.downloads {
                Some(_) => DownloadPolicy::Allow,
                None => DownloadPolicy::Deny,
            });
        Ok(info)
    }

    /// Closes a session at its owner's request.
    pub async fn close(&self, owner: &ApiKeyOwner, id: &str) -> Result<SessionInfo, SessionError> {
        let live = self.get(&owner.tenant, id).await?;
        self.end(
            &live.id,
            CloseReason::Client,
            None,
            Actor::Agent(owner.key_id.clone()),
        )
        .await;
        self.info(&owner.tenant, id).await
    }

    /// Ends a running session of any tenant at an operator's request
    /// (dashboard). `NotFound` if it never existed, `Gone` if it has ended
    /// or runs on another control plane.
    pub async fn end_by_operator(&self, id: &str, operator: &str) -> Result<(), SessionError> {
        let live = self.find_live(id).await?;
        self.end(
            &live.id,
            CloseReason::Operator,
            None,
            Actor::Operator(operator.to_owned()),
        )
        .await;
        Ok(())
    }

    /// Ends a refresh session whose login was saved (dashboard).
    pub async fn end_saved(&self, live: &LiveSession, operator: &str) {
        self.end(
            &live.id,
            CloseReason::Saved,
            None,
            Actor::Operator(operator.to_owned()),
        )
        .await;
    }

    /// Marks a session failed because its browser is gone, and stops it.
    pub async fn fail(&self, id: &SessionId, reason: CloseReason, error: &str) {
        self.end(id, reason, Some(error.to_owned()), Actor::System)
            .await;
    }
}
