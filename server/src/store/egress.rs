//! Egress log queries (both backends).

use anyhow::Context;
use sqlx::Row;
use sqlx::any::AnyRow;

use super::Store;

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

    fn from_stored(s: &str) -> Option<Self> {
        match s {
            "allowed" => Some(Self::Allowed),
            "denied" => Some(Self::Denied),
            _ => None,
        }
    }
}

/// A row to append to the egress log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEgressEntry {
    /// The sandbox whose browser asked.
    pub sandbox_id: String,
    /// Unix milliseconds when the request arrived.
    pub ts: i64,
    /// The host as asked for (a name, or the normalised IP literal); never a URL.
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// Allowed or denied.
    pub decision: Decision,
    /// Why it was denied (`loopback`, `unresolved` …), or why an allowed
    /// connection failed (`connect_failed`); `None` for a normal connection.
    pub reason: Option<String>,
    /// Bytes sent to the upstream.
    pub bytes_up: u64,
    /// Bytes received from the upstream.
    pub bytes_down: u64,
}

/// A row of the egress log as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressEntry {
    /// Its id, increasing in insertion order.
    pub id: i64,
    /// The rest of the row.
    pub entry: NewEgressEntry,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_row(row: &AnyRow) -> anyhow::Result<EgressEntry> {
    let decision: String = row.try_get("decision")?;
    let port: i64 = row.try_get("port")?;
    let up: i64 = row.try_get("bytes_up")?;
    let down: i64 = row.try_get("bytes_down")?;
    Ok(EgressEntry {
        id: row.try_get("id")?,
        entry: NewEgressEntry {
            sandbox_id: row.try_get("sandbox_id")?,
            ts: row.try_get("ts")?,
            host: row.try_get("host")?,
            port: u16::try_from(port).context("port out of range")?,
            decision: Decision::from_stored(&decision).context("unknown decision")?,
            reason: row.try_get("reason")?,
            bytes_up: u64::try_from(up).unwrap_or(0),
            bytes_down: u64::try_from(down).unwrap_or(0),
        },
    })
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

    /// A sandbox's egress log, oldest first.
    pub async fn egress_for_sandbox(&self, sandbox_id: &str) -> anyhow::Result<Vec<EgressEntry>> {
        let rows = sqlx::query(
            "SELECT id, sandbox_id, ts, host, port, decision, reason, bytes_up, bytes_down \
             FROM egress_log WHERE sandbox_id = $1 ORDER BY id",
        )
        .bind(sandbox_id.to_owned())
        .fetch_all(self.pool())
        .await
        .context("failed to read the egress log")?;
        rows.iter()
            .map(from_row)
            .collect::<anyhow::Result<_>>()
            .context("malformed egress log row")
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
