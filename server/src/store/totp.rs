//! TOTP seed rows (both backends): the sealed secret and its parameters in
//! the clear for lists. Sealing is `crate::crypto`'s, the rules are
//! `crate::vault::totp`'s.

use anyhow::Context;

use super::Store;
use super::column::ReadContext;
use super::vault::Bound;
use crate::crypto::Sealed;
use crate::domain::{TenantId, TotpId};

/// A seed's metadata: everything but the secret.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TotpInfo {
    /// `tp_…`.
    pub id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The site whose pages (and subdomains) may receive its codes.
    pub domain: String,
    /// Which account it is ("admin account").
    pub label: String,
    /// `SHA1`, `SHA256`, `SHA512`.
    pub algorithm: String,
    /// 6–8.
    pub digits: i64,
    /// Seconds.
    pub period: i64,
    /// Id of the master key that sealed it.
    pub key_id: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last code typed.
    pub last_used_at: Option<i64>,
}

/// A seed with its sealed secret.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TotpRow {
    /// Metadata.
    #[sqlx(flatten)]
    pub info: TotpInfo,
    /// The sealed secret and parameters.
    #[sqlx(flatten)]
    pub sealed: Sealed,
}

const INFO_COLUMNS: &str =
    "id, tenant_id, domain, label, algorithm, digits, period, key_id, created_at, last_used_at";

impl Store {
    /// Inserts a seed; false if the tenant already has one with that label
    /// for that domain.
    #[tracing::instrument(skip_all, fields(tenant.id = %row.info.tenant_id, totp.id = %row.info.id))]
    pub async fn totp_insert(&self, row: &TotpRow) -> anyhow::Result<bool> {
        let i = &row.info;
        let res = sqlx::query(&format!(
            "INSERT INTO vault_totp ({INFO_COLUMNS}, ciphertext, nonce) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (tenant_id, domain, label) DO NOTHING"
        ))
        .bind(i.id.clone())
        .bind(i.tenant_id.clone())
        .bind(i.domain.clone())
        .bind(i.label.clone())
        .bind(i.algorithm.clone())
        .bind(i.digits)
        .bind(i.period)
        .bind(row.sealed.key_id.as_str().to_owned())
        .bind(i.created_at)
        .bind(i.last_used_at)
        .bind(row.sealed.ciphertext.clone())
        .bind(row.sealed.nonce.clone())
        .execute(self.pool())
        .await
        .context("failed to insert TOTP seed")?;
        Ok(res.rows_affected() == 1)
    }

    /// Metadata of all seeds, or one tenant's, by tenant, domain and label.
    pub async fn totp_list(&self, tenant: Option<&TenantId>) -> anyhow::Result<Vec<TotpInfo>> {
        match tenant {
            Some(t) => sqlx::query_as(&format!(
                "SELECT {INFO_COLUMNS} FROM vault_totp WHERE tenant_id = $1 ORDER BY domain, label"
            ))
            .bind(t.as_str().to_owned())
            .fetch_all(self.pool())
            .await,
            None => {
                sqlx::query_as(&format!(
                    "SELECT {INFO_COLUMNS} FROM vault_totp ORDER BY tenant_id, domain, label"
                ))
                .fetch_all(self.pool())
                .await
            }
        }
        .read("failed to list TOTP seeds", "malformed TOTP seed row")
    }

    /// The tenant's sealed seeds for `domains` (exact matches), by domain and label.
    pub async fn totp_for_domains(
        &self,
        tenant: &TenantId,
        domains: &[String],
    ) -> anyhow::Result<Vec<TotpRow>> {
        if domains.is_empty() {
            return Ok(Vec::new());
        }
        let marks = (0..domains.len())
            .map(|i| format!("${}", i + 2))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {INFO_COLUMNS}, ciphertext, nonce FROM vault_totp \
             WHERE tenant_id = $1 AND domain IN ({marks}) ORDER BY domain, label"
        );
        let mut query = sqlx::query_as(&sql).bind(tenant.as_str().to_owned());
        for d in domains {
            query = query.bind(d.clone());
        }
        query
            .fetch_all(self.pool())
            .await
            .read("failed to read TOTP seeds", "malformed TOTP seed row")
    }

    /// One of the tenant's sealed seeds.
    pub async fn totp_get(
        &self,
        tenant: &TenantId,
        id: &TotpId,
    ) -> anyhow::Result<Option<TotpRow>> {
        sqlx::query_as(&format!(
            "SELECT {INFO_COLUMNS}, ciphertext, nonce FROM vault_totp WHERE tenant_id = $1 AND id = $2"
        ))
        .bind(tenant.as_str().to_owned())
        .bind(id.to_string())
        .fetch_optional(self.pool())
        .await
        .read("failed to read TOTP seed", "malformed TOTP seed row")
    }

    /// Records that a code of the seed was typed at `at`.
    pub async fn totp_mark_used(&self, id: &TotpId, at: i64) -> anyhow::Result<()> {
        sqlx::query("UPDATE vault_totp SET last_used_at = $1 WHERE id = $2")
            .bind(at)
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to mark TOTP seed used")?;
        Ok(())
    }

    /// Deletes one of the tenant's seeds; its metadata if there was one.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant))]
    pub async fn totp_delete(
        &self,
        tenant: &TenantId,
        id: &TotpId,
    ) -> anyhow::Result<Option<TotpInfo>> {
        sqlx::query_as(&format!(
            "DELETE FROM vault_totp WHERE tenant_id = $1 AND id = $2 RETURNING {INFO_COLUMNS}"
        ))
        .bind(tenant.as_str().to_owned())
        .bind(id.to_string())
        .fetch_optional(self.pool())
        .await
        .read("failed to delete TOTP seed", "malformed TOTP seed row")
    }
}

/// Part of [`Store::vault_reseal_all`]: re-seals every seed in its
/// transaction.
pub(super) async fn reseal_all<F>(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    reseal: &mut F,
) -> anyhow::Result<u64>
where
    F: FnMut(Bound<'_>, &Sealed) -> anyhow::Result<Sealed>,
{
    let rows: Vec<TotpRow> = sqlx::query_as(&format!(
        "SELECT {INFO_COLUMNS}, ciphertext, nonce FROM vault_totp ORDER BY id"
    ))
    .fetch_all(&mut **tx)
    .await
    .read(
        "failed to read TOTP seeds for key rotation",
        "malformed TOTP seed row",
    )?;
    let mut count = 0;
    for row in &rows {
        let bound = Bound {
            tenant: &row.info.tenant_id,
            domain: &row.info.domain,
            id: &row.info.id,
        };
        let sealed = reseal(bound, &row.sealed)?;
        sqlx::query("UPDATE vault_totp SET ciphertext = $1, nonce = $2, key_id = $3 WHERE id = $4")
            .bind(sealed.ciphertext)
            .bind(sealed.nonce)
            .bind(sealed.key_id.as_str().to_owned())
            .bind(row.info.id.clone())
            .execute(&mut **tx)
            .await
            .context("failed to rewrite TOTP seed")?;
        count += 1;
    }
    Ok(count)
}
