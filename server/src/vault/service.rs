//! `Vault`: stores, lists, exports and hands out credentials (cookies and
//! localStorage). They are decrypted in memory only, and every change or disclosure is audited with
//! ids and counts, never values.

use anyhow::Context;
use serde_json::json;
use zeroize::Zeroizing;

use super::domain::Domain;
use super::error::VaultError;
use super::import::{self, ImportError, Rejected};
use super::plaintext;
use crate::audit::{Actor, NewEvent};
use crate::crypto::{AssociatedData, CryptoError, KeyId, MasterKey};
use crate::domain::{Cookie, Origin, StorageState, earliest_expiry, storage_items};
use crate::domain::{TenantId, random_id};
use crate::store::Store;
use crate::store::vault::{CredentialInfo, CredentialRow};
use crate::time::now_ms;

/// How a credential got its cookies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `cordon creds import`.
    Import,
    /// An operator's refresh session.
    Refresh,
}

impl Source {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Import => "import",
            Self::Refresh => "refresh",
        }
    }
}

/// What an import may do besides the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Store the domain's cookies and skip (but list) those of other sites,
    /// instead of refusing the whole file.
    pub drop_foreign: bool,
}

/// What an import stored.
#[derive(Debug, Clone)]
pub struct ImportReport {
    /// The credential as stored.
    pub credential: CredentialInfo,
    /// Cookies of other sites that were skipped (with `drop_foreign`).
    pub rejected: Vec<Rejected>,
    /// storageState origins (localStorage) of other sites, not imported.
    pub ignored_origins: usize,
}

/// The credential vault over the store, with the master key in force.
#[derive(Clone)]
pub struct Vault {
    pub(super) store: Store,
    pub(super) key: MasterKey,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("key_id", self.key.id())
            .finish_non_exhaustive()
    }
}

pub(super) fn ad_of(info: &CredentialInfo) -> AssociatedData {
    AssociatedData::record(&info.tenant_id, &info.domain, &info.id)
}

impl Vault {
    /// A vault sealing with `key`.
    pub fn new(store: Store, key: MasterKey) -> Self {
        Self { store, key }
    }

    /// The id of the master key in force.
    pub fn key_id(&self) -> &KeyId {
        self.key.id()
    }

    /// Fails with [`CryptoError::KeyMismatch`] (naming the stored key id) if
    /// any stored credential was sealed under another key than the one in
    /// force. Run at start, before anything is decrypted or written.
    pub async fn check_keys(&self) -> Result<(), VaultError> {
        for (stored, count) in self.store.vault_key_ids().await? {
            if stored != self.key.id().as_str() {
                let stored = stored
                    .parse()
                    .context("malformed key id on a stored credential")?;
                return Err(CryptoError::KeyMismatch {
                    stored,
                    count,
                    current: self.key.id().clone(),
                }
                .into());
            }
        }
        Ok(())
    }

    pub(super) async fn require_tenant(&self, tenant: &TenantId) -> Result<(), VaultError> {
        if self.store.vault_tenant_exists(tenant).await? {
            Ok(())
        } else {
            Err(VaultError::UnknownTenant(tenant.clone()))
        }
    }

    pub(super) async fn audit(&self, event: NewEvent) -> Result<(), VaultError> {
        self.store.audit_append(event).await?;
        Ok(())
    }

