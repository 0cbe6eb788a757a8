use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A tenant's id: 1–63 characters of `a-z`, `0-9` and `-`, not starting or
/// ending with `-` (it appears in paths and URLs unescaped).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantId(String);

/// Why a string is not a [`TenantId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantIdError {
    /// Empty or longer than 63 characters.
    #[error("tenant id must be 1 to 63 characters long")]
    Length,
    /// A character outside `a-z0-9-`, or a leading/trailing `-`.
    #[error("tenant id may hold only a-z, 0-9 and '-', and may not start or end with '-'")]
    Characters,
}

impl TenantId {
    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TenantId {
    type Err = TenantIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > 63 {
            return Err(TenantIdError::Length);
        }
        let ok = s
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok || s.starts_with('-') || s.ends_with('-') {
            return Err(TenantIdError::Characters);
        }
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for TenantId {
    type Error = TenantIdError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<TenantId> for String {
    fn from(id: TenantId) -> Self {
        id.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_slugs_are_accepted() {
        for ok in ["acme", "a", "team-7", "0x1", &"a".repeat(63)] {
            assert_eq!(ok.parse::<TenantId>().unwrap().as_str(), ok);
        }
    }

    #[test]
    fn empty_and_long_ids_are_refused() {
        assert_eq!("".parse::<TenantId>(), Err(TenantIdError::Length));
        assert_eq!(
            "a".repeat(64).parse::<TenantId>(),
            Err(TenantIdError::Length)
        );
    }

    #[test]
    fn hostile_ids_are_refused() {
        for bad in [
            "Acme", "a b", "../etc", "a/b", "-a", "a-", "a_b", "a\u{0}", "ä", "a.b",
        ] {
            assert_eq!(
                bad.parse::<TenantId>(),
                Err(TenantIdError::Characters),
                "{bad:?}"
            );
        }
    }
}
