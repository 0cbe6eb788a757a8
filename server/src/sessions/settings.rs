//! The engine's settings: `SessionsSection`, the sessions' settings as they
//! load (declared, defaulted and checked here); `SessionConfig`, the same
//! as the engine reads them; `EngineSettings`, what starting it needs,
//! joined by `config` from every owner's section.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::SmokeProbe;

/// Session settings as the engine reads them ([`SessionsSection::config`]).
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

/// How the `upload` tool hands its files to the browser.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum UploadTransfer {
    /// `page` with the `kube` driver (a pod shares no directory with
    /// Cordon), `files` with the others.
    #[default]
    Auto,
    /// Written into the sandbox's upload directory, then set on the input
    /// by path (`DOM.setFileInputFiles`): the page gets trusted events.
    Files,
    /// Sent over CDP and set on the input from inside the page (a
    /// `DataTransfer`); nothing is written to disk, and the page's `input`
    /// and `change` events are script events (`isTrusted` false).
    Page,
}

/// How a session that allows downloads gets their bytes.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DownloadTransfer {
    /// `cdp` with the `kube` driver (a pod shares no directory with
    /// Cordon), `files` with the others.
    #[default]
    Auto,
    /// The browser saves them in the sandbox's download directory, and
    /// Cordon copies each finished one.
    Files,
    /// Taken from the browser over CDP (`Fetch` at the response stage):
    /// nothing is shared on disk; a `blob:` or `data:` download is
    /// refused (`not_taken`).
    Cdp,
}

/// The sessions' settings as `cordon.toml` and `CORDON_*` name them
/// (`pool_*`, `session_deadline*`, `session_idle_s`, `max_sessions*`,
/// `tool_timeout_s`, `smoke_probes`, `download_*`, `upload_*`,
/// `refresh_deadline_s`). A setting is declared here once: its doc comment
/// is its documentation (`cordon config docs`), its `d::` function its
/// default, [`SessionsSection::validate`] its rules.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SessionsSection {
    /// Pre-started browsers waiting for sessions (0 disables the pool; at
    /// most `max_sessions`).
    #[serde(default = "d::pool_size")]
    pub pool_size: u32,
    /// After a session takes a warm browser, the pool waits this long before
    /// starting its replacement, so a browser's start does not compete for
    /// CPU with the new session's first page loads; ms, at most 60000.
    #[serde(default = "d::pool_refill_delay_ms")]
    pub pool_refill_delay_ms: u64,
    /// Default session lifetime in seconds (at most `session_deadline_max_s`).
    #[serde(default = "d::session_deadline_s")]
    pub session_deadline_s: u64,
    /// Longest lifetime a client may ask for.
    #[serde(default = "d::session_deadline_max_s")]
    pub session_deadline_max_s: u64,
    /// A session with no tool call for this long is closed, in seconds.
    #[serde(default = "d::session_idle_s")]
    pub session_idle_s: u64,
    /// Open sessions one tenant may have; past it, opening one answers 429
    /// with `Retry-After`.
    #[serde(default = "d::max_sessions_per_tenant")]
    pub max_sessions_per_tenant: u32,
    /// Open sessions this host runs in all; past it, opening one answers
    /// 429 with `Retry-After`.
    #[serde(default = "d::max_sessions")]
    pub max_sessions: u32,
    /// Upper bound of any one browser tool call, in seconds (at most 300).
    #[serde(default = "d::tool_timeout_s")]
    pub tool_timeout_s: u64,
    /// Largest file a session opened with `"downloads": "allow"` may
    /// download, MiB (1–10240); a bigger one is cancelled and removed.
    #[serde(default = "d::download_max_mb")]
    pub download_max_mb: u64,
    /// What one session's downloads may take together, MiB (from
    /// `download_max_mb` to 102400); one that would pass it is cancelled and
    /// removed (`session_full`).
    #[serde(default = "d::download_session_max_mb")]
    pub download_session_max_mb: u64,
    /// Largest total of the files one `upload` call may send, MiB (1–512);
    /// its route accepts a body of that much in base64.
    #[serde(default = "d::upload_max_mb")]
    pub upload_max_mb: u64,
    /// How `upload` hands files to the browser: `files` (written to the
    /// sandbox's upload directory and set by path: trusted events), `page`
    /// (sent over CDP and set from inside the page, for engines that share
    /// no directory with Cordon: `kube`, a remote `exec`) or `auto` (`page`
    /// with the `kube` driver, else `files`).
    #[serde(default)]
    pub upload_transfer: UploadTransfer,
    /// How a session's downloads reach Cordon: `files` (saved in the
    /// sandbox's download directory), `cdp` (read from the browser over CDP,
    /// for engines that share no directory with Cordon: `kube`, a remote
    /// `exec`; `blob:` and `data:` downloads are refused, `not_taken`) or
    /// `auto` (`cdp` with the `kube` driver, else `files`).
    #[serde(default)]
    pub download_transfer: DownloadTransfer,
    /// Per-domain checks run after cookie injection: `url`, `expect_status`,
    /// `expect_text` (`[smoke_probes."example.com"]`); the open response says
    /// `ok` or what failed.
    #[serde(default, deserialize_with = "crate::setting::table_or_json")]
    pub smoke_probes: BTreeMap<String, SmokeProbe>,
    /// Lifetime of a refresh session (an operator logging in to sites from
    /// the dashboard), in seconds (at most `session_deadline_max_s`).
    #[serde(default = "d::refresh_deadline_s")]
    pub refresh_deadline_s: u64,
}

