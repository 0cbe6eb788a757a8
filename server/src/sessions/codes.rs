//! What a caller is told when opening a session or a tool call fails: a
//! stable machine-readable code and a message safe to show (an internal
//! cause is never in it). The web layer's `ApiError` answers with the same
//! code and message and adds the HTTP status (`error.rs`' tests hold the
//! two together); callers below it, such as `run_task`'s runner, use these
//! directly, so the engine never names the web layer's error.
//!
//! (`ToolError`'s half lives here rather than next to the type in `tool/`
//! only so that this change did not touch the pipeline while it was being
//! edited; it belongs there.)

use super::{OpenRequestError, SessionError, ToolError};

/// The message an internal failure shows; its cause is logged instead.
const INTERNAL: &str = "internal error";

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

impl ToolError {
    /// The machine-readable code (`element_not_found`, `denied_by_policy` …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "bad_request",
            Self::TooLarge(_) => "payload_too_large",
            Self::InvalidSelector(_) => "invalid_selector",
            Self::UnknownKey(_) => "unknown_key",
            Self::ElementNotFound(_) => "element_not_found",
            Self::TabNotFound(_) => "tab_not_found",
            Self::LastTab => "last_tab",
            Self::DeniedByPolicy(_) => "denied_by_policy",
            Self::DeniedByOperator(_) => "denied_by_operator",
            Self::ApprovalTimedOut(_) => "approval_timed_out",
            // Handled inside `run_tool`; reaching a caller is a bug.
            Self::Held(_) => "internal",
            Self::OperatorHasControl(_) => "operator_has_control",
            Self::ActionFailed(_) => "action_failed",
            Self::TabCrashed => "tab_crashed",
            Self::DownloadRefused => "download_refused",
            Self::InvalidFileName(_) => "invalid_file_name",
            Self::NotAFileInput(_) => "not_a_file_input",
            Self::RecordingQuotaFull(_) => "recording_quota_full",
            Self::Timeout(_) => "timeout",
            Self::BrowserFailed => "browser_failed",
            Self::Protocol(_) => "browser_error",
            Self::Session(s) => s.code(),
            Self::Internal(_) => "internal",
        }
    }

    /// The message a caller may see.
    pub fn public_message(&self) -> String {
        match self {
            Self::Held(_) | Self::Internal(_) => INTERNAL.into(),
            Self::Session(s) => s.public_message(),
            other => other.to_string(),
        }
    }
}
