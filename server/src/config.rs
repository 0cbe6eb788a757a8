//! Typed settings, read once at start: defaults in code, then an optional
//! `cordon.toml`, then `CORDON_*` environment variables.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use figment::Figment;
use figment::providers::{Format, Toml};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

pub use crate::domain::DatabaseKind;
use crate::egress::AllowEntry;
pub use crate::sandbox::SandboxDriverSetting;
pub use crate::sandbox::limits::TenantLimits;
pub use crate::sessions::SmokeProbe;

/// A TOML table keyed by name (tenant, domain), or, from the environment,
/// the same as a JSON object.
fn table_or_json<'de, D, K, V>(d: D) -> Result<std::collections::BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: serde::de::DeserializeOwned + Ord,
    V: serde::de::DeserializeOwned,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<K: Ord, V> {
        Table(std::collections::BTreeMap<K, V>),
        Json(String),
    }
    match Either::<K, V>::deserialize(d)? {
        Either::Table(t) => Ok(t),
        Either::Json(s) => serde_json::from_str(&s).map_err(serde::de::Error::custom),
    }
}

/// How the egress guard resolves host names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EgressResolver {
    /// The host's resolver (production).
    System,
    /// Only `localhost` resolves (to loopback); nothing else does and no
    /// DNS query is ever sent. For tests and air-gapped trials.
    LoopbackOnly,
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

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// All of Cordon's settings. Each is declared once, here: its type, its
/// default (`d::…` below), its documentation. The environment keys
/// (`CORDON_<NAME>`), which of them are numbers, `config show` and `Debug`
/// are all derived from this declaration.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Address the HTTP server listens on; port 0 picks a free port.
    #[serde(default = "d::bind")]
    #[schemars(with = "String")]
    pub bind: SocketAddr,
    /// Directory for the SQLite database, screenshots and (by default) the key file.
    #[serde(default = "d::data_dir")]
    pub data_dir: PathBuf,
    /// `sqlite://…` or `postgres://…`; defaults to `sqlite://<data_dir>/cordon.db`.
    /// Secret because a PostgreSQL URL may carry a password.
    #[serde(default, serialize_with = "masked_url")]
    #[schemars(with = "Option<String>")]
    pub database_url: Option<SecretString>,
    /// `text` or `json`.
    #[serde(default = "d::log_format")]
    pub log_format: LogFormat,
    /// A `tracing` filter such as `info` or `cordon=debug,info`.
    #[serde(default = "d::log_level")]
    pub log_level: String,
    /// The Chromium executable sessions run.
    #[serde(default = "d::chromium_path")]
    pub chromium_path: PathBuf,
    /// Directory holding the built dashboard assets (`pkg/` inside).
    #[serde(default = "d::site_root")]
    pub site_root: PathBuf,
    /// `auto`, `process`, `bwrap`, `exec` or `kube`.
    #[serde(default = "d::sandbox_driver")]
    pub sandbox_driver: SandboxDriverSetting,
    /// Pre-started browsers waiting for sessions (0 disables the pool).
    #[serde(default = "d::pool_size")]
    pub pool_size: u32,
    /// After a session takes a warm browser, the pool waits this long before
    /// starting its replacement, so a browser's start does not compete for
    /// CPU with the new session's first page loads.
    #[serde(default = "d::pool_refill_delay_ms")]
    pub pool_refill_delay_ms: u64,
    /// Default session lifetime in seconds.
    #[serde(default = "d::session_deadline_s")]
    pub session_deadline_s: u64,
    /// Longest lifetime a client may ask for.
    #[serde(default = "d::session_deadline_max_s")]
    pub session_deadline_max_s: u64,
    /// A session with no tool call for this long is closed.
    #[serde(default = "d::session_idle_s")]
    pub session_idle_s: u64,
    /// Open sessions one tenant may have.
    #[serde(default = "d::max_sessions_per_tenant")]
    pub max_sessions_per_tenant: u32,
    /// Open sessions this host runs in all.
    #[serde(default = "d::max_sessions")]
    pub max_sessions: u32,
    /// Upper bound of any one browser tool call, in seconds (at most 300).
    #[serde(default = "d::tool_timeout_s")]
    pub tool_timeout_s: u64,
    /// Whether the per-session limits below are enforced (cgroups, rlimits,
    /// tmpfs sizes). Off only to measure their cost or on a host that
    /// cannot have them; `serve` warns loudly and `/readyz` shows it.
    #[serde(default = "d::session_limits")]
    pub session_limits: bool,
    /// Memory one session's browser may use (its processes and its tmpfs
    /// pages), MiB; past it the page is killed and the session fails with
    /// `resource_limit`.
    #[serde(default = "d::session_memory_mb")]
    pub session_memory_mb: u64,
    /// Processes and threads one session's browser may run.
    #[serde(default = "d::session_pids_max")]
    pub session_pids_max: u64,
    /// Open files per process of a session's browser.
    #[serde(default = "d::session_open_files_max")]
    pub session_open_files_max: u64,
    /// Size of each of a bwrap sandbox's tmpfs mounts (`/tmp` with the
    /// profile, `/home`, `/run`), MiB.
    #[serde(default = "d::session_tmpfs_mb")]
    pub session_tmpfs_mb: u64,
    /// A session's CPU weight against the others (1–10000; the same for all
    /// by default, so one busy page cannot starve the rest).
    #[serde(default = "d::session_cpu_weight")]
    pub session_cpu_weight: u64,
    /// Per-tenant memory, task and CPU limits of their sessions
    /// (`[tenant_limits.acme] memory_mb = 2048`), applied when a session of
    /// the tenant gets its browser, warm or cold.
    #[serde(default, deserialize_with = "table_or_json")]
    pub tenant_limits: std::collections::BTreeMap<String, TenantLimits>,
    /// `ip:port` / `host:port` entries the egress guard lets through even if
    /// the address policy refuses them (e.g. a test's loopback page server);
    /// parsed when the settings load.
    #[serde(
        default,
        deserialize_with = "allow_list",
        serialize_with = "display_list"
    )]
    #[schemars(with = "Vec<String>")]
    pub egress_allow: Vec<AllowEntry>,
    /// Disk each tenant's screenshots may take, MiB; past it transient
    /// frames drop their oldest and audit screenshots are refused (507).
    #[serde(default = "d::recording_quota_mb")]
    pub recording_quota_mb: u64,
    /// Largest file a session that allows downloads may download, MiB;
    /// a bigger one is cancelled and removed.
    #[serde(default = "d::download_max_mb")]
    pub download_max_mb: u64,
    /// What one session's downloads may take together, MiB (at least
    /// `download_max_mb`); one that would pass it is cancelled and removed.
    #[serde(default = "d::download_session_max_mb")]
    pub download_session_max_mb: u64,
    /// Largest total of the files one `upload` call may send, MiB.
    #[serde(default = "d::upload_max_mb")]
    pub upload_max_mb: u64,
    /// How `upload` hands files to the browser: `auto`, `files` (through
    /// the sandbox's upload directory) or `page` (over CDP, for engines
    /// that share no directory with Cordon: `kube`, a remote `exec`).
    #[serde(default)]
    pub upload_transfer: UploadTransfer,
    /// How a session's downloads reach Cordon: `auto`, `files` (saved in
    /// the sandbox's download directory) or `cdp` (read from the browser
    /// over CDP, for engines that share no directory with Cordon: `kube`,
    /// a remote `exec`; `blob:` and `data:` downloads are refused).
    #[serde(default)]
    pub download_transfer: DownloadTransfer,
    /// Days `audit` screenshots are kept.
    #[serde(default = "d::recording_retention_days")]
    pub recording_retention_days: u64,
    /// Egress log rows older than this many days are deleted (hourly).
    #[serde(default = "d::egress_log_retention_days")]
    pub egress_log_retention_days: u64,
    /// `system` or `loopback-only`.
    #[serde(default = "d::egress_resolver")]
    pub egress_resolver: EgressResolver,
    /// `exec` driver: the command that makes a browser and prints its CDP endpoint.
    #[serde(default)]
    pub exec_create: Option<String>,
    /// `exec` driver: the command that destroys one (idempotent).
    #[serde(default)]
    pub exec_destroy: Option<String>,
    /// `kube` driver: the namespace browser pods are made in; unset, the
    /// client's own (in a cluster: the service account's namespace file;
    /// else the kubeconfig context's, else `default`).
    #[serde(default)]
    pub kube_namespace: Option<String>,
    /// `kube` driver: a Pod manifest (YAML or JSON file) every browser pod
    /// is made from. It needs a container named `browser`, non-root, with a
    /// read-only root filesystem, no privileges, no host namespaces or
    /// paths and no service account token; checked at start.
    #[serde(default)]
    pub kube_pod_template: Option<PathBuf>,
    /// `kube` driver: the `cordon.dev/deployment` label value of this
    /// Cordon's pods, so several deployments can share a namespace and the
    /// reaper only lists its own.
    #[serde(default = "d::kube_deployment")]
    pub kube_deployment: String,
    /// `kube` driver: the port the browser container serves DevTools on
    /// (`/json/version` and the WebSocket), on the pod's IP.
    #[serde(default = "d::kube_cdp_port")]
    pub kube_cdp_port: u16,
    /// `kube` driver: the address browser pods reach this Cordon's egress
    /// guard at (its pod IP, from the downward API); their proxy is
    /// `<kube_egress_host>:<the sandbox's egress port>`. Needs
    /// `egress_bind_host` to be an address of this pod.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub kube_egress_host: Option<std::net::IpAddr>,
    /// `kube` driver: how long a new pod may take to be running and ready
    /// (image pull included) before it is deleted and the start fails, s.
    #[serde(default = "d::kube_ready_timeout_s")]
    pub kube_ready_timeout_s: u64,
    /// The address the egress guard's per-browser listeners bind; unset,
    /// `127.0.0.1`, or `kube_egress_host` with the `kube` driver. Only the
    /// `kube` driver may have a non-loopback one (browser pods connect over
    /// the pod network; the manifests' NetworkPolicy limits who may).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub egress_bind_host: Option<std::net::IpAddr>,
    /// Per-domain checks run after cookie injection (`[smoke_probes."example.com"]`).
    #[serde(default, deserialize_with = "table_or_json")]
    pub smoke_probes: std::collections::BTreeMap<String, SmokeProbe>,
    /// Per-tenant default lifetime of approved grant tokens, in minutes
    /// (`[grant_expiry_min] acme = 60`; others get 15).
    #[serde(default, deserialize_with = "table_or_json")]
    pub grant_expiry_min: std::collections::BTreeMap<String, u64>,
    /// The vault's master key (32 bytes as 64 hex digits or base64). When
    /// unset, the key lives in `master_key_file`, created with mode 0600 on
    /// first use. Shown as `***`.
    #[serde(default, serialize_with = "masked")]
    #[schemars(with = "Option<String>")]
    pub master_key: Option<SecretString>,
    /// Where the master key file lives when `master_key` is unset; defaults
    /// to `<data_dir>/master.key`. Keep it outside the data dir so a backup
    /// or copy of the data dir is not a decryptable vault.
    #[serde(default)]
    pub master_key_file: Option<PathBuf>,
    /// The URL operators reach the dashboard at (`https://cordon.example.com`);
    /// its host is accepted in `Host` and `Origin` besides `localhost`,
    /// `127.0.0.1` and `[::1]` on the bound port, and it is the passkeys'
    /// relying party (its host their RP id, its origin the only one
    /// accepted). Unset: `http://localhost:<bound port>`. Passkeys need a
    /// host name, not an IP address.
    #[serde(default)]
    pub public_url: Option<String>,
    /// PEM file with the certificate chain (server certificate first) for
    /// built-in HTTPS; set together with `tls_key`. With both set, Cordon
    /// speaks only HTTPS on `bind`.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// PEM file with the private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1).
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// TLS is terminated by a reverse proxy in front of Cordon, which then
    /// listens on plain HTTP behind it; Cordon requires `public_url` to be
    /// the proxy's https:// address.
    #[serde(default)]
    pub trusted_proxy: bool,
    /// A dashboard session ends after this many minutes without a request.
    #[serde(default = "d::dashboard_idle_minutes")]
    pub dashboard_idle_minutes: u64,
    /// A dashboard session ends this many hours after its login, however busy.
    #[serde(default = "d::dashboard_session_hours")]
    pub dashboard_session_hours: u64,
    /// Lifetime of a refresh session (an operator logging in to sites from
    /// the dashboard), in seconds.
    #[serde(default = "d::refresh_deadline_s")]
    pub refresh_deadline_s: u64,
    /// JPEG quality of the live view's frames, 1–100.
    #[serde(default = "d::live_jpeg_quality")]
    pub live_jpeg_quality: u8,
    /// Largest width of a live view frame, in pixels (larger viewports are
    /// scaled down).
    #[serde(default = "d::live_max_width")]
    pub live_max_width: u32,
    /// Largest height of a live view frame, in pixels.
    #[serde(default = "d::live_max_height")]
    pub live_max_height: u32,
    /// `run_task`'s model: the base URL of an OpenAI-compatible
    /// chat-completions endpoint with image input (`…/v1`); unset, tasks
    /// answer 503 `model_unconfigured`.
    #[serde(default)]
    pub model_base_url: Option<String>,
    /// The model's name at that endpoint.
    #[serde(default = "d::model_name")]
    pub model_name: String,
    /// The endpoint's bearer key, if it needs one. Shown as `***`.
    #[serde(default, serialize_with = "masked")]
    #[schemars(with = "Option<String>")]
    pub model_api_key: Option<SecretString>,
    /// Bound of one model answer, in seconds.
    #[serde(default = "d::model_timeout_s")]
    pub model_timeout_s: u64,
    /// How the model reports coordinates: `absolute` (UI-TARS 1.5: pixels of
    /// the image as the model resized it) or `relative1000` (UI-TARS 1.0).
    #[serde(default = "d::model_coordinates")]
    pub model_coordinates: String,
    /// Screenshots of earlier steps sent along with the newest (the prompt
    /// size guardrail: older steps go as text only).
    #[serde(default = "d::task_history_images")]
    pub task_history_images: u32,
    /// The longest a task step waits, after its action, for the page's
    /// repaint to arrive as a screencast frame before it takes the newest
    /// picture there is (nothing repainted), in ms. A page that says it
    /// has drawn since the action ends the wait sooner.
    #[serde(default = "d::task_frame_wait_ms")]
    pub task_frame_wait_ms: u32,
    /// Once the page has drawn since a step's action (two animation
    /// frames) and no repaint has arrived, how much longer the step waits
    /// for one that may still be on its way from the browser's encoder
    /// before it takes the page as unchanged, in ms; at least as long
    /// again as the page took to draw. Lower is a faster step after an
    /// action that changes nothing; too low shows the model a picture from
    /// before its action on a busy machine.
    #[serde(default = "d::task_frame_settle_ms")]
    pub task_frame_settle_ms: u32,
    /// This control plane's name among the replicas sharing its database
    /// (sessions and sandboxes are recorded under it; at most one running
    /// process may use a name). Unset: the host name. On Kubernetes, the
    /// pod's name.
    #[serde(default)]
    pub replica_name: Option<String>,
    /// The deployment's shared secret for the internal hop between replicas
    /// (a call for a session another replica runs is forwarded to it, signed
    /// with this; at least 32 characters). Unset: calls for sessions of
    /// other replicas are answered 503 `replica_unreachable`. Shown as `***`.
    #[serde(default, serialize_with = "masked")]
    #[schemars(with = "Option<String>")]
    pub cluster_secret: Option<SecretString>,
    /// Where the other replicas reach this one for forwarded calls
    /// (`http(s)://host:port`, e.g. the pod's IP). Unset: the bound address
    /// (`localhost:<port>` on a wildcard bind), `https://` with built-in
    /// TLS, else `http://`. With built-in TLS it must be `https://`: the hop
    /// then goes over TLS and trusts only a peer that presents this
    /// deployment's `tls_cert` (every replica serves the same one).
    #[serde(default)]
    pub advertise_url: Option<String>,
    /// A replica whose heartbeat is older than this is lost: its sessions
    /// are ended (`replica_lost`) and its browsers stopped, in seconds
    /// (heartbeats go every fifth of it).
    #[serde(default = "d::replica_lost_after_s")]
    pub replica_lost_after_s: u64,
    /// A directory every replica mounts read-write (a ReadWriteMany volume,
    /// NFS): screenshots (`sessions/`) and kept downloads (`downloads/`) go
    /// there instead of the data dir, so any replica serves them and they
    /// outlive the replica that made them. Unset: the data dir.
    #[serde(default)]
    pub shared_dir: Option<PathBuf>,
    /// Largest `instruction` of a task, in bytes.
    #[serde(default = "d::task_instruction_max_bytes")]
    pub task_instruction_max_bytes: u32,
    /// Most steps a task may ask for.
    #[serde(default = "d::task_max_steps")]
    pub task_max_steps: u32,
    /// Risk gate: words and phrases (whole words, any case) that make a
    /// click or select on an element with that accessible name
    /// `destructive_click`.
    #[serde(
        default = "crate::policy::rules::defaults::destructive_words",
        deserialize_with = "string_or_list"
    )]
    pub risk_destructive_words: Vec<String>,
    /// Risk gate: words and phrases that make a click or select `payment_click`.
    #[serde(
        default = "crate::policy::rules::defaults::payment_words",
        deserialize_with = "string_or_list"
    )]
    pub risk_payment_words: Vec<String>,
    /// Risk gate: hosts (and their subdomains) on which submitting a form is
    /// `sensitive_submit`.
    #[serde(default, deserialize_with = "string_or_list")]
    pub risk_sensitive_domains: Vec<String>,
    /// Risk gate: the level of each rule (`[risk_levels] destructive_click =
    /// "critical"`); unset rules keep theirs (`off_list_navigation`,
    /// `destructive_click`, `sensitive_submit`: high; `payment_click`,
    /// `download`: critical). High and critical wait for an operator.
    #[serde(default, deserialize_with = "table_or_json")]
    pub risk_levels: std::collections::BTreeMap<crate::policy::Rule, crate::policy::Level>,
    /// Risk gate: seconds a high or critical action waits for an operator's
    /// decision before it is denied (`approval_timed_out`).
    #[serde(default = "crate::policy::rules::defaults::approval_timeout_s")]
    pub approval_timeout_s: u64,
    /// Risk gate: only record what would have waited (`approval.would_wait`)
    /// and run it at once.
    #[serde(default)]
    pub risk_dry_run: bool,
    /// Risk gate: a tenant's own rules (`[tenant_risk.acme]
    /// sensitive_domains = [...]`, `levels`, `dry_run`, `approval_timeout_s`,
    /// word lists); unset ones are the `risk_*` settings.
    #[serde(default, deserialize_with = "table_or_json")]
    pub tenant_risk: std::collections::BTreeMap<String, crate::policy::TenantRisk>,
    /// Live links: the tenants whose agents may hand out short-lived links
    /// to a session's live view for their own users
    /// (`[tenant_live_links.acme] frame_ancestors = ["https://app.acme.example"]`,
    /// `control`, `max_ttl_s`). A tenant not listed may not.
    #[serde(default, deserialize_with = "table_or_json")]
    pub tenant_live_links: std::collections::BTreeMap<String, crate::live::link::LinkPolicy>,
}

