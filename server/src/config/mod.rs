//! Typed settings, read once at start: defaults in code, then an optional
//! `cordon.toml`, then `CORDON_*` environment variables.
//!
//! Each module declares its own section — its settings, their defaults,
//! their doc comments and their rules — in its `settings.rs`
//! (`sessions::SessionsSection`, `sandbox::settings::SandboxSection`,
//! `tasks::TasksSection`, …); [`Settings`] joins them with
//! `#[serde(flatten)]`, so the keys stay flat (`pool_size`, not
//! `sessions.pool_size`). The few settings whose owners sit above this
//! layer (the listener, logging, TLS: `startup`, `telemetry`, `tls`) are
//! [`ServerSection`], here. The environment keys, which of them are
//! numbers, `config show`, `config docs` and `Debug` are all derived from
//! the joined declaration's schema (`keys.rs`).

mod keys;
mod load;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use figment::Figment;
use figment::providers::{Format, Toml};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

pub use crate::domain::DatabaseKind;
pub use crate::egress::EgressResolver;
pub use crate::sandbox::SandboxDriverSetting;
pub use crate::sandbox::limits::TenantLimits;
pub use crate::sessions::{DownloadTransfer, SmokeProbe, UploadTransfer};
pub use keys::{REFERENCE_HEADER, misspelled_env, reference, setting_names};

use load::{EnvVars, one_line};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The settings of the process itself: where it listens and stores, how it
/// logs, how operators reach it. Their owners (`startup`, `telemetry`,
/// `tls`, `edge`) sit above `config`, so the section is declared here.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ServerSection {
    /// Address the HTTP server listens on; port 0 picks a free port. A
    /// non-loopback address needs `tls_cert` and `tls_key` (or
    /// `trusted_proxy`) and an https `public_url`.
    #[serde(default = "d::bind")]
    #[schemars(with = "String")]
    pub bind: SocketAddr,
    /// Directory for the SQLite database, (by default) the key file,
    /// screenshots and kept downloads; created on first run.
    #[serde(default = "d::data_dir")]
    pub data_dir: PathBuf,
    /// `sqlite://…` or `postgres://…`; defaults to `sqlite://<data_dir>/cordon.db`.
    /// Shown with its password masked (a PostgreSQL URL may carry one).
    #[serde(default, serialize_with = "masked_url")]
    #[schemars(with = "Option<String>")]
    pub database_url: Option<SecretString>,
    /// `text` or `json` (one object per line).
    #[serde(default = "d::log_format")]
    pub log_format: LogFormat,
    /// A `tracing` filter such as `info` or `cordon=debug,info`; `RUST_LOG`
    /// overrides it.
    #[serde(default = "d::log_level")]
    pub log_level: String,
    /// Directory holding the built dashboard assets (`pkg/` inside).
    #[serde(default = "d::site_root")]
    pub site_root: PathBuf,
    /// The URL operators reach the dashboard at (`https://cordon.example.com`);
    /// its host is accepted in `Host` and `Origin` besides `localhost`,
    /// `127.0.0.1` and `[::1]` on the bound port, and it is the passkeys'
    /// relying party (its host their RP id, its origin the only one
    /// accepted), and the base of enrollment links. Unset:
    /// `http://localhost:<bound port>` (`https://` with built-in TLS).
    /// Passkeys need a host name, not an IP address; `https` makes the
    /// session cookie `Secure`.
    #[serde(default)]
    pub public_url: Option<String>,
    /// PEM file with the certificate chain (server certificate first) for
    /// built-in HTTPS; set together with `tls_key` (both or neither; checked
    /// at start). With both set, Cordon speaks only HTTPS on `bind`.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// PEM file with the private key of `tls_cert` (PKCS#8, PKCS#1 or SEC1);
    /// set together with `tls_cert`.
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// TLS is terminated by a reverse proxy in front of Cordon, which then
    /// listens on plain HTTP behind it; Cordon requires `public_url` to be
    /// the proxy's https:// address.
    #[serde(default)]
    pub trusted_proxy: bool,
    /// Threads that run the control plane's own work (HTTP, CDP, the egress
    /// guard, the live view), at most 1024. 0 (the default) is one per four
    /// cores, so one thread up to 7 cores: the browsers take the machine's
    /// CPU, and the control plane an eighth of it with 8 busy sessions on 2
    /// cores (BENCHMARKS.md, 2026-11-27 18:30). One thread has no hand-offs
    /// between threads, about 0.2–0.3 ms less per tool call on 2 cores
    /// (2026-11-27 15:35), and under load did as well as a worker per core.
    /// 1 is one thread, N is N worker threads. Image work and file walks
    /// run on their own threads either way. `cordon serve` only.
    #[serde(default)]
    pub runtime_workers: u16,
}

