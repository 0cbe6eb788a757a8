//! The session engine: registry, warm pool, lifecycle state machine
//! (starting → ready → closing → closed | failed), deadlines, idle timeout,
//! per-tenant and per-host limits, and the orphan reaper.
//!
//! `mod.rs` holds `SessionManager`, its registry and lookup; `start.rs`
//! starts it, `settings.rs` its settings, `error.rs` `SessionError`,
//! `info.rs` `SessionInfo`, `lifecycle.rs` closing and the ticker.

pub mod cdp;
mod codes;
mod control;
mod error;
pub mod files;
pub mod harvest;
mod info;
mod injection;
mod lifecycle;
mod navguard;
mod open;
mod pool;
mod reaper;
pub mod request;
mod running;
mod settings;
mod start;
pub mod tool;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::domain::{SessionId, TenantId};
use crate::egress::EgressGuard;
use crate::recording::Recorder;
use crate::sandbox::{Driver, DriverKind};
use crate::store::Store;

pub use error::{SessionError, session_id};
pub use harvest::{
    CookieMeta, CredentialDiff, DomainPreview, DomainSaved, HarvestError, HarvestPreview,
    OriginKeys, SaveReport,
};
pub use info::SessionInfo;
pub use injection::SmokeProbe;
pub use reaper::ReapReport;
pub use request::{CredentialMode, DownloadPolicy, OpenRequest, OpenRequestError, Viewport};
pub use running::{ControlHolder, RunningSession, Tabs};
pub use settings::{
    DownloadTransfer, EngineSettings, SessionConfig, SessionsSection, UploadTransfer,
};
pub use tool::{LiveInput, Tool, ToolCall, ToolError, ToolOutput};

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
    live: std::sync::Mutex<HashMap<SessionId, Arc<RunningSession>>>,
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
        if let Err(e) = self.store.sandbox_stopped(&warm.sandbox_id).await {
            tracing::error!(error = %format!("{e:#}"), sandbox.id = %warm.sandbox.id, "failed to record a sandbox's stop");
        }
        self.known
            .lock()
            .expect("known lock")
            .remove(&warm.sandbox.id);
        warm.egress.close().await;
    }
}

/// The session engine; cheap to clone.
#[derive(Clone)]
pub struct SessionManager(Arc<Inner>);

/// How often deadlines, idle timeouts and crashed browsers are checked.
const TICK: Duration = Duration::from_millis(500);

impl SessionManager {
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
    pub async fn get(
        &self,
        tenant: &TenantId,
        id: &SessionId,
    ) -> Result<Arc<RunningSession>, SessionError> {
        let found = self.0.live.lock().expect("live lock").get(id).cloned();
        if let Some(s) = found.filter(|s| &s.tenant == tenant) {
            if s.mode == CredentialMode::Refresh {
                return Err(SessionError::NotFound);
            }
            return Ok(s);
        }
        match self.0.store.session_get(tenant.as_str(), id).await? {
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
        }
    }

    /// The stored view of a session of `tenant`, as its agents see it (a
    /// refresh session is not theirs: `NotFound`).
    pub async fn info(
        &self,
        tenant: &TenantId,
        sid: &SessionId,
    ) -> Result<SessionInfo, SessionError> {
        let row = self
            .0
            .store
            .session_get(tenant.as_str(), sid)
            .await?
            .filter(|row| row.credential_mode != CredentialMode::Refresh.as_str())
            .ok_or(SessionError::NotFound)?;
        let mut info = SessionInfo::from_row(&row);
        // Known while it runs (the row does not keep it).
        info.downloads =
            self.0
                .live
                .lock()
                .expect("live lock")
                .get(sid)
                .map(|live| match live.downloads {
                    Some(_) => DownloadPolicy::Allow,
                    None => DownloadPolicy::Deny,
                });
        Ok(info)
    }
}
