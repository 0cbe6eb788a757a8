//! `/api/sessions`: open, inspect and close sessions, and drive them with tools.

mod lifecycle;
mod tabs;
mod target;
mod tools;

use axum::Router;
use axum::routing::{delete, get, post};

use crate::state::AppState;

/// The session routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/sessions", post(lifecycle::open).get(lifecycle::list))
        .route(
            "/api/sessions/{id}",
            get(lifecycle::show).delete(lifecycle::close),
        )
        .route("/api/sessions/{id}/navigate", post(tools::navigate))
        .route("/api/sessions/{id}/screenshot", post(tools::screenshot))
        .route("/api/sessions/{id}/click", post(tools::click))
        .route("/api/sessions/{id}/type", post(tools::type_text))
        .route("/api/sessions/{id}/press", post(tools::press))
        .route("/api/sessions/{id}/scroll", post(tools::scroll))
        .route("/api/sessions/{id}/hover", post(tools::hover))
        .route("/api/sessions/{id}/select", post(tools::select))
        .route("/api/sessions/{id}/wait_for", post(tools::wait_for))
        .route("/api/sessions/{id}/read_dom", post(tools::read_dom))
        .route("/api/sessions/{id}/snapshot", post(tools::snapshot))
        .route("/api/sessions/{id}/back", post(tools::back))
        .route("/api/sessions/{id}/forward", post(tools::forward))
        .route("/api/sessions/{id}/reload", post(tools::reload))
        .route("/api/sessions/{id}/pdf", post(tools::pdf))
        .route("/api/sessions/{id}/tabs", get(tabs::list).post(tabs::open))
        .route("/api/sessions/{id}/tabs/{tab}/focus", post(tabs::focus))
        .route("/api/sessions/{id}/tabs/{tab}", delete(tabs::close))
}