/// The sessions' defaults, one function per setting that has one.
mod d {
    pub fn pool_size() -> u32 {
        2
    }
    pub fn pool_refill_delay_ms() -> u64 {
        1000
    }
    pub fn session_deadline_s() -> u64 {
        600
    }
    pub fn session_deadline_max_s() -> u64 {
        3600
    }
    pub fn session_idle_s() -> u64 {
        120
    }
    pub fn max_sessions_per_tenant() -> u32 {
        50
    }
    pub fn max_sessions() -> u32 {
        150
    }
    pub fn tool_timeout_s() -> u64 {
        30
    }
    pub fn download_max_mb() -> u64 {
        100
    }
    pub fn download_session_max_mb() -> u64 {
        1024
    }
    pub fn upload_max_mb() -> u64 {
        25
    }
    pub fn refresh_deadline_s() -> u64 {
        15 * 60
    }
}

impl SessionsSection {
    /// The sessions' rules, each error naming its setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.session_deadline_s == 0 || self.session_deadline_s > self.session_deadline_max_s {
            bail!(
                "session_deadline_s: must be between 1 and session_deadline_max_s ({})",
                self.session_deadline_max_s
            );
        }
        if self.session_idle_s == 0 || self.tool_timeout_s == 0 {
            bail!("session_idle_s and tool_timeout_s must be at least 1");
        }
        if self.refresh_deadline_s == 0 || self.refresh_deadline_s > self.session_deadline_max_s {
            bail!("refresh_deadline_s: must be between 1 and session_deadline_max_s");
        }
        if self.pool_size > self.max_sessions {
            bail!(
                "pool_size: must not exceed max_sessions ({})",
                self.max_sessions
            );
        }
        if !(1..=10_240).contains(&self.download_max_mb) {
            bail!("download_max_mb: must be between 1 and 10240");
        }
        if !(self.download_max_mb..=102_400).contains(&self.download_session_max_mb) {
            bail!("download_session_max_mb: must be between download_max_mb and 102400");
        }
        if !(1..=512).contains(&self.upload_max_mb) {
            bail!("upload_max_mb: must be between 1 and 512");
        }
        if self.tool_timeout_s > 300 {
            bail!("tool_timeout_s: must be at most 300 (five minutes)");
        }
        if self.pool_refill_delay_ms > 60_000 {
            bail!("pool_refill_delay_ms: must be at most 60000 (one minute)");
        }
        Ok(())
    }

    /// The sessions' own settings as the engine reads them; `remote_engine`
    /// (the `kube` driver: a pod shares no directory with Cordon) decides
    /// what `auto` transfers mean, `tenant_limits` are the sandbox's.
    pub fn config(
        &self,
        remote_engine: bool,
        tenant_limits: BTreeMap<String, crate::sandbox::limits::TenantLimits>,
    ) -> SessionConfig {
        SessionConfig {
            pool_size: self.pool_size as usize,
            pool_refill_delay: Duration::from_millis(self.pool_refill_delay_ms),
            deadline_default_s: self.session_deadline_s,
            deadline_max_s: self.session_deadline_max_s,
            idle: Duration::from_secs(self.session_idle_s),
            max_per_tenant: self.max_sessions_per_tenant as usize,
            max_total: self.max_sessions as usize,
            tool_timeout: Duration::from_secs(self.tool_timeout_s),
            smoke_probes: self.smoke_probes.clone(),
            tenant_limits,
            download_max_bytes: self.download_max_mb << 20,
            download_session_max_bytes: self.download_session_max_mb << 20,
            upload_max_bytes: self.upload_max_mb << 20,
            upload_in_page: match self.upload_transfer {
                UploadTransfer::Files => false,
                UploadTransfer::Page => true,
                UploadTransfer::Auto => remote_engine,
            },
            download_over_cdp: match self.download_transfer {
                DownloadTransfer::Files => false,
                DownloadTransfer::Cdp => true,
                DownloadTransfer::Auto => remote_engine,
            },
        }
    }
}
