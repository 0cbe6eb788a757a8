//! The dashboard sessions' settings (`dashboard_*`), declared, defaulted
//! and checked here; `config` flattens them into `Settings`.

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// The dashboard sessions' settings, as `cordon.toml` and `CORDON_DASHBOARD_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct AuthSection {
    /// A dashboard session ends after this many minutes without a request
    /// (1–1440).
    #[serde(default = "d::dashboard_idle_minutes")]
    pub dashboard_idle_minutes: u64,
    /// A dashboard session ends this many hours after its login, however
    /// busy (1–168).
    #[serde(default = "d::dashboard_session_hours")]
    pub dashboard_session_hours: u64,
}

/// The defaults, one function per setting that has one.
mod d {
    pub fn dashboard_idle_minutes() -> u64 {
        30
    }
    pub fn dashboard_session_hours() -> u64 {
        12
    }
}

impl AuthSection {
    /// `dashboard_idle_minutes`' rule.
    pub fn validate_idle(&self) -> anyhow::Result<()> {
        if !(1..=24 * 60).contains(&self.dashboard_idle_minutes) {
            bail!("dashboard_idle_minutes: must be between 1 and 1440");
        }
        Ok(())
    }

    /// `dashboard_session_hours`' rule.
    pub fn validate_lifetime(&self) -> anyhow::Result<()> {
        if !(1..=24 * 7).contains(&self.dashboard_session_hours) {
            bail!("dashboard_session_hours: must be between 1 and 168");
        }
        Ok(())
    }
}
