//! Where a grant request stands. A domain type (the store reads and writes
//! it, the grants service decides it), so it sits with the others and
//! `grants` re-exports it.

/// Where a grant request stands: `pending → approved | denied | expired`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GrantState {
    /// Waiting for an operator.
    Pending,
    /// Approved: a token exists.
    Approved,
    /// Denied by an operator.
    Denied,
    /// Nobody decided in time.
    Expired,
}

impl GrantState {
    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Expired => "expired",
        }
    }
}

impl std::str::FromStr for GrantState {
    type Err = super::UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Pending, Self::Approved, Self::Denied, Self::Expired]
            .into_iter()
            .find(|g| g.as_str() == s)
            .ok_or_else(|| super::UnknownValue::new("grant state", s))
    }
}

impl std::fmt::Display for GrantState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
