//! Handing stored credentials out, decrypted in memory: to a session
//! being injected, and to the refresh flow's diff.

use super::domain::Domain;
use super::error::VaultError;
use super::service::Vault;
use crate::domain::TenantId;
use crate::domain::{Cookie, Origin, StorageState};
use crate::store::vault::CredentialInfo;
use crate::time::now_ms;

/// One domain's stored credential, decrypted for injection.
#[derive(Debug)]
pub struct Selected {
    /// The domain.
    pub domain: Domain,
    /// Its unexpired cookies.
    pub cookies: Vec<Cookie>,
    /// localStorage of its origins (hosts the domain covers).
    pub origins: Vec<Origin>,
}

impl Vault {
    /// The tenant's stored cookies and localStorage for `domains` (exact
    /// domain matches; domains without a credential are left out),
    /// decrypted in memory and without cookies that have expired. All or
    /// nothing: if any record does not decrypt, nothing is returned. Not
    /// audited here: the session that injects them audits the injection.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant, vault.domains = domains.len()))]
    pub async fn select_for_injection(
        &self,
        tenant: &TenantId,
        domains: &[Domain],
    ) -> Result<Vec<Selected>, VaultError> {
        self.require_tenant(tenant).await?;
        let names: Vec<&str> = domains.iter().map(Domain::as_str).collect();
        let now = now_ms();
        let mut out = Vec::new();
        for row in self.store.vault_get(tenant, &names).await? {
            let domain: Domain = row.info.domain.parse().map_err(|e| {
                anyhow::anyhow!("malformed domain on credential {}: {e}", row.info.id)
            })?;
            let StorageState {
                mut cookies,
                origins,
            } = self.open(&row)?;
            cookies.retain(|c| !c.expired_at(now));
            out.push(Selected {
                domain,
                cookies,
                origins,
            });
        }
        Ok(out)
    }

    /// Records that the tenant's credentials for `domains` were injected now.
    pub async fn mark_injected(
        &self,
        tenant: &TenantId,
        domains: &[Domain],
    ) -> Result<u64, VaultError> {
        self.require_tenant(tenant).await?;
        let names: Vec<&str> = domains.iter().map(Domain::as_str).collect();
        Ok(self
            .store
            .vault_mark_injected(tenant, &names, now_ms())
            .await?)
    }

    /// The tenant's stored credential for `domain` decrypted in memory, or
    /// `None` if it has none; for the refresh flow's diff. Not audited:
    /// the caller audits what it does with it, and nothing leaves memory.
    pub async fn current(
        &self,
        tenant: &TenantId,
        domain: &Domain,
    ) -> Result<Option<(CredentialInfo, StorageState)>, VaultError> {
        self.require_tenant(tenant).await?;
        match self
            .store
            .vault_get(tenant, &[domain.as_str()])
            .await?
            .pop()
        {
            Some(row) => {
                let state = self.open(&row)?;
                Ok(Some((row.info, state)))
            }
            None => Ok(None),
        }
    }
}
