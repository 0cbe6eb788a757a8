//! `GET /ui/screenshots/{id}` and `/ui/screenshots/{id}/thumb`: recorded
//! screenshots, and `GET /ui/approvals/{id}/screenshot`: a pending
//! approval's outlined page, for logged-in operators (the auth middleware refuses
//! others), by id only: the path is built from the parsed id, never from
//! the request's text.

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};

use app::error::UiError;

use crate::recording::{OpenError, ScreenshotId, Variant};
use crate::state::AppState;

/// The full image.
pub async fn full(
    State(state): State<AppState>,
    axum::Extension(op): axum::Extension<app::api::auth::Operator>,
    Path(id): Path<String>,
) -> Response {
    serve(&state, &op, &id, Variant::Full).await
}

/// Its thumbnail (made on first request, then kept).
pub async fn thumb(
    State(state): State<AppState>,
    axum::Extension(op): axum::Extension<app::api::auth::Operator>,
    Path(id): Path<String>,
) -> Response {
    serve(&state, &op, &id, Variant::Thumb).await
}

/// A pending approval's screenshot (the target outlined); gone with the
/// approval once it is decided, timed out or withdrawn.
pub async fn approval(
    State(state): State<AppState>,
    axum::Extension(op): axum::Extension<app::api::auth::Operator>,
    Path(id): Path<String>,
) -> Response {
    if !crate::ids::is_random_id(crate::ids::APPROVAL, &id) {
        return crate::auth::middleware::ui_error(&UiError::not_found("approval"));
    }
    if !op.global() {
        let mut pending = state.sessions.approvals().list();
        if !pending.iter().any(|p| p.id == id) {
            pending = state
                .cluster
                .peers(&op.id)
                .get_all("/api/internal/approvals")
                .await;
        }
        if let Some(p) = pending.into_iter().find(|p| p.id == id)
            && let Err(e) = super::in_scope(&state, &op, "see an approval", &p.tenant, || {
                UiError::not_found("approval screenshot")
            })
            .await
        {
            return crate::auth::middleware::ui_error(&e);
        }
    }
    let jpeg = match state.sessions.approvals().screenshot(&id) {
        Some(j) => Some(j.as_ref().clone()),
        // Held by the replica whose session waits.
        None => state
            .cluster
            .peers(&op.id)
            .first_ok(
                axum::http::Method::GET,
                &format!("/api/internal/approvals/{id}/screenshot"),
                Vec::new(),
            )
            .await
            .map(|b| b.to_vec()),
    };
    match jpeg {
        Some(jpeg) => (
            [
                (header::CONTENT_TYPE, "image/jpeg"),
                // It shows a page of a tenant's session: no cache keeps it.
                (header::CACHE_CONTROL, "private, no-store"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            jpeg,
        )
            .into_response(),
        None => crate::auth::middleware::ui_error(&UiError::not_found("approval screenshot")),
    }
}

async fn serve(
    state: &AppState,
    op: &app::api::auth::Operator,
    id: &str,
    variant: Variant,
) -> Response {
    let Ok(id) = id.parse::<ScreenshotId>() else {
        return crate::auth::middleware::ui_error(&UiError::not_found("screenshot"));
    };
    if let Err(e) = super::in_scope(state, op, "see a screenshot", id.tenant().as_str(), || {
        UiError::not_found("screenshot")
    })
    .await
    {
        return crate::auth::middleware::ui_error(&e);
    }
    let here = state.sessions.recorder().open(&id, variant).await;
    if matches!(here, Err(OpenError::NotFound)) {
        // Recorded by another replica: its data dir has the file.
        let thumb = matches!(variant, Variant::Thumb);
        let path = format!("/api/internal/screenshots/{id}?thumb={thumb}");
        if let Some((bytes, Some(kind))) = state
            .cluster
            .peers(&op.id)
            .get_recorded(id.session().as_str(), &path)
            .await
            && matches!(kind.as_str(), "image/png" | "image/jpeg")
        {
            return (
                [
                    (header::CONTENT_TYPE, kind),
                    (header::CACHE_CONTROL, "private, max-age=3600".to_owned()),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
                ],
                bytes,
            )
                .into_response();
        }
    }
    match here {
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
        Err(OpenError::NotFound) => {
            crate::auth::middleware::ui_error(&UiError::not_found("screenshot"))
        }
        Err(OpenError::Io(e)) => {
            crate::auth::middleware::ui_error(&super::internal("reading the screenshot", e))
        }
    }
}
