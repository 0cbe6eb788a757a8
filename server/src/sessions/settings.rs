//! The engine's settings: `EngineSettings`, what starting it needs, and
//! `SessionConfig`, the sessions' own section; both built by `config`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::SmokeProbe;

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
    /// Downloads are taken over CDP, not from the sandbox's folder.
    pub download_over_cdp: bool,
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
