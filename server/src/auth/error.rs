//! `AuthError`, what the operators service can fail with.

/// What the auth service can fail with; each maps to one `UiError`
/// (`middleware.rs`, the web side).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A field is wrong.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The enrollment link is unknown, used or expired.
    #[error("{0}")]
    Link(&'static str),
    /// The browser's passkey response did not verify.
    #[error("the passkey response did not verify ({0}); try again")]
    Ceremony(String),
    /// No ceremony was started in this dashboard session, or it expired.
    #[error(
        "no passkey ceremony is in progress in this browser (or it took over 5 minutes): start again"
    )]
    NoCeremony,
    /// No such operator, or disabled, or without passkeys.
    #[error("no enabled operator {0:?} with a passkey")]
    UnknownOperator(String),
    /// The operator is disabled.
    #[error("operator {0} is disabled")]
    Disabled(String),
    /// Not found.
    #[error("{0} not found")]
    NotFound(String),
    /// Conflicting state (name taken, last passkey, registered already).
    #[error("{0}")]
    Conflict(String),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}
