//! The replicas' settings (`replica_*`, `cluster_secret`, `advertise_url`,
//! `shared_dir`), declared, defaulted and checked here; `config` flattens
//! them into `Settings`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::bail;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use super::check_replica_name;

/// The replicas' settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct ClusterSection {
    /// This control plane's name among the replicas sharing its database
    /// (sessions and sandboxes are recorded under it; at most one running
    /// process may use a name; 1–63 of `A-Za-z0-9._-`). Unset: the host
    /// name. On Kubernetes, the pod's name.
    #[serde(default)]
    pub replica_name: Option<String>,
    /// The deployment's shared secret for the internal hop between replicas
    /// (a call for a session another replica runs is forwarded to it, signed
    /// with this; 32–512 characters). Unset: calls for sessions of
    /// other replicas are answered 503 `replica_unreachable`. Shown as `***`.
    #[serde(default, serialize_with = "crate::setting::masked")]
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
    /// (3–300; heartbeats go every fifth of it).
    #[serde(default = "d::replica_lost_after_s")]
    pub replica_lost_after_s: u64,
    /// A directory every replica mounts read-write (a ReadWriteMany volume,
    /// NFS), as an absolute path: screenshots (`sessions/`) and kept
    /// downloads (`downloads/`) go there instead of the data dir, so any
    /// replica serves them and they outlive the replica that made them.
    /// Unset: the data dir.
    #[serde(default)]
    pub shared_dir: Option<PathBuf>,
}

/// The defaults, one function per setting that has one.
mod d {
    pub fn replica_lost_after_s() -> u64 {
        10
    }
}

impl ClusterSection {
    /// The rules, each error naming its setting; `builtin_tls`: this
    /// replica serves only HTTPS (`tls_cert` and `tls_key` are set).
    pub fn validate(&self, builtin_tls: bool) -> anyhow::Result<()> {
        if let Some(name) = &self.replica_name {
            check_replica_name(name).map_err(|why| anyhow::anyhow!("replica_name: {why}"))?;
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
            if builtin_tls && url.scheme() != "https" {
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

    /// This replica's name: `replica_name`, else the host name.
    pub fn replica_name(&self) -> String {
        self.replica_name.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .filter(|h| check_replica_name(h).is_ok())
                .unwrap_or_else(|| "localhost".into())
        })
    }

    /// Where other replicas reach this one, given the bound address and
    /// the scheme this process serves.
    pub fn advertise_url(&self, bound: SocketAddr, scheme: &str) -> String {
        match &self.advertise_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None if bound.ip().is_unspecified() => {
                format!("{scheme}://localhost:{}", bound.port())
            }
            None => format!("{scheme}://{bound}"),
        }
    }
}
