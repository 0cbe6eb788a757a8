//! The live view: a session's browser streamed to the dashboard over a
//! WebSocket (`/live/{session}`), and an operator's input sent back through
//! the one tool pipeline.
//!
//! - `ticket.rs`: single-use tickets (valid 30 s) bound to one operator and one
//!   session, handed out by a server function; only their hash is kept.
//! - `socket.rs`: the upgrade (ticket and dashboard cookie both checked,
//!   refusals audited) and the connection: messages in, page state and
//!   control out, the session's and the dashboard session's ends.
//! - `limit.rs`: how much input one view may send (two token buckets;
//!   a press that passed is always released).
//! - `link.rs`: live links, the capability URLs an agent hands its own
//!   user to watch or drive a session in an `<iframe>` (tenant opt-in).
//! - `stream.rs`: one tab's CDP screencast with newest-frame-only
//!   backpressure: Chromium's frame is acknowledged only once the socket
//!   has taken the previous one, and a frame that arrives meanwhile replaces
//!   the waiting one instead of queueing behind it.

mod limit;
pub mod link;
pub mod settings;
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
    /// Open views per live link on this replica.
    link_views: Mutex<HashMap<String, usize>>,
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

    /// Counts a view through link `id` opening, unless it already has
    /// [`link::MAX_VIEWS_PER_LINK`]: then `false`.
    pub fn link_opened(&self, id: &str) -> bool {
        let mut views = self.link_views.lock().expect("link views lock");
        let n = views.entry(id.to_owned()).or_default();
        if *n >= link::MAX_VIEWS_PER_LINK {
            return false;
        }
        *n += 1;
        true
    }

    /// Counts a view through link `id` closing.
    pub fn link_closed(&self, id: &str) {
        let mut views = self.link_views.lock().expect("link views lock");
        if let Some(n) = views.get_mut(id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                views.remove(id);
            }
        }
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
