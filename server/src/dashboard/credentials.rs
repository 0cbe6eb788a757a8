//! The credentials page: metadata of the vault, never a cookie value.

use app::api::auth::Operator;
use app::api::backend::{CredentialsBackend, UiResult};
use app::api::credentials::{CredentialView, TotpView};
use app::error::UiError;

use super::{actor, internal};
use crate::domain::TenantId;
use crate::state::AppState;
use crate::store::vault::CredentialInfo;
use crate::vault::{Domain, VaultError};

/// A credential as the pages show it.
pub(super) fn view(c: CredentialInfo) -> CredentialView {
    CredentialView {
        tenant: c.tenant_id,
        domain: c.domain,
        cookies: c.cookie_count,
        storage: c.storage_count,
        earliest_expiry: c.earliest_expiry,
        refreshed_at: c.last_refreshed_at,
        last_injected_at: c.last_injected_at,
        source: c.source,
    }
}

#[async_trait::async_trait]
impl CredentialsBackend for AppState {
    async fn credentials(&self, op: &Operator) -> UiResult<Vec<CredentialView>> {
        Ok(self
            .store
            .vault_list(None)
            .await
            .map_err(|e| internal("listing credentials", e))?
            .into_iter()
            .filter(|c| op.sees(&c.tenant_id))
            .map(view)
            .collect())
    }

    async fn delete_credential(
        &self,
        op: &Operator,
        tenant: String,
        domain: String,
    ) -> UiResult<()> {
        super::in_scope(self, op, "delete a credential", &tenant, || {
            UiError::not_found(format!("credential of {tenant} for {domain}"))
        })
        .await?;
        let result = async {
            let tenant: TenantId = tenant.parse().map_err(|e: crate::domain::TenantIdError| {
                UiError::invalid("tenant", e.to_string())
            })?;
            let domain: Domain = domain.parse().map_err(|e: crate::vault::DomainError| {
                UiError::invalid("domain", e.to_string())
            })?;
            match self.vault.delete(&actor(op), &tenant, &domain).await {
                Ok(_) => Ok(()),
                Err(VaultError::NotFound { .. }) => Err(UiError::not_found(format!(
                    "credential of {tenant} for {domain}"
                ))),
                Err(VaultError::UnknownTenant(t)) => Err(UiError::not_found(format!("tenant {t}"))),
                Err(e) => Err(internal("deleting the credential", e)),
            }
        }
        .await;
        super::audited(self, op, "vault.delete", result).await
    }

    async fn totp_seeds(&self, op: &Operator) -> UiResult<Vec<TotpView>> {
        Ok(self
            .vault
            .totp_list_all()
            .await
            .map_err(|e| internal("listing TOTP seeds", e))?
            .into_iter()
            .filter(|t| op.sees(&t.tenant_id))
            .map(super::totp::view)
            .collect())
    }

    async fn delete_totp(&self, op: &Operator, tenant: String, id: String) -> UiResult<()> {
        super::in_scope(self, op, "delete a TOTP seed", &tenant, || {
            UiError::not_found(format!("TOTP seed {id}"))
        })
        .await?;
        let result = async {
            let tenant: TenantId = tenant.parse().map_err(|e: crate::domain::TenantIdError| {
                UiError::invalid("tenant", e.to_string())
            })?;
            let deleted = match self.vault.totp_id(&tenant, &id).await {
                Ok(id) => self.vault.totp_delete(&actor(op), &tenant, &id).await,
                Err(e) => Err(e),
            };
            match deleted {
                Ok(_) => Ok(()),
                Err(VaultError::TotpNotFound(id)) => {
                    Err(UiError::not_found(format!("TOTP seed {id}")))
                }
                Err(VaultError::UnknownTenant(t)) => Err(UiError::not_found(format!("tenant {t}"))),
                Err(e) => Err(internal("deleting the TOTP seed", e)),
            }
        }
        .await;
        super::audited(self, op, "vault.totp.delete", result).await
    }
}