/// This host's memory in MiB (`MemTotal`), when it can be read.
fn host_memory_mb() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// The defaults, one function per setting that has one.
mod d {
    use super::{EgressResolver, LogFormat, SandboxDriverSetting};
    use std::net::SocketAddr;
    use std::path::PathBuf;

    pub fn bind() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8080))
    }
    pub fn data_dir() -> PathBuf {
        "data".into()
    }
    pub fn log_format() -> LogFormat {
        LogFormat::Text
    }
    pub fn log_level() -> String {
        "info".into()
    }
    pub fn chromium_path() -> PathBuf {
        "/usr/lib/chromium/chromium".into()
    }
    pub fn site_root() -> PathBuf {
        "target/site".into()
    }
    pub fn sandbox_driver() -> SandboxDriverSetting {
        SandboxDriverSetting::Auto
    }
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
    pub fn session_limits() -> bool {
        true
    }
    pub fn dashboard_idle_minutes() -> u64 {
        30
    }
    pub fn dashboard_session_hours() -> u64 {
        12
    }
    pub fn refresh_deadline_s() -> u64 {
        15 * 60
    }
    pub fn live_jpeg_quality() -> u8 {
        70
    }
    pub fn live_max_width() -> u32 {
        1920
    }
    pub fn live_max_height() -> u32 {
        1080
    }
    pub fn model_name() -> String {
        "ui-tars-1.5-7b".into()
    }
    pub fn model_timeout_s() -> u64 {
        60
    }
    pub fn model_coordinates() -> String {
        "absolute".into()
    }
    pub fn task_history_images() -> u32 {
        2
    }
    pub fn task_frame_wait_ms() -> u32 {
        100
    }
    pub fn task_frame_settle_ms() -> u32 {
        25
    }
    pub fn replica_lost_after_s() -> u64 {
        10
    }
    pub fn task_instruction_max_bytes() -> u32 {
        8192
    }
    pub fn task_max_steps() -> u32 {
        50
    }
    pub fn session_memory_mb() -> u64 {
        1024
    }
    pub fn session_pids_max() -> u64 {
        1024
    }
    pub fn session_open_files_max() -> u64 {
        8192
    }
    pub fn session_tmpfs_mb() -> u64 {
        512
    }
    pub fn session_cpu_weight() -> u64 {
        100
    }
    pub fn recording_quota_mb() -> u64 {
        2048
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
    pub fn recording_retention_days() -> u64 {
        7
    }
    pub fn egress_log_retention_days() -> u64 {
        30
    }
    pub fn egress_resolver() -> EgressResolver {
        EgressResolver::System
    }
    pub fn kube_deployment() -> String {
        "cordon".into()
    }
    pub fn kube_cdp_port() -> u16 {
        9222
    }
    pub fn kube_ready_timeout_s() -> u64 {
        60
    }
}

