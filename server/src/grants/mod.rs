//! Operator grants: an agent asks for the credentials of some domains, an
//! operator approves (or denies), and the agent collects an opaque token
//! once. An operator-mode session presents the token; [`redeem`] checks it
//! and, for a single-use token, consumes it atomically in SQL.
//!
//! Tokens are `cgt_` + 256 random bits (base64url); only their SHA-256 is
//! stored, written when the requester collects the token: before that the
//! token does not exist, after it only the requester holds it. Every step
//! is audited with ids and counts, never a token.

mod decide;
mod redeem;
pub mod settings;

use crate::audit::NewEvent;
use crate::domain::pattern::{HOST_PATTERN, MAX_HOST, NOT_BLANK, is_host};
use crate::store::Store;
use crate::vault::Domain;

/// Where a grant request stands (a domain type; named here too, as before).
pub use crate::domain::GrantState;
pub use decide::{approve, deny, domains_without_credentials, poll, request, revoke};
pub use redeem::{gc, redeem};

/// The prefix of every grant token, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = crate::ids::GRANT_TOKEN_SECRET;
/// Default lifetime of an approved grant.
pub const DEFAULT_EXPIRY_MIN: u64 = 15;
/// Longest lifetime an operator may give.
pub const MAX_EXPIRY_MIN: u64 = 24 * 60;
/// Most domains one request may name.
pub const MAX_DOMAINS: usize = 32;
/// Longest reason.
pub const MAX_REASON: usize = 500;
/// Expired tokens are kept this long (so a late use is told `grant_expired`),
/// then deleted.
pub(super) const KEEP_EXPIRED_MS: i64 = 3600 * 1000;
/// Requests nobody decided expire after this long.
pub(super) const PENDING_FOR_MS: i64 = 24 * 3600 * 1000;

/// Why a grant token is refused, or a grant step fails.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// No token with this value.
    #[error("unknown grant token")]
    Unknown,
    /// Past its expiry.
    #[error("the grant token has expired")]
    Expired,
    /// Revoked by an operator.
    #[error("the grant token was revoked")]
    Revoked,
    /// Single-use and already used.
    #[error("the grant token was already used")]
    Consumed,
    /// Issued to another tenant.
    #[error("the grant token belongs to another tenant")]
    WrongTenant,
    /// Does not cover every requested domain.
    #[error("the grant token does not cover every requested domain")]
    TooNarrow,
    /// Malformed input.
    #[error("{0}")]
    Invalid(String),
    /// No such grant request (for this tenant).
    #[error("grant request not found")]
    NotFound,
    /// No such grant token (by its id).
    #[error("grant token not found")]
    TokenNotFound,
    /// The request is not pending.
    #[error("grant request is {0}, not pending")]
    NotPending(GrantState),
    /// Too many of the key's (or its tenant's) requests wait already.
    #[error(
        "too many grant requests wait for an operator (at most 20 of a key, 100 of a tenant); ask an operator to decide them first"
    )]
    TooManyPending,
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl GrantError {
    /// The machine-readable code (a refused token's own, or the kind).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown => "grant_unknown",
            Self::Expired => "grant_expired",
            Self::Revoked => "grant_revoked",
            Self::Consumed => "grant_consumed",
            Self::WrongTenant => "grant_wrong_tenant",
            Self::TooNarrow => "grant_too_narrow",
            Self::Invalid(_) => "bad_request",
            Self::NotFound | Self::TokenNotFound => "not_found",
            Self::NotPending(_) => "already_decided",
            Self::TooManyPending => "too_many_requests",
            Self::Internal(_) => "internal",
        }
    }

    /// The message a caller may see (an internal cause is logged instead).
    pub fn public_message(&self) -> String {
        match self {
            Self::Internal(_) => "internal error".into(),
            other => other.to_string(),
        }
    }
}

/// A request as its requester sees it.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GrantStatus {
    /// `gr_…`.
    pub request_id: String,
    /// Where the request stands.
    pub state: GrantState,
    /// The domains asked for.
    pub domains: Vec<String>,
    /// The token, on the first poll after approval only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_token: Option<String>,
    /// The token's id (`gt_…`), once approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// Unix ms, once approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Whether one session use consumes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_use: Option<bool>,
    /// Whether CDP access was asked for (and, once approved, granted).
    pub cdp: bool,
    /// Whether typing TOTP codes was asked for (and, once approved, granted).
    pub totp: bool,
}

/// The body of `POST /api/grants/requests`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGrantRequest {
    /// Exact hosts whose credentials are wanted (host names or IPv4
    /// addresses).
    #[schemars(length(min = 1, max = MAX_DOMAINS), inner(length(min = 1, max = MAX_HOST), pattern(HOST_PATTERN)))]
    pub domains: Vec<String>,
    /// Why, for the operator (not blank).
    #[schemars(length(min = 1, max = MAX_REASON), pattern(NOT_BLANK))]
    pub reason: String,
    /// Ask to drive the session over CDP too (`/cdp/{id}`): the operator
    /// sees it on the request. Cookie reads stay refused, but a client's
    /// scripts read what the page can (localStorage, non-HttpOnly cookies).
    #[serde(default)]
    pub cdp: bool,
    /// Ask Cordon to type second-factor codes from the vault's TOTP seeds
    /// for these domains (`type_totp`); the agent never sees a code. The
    /// operator sees it on the request.
    #[serde(default)]
    pub totp: bool,
}

/// Parses a list of exact hosts: 1 to [`MAX_DOMAINS`], each a host as
/// [`HOST_PATTERN`] says, as a [`Domain`].
pub fn parse_domains(domains: &[String]) -> Result<Vec<Domain>, GrantError> {
    if domains.is_empty() || domains.len() > MAX_DOMAINS {
        return Err(GrantError::Invalid(format!(
            "domains: 1 to {MAX_DOMAINS} host names"
        )));
    }
    let mut out: Vec<Domain> = domains
        .iter()
        .map(|d| {
            if !is_host(d) {
                return Err(GrantError::Invalid(format!(
                    "domains: {:?} is not a host name or IPv4 address",
                    d.chars().take(64).collect::<String>()
                )));
            }
            d.parse::<Domain>()
                .map_err(|e| GrantError::Invalid(format!("domains: {e}")))
        })
        .collect::<Result<_, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

/// A stored JSON list of domains (empty if it is not one).
pub(crate) fn domains_of(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

pub(super) async fn audit(store: &Store, event: NewEvent) -> Result<(), GrantError> {
    store.audit_append(event).await?;
    Ok(())
}
