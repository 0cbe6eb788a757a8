//! Grant requests and grant tokens (both backends). Only a token's SHA-256
//! is stored; the rules are `crate::grants`'.

use anyhow::Context;

use super::Store;
use super::column::{Flag, ReadContext};
use crate::domain::{GrantRequestId, GrantState, GrantTokenId};

/// An agent's request for credentials of some domains.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GrantRequestRow {
    /// `gr_…`.
    pub id: String,
    /// The requesting tenant.
    pub tenant_id: String,
    /// The requesting API key.
    pub api_key_id: Option<String>,
    /// JSON array of exact hosts.
    pub domains: String,
    /// Why (free text from the agent).
    pub reason: String,
    /// `pending`, `approved`, `denied`, `expired`.
    pub state: GrantState,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the decision.
    pub decided_at: Option<i64>,
    /// Who decided (`cli`, `operator:…`).
    pub decided_by: Option<String>,
    /// Whether the agent asked for CDP access with these logins.
    #[sqlx(try_from = "Flag")]
    pub cdp: bool,
    /// Whether the agent asked Cordon to type TOTP codes (`type_totp`).
    #[sqlx(try_from = "Flag")]
    pub totp: bool,
}

/// A token's row (never the token).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GrantTokenRow {
    /// `gt_…`: the token's public id.
    pub jti: String,
    /// The tenant it is for.
    pub tenant_id: String,
    /// The request it answers.
    pub request_id: String,
    /// JSON array of exact hosts.
    pub allowed_domains: String,
    /// Unix ms.
    pub issued_at: i64,
    /// Unix ms.
    pub expires_at: i64,
    /// Whether the first successful use consumes it.
    #[sqlx(try_from = "Flag")]
    pub single_use: bool,
    /// Unix ms the requester collected it, if yet.
    pub delivered_at: Option<i64>,
    /// Unix ms it was used, if single-use and used.
    pub consumed_at: Option<i64>,
    /// Unix ms it was revoked.
    pub revoked_at: Option<i64>,
}

const REQ_COLUMNS: &str = "id, tenant_id, api_key_id, domains, reason, state, created_at, decided_at, decided_by, cdp, totp";
const TOKEN_COLUMNS: &str = "jti, tenant_id, request_id, allowed_domains, issued_at, expires_at, \
     single_use, delivered_at, consumed_at, revoked_at";

/// Which grant requests [`Store::grant_request_list`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestsWhich {
    /// Waiting for an operator.
    Pending,
    /// Approved or denied.
    Decided,
    /// Both.
    All,
}

/// `q` with a request's columns bound as `$1` to `$11`, in
/// [`REQ_COLUMNS`]' order.
fn bind_request<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    r: &GrantRequestRow,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    q.bind(r.id.clone())
        .bind(r.tenant_id.clone())
        .bind(r.api_key_id.clone())
        .bind(r.domains.clone())
        .bind(r.reason.clone())
        .bind(r.state.as_str())
        .bind(r.created_at)
        .bind(r.decided_at)
        .bind(r.decided_by.clone())
        .bind(i64::from(r.cdp))
        .bind(i64::from(r.totp))
}

