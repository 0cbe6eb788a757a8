//! The `kube` driver's settings (`kube_*`), declared, defaulted and
//! checked here; `config` flattens them into `Settings`.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// The `kube_*` settings, as `cordon.toml` and `CORDON_KUBE_*` name them.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct KubeSettings {
    /// `kube` driver: the namespace browser pods are made in; unset, the
    /// client's own (in a cluster: the service account's namespace file;
    /// else the kubeconfig context's, else `default`).
    #[serde(default, rename = "kube_namespace")]
    pub namespace: Option<String>,
    /// `kube` driver (required with it): a Pod manifest (YAML or JSON file)
    /// every browser pod is made from. It needs a container named
    /// `browser`, non-root, with a read-only root filesystem,
    /// `allowPrivilegeEscalation: false`, no added capabilities, no host
    /// namespaces, `hostPath` or `hostPort`, and
    /// `automountServiceAccountToken: false`; checked at start, anything
    /// else stops it naming the field.
    #[serde(default, rename = "kube_pod_template")]
    pub pod_template: Option<PathBuf>,
    /// `kube` driver: the `cordon.dev/deployment` label value of this
    /// Cordon's pods, so several deployments can share a namespace and the
    /// reaper only lists its own.
    #[serde(default = "d::kube_deployment", rename = "kube_deployment")]
    pub deployment: String,
    /// `kube` driver: the port the browser container serves DevTools on
    /// (`/json/version` and the WebSocket), on the pod's IP.
    #[serde(default = "d::kube_cdp_port", rename = "kube_cdp_port")]
    pub cdp_port: u16,
    /// `kube` driver (required with it): the address browser pods reach
    /// this Cordon's egress guard at (its pod IP, from the downward API);
    /// their proxy is `<kube_egress_host>:<the sandbox's egress port>`.
    /// Needs `egress_bind_host` to be an address of this pod.
    #[serde(default, rename = "kube_egress_host")]
    #[schemars(with = "Option<String>")]
    pub egress_host: Option<IpAddr>,
    /// `kube` driver: how long a new pod may take to be running and ready
    /// (image pull included) before it is deleted and the start fails, s
    /// (1–3600).
    #[serde(default = "d::kube_ready_timeout_s", rename = "kube_ready_timeout_s")]
    pub ready_timeout_s: u64,
}

/// The defaults, one function per setting that has one.
mod d {
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

impl KubeSettings {
    /// The rules of the `kube_*` settings when the `kube` driver runs (the
    /// egress guard's side, `egress_bind_host`, is checked by `config`).
    pub fn validate_pod_settings(&self) -> anyhow::Result<()> {
        if self.pod_template.is_none() {
            bail!(
                "kube_pod_template: required when sandbox_driver is \"kube\" (a Pod manifest file)"
            );
        }
        let Some(host) = self.egress_host else {
            bail!(
                "kube_egress_host: required when sandbox_driver is \"kube\" (the address browser \
                 pods reach the egress guard at, e.g. this pod's IP)"
            );
        };
        if host.is_loopback() || host.is_unspecified() {
            bail!("kube_egress_host: must be an address other pods can reach, not {host}");
        }
        Ok(())
    }

    /// The rest of the rules, checked after the guard's address.
    pub fn validate_limits(&self) -> anyhow::Result<()> {
        if !(1..=3600).contains(&self.ready_timeout_s) {
            bail!("kube_ready_timeout_s: must be between 1 and 3600");
        }
        if self.cdp_port == 0 {
            bail!("kube_cdp_port: must be a port number (1–65535)");
        }
        let label_ok = |v: &str| {
            (1..=63).contains(&v.len())
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !label_ok(&self.deployment) {
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
            .namespace
            .as_deref()
            .is_some_and(|ns| !namespace_ok(ns))
        {
            bail!(
                "kube_namespace: must be a Kubernetes namespace name (lowercase letters, digits, '-')"
            );
        }
        Ok(())
    }
}
