//! Audit queries (both backends).

use anyhow::Context;
use sqlx::Row;

use super::Store;
use super::column::ReadContext;
use crate::domain::audit::{Event, NewEvent, canonical_params, chain_hash};

/// Every column of `audit_events`, in [`Event`]'s order.
pub(super) const COLUMNS: &str =
    "seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash";

impl Store {
    /// Appends an event to the chain and returns it as stored. Appends are
    /// serialised: in this process by a mutex, across processes by the
    /// database's write lock (SQLite) or the row lock the first `UPDATE
    /// audit_head` takes (PostgreSQL), so the chain never forks.
    ///
    /// On SQLite the mutex also keeps the head this process last wrote or
    /// read. An append then links to it without reading it first: one
    /// call to SQLite's thread instead of four, in one transaction that
    /// writes only if the head in the database is still that one. When
    /// another process (the CLI) appended meanwhile, nothing is written,
    /// and the append reads the head as on PostgreSQL.
    #[tracing::instrument(skip_all, fields(audit.action = %event.action))]
    pub async fn audit_append(&self, event: NewEvent) -> anyhow::Result<Event> {
        let params = canonical_params(&event.params);
        let mut head = self.audit_lock.lock().await;
        if let Some(stored) = self.append_at_head(&mut head, &event, &params).await? {
            return Ok(stored);
        }
        self.append_reading_head(&mut head, event, params).await
    }

    /// The append linked to `head` (SQLite), in one call: `None`, and no
    /// head, when there is none or the database's is no longer that one.
    /// Unless the call finishes, its connection is closed, not pooled: a
    /// call that failed, or whose caller gave up (its client gone) between
    /// `BEGIN` and `COMMIT`, leaves no transaction open on a connection
    /// (an in-memory database, one connection, is lost with it: it is for
    /// tests only). The append that reads the head may be stopped anywhere:
    /// its transaction rolls back when dropped.
    async fn append_at_head(
        &self,
        head: &mut Option<AuditHead>,
        event: &NewEvent,
        params: &str,
    ) -> anyhow::Result<Option<Event>> {
        let Some(prev) = head.take() else {
            return Ok(None);
        };
        let stored = chained(
            prev.seq,
            prev.hash,
            prev.ts,
            event.clone(),
            params.to_owned(),
        );
        // Both writes are conditional on the head they link to; the
        // `RETURNING` row says they were made.
        const APPEND_AT_HEAD: &str = "BEGIN IMMEDIATE; \
             INSERT INTO audit_events (seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 \
             WHERE EXISTS (SELECT 1 FROM audit_head WHERE id = 1 AND seq = $1 - 1 AND hash = $9); \
             UPDATE audit_head SET seq = $1, hash = $10 WHERE id = 1 AND seq = $1 - 1 AND hash = $9 RETURNING seq; \
             COMMIT";
        let mut conn = self
            .pool()
            .acquire()
            .await
            .context("failed to begin audit append")?;
        let unfinished = ClosedUnlessDone(&mut conn);
        let written = bind_event(sqlx::query(APPEND_AT_HEAD), &stored)
            .fetch_all(&mut **unfinished.0)
            .await
            .context("failed to insert audit event")?;
        std::mem::forget(unfinished);
        if written.is_empty() {
            return Ok(None);
        }
        *head = Some(AuditHead::of(&stored));
        self.appended(&stored);
        Ok(Some(stored))
    }

    /// What follows an append: the counter, and the dashboard's notices.
    fn appended(&self, stored: &Event) {
        metrics::counter!("cordon_audit_events_total").increment(1);
        self.changes.publish(crate::events::Topic::Audit);
        if let Some(topic) = crate::events::Topic::of_action(&stored.action) {
            self.changes.publish(topic);
        }
    }

