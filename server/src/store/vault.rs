//! Vault credential rows (both backends). Rows hold ciphertext only; sealing
//! is `crate::crypto`'s, the rules are `crate::vault`'s.

use anyhow::Context;

use super::column::ReadContext;
use super::{DatabaseKind, Store};
use crate::crypto::Sealed;
use crate::domain::TenantId;

/// A credential's metadata: everything but the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CredentialInfo {
    /// `v_…`.
    pub id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The site (`example.com`); cookies of its subdomains are included.
    pub domain: String,
    /// Id of the master key that sealed it.
    pub key_id: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last import or refresh.
    pub last_refreshed_at: i64,
    /// Unix ms of the last injection into a session.
    pub last_injected_at: Option<i64>,
    /// Earliest cookie expiry, Unix ms; `None` if all are session cookies.
    pub earliest_expiry: Option<i64>,
    /// How many cookies it holds.
    pub cookie_count: i64,
    /// How many localStorage items it holds (all origins together).
    pub storage_count: i64,
    /// `import` or `refresh`.
    pub source: String,
}

/// What a sealed vault record is bound to (its associated data).
#[derive(Debug, Clone, Copy)]
pub struct Bound<'a> {
    /// Owner tenant.
    pub tenant: &'a str,
    /// Its domain.
    pub domain: &'a str,
    /// Its id (`v_…`, `tp_…`).
    pub id: &'a str,
}

/// A credential with its sealed cookies and localStorage.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CredentialRow {
    /// Metadata.
    #[sqlx(flatten)]
    pub info: CredentialInfo,
    /// The sealed storageState (or, on older rows, cookie list).
    #[sqlx(flatten)]
    pub sealed: Sealed,
}

const INFO_COLUMNS: &str = "id, tenant_id, domain, key_id, created_at, last_refreshed_at, \
     last_injected_at, earliest_expiry, cookie_count, storage_count, source";

