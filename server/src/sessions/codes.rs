//! What a caller is told when opening a session or a tool call fails: a
//! stable machine-readable code and a message safe to show (an internal
//! cause is never in it). The web layer's `ApiError` answers with the same
//! code and message and adds the HTTP status (`error.rs`' tests hold the
//! two together); callers below it, such as `run_task`'s runner, use these
//! directly, so the engine never names the web layer's error.
//!
//! (`ToolError`'s half is next to the type, in `tool/mod.rs`.)

use super::{OpenRequestError, SessionError};

/// The message an internal failure shows; its cause is logged instead.
pub(super) const INTERNAL: &str = "internal error";

impl SessionError {
    /// The machine-readable code (`not_found`, `gone`, `grant_required` …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound => "not_found",
            Self::Gone { .. } => "gone",
            Self::Limit { .. } => "too_many_requests",
            Self::Invalid(OpenRequestError::GrantRequired) => "grant_required",
            Self::Invalid(_) => "bad_request",
            Self::Grant(g) => g.code(),
            Self::StartFailed(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    /// The message a caller may see.
    pub fn public_message(&self) -> String {
        match self {
            Self::Grant(g) => g.public_message(),
            Self::StartFailed(_) => "the browser could not be started; try again".into(),
            Self::Internal(_) => INTERNAL.into(),
            other => other.to_string(),
        }
    }
}
