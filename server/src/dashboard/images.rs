//! `GET /ui/screenshots/{id}` and `/ui/screenshots/{id}/thumb`: recorded
//! screenshots for logged-in operators (the auth middleware refuses
//! others), by id only: the path is built from the parsed id, never from
//! the request's text.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use app::error::UiError;

use crate::recording::{OpenError, ScreenshotId, Variant};
use crate::state::AppState;

/// The full image.
pub async fn full(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    serve(&state, &id, Variant::Full).await
}

/// Its thumbnail (made on first request, then kept).
pub async fn thumb(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    serve(&state, &id, Variant::Thumb).await
}

async fn serve(state: &AppState, id: &str, variant: Variant) -> Response {
    let Ok(id) = id.parse::<ScreenshotId>() else {
        return crate::auth::ui_error(&UiError::not_found("screenshot"));
    };
    match state.sessions.recorder().open(&id, variant).await {
        Ok(img) => (
            [
                (header::CONTENT_TYPE, img.content_type),
                // Operators' browsers may keep them; nothing in between may.
                (header::CACHE_CONTROL, "private, max-age=3600"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            img.bytes,
        )
            .into_response(),
        Err(OpenError::NotFound) => crate::auth::ui_error(&UiError::not_found("screenshot")),
        Err(OpenError::Io(e)) => {
            crate::auth::ui_error(&super::internal("reading the screenshot", e))
        }
    }
}