/// `$first, $first+1, …` for `n` values.
fn placeholders(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Whether `tenant` exists.
    pub async fn vault_tenant_exists(&self, tenant: &TenantId) -> anyhow::Result<bool> {
        let row = sqlx::query("SELECT id FROM tenants WHERE id = $1")
            .bind(tenant.as_str().to_owned())
            .fetch_optional(self.pool())
            .await
            .context("failed to look up tenant")?;
        Ok(row.is_some())
    }

    /// The id of the tenant's credential for `domain`, if any.
    pub async fn vault_id_of(
        &self,
        tenant: &TenantId,
        domain: &str,
    ) -> anyhow::Result<Option<String>> {
        sqlx::query_scalar("SELECT id FROM vault_credentials WHERE tenant_id = $1 AND domain = $2")
            .bind(tenant.as_str().to_owned())
            .bind(domain.to_owned())
            .fetch_optional(self.pool())
            .await
            .read("failed to look up credential", "malformed credential row")
    }

    /// Inserts a credential; false if the tenant already has one for that
    /// domain (someone else inserted it first).
    #[tracing::instrument(skip_all, fields(tenant.id = %row.info.tenant_id, credential.id = %row.info.id))]
    pub async fn vault_insert(&self, row: &CredentialRow) -> anyhow::Result<bool> {
        let i = &row.info;
        let res = sqlx::query(&format!(
            "INSERT INTO vault_credentials ({INFO_COLUMNS}, ciphertext, nonce) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (tenant_id, domain) DO NOTHING"
        ))
        .bind(i.id.clone())
        .bind(i.tenant_id.clone())
        .bind(i.domain.clone())
        .bind(row.sealed.key_id.as_str().to_owned())
        .bind(i.created_at)
        .bind(i.last_refreshed_at)
        .bind(i.last_injected_at)
        .bind(i.earliest_expiry)
        .bind(i.cookie_count)
        .bind(i.storage_count)
        .bind(i.source.clone())
        .bind(row.sealed.ciphertext.clone())
        .bind(row.sealed.nonce.clone())
        .execute(self.pool())
        .await
        .context("failed to insert credential")?;
        Ok(res.rows_affected() == 1)
    }

    /// Replaces the cookies of an existing credential (same id, tenant and
    /// domain: the associated data the ciphertext is bound to). False if it
    /// is gone.
    #[tracing::instrument(skip_all, fields(tenant.id = %row.info.tenant_id, credential.id = %row.info.id))]
    pub async fn vault_replace(&self, row: &CredentialRow) -> anyhow::Result<bool> {
        let i = &row.info;
        let res = sqlx::query(
            "UPDATE vault_credentials SET ciphertext = $1, nonce = $2, key_id = $3, \
             last_refreshed_at = $4, earliest_expiry = $5, cookie_count = $6, storage_count = $7, \
             source = $8 WHERE id = $9 AND tenant_id = $10 AND domain = $11",
        )
        .bind(row.sealed.ciphertext.clone())
        .bind(row.sealed.nonce.clone())
        .bind(row.sealed.key_id.as_str().to_owned())
        .bind(i.last_refreshed_at)
        .bind(i.earliest_expiry)
        .bind(i.cookie_count)
        .bind(i.storage_count)
        .bind(i.source.clone())
        .bind(i.id.clone())
        .bind(i.tenant_id.clone())
        .bind(i.domain.clone())
        .execute(self.pool())
        .await
        .context("failed to replace credential")?;
        Ok(res.rows_affected() == 1)
    }

    /// Metadata of all credentials, or one tenant's, by tenant then domain.
    pub async fn vault_list(
        &self,
        tenant: Option<&TenantId>,
    ) -> anyhow::Result<Vec<CredentialInfo>> {
        match tenant {
            Some(t) => sqlx::query_as(&format!(
                "SELECT {INFO_COLUMNS} FROM vault_credentials WHERE tenant_id = $1 ORDER BY domain"
            ))
            .bind(t.as_str().to_owned())
            .fetch_all(self.pool())
            .await,
            None => {
                sqlx::query_as(&format!(
                    "SELECT {INFO_COLUMNS} FROM vault_credentials ORDER BY tenant_id, domain"
                ))
                .fetch_all(self.pool())
                .await
            }
        }
        .read("failed to list credentials", "malformed credential row")
    }

    /// The tenant's credentials for `domains` (exact matches), by domain.
    pub async fn vault_get(
        &self,
        tenant: &TenantId,
        domains: &[&str],
    ) -> anyhow::Result<Vec<CredentialRow>> {
        if domains.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {INFO_COLUMNS}, ciphertext, nonce FROM vault_credentials \
             WHERE tenant_id = $1 AND domain IN ({}) ORDER BY domain",
            placeholders(2, domains.len())
        );
        let mut query = sqlx::query_as(&sql).bind(tenant.as_str().to_owned());
        for d in domains {
            query = query.bind((*d).to_owned());
        }
        query
            .fetch_all(self.pool())
            .await
            .read("failed to read credentials", "malformed credential row")
    }

    /// Sets `last_injected_at` on the tenant's credentials for `domains`;
    /// returns how many rows changed.
    pub async fn vault_mark_injected(
        &self,
        tenant: &TenantId,
        domains: &[&str],
        at: i64,
    ) -> anyhow::Result<u64> {
        if domains.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE vault_credentials SET last_injected_at = $1 WHERE tenant_id = $2 AND domain IN ({})",
            placeholders(3, domains.len())
        );
        let mut query = sqlx::query(&sql).bind(at).bind(tenant.as_str().to_owned());
        for d in domains {
            query = query.bind((*d).to_owned());
        }
        let res = query
            .execute(self.pool())
            .await
            .context("failed to mark credentials injected")?;
        Ok(res.rows_affected())
    }

    /// Deletes the tenant's credential for `domain`; returns its id if there was one.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant))]
    pub async fn vault_delete(
        &self,
        tenant: &TenantId,
        domain: &str,
    ) -> anyhow::Result<Option<String>> {
        sqlx::query_scalar(
            "DELETE FROM vault_credentials WHERE tenant_id = $1 AND domain = $2 RETURNING id",
        )
        .bind(tenant.as_str().to_owned())
        .bind(domain.to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to delete credential", "malformed credential row")
    }

    /// The key ids found on stored credentials and TOTP seeds, with how many rows carry each.
    pub async fn vault_key_ids(&self) -> anyhow::Result<Vec<(String, i64)>> {
        sqlx::query_as(
            "SELECT key_id, CAST(SUM(n) AS BIGINT) AS n FROM (\
               SELECT key_id, COUNT(*) AS n FROM vault_credentials GROUP BY key_id \
               UNION ALL SELECT key_id, COUNT(*) AS n FROM vault_totp GROUP BY key_id\
             ) k GROUP BY key_id ORDER BY key_id",
        )
        .fetch_all(self.pool())
        .await
        .read("failed to read credential key ids", "malformed key id row")
    }

    /// Re-seals every credential and TOTP seed with `reseal` (given what
    /// the record is bound to) in one transaction: either every row is
    /// rewritten or, if `reseal` fails on any, none is. Writers are locked
    /// out until it commits. Returns how many rows it rewrote.
    #[tracing::instrument(skip_all)]
    pub async fn vault_reseal_all<F>(&self, mut reseal: F) -> anyhow::Result<u64>
    where
        F: FnMut(Bound<'_>, &Sealed) -> anyhow::Result<Sealed>,
    {
        let mut tx = self
            .pool()
            .begin()
            .await
            .context("failed to begin key rotation")?;
        // Take the write lock before reading, so no import slips in between
        // the read and the rewrite (SQLite: any write takes the database
        // lock; PostgreSQL: this mode admits readers and nothing else).
        let locks: &[&str] = match self.kind() {
            DatabaseKind::Sqlite => &["UPDATE vault_credentials SET key_id = key_id"],
            DatabaseKind::Postgres => &[
                "LOCK TABLE vault_credentials IN SHARE ROW EXCLUSIVE MODE",
                "LOCK TABLE vault_totp IN SHARE ROW EXCLUSIVE MODE",
            ],
        };
        for lock in locks {
            sqlx::query(lock)
                .execute(&mut *tx)
                .await
                .context("failed to lock credentials for key rotation")?;
        }
        let rows: Vec<CredentialRow> = sqlx::query_as(&format!(
            "SELECT {INFO_COLUMNS}, ciphertext, nonce FROM vault_credentials ORDER BY id"
        ))
        .fetch_all(&mut *tx)
        .await
        .read(
            "failed to read credentials for key rotation",
            "malformed credential row",
        )?;
        let mut count = 0;
        for row in &rows {
            let bound = Bound {
                tenant: &row.info.tenant_id,
                domain: &row.info.domain,
                id: &row.info.id,
            };
            let sealed = reseal(bound, &row.sealed)?;
            sqlx::query(
                "UPDATE vault_credentials SET ciphertext = $1, nonce = $2, key_id = $3 WHERE id = $4",
            )
            .bind(sealed.ciphertext)
            .bind(sealed.nonce)
            .bind(sealed.key_id.as_str().to_owned())
            .bind(row.info.id.clone())
            .execute(&mut *tx)
            .await
            .context("failed to rewrite credential")?;
            count += 1;
        }
        count += super::totp::reseal_all(&mut tx, &mut reseal).await?;
        tx.commit().await.context("failed to commit key rotation")?;
        Ok(count)
    }
}
