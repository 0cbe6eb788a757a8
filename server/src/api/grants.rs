//! `/api/grants`: an agent asks for an operator grant and polls it; the
//! token comes once, on the first poll after approval.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};

use crate::api::auth::Agent;
use crate::api::json::ApiJson;
use crate::api::openapi::{AUTH, BODY, Route};
use crate::domain::GrantRequestId;
use crate::error::ApiError;
use crate::grants::{self, GrantStatus, NewGrantRequest};
use crate::state::AppState;

/// `POST /api/grants/requests`
pub async fn create(
    agent: Agent,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<NewGrantRequest>,
) -> Result<(StatusCode, Json<GrantStatus>), ApiError> {
    let status = grants::request(&state.store, &agent.0, &req).await?;
    Ok((StatusCode::CREATED, Json(status)))
}

/// `GET /api/grants/requests/{id}`
pub async fn show(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<GrantStatus>, ApiError> {
    // An id that cannot exist is as unknown as one that does not.
    let id: GrantRequestId = id
        .parse()
        .map_err(|_| ApiError::NotFound("grant request"))?;
    Ok(Json(grants::poll(&state.store, &agent.0, &id).await?))
}

fn new_request_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    g.subschema_for::<NewGrantRequest>()
}

fn status_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    g.subschema_for::<GrantStatus>()
}

/// The grant operations, for the route table.
pub fn routes() -> Vec<Route> {
    vec![
        Route {
            method: "post",
            path: "/api/grants/requests",
            summary: "Ask an operator for the credentials of some domains",
            request: Some(new_request_schema),
            success: 201,
            response: Some(status_schema),
            errors: &[AUTH, BODY, &[(429, "too_many_requests")]],
            handler: post(create),
        },
        Route {
            method: "get",
            path: "/api/grants/requests/{id}",
            summary: "A grant request's state; the token on the first poll after approval only",
            request: None,
            success: 200,
            response: Some(status_schema),
            errors: &[AUTH, &[(404, "not_found")]],
            handler: get(show),
        },
    ]
}
