//! (Server only.) What the dashboard needs of the control plane: one trait
//! per area, each method told which operator asks. The server's `AppState`
//! implements them (`server/src/dashboard/`) and provides the handle as
//! context; server functions reach it through [`require`], which also
//! checks the caller's role.

use std::sync::Arc;

use leptos::prelude::*;

use super::approvals::ApprovalsView;
use super::audit::{AuditPageView, AuditQuery, AuditVerification};
use super::auth::{Invite, Operator, OperatorInfo, PasskeyInfo, Role};
use super::credentials::{CredentialView, TotpView};
use super::grants::GrantsView;
use super::health::SystemStatus;
use super::live::{DomainPreviewView, LiveAccess, SavedView};
use super::screenshots::TimelineView;
use super::sessions::{SessionDetail, SessionFilter, SessionView};
use super::tasks::{TaskList, TaskTrace};
use super::tenants::{NewApiKey, TenantView};
use crate::error::UiError;

/// Results of the backend.
pub type UiResult<T> = Result<T, UiError>;

/// Operators and passkeys.
#[async_trait::async_trait]
pub trait AuthBackend {
    /// Audits a refused attempt by a logged-in operator (role too low).
    async fn refused(&self, op: &Operator, what: &str);
    /// The operator's passkeys.
    async fn my_passkeys(&self, op: &Operator) -> UiResult<Vec<PasskeyInfo>>;
    /// Removes one of the operator's own passkeys (never the last), when
    /// `request`'s dashboard session proved presence with a passkey in the
    /// last five minutes (the proof is used up); otherwise `forbidden`.
    async fn remove_passkey(
        &self,
        op: &Operator,
        id: String,
        request: &http::request::Parts,
    ) -> UiResult<()>;
    /// Every operator.
    async fn operators(&self, op: &Operator) -> UiResult<Vec<OperatorInfo>>;
    /// Creates an operator with an enrollment link.
    async fn invite(&self, op: &Operator, name: String, role: Role) -> UiResult<Invite>;
    /// Disables (ending their dashboard sessions) or enables an operator.
    async fn set_operator_enabled(&self, op: &Operator, id: String, enabled: bool) -> UiResult<()>;
    /// Scopes an operator to tenants (comma list; empty: every tenant).
    async fn set_operator_tenants(
        &self,
        op: &Operator,
        id: String,
        tenants: String,
    ) -> UiResult<()>;
}

/// Health and the overview.
#[async_trait::async_trait]
pub trait HealthBackend {
    /// Current health.
    async fn status(&self, op: &Operator) -> UiResult<SystemStatus>;
}

/// The audit log.
#[async_trait::async_trait]
pub trait AuditBackend {
    /// One filtered page.
    async fn audit(&self, op: &Operator, query: AuditQuery) -> UiResult<AuditPageView>;
    /// Recomputes the chain.
    async fn verify_audit(&self, op: &Operator) -> UiResult<AuditVerification>;
}

/// Grants.
#[async_trait::async_trait]
pub trait GrantsBackend {
    /// Requests and tokens.
    async fn grants(&self, op: &Operator) -> UiResult<GrantsView>;
    /// Approves; answers the token's id.
    async fn approve_grant(
        &self,
        op: &Operator,
        id: String,
        expires_min: u32,
        multi_use: bool,
    ) -> UiResult<String>;
    /// Denies.
    async fn deny_grant(&self, op: &Operator, id: String) -> UiResult<()>;
    /// Revokes a token.
    async fn revoke_grant(&self, op: &Operator, jti: String) -> UiResult<()>;
}

/// The risk gate's approvals.
#[async_trait::async_trait]
pub trait ApprovalsBackend {
    /// The pending approvals.
    async fn approvals(&self, op: &Operator) -> UiResult<ApprovalsView>;
    /// How many wait.
    async fn approval_count(&self, op: &Operator) -> UiResult<usize>;
    /// Approves or denies one; `Conflict` when it is no longer pending.
    async fn decide_approval(&self, op: &Operator, id: String, approve: bool) -> UiResult<()>;
}

/// Browser sessions.
#[async_trait::async_trait]
pub trait SessionsBackend {
    /// The list.
    async fn sessions(&self, op: &Operator, filter: SessionFilter) -> UiResult<Vec<SessionView>>;
    /// One session.
    async fn session(&self, op: &Operator, id: String) -> UiResult<SessionDetail>;
    /// Ends one.
    async fn end_session(&self, op: &Operator, id: String) -> UiResult<()>;
    /// Revokes one of its live links.
    async fn revoke_live_link(&self, op: &Operator, session: String, id: String) -> UiResult<()>;
    /// Its screenshot timeline.
    async fn timeline(&self, op: &Operator, session: String) -> UiResult<TimelineView>;
}