    /// The append after reading the head, in a transaction that locks it
    /// first. Leaves `head` at the new event on SQLite, else `None`.
    async fn append_reading_head(
        &self,
        head: &mut Option<AuditHead>,
        event: NewEvent,
        params: String,
    ) -> anyhow::Result<Event> {
        *head = None;
        let mut tx = self
            .pool()
            .begin()
            .await
            .context("failed to begin audit append")?;
        // A write first, so SQLite takes its write lock before reading the head
        // and PostgreSQL locks the head row until commit.
        //
        // Time never goes backwards along the chain (a clock stepped back,
        // or another replica's clock behind, repeats the previous event's
        // time), so a time range is a seq range (`audit_query`). On SQLite
        // the previous event's time comes back with the lock: one hand-off
        // to its thread less per append, and the transaction reads one
        // snapshot throughout. Not on PostgreSQL: a subquery there reads
        // the statement's snapshot, taken before it waited for the lock, so
        // it would miss the event another replica appended meanwhile; its
        // own statement afterwards sees it.
        let sqlite = self.kind() == crate::domain::DatabaseKind::Sqlite;
        let row = sqlx::query(if sqlite {
            "UPDATE audit_head SET seq = seq WHERE id = 1 \
             RETURNING seq, hash, (SELECT ts FROM audit_events WHERE seq = audit_head.seq) AS prev_ts"
        } else {
            "UPDATE audit_head SET seq = seq WHERE id = 1 RETURNING seq, hash"
        })
        .fetch_one(&mut *tx)
        .await
        .context("failed to lock the audit head")?;
        let prev_seq: i64 = row.try_get("seq")?;
        let prev_hash: String = row.try_get("hash")?;
        let prev_ts: Option<i64> = if sqlite {
            row.try_get("prev_ts")
                .context("failed to read the previous audit event's time")?
        } else {
            sqlx::query_scalar("SELECT ts FROM audit_events WHERE seq = $1")
                .bind(prev_seq)
                .fetch_optional(&mut *tx)
                .await
                .context("failed to read the previous audit event's time")?
        };
        let stored = chained(prev_seq, prev_hash, prev_ts, event, params);
        // On SQLite the head moves in the same call as the insert (its
        // driver runs each statement of a call with the call's binds, by
        // number): one hand-off to its thread less per append.
        const INSERT: &str = "INSERT INTO audit_events (seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
        const INSERT_AND_MOVE: &str = "INSERT INTO audit_events (seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10); \
             UPDATE audit_head SET seq = $1, hash = $10 WHERE id = 1";
        bind_event(
            sqlx::query(if sqlite { INSERT_AND_MOVE } else { INSERT }),
            &stored,
        )
        .execute(&mut *tx)
        .await
        .context("failed to insert audit event")?;
        if !sqlite {
            sqlx::query("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1")
                .bind(stored.seq)
                .bind(&stored.hash)
                .execute(&mut *tx)
                .await
                .context("failed to move the audit head")?;
        }
        tx.commit().await.context("failed to commit audit append")?;
        if sqlite {
            *head = Some(AuditHead::of(&stored));
        }
        self.appended(&stored);
        Ok(stored)
    }

