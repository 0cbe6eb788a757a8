//! The grants' setting (`grant_expiry_min`), declared here; `config`
//! flattens it into `Settings`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The grants' settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct GrantsSection {
    /// Per-tenant default lifetime of approved grant tokens, in minutes
    /// (`[grant_expiry_min] acme = 60`; others get 15).
    #[serde(default, deserialize_with = "crate::setting::table_or_json")]
    pub grant_expiry_min: BTreeMap<String, u64>,
}
