//! Tickets for the live view's WebSocket: a URL carries one, so it must be
//! worthless soon and after one use. Each is 256 random bits, kept only as
//! its SHA-256 (in the database, so any replica takes a ticket another
//! issued), valid [`TICKET_TTL_S`] seconds, bound to one operator and one
//! session, and removed when used (or tried with the wrong session or
//! operator).

use crate::domain::SessionId;
use crate::ids::{secret_token, token_hash};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::time::now_ms;

/// How long a ticket stays valid, in seconds.
pub const TICKET_TTL_S: u64 = 30;

/// Issues and takes tickets (their hashes live in the store).
#[derive(Default)]
pub struct Tickets;

/// What a ticket allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// `op_…`.
    pub operator_id: String,
    /// `s_…`.
    pub session_id: String,
    /// Unix ms.
    pub expires_at: i64,
}

/// Why a ticket was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    /// None given, or never issued (or already used).
    #[error("the live view ticket is unknown or was already used; reload the page")]
    Unknown,
    /// Issued, but too long ago.
    #[error("the live view ticket has expired; reload the page")]
    Expired,
    /// Issued for another session or another operator.
    #[error("the live view ticket was issued for another session or operator")]
    Mismatch,
    /// The database did not answer.
    #[error("the live view ticket could not be checked; retry")]
    Unavailable,
}

impl TicketError {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Unknown => "ticket_unknown",
            Self::Expired => "ticket_expired",
            Self::Mismatch => "ticket_mismatch",
            Self::Unavailable => "ticket_unavailable",
        }
    }
}

/// The longest ticket we look at; anything longer is unknown.
const MAX_TICKET_LEN: usize = 128;

impl Tickets {
    /// Issues a ticket for `operator_id` to watch `session_id`.
    pub async fn issue(
        &self,
        store: &Store,
        operator_id: &str,
        session_id: &SessionId,
    ) -> anyhow::Result<String> {
        let token = secret_token("lvt_");
        let now = now_ms();
        let expires_at = now + i64::try_from(TICKET_TTL_S).unwrap_or(30) * 1000;
        store
            .ticket_insert(
                &token_hash(&token),
                operator_id,
                session_id,
                expires_at,
                now,
            )
            .await?;
        Ok(token)
    }

    /// Uses a ticket: it is gone afterwards, whatever the answer.
    pub async fn redeem(
        &self,
        store: &Store,
        token: &str,
        operator_id: &str,
        session_id: &str,
    ) -> Result<Ticket, TicketError> {
        if token.is_empty() || token.len() > MAX_TICKET_LEN {
            return Err(TicketError::Unknown);
        }
        let (op, session, expires_at) = store
            .ticket_take(&token_hash(token))
            .await
            .map_err(|e| {
                tracing::error!(error = %format!("{e:#}"), "live view ticket lookup failed");
                TicketError::Unavailable
            })?
            .ok_or(TicketError::Unknown)?;
        if expires_at <= now_ms() {
            return Err(TicketError::Expired);
        }
        if op != operator_id || session != session_id {
            return Err(TicketError::Mismatch);
        }
        Ok(Ticket {
            operator_id: op,
            session_id: session,
            expires_at,
        })
    }
}

/// A CDP connect token's holder as the ticket table keeps it (the API
/// key and its tenant, so redeeming needs no key).
fn cdp_holder(owner: &ApiKeyOwner) -> String {
    format!("cdpkey:{}@{}", owner.key_id, owner.tenant.as_str())
}

impl Tickets {
    /// Issues a CDP connect token (`cdpt_…`) for the agent `owner` to
    /// connect to `session_id` once, within [`TICKET_TTL_S`] seconds, for
    /// clients that cannot send an `Authorization` header.
    pub async fn issue_cdp(
        &self,
        store: &Store,
        owner: &ApiKeyOwner,
        session_id: &SessionId,
    ) -> anyhow::Result<(String, i64)> {
        let token = secret_token("cdpt_");
        let now = now_ms();
        let expires_at = now + i64::try_from(TICKET_TTL_S).unwrap_or(30) * 1000;
        store
            .ticket_insert(
                &token_hash(&token),
                &cdp_holder(owner),
                session_id,
                expires_at,
                now,
            )
            .await?;
        Ok((token, expires_at))
    }