/// The settings' names and whether each is a number, from the declaration.
struct Keys {
    all: Vec<String>,
    numeric: Vec<String>,
    boolean: Vec<String>,
}

static KEYS: std::sync::LazyLock<Keys> = std::sync::LazyLock::new(|| {
    let schema = schemars::schema_for!(Settings);
    let props = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .cloned()
        .unwrap_or_default();
    let all: Vec<String> = props.keys().cloned().collect();
    let of_type = |ty: &str| {
        props
            .iter()
            .filter(|(_, v)| v.get("type").and_then(|t| t.as_str()) == Some(ty))
            .map(|(k, _)| k.clone())
            .collect()
    };
    Keys {
        all,
        numeric: of_type("integer"),
        boolean: of_type("boolean"),
    }
});

/// `CORDON_*` names Cordon's own scripts, images and engines use that are
/// not settings (a test's database, an image's build, what an `exec`
/// engine is told): never taken for a misspelled setting.
const NOT_SETTINGS: &[&str] = &[
    "BASE_IMAGE",
    "BIN",
    "BROWSER_IMAGE",
    "BUILD_IMAGE",
    "CDP_INTERNAL_PORT",
    "CDP_PORT",
    "CDP_URL",
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "CHROMIUM_SANDBOX",
    "CONFIG",
    "CONTRACT_EXAMPLES",
    "CONTRACT_VENV",
    "DOWNLOADS_DIR",
    "DRY_RUN",
    "E2E_CHROMIUM",
    "E2E_PYTHON",
    "E2E_SCREENSHOTS",
    "HEALTH_PORT",
    "IMAGE",
    "IMAGE_WORK",
    "JAIL_CONFIG",
    "KEY",
    "OCI_RUNTIME",
    "PG_DIR",
    "PG_PORT",
    "POD_IP",
    "POD_TEMPLATE",
    "PROXY",
    "RUNTIME_DIR",
    "SANDBOX_ID",
    "SYSTEMD_ROOT",
    "TEST_POSTGRES_URL",
    "TEST_PYTHON",
    "UPLOADS_DIR",
    "URL",
    "WINDOW",
];

/// The `CORDON_*` variables of `env` that name no setting but come within
/// two edits of one (a typo, silently ignored otherwise), each with the
/// variable it most likely meant. Names Cordon's own tools use are left
/// alone, as is anything further from every setting.
pub fn misspelled_env(env: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, _) in env {
        let Some(rest) = name.strip_prefix("CORDON_") else {
            continue;
        };
        let key = rest.to_ascii_lowercase();
        if KEYS.all.contains(&key)
            || NOT_SETTINGS.contains(&rest)
            || rest.starts_with("LIMIT_")
            || key.len() < 4
        {
            continue;
        }
        let nearest = KEYS
            .all
            .iter()
            .map(|k| (edits(&key, k), k))
            .min_by_key(|(d, _)| *d);
        if let Some((d, meant)) = nearest
            && d <= 2
        {
            out.push((
                name.clone(),
                format!("CORDON_{}", meant.to_ascii_uppercase()),
            ));
        }
    }
    out.sort();
    out
}

/// Levenshtein distance (ASCII names).
fn edits(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// The first line of the generated settings reference.
pub const REFERENCE_HEADER: &str = "<!-- generated by `cordon config docs` from the doc comments of \
     server/src/config.rs: change those and regenerate; a test compares -->";

/// Every setting as a Markdown table (key, environment variable, default,
/// what it does), from the declaration's doc comments and defaults: the
/// reference in docs/configuration.md, so it cannot drift from the code.
pub fn reference() -> String {
    let schema = schemars::schema_for!(Settings);
    let props = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .cloned()
        .unwrap_or_default();
    let cell = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .replace('|', "\\|")
    };
    let mut out = format!(
        "{REFERENCE_HEADER}\n\n| key | environment | default | what it does |\n| --- | --- | --- | --- |\n"
    );
    for name in &KEYS.all {
        let p = &props[name.as_str()];
        let default = match p.get("default") {
            None | Some(serde_json::Value::Null) => "—".to_owned(),
            Some(v) => format!("`{}`", cell(&toml_value(v))),
        };
        let what = p
            .get("description")
            .and_then(|d| d.as_str())
            .map_or_else(String::new, cell);
        out.push_str(&format!(
            "| `{name}` | `CORDON_{}` | {default} | {what} |\n",
            name.to_ascii_uppercase()
        ));
    }
    out
}

/// Every setting's name (`CORDON_<NAME upper-cased>` in the environment).
pub fn setting_names() -> &'static [String] {
    &KEYS.all
}

fn masked<S: serde::Serializer>(v: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(_) => s.serialize_some("***"),
        None => s.serialize_none(),
    }
}

fn masked_url<S: serde::Serializer>(v: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(url) => s.serialize_some(&crate::audit::redact::url(url.expose_secret())),
        None => s.serialize_none(),
    }
}

fn display_list<S: serde::Serializer>(v: &[AllowEntry], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(ToString::to_string))
}

/// `egress_allow`: a TOML list or a comma-separated string, each entry
/// parsed now, so a bad one stops the start naming the setting.
fn allow_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<AllowEntry>, D::Error> {
    string_or_list(d)?
        .iter()
        .map(|e| {
            e.parse::<AllowEntry>()
                .map_err(|err| serde::de::Error::custom(format!("{e:?}: {err}")))
        })
        .collect()
}

/// Accepts a TOML list or a comma-separated string (for the environment).
fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::List(v) => v,
        Either::Text(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The serialised form: secrets are masked there.
        let v = serde_json::to_value(self).map_err(|_| fmt::Error)?;
        write!(f, "Settings {v}")
    }
}

impl Settings {
    /// Loads settings from the defaults, `config_file` (or `./cordon.toml` if
    /// it exists) and the process environment.
    pub fn load(config_file: Option<&Path>) -> anyhow::Result<Self> {
        Self::load_from(config_file, std::env::vars())
    }

