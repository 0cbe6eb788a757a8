//! The egress guard's settings (`egress_*`), declared, defaulted and
//! checked here; `config` flattens them into `Settings`.

use std::net::IpAddr;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::AllowEntry;

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

/// The egress guard's settings, as `cordon.toml` and `CORDON_EGRESS_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct EgressSection {
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
    /// Egress log rows older than this many days are deleted (checked
    /// hourly; at least 1).
    #[serde(default = "d::egress_log_retention_days")]
    pub egress_log_retention_days: u64,
    /// `system` (the host's resolver) or `loopback-only` (only `localhost`
    /// resolves and no DNS query is sent: tests, air-gapped trials).
    #[serde(default = "d::egress_resolver")]
    pub egress_resolver: EgressResolver,
    /// The address the egress guard's per-browser listeners bind; unset,
    /// `127.0.0.1`, or `kube_egress_host` with the `kube` driver. Only the
    /// `kube` driver may have a non-loopback one (browser pods connect over
    /// the pod network; the manifests' NetworkPolicy limits who may).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub egress_bind_host: Option<IpAddr>,
}

/// The defaults, one function per setting that has one.
mod d {
    use super::EgressResolver;

    pub fn egress_log_retention_days() -> u64 {
        30
    }
    pub fn egress_resolver() -> EgressResolver {
        EgressResolver::System
    }
}

impl EgressSection {
    /// The rules of these settings alone (`egress_bind_host` against the
    /// driver is `config`'s: it needs the sandbox's section).
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.egress_log_retention_days == 0 {
            bail!("egress_log_retention_days: must be at least 1");
        }
        Ok(())
    }
}

fn display_list<S: serde::Serializer>(v: &[AllowEntry], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(ToString::to_string))
}

/// `egress_allow`: a TOML list or a comma-separated string, each entry
/// parsed now, so a bad one stops the start naming the setting.
fn allow_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<AllowEntry>, D::Error> {
    crate::setting::string_or_list(d)?
        .iter()
        .map(|e| {
            e.parse::<AllowEntry>()
                .map_err(|err| serde::de::Error::custom(format!("{e:?}: {err}")))
        })
        .collect()
}