/// The vault (metadata only).
#[async_trait::async_trait]
pub trait CredentialsBackend {
    /// Every credential.
    async fn credentials(&self, op: &Operator) -> UiResult<Vec<CredentialView>>;
    /// Deletes one.
    async fn delete_credential(
        &self,
        op: &Operator,
        tenant: String,
        domain: String,
    ) -> UiResult<()>;
    /// Every TOTP seed (metadata only).
    async fn totp_seeds(&self, op: &Operator) -> UiResult<Vec<TotpView>>;
    /// Deletes one seed.
    async fn delete_totp(&self, op: &Operator, tenant: String, id: String) -> UiResult<()>;
}

/// Tenants and API keys.
#[async_trait::async_trait]
pub trait TenantsBackend {
    /// Tenants with their keys.
    async fn tenants(&self, op: &Operator) -> UiResult<Vec<TenantView>>;
    /// Creates a tenant.
    async fn create_tenant(&self, op: &Operator, id: String, name: String) -> UiResult<()>;
    /// Creates a key (shown once).
    async fn create_api_key(
        &self,
        op: &Operator,
        tenant: String,
        label: String,
    ) -> UiResult<NewApiKey>;
    /// Revokes a key.
    async fn revoke_api_key(&self, op: &Operator, id: String) -> UiResult<()>;
}

/// The whole control plane as the dashboard sees it.
pub trait Dashboard:
    AuthBackend
    + HealthBackend
    + AuditBackend
    + GrantsBackend
    + SessionsBackend
    + CredentialsBackend
    + TenantsBackend
    + LiveBackend
    + TasksBackend
    + ApprovalsBackend
    + Send
    + Sync
    + 'static
{
}

impl<T> Dashboard for T where
    T: AuthBackend
        + HealthBackend
        + AuditBackend
        + GrantsBackend
        + SessionsBackend
        + CredentialsBackend
        + TenantsBackend
        + LiveBackend
        + TasksBackend
        + ApprovalsBackend
        + Send
        + Sync
        + 'static
{
}

/// The live view and refresh sessions.
#[async_trait::async_trait]
pub trait LiveBackend {
    /// A single-use ticket for the live view of a session.
    async fn live_ticket(&self, op: &Operator, session: String) -> UiResult<LiveAccess>;
    /// Starts a refresh session; answers its id.
    async fn start_refresh(
        &self,
        op: &Operator,
        tenant: String,
        domains: String,
        start_url: Option<String>,
    ) -> UiResult<String>;
    /// Hands control of a session back to its agent.
    async fn release_control(&self, op: &Operator, session: String) -> UiResult<()>;
    /// What saving a refresh session would store.
    async fn refresh_preview(
        &self,
        op: &Operator,
        session: String,
        domains: String,
    ) -> UiResult<Vec<DomainPreviewView>>;
    /// Saves a refresh session's logins and ends it.
    async fn save_refresh(
        &self,
        op: &Operator,
        session: String,
        domains: String,
    ) -> UiResult<Vec<SavedView>>;
    /// The TOTP seeds whose codes can be typed into a refresh session.
    async fn session_totp(&self, op: &Operator, session: String) -> UiResult<Vec<TotpView>>;
    /// Types the current code of a seed into the refresh session's focused
    /// field; answers how many digits.
    async fn type_totp(&self, op: &Operator, session: String, label: String) -> UiResult<usize>;
}

/// Tasks and traces.
#[async_trait::async_trait]
pub trait TasksBackend {
    /// A task (of any tenant) with its trace.
    async fn task(&self, op: &Operator, id: String) -> UiResult<TaskTrace>;
    /// Recent tasks of every tenant.
    async fn tasks(&self, op: &Operator) -> UiResult<TaskList>;
    /// How many tasks wait for an operator.
    async fn waiting_tasks(&self, op: &Operator) -> UiResult<usize>;
}

/// How the server provides its [`Dashboard`] to server functions.
pub type DashboardHandle = Arc<dyn Dashboard>;

/// The operator of this request, as the server's auth middleware found it.
pub fn current_operator() -> Option<Operator> {
    use_context::<http::request::Parts>().and_then(|p| p.extensions.get::<Operator>().cloned())
}

/// The backend and the calling operator, if their role allows `needed`;
/// otherwise [`UiError::Unauthorized`] (not logged in) or
/// [`UiError::Forbidden`] (audited as a refused attempt). `what` names the
/// action in the refusal ("approve grants").
pub async fn require(needed: Role, what: &str) -> UiResult<(DashboardHandle, Operator)> {
    let ctl = use_context::<DashboardHandle>()
        .ok_or_else(|| UiError::internal("the dashboard backend is not configured"))?;
    let op = current_operator().ok_or(UiError::Unauthorized)?;
    if !op.role.allows(needed) {
        ctl.refused(&op, what).await;
        return Err(UiError::forbidden(format!(
            "{} may not {what} (needs the {needed} role)",
            op.role
        )));
    }
    Ok((ctl, op))
}
