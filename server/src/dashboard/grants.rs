//! The grants page: pending requests, decisions, tokens.

use std::collections::HashMap;

use app::api::auth::Operator;
use app::api::backend::{GrantsBackend, UiResult};
use app::api::grants::{GrantRequestView, GrantTokenView, GrantsView};
use app::error::UiError;

use super::{actor, internal, json_list};
use crate::domain::{GrantRequestId, GrantTokenId};
use crate::grants::{self, GrantError};
use crate::state::AppState;
use crate::store::grants::{GrantRequestRow, GrantTokenRow, RequestsWhich};
use crate::time::now_ms;

fn ui(e: GrantError) -> UiError {
    match e {
        GrantError::NotFound => UiError::not_found("grant request"),
        GrantError::TokenNotFound => UiError::not_found("active grant token"),
        GrantError::NotPending(state) => {
            UiError::conflict(format!("this request was {state} already"))
        }
        GrantError::Invalid(m) => UiError::invalid("grant", m),
        other => internal("the grant change", anyhow::anyhow!("{other}")),
    }
}

fn request_view(r: GrantRequestRow, labels: &HashMap<String, String>) -> GrantRequestView {
    let requested_by = match &r.api_key_id {
        Some(k) => labels
            .get(k)
            .filter(|l| !l.is_empty())
            .cloned()
            .unwrap_or_else(|| k.clone()),
        None => "cli".into(),
    };
    GrantRequestView {
        id: r.id,
        tenant: r.tenant_id,
        requested_by,
        domains: json_list(&r.domains),
        reason: r.reason,
        state: r.state.as_str().to_owned(),
        created_at: r.created_at,
        decided_by: r.decided_by,
        cdp: r.cdp,
        totp: r.totp,
    }
}

fn token_view(t: GrantTokenRow, now: i64) -> GrantTokenView {
    let status = if t.revoked_at.is_some() {
        "revoked"
    } else if t.expires_at <= now {
        "expired"
    } else if t.consumed_at.is_some() {
        // Its session may still run: revoking it ends that session.
        "in use"
    } else if t.delivered_at.is_none() {
        "awaiting pickup"
    } else {
        "active"
    };
    GrantTokenView {
        jti: t.jti,
        tenant: t.tenant_id,
        request_id: t.request_id,
        domains: json_list(&t.allowed_domains),
        status: status.to_owned(),
        single_use: t.single_use,
        issued_at: t.issued_at,
        expires_at: t.expires_at,
    }
}

#[async_trait::async_trait]
impl GrantsBackend for AppState {
    async fn grants(&self, op: &Operator) -> UiResult<GrantsView> {
        let now = now_ms();
        let labels: HashMap<String, String> = self
            .store
            .api_key_list(None)
            .await
            .map_err(|e| internal("listing API keys", e))?
            .into_iter()
            .map(|k| (k.id, k.label))
            .collect();
        let list = |which| {
            self.store
                .grant_request_list(op.tenants.as_deref(), which, 500)
        };
        let mut pending = list(RequestsWhich::Pending)
            .await
            .map_err(|e| internal("listing grant requests", e))?;
        let decided = list(RequestsWhich::Decided)
            .await
            .map_err(|e| internal("listing grant requests", e))?;
        pending.reverse();
        let tokens = self
            .store
            .grant_token_list(op.tenants.as_deref(), 200)
            .await
            .map_err(|e| internal("listing grant tokens", e))?;
        Ok(GrantsView {
            pending: pending
                .into_iter()
                .map(|r| request_view(r, &labels))
                .collect(),
            decided: decided
                .into_iter()
                .take(50)
                .map(|r| request_view(r, &labels))
                .collect(),
            tokens: tokens.into_iter().map(|t| token_view(t, now)).collect(),
            now,
        })
    }

    async fn approve_grant(
        &self,
        op: &Operator,
        id: String,
        expires_min: u32,
        multi_use: bool,
    ) -> UiResult<String> {
        let parsed = id.parse::<GrantRequestId>();
        if let Ok(rid) = &parsed {
            self.request_in_scope(op, rid, "approve a grant").await?;
        }
        let result = async {
            let id = parsed.map_err(|_| UiError::not_found(format!("grant request {id:?}")))?;
            let token = grants::approve(
                &self.store,
                &actor(op),
                &id,
                u64::from(expires_min),
                !multi_use,
            )
            .await
            .map_err(ui)?;
            Ok(token.jti)
        }
        .await;
        super::audited(self, op, "grant.approve", result).await
    }

    async fn deny_grant(&self, op: &Operator, id: String) -> UiResult<()> {
        let parsed = id.parse::<GrantRequestId>();
        if let Ok(rid) = &parsed {
            self.request_in_scope(op, rid, "deny a grant").await?;
        }
        let result = async {
            let id = parsed.map_err(|_| UiError::not_found(format!("grant request {id:?}")))?;
            grants::deny(&self.store, &actor(op), &id).await.map_err(ui)
        }
        .await;
        super::audited(self, op, "grant.deny", result).await
    }

    async fn revoke_grant(&self, op: &Operator, jti: String) -> UiResult<()> {
        let parsed = jti.parse::<GrantTokenId>();
        if let Ok(id) = &parsed
            && let Some(t) = self
                .store
                .grant_token_get(id)
                .await
                .map_err(|e| internal("reading the grant token", e))?
        {
            super::in_scope(self, op, "revoke a grant token", &t.tenant_id, || {
                UiError::not_found("active grant token")
            })
            .await?;
        }
        let result = async {
            let jti = parsed.map_err(|_| UiError::not_found(format!("grant token {jti:?}")))?;
            grants::revoke(&self.store, &actor(op), &jti)
                .await
                .map_err(ui)
        }
        .await;
        super::audited(self, op, "grant.revoke", result).await
    }
}

impl AppState {
    /// `NotFound` (audited) when grant request `id` is of a tenant outside
    /// `op`'s scope; an unknown one is left to the caller.
    async fn request_in_scope(
        &self,
        op: &Operator,
        id: &GrantRequestId,
        what: &str,
    ) -> UiResult<()> {
        let Some(r) = self
            .store
            .grant_request_get(id)
            .await
            .map_err(|e| internal("reading the grant request", e))?
        else {
            return Ok(());
        };
        super::in_scope(self, op, what, &r.tenant_id, || {
            UiError::not_found("grant request")
        })
        .await
    }
}
