//! Session and sandbox rows (both backends).

use anyhow::Context;
use sqlx::Row;

use super::column::ReadContext;
use super::{DatabaseKind, Store};
use crate::domain::{CloseReason, SandboxId, SessionId, SessionState};
use crate::time::now_ms;

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    /// `s_…`.
    pub id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The API key that opened it.
    pub api_key_id: Option<String>,
    /// Where it is in its lifecycle.
    pub state: SessionState,
    /// Why it ended.
    pub close_reason: Option<CloseReason>,
    /// A failure's message.
    pub error: Option<String>,
    /// `clean` or `operator`.
    pub credential_mode: String,
    /// JSON array of domains.
    pub domains: String,
    /// `off`, `transient`, `audit`.
    pub record: String,
    /// Viewport width.
    pub viewport_w: i64,
    /// Viewport height.
    pub viewport_h: i64,
    /// The sandbox running it.
    pub sandbox_id: Option<SandboxId>,
    /// The control-plane host that runs it.
    pub host: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub ready_at: Option<i64>,
    /// Unix ms.
    pub closed_at: Option<i64>,
    /// Unix ms.
    pub deadline_at: i64,
    /// Unix ms.
    pub last_activity_at: i64,
}

const SESSION_COLUMNS: &str = "id, tenant_id, api_key_id, state, close_reason, error, credential_mode, domains, record, \
     viewport_w, viewport_h, sandbox_id, host, created_at, ready_at, closed_at, deadline_at, last_activity_at";

/// A sandbox as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SandboxRow {
    /// `b_…`.
    pub id: SandboxId,
    /// Driver name.
    pub driver: String,
    /// Host it runs on.
    pub host: String,
    /// Process group id on that host.
    pub pid: Option<i64>,
    /// Command-line marker guarding against pid reuse.
    pub marker: String,
    /// `starting`, `warm`, `assigned`, `stopped`.
    pub state: String,
    /// The session it serves.
    pub session_id: Option<String>,
    /// Its CDP endpoint, once known.
    pub cdp_url: Option<String>,
}

/// The insert of one session row.
fn insert_query(
    s: &SessionRow,
) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments<'static>> {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
        )
    });
    sqlx::query(SQL.as_str())
        .bind(s.id.clone())
        .bind(s.tenant_id.clone())
        .bind(s.api_key_id.clone())
        .bind(s.state.as_str())
        .bind(s.close_reason.map(CloseReason::as_str))
        .bind(s.error.clone())
        .bind(s.credential_mode.clone())
        .bind(s.domains.clone())
        .bind(s.record.clone())
        .bind(s.viewport_w)
        .bind(s.viewport_h)
        .bind(s.sandbox_id.as_ref().map(SandboxId::to_string))
        .bind(s.host.clone())
        .bind(s.created_at)
        .bind(s.ready_at)
        .bind(s.closed_at)
        .bind(s.deadline_at)
        .bind(s.last_activity_at)
}