    /// Like [`Settings::load`] with an explicit environment, for tests.
    pub fn load_from(
        config_file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let mut figment = Figment::new();
        match config_file {
            Some(path) => {
                if !path.is_file() {
                    bail!("config file {} not found", path.display());
                }
                figment = figment.merge(Toml::file_exact(path));
            }
            None if Path::new("cordon.toml").is_file() => {
                figment = figment.merge(Toml::file_exact("cordon.toml"));
            }
            None => {}
        }
        let vars = EnvVars(
            env.into_iter()
                .filter_map(|(k, v)| {
                    let key = k.strip_prefix("CORDON_")?.to_ascii_lowercase();
                    KEYS.all.contains(&key).then_some((key, v))
                })
                .collect(),
        );
        let settings: Settings = figment
            .merge(vars)
            .extract()
            .map_err(|e| anyhow::anyhow!(one_line(&e)))?;
        settings.validate()?;
        Ok(settings)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.database_url {
            DatabaseKind::of(url.expose_secret())?;
        }
        if self.session_deadline_s == 0 || self.session_deadline_s > self.session_deadline_max_s {
            bail!(
                "session_deadline_s: must be between 1 and session_deadline_max_s ({})",
                self.session_deadline_max_s
            );
        }
        if self.sandbox_driver == SandboxDriverSetting::Process && !self.bind.ip().is_loopback() {
            bail!(
                "sandbox_driver: \"process\" leaves each browser's DevTools port open to every \
                 local process; it is refused when bind is not a loopback address (use bwrap)"
            );
        }
        if self.sandbox_driver == SandboxDriverSetting::Exec
            && (self.exec_create.is_none() || self.exec_destroy.is_none())
        {
            bail!("sandbox_driver: \"exec\" needs both exec_create and exec_destroy");
        }
        self.validate_kube()?;
        if self.session_idle_s == 0 || self.tool_timeout_s == 0 {
            bail!("session_idle_s and tool_timeout_s must be at least 1");
        }
        if !(1..=24 * 60).contains(&self.dashboard_idle_minutes) {
            bail!("dashboard_idle_minutes: must be between 1 and 1440");
        }
        if let Some(u) = &self.model_base_url {
            let parsed = url::Url::parse(u)
                .map_err(|e| anyhow::anyhow!("model_base_url: not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("model_base_url: must be http(s)");
            }
        }
        if !matches!(self.model_coordinates.as_str(), "absolute" | "relative1000") {
            bail!("model_coordinates: must be \"absolute\" or \"relative1000\"");
        }
        if !(1..=600).contains(&self.model_timeout_s) {
            bail!("model_timeout_s: must be between 1 and 600");
        }
        if self.task_history_images > 10 {
            bail!("task_history_images: at most 10");
        }
        if !(10..=10_000).contains(&self.task_frame_wait_ms) {
            bail!("task_frame_wait_ms: must be between 10 and 10000");
        }
        if !(1..=10_000).contains(&self.task_frame_settle_ms) {
            bail!("task_frame_settle_ms: must be between 1 and 10000");
        }
        self.validate_replicas()?;
        if !(256..=65_536).contains(&self.task_instruction_max_bytes) {
            bail!("task_instruction_max_bytes: must be between 256 and 65536");
        }
        if !(1..=500).contains(&self.task_max_steps) {
            bail!("task_max_steps: must be between 1 and 500");
        }
        if !(1..=100).contains(&self.live_jpeg_quality) {
            bail!("live_jpeg_quality: must be between 1 and 100");
        }
        if !(200..=3840).contains(&self.live_max_width)
            || !(200..=2160).contains(&self.live_max_height)
        {
            bail!("live_max_width / live_max_height: must be 200–3840 × 200–2160");
        }
        if self.refresh_deadline_s == 0 || self.refresh_deadline_s > self.session_deadline_max_s {
            bail!("refresh_deadline_s: must be between 1 and session_deadline_max_s");
        }
        if !(1..=24 * 7).contains(&self.dashboard_session_hours) {
            bail!("dashboard_session_hours: must be between 1 and 168");
        }
        if self.pool_size > self.max_sessions {
            bail!(
                "pool_size: must not exceed max_sessions ({})",
                self.max_sessions
            );
        }
        if self.egress_log_retention_days == 0 {
            bail!("egress_log_retention_days: must be at least 1");
        }
        if let Some(raw) = &self.public_url {
            let url = url::Url::parse(raw)
                .map_err(|e| anyhow::anyhow!("public_url: {e} (expected http(s)://host[:port])"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                bail!("public_url: must be an http:// or https:// URL with a host");
            }
        }
        self.validate_exposure()?;
        let host_mb = host_memory_mb();
        if self.session_memory_mb < 128 || host_mb.is_some_and(|h| self.session_memory_mb > h) {
            bail!(
                "session_memory_mb: must be at least 128 and at most this host's memory ({} MiB)",
                host_mb.unwrap_or(0)
            );
        }
        if !(32..=4_194_304).contains(&self.session_pids_max) {
            bail!("session_pids_max: must be between 32 and 4194304");
        }
        if !(256..=1_048_576).contains(&self.session_open_files_max) {
            bail!("session_open_files_max: must be between 256 and 1048576");
        }
        if self.session_tmpfs_mb < 16 || host_mb.is_some_and(|h| self.session_tmpfs_mb > h) {
            bail!("session_tmpfs_mb: must be at least 16 and at most this host's memory");
        }
        if self.recording_quota_mb == 0 {
            bail!("recording_quota_mb: must be at least 1");
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
        if !(1..=10_000).contains(&self.session_cpu_weight) {
            bail!("session_cpu_weight: must be between 1 and 10000");
        }
        for (tenant, t) in &self.tenant_limits {
            if tenant.parse::<crate::domain::TenantId>().is_err() {
                bail!("tenant_limits: {tenant:?} is not a tenant id");
            }
            if let Some(mb) = t.memory_mb
                && (mb < 128 || host_mb.is_some_and(|h| mb > h))
            {
                bail!(
                    "tenant_limits.{tenant}.memory_mb: must be at least 128 and at most this host's memory"
                );
            }
            if t.pids_max.is_some_and(|p| !(32..=4_194_304).contains(&p)) {
                bail!("tenant_limits.{tenant}.pids_max: must be between 32 and 4194304");
            }
            if t.recording_quota_mb == Some(0) {
                bail!("tenant_limits.{tenant}.recording_quota_mb: must be at least 1");
            }
            if t.cpu_weight.is_some_and(|w| !(1..=10_000).contains(&w)) {
                bail!("tenant_limits.{tenant}.cpu_weight: must be between 1 and 10000");
            }
        }
        for (tenant, p) in &self.tenant_live_links {
            if tenant.parse::<crate::domain::TenantId>().is_err() {
                bail!("tenant_live_links: {tenant:?} is not a tenant id");
            }
            if let Err(why) = p.check() {
                bail!("tenant_live_links.{tenant}: {why}");
            }
        }
        crate::policy::rules::validate(&self.risk_settings())?;
        if self.tool_timeout_s > 300 {
            bail!("tool_timeout_s: must be at most 300 (five minutes)");
        }
        if self.pool_refill_delay_ms > 60_000 {
            bail!("pool_refill_delay_ms: must be at most 60000 (one minute)");
        }
        tracing_subscriber::EnvFilter::try_new(&self.log_level)
            .with_context(|| format!("log_level: invalid filter {:?}", self.log_level))?;
        Ok(())
    }

    /// The `kube` driver's settings, and the egress bind address only it
    /// may open beyond loopback.
    fn validate_kube(&self) -> anyhow::Result<()> {
        let kube = self.sandbox_driver == SandboxDriverSetting::Kube;
        if self.egress_bind_host.is_some_and(|h| !h.is_loopback()) && !kube {
            bail!(
                "egress_bind_host: must be a loopback address unless sandbox_driver is \"kube\" \
                 (local browsers reach the guard on loopback; anything else opens it to the network)"
            );
        }
        if !kube {
            return Ok(());
        }
        if self.kube_pod_template.is_none() {
            bail!(
                "kube_pod_template: required when sandbox_driver is \"kube\" (a Pod manifest file)"
            );
        }
        let Some(host) = self.kube_egress_host else {
            bail!(
                "kube_egress_host: required when sandbox_driver is \"kube\" (the address browser \
                 pods reach the egress guard at, e.g. this pod's IP)"
            );
        };
        if host.is_loopback() || host.is_unspecified() {
            bail!("kube_egress_host: must be an address other pods can reach, not {host}");
        }
        if self.egress_bind_host.is_some_and(|h| h.is_loopback()) {
            bail!(
                "egress_bind_host: browser pods cannot reach a loopback listener; leave it unset \
                 (kube_egress_host) or set this pod's IP (or 0.0.0.0) with sandbox_driver \"kube\""
            );
        }
        if !(1..=3600).contains(&self.kube_ready_timeout_s) {
            bail!("kube_ready_timeout_s: must be between 1 and 3600");
        }
        if self.kube_cdp_port == 0 {
            bail!("kube_cdp_port: must be a port number (1–65535)");
        }
        let label_ok = |v: &str| {
            (1..=63).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !label_ok(&self.kube_deployment) {
            bail!(
                "kube_deployment: must be a Kubernetes label value (1–63 letters, digits, '-', '_', '.', \
                 starting and ending with a letter or digit)"
            );
        }
        let namespace_ok = |ns: &str| {
            (1..=63).contains(&ns.len())
                && ns
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if self
            .kube_namespace
            .as_deref()
            .is_some_and(|ns| !namespace_ok(ns))
        {
            bail!(
                "kube_namespace: must be a Kubernetes namespace name (lowercase letters, digits, '-')"
            );
        }
        Ok(())
    }

    /// Where the egress guard's listeners bind (`egress_bind_host`, or its default).
    pub fn egress_bind_host(&self) -> std::net::IpAddr {
        match (
            self.egress_bind_host,
            self.sandbox_driver,
            self.kube_egress_host,
        ) {
            (Some(host), _, _) => host,
            (None, SandboxDriverSetting::Kube, Some(host)) => host,
            _ => std::net::IpAddr::from([127, 0, 0, 1]),
        }
    }

    /// Who may reach the listener, and over what: a non-loopback `bind`
    /// serves operators on a network, which needs TLS (built in, or from a
    /// reverse proxy) and the https address they use, since passkeys and the
    /// session cookie are bound to it.
    fn validate_replicas(&self) -> anyhow::Result<()> {
        if let Some(name) = &self.replica_name {
            crate::cluster::check_replica_name(name)
                .map_err(|why| anyhow::anyhow!("replica_name: {why}"))?;
        }
        if let Some(secret) = &self.cluster_secret {
            let n = secret.expose_secret().chars().count();
            if !(32..=512).contains(&n) {
                bail!("cluster_secret: must be 32 to 512 characters (it has {n})");
            }
        }
        if let Some(raw) = &self.advertise_url {
            let url = url::Url::parse(raw).map_err(|e| {
                anyhow::anyhow!("advertise_url: {e} (expected http(s)://host:port)")
            })?;
            if !matches!(url.scheme(), "http" | "https")
                || url.host_str().is_none()
                || url.path() != "/"
                || url.query().is_some()
            {
                bail!("advertise_url: must be http(s)://host[:port] with no path");
            }
            if self.builtin_tls() && url.scheme() != "https" {
                bail!(
                    "advertise_url: must start with https:// when tls_cert and tls_key are set \
                     (this replica serves only HTTPS, and replicas talk over TLS)"
                );
            }
        }
        if !(3..=300).contains(&self.replica_lost_after_s) {
            bail!("replica_lost_after_s: must be between 3 and 300");
        }
        if self
            .shared_dir
            .as_ref()
            .is_some_and(|d| !d.is_absolute() || d.as_os_str().len() > 1024)
        {
            bail!("shared_dir: must be an absolute path (the directory every replica mounts)");
        }
        Ok(())
    }

    /// Where screenshots and kept downloads live: `shared_dir`, else the data dir.
    pub fn files_dir(&self) -> &Path {
        self.shared_dir.as_deref().unwrap_or(&self.data_dir)
    }

    /// This replica's name: `replica_name`, else the host name.
    pub fn replica_name(&self) -> String {
        self.replica_name.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| crate::cluster::check_replica_name(h).is_ok())
                .unwrap_or_else(|| "localhost".into())
        })
    }

    /// Where other replicas reach this one, given the bound address.
    pub fn advertise_url(&self, bound: SocketAddr) -> String {
        match &self.advertise_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None if bound.ip().is_unspecified() => {
                format!("{}://localhost:{}", self.scheme(), bound.port())
            }
            None => format!("{}://{bound}", self.scheme()),
        }
    }

    fn validate_exposure(&self) -> anyhow::Result<()> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(_), None) => {
                bail!("tls_key: must be set with tls_cert (both PEM files, or neither)")
            }
            (None, Some(_)) => {
                bail!("tls_cert: must be set with tls_key (both PEM files, or neither)")
            }
            _ => {}
        }
        let https_url = self.public_url().is_some_and(|u| u.scheme() == "https");
        if !self.bind.ip().is_loopback() {
            if !self.builtin_tls() && !self.trusted_proxy {
                bail!(
                    "bind: {} is not a loopback address, so operators reach Cordon over a network, \
                     which needs TLS: set tls_cert and tls_key (built-in HTTPS), or trusted_proxy = true \
                     behind a TLS-terminating reverse proxy",
                    self.bind
                );
            }
            if !https_url {
                bail!(
                    "public_url: must be set to Cordon's https:// address when bind ({}) is not \
                     a loopback address",
                    self.bind
                );
            }
        }
        if self.trusted_proxy && !https_url {
            bail!("public_url: must be the proxy's https:// address when trusted_proxy is set");
        }
        if self.builtin_tls() && self.public_url.is_some() && !https_url {
            bail!("public_url: must start with https:// when tls_cert and tls_key are set");
        }
        Ok(())
    }

    /// Whether Cordon itself serves HTTPS (`tls_cert` and `tls_key` set).
    pub fn builtin_tls(&self) -> bool {
        self.tls_cert.is_some() && self.tls_key.is_some()
    }

    /// The per-session resource limits.
    pub fn session_limits(&self) -> crate::sandbox::limits::Limits {
        crate::sandbox::limits::Limits {
            memory_bytes: self.session_memory_mb << 20,
            pids: self.session_pids_max,
            open_files: self.session_open_files_max,
            tmpfs_bytes: self.session_tmpfs_mb << 20,
            cpu_weight: self.session_cpu_weight,
        }
    }

    /// `public_url`, parsed (checked at load).
    pub fn public_url(&self) -> Option<url::Url> {
        self.public_url
            .as_deref()
            .and_then(|u| url::Url::parse(u).ok())
    }

    /// The dashboard's URL in force: `public_url`, else
    /// `http://localhost:<port>` (`https://` with built-in TLS) for the port
    /// actually bound.
    pub fn dashboard_url(&self, bound_port: u16) -> url::Url {
        let scheme = self.scheme();
        self.public_url().unwrap_or_else(|| {
            url::Url::parse(&format!("{scheme}://localhost:{bound_port}/")).expect("a valid URL")
        })
    }

    /// The scheme this process serves: `https` with built-in TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.builtin_tls() { "https" } else { "http" }
    }

    /// The database URL in force, defaulted from `data_dir`.
    pub fn database_url(&self) -> SecretString {
        match &self.database_url {
            Some(url) => url.clone(),
            None => SecretString::from(format!("sqlite://{}/cordon.db", self.data_dir.display())),
        }
    }

    /// The sessions' own settings (`pool_*`, `session_*`, `max_sessions*`,
    /// `tool_timeout_s`, `smoke_probes`, `tenant_limits`, `download_*`,
    /// `upload_*`).
    pub fn session_config(&self) -> crate::sessions::SessionConfig {
        use std::time::Duration;
        crate::sessions::SessionConfig {
            pool_size: self.pool_size as usize,
            pool_refill_delay: Duration::from_millis(self.pool_refill_delay_ms),
            deadline_default_s: self.session_deadline_s,
            deadline_max_s: self.session_deadline_max_s,
            idle: Duration::from_secs(self.session_idle_s),
            max_per_tenant: self.max_sessions_per_tenant as usize,
            max_total: self.max_sessions as usize,
            tool_timeout: Duration::from_secs(self.tool_timeout_s),
            smoke_probes: self.smoke_probes.clone(),
            tenant_limits: self.tenant_limits.clone(),
            download_max_bytes: self.download_max_mb << 20,
            download_session_max_bytes: self.download_session_max_mb << 20,
            upload_max_bytes: self.upload_max_mb << 20,
            upload_in_page: match self.upload_transfer {
                UploadTransfer::Files => false,
                UploadTransfer::Page => true,
                UploadTransfer::Auto => self.sandbox_driver == SandboxDriverSetting::Kube,
            },
            download_over_cdp: match self.download_transfer {
                DownloadTransfer::Files => false,
                DownloadTransfer::Cdp => true,
                DownloadTransfer::Auto => self.sandbox_driver == SandboxDriverSetting::Kube,
            },
        }
    }

    /// What starting the session engine needs.
    pub fn engine_settings(&self) -> crate::sessions::EngineSettings {
        crate::sessions::EngineSettings {
            sandbox: self.sandbox_settings(),
            enforce_limits: self.session_limits,
            limits: self.session_limits(),
            data_dir: self.data_dir.clone(),
            files_dir: self.files_dir().to_path_buf(),
            shared_files: self.shared_dir.is_some(),
            replica_name: self.replica_name(),
            recording_quota_bytes: self.recording_quota_mb << 20,
            sessions: self.session_config(),
            risk: self.risk_settings(),
        }
    }

    /// The sandbox driver's settings (`sandbox_driver`, `chromium_path`,
    /// `exec_*`, `kube_*`, `bind`).
    pub fn sandbox_settings(&self) -> crate::sandbox::SandboxSettings {
        crate::sandbox::SandboxSettings {
            driver: self.sandbox_driver,
            chromium: self.chromium_path.clone(),
            exec_create: self.exec_create.clone(),
            exec_destroy: self.exec_destroy.clone(),
            bind: self.bind,
            kube: crate::sandbox::kube::KubeSettings {
                namespace: self.kube_namespace.clone(),
                pod_template: self.kube_pod_template.clone(),
                deployment: self.kube_deployment.clone(),
                cdp_port: self.kube_cdp_port,
                egress_host: self.kube_egress_host,
                ready_timeout_s: self.kube_ready_timeout_s,
            },
        }
    }

    /// What joining the cluster needs, for a replica bound at `bound`.
    pub fn cluster_settings(&self, bound: SocketAddr) -> crate::cluster::ClusterSettings {
        crate::cluster::ClusterSettings {
            name: self.replica_name(),
            lost_after_s: self.replica_lost_after_s,
            database_url: self.database_url(),
            advertise: self.advertise_url(bound),
            tls_cert: self.tls_cert.clone().filter(|_| self.builtin_tls()),
            cluster_secret: self.cluster_secret.clone(),
        }
    }

    /// The risk gate's settings (`risk_*`, `approval_timeout_s`, `tenant_risk`).
    pub fn risk_settings(&self) -> crate::policy::RiskSettings {
        crate::policy::RiskSettings {
            destructive_words: self.risk_destructive_words.clone(),
            payment_words: self.risk_payment_words.clone(),
            sensitive_domains: self.risk_sensitive_domains.clone(),
            levels: self.risk_levels.clone(),
            approval_timeout_s: self.approval_timeout_s,
            dry_run: self.risk_dry_run,
            tenants: self.tenant_risk.clone(),
        }
    }

    /// The task runner's settings (`model_*`, `task_*`).
    pub fn task_settings(&self) -> crate::tasks::TaskSettings {
        use crate::tasks::uitars::CoordinateMode;
        crate::tasks::TaskSettings {
            model: self
                .model_base_url
                .as_ref()
                .map(|base| crate::tasks::model::ModelConfig {
                    base_url: base.clone(),
                    model: self.model_name.clone(),
                    api_key: self.model_api_key.clone(),
                    timeout: std::time::Duration::from_secs(self.model_timeout_s),
                }),
            coordinates: if self.model_coordinates == "relative1000" {
                CoordinateMode::Relative1000
            } else {
                CoordinateMode::Absolute
            },
            history_images: self.task_history_images as usize,
            frame_wait: std::time::Duration::from_millis(u64::from(self.task_frame_wait_ms)),
            frame_settle: std::time::Duration::from_millis(u64::from(self.task_frame_settle_ms)),
            instruction_max: self.task_instruction_max_bytes as usize,
            max_steps: self.task_max_steps,
        }
    }

    /// Where the master key comes from (`master_key`, `master_key_file`).
    pub fn key_settings(&self) -> crate::crypto::KeySettings {
        crate::crypto::KeySettings {
            master_key: self.master_key.clone(),
            file: self.master_key_file(),
        }
    }

    /// The master key file in force, defaulted from `data_dir`.
    pub fn master_key_file(&self) -> PathBuf {
        self.master_key_file
            .clone()
            .unwrap_or_else(|| self.data_dir.join(crate::crypto::KEY_FILE))
    }

    /// The database URL with any password replaced by `***`.
    pub fn database_url_display(&self) -> String {
        crate::audit::redact::url(self.database_url().expose_secret())
    }

    /// Every setting as TOML, secrets shown as `***`; a setting that is
    /// unset is listed as a comment, so none is missing.
    pub fn show(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        // What is in force, not only what was given.
        v["database_url"] = serde_json::json!(self.database_url_display());
        v["master_key_file"] = serde_json::json!(self.master_key_file().display().to_string());
        let mut out = String::new();
        for name in &KEYS.all {
            match &v[name.as_str()] {
                serde_json::Value::Null => out.push_str(&format!("# {name} is unset\n")),
                value => out.push_str(&format!("{name} = {}\n", toml_value(value))),
            }
        }
        out
    }
}

