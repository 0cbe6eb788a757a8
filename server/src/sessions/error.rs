//! `SessionError`: what opening or using a session can fail with.

use super::OpenRequestError;
use crate::domain::{CloseReason, SessionId, SessionState};

/// A session id as an edge (a path, a tool's argument, a server function)
/// gives it: a malformed one is [`SessionError::NotFound`], as an unknown
/// one is.
pub fn session_id(id: &str) -> Result<SessionId, SessionError> {
    id.parse().map_err(|_| SessionError::NotFound)
}

/// What opening or using a session can fail with.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No such session for this tenant.
    #[error("session not found")]
    NotFound,
    /// The session has ended.
    #[error("session is {state} ({})", reason.map_or("closing", CloseReason::as_str))]
    Gone {
        /// `closing`, `closed` or `failed`.
        state: SessionState,
        /// Why (none while it is still closing).
        reason: Option<CloseReason>,
    },
    /// A limit is reached.
    #[error("{message}")]
    Limit {
        /// Which.
        message: String,
        /// Seconds until a retry may succeed.
        retry_after_s: u64,
    },
    /// The request is invalid.
    #[error(transparent)]
    Invalid(#[from] OpenRequestError),
    /// The operator grant token was refused.
    #[error(transparent)]
    Grant(#[from] crate::grants::GrantError),
    /// The browser could not be started.
    #[error("the browser could not be started")]
    StartFailed(#[source] anyhow::Error),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}
