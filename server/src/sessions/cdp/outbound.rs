//! The way to the client: a bounded channel whose messages each hold a
//! share of a byte budget, so a client that does not read is cut off
//! instead of pinning memory.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::{MAX_UNREAD_KIB, SLOW_CLIENT};

/// The way to the client: a bounded channel whose messages each hold a
/// share of a byte budget, so a client that does not read pins at most
/// [`MAX_UNREAD_KIB`] of memory and is cut off after [`SLOW_CLIENT`].
#[derive(Clone)]
pub struct Outbound {
    tx: mpsc::Sender<Outgoing>,
    budget: Arc<tokio::sync::Semaphore>,
}

/// One message on its way to the client.
pub struct Outgoing {
    /// The JSON text.
    pub text: String,
    _share: tokio::sync::OwnedSemaphorePermit,
}

/// Why a message could not be queued.
pub(super) enum Cut {
    /// The client left its messages unread too long.
    Slow,
    /// The client is gone.
    Closed,
}

/// A new way to the client, and its receiving end (for the web layer's
/// writer).
pub fn outbound() -> (Outbound, mpsc::Receiver<Outgoing>) {
    let (tx, rx) = mpsc::channel(1024);
    let budget = Arc::new(tokio::sync::Semaphore::new(MAX_UNREAD_KIB as usize));
    (Outbound { tx, budget }, rx)
}

impl Outbound {
    pub(super) async fn send(&self, text: String) -> Result<(), Cut> {
        let kib = u32::try_from(text.len() / 1024 + 1)
            .unwrap_or(u32::MAX)
            .min(MAX_UNREAD_KIB);
        let deadline = tokio::time::Instant::now() + SLOW_CLIENT;
        let share = tokio::time::timeout_at(deadline, self.budget.clone().acquire_many_owned(kib))
            .await
            .map_err(|_| Cut::Slow)?
            .map_err(|_| Cut::Closed)?;
        tokio::time::timeout_at(
            deadline,
            self.tx.send(Outgoing {
                text,
                _share: share,
            }),
        )
        .await
        .map_err(|_| Cut::Slow)?
        .map_err(|_| Cut::Closed)
    }
}
