//! What the dashboard asks of the control plane: data types shared by server
//! and browser, the server functions, and (on the server) the [`Dashboard`]
//! trait the control plane implements.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// Health of the control plane as shown on the overview page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemStatus {
    /// Cordon's version.
    pub version: String,
    /// `sqlite` or `postgres`.
    pub database: String,
    /// The database answered.
    pub database_ok: bool,
    /// Path of the Chromium executable sessions run.
    pub chromium_path: String,
    /// That executable exists and may be run.
    pub chromium_ok: bool,
    /// Number of events in the audit log.
    pub audit_events: i64,
    /// When this was checked (RFC 3339, UTC).
    pub checked_at: String,
    /// Each tenant's screenshots on disk against its quota.
    pub recordings: Vec<RecordingUsage>,
}

/// One tenant's recordings on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingUsage {
    /// The tenant.
    pub tenant: String,
    /// Bytes kept.
    pub used_bytes: u64,
    /// Bytes allowed.
    pub quota_bytes: u64,
}

/// One audit event as listed in the dashboard (params are already redacted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    /// Position in the chain.
    pub seq: i64,
    /// RFC 3339, UTC.
    pub ts: String,
    /// Tenant, if any.
    pub tenant: Option<String>,
    /// Session, if any.
    pub session: Option<String>,
    /// Who acted.
    pub actor: String,
    /// `resource.verb`.
    pub action: String,
    /// Redacted params (JSON text).
    pub params: String,
    /// Outcome.
    pub outcome: String,
    /// First 12 hex digits of the event's hash.
    pub hash_prefix: String,
}

/// Result of recomputing the audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerification {
    /// Every event verified.
    pub intact: bool,
    /// Events checked.
    pub events: i64,
    /// First broken seq, if any.
    pub broken_seq: Option<i64>,
    /// What is wrong there.
    pub reason: Option<String>,
}

/// The most events one audit page lists.
pub const AUDIT_PAGE_MAX: i64 = 200;

#[cfg(feature = "ssr")]
mod backend {
    use super::*;

    /// The control plane as the dashboard sees it. Errors are messages safe
    /// to show an operator; causes are logged by the implementation.
    #[async_trait::async_trait]
    pub trait Dashboard: Send + Sync + 'static {
        /// Current health.
        async fn status(&self) -> Result<SystemStatus, String>;
        /// The newest `limit` audit events, newest first.
        async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditRow>, String>;
        /// Recomputes the whole audit chain.
        async fn verify_audit(&self) -> Result<AuditVerification, String>;
    }

    /// How the server provides its [`Dashboard`] to server functions.
    pub type DashboardHandle = std::sync::Arc<dyn Dashboard>;

    pub(super) fn dashboard() -> Result<DashboardHandle, ServerFnError> {
        use_context::<DashboardHandle>()
            .ok_or_else(|| ServerFnError::new("dashboard backend is not configured"))
    }
}

#[cfg(feature = "ssr")]
pub use backend::{Dashboard, DashboardHandle};

/// Current health of the control plane.
#[server(prefix = "/ui/fn", endpoint = "get_status")]
pub async fn get_status() -> Result<SystemStatus, ServerFnError> {
    backend::dashboard()?
        .status()
        .await
        .map_err(ServerFnError::new)
}

/// The newest audit events (at most [`AUDIT_PAGE_MAX`]).
#[server(prefix = "/ui/fn", endpoint = "recent_audit")]
pub async fn recent_audit(limit: i64) -> Result<Vec<AuditRow>, ServerFnError> {
    if !(1..=AUDIT_PAGE_MAX).contains(&limit) {
        return Err(ServerFnError::Args(format!(
            "limit must be between 1 and {AUDIT_PAGE_MAX}"
        )));
    }
    backend::dashboard()?
        .recent_audit(limit)
        .await
        .map_err(ServerFnError::new)
}

/// Recomputes the audit chain.
#[server(prefix = "/ui/fn", endpoint = "verify_audit")]
pub async fn verify_audit() -> Result<AuditVerification, ServerFnError> {
    backend::dashboard()?
        .verify_audit()
        .await
        .map_err(ServerFnError::new)
}
