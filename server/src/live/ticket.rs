//! Tickets for the live view's WebSocket: a URL carries one, so it must be
//! worthless soon and after one use. Each is 256 random bits, kept only as
//! its SHA-256, valid [`TICKET_TTL_S`] seconds, bound to one operator and
//! one session, and removed when used (or tried with the wrong session or
//! operator).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ids::{secret_token, token_hash};
use crate::time::now_ms;

/// How long a ticket stays valid, in seconds.
pub const TICKET_TTL_S: u64 = 30;

/// Tickets handed out and not yet used, by hash.
#[derive(Default)]
pub struct Tickets(Mutex<HashMap<String, Ticket>>);

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
}

impl TicketError {
    /// Stable code.
    pub fn code(self) -> &'static str {
        match self {
            Self::Unknown => "ticket_unknown",
            Self::Expired => "ticket_expired",
            Self::Mismatch => "ticket_mismatch",
        }
    }
}

/// The longest ticket we look at; anything longer is unknown.
const MAX_TICKET_LEN: usize = 128;

impl Tickets {
    /// Issues a ticket for `operator_id` to watch `session_id`.
    pub fn issue(&self, operator_id: &str, session_id: &str) -> String {
        let token = secret_token("lvt_");
        let now = now_ms();
        let mut map = self.0.lock().expect("tickets lock");
        map.retain(|_, t| t.expires_at > now);
        map.insert(
            token_hash(&token),
            Ticket {
                operator_id: operator_id.to_owned(),
                session_id: session_id.to_owned(),
                expires_at: now + i64::try_from(TICKET_TTL_S).unwrap_or(30) * 1000,
            },
        );
        token
    }

    /// Uses a ticket: it is gone afterwards, whatever the answer.
    pub fn redeem(
        &self,
        token: &str,
        operator_id: &str,
        session_id: &str,
    ) -> Result<Ticket, TicketError> {
        if token.is_empty() || token.len() > MAX_TICKET_LEN {
            return Err(TicketError::Unknown);
        }
        let ticket = self
            .0
            .lock()
            .expect("tickets lock")
            .remove(&token_hash(token))
            .ok_or(TicketError::Unknown)?;
        if ticket.expires_at <= now_ms() {
            return Err(TicketError::Expired);
        }
        if ticket.operator_id != operator_id || ticket.session_id != session_id {
            return Err(TicketError::Mismatch);
        }
        Ok(ticket)
    }

    /// Tickets waiting (for tests and metrics).
    pub fn pending(&self) -> usize {
        self.0.lock().expect("tickets lock").len()
    }

    #[cfg(test)]
    fn age(&self, by_ms: i64) {
        for t in self.0.lock().expect("tickets lock").values_mut() {
            t.expires_at -= by_ms;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_works_once_for_its_operator_and_session() {
        let t = Tickets::default();
        let token = t.issue("op_a", "s_1");
        assert!(token.starts_with("lvt_") && token.len() > 40, "{token}");
        assert_eq!(t.redeem(&token, "op_a", "s_1").unwrap().session_id, "s_1");
        assert_eq!(t.redeem(&token, "op_a", "s_1"), Err(TicketError::Unknown));
    }

    #[test]
    fn another_session_or_operator_is_refused_and_uses_the_ticket_up() {
        let t = Tickets::default();
        let token = t.issue("op_a", "s_1");
        assert_eq!(t.redeem(&token, "op_a", "s_2"), Err(TicketError::Mismatch));
        assert_eq!(t.redeem(&token, "op_a", "s_1"), Err(TicketError::Unknown));
        let token = t.issue("op_a", "s_1");
        assert_eq!(t.redeem(&token, "op_b", "s_1"), Err(TicketError::Mismatch));
    }

    #[test]
    fn expired_unknown_and_hostile_tickets_are_refused() {
        let t = Tickets::default();
        let token = t.issue("op_a", "s_1");
        t.age(i64::try_from(TICKET_TTL_S).unwrap() * 1000 + 1);
        assert_eq!(t.redeem(&token, "op_a", "s_1"), Err(TicketError::Expired));
        assert_eq!(t.redeem("", "op_a", "s_1"), Err(TicketError::Unknown));
        assert_eq!(
            t.redeem(&"x".repeat(10_000), "op_a", "s_1"),
            Err(TicketError::Unknown)
        );
        // Expired ones are swept at the next issue.
        t.issue("op_a", "s_1");
        t.age(i64::try_from(TICKET_TTL_S).unwrap() * 1000 + 1);
        t.issue("op_a", "s_1");
        assert_eq!(t.pending(), 1);
    }
}
