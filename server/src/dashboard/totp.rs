//! TOTP seeds on the dashboard: listed without secrets, added from an
//! `otpauth://` URI, a base32 secret or a QR code image
//! (`POST /ui/credentials/totp`, JSON, the image base64; decoded here and
//! dropped), deleted, exported as their URI after a fresh passkey check
//! (`GET /ui/credentials/totp/export`), and typed into a refresh session's
//! page from the live view.

use app::api::auth::{Operator, Role};
use app::api::credentials::TotpView;
use app::error::UiError;
use axum::Extension;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Json, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::json;
use tower_sessions::Session;
use zeroize::Zeroizing;

use super::{actor, internal};
use crate::domain::TenantId;
use crate::state::AppState;
use crate::store::totp::TotpInfo;
use crate::vault::totp::{Params, SeedSource, qr};
use crate::vault::{Domain, VaultError};

/// The add route.
pub const ADD_PATH: &str = "/ui/credentials/totp";

/// Largest body of an add: a 5 MiB image in base64 and the fields.
pub const ADD_BODY_LIMIT: usize = qr::MAX_IMAGE_BYTES * 4 / 3 + 64 * 1024;

/// The answer to an add whose body is over [`ADD_BODY_LIMIT`], read or
/// declared: 413, naming the field at fault (only an image makes a body
/// that large), so the form marks it.
pub fn image_too_large() -> Response {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        Json(json!({ "error": {
            "code": "payload_too_large",
            "field": "image",
            "message": format!(
                "image: is too large; at most {} MiB",
                qr::MAX_IMAGE_BYTES / (1024 * 1024)
            ),
        } })),
    )
        .into_response()
}

/// A seed as the pages show it.
pub(super) fn view(t: TotpInfo) -> TotpView {
    TotpView {
        id: t.id,
        tenant: t.tenant_id,
        domain: t.domain,
        label: t.label,
        algorithm: t.algorithm,
        digits: t.digits,
        period: t.period,
        created_at: t.created_at,
        last_used_at: t.last_used_at,
    }
}

/// The body of `POST /ui/credentials/totp`: one of `uri`, `secret` (with
/// its parameters) or `image_base64`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddSeed {
    tenant: String,
    domain: String,
    label: String,
    #[serde(default)]
    uri: Option<Zeroizing<String>>,
    #[serde(default)]
    secret: Option<Zeroizing<String>>,
    #[serde(default)]
    algorithm: Option<String>,
    #[serde(default)]
    digits: Option<String>,
    #[serde(default)]
    period: Option<String>,
    #[serde(default)]
    image_base64: Option<String>,
}

