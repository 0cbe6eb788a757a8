//! The one error type at the HTTP boundary.

use std::sync::Arc;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What an HTTP handler can fail with. The message shown to the client is
/// always safe; an internal cause is handed to [`log_errors`](crate::startup)
/// through the response's extensions and logged once there.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed or invalid input.
    #[error("{0}")]
    BadRequest(String),
    /// Invalid input of a kind the caller can act on by its code.
    #[error("{message}")]
    BadInput {
        /// Machine-readable reason (`invalid_selector`, `unknown_key`).
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// Missing or wrong credentials.
    #[error("missing or invalid API key")]
    Unauthorized,
    /// No such resource (or not this caller's).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A named part of a resource does not exist (a tab of a session).
    #[error("{message}")]
    Missing {
        /// Machine-readable reason (`tab_not_found`).
        code: &'static str,
        /// What is missing.
        message: String,
    },
    /// The path exists, but not with this method.
    #[error("method not allowed here")]
    MethodNotAllowed,
    /// The resource existed but is finished.
    #[error("{0}")]
    Gone(String),
    /// Authenticated, but not allowed to do this.
    #[error("{message}")]
    Forbidden {
        /// Machine-readable reason.
        code: &'static str,
        /// What is missing.
        message: String,
    },
    /// The request conflicts with the current state.
    #[error("{message}")]
    Conflict {
        /// Machine-readable reason (`already_decided`, `last_tab`).
        code: &'static str,
        /// What conflicts.
        message: String,
    },
    /// The body or a field is too large.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A limit is reached; retry after this many seconds.
    #[error("{message}")]
    TooManyRequests {
        /// What limit.
        message: String,
        /// Seconds until a retry may succeed.
        retry_after_s: u64,
    },
    /// A browser call ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// Well-formed, but the page could not do it (no such element, navigation error).
    #[error("{message}")]
    Unprocessable {
        /// Machine-readable reason.
        code: &'static str,
        /// What happened.
        message: String,
    },
    /// The browser behind the session failed; the session is now `failed`.
    #[error("{0}")]
    BrowserFailed(String),
    /// A dependency is not ready.
    #[error("{0}")]
    Unavailable(String),
    /// Storage the request needs is full (a tenant's recording quota).
    #[error("{message}")]
    InsufficientStorage {
        /// Machine-readable reason.
        code: &'static str,
        /// What is full.
        message: String,
    },
    /// A bug or an outage; the cause is logged, never shown.
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
    /// An internal hop between replicas that does not verify.
    #[error("internal hop refused")]
    HopRefused,
    /// The replica that runs the session cannot be reached now.
    #[error("the replica that runs this session ({0}) cannot be reached; retry shortly")]
    ReplicaUnreachable(String),
}

/// The cause of a 5xx, carried to the logging middleware.
#[derive(Clone)]
pub struct ErrorCause(pub Arc<anyhow::Error>);

impl ApiError {
    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) | Self::BadInput { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::NotFound(_) | Self::Missing { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Gone(_) => StatusCode::GONE,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Unprocessable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BrowserFailed(_) => StatusCode::BAD_GATEWAY,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::InsufficientStorage { .. } => StatusCode::INSUFFICIENT_STORAGE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::HopRefused => StatusCode::UNAUTHORIZED,
            Self::ReplicaUnreachable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(_) => "bad_request",
            Self::BadInput { code, .. }
            | Self::Missing { code, .. }
            | Self::Conflict { code, .. }
            | Self::InsufficientStorage { code, .. } => code,
            Self::Unauthorized => "unauthorized",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Gone(_) => "gone",
            Self::Forbidden { code, .. } => code,
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::TooManyRequests { .. } => "too_many_requests",
            Self::Timeout(_) => "timeout",
            Self::Unprocessable { code, .. } => code,
            Self::BrowserFailed(_) => "browser_failed",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
            Self::HopRefused => "hop_refused",
            Self::ReplicaUnreachable(_) => "replica_unreachable",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = Json(json!({ "error": { "code": self.code(), "message": self.to_string() } }));
        let mut res = (status, body).into_response();
        match self {
            Self::TooManyRequests { retry_after_s, .. } => {
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
            }
            Self::ReplicaUnreachable(_) => {
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(2));
            }
            Self::Unauthorized => {
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Self::Internal(cause) => {
                res.extensions_mut().insert(ErrorCause(Arc::new(cause)));
            }
            _ => {}
        }
        res
    }
}

