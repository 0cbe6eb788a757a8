//! The operator's own passkeys and the admin's operator list.

use std::collections::HashMap;

use app::api::auth::{Invite, Operator, OperatorInfo, PasskeyInfo, Role};
use app::api::backend::{AuthBackend, UiResult};
use app::error::UiError;

use super::actor;
use crate::domain::{OperatorId, TenantId};
use crate::state::AppState;
use crate::store::operators::OperatorRow;

fn info(o: OperatorRow, scopes: &HashMap<String, Vec<String>>) -> OperatorInfo {
    OperatorInfo {
        tenants: if o.role == Role::Admin {
            None
        } else {
            scopes.get(o.id.as_str()).cloned()
        },
        id: o.id.to_string(),
        name: o.name,
        role: o.role,
        created_at: o.created_at,
        disabled: o.disabled_at.is_some(),
        last_login_at: o.last_login_at,
        passkeys: o.passkeys,
    }
}

fn operator_id(id: &str) -> UiResult<OperatorId> {
    id.parse()
        .map_err(|_| UiError::not_found(format!("operator {id:?}")))
}

#[async_trait::async_trait]
impl AuthBackend for AppState {
    async fn refused(&self, op: &Operator, what: &str) {
        if let Ok(id) = op.id.parse::<OperatorId>() {
            self.auth.refused(&id, what).await;
        }
    }

    async fn my_passkeys(&self, op: &Operator) -> UiResult<Vec<PasskeyInfo>> {
        Ok(self
            .auth
            .passkeys(&operator_id(&op.id)?)
            .await?
            .into_iter()
            .map(|p| PasskeyInfo {
                id: p.id.to_string(),
                name: p.name,
                created_at: p.created_at,
                last_used_at: p.last_used_at,
            })
            .collect())
    }

    async fn remove_passkey(
        &self,
        op: &Operator,
        id: String,
        request: &axum::http::request::Parts,
    ) -> UiResult<()> {
        let result = async {
            // A stolen dashboard session must not swap the operator's
            // passkeys: one passkey check allows one change.
            let session = request
                .extensions
                .get::<tower_sessions::Session>()
                .ok_or_else(|| UiError::internal("no dashboard session"))?;
            if !crate::auth::routes::take_fresh(session).await? {
                return Err(UiError::forbidden(
                    "removing a passkey needs a fresh passkey check: use the Remove button, which asks for one",
                ));
            }
            Ok(self.auth.remove_passkey(&operator_id(&op.id)?, &id).await?)
        }
        .await;
        super::audited(self, op, "operator.passkey_remove", result).await
    }

    async fn operators(&self, _op: &Operator) -> UiResult<Vec<OperatorInfo>> {
        let scopes = self.auth.scopes().await?;
        Ok(self
            .auth
            .list()
            .await?
            .into_iter()
            .map(|o| info(o, &scopes))
            .collect())
    }

    async fn invite(&self, op: &Operator, name: String, role: Role) -> UiResult<Invite> {
        let result = async {
            let inv = self.auth.invite(&actor(op), &name, role).await?;
            Ok(Invite {
                operator: info(inv.operator, &HashMap::new()),
                link: inv.link,
                expires_at: inv.expires_at,
            })
        }
        .await;
        super::audited(self, op, "operator.invite", result).await
    }

    async fn set_operator_enabled(&self, op: &Operator, id: String, enabled: bool) -> UiResult<()> {
        let result = async {
            self.auth
                .set_disabled(&actor(op), &operator_id(&id)?, !enabled)
                .await?;
            Ok(())
        }
        .await;
        super::audited(self, op, "operator.enable", result).await
    }

    async fn set_operator_tenants(
        &self,
        op: &Operator,
        id: String,
        tenants: String,
    ) -> UiResult<()> {
        let result = async {
            let tenants = parse_tenants(&tenants)?;
            self.auth
                .set_scope(&actor(op), &operator_id(&id)?, tenants)
                .await?;
            Ok(())
        }
        .await;
        super::audited(self, op, "operator.scope", result).await
    }
}

/// A comma- or space-separated list of tenant ids; empty: every tenant.
pub(crate) fn parse_tenants(list: &str) -> UiResult<Option<Vec<TenantId>>> {
    let ids = list
        .split([',', ' ', '\n', '\t'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse::<TenantId>()
                .map_err(|e| UiError::invalid("tenants", format!("{t}: {e}")))
        })
        .collect::<UiResult<Vec<_>>>()?;
    Ok(Some(ids).filter(|v| !v.is_empty()))
}
