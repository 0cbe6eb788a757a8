//! `GET /ui/audit/export?since=…&until=…&tenant=…`: the audit log as JSON
//! Lines (`audit::export`'s format, so `cordon audit verify --file` checks
//! it offline), streamed page by page for an admin. An admin scoped to
//! some tenants exports one of theirs and must name it. Audited
//! (`audit.export`) before the first row is read.

use app::api::auth::{Operator, Role};
use app::error::UiError;
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::{actor, internal};
use crate::audit::{self, Bound, ExportFilter};
use crate::state::AppState;

/// The query.
#[derive(Deserialize)]
pub struct Range {
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    tenant: Option<String>,
}

/// The handler.
pub async fn export(
    State(state): State<AppState>,
    Extension(op): Extension<Operator>,
    Query(range): Query<Range>,
) -> Response {
    match run(&state, &op, range).await {
        Ok(r) => r,
        Err(e) => crate::auth::middleware::ui_error(&e),
    }
}

fn bound(name: &str, v: Option<String>) -> Result<Option<Bound>, UiError> {
    v.filter(|v| !v.trim().is_empty())
        .map(|v| Bound::parse(&v).map_err(|e| UiError::invalid(name, e)))
        .transpose()
}

async fn run(state: &AppState, op: &Operator, range: Range) -> Result<Response, UiError> {
    if !op.role.allows(Role::Admin) {
        state
            .auth
            .refused(
                &op.id.parse().map_err(|_| UiError::Unauthorized)?,
                "export the audit log",
            )
            .await;
        return Err(UiError::forbidden(format!(
            "{} may not export the audit log (needs the admin role)",
            op.role
        )));
    }
    let tenant = match range.tenant.filter(|t| !t.trim().is_empty()) {
        Some(t) => Some(
            t.parse::<crate::domain::TenantId>()
                .map_err(|e| UiError::invalid("tenant", e.to_string()))?
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    match (&tenant, &op.tenants) {
        (Some(t), _) => {
            super::in_scope(state, op, "export the audit log", t, || {
                UiError::not_found(format!("tenant {t:?}"))
            })
            .await?;
        }
        (None, Some(_)) => {
            return Err(UiError::invalid(
                "tenant",
                "your scope is some tenants: name one of them",
            ));
        }
        (None, None) => {}
    }
    let filter = ExportFilter {
        since: bound("since", range.since)?,
        until: bound("until", range.until)?,
        tenant,
    };
    state
        .store
        .audit_append(
            audit::NewEvent::new(actor(op), "audit.export")
                .params(serde_json::json!({ "tenant": filter.tenant, "via": "dashboard" }))
                .outcome("requested"),
        )
        .await
        .map_err(|e| internal("auditing the export", e))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let store = state.store.clone();
    tokio::spawn(async move {
        let mut pages = audit::Pages::new(&store, filter);
        loop {
            let chunk = match pages.next().await {
                Ok(Some((chunk, _))) => Ok(Bytes::from(chunk)),
                Ok(None) => return,
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "audit export: reading failed");
                    Err(std::io::Error::other("reading failed"))
                }
            };
            let failed = chunk.is_err();
            if tx.send(chunk).await.is_err() || failed {
                return;
            }
        }
    });
    let name = format!(
        "cordon-audit-{}.jsonl",
        crate::time::rfc3339_ms(crate::time::now_ms()).replace(':', "-")
    );
    Ok(super::attachment(
        "application/x-ndjson",
        &name,
        Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        })),
    ))
}