impl Store {
    /// Inserts a pending request.
    pub async fn grant_request_insert(&self, r: &GrantRequestRow) -> anyhow::Result<()> {
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "INSERT INTO grant_requests ({REQ_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            )
        });
        bind_request(sqlx::query(SQL.as_str()), r)
            .execute(self.pool())
            .await
            .context("failed to insert grant request")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(())
    }

    /// Inserts a pending request unless its key already has `per_key`
    /// pending or its tenant `per_tenant`: false then, and nothing
    /// written. The counts and the insert are one statement in a
    /// transaction serialised per tenant (PostgreSQL: an advisory lock on
    /// the tenant until commit; SQLite: the database's write lock, taken by
    /// the statement before it counts), so racing requests cannot pass
    /// the caps.
    pub async fn grant_request_insert_within(
        &self,
        r: &GrantRequestRow,
        per_key: i64,
        per_tenant: i64,
    ) -> anyhow::Result<bool> {
        let mut tx = self
            .pool()
            .begin()
            .await
            .context("failed to insert grant request")?;
        if self.kind == super::DatabaseKind::Postgres {
            sqlx::query("SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS locked")
                .bind(format!("grant_requests:{}", r.tenant_id))
                .execute(&mut *tx)
                .await
                .context("failed to lock a tenant's grant requests")?;
        }
        static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
            format!(
                "INSERT INTO grant_requests ({REQ_COLUMNS}) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 \
                 WHERE (SELECT COUNT(*) FROM grant_requests WHERE tenant_id = $2 AND state = 'pending') < $12 \
                 AND (SELECT COUNT(*) FROM grant_requests WHERE tenant_id = $2 AND api_key_id = $3 \
                 AND state = 'pending') < $13"
            )
        });
        let done = bind_request(sqlx::query(SQL.as_str()), r)
            .bind(per_tenant)
            .bind(per_key)
            .execute(&mut *tx)
            .await
            .context("failed to insert grant request")?;
        tx.commit()
            .await
            .context("failed to insert grant request")?;
        let inserted = done.rows_affected() == 1;
        if inserted {
            self.changes.publish(crate::events::Topic::Grants);
        }
        Ok(inserted)
    }

    /// One request.
    pub async fn grant_request_get(
        &self,
        id: &GrantRequestId,
    ) -> anyhow::Result<Option<GrantRequestRow>> {
        sqlx::query_as(&format!(
            "SELECT {REQ_COLUMNS} FROM grant_requests WHERE id = $1"
        ))
        .bind(id.to_string())
        .fetch_optional(self.pool())
        .await
        .read(
            "failed to read grant request",
            "malformed grant request row",
        )
    }

    /// Requests of `tenants` (all when `None`), newest first: pending
    /// ones, decided ones, or both; at most `limit`. Scoped in the query,
    /// so another tenant's many requests never push these out of it.
    pub async fn grant_request_list(
        &self,
        tenants: Option<&[String]>,
        which: RequestsWhich,
        limit: i64,
    ) -> anyhow::Result<Vec<GrantRequestRow>> {
        let mut binds = Vec::new();
        let mut clauses = Vec::new();
        if let Some(ts) = tenants {
            clauses.push(super::tenant_in(ts, 0, &mut binds));
        }
        match which {
            RequestsWhich::Pending => clauses.push("state = 'pending'".to_owned()),
            RequestsWhich::Decided => clauses.push("state <> 'pending'".to_owned()),
            RequestsWhich::All => {}
        }
        let filter = if clauses.is_empty() {
            String::new()
        } else {
            format!("WHERE {} ", clauses.join(" AND "))
        };
        let sql = format!(
            "SELECT {REQ_COLUMNS} FROM grant_requests {filter}ORDER BY created_at DESC, id LIMIT ${}",
            binds.len() + 1
        );
        let mut q = sqlx::query_as(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.bind(limit).fetch_all(self.pool()).await.read(
            "failed to list grant requests",
            "malformed grant request row",
        )
    }

    /// How many requests of `tenants` (all when `None`) wait.
    pub async fn grant_requests_waiting(&self, tenants: Option<&[String]>) -> anyhow::Result<i64> {
        let mut binds = Vec::new();
        let scope = match tenants {
            Some(ts) => format!("AND {}", super::tenant_in(ts, 0, &mut binds)),
            None => String::new(),
        };
        let sql = format!("SELECT COUNT(*) FROM grant_requests WHERE state = 'pending' {scope}");
        let mut q = sqlx::query_as::<_, (i64,)>(&sql);
        for b in binds {
            q = q.bind(b);
        }
        let (n,) = q
            .fetch_one(self.pool())
            .await
            .context("failed to count waiting grant requests")?;
        Ok(n)
    }

    /// Pending requests of a tenant, and of one of its keys.
    pub async fn grant_requests_pending(
        &self,
        tenant: &str,
        key: &str,
    ) -> anyhow::Result<(i64, i64)> {
        let row: (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), COALESCE(SUM(CASE WHEN api_key_id = $2 THEN 1 ELSE 0 END), 0) \
             FROM grant_requests WHERE tenant_id = $1 AND state = 'pending'",
        )
        .bind(tenant.to_owned())
        .bind(key.to_owned())
        .fetch_one(self.pool())
        .await
        .context("failed to count pending grant requests")?;
        Ok(row)
    }

    /// Approves a pending request and creates its token row (without a
    /// hash: the token is made when the requester collects it). False if
    /// the request is not pending.
    pub async fn grant_approve(
        &self,
        request_id: &GrantRequestId,
        decided_by: &str,
        token: &GrantTokenRow,
    ) -> anyhow::Result<bool> {
        let mut tx = self.pool().begin().await.context("begin")?;
        let res = sqlx::query(
            "UPDATE grant_requests SET state = 'approved', decided_at = $1, decided_by = $2 \
             WHERE id = $3 AND state = 'pending'",
        )
        .bind(token.issued_at)
        .bind(decided_by.to_owned())
        .bind(request_id.to_string())
        .execute(&mut *tx)
        .await
        .context("failed to approve grant request")?;
        if res.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(&format!(
            "INSERT INTO grant_tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(token.jti.clone())
        .bind(token.tenant_id.clone())
        .bind(token.request_id.clone())
        .bind(token.allowed_domains.clone())
        .bind(token.issued_at)
        .bind(token.expires_at)
        .bind(i64::from(token.single_use))
        .bind(token.delivered_at)
        .bind(token.consumed_at)
        .bind(token.revoked_at)
        .execute(&mut *tx)
        .await
        .context("failed to insert grant token")?;
        tx.commit().await.context("commit")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(true)
    }

    /// Denies a pending request; false if it is not pending.
    pub async fn grant_deny(
        &self,
        request_id: &GrantRequestId,
        decided_by: &str,
        now: i64,
    ) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE grant_requests SET state = 'denied', decided_at = $1, decided_by = $2 \
             WHERE id = $3 AND state = 'pending'",
        )
        .bind(now)
        .bind(decided_by.to_owned())
        .bind(request_id.to_string())
        .execute(self.pool())
        .await
        .context("failed to deny grant request")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(res.rows_affected() == 1)
    }

    /// Tokens, newest first (at most `limit`).
    /// `tenants`: only theirs (`None`: every tenant's).
    pub async fn grant_token_list(
        &self,
        tenants: Option<&[String]>,
        limit: i64,
    ) -> anyhow::Result<Vec<GrantTokenRow>> {
        let mut binds = Vec::new();
        let scope = match tenants {
            Some(ts) => format!("WHERE {} ", super::tenant_in(ts, 0, &mut binds)),
            None => String::new(),
        };
        let sql = format!(
            "SELECT {TOKEN_COLUMNS} FROM grant_tokens {scope}ORDER BY issued_at DESC, jti LIMIT ${}",
            binds.len() + 1
        );
        let mut q = sqlx::query_as(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.bind(limit)
            .fetch_all(self.pool())
            .await
            .read("failed to list grant tokens", "malformed grant token row")
    }

    /// One token by its id.
    pub async fn grant_token_get(
        &self,
        jti: &GrantTokenId,
    ) -> anyhow::Result<Option<GrantTokenRow>> {
        sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM grant_tokens WHERE jti = $1"
        ))
        .bind(jti.to_string())
        .fetch_optional(self.pool())
        .await
        .read("failed to read grant token", "malformed grant token row")
    }

    /// The token row answering a request.
    pub async fn grant_token_of_request(
        &self,
        request_id: &GrantRequestId,
    ) -> anyhow::Result<Option<GrantTokenRow>> {
        sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM grant_tokens WHERE request_id = $1"
        ))
        .bind(request_id.to_string())
        .fetch_optional(self.pool())
        .await
        .read("failed to read grant token", "malformed grant token row")
    }

    /// Records the hash of the token being handed out now; false if it was
    /// handed out before (so it is handed out once, even to racing polls).
    pub async fn grant_token_deliver(
        &self,
        jti: &GrantTokenId,
        token_hash: &str,
        now: i64,
    ) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE grant_tokens SET token_hash = $1, delivered_at = $2 \
             WHERE jti = $3 AND token_hash IS NULL AND revoked_at IS NULL",
        )
        .bind(token_hash.to_owned())
        .bind(now)
        .bind(jti.to_string())
        .execute(self.pool())
        .await
        .context("failed to record grant token delivery")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(res.rows_affected() == 1)
    }

    /// The token with this hash.
    pub async fn grant_token_by_hash(
        &self,
        token_hash: &str,
    ) -> anyhow::Result<Option<GrantTokenRow>> {
        sqlx::query_as(&format!(
            "SELECT {TOKEN_COLUMNS} FROM grant_tokens WHERE token_hash = $1"
        ))
        .bind(token_hash.to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to look up grant token", "malformed grant token row")
    }

    /// Consumes a single-use token atomically; true for exactly one caller
    /// while it is live.
    pub async fn grant_token_consume(&self, token_hash: &str, now: i64) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE grant_tokens SET consumed_at = $1 WHERE token_hash = $2 \
             AND consumed_at IS NULL AND revoked_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(token_hash.to_owned())
        .execute(self.pool())
        .await
        .context("failed to consume grant token")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(res.rows_affected() == 1)
    }

    /// Revokes a token by id; false if unknown or already revoked.
    pub async fn grant_token_revoke(&self, jti: &GrantTokenId, now: i64) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE grant_tokens SET revoked_at = $1 WHERE jti = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(jti.to_string())
        .execute(self.pool())
        .await
        .context("failed to revoke grant token")?;
        self.changes.publish(crate::events::Topic::Grants);
        Ok(res.rows_affected() == 1)
    }

    /// Test and tooling hook: moves a token's expiry.
    pub async fn grant_token_set_expiry(
        &self,
        jti: &GrantTokenId,
        expires_at: i64,
    ) -> anyhow::Result<()> {
        sqlx::query("UPDATE grant_tokens SET expires_at = $1 WHERE jti = $2")
            .bind(expires_at)
            .bind(jti.to_string())
            .execute(self.pool())
            .await
            .context("failed to set grant token expiry")?;
        Ok(())
    }

    /// Garbage collection: deletes tokens that expired before
    /// `expired_before`, and marks requests still pending since before
    /// `pending_before` expired. Returns (tokens deleted, requests expired).
    pub async fn grant_gc(
        &self,
        expired_before: i64,
        pending_before: i64,
    ) -> anyhow::Result<(u64, u64)> {
        let tokens = sqlx::query("DELETE FROM grant_tokens WHERE expires_at < $1")
            .bind(expired_before)
            .execute(self.pool())
            .await
            .context("failed to delete expired grant tokens")?
            .rows_affected();
        let requests = sqlx::query(
            "UPDATE grant_requests SET state = 'expired' WHERE state = 'pending' AND created_at < $1",
        )
        .bind(pending_before)
        .execute(self.pool())
        .await
        .context("failed to expire grant requests")?
        .rows_affected();
        Ok((tokens, requests))
    }
}