    /// Uses a CDP connect token for `session_id`: the agent it was issued
    /// to. Gone afterwards, whatever the answer.
    pub async fn redeem_cdp(
        &self,
        store: &Store,
        token: &str,
        session_id: &str,
    ) -> Result<ApiKeyOwner, TicketError> {
        if !token.starts_with("cdpt_") || token.len() > MAX_TICKET_LEN {
            return Err(TicketError::Unknown);
        }
        let (holder, session, expires_at) = store
            .ticket_take(&token_hash(token))
            .await
            .map_err(|e| {
                tracing::error!(error = %format!("{e:#}"), "CDP token lookup failed");
                TicketError::Unavailable
            })?
            .ok_or(TicketError::Unknown)?;
        if expires_at <= now_ms() {
            return Err(TicketError::Expired);
        }
        let owner = holder
            .strip_prefix("cdpkey:")
            .and_then(|rest| rest.split_once('@'))
            .and_then(|(key, tenant)| {
                Some(ApiKeyOwner {
                    key_id: key.to_owned(),
                    tenant: tenant.parse().ok()?,
                })
            });
        match owner {
            Some(owner) if session == session_id => Ok(owner),
            _ => Err(TicketError::Mismatch),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "s_aaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn s1() -> SessionId {
        S1.parse().unwrap()
    }

    async fn store() -> Store {
        let store = Store::connect(&secrecy::SecretString::from("sqlite::memory:".to_owned()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        store
    }

    #[tokio::test]
    async fn a_ticket_works_once_for_its_operator_and_session() {
        let (t, s) = (Tickets, store().await);
        let token = t.issue(&s, "op_a", &s1()).await.unwrap();
        assert!(token.starts_with("lvt_") && token.len() > 40, "{token}");
        assert_eq!(
            t.redeem(&s, &token, "op_a", S1).await.unwrap().session_id,
            S1
        );
        assert_eq!(
            t.redeem(&s, &token, "op_a", S1).await,
            Err(TicketError::Unknown)
        );
    }

    #[tokio::test]
    async fn another_session_or_operator_is_refused_and_uses_the_ticket_up() {
        let (t, s) = (Tickets, store().await);
        let token = t.issue(&s, "op_a", &s1()).await.unwrap();
        assert_eq!(
            t.redeem(&s, &token, "op_a", "s_2").await,
            Err(TicketError::Mismatch)
        );
        assert_eq!(
            t.redeem(&s, &token, "op_a", S1).await,
            Err(TicketError::Unknown)
        );
        let token = t.issue(&s, "op_a", &s1()).await.unwrap();
        assert_eq!(
            t.redeem(&s, &token, "op_b", S1).await,
            Err(TicketError::Mismatch)
        );
    }

    #[tokio::test]
    async fn a_cdp_token_names_its_agent_once_and_only_for_its_session() {
        let (t, s) = (Tickets, store().await);
        let owner = ApiKeyOwner {
            key_id: "k_1".into(),
            tenant: "acme".parse().unwrap(),
        };
        let (token, _) = t.issue_cdp(&s, &owner, &s1()).await.unwrap();
        assert!(token.starts_with("cdpt_"), "{token}");
        let got = t.redeem_cdp(&s, &token, S1).await.unwrap();
        assert_eq!((got.key_id.as_str(), got.tenant.as_str()), ("k_1", "acme"));
        assert_eq!(
            t.redeem_cdp(&s, &token, S1).await.map(|o| o.key_id),
            Err(TicketError::Unknown)
        );
        let (token, _) = t.issue_cdp(&s, &owner, &s1()).await.unwrap();
        assert_eq!(
            t.redeem_cdp(&s, &token, "s_2").await.map(|o| o.key_id),
            Err(TicketError::Mismatch)
        );
        // A live-view ticket is not a CDP token, and the other way round.
        let live = t.issue(&s, "op_a", &s1()).await.unwrap();
        assert_eq!(
            t.redeem_cdp(&s, &live, S1).await.map(|o| o.key_id),
            Err(TicketError::Unknown)
        );
        let (token, _) = t.issue_cdp(&s, &owner, &s1()).await.unwrap();
        assert_eq!(
            t.redeem(&s, &token, "op_a", S1).await,
            Err(TicketError::Mismatch)
        );
    }

    #[tokio::test]
    async fn expired_unknown_and_hostile_tickets_are_refused_and_only_hashes_are_kept() {
        let (t, s) = (Tickets, store().await);
        let token = t.issue(&s, "op_a", &s1()).await.unwrap();
        let stored: Vec<String> = sqlx::query_scalar("SELECT hash FROM live_tickets")
            .fetch_all(s.pool())
            .await
            .unwrap();
        assert_eq!(stored, [token_hash(&token)], "the hash, never the ticket");
        sqlx::query("UPDATE live_tickets SET expires_at = expires_at - 31000")
            .execute(s.pool())
            .await
            .unwrap();
        assert_eq!(
            t.redeem(&s, &token, "op_a", S1).await,
            Err(TicketError::Expired)
        );
        assert_eq!(
            t.redeem(&s, "", "op_a", S1).await,
            Err(TicketError::Unknown)
        );
        assert_eq!(
            t.redeem(&s, &"x".repeat(10_000), "op_a", S1).await,
            Err(TicketError::Unknown)
        );
        // Expired ones are swept at the next issue.
        t.issue(&s, "op_a", &s1()).await.unwrap();
        sqlx::query("UPDATE live_tickets SET expires_at = expires_at - 31000")
            .execute(s.pool())
            .await
            .unwrap();
        t.issue(&s, "op_a", &s1()).await.unwrap();
        assert_eq!(s.tickets_pending().await.unwrap(), 1);
    }
}