    /// Up to `limit` events with `seq > after`, in seq order.
    pub async fn audit_page(&self, after: i64, limit: i64) -> anyhow::Result<Vec<Event>> {
        sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM audit_events WHERE seq > $1 ORDER BY seq LIMIT $2"
        ))
        .bind(after)
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .read("failed to read audit events", "malformed audit row")
    }

    /// The newest `limit` events, newest first, optionally for one tenant.
    pub async fn audit_recent(
        &self,
        tenant: Option<&str>,
        limit: i64,
    ) -> anyhow::Result<Vec<Event>> {
        match tenant {
            Some(t) => sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM audit_events WHERE tenant_id = $1 ORDER BY seq DESC LIMIT $2"
            ))
            .bind(t.to_owned())
            .bind(limit)
            .fetch_all(self.pool())
            .await,
            None => {
                sqlx::query_as(&format!(
                    "SELECT {COLUMNS} FROM audit_events ORDER BY seq DESC LIMIT $1"
                ))
                .bind(limit)
                .fetch_all(self.pool())
                .await
            }
        }
        .read("failed to read audit events", "malformed audit row")
    }

    /// How many events name one of `tenants`.
    pub async fn audit_count_in(&self, tenants: &[String]) -> anyhow::Result<i64> {
        let mut binds = Vec::new();
        let sql = format!(
            "SELECT COUNT(*) AS n FROM audit_events WHERE {}",
            super::tenant_in(tenants, 0, &mut binds)
        );
        let mut q = sqlx::query(&sql);
        for b in binds {
            q = q.bind(b);
        }
        let row = q
            .fetch_one(self.pool())
            .await
            .context("failed to count audit events")?;
        Ok(row.try_get("n")?)
    }

    /// The tenant an event names, if any (`None` also for no such event).
    pub async fn audit_tenant_of(&self, seq: i64) -> anyhow::Result<Option<String>> {
        let row = sqlx::query("SELECT tenant_id FROM audit_events WHERE seq = $1")
            .bind(seq)
            .fetch_optional(self.pool())
            .await
            .context("failed to read an audit event")?;
        Ok(row.and_then(|r| r.try_get("tenant_id").ok()).flatten())
    }

    /// The head: `(seq, hash)` of the last appended event.
    pub async fn audit_head(&self) -> anyhow::Result<(i64, String)> {
        let row = sqlx::query("SELECT seq, hash FROM audit_head WHERE id = 1")
            .fetch_one(self.pool())
            .await
            .context("failed to read the audit head")?;
        Ok((row.try_get("seq")?, row.try_get("hash")?))
    }
}

/// Marks a pooled connection to be closed, not returned to the pool, if
/// this is dropped: by an error, a panic or a drop part-way through a call
/// that opened a transaction. (sqlx's SQLite thread stops a call whose
/// caller is gone after the statement it is on; closing the connection
/// then rolls back what it began.) A call that finished forgets it.
struct ClosedUnlessDone<'c>(&'c mut sqlx::pool::PoolConnection<sqlx::Any>);

impl Drop for ClosedUnlessDone<'_> {
    fn drop(&mut self) {
        self.0.close_on_drop();
    }
}

/// The head of the chain as this process last wrote or read it: where its
/// next append links on SQLite ([`Store::audit_append`]).
#[derive(Debug, Clone)]
pub(super) struct AuditHead {
    seq: i64,
    hash: String,
    ts: Option<i64>,
}

impl AuditHead {
    fn of(event: &Event) -> Self {
        Self {
            seq: event.seq,
            hash: event.hash.clone(),
            ts: Some(event.ts),
        }
    }
}

/// `event` as the next link after the event `prev_seq` (hash `prev_hash`,
/// time `prev_ts`): its time never before the previous one's.
fn chained(
    prev_seq: i64,
    prev_hash: String,
    prev_ts: Option<i64>,
    event: NewEvent,
    params: String,
) -> Event {
    let mut stored = Event {
        seq: prev_seq + 1,
        ts: crate::time::now_ms().max(prev_ts.unwrap_or(i64::MIN)),
        tenant: event.tenant.map(String::from),
        session: event.session,
        actor: event.actor.as_stored(),
        action: event.action,
        params,
        outcome: event.outcome,
        prev_hash,
        hash: String::new(),
    };
    stored.hash = chain_hash(&stored.prev_hash, &stored.canonical_bytes());
    stored
}

/// An insert's ten binds, `$1`–`$10`, in [`COLUMNS`]' order.
fn bind_event<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    e: &'q Event,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    query
        .bind(e.seq)
        .bind(e.ts)
        .bind(e.tenant.clone())
        .bind(e.session.clone())
        .bind(&e.actor)
        .bind(&e.action)
        .bind(&e.params)
        .bind(&e.outcome)
        .bind(&e.prev_hash)
        .bind(&e.hash)
}
