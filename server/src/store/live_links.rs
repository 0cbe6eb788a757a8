//! Live links (both backends): issued, looked up by token hash or id,
//! listed per session, revoked, and pruned a day after they ended.

use anyhow::Context;

use super::Store;
use super::column::{Flag, ReadContext};
use crate::domain::{DatabaseKind, LiveLinkId, SessionId};

/// A live link as stored (never its token).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LiveLinkRow {
    /// `ll_…`.
    pub id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// `s_…`.
    pub session_id: String,
    /// The API key that asked for it.
    pub key_id: String,
    /// `view` or `control`.
    pub mode: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub expires_at: i64,
    /// Unix ms, once revoked.
    pub revoked_at: Option<i64>,
    /// Whether the key that asked for it has been revoked since.
    #[sqlx(try_from = "Flag")]
    pub key_revoked: bool,
}

/// The columns every lookup reads (`l`: the link, `k`: its key). A key
/// that is gone counts as revoked.
const COLUMNS: &str = "l.id, l.tenant_id, l.session_id, l.key_id, l.mode, l.created_at, \
     l.expires_at, l.revoked_at, \
     CASE WHEN k.id IS NULL OR k.revoked_at IS NOT NULL THEN 1 ELSE 0 END AS key_revoked";

/// A new link's stored fields.
pub struct NewLiveLink<'a> {
    /// `ll_…`.
    pub id: &'a str,
    /// SHA-256 of its token, hex.
    pub token_hash: &'a str,
    /// Its tenant.
    pub tenant_id: &'a str,
    /// `s_…`.
    pub session_id: &'a str,
    /// The key that asks.
    pub key_id: &'a str,
    /// `view` or `control`.
    pub mode: &'a str,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub expires_at: i64,
}

impl Store {
    /// Records a link unless its session already has `max` working ones at
    /// `l.created_at`: `false` then, and nothing written. The count and the
    /// insert are one statement, and on PostgreSQL a transaction holding
    /// the session's advisory lock, so racing requests cannot pass `max`.
    pub async fn live_link_insert_within(
        &self,
        l: &NewLiveLink<'_>,
        max: i64,
    ) -> anyhow::Result<bool> {
        let mut tx = self
            .pool()
            .begin()
            .await
            .context("failed to record a live link")?;
        if self.kind == DatabaseKind::Postgres {
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS locked")
                .bind(format!("live_links:{}", l.session_id))
                .execute(&mut *tx)
                .await
                .context("failed to lock a session's live links")?;
        }
        let done = sqlx::query(
            "INSERT INTO live_links (id, token_hash, tenant_id, session_id, key_id, mode, \
             created_at, expires_at) SELECT $1, $2, $3, $4, $5, $6, $7, $8 \
             WHERE (SELECT COUNT(*) FROM live_links WHERE session_id = $4 \
             AND revoked_at IS NULL AND expires_at > $7) < $9",
        )
        .bind(l.id.to_owned())
        .bind(l.token_hash.to_owned())
        .bind(l.tenant_id.to_owned())
        .bind(l.session_id.to_owned())
        .bind(l.key_id.to_owned())
        .bind(l.mode.to_owned())
        .bind(l.created_at)
        .bind(l.expires_at)
        .bind(max)
        .execute(&mut *tx)
        .await
        .context("failed to record a live link")?;
        tx.commit().await.context("failed to record a live link")?;
        Ok(done.rows_affected() == 1)
    }

    /// The link whose token hashes to `hash`.
    pub async fn live_link_by_hash(&self, hash: &str) -> anyhow::Result<Option<LiveLinkRow>> {
        self.live_link_where("l.token_hash", hash).await
    }

    /// The link `id`.
    pub async fn live_link_get(&self, id: &LiveLinkId) -> anyhow::Result<Option<LiveLinkRow>> {
        self.live_link_where("l.id", id.as_str()).await
    }

    /// The one link whose `column` (a unique column, named by the code,
    /// never by a caller's text) is `value`.
    async fn live_link_where(
        &self,
        column: &'static str,
        value: &str,
    ) -> anyhow::Result<Option<LiveLinkRow>> {
        let q = format!(
            "SELECT {COLUMNS} FROM live_links l LEFT JOIN api_keys k ON k.id = l.key_id \
             WHERE {column} = $1"
        );
        sqlx::query_as(&q)
            .bind(value.to_owned())
            .fetch_optional(self.pool())
            .await
            .read("failed to read a live link", "malformed live link")
    }

    /// A session's links of `tenant`, newest first.
    pub async fn live_links_of(
        &self,
        tenant: &str,
        session: &SessionId,
    ) -> anyhow::Result<Vec<LiveLinkRow>> {
        let q = format!(
            "SELECT {COLUMNS} FROM live_links l LEFT JOIN api_keys k ON k.id = l.key_id \
             WHERE l.tenant_id = $1 AND l.session_id = $2 ORDER BY l.created_at DESC, l.id \
             LIMIT 500"
        );
        sqlx::query_as(&q)
            .bind(tenant.to_owned())
            .bind(session.to_string())
            .fetch_all(self.pool())
            .await
            .read("failed to list live links", "malformed live link")
    }

    /// Revokes link `id` of `tenant`'s `session` if it is not yet;
    /// answers whether it was this call that revoked it.
    pub async fn live_link_revoke(
        &self,
        tenant: &str,
        session: &SessionId,
        id: &LiveLinkId,
        now: i64,
    ) -> anyhow::Result<bool> {
        let done = sqlx::query(
            "UPDATE live_links SET revoked_at = $1 WHERE id = $2 AND tenant_id = $3 \
             AND session_id = $4 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(id.to_string())
        .bind(tenant.to_owned())
        .bind(session.to_string())
        .execute(self.pool())
        .await
        .context("failed to revoke a live link")?;
        Ok(done.rows_affected() > 0)
    }

    /// Removes the links that ended (expired or revoked) before `cutoff`:
    /// they open nothing, and their issue and revocation stay in the audit
    /// log. Answers how many went.
    pub async fn live_links_prune(&self, cutoff: i64) -> anyhow::Result<u64> {
        let done = sqlx::query("DELETE FROM live_links WHERE expires_at < $1 OR revoked_at < $1")
            .bind(cutoff)
            .execute(self.pool())
            .await
            .context("failed to prune live links")?;
        Ok(done.rows_affected())
    }
}
