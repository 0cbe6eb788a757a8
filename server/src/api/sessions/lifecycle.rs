//! Open, show, list and close.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;

use crate::api::auth::Agent;
use crate::api::cdp::cdp_url;
use crate::api::json::ApiJson;
use crate::error::ApiError;
use crate::sessions::{OpenRequest, SessionInfo};
use crate::state::AppState;

/// `POST /api/sessions`
pub async fn open(
    agent: Agent,
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(req): ApiJson<OpenRequest>,
) -> Result<(StatusCode, Json<SessionInfo>), ApiError> {
    let mut info = state.sessions.open(&agent.0, req).await?;
    info.cdp_url = Some(cdp_url(&state, &headers, &info.session_id));
    Ok((StatusCode::CREATED, Json(info)))
}

/// `GET /api/sessions/{id}`
pub async fn show(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Json<SessionInfo>, ApiError> {
    let id = crate::sessions::session_id(&id)?;
    let mut info = state.sessions.info(&agent.0.tenant, &id).await?;
    if !info.state.is_ended() {
        info.cdp_url = Some(cdp_url(&state, &headers, &info.session_id));
    }
    Ok(Json(info))
}

/// A single-use CDP URL, for clients that cannot send a header.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub struct CdpToken {
    /// `ws(s)://…/cdp/{id}?token=cdpt_…`: connect within 30 s; it works
    /// once, for this session and the key that asked.
    pub cdp_url: String,
    /// RFC 3339.
    pub expires_at: String,
}

/// `POST /api/sessions/{id}/cdp_token`
pub async fn cdp_token(
    State(state): State<AppState>,
    r: super::session_ref::SessionRef,
    headers: HeaderMap,
) -> Result<(StatusCode, Json<CdpToken>), ApiError> {
    let id = r.session.id.as_str();
    let (token, expires_at) = state
        .live
        .tickets
        .issue_cdp(&state.store, &r.owner, &r.session.id)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CdpToken {
            cdp_url: format!("{}?token={token}", cdp_url(&state, &headers, id)),
            expires_at: crate::time::rfc3339_ms(expires_at),
        }),
    ))
}

/// The most rows one list answers.
pub const MAX_LIST: i64 = 500;

/// Query of `GET /api/sessions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// At most this many (1–500, default 50).
    #[schemars(range(min = 1, max = MAX_LIST))]
    pub limit: Option<i64>,
}

/// `GET /api/sessions`: the tenant's sessions, newest first.
pub async fn list(
    agent: Agent,
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<SessionInfo>>, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=MAX_LIST).contains(&limit) {
        return Err(ApiError::BadRequest(
            "limit must be between 1 and 500".into(),
        ));
    }
    let rows = state
        .store
        .session_list(agent.0.tenant.as_str(), limit)
        .await?;
    Ok(Json(rows.iter().map(SessionInfo::from_row).collect()))
}

/// `DELETE /api/sessions/{id}`
pub async fn close(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    let id = crate::sessions::session_id(&id)?;
    Ok(Json(state.sessions.close(&agent.0, &id).await?))
}
