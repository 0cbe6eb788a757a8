//! The live view: a session's browser streamed to the dashboard over a
//! WebSocket (`/live/{session}`), and an operator's input sent back through
//! the one tool pipeline.
//!
//! - `ticket.rs`: single-use tickets (≤ 60 s) bound to one operator and one
//!   session, handed out by a server function; only their hash is kept.
//! - `socket.rs`: the upgrade (ticket and dashboard cookie both checked,
//!   refusals audited) and the connection: messages in, page state and
//!   control out, the session's and the dashboard session's ends.
//! - `stream.rs`: one tab's CDP screencast with newest-frame-only
//!   backpressure: Chromium's frame is acknowledged only once the socket
//!   has taken the previous one, and a frame that arrives meanwhile replaces
//!   the waiting one instead of queueing behind it.

pub mod socket;
mod stream;
mod ticket;

use std::collections::HashMap;
use std::sync::Mutex;

#[doc(hidden)]
pub use stream::Encoding;
pub use ticket::{TICKET_TTL_S, Ticket, TicketError, Tickets};

/// What the live view keeps between requests.
#[derive(Default)]
pub struct Live {
    /// Tickets handed out and not yet used.
    pub tickets: Tickets,
    /// Open live views per (session, operator), so control is handed back
    /// only when its holder's last view has been gone for a while.
    views: Mutex<HashMap<(String, String), usize>>,
}

impl Live {
    /// Counts a view of `session` by `operator` opening.
    fn opened(&self, session: &str, operator: &str) {
        *self
            .views
            .lock()
            .expect("views lock")
            .entry((session.to_owned(), operator.to_owned()))
            .or_default() += 1;
    }

    /// Counts one closing; answers how many of theirs stay open.
    fn closed(&self, session: &str, operator: &str) -> usize {
        let mut views = self.views.lock().expect("views lock");
        let key = (session.to_owned(), operator.to_owned());
        let left = views.get(&key).copied().unwrap_or(1).saturating_sub(1);
        if left == 0 {
            views.remove(&key);
        } else {
            views.insert(key, left);
        }
        left
    }

    /// How many views of `session` `operator` has open.
    fn open_views(&self, session: &str, operator: &str) -> usize {
        self.views
            .lock()
            .expect("views lock")
            .get(&(session.to_owned(), operator.to_owned()))
            .copied()
            .unwrap_or(0)
    }
}
