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
typed_id!(
    /// A sandbox (`b_…`), drawn by the warm pool for each browser.
    SandboxId,
    ids::SANDBOX,
    "sandbox"
);
typed_id!(
    /// A task (`run_task`, `t_…`).
    TaskId,
    ids::TASK,
    "task"
);
typed_id!(
    /// A stored TOTP seed (`tp_…`).
    TotpId,
    ids::TOTP,
    "TOTP seed"
);
typed_id!(
    /// A live link's public id (`ll_…`), never the link's token.
    LiveLinkId,
    ids::LIVE_LINK,
    "live link"
);
typed_id!(
    /// An operator's enrollment link's public id (`en_…`), never its secret.
    EnrollmentId,
    ids::ENROLLMENT,
    "enrollment"
);
typed_id!(
    /// The deployment's id (`dep…`), drawn once by its first replica.
    DeploymentId,
    ids::DEPLOYMENT,
    "deployment"
);
typed_id!(
    /// One run of a replica's process (`inst…`): a replica's row is its
    /// own while it holds this.
    InstanceId,
    ids::INSTANCE,
    "instance"
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

    /// Each kind parses what it draws and refuses every other kind's ids,
    /// and the shapes no kind draws.
    #[test]
    fn every_kind_parses_its_own_ids_only() {
        /// An id drawn by a kind, and that kind's parser (does it accept?).
        type Kind = (String, fn(&str) -> bool);
        let kinds: [Kind; 13] = [
            (SessionId::generate().into(), |s| {
                s.parse::<SessionId>().is_ok()
            }),
            (GrantRequestId::generate().into(), |s| {
                s.parse::<GrantRequestId>().is_ok()
            }),
            (GrantTokenId::generate().into(), |s| {
                s.parse::<GrantTokenId>().is_ok()
            }),
            (ApiKeyId::generate().into(), |s| {
                s.parse::<ApiKeyId>().is_ok()
            }),
            (OperatorId::generate().into(), |s| {
                s.parse::<OperatorId>().is_ok()
            }),
            (PasskeyId::generate().into(), |s| {
                s.parse::<PasskeyId>().is_ok()
            }),
            (SandboxId::generate().into(), |s| {
                s.parse::<SandboxId>().is_ok()
            }),
            (TaskId::generate().into(), |s| s.parse::<TaskId>().is_ok()),
            (TotpId::generate().into(), |s| s.parse::<TotpId>().is_ok()),
            (LiveLinkId::generate().into(), |s| {
                s.parse::<LiveLinkId>().is_ok()
            }),
            (EnrollmentId::generate().into(), |s| {
                s.parse::<EnrollmentId>().is_ok()
            }),
            (DeploymentId::generate().into(), |s| {
                s.parse::<DeploymentId>().is_ok()
            }),
            (InstanceId::generate().into(), |s| {
                s.parse::<InstanceId>().is_ok()
            }),
        ];
        for (i, (id, _)) in kinds.iter().enumerate() {
            for (j, (_, parses)) in kinds.iter().enumerate() {
                assert_eq!(
                    parses(id),
                    i == j,
                    "{id:?} by the parser of {:?}",
                    kinds[j].0
                );
            }
        }
        // Shapes no kind draws: empty, a prefix alone, too long, non-ASCII,
        // upper case.
        let task = TaskId::generate().to_string();
        for bad in [
            String::new(),
            "t_".to_owned(),
            format!("{task}a"),
            format!("t_{}é", "a".repeat(24)),
            format!("t_{}", "é".repeat(13)),
            task.to_uppercase(),
        ] {
            assert!(kinds.iter().all(|(_, p)| !p(&bad)), "{bad:?}");
        }
        assert_eq!(
            "tp_nope".parse::<TotpId>().unwrap_err().to_string(),
            "malformed TOTP seed id"
        );
    }
}