fn answer(e: &UiError) -> Response {
    let status = match e {
        UiError::Unauthorized => StatusCode::UNAUTHORIZED,
        UiError::Forbidden { .. } => StatusCode::FORBIDDEN,
        UiError::NotFound { .. } => StatusCode::NOT_FOUND,
        UiError::Conflict { .. } => StatusCode::CONFLICT,
        UiError::Invalid { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let field = match e {
        UiError::Invalid { field, .. } => Some(field.clone()),
        _ => None,
    };
    (
        status,
        Json(json!({ "error": { "code": e.code(), "field": field, "message": e.to_string() } })),
    )
        .into_response()
}

/// `POST /ui/credentials/totp`: stores a seed; 201 with its metadata, or
/// a field error. Operators and admins only.
pub async fn add(
    State(state): State<AppState>,
    Extension(op): Extension<Operator>,
    body: Result<Json<AddSeed>, JsonRejection>,
) -> Response {
    // A body longer than it declared (or with no length) fails when read.
    if let Err(e) = &body
        && e.status() == StatusCode::PAYLOAD_TOO_LARGE
    {
        return image_too_large();
    }
    let result = async {
        if !op.role.allows(Role::Operator) {
            return Err(UiError::forbidden(format!(
                "{} may not add second-factor seeds (needs the operator role)",
                op.role
            )));
        }
        let Json(body) = body.map_err(|e| UiError::invalid("body", e.body_text()))?;
        super::in_scope(&state, &op, "add a TOTP seed", &body.tenant, || {
            UiError::not_found(format!("tenant {}", body.tenant))
        })
        .await?;
        let tenant: TenantId = body
            .tenant
            .parse()
            .map_err(|e: crate::domain::TenantIdError| UiError::invalid("tenant", e.to_string()))?;
        let domain: Domain = body
            .domain
            .trim()
            .parse()
            .map_err(|e: crate::vault::DomainError| UiError::invalid("domain", e.to_string()))?;
        let image;
        let given =
            |o: &Option<Zeroizing<String>>| o.as_deref().is_some_and(|s| !s.trim().is_empty());
        let has_image = body.image_base64.as_deref().is_some_and(|s| !s.is_empty());
        let source = match (given(&body.uri), given(&body.secret), has_image) {
            (true, false, false) => {
                SeedSource::Uri(body.uri.as_deref().map(String::as_str).unwrap_or_default())
            }
            (false, true, false) => {
                let num = |field: &'static str,
                           v: &Option<String>,
                           default: u32|
                 -> Result<u32, UiError> {
                    match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                        None => Ok(default),
                        Some(s) => s
                            .parse()
                            .map_err(|_| UiError::invalid(field, "must be a whole number")),
                    }
                };
                let params = Params {
                    algorithm: match body
                        .algorithm
                        .as_deref()
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                    {
                        None => crate::vault::totp::Algorithm::Sha1,
                        Some(a) => a.parse().map_err(|e: crate::vault::totp::FieldError| {
                            UiError::invalid(e.field, e.message)
                        })?,
                    },
                    digits: u8::try_from(num("digits", &body.digits, 6)?)
                        .map_err(|_| UiError::invalid("digits", "must be 6, 7 or 8"))?,
                    period: num("period", &body.period, 30)?,
                };
                SeedSource::Base32(
                    body.secret
                        .as_deref()
                        .map(String::as_str)
                        .unwrap_or_default(),
                    params,
                )
            }
            (false, false, true) => {
                let b64 = body.image_base64.as_deref().unwrap_or_default();
                // A data: URL's header is allowed.
                let b64 = b64.split_once(',').map_or(b64, |(_, rest)| rest);
                image = base64::engine::general_purpose::STANDARD
                    .decode(b64.trim())
                    .map_err(|_| UiError::invalid("image", "is not base64"))?;
                SeedSource::QrImage(&image)
            }
            (false, false, false) => {
                return Err(UiError::invalid(
                    "uri",
                    "give the otpauth:// link, the secret, or a QR code image",
                ));
            }
            _ => {
                return Err(UiError::invalid(
                    "uri",
                    "give only one of the otpauth:// link, the secret and a QR code image",
                ));
            }
        };
        match state
            .vault
            .totp_add(&actor(&op), &tenant, &domain, &body.label, source)
            .await
        {
            Ok(info) => Ok(info),
            Err(VaultError::Totp(e)) => Err(UiError::invalid(e.field, e.message)),
            Err(e @ VaultError::TotpLabelTaken { .. }) => Err(UiError::conflict(e.to_string())),
            Err(VaultError::UnknownTenant(t)) => Err(UiError::not_found(format!("tenant {t}"))),
            Err(e) => Err(internal("storing the TOTP seed", e)),
        }
    }
    .await;
    match super::audited(&state, &op, "vault.totp.add", result).await {
        Ok(info) => (
            StatusCode::CREATED,
            Json(json!({
                "id": info.id,
                "tenant": info.tenant_id,
                "domain": info.domain,
                "label": info.label,
                "algorithm": info.algorithm,
                "digits": info.digits,
                "period": info.period,
            })),
        )
            .into_response(),
        Err(e) => answer(&e),
    }
}

/// The query of the export.
#[derive(Deserialize)]
pub struct Which {
    tenant: String,
    id: String,
}

/// `GET /ui/credentials/totp/export?tenant=…&id=…`: the seed's
/// `otpauth://` URI as a text file, for an operator whose dashboard
/// session proved presence with a passkey in the last five minutes.
pub async fn export(
    State(state): State<AppState>,
    Extension(op): Extension<Operator>,
    session: Session,
    Query(which): Query<Which>,
) -> Response {
    let result = async {
        if !op.role.allows(Role::Operator) {
            return Err(UiError::forbidden(format!(
                "{} may not export credentials (needs the operator role)",
                op.role
            )));
        }
        super::in_scope(&state, &op, "export a TOTP seed", &which.tenant, || {
            UiError::not_found(format!("TOTP seed {}", which.id))
        })
        .await?;
        let tenant: TenantId = which
            .tenant
            .parse()
            .map_err(|e: crate::domain::TenantIdError| UiError::invalid("tenant", e.to_string()))?;
        super::fresh_for_export(&session).await?;
        let exported = match state.vault.totp_id(&tenant, &which.id).await {
            Ok(id) => state.vault.totp_export(&actor(&op), &tenant, &id).await,
            Err(e) => Err(e),
        };
        match exported {
            Ok(found) => Ok(found),
            Err(VaultError::TotpNotFound(id)) => Err(UiError::not_found(format!("TOTP seed {id}"))),
            Err(VaultError::UnknownTenant(t)) => Err(UiError::not_found(format!("tenant {t}"))),
            Err(e) => Err(internal("exporting the TOTP seed", e)),
        }
    }
    .await;
    match super::audited(&state, &op, "vault.totp.export", result).await {
        Ok((info, uri)) => {
            let name: String = format!("{}-{}-totp.txt", info.domain, info.id)
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .collect();
            super::attachment(
                "text/plain; charset=utf-8",
                &name,
                format!("{}\n", uri.as_str()),
            )
        }
        Err(e) => crate::auth::middleware::ui_error(&e),
    }
}