impl From<crate::sessions::SessionError> for ApiError {
    fn from(e: crate::sessions::SessionError) -> Self {
        use crate::sessions::{OpenRequestError, SessionError as S};
        match e {
            S::NotFound => Self::NotFound("session"),
            e @ S::Gone { .. } => Self::Gone(e.to_string()),
            S::Limit {
                message,
                retry_after_s,
            } => Self::TooManyRequests {
                message,
                retry_after_s,
            },
            S::Invalid(OpenRequestError::GrantRequired) => Self::Forbidden {
                code: "grant_required",
                message: OpenRequestError::GrantRequired.to_string(),
            },
            S::Invalid(other) => Self::BadRequest(other.to_string()),
            S::Grant(g) => g.into(),
            S::StartFailed(cause) => {
                Self::Internal(cause.context("the browser could not be started")).unavailable()
            }
            S::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl From<crate::tasks::TaskError> for ApiError {
    fn from(e: crate::tasks::TaskError) -> Self {
        use crate::tasks::TaskError as T;
        let message = e.to_string();
        match e {
            T::Invalid(m) => Self::BadRequest(m),
            T::TooLarge(_) => Self::PayloadTooLarge(message),
            T::Unconfigured => Self::Unavailable(message),
            T::NotFound => Self::NotFound("task"),
            T::Ended(_) => Self::Conflict {
                code: "task_ended",
                message,
            },
            T::Open(s) => s.into(),
            T::Session(s) => s.into(),
            T::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl From<crate::grants::GrantError> for ApiError {
    fn from(e: crate::grants::GrantError) -> Self {
        use crate::grants::GrantError as G;
        match e {
            G::Invalid(m) => Self::BadRequest(m),
            G::NotFound => Self::NotFound("grant request"),
            G::TokenNotFound => Self::NotFound("grant token"),
            e @ G::NotPending(_) => Self::Conflict {
                code: "already_decided",
                message: e.to_string(),
            },
            G::Internal(cause) => Self::Internal(cause),
            e @ G::TooManyPending => Self::TooManyRequests {
                message: e.to_string(),
                retry_after_s: 60,
            },
            refused => Self::Forbidden {
                code: refused.code(),
                message: refused.to_string(),
            },
        }
    }
}

impl From<crate::sessions::files::FetchError> for ApiError {
    fn from(e: crate::sessions::files::FetchError) -> Self {
        use crate::sessions::files::FetchError as F;
        let message = e.to_string();
        match e {
            F::Denied => Self::Conflict {
                code: "downloads_denied",
                message,
            },
            F::NotFound(_) => Self::Missing {
                code: "download_not_found",
                message,
            },
            F::Io(cause) => Self::Internal(cause),
        }
    }
}

impl From<crate::domain::FileNameError> for ApiError {
    fn from(e: crate::domain::FileNameError) -> Self {
        Self::BadInput {
            code: "invalid_file_name",
            message: e.to_string(),
        }
    }
}

impl From<crate::sessions::ToolError> for ApiError {
    fn from(e: crate::sessions::ToolError) -> Self {
        use crate::sessions::ToolError as T;
        let message = e.to_string();
        match e {
            T::Invalid(m) => Self::BadRequest(m),
            T::TooLarge(m) => Self::PayloadTooLarge(m),
            T::InvalidSelector(_) => Self::BadInput {
                code: "invalid_selector",
                message,
            },
            T::UnknownKey(_) => Self::BadInput {
                code: "unknown_key",
                message,
            },
            T::ElementNotFound(_) => Self::Unprocessable {
                code: "element_not_found",
                message,
            },
            T::TabNotFound(_) => Self::Missing {
                code: "tab_not_found",
                message,
            },
            T::LastTab => Self::Conflict {
                code: "last_tab",
                message,
            },
            T::DeniedByPolicy(_) => Self::Forbidden {
                code: "denied_by_policy",
                message,
            },
            T::TotpNotGranted(_) => Self::Forbidden {
                code: "totp_not_granted",
                message,
            },
            T::DeniedByOperator(_) => Self::Forbidden {
                code: "denied_by_operator",
                message,
            },
            T::ApprovalTimedOut(_) => Self::Forbidden {
                code: "approval_timed_out",
                message,
            },
            // Handled inside `run_tool`; reaching here is a bug.
            T::Held(_) => Self::Internal(anyhow::anyhow!("a held click escaped the pipeline")),
            T::OperatorHasControl(_) => Self::Conflict {
                code: "operator_has_control",
                message,
            },
            T::ActionFailed(_) => Self::Unprocessable {
                code: "action_failed",
                message,
            },
            T::TabCrashed => Self::Unprocessable {
                code: "tab_crashed",
                message,
            },
            T::DownloadRefused => Self::Unprocessable {
                code: "download_refused",
                message,
            },
            T::InvalidFileName(_) => Self::BadInput {
                code: "invalid_file_name",
                message,
            },
            T::NotAFileInput(_) => Self::Unprocessable {
                code: "not_a_file_input",
                message,
            },
            T::DialogOpen(_) => Self::Conflict {
                code: "dialog_open",
                message,
            },
            T::NoDialog => Self::Conflict {
                code: "no_dialog",
                message,
            },
            T::RecordingQuotaFull(m) => Self::InsufficientStorage {
                code: "recording_quota_full",
                message: m,
            },
            T::Timeout(m) => Self::Timeout(m),
            T::BrowserFailed => Self::BrowserFailed(message),
            T::Protocol(_) => Self::Unprocessable {
                code: "browser_error",
                message,
            },
            T::Session(s) => s.into(),
            T::Internal(cause) => Self::Internal(cause),
        }
    }
}

impl ApiError {
    /// An internal error shown as 503 (a dependency failed, retry later);
    /// the cause is still logged.
    fn unavailable(self) -> Self {
        match self {
            Self::Internal(cause) => {
                tracing::error!(error = %format!("{cause:#}"), "service unavailable");
                Self::Unavailable("the browser could not be started; try again".into())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_hide_their_cause_from_the_client() {
        let err = ApiError::Internal(anyhow::anyhow!("password=hunter2 at db"));
        assert_eq!(err.to_string(), "internal error");
        let res = err.into_response();
        assert_eq!(res.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let cause = res
            .extensions()
            .get::<ErrorCause>()
            .expect("cause for the logger");
        assert!(cause.0.to_string().contains("hunter2"));
    }

    /// Every session and tool failure (but `Held`, which never leaves the
    /// pipeline), and every grant failure inside a session's.
    fn engine_failures() -> Vec<crate::sessions::ToolError> {
        use crate::domain::{CloseReason, SessionState};
        use crate::grants::{GrantError as G, GrantState};
        use crate::sessions::{OpenRequestError, SessionError as S, ToolError as T};
        let grants = [
            G::Unknown,
            G::Expired,
            G::Revoked,
            G::Consumed,
            G::WrongTenant,
            G::TooNarrow,
            G::Invalid("bad domain".into()),
            G::NotFound,
            G::TokenNotFound,
            G::NotPending(GrantState::Denied),
            G::TooManyPending,
            G::Internal(anyhow::anyhow!("db down")),
        ];
        let sessions = [
            S::NotFound,
            S::Gone {
                state: SessionState::Failed,
                reason: Some(CloseReason::BrowserExited),
            },
            S::Gone {
                state: SessionState::Closing,
                reason: None,
            },
            S::Limit {
                message: "too many".into(),
                retry_after_s: 3,
            },
            S::Invalid(OpenRequestError::GrantRequired),
            S::Invalid(OpenRequestError::Viewport),
            S::StartFailed(anyhow::anyhow!("no chromium")),
            S::Internal(anyhow::anyhow!("secret cause")),
        ]
        .into_iter()
        .chain(grants.into_iter().map(S::Grant));
        let tools = [
            T::Invalid("m".into()),
            T::TooLarge("m".into()),
            T::InvalidSelector("m".into()),
            T::UnknownKey("m".into()),
            T::ElementNotFound("m".into()),
            T::TabNotFound("m".into()),
            T::LastTab,
            T::ActionFailed("m".into()),
            T::TabCrashed,
            T::DownloadRefused,
            T::InvalidFileName("m".into()),
            T::NotAFileInput("m".into()),
            T::DialogOpen("m".into()),
            T::NoDialog,
            T::RecordingQuotaFull("m".into()),
            T::Timeout("m".into()),
            T::BrowserFailed,
            T::Protocol("m".into()),
            T::OperatorHasControl("op".into()),
            T::DeniedByPolicy("m".into()),
            T::DeniedByOperator("m".into()),
            T::ApprovalTimedOut("m".into()),
            T::Internal(anyhow::anyhow!("secret cause")),
        ];
        tools.into_iter().chain(sessions.map(T::Session)).collect()
    }

    #[test]
    fn engine_errors_carry_the_code_and_message_the_api_answers_with() {
        for e in engine_failures() {
            let (code, message) = (e.code(), e.public_message());
            let session = match &e {
                crate::sessions::ToolError::Session(s) => Some((s.code(), s.public_message())),
                _ => None,
            };
            let api = ApiError::from(e);
            assert_eq!(
                (code, message.as_str()),
                (api.code(), api.to_string().as_str())
            );
            if let Some((code, message)) = session {
                assert_eq!((code, message), (api.code(), api.to_string()));
            }
        }
    }

    #[test]
    fn too_many_requests_carries_retry_after() {
        let res = ApiError::TooManyRequests {
            message: "limit".into(),
            retry_after_s: 7,
        }
        .into_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()[header::RETRY_AFTER], "7");
    }
}
