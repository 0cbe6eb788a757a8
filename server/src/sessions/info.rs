//! `SessionInfo`, the public face of a session, from its stored row.

use std::collections::BTreeMap;

use super::{DownloadPolicy, Viewport};
use crate::domain::{CloseReason, SessionState};
use crate::store::sessions::SessionRow;

/// The public face of a session.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct SessionInfo {
    /// Id.
    pub session_id: String,
    /// State.
    pub state: SessionState,
    /// `clean` or `operator`.
    pub credential_mode: String,
    /// Domains asked for.
    pub domains: Vec<String>,
    /// Recording mode.
    pub record: String,
    /// Viewport.
    pub viewport: Viewport,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub deadline_at: String,
    /// RFC 3339, once ended.
    pub closed_at: Option<String>,
    /// Why it ended.
    pub close_reason: Option<CloseReason>,
    /// A failure's message.
    pub error: Option<String>,
    /// Whether it came from the warm pool (only on open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_pool: Option<bool>,
    /// Whether its browser may download files (on open, and while it runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downloads: Option<DownloadPolicy>,
    /// Operator mode, on open only: cookies injected per domain (counts,
    /// never values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected: Option<BTreeMap<String, usize>>,
    /// Operator mode, on open only: localStorage items installed per
    /// domain (counts, never keys or values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected_storage: Option<BTreeMap<String, usize>>,
    /// Operator mode, on open only: each configured smoke probe's result
    /// (`ok`, or what failed) for the injected domains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smoke: Option<BTreeMap<String, String>>,
    /// Operator mode, on open only: domains asked for that the tenant has
    /// no stored credential for, so nothing was injected for them (present
    /// only when there are some).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_credentials: Vec<String>,
    /// The session's CDP WebSocket URL (`ws(s)://…/cdp/{id}`; send the
    /// API key as `Authorization: Bearer`, or get a single-use URL from
    /// `POST /api/sessions/{id}/cdp_token`), while it is open. Set by the
    /// web layer, which knows the address clients reach Cordon at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdp_url: Option<String>,
}

impl SessionInfo {
    /// From a stored row.
    pub fn from_row(r: &SessionRow) -> Self {
        use crate::time::rfc3339_ms;
        Self {
            session_id: r.id.clone(),
            state: r.state,
            credential_mode: r.credential_mode.clone(),
            domains: serde_json::from_str(&r.domains).unwrap_or_default(),
            record: r.record.clone(),
            viewport: Viewport {
                width: u32::try_from(r.viewport_w).unwrap_or_default(),
                height: u32::try_from(r.viewport_h).unwrap_or_default(),
            },
            created_at: rfc3339_ms(r.created_at),
            deadline_at: rfc3339_ms(r.deadline_at),
            closed_at: r.closed_at.map(rfc3339_ms),
            close_reason: r.close_reason,
            error: r.error.clone(),
            from_pool: None,
            downloads: None,
            injected: None,
            injected_storage: None,
            smoke: None,
            missing_credentials: Vec::new(),
            cdp_url: None,
        }
    }
}
