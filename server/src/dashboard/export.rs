//! `GET /ui/credentials/export?tenant=…&domain=…`: one credential as a
//! Playwright storageState file, for an operator whose dashboard session
//! proved presence with a passkey in the last five minutes (the proof is
//! used up). Audited (`vault.export`) before anything is decrypted.

use app::api::auth::{Operator, Role};
use app::error::UiError;
use axum::Extension;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use tower_sessions::Session;

use super::{actor, internal};
use crate::domain::TenantId;
use crate::state::AppState;
use crate::vault::{Domain, VaultError};

/// The query.
#[derive(Deserialize)]
pub struct Which {
    tenant: String,
    domain: String,
}

/// The handler.
pub async fn export(
    State(state): State<AppState>,
    Extension(op): Extension<Operator>,
    session: Session,
    Query(which): Query<Which>,
) -> Response {
    match run(&state, &op, &session, which).await {
        Ok(r) => r,
        Err(e) => crate::auth::middleware::ui_error(&e),
    }
}

async fn run(
    state: &AppState,
    op: &Operator,
    session: &Session,
    which: Which,
) -> Result<Response, UiError> {
    if !op.role.allows(Role::Operator) {
        state
            .auth
            .refused(
                &op.id.parse().map_err(|_| UiError::Unauthorized)?,
                "export credentials",
            )
            .await;
        return Err(UiError::forbidden(format!(
            "{} may not export credentials (needs the operator role)",
            op.role
        )));
    }
    let tenant: TenantId = which
        .tenant
        .parse()
        .map_err(|e: crate::domain::TenantIdError| UiError::invalid("tenant", e.to_string()))?;
    let domain: Domain = which
        .domain
        .parse()
        .map_err(|e: crate::vault::DomainError| UiError::invalid("domain", e.to_string()))?;
    super::in_scope(state, op, "export a credential", tenant.as_str(), || {
        UiError::not_found(format!("credential of {tenant} for {domain}"))
    })
    .await?;
    // After the scope: another tenant's credential does not use up the
    // operator's passkey check.
    super::fresh_for_export(session).await?;
    let doc = match state.vault.export(&actor(op), &tenant, &domain).await {
        Ok(doc) => doc,
        Err(VaultError::NotFound { .. } | VaultError::UnknownTenant(_)) => {
            return Err(UiError::not_found(format!(
                "credential of {tenant} for {domain}"
            )));
        }
        Err(e) => return Err(internal("exporting the credential", e)),
    };
    let body =
        serde_json::to_vec_pretty(&doc).map_err(|e| internal("exporting the credential", e))?;
    let filename = format!("{tenant}-{domain}.storage-state.json");
    Ok(super::attachment("application/json", &filename, body))
}
