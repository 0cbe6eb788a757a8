//! Ids parsed at the edge: one type per kind, each checked for its prefix
//! and shape once (`gr_…` is never taken for `gt_…`), drawn by [`crate::ids`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids;

/// Why a string is not an id of the kind asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {0} id")]
pub struct MalformedId(pub &'static str);

/// The error of a [`SessionId`] that does not parse.
pub type SessionIdError = MalformedId;

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// A fresh random id.
            pub fn generate() -> Self {
                Self(ids::random_id($prefix))
            }

            /// The id as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = MalformedId;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                if ids::is_random_id($prefix, s) {
                    Ok(Self(s.to_owned()))
                } else {
                    Err(MalformedId($what))
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = MalformedId;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

typed_id!(
    /// A browser session (`s_…`).
    SessionId,
    ids::SESSION,
    "session"
);
typed_id!(
    /// A grant request (`gr_…`).
    GrantRequestId,
    ids::GRANT_REQUEST,
    "grant request"
);
typed_id!(
    /// A grant token's public id (`gt_…`), never the token itself.
    GrantTokenId,
    ids::GRANT_TOKEN_ID,
    "grant token"
);
typed_id!(
    /// An API key's public id (`k_…`), never the key itself.
    ApiKeyId,
    ids::API_KEY,
    "API key"
);
typed_id!(
    /// A dashboard operator (`op_…`).
    OperatorId,
    ids::OPERATOR,
    "operator"
);
typed_id!(
    /// One of an operator's passkeys (`pk_…`).
    PasskeyId,
    ids::PASSKEY,
    "passkey"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
        assert_eq!(a.as_str().len(), 28);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "",
            "s_",
            "x_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            "s_AAAAAAAAAAAAAAAAAAAAAAAAAA",
            "s_aaaa",
            "s_aaaaaaaaaaaaaaaaaaaaaaaaa1",
            "s_aaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "s_../../../../etc/passwd00",
        ] {
            assert_eq!(
                bad.parse::<SessionId>(),
                Err(MalformedId("session")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn one_kind_of_id_is_not_taken_for_another() {
        let request = GrantRequestId::generate();
        assert!(request.as_str().parse::<GrantTokenId>().is_err());
        assert!(request.as_str().parse::<SessionId>().is_err());
        assert_eq!(
            "k_nope".parse::<ApiKeyId>().unwrap_err().to_string(),
            "malformed API key id"
        );
    }
}
