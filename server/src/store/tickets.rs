//! The live view's tickets (both backends): issued, and taken once.

use super::column::ReadContext;
use anyhow::Context;

use super::Store;
use crate::domain::SessionId;

impl Store {
    /// Records a ticket's hash (and sweeps expired ones).
    pub async fn ticket_insert(
        &self,
        hash: &str,
        operator_id: &str,
        session_id: &SessionId,
        expires_at: i64,
        now: i64,
    ) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM live_tickets WHERE expires_at <= $1")
            .bind(now)
            .execute(self.pool())
            .await
            .context("failed to sweep live view tickets")?;
        sqlx::query(
            "INSERT INTO live_tickets (hash, operator_id, session_id, expires_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(hash.to_owned())
        .bind(operator_id.to_owned())
        .bind(session_id.to_string())
        .bind(expires_at)
        .execute(self.pool())
        .await
        .context("failed to record a live view ticket")?;
        Ok(())
    }

    /// Takes a ticket: deleted in the same statement that reads it, so only
    /// one taker (on any replica) gets it. `(operator, session, expires_at)`.
    pub async fn ticket_take(&self, hash: &str) -> anyhow::Result<Option<(String, String, i64)>> {
        sqlx::query_as(
            "DELETE FROM live_tickets WHERE hash = $1 RETURNING operator_id, session_id, expires_at",
        )
        .bind(hash.to_owned())
        .fetch_optional(self.pool())
        .await
        .read(
            "failed to take a live view ticket",
            "malformed live view ticket",
        )
    }

    /// Tickets not yet taken.
    pub async fn tickets_pending(&self) -> anyhow::Result<i64> {
        sqlx::query_scalar("SELECT COUNT(*) FROM live_tickets")
            .fetch_one(self.pool())
            .await
            .context("failed to count live view tickets")
    }
}
