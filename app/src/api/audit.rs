//! The audit log: filtered, keyset-paginated reading and chain verification.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// One audit event as listed in the dashboard (params are already redacted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRow {
    /// Position in the chain.
    pub seq: i64,
    /// RFC 3339, UTC.
    pub ts: String,
    /// Tenant, if any.
    pub tenant: Option<String>,
    /// Session, if any.
    pub session: Option<String>,
    /// Who acted.
    pub actor: String,
    /// `resource.verb`.
    pub action: String,
    /// Redacted params (JSON text).
    pub params: String,
    /// Outcome.
    pub outcome: String,
    /// First 12 hex digits of the event's hash.
    pub hash_prefix: String,
}

/// Result of recomputing the audit chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditVerification {
    /// Every event verified.
    pub intact: bool,
    /// Events checked.
    pub events: i64,
    /// First broken seq, if any.
    pub broken_seq: Option<i64>,
    /// What is wrong there.
    pub reason: Option<String>,
}

/// The most events one audit page lists.
pub const AUDIT_PAGE_MAX: i64 = 200;

/// Which page of the filtered log to read. Pages are newest first and
/// addressed by the seq at their edge, never by an offset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditCursor {
    /// The newest events.
    #[default]
    Newest,
    /// Events older than this seq.
    Before(i64),
    /// Events newer than this seq (the page before, going back up).
    After(i64),
    /// The oldest events.
    Oldest,
}

/// Filters of the audit page; every one optional, all combinable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Tenant id.
    pub tenant: Option<String>,
    /// Session id.
    pub session: Option<String>,
    /// Actor (`operator:op_…`, `agent:k_…`, `cli`, `system`).
    pub actor: Option<String>,
    /// Action prefix (`grant.`, `tool.navigate`), matched literally.
    pub action: Option<String>,
    /// From this time (RFC 3339 or `YYYY-MM-DDTHH:MM`, UTC), inclusive.
    pub from: Option<String>,
    /// Until this time, exclusive.
    pub to: Option<String>,
    /// The page.
    pub cursor: AuditCursor,
    /// Rows per page (1 to [`AUDIT_PAGE_MAX`]).
    pub limit: i64,
}

/// One page of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPageView {
    /// Events, newest first.
    pub rows: Vec<AuditRow>,
    /// More events are older than the last row.
    pub has_older: bool,
    /// More events are newer than the first row.
    pub has_newer: bool,
}

/// A page of the audit log.
#[server(prefix = "/ui/fn", endpoint = "query_audit")]
pub async fn query_audit(query: AuditQuery) -> Result<AuditPageView, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "read the audit log").await?;
    if !(1..=AUDIT_PAGE_MAX).contains(&query.limit) {
        return Err(UiError::invalid(
            "limit",
            format!("between 1 and {AUDIT_PAGE_MAX}"),
        ));
    }
    ctl.audit(&op, query).await
}

/// Recomputes the whole audit chain.
#[server(prefix = "/ui/fn", endpoint = "verify_audit")]
pub async fn verify_audit() -> Result<AuditVerification, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "verify the audit log").await?;
    ctl.verify_audit(&op).await
}
