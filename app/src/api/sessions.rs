//! Browser sessions as operators watch them.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// One session in the live list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    /// `s_…`.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// `clean` or `operator`.
    pub mode: String,
    /// `off`, `transient`, `audit`.
    pub record: String,
    /// `starting`, `ready`, `closing`, `closed`, `failed`.
    pub state: String,
    /// Why it ended, once it has.
    pub close_reason: Option<String>,
    /// Domains asked for (operator mode).
    pub domains: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub last_activity_at: i64,
    /// Unix ms it is closed at, at the latest.
    pub deadline_at: i64,
    /// Unix ms, once ended.
    pub closed_at: Option<i64>,
    /// Tool calls so far (from the audit log).
    pub tool_calls: i64,
    /// The last audited action (`tool.navigate`), if any.
    pub last_action: Option<String>,
}

/// What the sessions list shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionFilter {
    /// Only this tenant.
    pub tenant: Option<String>,
    /// Only this state; `None` = running ones (starting, ready, closing).
    pub state: Option<String>,
}

/// One egress log entry of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressView {
    /// Unix ms.
    pub ts: i64,
    /// Host asked for.
    pub host: String,
    /// Port.
    pub port: i64,
    /// Allowed or refused.
    pub allowed: bool,
    /// Why refused (address class), if refused.
    pub reason: Option<String>,
    /// Bytes sent up.
    pub bytes_up: i64,
    /// Bytes received.
    pub bytes_down: i64,
}

/// A live link of a session (an agent's capability URL for its own user).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveLinkView {
    /// `ll_…`.
    pub id: String,
    /// `view` or `control`.
    pub mode: String,
    /// `active`, `expired` or `revoked`.
    pub state: String,
    /// The API key that made it.
    pub key_id: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub expires_at: i64,
}

/// One session's page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionDetail {
    /// The session.
    pub session: SessionView,
    /// Its audit trail, oldest first (at most 500).
    pub audit: Vec<super::audit::AuditRow>,
    /// Its egress log, oldest first.
    pub egress: Vec<EgressView>,
    /// Screenshots kept.
    pub screenshots: i64,
    /// The operator holding control from the live view, by name (agent
    /// tool calls are refused meanwhile).
    pub control: Option<String>,
    /// Tasks (`run_task`) that ran on it.
    pub tasks: Vec<super::tasks::TaskLine>,
    /// Live links its agents made, newest first.
    pub live_links: Vec<LiveLinkView>,
}

/// The sessions list.
#[server(prefix = "/ui/fn", endpoint = "list_sessions")]
pub async fn list_sessions(
    tenant: Option<String>,
    state: Option<String>,
) -> Result<Vec<SessionView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see sessions").await?;
    ctl.sessions(&op, SessionFilter { tenant, state }).await
}

/// One session with its audit trail and egress log.
#[server(prefix = "/ui/fn", endpoint = "get_session")]
pub async fn get_session(id: String) -> Result<SessionDetail, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see sessions").await?;
    ctl.session(&op, id).await
}

/// Revokes a live link of a session: its open views end within a second
/// (audited with the operator's id).
#[server(prefix = "/ui/fn", endpoint = "revoke_live_link")]
pub async fn revoke_live_link(session: String, id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "revoke live links").await?;
    ctl.revoke_live_link(&op, session, id).await
}

/// Ends a running session (audited with the operator's id).
#[server(prefix = "/ui/fn", endpoint = "end_session")]
pub async fn end_session(id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "end sessions").await?;
    ctl.end_session(&op, id).await
}
