//! The control plane as the dashboard's server functions see it: one file
//! per area, each implementing that area's trait of `app::api::backend` on
//! [`AppState`]. Every method is told which operator asks; role checks
//! happen in the server functions before these run, and every change is
//! audited with `actor = operator:<id>` by the domain service it calls.

mod approvals;
pub mod assets;
mod audit;
mod audit_export;
mod auth;
mod credentials;
pub mod csp;
mod events;
mod export;
mod grants;
mod health;
mod images;
mod live;
mod sessions;
mod tasks;
mod tenants;
mod totp;

use app::api::auth::Operator;
use app::error::UiError;

use crate::audit::Actor;
use crate::grants::domains_of as json_list;

pub use audit_export::export as audit_export;
pub use events::events;
pub use export::export;
pub use health::LastVerification;
pub use images::{approval as approval_screenshot, full as screenshot, thumb as screenshot_thumb};
pub use totp::{
    ADD_BODY_LIMIT as TOTP_ADD_BODY_LIMIT, ADD_PATH as TOTP_ADD_PATH, add as totp_add,
    export as totp_export, image_too_large as totp_image_too_large,
};

/// Nothing, if `op` sees `tenant`; otherwise `not_found` (an object of a
/// tenant outside the operator's scope does not exist for them), audited as
/// `operator.refused` with what was tried and the tenant.
async fn in_scope(
    state: &crate::state::AppState,
    op: &Operator,
    what: &str,
    tenant: &str,
    not_found: impl FnOnce() -> UiError,
) -> Result<(), UiError> {
    if op.sees(tenant) {
        return Ok(());
    }
    state.auth.out_of_scope(&op.id, what, tenant).await;
    Err(not_found())
}

/// Nothing, if the operator's dashboard session proved presence with a
/// passkey in the last five minutes (the proof is used up); otherwise
/// `forbidden`. Every export of a secret asks it.
async fn fresh_for_export(session: &tower_sessions::Session) -> Result<(), UiError> {
    if crate::auth::routes::take_fresh(session).await? {
        Ok(())
    } else {
        Err(UiError::forbidden(
            "exporting a credential needs a fresh passkey check: use the Export button",
        ))
    }
}

/// A file handed to the operator: an attachment named `filename`, never
/// cached, never sniffed.
fn attachment(
    content_type: &str,
    filename: &str,
    body: impl axum::response::IntoResponse,
) -> axum::response::Response {
    use axum::http::header;
    use axum::response::IntoResponse;
    (
        [
            (header::CONTENT_TYPE, content_type.to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_owned()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        ],
        body,
    )
        .into_response()
}

/// The audit actor of an operator.
fn actor(op: &Operator) -> Actor {
    Actor::Operator(op.id.clone())
}

/// A fault the operator cannot fix: logged here once, shown as a short
/// message.
fn internal(what: &str, err: impl Into<anyhow::Error>) -> UiError {
    let err = err.into();
    tracing::error!(error = %format!("{err:#}"), "dashboard: {what} failed");
    UiError::internal(format!("{what} failed; see the server log"))
}

/// A mutation's outcome, with a refusal (bad id, already decided, invalid
/// field) written to the audit log as `operator.refused` with what was
/// tried and why, so refused attempts of logged-in operators are visible.
/// Faults (internal, unavailable) are logged, not audited.
async fn audited<T>(
    state: &crate::state::AppState,
    op: &Operator,
    what: &str,
    result: Result<T, UiError>,
) -> Result<T, UiError> {
    if let Err(e) = &result
        && !matches!(e, UiError::Internal { .. } | UiError::Unavailable { .. })
    {
        let event = crate::audit::NewEvent::new(actor(op), "operator.refused")
            .params(serde_json::json!({ "what": what, "why": e.code() }))
            .outcome(format!("denied: {}", e.code()));
        if let Err(err) = state.store.audit_append(event).await {
            tracing::error!(error = %format!("{err:#}"), "failed to audit a refused attempt");
        }
    }
    result
}
