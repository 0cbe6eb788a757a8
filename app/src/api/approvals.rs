//! The risk gate's approvals: agent actions waiting for an operator's
//! decision. Their screenshots are served by the server at
//! `/ui/approvals/<id>/screenshot` to logged-in operators.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// One action waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalView {
    /// `apr_…`.
    pub id: String,
    /// The session's tenant.
    pub tenant: String,
    /// `s_…`.
    pub session: String,
    /// Who asks (`agent:k_…`).
    pub actor: String,
    /// `tool.click`, `tool.navigate`, …
    pub action: String,
    /// Its params as the audit log holds them (typed text as its length).
    pub params: String,
    /// `high` or `critical`.
    pub level: String,
    /// Why it waits, one line per rule.
    pub reasons: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms; denied after.
    pub expires_at: i64,
    /// A screenshot of the page with the target outlined exists.
    pub has_screenshot: bool,
}

/// The approvals page's data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalsView {
    /// Oldest first (the one closest to timing out on top).
    pub pending: Vec<ApprovalView>,
    /// Unix ms on the server when this was read.
    pub now: i64,
}

/// The pending approvals.
#[server(prefix = "/ui/fn", endpoint = "list_approvals")]
pub async fn list_approvals() -> Result<ApprovalsView, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see approvals").await?;
    ctl.approvals(&op).await
}

/// How many wait (the navigation's badge).
#[server(prefix = "/ui/fn", endpoint = "pending_approvals")]
pub async fn pending_approvals() -> Result<usize, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see approvals").await?;
    ctl.approval_count(&op).await
}

/// Approves (`approve = true`: the action runs) or denies a pending action.
#[server(prefix = "/ui/fn", endpoint = "decide_approval")]
pub async fn decide_approval(id: String, approve: bool) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "decide approvals").await?;
    ctl.decide_approval(&op, id, approve).await
}
