//! Tool handlers: parse the input into a [`ToolCall`], hand it to the
//! session engine's one pipeline ([`SessionManager::run_tool`]), answer.
//!
//! [`SessionManager::run_tool`]: crate::sessions::SessionManager::run_tool

use axum::Json;
use axum::extract::{Path, State};

use super::session_ref::SessionRef;
use crate::api::json::ApiJson;
use crate::audit::Actor;
use crate::error::ApiError;
use crate::sessions::tool::input::tab_id;
use crate::sessions::{Tool, ToolCall, ToolError, ToolOutput};
use crate::state::AppState;

/// Runs `call` for the agent behind `r`.
pub async fn run(
    state: &AppState,
    r: SessionRef,
    call: Result<ToolCall, ToolError>,
) -> Result<Json<ToolOutput>, ApiError> {
    let call = call?;
    let actor = Actor::Agent(r.owner.key_id.clone());
    Ok(Json(
        state
            .sessions
            .run_tool(&r.session, actor, crate::audit::Surface::Http, call)
            .await?,
    ))
}

/// A tool whose JSON body `T` becomes a call through `parse`.
pub async fn with_body<T>(
    state: AppState,
    r: SessionRef,
    body: ApiJson<T>,
    parse: fn(T) -> Result<ToolCall, ToolError>,
) -> Result<Json<ToolOutput>, ApiError> {
    run(&state, r, parse(body.0)).await
}

/// A tool without a body.
pub async fn plain(
    State(state): State<AppState>,
    r: SessionRef,
    tool: Tool,
) -> Result<Json<ToolOutput>, ApiError> {
    run(&state, r, Ok(ToolCall::new(tool))).await
}

/// A tab tool on the `{tab}` path segment.
pub async fn on_tab(
    State(state): State<AppState>,
    r: SessionRef,
    Path((_, tab)): Path<(String, String)>,
    tool: fn(String) -> Tool,
) -> Result<Json<ToolOutput>, ApiError> {
    let call = tab_id(tab).map(|tab| ToolCall::new(tool(tab)));
    run(&state, r, call).await
}
