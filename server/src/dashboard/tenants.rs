//! The admin page for tenants and their agent API keys.

use app::api::auth::Operator;
use app::api::backend::{TenantsBackend, UiResult};
use app::api::tenants::{ApiKeyView, NewApiKey, TenantView};
use app::error::UiError;

use super::{actor, internal};
use crate::domain::{ApiKeyId, TenantId};
use crate::state::AppState;
use crate::tenants::{self, TenantError};

fn ui(e: TenantError) -> UiError {
    match e {
        TenantError::Invalid(m) => UiError::invalid("name", m),
        e @ TenantError::Exists(_) => UiError::conflict(e.to_string()),
        TenantError::NoSuchTenant(t) => UiError::not_found(format!("tenant {t}")),
        TenantError::NoSuchKey(k) => UiError::not_found(format!("active API key {k}")),
        TenantError::Internal(e) => internal("the tenant change", e),
    }
}

#[async_trait::async_trait]
impl TenantsBackend for AppState {
    async fn tenants(&self, op: &Operator) -> UiResult<Vec<TenantView>> {
        let keys = tenants::list_keys(&self.store, None).await.map_err(ui)?;
        Ok(tenants::list(&self.store)
            .await
            .map_err(ui)?
            .into_iter()
            .filter(|t| op.sees(t.id.as_str()))
            .map(|t| TenantView {
                keys: keys
                    .iter()
                    .filter(|k| k.tenant == t.id)
                    .map(|k| ApiKeyView {
                        id: k.id.clone(),
                        label: k.label.clone(),
                        created_at: k.created_at,
                        last_used_at: k.last_used_at,
                        revoked_at: k.revoked_at,
                    })
                    .collect(),
                id: t.id.to_string(),
                name: t.name,
                created_at: t.created_at,
            })
            .collect())
    }

    async fn create_tenant(&self, op: &Operator, id: String, name: String) -> UiResult<()> {
        let result = async {
            let id: TenantId = id
                .trim()
                .parse()
                .map_err(|e: crate::domain::TenantIdError| UiError::invalid("id", e.to_string()))?;
            let name = Some(name.trim()).filter(|n| !n.is_empty());
            tenants::create(&self.store, &actor(op), &id, name)
                .await
                .map(|_| ())
                .map_err(ui)
        }
        .await;
        super::audited(self, op, "tenant.create", result).await
    }

    async fn create_api_key(
        &self,
        op: &Operator,
        tenant: String,
        label: String,
    ) -> UiResult<NewApiKey> {
        super::in_scope(self, op, "create an API key", &tenant, || {
            UiError::not_found(format!("tenant {tenant}"))
        })
        .await?;
        let result = async {
            let tenant: TenantId = tenant.parse().map_err(|e: crate::domain::TenantIdError| {
                UiError::invalid("tenant", e.to_string())
            })?;
            let (id, key) = tenants::create_key(&self.store, &actor(op), &tenant, &label)
                .await
                .map_err(|e| match e {
                    TenantError::Invalid(m) => UiError::invalid("label", m),
                    other => ui(other),
                })?;
            Ok(NewApiKey { id, key })
        }
        .await;
        super::audited(self, op, "apikey.create", result).await
    }

    async fn revoke_api_key(&self, op: &Operator, id: String) -> UiResult<()> {
        if !op.global()
            && let Some(k) = tenants::list_keys(&self.store, None)
                .await
                .map_err(ui)?
                .into_iter()
                .find(|k| k.id == id)
        {
            super::in_scope(self, op, "revoke an API key", k.tenant.as_str(), || {
                UiError::not_found(format!("active API key {id}"))
            })
            .await?;
        }
        let result = async {
            let id: ApiKeyId = id
                .parse()
                .map_err(|_| UiError::not_found(format!("API key {id:?}")))?;
            tenants::revoke_key(&self.store, &actor(op), &id)
                .await
                .map_err(ui)
        }
        .await;
        super::audited(self, op, "apikey.revoke", result).await
    }
}
