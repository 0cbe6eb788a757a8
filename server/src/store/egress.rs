//! Egress log queries (both backends).

use anyhow::Context;
use sqlx::Row;

use super::Store;
use super::column::ReadContext;
use crate::domain::SandboxId;

/// What the egress guard decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Connected (the row's byte counts say how much went through).
    Allowed,
    /// Refused before any connection was made.
    Denied,
}

impl Decision {
    /// As stored: `allowed` or `denied`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied => "denied",
        }
    }
}

impl std::str::FromStr for Decision {
    type Err = crate::domain::UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allowed" => Ok(Self::Allowed),
            "denied" => Ok(Self::Denied),
            other => Err(crate::domain::UnknownValue::new("decision", other)),
        }
    }
}

/// A row to append to the egress log.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct NewEgressEntry {
    /// The sandbox whose browser asked.
    pub sandbox_id: String,
    /// Unix milliseconds when the request arrived.
    pub ts: i64,
    /// The host as asked for (a name, or the normalised IP literal); never a URL.
    pub host: String,
    /// The port asked for.
    #[sqlx(try_from = "i64")]
    pub port: u16,
    /// Allowed or denied.
    pub decision: Decision,
    /// Why it was denied (`loopback`, `unresolved` …), or why an allowed
    /// connection failed (`connect_failed`); `None` for a normal connection.
    pub reason: Option<String>,
    /// Bytes sent to the upstream.
    #[sqlx(try_from = "ByteCount")]
    pub bytes_up: u64,
    /// Bytes received from the upstream.
    #[sqlx(try_from = "ByteCount")]
    pub bytes_down: u64,
}

/// A row of the egress log as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EgressEntry {
    /// Its id, increasing in insertion order.
    pub id: i64,
    /// The rest of the row.
    #[sqlx(flatten)]
    pub entry: NewEgressEntry,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A stored byte count (a negative one, which Cordon never writes, reads as 0).
struct ByteCount(u64);

impl sqlx::Type<sqlx::Any> for ByteCount {
    fn type_info() -> sqlx::any::AnyTypeInfo {
        <i64 as sqlx::Type<sqlx::Any>>::type_info()
    }

    fn compatible(ty: &sqlx::any::AnyTypeInfo) -> bool {
        <i64 as sqlx::Type<sqlx::Any>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Any> for ByteCount {
    fn decode(value: sqlx::any::AnyValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let n = <i64 as sqlx::Decode<'r, sqlx::Any>>::decode(value)?;
        Ok(Self(u64::try_from(n).unwrap_or(0)))
    }
}

impl From<ByteCount> for u64 {
    fn from(n: ByteCount) -> Self {
        n.0
    }
}

impl Store {
    /// Appends one row to the egress log and returns its id.
    #[tracing::instrument(skip_all, fields(sandbox.id = %entry.sandbox_id))]
    pub async fn egress_record(&self, entry: &NewEgressEntry) -> anyhow::Result<i64> {
        let row = sqlx::query(
            "INSERT INTO egress_log (sandbox_id, ts, host, port, decision, reason, bytes_up, bytes_down) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        )
        .bind(entry.sandbox_id.clone())
        .bind(entry.ts)
        .bind(entry.host.clone())
        .bind(i64::from(entry.port))
        .bind(entry.decision.as_str())
        .bind(entry.reason.clone())
        .bind(to_i64(entry.bytes_up))
        .bind(to_i64(entry.bytes_down))
        .fetch_one(self.pool())
        .await
        .context("failed to insert egress log row")?;
        Ok(row.try_get("id")?)
    }

    /// A sandbox's egress log, oldest first: its newest `limit` rows.
    pub async fn egress_for_sandbox(
        &self,
        sandbox_id: &SandboxId,
        limit: i64,
    ) -> anyhow::Result<Vec<EgressEntry>> {
        let mut rows: Vec<EgressEntry> = sqlx::query_as(
            "SELECT id, sandbox_id, ts, host, port, decision, reason, bytes_up, bytes_down \
             FROM egress_log WHERE sandbox_id = $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(sandbox_id.to_string())
        .bind(limit)
        .fetch_all(self.pool())
        .await
        .read("failed to read the egress log", "malformed egress log row")?;
        rows.reverse();
        Ok(rows)
    }

    /// Deletes the rows older than `before_ms` (Unix ms), in batches so a
    /// large backlog never holds the database's write lock for long.
    /// Returns how many went.
    pub async fn egress_prune(&self, before_ms: i64) -> anyhow::Result<u64> {
        self.egress_prune_in_batches(before_ms, 5000).await
    }

    /// [`Store::egress_prune`] with its batch size (at least 1).
    pub async fn egress_prune_in_batches(&self, before_ms: i64, batch: u32) -> anyhow::Result<u64> {
        let batch = i64::from(batch.max(1));
        let mut total = 0;
        loop {
            let done = sqlx::query(
                "DELETE FROM egress_log WHERE id IN \
                 (SELECT id FROM egress_log WHERE ts < $1 ORDER BY id LIMIT $2)",
            )
            .bind(before_ms)
            .bind(batch)
            .execute(self.pool())
            .await
            .context("failed to prune the egress log")?
            .rows_affected();
            total += done;
            if done < u64::try_from(batch).unwrap_or(0) {
                return Ok(total);
            }
        }
    }
}
