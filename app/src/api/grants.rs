//! Grant requests and tokens: the operator's approvals queue.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// A request waiting for (or past) a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRequestView {
    /// `gr_…`.
    pub id: String,
    /// Requesting tenant.
    pub tenant: String,
    /// The requesting key's label (or its id when it has none).
    pub requested_by: String,
    /// Exact hosts.
    pub domains: Vec<String>,
    /// The agent's reason.
    pub reason: String,
    /// `pending`, `approved`, `denied`, `expired`.
    pub state: String,
    /// Unix ms.
    pub created_at: i64,
    /// Who decided (`cli`, `operator:op_…`).
    pub decided_by: Option<String>,
    /// The agent also asks to drive the session over CDP (its scripts
    /// then read what the page can: localStorage, non-HttpOnly cookies).
    pub cdp: bool,
    /// Asks Cordon to type TOTP codes from the vault (`type_totp`).
    pub totp: bool,
}

/// An issued token (never the token itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantTokenView {
    /// `gt_…`.
    pub jti: String,
    /// Tenant.
    pub tenant: String,
    /// The request it answers.
    pub request_id: String,
    /// Exact hosts.
    pub domains: Vec<String>,
    /// `active`, `consumed`, `expired`, `revoked`, or `awaiting pickup`.
    pub status: String,
    /// Single- or multi-use.
    pub single_use: bool,
    /// Unix ms.
    pub issued_at: i64,
    /// Unix ms.
    pub expires_at: i64,
}

/// The grants page's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantsView {
    /// Pending requests, oldest first (the one waiting longest on top).
    pub pending: Vec<GrantRequestView>,
    /// Recently decided requests, newest first.
    pub decided: Vec<GrantRequestView>,
    /// Tokens, newest first.
    pub tokens: Vec<GrantTokenView>,
    /// Unix ms on the server when this was read.
    pub now: i64,
}

/// The longest expiry an approval may give, in minutes (one week).
pub const MAX_GRANT_MINUTES: u32 = 7 * 24 * 60;

/// Requests and tokens.
#[server(prefix = "/ui/fn", endpoint = "list_grants")]
pub async fn list_grants() -> Result<GrantsView, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see grants").await?;
    ctl.grants(&op).await
}

/// Approves a pending request: its token is handed to the polling agent.
#[server(prefix = "/ui/fn", endpoint = "approve_grant")]
pub async fn approve_grant(
    id: String,
    expires_min: u32,
    multi_use: bool,
) -> Result<String, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "approve grants").await?;
    if !(1..=MAX_GRANT_MINUTES).contains(&expires_min) {
        return Err(UiError::invalid(
            "expires_min",
            format!("between 1 and {MAX_GRANT_MINUTES} minutes"),
        ));
    }
    ctl.approve_grant(&op, id, expires_min, multi_use).await
}

/// Denies a pending request.
#[server(prefix = "/ui/fn", endpoint = "deny_grant")]
pub async fn deny_grant(id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "deny grants").await?;
    ctl.deny_grant(&op, id).await
}

/// Revokes an issued token.
#[server(prefix = "/ui/fn", endpoint = "revoke_grant")]
pub async fn revoke_grant(jti: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "revoke grant tokens").await?;
    ctl.revoke_grant(&op, jti).await
}
