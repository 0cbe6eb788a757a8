//! The one error type of the dashboard: every server function and every
//! auth endpoint answers it, and one component ([`crate::components::ErrorView`])
//! shows it. Each variant says what the operator can do about it.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// What went wrong, in terms the page can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UiError {
    /// Not logged in, or the dashboard session ended: log in again.
    Unauthorized,
    /// Logged in, but the operator's role does not allow this.
    Forbidden {
        /// What was refused, in words.
        message: String,
    },
    /// The thing asked for does not exist (or is not visible).
    NotFound {
        /// What was not found ("grant request gr_…").
        what: String,
    },
    /// A field's value is wrong: fix it and try again.
    Invalid {
        /// The field.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// The thing changed meanwhile (already decided, already revoked).
    Conflict {
        /// What happened.
        message: String,
    },
    /// The control plane cannot do it right now (database down); try later.
    Unavailable {
        /// Why.
        message: String,
    },
    /// A fault on the server; its cause is in the server log.
    Internal {
        /// A message safe to show.
        message: String,
    },
}

impl UiError {
    /// A [`UiError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// A [`UiError::NotFound`].
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// A [`UiError::Conflict`].
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict {
            message: message.into(),
        }
    }

    /// A [`UiError::Forbidden`].
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden {
            message: message.into(),
        }
    }

    /// A [`UiError::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal {
            message: message.into(),
        }
    }

    /// The HTTP status that carries this error.
    pub fn status(&self) -> u16 {
        match self {
            Self::Unauthorized => 401,
            Self::Forbidden { .. } => 403,
            Self::NotFound { .. } => 404,
            Self::Invalid { .. } => 400,
            Self::Conflict { .. } => 409,
            Self::Unavailable { .. } => 503,
            Self::Internal { .. } => 500,
        }
    }

    /// A short machine-readable code (`unauthorized`, `invalid`, …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::NotFound { .. } => "not_found",
            Self::Invalid { .. } => "invalid",
            Self::Conflict { .. } => "conflict",
            Self::Unavailable { .. } => "unavailable",
            Self::Internal { .. } => "internal",
        }
    }
}

impl std::fmt::Display for UiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unauthorized => f.write_str("your dashboard session has ended: log in again"),
            Self::Forbidden { message } => write!(f, "not allowed: {message}"),
            Self::NotFound { what } => write!(f, "{what} not found"),
            Self::Invalid { field, message } => write!(f, "{field}: {message}"),
            Self::Conflict { message } | Self::Unavailable { message } => f.write_str(message),
            Self::Internal { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for UiError {}

impl FromServerFnError for UiError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        match value {
            ServerFnErrorErr::Args(m) | ServerFnErrorErr::Deserialization(m) => {
                Self::invalid("request", m)
            }
            ServerFnErrorErr::Request(m) | ServerFnErrorErr::Response(m) => Self::Unavailable {
                message: format!("Cordon did not answer: {m}"),
            },
            ServerFnErrorErr::MissingArg(m) => Self::invalid(m, "missing"),
            other => Self::internal(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_round_trip_through_their_json_and_keep_their_status() {
        let e = UiError::invalid("expires_min", "must be between 1 and 1440");
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains("\"kind\":\"invalid\""), "{json}");
        let back: UiError = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        assert_eq!(back.status(), 400);
        assert_eq!(UiError::Unauthorized.status(), 401);
        assert_eq!(UiError::conflict("already decided").code(), "conflict");
    }
}
