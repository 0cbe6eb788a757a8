//! Agent API keys: only a SHA-256 of each key is stored.

use anyhow::Context;
use sqlx::Row;

use super::Store;
use super::column::ReadContext;
use crate::domain::{ApiKeyId, TenantId};
use crate::ids::token_hash;
use crate::time::now_ms;

/// What a valid key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyOwner {
    /// The key's id (shown in audit rows; not secret).
    pub key_id: String,
    /// The tenant it acts for.
    pub tenant: TenantId,
}

/// A key as listed (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ApiKeyInfo {
    /// Id.
    pub id: String,
    /// Tenant.
    #[sqlx(rename = "tenant_id")]
    pub tenant: TenantId,
    /// Label.
    pub label: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms, if revoked.
    pub revoked_at: Option<i64>,
    /// Unix ms of its last use, to the minute.
    pub last_used_at: Option<i64>,
}

/// The prefix every key starts with, so leaked keys are recognisable.
pub const KEY_PREFIX: &str = crate::ids::API_KEY_SECRET;

impl Store {
    /// Creates a key for `tenant`; returns `(key_id, key)`. The key is shown
    /// once and only its hash is stored.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant))]
    pub async fn api_key_create(
        &self,
        tenant: &TenantId,
        label: &str,
    ) -> anyhow::Result<(String, String)> {
        let key = crate::ids::secret_token(KEY_PREFIX);
        let id = crate::ids::random_id(crate::ids::API_KEY);
        sqlx::query(
            "INSERT INTO api_keys (id, tenant_id, key_hash, label, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id.clone())
        .bind(tenant.as_str().to_owned())
        .bind(token_hash(&key))
        .bind(label.to_owned())
        .bind(now_ms())
        .execute(self.pool())
        .await
        .context("failed to insert api key (does the tenant exist?)")?;
        Ok((id, key))
    }

    /// Resolves a presented key, if it exists and is not revoked.
    pub async fn api_key_lookup(&self, key: &str) -> anyhow::Result<Option<ApiKeyOwner>> {
        let row = sqlx::query(
            "SELECT id, tenant_id, last_used_at FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        )
        .bind(token_hash(key))
        .fetch_optional(self.pool())
        .await
        .context("failed to look up api key")?;
        row.map(|r| {
            let tenant: String = r.try_get("tenant_id")?;
            let id: String = r.try_get("id")?;
            let last: Option<i64> = r.try_get("last_used_at")?;
            let now = now_ms();
            if last.is_none_or(|l| now - l >= 60_000) {
                // Off the request's path: a failed write only loses a
                // "last used" time.
                let store = self.clone();
                // Rows are written with an `ApiKeyId` (`api_key_create`).
                let id = id.parse::<ApiKeyId>();
                tokio::spawn(async move {
                    let Ok(id) = id else { return };
                    if let Err(e) = store.api_key_used(&id, now).await {
                        tracing::warn!(error = %format!("{e:#}"), "failed to record api key use");
                    }
                });
            }
            Ok(ApiKeyOwner {
                key_id: r.try_get("id")?,
                tenant: tenant.parse().context("bad tenant id")?,
            })
        })
        .transpose()
    }

    /// All keys, or one tenant's, newest first.
    pub async fn api_key_list(&self, tenant: Option<&TenantId>) -> anyhow::Result<Vec<ApiKeyInfo>> {
        const COLUMNS: &str = "id, tenant_id, label, created_at, revoked_at, last_used_at";
        match tenant {
            Some(t) => sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at DESC, id"
            ))
            .bind(t.as_str().to_owned())
            .fetch_all(self.pool())
            .await,
            None => {
                sqlx::query_as(&format!(
                    "SELECT {COLUMNS} FROM api_keys ORDER BY created_at DESC, id"
                ))
                .fetch_all(self.pool())
                .await
            }
        }
        .read("failed to list api keys", "malformed api key row")
    }

    /// Records that key `id` was used at `now`, at most once a minute (the
    /// condition keeps the row untouched in between).
    pub async fn api_key_used(&self, id: &ApiKeyId, now: i64) -> anyhow::Result<()> {
        sqlx::query(
            "UPDATE api_keys SET last_used_at = $1 WHERE id = $2 \
             AND (last_used_at IS NULL OR last_used_at < $3)",
        )
        .bind(now)
        .bind(id.to_string())
        .bind(now - 60_000)
        .execute(self.pool())
        .await
        .context("failed to record api key use")?;
        Ok(())
    }

    /// Whether key `id` exists and is not revoked (a connection that
    /// outlives the request it was made with asks again).
    pub async fn api_key_active(&self, id: &str) -> anyhow::Result<bool> {
        let row = sqlx::query("SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL")
            .bind(id)
            .fetch_optional(self.pool())
            .await
            .context("failed to look up api key")?;
        Ok(row.is_some())
    }

    /// Revokes a key; false if no such live key.
    pub async fn api_key_revoke(&self, id: &ApiKeyId) -> anyhow::Result<bool> {
        let res =
            sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
                .bind(now_ms())
                .bind(id.to_string())
                .execute(self.pool())
                .await
                .context("failed to revoke api key")?;
        Ok(res.rows_affected() == 1)
    }
}
