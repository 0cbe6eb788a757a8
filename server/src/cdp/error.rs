//! `CdpError`, what a CDP call can fail with, and chromiumoxide's errors
//! mapped to it or named for a log line.

use super::REQUEST_TIMEOUT_MS;

/// What a CDP call can fail with, typed so the API can answer precisely.
#[derive(Debug, thiserror::Error)]
pub enum CdpError {
    /// The call did not finish within its bound.
    #[error("{0} timed out after {1} ms")]
    Timeout(&'static str, u64),
    /// A selector or ref matched no element.
    #[error("{0}")]
    NotFound(String),
    /// A CSS selector the browser cannot parse.
    #[error("{0}")]
    InvalidSelector(String),
    /// A key name the keyboard does not know.
    #[error("{0}")]
    UnknownKey(String),
    /// No tab has this id.
    #[error("{0}")]
    TabNotFound(String),
    /// The tab's renderer crashed while the call ran (the browser lives on).
    #[error("the tab's renderer crashed")]
    TabCrashed,
    /// The navigation turned into a download, which is refused.
    #[error("the URL is a download, and downloads are refused")]
    DownloadRefused,
    /// The target of an `upload` is not an `<input type=file>`.
    #[error("{0}")]
    NotAFileInput(String),
    /// The page refused or failed the action (navigation error, bad input).
    #[error("{0}")]
    Failed(String),
    /// A JavaScript dialog opened in the tab (and stops its page) while a
    /// read ran.
    #[error("{0}")]
    DialogOpen(String),
    /// The dialog an answer was for is no longer the one open in its tab
    /// (another took its place, or it closed): nothing was answered.
    #[error("the dialog changed before it was answered")]
    DialogChanged,
    /// The browser is gone (crashed or killed).
    #[error("the browser is gone")]
    BrowserGone,
    /// Anything else from the protocol layer.
    #[error("browser protocol error: {0}")]
    Protocol(String),
}

impl From<chromiumoxide::error::CdpError> for CdpError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        use chromiumoxide::error::CdpError as E;
        match e {
            E::Ws(_) | E::Io(_) | E::ChannelSendError(_) | E::NoResponse => Self::BrowserGone,
            // chromiumoxide's own bound on one CDP request: the call ran out
            // of time, whichever bound was hit first.
            E::Timeout => Self::Timeout("the browser call", REQUEST_TIMEOUT_MS),
            E::ChromeMessage(m) => Self::Failed(m),
            other => Self::Protocol(other.to_string()),
        }
    }
}

/// A CDP error's variant name, safe to log.
pub(super) fn error_kind(e: &chromiumoxide::error::CdpError) -> &'static str {
    use chromiumoxide::error::CdpError as E;
    match e {
        E::Ws(_) => "websocket",
        E::Io(_) => "io",
        E::Serde(_) | E::InvalidMessage(..) => "unparsed message",
        E::Timeout => "timeout",
        E::NoResponse => "no response",
        E::ChromeMessage(_) => "chrome message",
        _ => "other",
    }
}
