//! `ToolError`: what a tool call can fail with, its code, the message an
//! agent is shown, and a CDP failure as a tool's.

use super::gate;
use crate::cdp::CdpError;
use crate::sessions::SessionError;

/// What a tool call can fail with; each variant is one cause with one
/// status and code at the API (`error.rs`).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Malformed or out-of-range input.
    #[error("{0}")]
    Invalid(String),
    /// A field is too large.
    #[error("{0}")]
    TooLarge(String),
    /// A CSS selector the browser cannot parse.
    #[error("{0}")]
    InvalidSelector(String),
    /// A key `press` cannot send.
    #[error("{0}")]
    UnknownKey(String),
    /// No element matches (selector, ref, point).
    #[error("{0}")]
    ElementNotFound(String),
    /// No tab has this id.
    #[error("{0}")]
    TabNotFound(String),
    /// The last tab cannot be closed.
    #[error("cannot close the last tab; close the session instead")]
    LastTab,
    /// The page refused or failed the action (navigation error, no option matches).
    #[error("{0}")]
    ActionFailed(String),
    /// The active tab's renderer crashed; the session is still open.
    #[error(
        "the tab's renderer crashed; the session is still open: navigate again or open a new tab"
    )]
    TabCrashed,
    /// The navigation turned into a download, which is refused.
    #[error("the URL is a download, and downloads are refused")]
    DownloadRefused,
    /// A file name with a path separator, a control character, or out of
    /// range.
    #[error("{0}")]
    InvalidFileName(String),
    /// The target of an `upload` is not an `<input type=file>`.
    #[error("{0}")]
    NotAFileInput(String),
    /// A JavaScript dialog is open in the tab and stops its page: answer
    /// it (`dialog`) first.
    #[error("{0}")]
    DialogOpen(String),
    /// `dialog` with no dialog open in the tab.
    #[error("no dialog is open in the active tab")]
    NoDialog,
    /// Audit recording is full for the tenant: the screenshot is not kept.
    #[error("{0}")]
    RecordingQuotaFull(String),
    /// The call ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// The browser is gone; the session is now failed.
    #[error("the browser exited unexpectedly; the session is now failed")]
    BrowserFailed,
    /// Another protocol error from the browser.
    #[error("{0}")]
    Protocol(String),
    /// The session cannot be used (ended meanwhile).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The session's grant did not ask for TOTP codes (`totp: true`).
    #[error("{0}")]
    TotpNotGranted(String),
    /// An operator drives the session from the live view; agent calls wait
    /// until they hand control back.
    #[error("operator {0} has taken control of this session; retry after they hand it back")]
    OperatorHasControl(String),
    /// The risk gate refuses this outright (typing into a password field).
    #[error("{0}")]
    DeniedByPolicy(String),
    /// An operator denied the action in the dashboard.
    #[error("{0}")]
    DeniedByOperator(String),
    /// No operator decided within the approval timeout; the action did not run.
    #[error("{0}")]
    ApprovalTimedOut(String),
    /// A bug or an outage (the audit row could not be written).
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
    /// The risk gate stopped a click at its target (read in the click's
    /// own lookup) to wait for an operator. Internal: `run_tool` handles it
    /// and never returns it.
    #[error("the action waits for an operator's decision")]
    Held(Box<gate::Held>),
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
            Self::TotpNotGranted(_) => "totp_not_granted",
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
            Self::DialogOpen(_) => "dialog_open",
            Self::NoDialog => "no_dialog",
            Self::RecordingQuotaFull(_) => "recording_quota_full",
            Self::Timeout(_) => "timeout",
            Self::BrowserFailed => "browser_failed",
            Self::Protocol(_) => "browser_error",
            Self::Session(s) => s.code(),
            Self::Internal(_) => "internal",
        }
    }

    /// Hands the message's text to `scrub` (which blanks typed codes out):
    /// a page's error can quote an address that carries one.
    pub(in crate::sessions) fn scrub_message(&mut self, scrub: &mut dyn FnMut(&mut String)) {
        match self {
            Self::Invalid(m)
            | Self::TooLarge(m)
            | Self::InvalidSelector(m)
            | Self::UnknownKey(m)
            | Self::ElementNotFound(m)
            | Self::TabNotFound(m)
            | Self::ActionFailed(m)
            | Self::InvalidFileName(m)
            | Self::NotAFileInput(m)
            | Self::DialogOpen(m)
            | Self::RecordingQuotaFull(m)
            | Self::Timeout(m)
            | Self::Protocol(m)
            | Self::TotpNotGranted(m)
            | Self::OperatorHasControl(m)
            | Self::DeniedByPolicy(m)
            | Self::DeniedByOperator(m)
            | Self::ApprovalTimedOut(m) => scrub(m),
            // Fixed texts, or messages that never quote a page.
            Self::LastTab
            | Self::NoDialog
            | Self::TabCrashed
            | Self::DownloadRefused
            | Self::BrowserFailed
            | Self::Session(_)
            | Self::Internal(_)
            | Self::Held(_) => {}
        }
    }

    /// The message a caller may see.
    pub fn public_message(&self) -> String {
        match self {
            Self::Held(_) | Self::Internal(_) => crate::sessions::codes::INTERNAL.into(),
            Self::Session(s) => s.public_message(),
            other => other.to_string(),
        }
    }
}

impl From<CdpError> for ToolError {
    fn from(e: CdpError) -> Self {
        match e {
            CdpError::Timeout(what, ms) => {
                Self::Timeout(format!("{what} did not finish within {ms} ms"))
            }
            CdpError::NotFound(m) => Self::ElementNotFound(m),
            CdpError::InvalidSelector(m) => Self::InvalidSelector(m),
            CdpError::UnknownKey(m) => Self::UnknownKey(m),
            CdpError::TabNotFound(m) => Self::TabNotFound(m),
            CdpError::TabCrashed => Self::TabCrashed,
            CdpError::DownloadRefused => Self::DownloadRefused,
            CdpError::NotAFileInput(m) => Self::NotAFileInput(m),
            CdpError::Failed(m) => Self::ActionFailed(m),
            CdpError::DialogOpen(m) => Self::DialogOpen(m),
            CdpError::DialogChanged => Self::ActionFailed(e.to_string()),
            CdpError::BrowserGone => Self::BrowserFailed,
            CdpError::Protocol(m) => Self::Protocol(m),
        }
    }
}
