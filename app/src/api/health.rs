//! The control plane's health, for the overview page.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

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
    /// Sessions of this host by state (`starting`, `ready`, `closing`), and
    /// how many ended in the last 24 hours.
    pub sessions: Vec<(String, i64)>,
    /// The sandbox driver (`bwrap`, `process`, `exec`).
    pub driver: String,
    /// Warm browsers ready now.
    pub pool_ready: u64,
    /// Warm browsers wanted.
    pub pool_size: u64,
    /// Grant requests waiting for an operator.
    pub pending_grants: i64,
    /// Credentials whose first cookie expires within 7 days (or already has).
    pub expiring: Vec<super::credentials::CredentialView>,
    /// The last verification of the audit chain since start, if any.
    pub last_verification: Option<super::audit::AuditVerification>,
    /// The control planes on this database: those up, and those stopped or
    /// lost in the last 24 hours.
    pub replicas: Vec<ReplicaLine>,
}

/// One control plane (replica) on the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLine {
    /// Its `replica_name`.
    pub name: String,
    /// `up`, `stopped` or `lost`.
    pub state: String,
    /// It is the one answering this page.
    pub this: bool,
    /// It runs the housekeeping (reaper, GC).
    pub leader: bool,
    /// Its last heartbeat (ms since the epoch).
    pub heartbeat_at: i64,
    /// When it started (ms since the epoch).
    pub started_at: i64,
    /// Sessions it runs now.
    pub running: i64,
    /// Its binary's version.
    pub version: String,
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

/// Current health of the control plane, with what waits for operators.
#[server(prefix = "/ui/fn", endpoint = "get_status")]
pub async fn get_status() -> Result<SystemStatus, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see the overview").await?;
    ctl.status(&op).await
}
