//! The sandbox's settings as they load: the driver (`sandbox_driver`,
//! `chromium_path`, `exec_*`) and the per-session limits (`session_limits`,
//! `session_memory_mb`, …, `tenant_limits`), declared, defaulted and checked
//! here; `config` flattens them into `Settings`. The `kube_*` ones are
//! [`super::kube::KubeSettings`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::SandboxDriverSetting;
use super::limits::{Limits, TenantLimits};

/// The sandbox's settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct SandboxSection {
    /// The Chromium executable sessions run.
    #[serde(default = "d::chromium_path")]
    pub chromium_path: PathBuf,
    /// `auto` (bwrap if it works here, else process), `process`, `bwrap`,
    /// `exec` (external create/destroy commands, `exec_*`) or `kube` (one
    /// Kubernetes pod per browser, `kube_*`). `process` (asked for, or as
    /// `auto`'s fallback) is refused when `bind` is not loopback: any local
    /// process can reach its browsers' DevTools.
    #[serde(default = "d::sandbox_driver")]
    pub sandbox_driver: SandboxDriverSetting,
    /// `exec` driver: the command that makes a browser and prints its CDP endpoint.
    #[serde(default)]
    pub exec_create: Option<String>,
    /// `exec` driver: the command that destroys one (idempotent).
    #[serde(default)]
    pub exec_destroy: Option<String>,
    /// Whether the per-session limits below are enforced (cgroups, rlimits,
    /// tmpfs sizes). Off only to measure their cost or on a host that
    /// cannot have them; `serve` warns loudly and `/readyz` shows
    /// `cgroups: "off"`.
    #[serde(default = "d::session_limits")]
    pub session_limits: bool,
    /// Memory one session's browser may use (its processes and its tmpfs
    /// pages), MiB (at least 128, at most this host's memory); past it the
    /// page is killed and the session fails with `resource_limit`.
    #[serde(default = "d::session_memory_mb")]
    pub session_memory_mb: u64,
    /// Processes and threads one session's browser may run (32–4194304).
    #[serde(default = "d::session_pids_max")]
    pub session_pids_max: u64,
    /// Open files per process of a session's browser (256–1048576).
    #[serde(default = "d::session_open_files_max")]
    pub session_open_files_max: u64,
    /// Size of each of a bwrap sandbox's tmpfs mounts (`/tmp` with the
    /// profile, `/home`, `/run`), MiB (at least 16).
    #[serde(default = "d::session_tmpfs_mb")]
    pub session_tmpfs_mb: u64,
    /// A session's CPU weight against the others (1–10000; the same for all
    /// by default, so one busy page cannot starve the rest).
    #[serde(default = "d::session_cpu_weight")]
    pub session_cpu_weight: u64,
    /// A tenant's own limits: `memory_mb`, `pids_max` and `cpu_weight` per
    /// session and `recording_quota_mb` (`[tenant_limits.acme] memory_mb =
    /// 2048`); unset ones are the `session_*` settings. Applied when a
    /// session of the tenant gets its browser (a warm one is retuned).
    #[serde(default, deserialize_with = "crate::setting::table_or_json")]
    pub tenant_limits: BTreeMap<String, TenantLimits>,
}

/// The defaults, one function per setting that has one.
mod d {
    use super::SandboxDriverSetting;
    use std::path::PathBuf;

    pub fn chromium_path() -> PathBuf {
        "/usr/lib/chromium/chromium".into()
    }
    pub fn sandbox_driver() -> SandboxDriverSetting {
        SandboxDriverSetting::Auto
    }
    pub fn session_limits() -> bool {
        true
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

impl SandboxSection {
    /// The driver's rules that need no other section (`exec` needs its
    /// commands).
    pub fn validate_driver(&self) -> anyhow::Result<()> {
        if self.sandbox_driver == SandboxDriverSetting::Exec
            && (self.exec_create.is_none() || self.exec_destroy.is_none())
        {
            bail!("sandbox_driver: \"exec\" needs both exec_create and exec_destroy");
        }
        Ok(())
    }

    /// The per-session limits' rules, each error naming its setting.
    pub fn validate_limits(&self) -> anyhow::Result<()> {
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
        Ok(())
    }

    /// The tenants' own limits' rules (after the other sections' checks:
    /// an error names the first setting in the order `config` checks).
    pub fn validate_tenant_limits(&self) -> anyhow::Result<()> {
        let host_mb = host_memory_mb();
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
        Ok(())
    }

    /// The per-session resource limits (`session_*`).
    pub fn limits(&self) -> Limits {
        Limits {
            memory_bytes: self.session_memory_mb << 20,
            pids: self.session_pids_max,
            open_files: self.session_open_files_max,
            tmpfs_bytes: self.session_tmpfs_mb << 20,
            cpu_weight: self.session_cpu_weight,
        }
    }

    /// What building the driver needs: these settings, the `kube_*` ones
    /// and `bind` (the process driver is refused off loopback).
    pub fn driver_settings(
        &self,
        kube: &super::kube::KubeSettings,
        bind: std::net::SocketAddr,
    ) -> super::SandboxSettings {
        super::SandboxSettings {
            driver: self.sandbox_driver,
            chromium: self.chromium_path.clone(),
            exec_create: self.exec_create.clone(),
            exec_destroy: self.exec_destroy.clone(),
            bind,
            kube: kube.clone(),
        }
    }
}