/// The most `runtime_workers` may ask for.
pub const MAX_RUNTIME_WORKERS: u16 = 1024;

impl ServerSection {
    /// The runtime's threads `runtime_workers` asks for on a machine
    /// with `cores` cores: 0 is one per four cores, at least one.
    pub fn runtime_threads(&self, cores: usize) -> usize {
        match self.runtime_workers {
            0 => (cores / 4).max(1),
            n => usize::from(n),
        }
    }

    /// The async runtime `runtime_workers` asks for: one thread that runs
    /// everything, or that many workers.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.runtime_threads(cores) {
            1 => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            n => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build(),
        }
    }
}

/// The defaults of [`ServerSection`], one function per setting that has one.
mod d {
    use super::LogFormat;
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
    pub fn site_root() -> PathBuf {
        "target/site".into()
    }
}

fn masked_url<S: serde::Serializer>(v: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(url) => s.serialize_some(&crate::redact::url(url.expose_secret())),
        None => s.serialize_none(),
    }
}

/// All of Cordon's settings: every owner's section, flattened, so each
/// key is the field's name (`cordon.toml`) and `CORDON_<NAME>` (the
/// environment). A section is read on its own from the layers (`load_from`),
/// so an error names its key and where it came from; a key no section
/// declares is refused (`load::refuse_unknown_keys`).
#[derive(Clone, Serialize, schemars::JsonSchema)]
pub struct Settings {
    /// The process's own (`bind`, `data_dir`, `database_url`, `log_*`,
    /// `site_root`, `public_url`, `tls_*`, `trusted_proxy`).
    #[serde(flatten)]
    pub server: ServerSection,
    /// The sandbox driver and the per-session limits.
    #[serde(flatten)]
    pub sandbox: crate::sandbox::settings::SandboxSection,
    /// `kube_*`.
    #[serde(flatten)]
    pub kube: crate::sandbox::kube::KubeSettings,
    /// `egress_*`.
    #[serde(flatten)]
    pub egress: crate::egress::EgressSection,
    /// The sessions' (`pool_*`, `session_deadline*`, `max_sessions*`, …).
    #[serde(flatten)]
    pub sessions: crate::sessions::SessionsSection,
    /// `recording_*`.
    #[serde(flatten)]
    pub recording: crate::recording::settings::RecordingSection,
    /// `grant_expiry_min`.
    #[serde(flatten)]
    pub grants: crate::grants::settings::GrantsSection,
    /// `master_key`, `master_key_file`.
    #[serde(flatten)]
    pub key: crate::crypto::settings::KeySection,
    /// `dashboard_*`.
    #[serde(flatten)]
    pub auth: crate::auth::settings::AuthSection,
    /// `live_*`, `tenant_live_links`.
    #[serde(flatten)]
    pub live: crate::live::settings::LiveSection,
    /// `model_*`, `task_*`.
    #[serde(flatten)]
    pub tasks: crate::tasks::TasksSection,
    /// `replica_*`, `cluster_secret`, `advertise_url`, `shared_dir`.
    #[serde(flatten)]
    pub cluster: crate::cluster::settings::ClusterSection,
    /// `risk_*`, `approval_timeout_s`, `tenant_risk`.
    #[serde(flatten)]
    pub risk: crate::policy::RiskSettings,
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
                    keys::KEYS.all.contains(&key).then_some((key, v))
                })
                .collect(),
        );
        let figment = figment.merge(vars);
        let settings = Self::extract(&figment).map_err(|e| anyhow::anyhow!(one_line(&e)))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Each section read from the layers on its own (figment's own
    /// deserializer, so an error keeps its key and source; serde's
    /// `flatten` would lose both).
    fn extract(figment: &Figment) -> Result<Self, Box<figment::Error>> {
        load::refuse_unknown_keys(figment)?;
        Ok(Self {
            server: figment.extract()?,
            sandbox: figment.extract()?,
            kube: figment.extract()?,
            egress: figment.extract()?,
            sessions: figment.extract()?,
            recording: figment.extract()?,
            grants: figment.extract()?,
            key: figment.extract()?,
            auth: figment.extract()?,
            live: figment.extract()?,
            tasks: figment.extract()?,
            cluster: figment.extract()?,
            risk: figment.extract()?,
        })
    }

    /// Every section's rules, and those that span sections; the first
    /// broken one stops the load, naming its setting. (Where two checks can
    /// fail together, the more specific goes first: `sandbox_driver`
    /// "process" off loopback before `bind` without TLS.)
    fn validate(&self) -> anyhow::Result<()> {
        let server = &self.server;
        if let Some(url) = &server.database_url {
            DatabaseKind::of(url.expose_secret())?;
        }
        if self.sandbox.sandbox_driver == SandboxDriverSetting::Process
            && !server.bind.ip().is_loopback()
        {
            bail!(
                "sandbox_driver: \"process\" leaves each browser's DevTools port open to every \
                 local process; it is refused when bind is not a loopback address (use bwrap)"
            );
        }
        self.sandbox.validate_driver()?;
        self.validate_kube()?;
        self.auth.validate_idle()?;
        self.tasks.validate_model()?;
        self.cluster.validate(self.builtin_tls())?;
        self.tasks.validate_bounds()?;
        self.live.validate_frames()?;
        self.sessions.validate()?;
        self.auth.validate_lifetime()?;
        self.egress.validate()?;
        if let Some(raw) = &server.public_url {
            let url = url::Url::parse(raw)
                .map_err(|e| anyhow::anyhow!("public_url: {e} (expected http(s)://host[:port])"))?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                bail!("public_url: must be an http:// or https:// URL with a host");
            }
        }
        self.validate_exposure()?;
        self.sandbox.validate_limits()?;
        self.recording.validate()?;
        self.sandbox.validate_tenant_limits()?;
        self.live.validate_links()?;
        crate::policy::rules::validate(&self.risk)?;
        if server.runtime_workers > MAX_RUNTIME_WORKERS {
            bail!(
                "runtime_workers: {} threads is more than the {MAX_RUNTIME_WORKERS} allowed \
                 (0 is one per four cores)",
                server.runtime_workers
            );
        }
        tracing_subscriber::EnvFilter::try_new(&server.log_level)
            .with_context(|| format!("log_level: invalid filter {:?}", server.log_level))?;
        Ok(())
    }

    /// The `kube` driver's settings, and the egress bind address only it
    /// may open beyond loopback.
    fn validate_kube(&self) -> anyhow::Result<()> {
        let kube = self.sandbox.sandbox_driver == SandboxDriverSetting::Kube;
        let bind_host = self.egress.egress_bind_host;
        if bind_host.is_some_and(|h| !h.is_loopback()) && !kube {
            bail!(
                "egress_bind_host: must be a loopback address unless sandbox_driver is \"kube\" \
                 (local browsers reach the guard on loopback; anything else opens it to the network)"
            );
        }
        if !kube {
            return Ok(());
        }
        self.kube.validate_pod_settings()?;
        if bind_host.is_some_and(|h| h.is_loopback()) {
            bail!(
                "egress_bind_host: browser pods cannot reach a loopback listener; leave it unset \
                 (kube_egress_host) or set this pod's IP (or 0.0.0.0) with sandbox_driver \"kube\""
            );
        }
        self.kube.validate_limits()
    }

    /// Who may reach the listener, and over what: a non-loopback `bind`
    /// serves operators on a network, which needs TLS (built in, or from a
    /// reverse proxy) and the https address they use, since passkeys and the
    /// session cookie are bound to it.
    fn validate_exposure(&self) -> anyhow::Result<()> {
        let server = &self.server;
        match (&server.tls_cert, &server.tls_key) {
            (Some(_), None) => {
                bail!("tls_key: must be set with tls_cert (both PEM files, or neither)")
            }
            (None, Some(_)) => {
                bail!("tls_cert: must be set with tls_key (both PEM files, or neither)")
            }
            _ => {}
        }
        let https_url = self.public_url().is_some_and(|u| u.scheme() == "https");
        if !server.bind.ip().is_loopback() {
            if !self.builtin_tls() && !server.trusted_proxy {
                bail!(
                    "bind: {} is not a loopback address, so operators reach Cordon over a network, \
                     which needs TLS: set tls_cert and tls_key (built-in HTTPS), or trusted_proxy = true \
                     behind a TLS-terminating reverse proxy",
                    server.bind
                );
            }
            if !https_url {
                bail!(
                    "public_url: must be set to Cordon's https:// address when bind ({}) is not \
                     a loopback address",
                    server.bind
                );
            }
        }
        if server.trusted_proxy && !https_url {
            bail!("public_url: must be the proxy's https:// address when trusted_proxy is set");
        }
        if self.builtin_tls() && server.public_url.is_some() && !https_url {
            bail!("public_url: must start with https:// when tls_cert and tls_key are set");
        }
        Ok(())
    }

    /// Where the egress guard's listeners bind (`egress_bind_host`, or its default).
    pub fn egress_bind_host(&self) -> std::net::IpAddr {
        match (
            self.egress.egress_bind_host,
            self.sandbox.sandbox_driver,
            self.kube.egress_host,
        ) {
            (Some(host), _, _) => host,
            (None, SandboxDriverSetting::Kube, Some(host)) => host,
            _ => std::net::IpAddr::from([127, 0, 0, 1]),
        }
    }

    /// Where screenshots and kept downloads live: `shared_dir`, else the data dir.
    pub fn files_dir(&self) -> &Path {
        self.cluster
            .shared_dir
            .as_deref()
            .unwrap_or(&self.server.data_dir)
    }

    /// This replica's name: `replica_name`, else the host name.
    pub fn replica_name(&self) -> String {
        self.cluster.replica_name()
    }

    /// Where other replicas reach this one, given the bound address.
    pub fn advertise_url(&self, bound: SocketAddr) -> String {
        self.cluster.advertise_url(bound, self.scheme())
    }

    /// Whether Cordon itself serves HTTPS (`tls_cert` and `tls_key` set).
    pub fn builtin_tls(&self) -> bool {
        self.server.tls_cert.is_some() && self.server.tls_key.is_some()
    }

    /// The per-session resource limits.
    pub fn session_limits(&self) -> crate::sandbox::limits::Limits {
        self.sandbox.limits()
    }

    /// `public_url`, parsed (checked at load).
    pub fn public_url(&self) -> Option<url::Url> {
        self.server
            .public_url
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
        match &self.server.database_url {
            Some(url) => url.clone(),
            None => SecretString::from(format!(
                "sqlite://{}/cordon.db",
                self.server.data_dir.display()
            )),
        }
    }

    /// The sessions' own settings, with what they take from the sandbox's
    /// (`tenant_limits`; the `kube` driver makes `auto` transfers go over
    /// CDP).
    pub fn session_config(&self) -> crate::sessions::SessionConfig {
        self.sessions.config(
            self.sandbox.sandbox_driver == SandboxDriverSetting::Kube,
            self.sandbox.tenant_limits.clone(),
        )
    }

    /// What starting the session engine needs.
    pub fn engine_settings(&self) -> crate::sessions::EngineSettings {
        crate::sessions::EngineSettings {
            sandbox: self.sandbox_settings(),
            enforce_limits: self.sandbox.session_limits,
            limits: self.sandbox.limits(),
            data_dir: self.server.data_dir.clone(),
            files_dir: self.files_dir().to_path_buf(),
            shared_files: self.cluster.shared_dir.is_some(),
            replica_name: self.replica_name(),
            recording_quota_bytes: self.recording.recording_quota_mb << 20,
            sessions: self.session_config(),
            risk: self.risk.clone(),
        }
    }

    /// The sandbox driver's settings (`sandbox_driver`, `chromium_path`,
    /// `exec_*`, `kube_*`, `bind`).
    pub fn sandbox_settings(&self) -> crate::sandbox::SandboxSettings {
        self.sandbox.driver_settings(&self.kube, self.server.bind)
    }

    /// What joining the cluster needs, for a replica bound at `bound`.
    pub fn cluster_settings(&self, bound: SocketAddr) -> crate::cluster::ClusterSettings {
        crate::cluster::ClusterSettings {
            name: self.replica_name(),
            lost_after_s: self.cluster.replica_lost_after_s,
            database_url: self.database_url(),
            advertise: self.advertise_url(bound),
            tls_cert: self.server.tls_cert.clone().filter(|_| self.builtin_tls()),
            cluster_secret: self.cluster.cluster_secret.clone(),
        }
    }

    /// The risk gate's settings (`risk_*`, `approval_timeout_s`, `tenant_risk`).
    pub fn risk_settings(&self) -> crate::policy::RiskSettings {
        self.risk.clone()
    }

    /// The task runner's settings (`model_*`, `task_*`).
    pub fn task_settings(&self) -> crate::tasks::TaskSettings {
        self.tasks.task_settings()
    }

    /// Where the master key comes from (`master_key`, `master_key_file`).
    pub fn key_settings(&self) -> crate::crypto::KeySettings {
        self.key.key_settings(&self.server.data_dir)
    }

    /// The master key file in force, defaulted from `data_dir`.
    pub fn master_key_file(&self) -> PathBuf {
        self.key.master_key_file(&self.server.data_dir)
    }

    /// The database URL with any password replaced by `***`.
    pub fn database_url_display(&self) -> String {
        crate::redact::url(self.database_url().expose_secret())
    }

    /// Every setting as TOML, secrets shown as `***`; a setting that is
    /// unset is listed as a comment, so none is missing.
    pub fn show(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        // What is in force, not only what was given.
        v["database_url"] = serde_json::json!(self.database_url_display());
        v["master_key_file"] = serde_json::json!(self.master_key_file().display().to_string());
        let mut out = String::new();
        for name in &keys::KEYS.all {
            match &v[name.as_str()] {
                serde_json::Value::Null => out.push_str(&format!("# {name} is unset\n")),
                value => out.push_str(&format!("{name} = {}\n", keys::toml_value(value))),
            }
        }
        out
    }
}
