//! A session's lifecycle state and why it ended, as stored and shown.

use std::fmt;
use std::str::FromStr;

/// `starting → ready → closing → closed | failed`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Its browser is being started or prepared.
    Starting,
    /// Handed out; tools may run.
    Ready,
    /// Being closed.
    Closing,
    /// Ended normally.
    Closed,
    /// Ended by a failure.
    Failed,
}

/// Why a session ended.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// Its agent closed it.
    Client,
    /// Its deadline passed.
    Deadline,
    /// No tool call for `session_idle_s`.
    Idle,
    /// Its browser exited or crashed.
    BrowserExited,
    /// Its browser could not be started or prepared.
    StartFailed,
    /// The control plane shut down.
    Shutdown,
    /// The control plane that ran it is gone (crash or restart).
    Orphaned,
    /// Its browser ran into a resource limit (memory, processes).
    ResourceLimit,
    /// An operator ended it from the dashboard.
    Operator,
    /// A refresh session whose login an operator saved into the vault.
    Saved,
    /// The replica that ran it stopped answering (killed, its host lost);
    /// another replica ended it.
    ReplicaLost,
    /// An operator revoked the grant it was opened with.
    GrantRevoked,
    /// The grant it was opened with expired.
    GrantExpired,
}

/// A stored value that is no state or reason this version knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct UnknownValue {
    what: &'static str,
    value: String,
}

impl UnknownValue {
    /// `value` is no `what` this version knows.
    pub fn new(what: &'static str, value: &str) -> Self {
        Self {
            what,
            value: value.chars().take(40).collect(),
        }
    }
}

macro_rules! string_enum {
    ($t:ty, $what:literal, $($v:ident => $s:literal),* $(,)?) => {
        impl $t {
            /// Every value.
            pub const ALL: &'static [$t] = &[$(<$t>::$v),*];

            /// The stored and shown name.
            pub fn as_str(self) -> &'static str {
                match self { $(<$t>::$v => $s),* }
            }
        }

        impl FromStr for $t {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($s => Ok(<$t>::$v),)*
                    other => Err(UnknownValue::new($what, other)),
                }
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

string_enum!(SessionState, "session state",
    Starting => "starting",
    Ready => "ready",
    Closing => "closing",
    Closed => "closed",
    Failed => "failed",
);

string_enum!(CloseReason, "session close reason",
    Client => "client",
    Deadline => "deadline",
    Idle => "idle",
    BrowserExited => "browser_exited",
    StartFailed => "start_failed",
    Shutdown => "shutdown",
    Orphaned => "orphaned",
    ResourceLimit => "resource_limit",
    Operator => "operator",
    Saved => "saved",
    ReplicaLost => "replica_lost",
    GrantRevoked => "grant_revoked",
    GrantExpired => "grant_expired",
);

impl SessionState {
    /// Whether the session has ended (or is ending).
    pub fn is_ended(self) -> bool {
        matches!(self, Self::Closing | Self::Closed | Self::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for s in SessionState::ALL {
            assert_eq!(s.as_str().parse::<SessionState>().unwrap(), *s);
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for r in CloseReason::ALL {
            assert_eq!(r.as_str().parse::<CloseReason>().unwrap(), *r);
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    #[test]
    fn unknown_names_are_refused_by_name() {
        let err = "exploded".parse::<CloseReason>().unwrap_err();
        assert_eq!(err.to_string(), "unknown session close reason \"exploded\"");
        assert!("READY".parse::<SessionState>().is_err());
    }
}
