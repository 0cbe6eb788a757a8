//! `/healthz` (alive), `/readyz` (database and Chromium), `/metrics`.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::json;

use crate::sandbox::{chromium_runnable, inotify};
use crate::state::AppState;
use crate::store::DatabaseKind;

/// The operability routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// Alive: the process answers HTTP.
async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// Ready: the database answers and Chromium can be started.
#[tracing::instrument(skip_all)]
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let db = state.store.ping().await;
    if let Err(e) = &db {
        tracing::warn!(error = %format!("{e:#}"), "readiness: database check failed");
    }
    let chromium_ok = chromium_runnable(&state.settings.sandbox.chromium_path);
    let ready = db.is_ok() && chromium_ok;
    let backend = match state.store.kind() {
        DatabaseKind::Sqlite => "sqlite",
        DatabaseKind::Postgres => "postgres",
    };
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {
            "database": { "ok": db.is_ok(), "backend": backend },
            "chromium": { "ok": chromium_ok, "path": state.settings.sandbox.chromium_path },
            "limits": state.sessions.limits_status(),
            "sandbox": {
                "driver": state.sessions.driver_kind().as_str(),
                // The process driver's DevTools ports take any local client.
                "devtools_open_to_local_processes": state.sessions.driver_caps().devtools_open_locally,
                "pool_ready": state.sessions.pool_ready(),
                "pool_size": state.settings.sessions.pool_size,
                "open_sessions": state.sessions.open_count(),
                // Room for the browsers' inotify instances (one each),
                // on hosts that run them (not `exec`, `kube`).
                "inotify": (!state.sessions.driver_caps().remote).then(|| inotify_room(&state)),
            },
            // Several replicas on one database: this one's name and
            // whether it holds the housekeeping lock.
            "replica": {
                "name": state.cluster.name(),
                "leader": state.cluster.is_leader(),
                "advertise_url": state.cluster.advertise_url(),
                // The database server's clock minus this host's (ms).
                "clock_offset_ms": state.cluster.clock_offset_ms(),
            },
        }
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// The inotify instances this user may hold (`limit`, the lower of the
/// host's and a container's own), the browsers `max_sessions` and the pool
/// allow, and whether they fit with `sandbox::inotify::MARGIN` to spare.
fn inotify_room(state: &AppState) -> serde_json::Value {
    let limits = inotify::Limits::read();
    let s = &state.settings.sessions;
    let browsers = s.max_sessions as usize + s.pool_size as usize;
    json!({
        "limit": limits.lowest(),
        "browsers": browsers,
        "enough": inotify::short(browsers, limits).is_none(),
    })
}

/// Prometheus text exposition.
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}
