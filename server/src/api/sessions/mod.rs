//! `/api/sessions`: open, inspect and close sessions, and drive them with
//! tools. One table (`table.rs`) drives the router (here) and the OpenAPI
//! document; each route declares the errors its handler can answer.

mod files;
mod lifecycle;
mod live_link;
mod session_ref;
mod table;
mod tools;

use axum::Router;

use crate::api::openapi;
use crate::state::AppState;
pub use lifecycle::MAX_LIST;
pub use table::{UPLOAD_PATH, routes};

/// The session routes and `/api/openapi.json`.
pub fn router(state: &AppState) -> Router<AppState> {
    let routes = routes();
    let mut doc = openapi::document(&routes);
    let s = &state.settings;
    openapi::set_limits(
        &mut doc,
        &[
            (
                "OpenRequest",
                "deadline_s",
                "maximum",
                s.sessions.session_deadline_max_s,
            ),
            (
                "TaskRequest",
                "deadline_s",
                "maximum",
                s.sessions.session_deadline_max_s,
            ),
            (
                "TaskRequest",
                "max_steps",
                "maximum",
                u64::from(s.tasks.task_max_steps),
            ),
            (
                "TaskRequest",
                "instruction",
                "maxLength",
                u64::from(s.tasks.task_instruction_max_bytes),
            ),
        ],
    );
    let router = Router::new().route("/api/openapi.json", openapi::serve(doc));
    // A session's routes may belong to another replica: a hop arriving is
    // checked first, then a call for another replica's session goes there.
    let mut one = Router::new();
    let mut rest = Router::new();
    for r in routes {
        if r.path.contains("{id}") {
            one = one.route(r.path, r.handler);
        } else {
            rest = rest.route(r.path, r.handler);
        }
    }
    let one = one
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::forward::forward,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::forward::accept_hop,
        ));
    router.merge(one).merge(rest)
}
