//! `POST/GET /api/sessions/{id}/live_link`, `DELETE …/live_link/{link}`:
//! live links, the capability URLs an agent hands its own user to watch
//! (or drive) a session in an `<iframe>` (`live::link`; the page is
//! `api::embed`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};

use super::session_ref::SessionRef;
use crate::api::json::ApiJson;
use crate::audit::Actor;
use crate::domain::LiveLinkId;
use crate::error::ApiError;
use crate::live::link::{self, LinkError, LinkInfo, LinkMode};
use crate::state::AppState;

/// What a link asks for.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveLinkReq {
    /// `view` (watch only) or `control` (watch and drive with the pointer
    /// and keyboard, as this agent; the tenant's settings must allow it).
    pub mode: LinkMode,
    /// Lifetime in seconds: 30 up to the tenant's `max_ttl_s` (default
    /// 600, capped by it).
    pub ttl_s: Option<u64>,
}

/// A live link.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct LiveLink {
    /// `ll_…`: revoke with `DELETE /api/sessions/{id}/live_link/{link}`.
    pub id: String,
    /// Only in the answer that made it: the page to open or put in an
    /// `<iframe src>` (`https://…/embed/{session}?link=llk_…`). Whoever
    /// holds it can watch (and, in control mode, drive) until it expires or
    /// is revoked; treat it as a secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `view` or `control`.
    pub mode: LinkMode,
    /// `active`, `expired` or `revoked`.
    pub state: String,
    /// The key that made it.
    pub key_id: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub expires_at: String,
    /// RFC 3339, once revoked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<String>,
}

impl LiveLink {
    fn of(info: LinkInfo, url: Option<String>) -> Self {
        Self {
            id: info.link.id.into(),
            url,
            mode: info.link.mode,
            state: info.state.to_owned(),
            key_id: info.link.key_id,
            created_at: crate::time::rfc3339_ms(info.link.created_at),
            expires_at: crate::time::rfc3339_ms(info.link.expires_at),
            revoked_at: info.revoked_at.map(crate::time::rfc3339_ms),
        }
    }
}

impl From<LinkError> for ApiError {
    fn from(e: LinkError) -> Self {
        match e {
            LinkError::Disabled | LinkError::ControlDisabled => ApiError::Forbidden {
                code: e.code(),
                message: e.to_string(),
            },
            LinkError::BadTtl(m) => ApiError::BadRequest(m),
            LinkError::TooMany => ApiError::TooManyRequests {
                message: e.to_string(),
                retry_after_s: 60,
            },
            LinkError::Unknown => ApiError::NotFound("live link"),
            LinkError::Expired | LinkError::Revoked => ApiError::Gone(e.to_string()),
            LinkError::Internal(e) => ApiError::Internal(e),
        }
    }
}

/// `POST /api/sessions/{id}/live_link`
pub async fn create(
    State(state): State<AppState>,
    r: SessionRef,
    headers: HeaderMap,
    ApiJson(req): ApiJson<LiveLinkReq>,
) -> Result<(StatusCode, Json<LiveLink>), ApiError> {
    let id = r.session.id.as_str();
    let policy = state
        .settings
        .live
        .tenant_live_links
        .get(r.owner.tenant.as_str());
    let (made, token) = link::issue(
        &state.store,
        &r.owner,
        &r.session.id,
        req.mode,
        req.ttl_s,
        policy,
    )
    .await?;
    let url = format!(
        "{}/embed/{id}?link={token}",
        crate::api::cdp::http_base(&state, &headers)
    );
    let info = LinkInfo {
        link: made,
        revoked_at: None,
        state: "active",
    };
    Ok((StatusCode::CREATED, Json(LiveLink::of(info, Some(url)))))
}

/// `GET /api/sessions/{id}/live_link`: the session's links, newest first.
pub async fn list(
    State(state): State<AppState>,
    r: SessionRef,
) -> Result<Json<Vec<LiveLink>>, ApiError> {
    let links = link::list(&state.store, &r.owner.tenant, &r.session.id).await?;
    Ok(Json(
        links.into_iter().map(|l| LiveLink::of(l, None)).collect(),
    ))
}

/// `DELETE /api/sessions/{id}/live_link/{link}`: open views of it end
/// within a second.
pub async fn revoke(
    State(state): State<AppState>,
    r: SessionRef,
    Path((_, link_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    // A malformed id is no link of this session's, as an unknown one.
    let link_id: LiveLinkId = link_id.parse().map_err(|_| LinkError::Unknown)?;
    link::revoke(
        &state.store,
        &Actor::Agent(r.owner.key_id.clone()),
        &r.owner.tenant,
        &r.session.id,
        &link_id,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