    /// Imports a cookie file's bytes as the tenant's credential for
    /// `domain`, replacing any it had. Cookies of other sites make the
    /// import fail (listing them) unless `opts.drop_foreign`. A failure
    /// stores nothing; successes and failures are both audited.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant, vault.domain = %domain))]
    pub async fn import(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        domain: &Domain,
        bytes: &[u8],
        opts: ImportOptions,
    ) -> Result<ImportReport, VaultError> {
        self.require_tenant(tenant).await?;
        let event = NewEvent::new(actor.clone(), "vault.import").tenant(tenant);
        let checked = import::parse(bytes).and_then(|parsed| {
            let (kept, rejected) = import::partition(parsed.cookies, domain);
            if !rejected.is_empty() && !opts.drop_foreign {
                return Err(ImportError::Foreign {
                    domain: domain.clone(),
                    rejected,
                });
            }
            if kept.is_empty() {
                return Err(ImportError::Empty(domain.clone()));
            }
            let (origins, ignored) = import::partition_origins(parsed.origins, domain);
            Ok((kept, rejected, origins, ignored.len()))
        });
        let (cookies, rejected, origins, ignored_origins) = match checked {
            Ok(ok) => ok,
            Err(e) => {
                let rejected = match &e {
                    ImportError::Foreign { rejected, .. } => rejected.len(),
                    _ => 0,
                };
                self.audit(
                    event
                        .params(json!({ "domain": domain.as_str(), "rejected": rejected }))
                        .outcome(format!("denied: {}", e.code())),
                )
                .await?;
                return Err(e.into());
            }
        };
        self.audit(
            event
                .params(json!({
                    "domain": domain.as_str(),
                    "cookies": cookies.len(),
                    "local_storage": storage_items(&origins),
                    "rejected": rejected.len(),
                }))
                .outcome("requested"),
        )
        .await?;
        let credential = self
            .put(tenant, domain, &cookies, &origins, Source::Import)
            .await?;
        Ok(ImportReport {
            credential,
            rejected,
            ignored_origins,
        })
    }

    /// Stores `cookies` and `origins`' localStorage (both already filtered
    /// to `domain`) as the tenant's credential for it, replacing any it had
    /// (same row id); the refresh flow's entry. Audited as `vault.store`.
    pub async fn save(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        domain: &Domain,
        cookies: &[Cookie],
        origins: &[Origin],
        source: Source,
    ) -> Result<CredentialInfo, VaultError> {
        self.require_tenant(tenant).await?;
        let foreign_cookie = cookies
            .iter()
            .find(|c| !domain.covers(&c.domain))
            .map(|c| (c.name.clone(), c.domain.clone()));
        // An origin has no name: it is listed as its origin.
        let foreign_origin = || {
            origins
                .iter()
                .find(|o| !o.host().is_some_and(|h| domain.covers(&h)))
                .map(|o| ("localStorage".to_owned(), o.origin.clone()))
        };
        if let Some((name, other)) = foreign_cookie.or_else(foreign_origin) {
            return Err(ImportError::Foreign {
                domain: domain.clone(),
                rejected: vec![Rejected {
                    name,
                    domain: other,
                }],
            }
            .into());
        }
        self.audit(
            NewEvent::new(actor.clone(), "vault.store")
                .tenant(tenant)
                .params(json!({
                    "domain": domain.as_str(),
                    "cookies": cookies.len(),
                    "local_storage": storage_items(origins),
                    "source": source.as_str(),
                }))
                .outcome("requested"),
        )
        .await?;
        self.put(tenant, domain, cookies, origins, source).await
    }

