//! What the guard's listeners and the request handling share: the guard's
//! policy, resolver and limits, and each listener's session. (Kept apart
//! so `proxy` (accepting) and `forward` (handling) depend on it, not on
//! each other.)

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};

use super::io::LogSender;
use super::policy::AddressPolicy;
use super::refusals::Refusals;
use super::resolve::Resolve;
use crate::store::Store;

/// Bounds on what one client of the proxy can hold or take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Request line plus headers, in bytes; more is answered 431.
    pub max_header_bytes: usize,
    /// Time to send a complete request head.
    pub header_timeout: Duration,
    /// Time to resolve a name.
    pub resolve_timeout: Duration,
    /// Time to connect to the upstream, all its addresses together.
    pub connect_timeout: Duration,
    /// A connection or tunnel with no bytes either way for this long is closed.
    pub idle_timeout: Duration,
    /// Simultaneous client connections per listener, the tunnels they
    /// became (CONNECT, WebSocket) included; more wait to be accepted
    /// (handed over in process: 64 wait, 10 s at most; more are closed).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_header_bytes: 16 * 1024,
            header_timeout: Duration::from_secs(10),
            resolve_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 256,
        }
    }
}

/// The guard's shared state.
pub(super) struct Inner {
    pub(super) policy: AddressPolicy,
    /// This host's own addresses, refused unless allowlisted.
    pub(super) own: super::own::OwnAddresses,
    pub(super) store: Store,
    pub(super) resolver: Arc<dyn Resolve>,
    pub(super) limits: Limits,
}

/// What every task of one listener shares. The log sender inside keeps the
/// writer alive: it ends once the last task holding a `Session` or a `Flow` has.
pub(super) struct Session {
    pub(super) guard: Arc<Inner>,
    pub(super) sandbox_id: Arc<str>,
    pub(super) log: LogSender,
    pub(super) stop: watch::Receiver<bool>,
    pub(super) this_process_only: bool,
    /// For a browser in a pod (kube driver): nothing is served until the
    /// pod's address is known, then only connections from it. `None`: any
    /// client (the listener is the sandbox's own by other means).
    pub(super) pod: Option<Arc<std::sync::OnceLock<std::net::IpAddr>>>,
    /// Client connections being served and tunnels open, TCP and
    /// in-process together (`Limits::max_connections`).
    pub(super) permits: Arc<Semaphore>,
    /// In-process connections waiting for one of `permits`.
    pub(super) waiters: Arc<Semaphore>,
    /// Recent refusals, for the session engine.
    pub(super) refusals: Refusals,
    /// How many refusals may still be logged (`io.rs`).
    pub(super) refused_rows: std::sync::Mutex<super::io::RefusalBudget>,
}

impl Drop for Session {
    /// The refusals a flood left unlogged are counted in a row of their
    /// own at the end too (the last of the listener's tasks lets go of it
    /// before its log writer stops).
    fn drop(&mut self) {
        let unlogged = self
            .refused_rows
            .get_mut()
            .map(|b| b.take_unlogged())
            .unwrap_or(0);
        if unlogged > 0 {
            self.log.push(super::io::unlogged_row(
                &self.sandbox_id,
                crate::time::now_ms(),
                unlogged,
            ));
        }
    }
}
