//! `/api/tasks`: `run_task` over HTTP. One call runs a whole task and
//! answers one compact result; tasks are listed, read with their trace and
//! aborted.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::api::auth::Agent;
use crate::api::json::ApiJson;
use crate::api::openapi::{AUTH, BODY, OPEN_SESSION, Route};
use crate::domain::TaskId;
use crate::error::ApiError;
use crate::state::AppState;
use crate::tasks::{TaskDetail, TaskError, TaskRequest, TaskResult};

/// `POST /api/tasks`
pub async fn run(
    agent: Agent,
    State(state): State<AppState>,
    ApiJson(req): ApiJson<TaskRequest>,
) -> Result<Json<TaskResult>, ApiError> {
    Ok(Json(state.tasks.run(&agent.0, req).await?))
}

/// The list's query.
#[derive(Deserialize, schemars::JsonSchema)]
pub struct ListQuery {
    /// At most this many (1–500, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = crate::api::sessions::MAX_LIST))]
    limit: Option<i64>,
}

/// `GET /api/tasks`
pub async fn list(
    agent: Agent,
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<TaskResult>>, ApiError> {
    let limit = q.limit.unwrap_or(50);
    if !(1..=crate::api::sessions::MAX_LIST).contains(&limit) {
        return Err(ApiError::BadRequest("limit must be 1..500".into()));
    }
    Ok(Json(state.tasks.list(&agent.0.tenant, limit).await?))
}

/// `GET /api/tasks/{id}`
pub async fn show(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskDetail>, ApiError> {
    // A malformed id is no task of this tenant's, as an unknown one.
    let id: TaskId = id.parse().map_err(|_| TaskError::NotFound)?;
    Ok(Json(state.tasks.get(&agent.0.tenant, &id).await?))
}

/// `POST /api/tasks/{id}/abort`
pub async fn abort(
    agent: Agent,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskResult>, ApiError> {
    let id: TaskId = id.parse().map_err(|_| TaskError::NotFound)?;
    Ok(Json(state.tasks.abort(&agent.0.tenant, &id).await?))
}

fn s<T: schemars::JsonSchema>(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    g.subschema_for::<T>()
}

/// (Several replicas: a running task's loop lives on one replica; a call
/// for it elsewhere is forwarded, see `cluster::forward`.)
const TASK: crate::api::openapi::Errors = &[
    (404, "not_found"),
    (503, "replica_unreachable"),
    (401, "hop_refused"),
];

/// The task operations, for the route table.
pub fn routes() -> Vec<Route> {
    vec![
        Route {
            method: "post",
            path: "/api/tasks",
            summary: "Run a whole task (UI-TARS-compatible model loop) and answer one compact result",
            request: Some(s::<TaskRequest>),
            success: 200,
            response: Some(s::<TaskResult>),
            errors: &[AUTH, BODY, OPEN_SESSION],
            handler: post(run),
        },
        Route {
            method: "get",
            path: "/api/tasks",
            summary: "This tenant's tasks, newest first (?limit=1..500)",
            request: Some(s::<ListQuery>),
            success: 200,
            response: Some(s::<Vec<TaskResult>>),
            errors: &[AUTH, &[(400, "bad_request")]],
            handler: get(list),
        },
        Route {
            method: "get",
            path: "/api/tasks/{id}",
            summary: "A task with its trace (thought, action, outcome, screenshot id per step)",
            request: None,
            success: 200,
            response: Some(s::<TaskDetail>),
            errors: &[AUTH, TASK],
            handler: get(show),
        },
        Route {
            method: "post",
            path: "/api/tasks/{id}/abort",
            summary: "Stop a running task (its session is closed; the trace is kept)",
            request: None,
            success: 200,
            response: Some(s::<TaskResult>),
            errors: &[AUTH, TASK, &[(409, "task_ended")]],
            handler: post(abort),
        },
    ]
}
