//! The recordings' settings (`recording_*`), declared, defaulted and
//! checked here; `config` flattens them into `Settings`.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// The recordings' settings, as `cordon.toml` and `CORDON_RECORDING_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct RecordingSection {
    /// Disk each tenant's screenshots may take, MiB; past it transient
    /// frames drop their oldest and audit screenshots are refused (507
    /// `recording_quota_full`, audited).
    #[serde(default = "d::recording_quota_mb")]
    pub recording_quota_mb: u64,
    /// Days `audit` screenshots (and the downloads of sessions that record
    /// for audit) are kept.
    #[serde(default = "d::recording_retention_days")]
    pub recording_retention_days: u64,
}

/// The defaults, one function per setting that has one.
mod d {
    pub fn recording_quota_mb() -> u64 {
        2048
    }
    pub fn recording_retention_days() -> u64 {
        7
    }
}

impl RecordingSection {
    /// The rules, each error naming its setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.recording_quota_mb == 0 {
            bail!("recording_quota_mb: must be at least 1");
        }
        Ok(())
    }
}