    /// Seals and writes; the row id is part of the associated data, so a
    /// replaced row keeps its id and a concurrent writer makes us retry.
    async fn put(
        &self,
        tenant: &TenantId,
        domain: &Domain,
        cookies: &[Cookie],
        origins: &[Origin],
        source: Source,
    ) -> Result<CredentialInfo, VaultError> {
        // Never write under one key while rows are sealed under another.
        self.check_keys().await?;
        let plaintext: Zeroizing<Vec<u8>> =
            plaintext::encode(cookies, origins).context("cannot encode cookies")?;
        for _ in 0..3 {
            let existing = self.store.vault_id_of(tenant, domain.as_str()).await?;
            let now = now_ms();
            let info = CredentialInfo {
                id: existing
                    .clone()
                    .unwrap_or_else(|| random_id(crate::ids::CREDENTIAL)),
                tenant_id: tenant.as_str().to_owned(),
                domain: domain.as_str().to_owned(),
                key_id: self.key.id().as_str().to_owned(),
                created_at: now,
                last_refreshed_at: now,
                last_injected_at: None,
                earliest_expiry: earliest_expiry(cookies),
                cookie_count: i64::try_from(cookies.len()).unwrap_or(i64::MAX),
                storage_count: i64::try_from(storage_items(origins)).unwrap_or(i64::MAX),
                source: source.as_str().to_owned(),
            };
            let sealed = self.key.seal(&ad_of(&info), &plaintext)?;
            let row = CredentialRow { info, sealed };
            let written = match existing {
                Some(_) => self.store.vault_replace(&row).await?,
                None => self.store.vault_insert(&row).await?,
            };
            if written {
                return self.info(tenant, domain).await;
            }
        }
        Err(
            anyhow::anyhow!("credential for {domain} kept changing under concurrent writers")
                .into(),
        )
    }

    async fn info(&self, tenant: &TenantId, domain: &Domain) -> Result<CredentialInfo, VaultError> {
        self.store
            .vault_list(Some(tenant))
            .await?
            .into_iter()
            .find(|c| c.domain == domain.as_str())
            .ok_or_else(|| VaultError::NotFound {
                tenant: tenant.clone(),
                domain: domain.clone(),
            })
    }

    /// Metadata of all credentials, or of one (existing) tenant's.
    pub async fn list(&self, tenant: Option<&TenantId>) -> Result<Vec<CredentialInfo>, VaultError> {
        if let Some(t) = tenant {
            self.require_tenant(t).await?;
        }
        Ok(self.store.vault_list(tenant).await?)
    }

    /// Decrypts one credential as a storageState document, for an explicit
    /// export. Audited (`vault.export`) before anything is decrypted.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant, vault.domain = %domain))]
    pub async fn export(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        domain: &Domain,
    ) -> Result<StorageState, VaultError> {
        self.require_tenant(tenant).await?;
        let row = self
            .store
            .vault_get(tenant, &[domain.as_str()])
            .await?
            .pop()
            .ok_or_else(|| VaultError::NotFound {
                tenant: tenant.clone(),
                domain: domain.clone(),
            })?;
        self.audit(
            NewEvent::new(actor.clone(), "vault.export")
                .tenant(tenant)
                .params(json!({
                    "credential": row.info.id,
                    "domain": domain.as_str(),
                    "cookies": row.info.cookie_count,
                    "local_storage": row.info.storage_count,
                }))
                .outcome("requested"),
        )
        .await?;
        self.open(&row)
    }

    /// Deletes the tenant's credential for `domain` (audited as `vault.delete`).
    pub async fn delete(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        domain: &Domain,
    ) -> Result<String, VaultError> {
        self.require_tenant(tenant).await?;
        let not_found = || VaultError::NotFound {
            tenant: tenant.clone(),
            domain: domain.clone(),
        };
        // Audited before the row goes: first find it, so a deletion of
        // nothing leaves no "requested" row behind.
        let id = self
            .store
            .vault_id_of(tenant, domain.as_str())
            .await?
            .ok_or_else(not_found)?;
        self.audit(
            NewEvent::new(actor.clone(), "vault.delete")
                .tenant(tenant)
                .params(json!({ "credential": id, "domain": domain.as_str() }))
                .outcome("requested"),
        )
        .await?;
        self.store
            .vault_delete(tenant, domain.as_str())
            .await?
            .ok_or_else(not_found)
    }

    /// Decrypts a row: cookies and localStorage (older rows: cookies only).
    pub(super) fn open(&self, row: &CredentialRow) -> Result<StorageState, VaultError> {
        let plaintext = self.key.open(&ad_of(&row.info), &row.sealed)?;
        plaintext::decode(&plaintext).map_err(|_| {
            anyhow::anyhow!("credential {} decrypted to malformed cookies", row.info.id).into()
        })
    }
}
