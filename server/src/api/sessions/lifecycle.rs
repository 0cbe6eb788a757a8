//! Open, show, list and close.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;

use crate::api::auth::Agent;
use crate::api::json::ApiJson;
use crate::error::ApiError;
use crate::sessions::{OpenRequest, SessionInfo};
use crate::state::AppState;

/// `POST /api/sessions`
pub async fn open(
    agent: Agent,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<OpenRequest>,
) -> Result<(StatusCode, Json<SessionInfo>), ApiError> {
    let info = state.sessions.open(&agent.0, req).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// `GET /api/sessions/{id}`
pub async fn show(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    Ok(Json(state.sessions.info(&agent.0.tenant, &id).await?))
}

/// Query of `GET /api/sessions`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// At most this many (1–500, default 50).
    pub limit: Option<i64>,
}

/// `GET /api/sessions`: the tenant's sessions, newest first.
pub async fn list(
    agent: Agent,
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<SessionInfo>>, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
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
    Ok(Json(state.sessions.close(&agent.0, &id).await?))
}