/// A JSON value written as TOML (strings, numbers, lists, inline tables).
fn toml_value(v: &serde_json::Value) -> String {
    use serde_json::Value as V;
    match v {
        V::Null => "\"\"".into(),
        V::Bool(b) => b.to_string(),
        V::Number(n) => n.to_string(),
        V::String(s) => format!("{s:?}"),
        V::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        V::Object(map) => format!(
            "{{ {} }}",
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{k:?} = {}", toml_value(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `CORDON_*` variables as a figment layer. Values stay strings (figment's own
/// `Env` would turn `CORDON_LOG_LEVEL=1` into a number), and errors name the
/// variable.
struct EnvVars(Vec<(String, String)>);

const ENV_SOURCE: &str = "environment";

impl figment::Provider for EnvVars {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named(ENV_SOURCE)
    }

    fn data(
        &self,
    ) -> Result<figment::value::Map<figment::Profile, figment::value::Dict>, figment::Error> {
        let dict = self
            .0
            .iter()
            .map(|(k, v)| {
                // Numbers stay strings when they do not parse, so the error
                // names the variable and shows what was given.
                let value = match (v.trim().parse::<u64>(), v.trim().parse::<bool>()) {
                    (Ok(n), _) if KEYS.numeric.contains(k) => figment::value::Value::from(n),
                    (_, Ok(b)) if KEYS.boolean.contains(k) => figment::value::Value::from(b),
                    _ => figment::value::Value::from(v.clone()),
                };
                (k.clone(), value)
            })
            .collect();
        Ok(figment::Profile::Default.collect(dict))
    }
}

/// Figment errors can span lines; startup reports one.
fn one_line(err: &figment::Error) -> String {
    err.clone()
        .into_iter()
        .map(|e| {
            let key = if e.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", e.path.join("."))
            };
            let source = e
                .metadata
                .as_ref()
                .map(|m| match &m.source {
                    _ if m.name == ENV_SOURCE => {
                        format!(" (from CORDON_{})", e.path.join("_").to_ascii_uppercase())
                    }
                    Some(src) => format!(" (from {src})"),
                    None => format!(" (from {})", m.name),
                })
                .unwrap_or_default();
            // TOML parse errors come with a source snippet drawn over several
            // lines; keep the message lines only.
            let kind = e.kind.to_string();
            let kind = kind
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty()
                        && !l.starts_with('|')
                        && !l.starts_with(|c: char| c.is_ascii_digit() && l.contains(" | "))
                })
                .collect::<Vec<_>>()
                .join(": ");
            format!("{key}{kind}{source}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The one-line error of settings that must not load.
    fn load_err(pairs: &[(&str, &str)]) -> String {
        Settings::load_from(None, env(pairs))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(s.data_dir, PathBuf::from("data"));
        assert_eq!(s.database_url().expose_secret(), "sqlite://data/cordon.db");
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn environment_overrides_the_file() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "bind = \"127.0.0.1:9000\"\nlog_format = \"json\"").unwrap();
        let s = Settings::load_from(
            Some(file.path()),
            env(&[("CORDON_BIND", "127.0.0.1:9100"), ("CORDON_UNRELATED", "x")]),
        )
        .unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:9100");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn a_bad_environment_value_names_the_key() {
        let err = Settings::load_from(None, env(&[("CORDON_BIND", "not-an-address")]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bind:"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn a_malformed_file_is_reported_on_one_line() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "bind = [").unwrap();
        let err = Settings::load_from(Some(file.path()), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\n'), "{err}");
        assert!(err.contains(&file.path().display().to_string()), "{err}");
    }

    #[test]
    fn an_unknown_key_in_the_file_is_refused() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "bnd = \"127.0.0.1:1\"").unwrap();
        let err = Settings::load_from(Some(file.path()), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bnd"), "{err}");
    }

    #[test]
    fn the_egress_allowlist_reads_a_comma_list_from_the_environment() {
        let s = Settings::load_from(
            None,
            env(&[("CORDON_EGRESS_ALLOW", "127.0.0.1:8000, [::1]:9000")]),
        )
        .unwrap();
        assert_eq!(
            s.egress_allow
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["127.0.0.1:8000", "[::1]:9000"]
        );
    }

    #[test]
    fn new_settings_refuse_nonsense_naming_the_key() {
        for (key, value, starts) in [
            ("CORDON_PUBLIC_URL", "not a url", "public_url:"),
            (
                "CORDON_PUBLIC_URL",
                "ftp://cordon.example.com",
                "public_url:",
            ),
            ("CORDON_TOOL_TIMEOUT_S", "301", "tool_timeout_s:"),
            ("CORDON_TOOL_TIMEOUT_S", "soon", "tool_timeout_s:"),
            ("CORDON_TASK_FRAME_WAIT_MS", "0", "task_frame_wait_ms:"),
            ("CORDON_TASK_FRAME_SETTLE_MS", "0", "task_frame_settle_ms:"),
            (
                "CORDON_TASK_FRAME_SETTLE_MS",
                "10001",
                "task_frame_settle_ms:",
            ),
            ("CORDON_REPLICA_NAME", "a/b", "replica_name:"),
            ("CORDON_REPLICA_NAME", "has space", "replica_name:"),
            (
                "CORDON_REPLICA_NAME",
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "replica_name:",
            ),
            ("CORDON_CLUSTER_SECRET", "short", "cluster_secret:"),
            ("CORDON_ADVERTISE_URL", "ftp://peer:1", "advertise_url:"),
            (
                "CORDON_ADVERTISE_URL",
                "http://peer:1/api",
                "advertise_url:",
            ),
            ("CORDON_REPLICA_LOST_AFTER_S", "1", "replica_lost_after_s:"),
            ("CORDON_TASK_FRAME_WAIT_MS", "-5", "task_frame_wait_ms:"),
            ("CORDON_TASK_FRAME_WAIT_MS", "60000", "task_frame_wait_ms:"),
            ("CORDON_DOWNLOAD_MAX_MB", "0", "download_max_mb:"),
            ("CORDON_UPLOAD_MAX_MB", "100000", "upload_max_mb:"),
            (
                "CORDON_DOWNLOAD_SESSION_MAX_MB",
                "10",
                "download_session_max_mb:",
            ),
        ] {
            let err = load_err(&[(key, value)]);
            assert!(err.starts_with(starts), "{key}={value}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let ok = Settings::load_from(
            None,
            env(&[("CORDON_PUBLIC_URL", "https://cordon.example.com")]),
        )
        .unwrap();
        assert_eq!(
            ok.public_url().unwrap().host_str(),
            Some("cordon.example.com")
        );
    }

    #[test]
    fn tenant_limits_override_the_defaults_and_refuse_nonsense() {
        let s = Settings::load_from(
            None,
            env(&[(
                "CORDON_TENANT_LIMITS",
                r#"{"acme": {"memory_mb": 256, "cpu_weight": 50}}"#,
            )]),
        )
        .unwrap();
        let base = s.session_limits();
        let acme = s.tenant_limits["acme"].over(base);
        assert_eq!(
            (acme.memory_bytes, acme.pids, acme.cpu_weight),
            (256 << 20, base.pids, 50)
        );
        for (value, starts) in [
            (
                r#"{"acme": {"memory_mb": 1}}"#,
                "tenant_limits.acme.memory_mb:",
            ),
            (
                r#"{"acme": {"pids_max": 0}}"#,
                "tenant_limits.acme.pids_max:",
            ),
            (r#"{"../x": {"cpu_weight": 5}}"#, "tenant_limits:"),
            (r#"{"acme": {"swap": 5}}"#, "tenant_limits"),
        ] {
            let err = load_err(&[("CORDON_TENANT_LIMITS", value)]);
            assert!(err.starts_with(starts), "{value}: {err}");
        }
    }

    #[test]
    fn booleans_are_read_from_the_environment() {
        let s = Settings::load_from(None, env(&[("CORDON_SESSION_LIMITS", "false")])).unwrap();
        assert!(!s.session_limits);
        assert!(Settings::load_from(None, env(&[])).unwrap().session_limits);
        let err = load_err(&[("CORDON_SESSION_LIMITS", "maybe")]);
        assert!(err.starts_with("session_limits:"), "{err}");
    }

    #[test]
    fn the_process_driver_is_refused_on_a_non_loopback_bind() {
        let err = load_err(&[
            ("CORDON_SANDBOX_DRIVER", "process"),
            ("CORDON_BIND", "0.0.0.0:8080"),
        ]);
        assert!(err.starts_with("sandbox_driver:"), "{err}");
        assert!(
            Settings::load_from(None, env(&[("CORDON_SANDBOX_DRIVER", "process")])).is_ok(),
            "on loopback it runs"
        );
    }

    #[test]
    fn the_shared_dir_is_an_absolute_path_and_holds_the_files_when_set() {
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(s.files_dir(), s.data_dir.as_path());
        let s = Settings::load_from(None, env(&[("CORDON_SHARED_DIR", "/mnt/cordon")])).unwrap();
        assert_eq!(s.files_dir(), Path::new("/mnt/cordon"));
        for bad in ["relative/dir", ""] {
            let err = Settings::load_from(None, env(&[("CORDON_SHARED_DIR", bad)]))
                .err()
                .map(|e| format!("{e:#}"))
                .unwrap_or_default();
            assert!(
                err.starts_with("shared_dir: must be an absolute path"),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn uploads_go_through_the_page_with_kube_unless_told_otherwise() {
        let in_page = |vars: &[(&str, &str)]| {
            let s = Settings::load_from(None, env(vars)).unwrap();
            s.session_config().upload_in_page
        };
        let kube = [
            ("CORDON_SANDBOX_DRIVER", "kube"),
            ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
            ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
        ];
        assert!(!in_page(&[]), "a local browser reads the upload directory");
        assert!(in_page(&kube), "a pod shares no directory");
        assert!(in_page(&[("CORDON_UPLOAD_TRANSFER", "page")]));
        let mut files = kube.to_vec();
        files.push(("CORDON_UPLOAD_TRANSFER", "files"));
        assert!(!in_page(&files), "the operator's word wins");
        let err = Settings::load_from(None, env(&[("CORDON_UPLOAD_TRANSFER", "fax")]))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.starts_with("upload_transfer"), "{err}");
    }

    #[test]
    fn a_misspelled_variable_is_named_with_the_setting_it_meant() {
        let vars = |names: &[&str]| {
            misspelled_env(names.iter().map(|n| ((*n).to_owned(), "x".to_owned())))
        };
        assert_eq!(
            vars(&[
                "CORDON_DOWNLOAD_MAXMB",
                "CORDON_SANDBOX_DRIVERS",
                "CORDON_BIND",
                "CORDON_PG_DIR",
                "CORDON_BIN",
                "CORDON_SOMETHING_ELSE_ENTIRELY",
                "PATH",
            ]),
            vec![
                (
                    "CORDON_DOWNLOAD_MAXMB".to_owned(),
                    "CORDON_DOWNLOAD_MAX_MB".to_owned()
                ),
                (
                    "CORDON_SANDBOX_DRIVERS".to_owned(),
                    "CORDON_SANDBOX_DRIVER".to_owned()
                ),
            ]
        );
        assert_eq!(edits("kitten", "sitting"), 3);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("same", "same"), 0);
    }

    #[test]
    fn downloads_are_taken_over_cdp_with_kube_unless_told_otherwise() {
        let over_cdp = |vars: &[(&str, &str)]| {
            let s = Settings::load_from(None, env(vars)).unwrap();
            s.session_config().download_over_cdp
        };
        let kube = [
            ("CORDON_SANDBOX_DRIVER", "kube"),
            ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
            ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
        ];
        assert!(!over_cdp(&[]), "a local browser saves into the folder");
        assert!(over_cdp(&kube), "a pod shares no directory");
        assert!(over_cdp(&[("CORDON_DOWNLOAD_TRANSFER", "cdp")]));
        let mut files = kube.to_vec();
        files.push(("CORDON_DOWNLOAD_TRANSFER", "files"));
        assert!(!over_cdp(&files), "the operator's word wins");
        let err = Settings::load_from(None, env(&[("CORDON_DOWNLOAD_TRANSFER", "ftp")]))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.starts_with("download_transfer"), "{err}");
    }

    #[test]
    fn the_kube_driver_needs_its_template_and_egress_host() {
        let kube = [
            ("CORDON_SANDBOX_DRIVER", "kube"),
            ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
            ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
        ];
        let s = Settings::load_from(None, env(&kube)).unwrap();
        assert_eq!(s.kube_deployment, "cordon");
        assert_eq!((s.kube_cdp_port, s.kube_ready_timeout_s), (9222, 60));
        assert_eq!(
            s.egress_bind_host(),
            "10.1.2.3".parse::<std::net::IpAddr>().unwrap(),
            "the guard listens where the pods are told to connect"
        );
        for (drop, starts) in [(1, "kube_pod_template:"), (2, "kube_egress_host:")] {
            let mut pairs = kube.to_vec();
            pairs.remove(drop);
            let err = load_err(&pairs);
            assert!(err.starts_with(starts), "{err}");
        }
        for (key, value, starts) in [
            ("CORDON_KUBE_EGRESS_HOST", "127.0.0.1", "kube_egress_host:"),
            ("CORDON_KUBE_EGRESS_HOST", "pod", "kube_egress_host:"),
            ("CORDON_EGRESS_BIND_HOST", "127.0.0.1", "egress_bind_host:"),
            ("CORDON_KUBE_READY_TIMEOUT_S", "0", "kube_ready_timeout_s:"),
            ("CORDON_KUBE_CDP_PORT", "0", "kube_cdp_port:"),
            ("CORDON_KUBE_CDP_PORT", "70000", "kube_cdp_port:"),
            ("CORDON_KUBE_DEPLOYMENT", "no spaces", "kube_deployment:"),
            ("CORDON_KUBE_NAMESPACE", "Upper", "kube_namespace:"),
        ] {
            let mut pairs = kube.to_vec();
            pairs.push((key, value));
            let err = load_err(&pairs);
            assert!(err.starts_with(starts), "{key}={value}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn the_egress_guard_leaves_loopback_only_for_the_kube_driver() {
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert!(s.egress_bind_host().is_loopback());
        let err = load_err(&[("CORDON_EGRESS_BIND_HOST", "0.0.0.0")]);
        assert!(err.starts_with("egress_bind_host:"), "{err}");
        let err = load_err(&[
            ("CORDON_SANDBOX_DRIVER", "exec"),
            ("CORDON_EXEC_CREATE", "/bin/true"),
            ("CORDON_EXEC_DESTROY", "/bin/true"),
            ("CORDON_EGRESS_BIND_HOST", "10.0.0.1"),
        ]);
        assert!(err.starts_with("egress_bind_host:"), "{err}");
        let s = Settings::load_from(
            None,
            env(&[
                ("CORDON_SANDBOX_DRIVER", "kube"),
                ("CORDON_KUBE_POD_TEMPLATE", "/t.yaml"),
                ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
                ("CORDON_EGRESS_BIND_HOST", "0.0.0.0"),
            ]),
        )
        .unwrap();
        assert!(s.egress_bind_host().is_unspecified());
        assert!(
            Settings::load_from(None, env(&[("CORDON_EGRESS_BIND_HOST", "::1")])).is_ok(),
            "loopback is always allowed"
        );
    }

    #[test]
    fn a_non_loopback_bind_needs_tls_or_a_trusted_proxy() {
        let err = load_err(&[("CORDON_BIND", "0.0.0.0:8443")]);
        assert!(err.starts_with("bind:"), "{err}");
        assert!(
            err.contains("tls_cert") && err.contains("trusted_proxy"),
            "names both ways out: {err}"
        );
        assert!(!err.contains('\n'), "{err}");
        let err = load_err(&[
            ("CORDON_BIND", "192.0.2.10:8443"),
            ("CORDON_PUBLIC_URL", "https://cordon.example.com:8443"),
        ]);
        assert!(
            err.starts_with("bind:"),
            "an https URL alone is not TLS: {err}"
        );
    }

    #[test]
    fn a_non_loopback_bind_needs_an_https_public_url() {
        let tls = [
            ("CORDON_BIND", "0.0.0.0:8443"),
            ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
            ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
        ];
        let proxy = [
            ("CORDON_BIND", "0.0.0.0:8080"),
            ("CORDON_TRUSTED_PROXY", "true"),
        ];
        for base in [&tls[..], &proxy[..]] {
            let err = load_err(base);
            assert!(err.starts_with("public_url:"), "unset: {err}");
            let mut http = base.to_vec();
            http.push(("CORDON_PUBLIC_URL", "http://cordon.example.com"));
            let err = load_err(&http);
            assert!(
                err.starts_with("public_url:") && err.contains("https://"),
                "{err}"
            );
            let mut https = base.to_vec();
            https.push(("CORDON_PUBLIC_URL", "https://cordon.example.com:8443"));
            let s = Settings::load_from(None, env(&https)).unwrap();
            assert_eq!(
                s.dashboard_url(8443).as_str(),
                "https://cordon.example.com:8443/"
            );
        }
    }

    #[test]
    fn a_trusted_proxy_needs_an_https_public_url_on_loopback_too() {
        let err = load_err(&[("CORDON_TRUSTED_PROXY", "true")]);
        assert!(err.starts_with("public_url:"), "{err}");
        let err = load_err(&[
            ("CORDON_TRUSTED_PROXY", "true"),
            ("CORDON_PUBLIC_URL", "http://cordon.example.com"),
        ]);
        assert!(err.starts_with("public_url:"), "{err}");
        let s = Settings::load_from(
            None,
            env(&[
                ("CORDON_TRUSTED_PROXY", "true"),
                ("CORDON_PUBLIC_URL", "https://cordon.example.com"),
            ]),
        )
        .unwrap();
        assert!(s.trusted_proxy && !s.builtin_tls());
        assert!(!Settings::load_from(None, env(&[])).unwrap().trusted_proxy);
    }

    #[test]
    fn tls_cert_and_tls_key_are_set_together() {
        let err = load_err(&[("CORDON_TLS_CERT", "/etc/cordon/cert.pem")]);
        assert!(err.starts_with("tls_key:"), "{err}");
        let err = load_err(&[("CORDON_TLS_KEY", "/etc/cordon/key.pem")]);
        assert!(err.starts_with("tls_cert:"), "{err}");
    }

    #[test]
    fn builtin_tls_on_loopback_serves_https_localhost_unless_told_otherwise() {
        let tls = [
            ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
            ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
        ];
        let s = Settings::load_from(None, env(&tls)).unwrap();
        assert!(s.builtin_tls());
        assert_eq!(s.dashboard_url(8443).as_str(), "https://localhost:8443/");
        let mut http = tls.to_vec();
        http.push(("CORDON_PUBLIC_URL", "http://localhost:8443"));
        let err = load_err(&http);
        assert!(err.starts_with("public_url:"), "{err}");
        let plain = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(plain.dashboard_url(8080).as_str(), "http://localhost:8080/");
    }

    #[test]
    fn with_builtin_tls_replicas_advertise_https_and_an_http_advertise_url_is_refused() {
        let tls = [
            ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
            ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
        ];
        let s = Settings::load_from(None, env(&tls)).unwrap();
        let bound: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        assert_eq!(s.advertise_url(bound), "https://127.0.0.1:8443");
        let wildcard: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        assert_eq!(s.advertise_url(wildcard), "https://localhost:8443");
        let mut http = tls.to_vec();
        http.push(("CORDON_ADVERTISE_URL", "http://10.0.0.7:8443"));
        let err = load_err(&http);
        assert!(
            err.starts_with("advertise_url:") && err.contains("https://"),
            "{err}"
        );
        let mut https = tls.to_vec();
        https.push(("CORDON_ADVERTISE_URL", "https://10.0.0.7:8443/"));
        let s = Settings::load_from(None, env(&https)).unwrap();
        assert_eq!(s.advertise_url(bound), "https://10.0.0.7:8443");
        let plain = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(plain.advertise_url(bound), "http://127.0.0.1:8443");
    }

    #[test]
    fn a_bad_egress_allow_entry_stops_the_load_naming_the_setting() {
        let err = load_err(&[("CORDON_EGRESS_ALLOW", "127.0.0.1:8000, nonsense")]);
        assert!(err.starts_with("egress_allow:"), "{err}");
        assert!(err.contains("nonsense"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn config_show_lists_every_setting_and_hides_secrets() {
        let s = Settings::load_from(
            None,
            env(&[
                ("CORDON_MASTER_KEY", &"ab".repeat(32)),
                (
                    "CORDON_SMOKE_PROBES",
                    r#"{"example.com":{"url":"https://example.com/","expect_status":200}}"#,
                ),
                ("CORDON_GRANT_EXPIRY_MIN", r#"{"acme":60}"#),
            ]),
        )
        .unwrap();
        let shown = s.show();
        for name in setting_names() {
            assert!(
                shown
                    .lines()
                    .any(|l| l.starts_with(&format!("{name} = "))
                        || l == format!("# {name} is unset")),
                "{name} missing from:\n{shown}"
            );
        }
        assert!(setting_names().len() >= 27, "{:?}", setting_names());
        assert!(shown.contains("master_key = \"***\""), "{shown}");
        assert!(!shown.contains(&"ab".repeat(32)), "{shown}");
        assert!(
            shown.contains("grant_expiry_min = { \"acme\" = 60 }"),
            "{shown}"
        );
        assert!(
            shown.contains("smoke_probes = { \"example.com\" = {"),
            "{shown}"
        );
        // What is shown loads back as the same settings.
        let mut file = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut file, shown.as_bytes()).unwrap();
        let again = Settings::load_from(Some(file.path()), env(&[])).unwrap();
        assert_eq!(again.smoke_probes, s.smoke_probes);
        assert_eq!(again.tool_timeout_s, s.tool_timeout_s);
    }

    #[test]
    fn smoke_probes_come_from_the_file_or_json_in_the_environment() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(
            file,
            "[smoke_probes.\"example.com\"]\nurl = \"https://example.com/me\"\nexpect_status = 200"
        )
        .unwrap();
        let s = Settings::load_from(Some(file.path()), env(&[])).unwrap();
        assert_eq!(s.smoke_probes["example.com"].expect_status, Some(200));
        let json = r#"{"a.test": {"url": "http://a.test/", "expect_text": "hi"}}"#;
        let s = Settings::load_from(None, env(&[("CORDON_SMOKE_PROBES", json)])).unwrap();
        assert_eq!(s.smoke_probes["a.test"].expect_text.as_deref(), Some("hi"));
        let err = Settings::load_from(None, env(&[("CORDON_SMOKE_PROBES", "{oops")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("smoke_probes"), "{err}");
    }

    #[test]
    fn inconsistent_session_limits_are_refused() {
        let err = load_err(&[("CORDON_SESSION_DEADLINE_S", "99999")]);
        assert!(err.starts_with("session_deadline_s"), "{err}");
        let err = load_err(&[("CORDON_POOL_SIZE", "x")]);
        assert!(err.contains("CORDON_POOL_SIZE"), "{err}");
        let s = Settings::load_from(None, env(&[("CORDON_POOL_SIZE", "3")])).unwrap();
        assert_eq!(s.pool_size, 3);
        assert_eq!(s.pool_refill_delay_ms, 1000, "the default");
        let s = Settings::load_from(None, env(&[("CORDON_POOL_REFILL_DELAY_MS", "0")])).unwrap();
        assert_eq!(s.pool_refill_delay_ms, 0);
        let err = load_err(&[("CORDON_POOL_REFILL_DELAY_MS", "600000")]);
        assert!(err.starts_with("pool_refill_delay_ms"), "{err}");
        let err = load_err(&[("CORDON_POOL_REFILL_DELAY_MS", "-1")]);
        assert!(err.contains("CORDON_POOL_REFILL_DELAY_MS"), "{err}");
        let s = Settings::load_from(None, env(&[])).unwrap();
        assert_eq!(s.egress_log_retention_days, 30, "the default");
        let err = load_err(&[("CORDON_EGRESS_LOG_RETENTION_DAYS", "0")]);
        assert!(err.starts_with("egress_log_retention_days"), "{err}");
    }

    #[test]
    fn the_master_key_file_defaults_into_the_data_dir_and_can_be_moved() {
        let s = Settings::load_from(None, env(&[("CORDON_DATA_DIR", "/srv/cordon")])).unwrap();
        assert_eq!(s.master_key_file(), PathBuf::from("/srv/cordon/master.key"));
        assert!(
            s.show()
                .contains("master_key_file = \"/srv/cordon/master.key\""),
            "{}",
            s.show()
        );
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "master_key_file = \"/etc/cordon/key\"").unwrap();
        let s = Settings::load_from(Some(file.path()), env(&[])).unwrap();
        assert_eq!(s.master_key_file(), PathBuf::from("/etc/cordon/key"));
        let s = Settings::load_from(
            Some(file.path()),
            env(&[("CORDON_MASTER_KEY_FILE", "/run/keys/cordon")]),
        )
        .unwrap();
        assert_eq!(s.master_key_file(), PathBuf::from("/run/keys/cordon"));
        assert!(s.show().contains("master_key_file = \"/run/keys/cordon\""));
    }

    #[test]
    fn an_unknown_database_scheme_is_refused() {
        let err = Settings::load_from(None, env(&[("CORDON_DATABASE_URL", "mysql://x/y")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("database_url") && err.contains("mysql"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_config_file_is_an_error() {
        let err = Settings::load_from(Some(Path::new("/nonexistent/cordon.toml")), env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not found"), "{err}");
    }

    #[test]
    fn show_and_debug_hide_the_database_password() {
        let s = Settings::load_from(
            None,
            env(&[(
                "CORDON_DATABASE_URL",
                "postgres://cordon:hunter2@127.0.0.1:5432/cordon",
            )]),
        )
        .unwrap();
        assert!(!s.show().contains("hunter2"));
        assert!(!format!("{s:?}").contains("hunter2"));
        assert!(
            s.show()
                .contains("postgres://cordon:***@127.0.0.1:5432/cordon"),
            "{}",
            s.show()
        );
    }
}

#[cfg(test)]
mod risk_tests {
    //! The risk settings as they load (policy/rules.rs owns what they mean).
    use std::time::Duration;

    use super::*;
    use crate::policy::{Level, Policy, Rule};

    fn load(pairs: &[(&str, &str)]) -> anyhow::Result<Settings> {
        Settings::load_from(
            None,
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    #[test]
    fn defaults_hold_the_word_lists_and_the_rules_levels() {
        let s = load(&[]).unwrap();
        let p = Policy::from_settings(&s.risk_settings());
        let r = p.rules("acme");
        assert!(r.destructive.contains(&"close account".to_owned()));
        assert!(r.payment.contains(&"place order".to_owned()));
        assert!(r.sensitive_domains.is_empty());
        assert_eq!(r.level(Rule::DestructiveClick), Level::High);
        assert_eq!(r.level(Rule::PaymentClick), Level::Critical);
        assert_eq!(r.timeout, Duration::from_secs(60));
        assert!(!r.dry_run);
    }

    #[test]
    fn a_tenants_rules_override_the_settings_and_others_keep_them() {
        let s = load(&[
            ("CORDON_RISK_SENSITIVE_DOMAINS", "Bank.test, .pay.test"),
            ("CORDON_RISK_LEVELS", r#"{"destructive_click": "critical"}"#),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"dry_run": true, "approval_timeout_s": 5, "levels": {"payment_click": "medium"}, "payment_words": ["Zahlen"]}}"#,
            ),
        ])
        .unwrap();
        let p = Policy::from_settings(&s.risk_settings());
        let other = p.rules("other");
        assert_eq!(other.sensitive_domains, ["bank.test", "pay.test"]);
        assert_eq!(other.level(Rule::DestructiveClick), Level::Critical);
        assert!(!other.dry_run);
        let acme = p.rules("acme");
        assert!(acme.dry_run);
        assert_eq!(acme.timeout, Duration::from_secs(5));
        assert_eq!(acme.level(Rule::PaymentClick), Level::Medium);
        assert_eq!(acme.level(Rule::DestructiveClick), Level::Critical);
        assert_eq!(acme.payment, ["zahlen"]);
    }

    #[test]
    fn nonsense_is_refused_naming_the_setting() {
        for (key, value, starts) in [
            ("CORDON_APPROVAL_TIMEOUT_S", "0", "approval_timeout_s:"),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"approval_timeout_s": 99999}}"#,
                "tenant_risk.acme.approval_timeout_s:",
            ),
            (
                "CORDON_TENANT_RISK",
                r#"{"../x": {"dry_run": true}}"#,
                "tenant_risk:",
            ),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"bogus": 1}}"#,
                "tenant_risk",
            ),
            (
                "CORDON_RISK_LEVELS",
                r#"{"destructive_click": "huge"}"#,
                "risk_levels",
            ),
        ] {
            let err = load(&[(key, value)]).unwrap_err().to_string();
            assert!(err.starts_with(starts), "{value}: {err}");
        }
    }
}