impl Store {
    /// Inserts a new session row unless its tenant already has `max` sessions
    /// not ended, counted over every replica: the count and the insert are
    /// one transaction, serialised per tenant (PostgreSQL: an advisory lock
    /// on the tenant until commit; SQLite: the database's write lock).
    /// False (and nothing written) when the tenant is at its limit.
    pub async fn session_insert_limited(&self, s: &SessionRow, max: usize) -> anyhow::Result<bool> {
        let mut tx = self
            .pool()
            .begin()
            .await
            .context("failed to begin session insert")?;
        match self.kind {
            DatabaseKind::Postgres => {
                sqlx::query("SELECT pg_advisory_xact_lock(4242002, hashtext($1))::text")
                    .bind(s.tenant_id.clone())
                    .execute(&mut *tx)
                    .await
                    .context("failed to lock the tenant's session count")?;
            }
            // A write first, so the transaction holds the write lock before
            // it counts.
            DatabaseKind::Sqlite => {
                sqlx::query("UPDATE tenants SET name = name WHERE id = $1")
                    .bind(s.tenant_id.clone())
                    .execute(&mut *tx)
                    .await
                    .context("failed to lock the tenant's session count")?;
            }
        }
        let open: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions WHERE tenant_id = $1 AND state NOT IN ('closed', 'failed')",
        )
        .bind(s.tenant_id.clone())
        .fetch_one(&mut *tx)
        .await
        .context("failed to count the tenant's sessions")?;
        if usize::try_from(open).unwrap_or(usize::MAX) >= max {
            tx.rollback()
                .await
                .context("failed to end session insert")?;
            return Ok(false);
        }
        insert_query(s)
            .execute(&mut *tx)
            .await
            .context("failed to insert session")?;
        tx.commit()
            .await
            .context("failed to commit session insert")?;
        self.changes.publish(crate::events::Topic::Sessions);
        Ok(true)
    }

    /// Marks a starting session ready on `sandbox_id`.
    pub async fn session_ready(
        &self,
        id: &SessionId,
        sandbox_id: &SandboxId,
    ) -> anyhow::Result<()> {
        let now = now_ms();
        sqlx::query("UPDATE sessions SET state = 'ready', sandbox_id = $1, ready_at = $2, last_activity_at = $2 WHERE id = $3 AND state = 'starting'")
            .bind(sandbox_id.to_string())
            .bind(now)
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to mark session ready")?;
        self.changes.publish(crate::events::Topic::Sessions);
        Ok(())
    }

    /// Moves a live session to `closing`; false if it already ended.
    pub async fn session_closing(&self, id: &SessionId) -> anyhow::Result<bool> {
        let res = sqlx::query("UPDATE sessions SET state = 'closing' WHERE id = $1 AND state IN ('starting', 'ready')")
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to mark session closing")?;
        self.changes.publish(crate::events::Topic::Sessions);
        Ok(res.rows_affected() == 1)
    }

    /// Ends a session as `closed` or `failed` (once; later calls change nothing).
    pub async fn session_end(
        &self,
        id: &SessionId,
        failed: bool,
        reason: CloseReason,
        error: Option<&str>,
        last_activity_at: i64,
    ) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE sessions SET state = $1, close_reason = $2, error = $3, closed_at = $4, last_activity_at = $5 \
             WHERE id = $6 AND state NOT IN ('closed', 'failed')",
        )
        .bind(if failed {
            SessionState::Failed
        } else {
            SessionState::Closed
        }
        .as_str())
        .bind(reason.as_str())
        .bind(error.map(str::to_owned))
        .bind(now_ms())
        .bind(last_activity_at)
        .bind(id.to_string())
        .execute(self.pool())
        .await
        .context("failed to end session")?;
        self.changes.publish(crate::events::Topic::Sessions);
        Ok(res.rows_affected() == 1)
    }

    /// One session of one tenant.
    pub async fn session_get(
        &self,
        tenant_id: &str,
        id: &SessionId,
    ) -> anyhow::Result<Option<SessionRow>> {
        sqlx::query_as(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1 AND tenant_id = $2"
        ))
        .bind(id.to_string())
        .bind(tenant_id.to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to read session", "malformed session row")
    }

    /// One session, whichever tenant's (the dashboard's view).
    pub async fn session_find(&self, id: &SessionId) -> anyhow::Result<Option<SessionRow>> {
        sqlx::query_as(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"
        ))
        .bind(id.to_string())
        .fetch_optional(self.pool())
        .await
        .read("failed to read session", "malformed session row")
    }

    /// Sessions for the dashboard, newest first: of one tenant or all, in
    /// one state or (with `None`) not ended yet.
    pub async fn session_list_filtered(
        &self,
        tenants: Option<&[String]>,
        state: Option<SessionState>,
        limit: i64,
    ) -> anyhow::Result<Vec<SessionRow>> {
        let mut sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE ");
        let mut binds: Vec<String> = Vec::new();
        match state {
            Some(s) => {
                binds.push(s.as_str().to_owned());
                sql.push_str("state = $1");
            }
            None => sql.push_str("state IN ('starting', 'ready', 'closing')"),
        }
        if let Some(ts) = tenants {
            sql.push_str(" AND ");
            sql.push_str(&super::tenant_in(ts, 0, &mut binds));
        }
        sql.push_str(&format!(
            " ORDER BY created_at DESC, id LIMIT ${}",
            binds.len() + 1
        ));
        let mut q = sqlx::query_as(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.bind(limit)
            .fetch_all(self.pool())
            .await
            .read("failed to list sessions", "malformed session row")
    }

    /// Sessions by state (not ended), and how many ended since `since`.
    /// `tenants`: only theirs (`None`: every tenant's).
    pub async fn session_counts(
        &self,
        since: i64,
        tenants: Option<&[String]>,
    ) -> anyhow::Result<Vec<(String, i64)>> {
        let mut binds = Vec::new();
        // `$1` is `since`.
        let scope = match tenants {
            Some(ts) => format!(" AND {}", super::tenant_in(ts, 1, &mut binds)),
            None => String::new(),
        };
        let sql = format!(
            "SELECT state, COUNT(*) AS n FROM sessions \
             WHERE (state IN ('starting', 'ready', 'closing') OR closed_at >= $1){scope} \
             GROUP BY state ORDER BY state"
        );
        let mut q = sqlx::query_as(&sql).bind(since);
        for b in binds {
            q = q.bind(b);
        }
        q.fetch_all(self.pool())
            .await
            .read("failed to count sessions", "malformed session count row")
    }

    /// Sessions not ended, per replica (`host`).
    pub async fn sessions_running_by_host(&self) -> anyhow::Result<Vec<(String, i64)>> {
        sqlx::query_as(
            "SELECT host, COUNT(*) AS n FROM sessions \
             WHERE state IN ('starting', 'ready', 'closing') GROUP BY host",
        )
        .fetch_all(self.pool())
        .await
        .read(
            "failed to count sessions per replica",
            "malformed session count row",
        )
    }

    /// Per session: tool calls audited and the last audited action.
    pub async fn session_activity(
        &self,
        ids: &[SessionId],
    ) -> anyhow::Result<std::collections::HashMap<String, (i64, Option<String>)>> {
        let mut out = std::collections::HashMap::new();
        for id in ids {
            let row = sqlx::query(
                "SELECT \
                 (SELECT COUNT(*) FROM audit_events WHERE session_id = $1 AND action LIKE 'tool.%' \
                  AND outcome = 'requested') AS calls, \
                 (SELECT action FROM audit_events WHERE session_id = $2 ORDER BY seq DESC LIMIT 1) AS last",
            )
            .bind(id.to_string())
            .bind(id.to_string())
            .fetch_one(self.pool())
            .await
            .context("failed to read session activity")?;
            out.insert(
                id.to_string(),
                (row.try_get("calls")?, row.try_get("last")?),
            );
        }
        Ok(out)
    }

    /// A session's audit trail, oldest first (at most `limit` events).
    pub async fn audit_of_session(
        &self,
        session: &SessionId,
        limit: i64,
    ) -> anyhow::Result<Vec<crate::domain::audit::Event>> {
        sqlx::query_as(&format!(
            "SELECT {} FROM audit_events WHERE session_id = $1 ORDER BY seq LIMIT $2",
            super::audit::COLUMNS
        ))
        .bind(session.to_string())
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .read(
            "failed to read the session's audit trail",
            "malformed audit row",
        )
    }

    /// A tenant's sessions, newest first.
    pub async fn session_list(
        &self,
        tenant_id: &str,
        limit: i64,
    ) -> anyhow::Result<Vec<SessionRow>> {
        sqlx::query_as(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = $1 AND credential_mode <> 'refresh' \
             ORDER BY created_at DESC, id LIMIT $2"
        ))
        .bind(tenant_id.to_owned())
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .read("failed to list sessions", "malformed session row")
    }

    /// Sessions on `host` that have not ended.
    pub async fn sessions_unended_on(&self, host: &str) -> anyhow::Result<Vec<SessionRow>> {
        sqlx::query_as(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE host = $1 AND state NOT IN ('closed', 'failed')"
        ))
        .bind(host.to_owned())
        .fetch_all(self.pool())
        .await
        .read("failed to list live sessions", "malformed session row")
    }

    /// Records a started sandbox.
    pub async fn sandbox_insert(&self, row: &SandboxRow, cdp_url: &str) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO sandboxes (id, driver, host, pid, marker, cdp_url, state, session_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(row.id.to_string())
        .bind(row.driver.clone())
        .bind(row.host.clone())
        .bind(row.pid)
        .bind(row.marker.clone())
        .bind(cdp_url.to_owned())
        .bind(row.state.clone())
        .bind(row.session_id.clone())
        .bind(now_ms())
        .execute(self.pool())
        .await
        .context("failed to insert sandbox")?;
        Ok(())
    }

    /// Assigns a sandbox to a session.
    pub async fn sandbox_assign(
        &self,
        id: &SandboxId,
        session_id: &SessionId,
    ) -> anyhow::Result<()> {
        sqlx::query("UPDATE sandboxes SET state = 'assigned', session_id = $1 WHERE id = $2")
            .bind(session_id.to_string())
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to assign sandbox")?;
        Ok(())
    }

    /// Marks a sandbox stopped.
    pub async fn sandbox_stopped(&self, id: &SandboxId) -> anyhow::Result<()> {
        sqlx::query("UPDATE sandboxes SET state = 'stopped', stopped_at = $1 WHERE id = $2 AND state <> 'stopped'")
            .bind(now_ms())
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to mark sandbox stopped")?;
        Ok(())
    }

    /// The ids of every sandbox not yet stopped, on any replica (what an
    /// engine-wide sweep keeps).
    pub async fn sandbox_ids_unstopped(&self) -> anyhow::Result<Vec<String>> {
        sqlx::query_scalar("SELECT id FROM sandboxes WHERE state <> 'stopped'")
            .fetch_all(self.pool())
            .await
            .context("failed to list sandboxes")
    }

    /// Sandboxes on `host` not yet stopped.
    pub async fn sandboxes_unstopped_on(&self, host: &str) -> anyhow::Result<Vec<SandboxRow>> {
        sqlx::query_as(
            "SELECT id, driver, host, pid, marker, state, session_id, cdp_url FROM sandboxes WHERE host = $1 AND state <> 'stopped'",
        )
        .bind(host.to_owned())
        .fetch_all(self.pool())
        .await
        .read("failed to list sandboxes", "malformed sandbox row")
    }
}
