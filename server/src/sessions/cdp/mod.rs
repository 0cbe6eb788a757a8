//! The CDP endpoint's engine: a filtering proxy between one CDP client
//! (Playwright, Puppeteer, browser-use) and the session's browser, on a
//! connection of its own to the browser. Every command is parsed and
//! decided before it reaches Chromium (`rules.rs`); every event of an
//! operator-mode session loses its cookies before it reaches the client
//! (`seal.rs`). Commands that act are refused while an operator holds
//! control, judged by the risk gate like the tool API's (presses,
//! activation keys, typing, navigations), and audited as the agent with
//! `"via": "cdp"`. The web layer (`api::cdp`) only authenticates, upgrades
//! and pumps frames through two bounded channels.

mod bounded;
mod command;
mod gesture;
mod outbound;
mod rules;
mod seal;
mod serve;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use outbound::{Outbound, Outgoing, outbound};
pub use rules::{Act, Context, Verdict, decide, disturbs_operator, url_allowed};
pub use seal::{REDACTED, seal as seal_event};

use super::{CredentialMode, RunningSession, SessionError, SessionManager};
use crate::store::api_keys::ApiKeyOwner;

/// The largest message a client may send (a script, a page's content).
pub const MAX_CLIENT_MESSAGE: usize = 16 << 20;
/// The most a client's commands read from its socket and not yet decided
/// may hold, bytes: past it, the connection stops reading its socket
/// until the engine catches up (the client's own sends wait).
pub const MAX_QUEUED_BYTES: usize = 32 << 20;
/// CDP connections one session serves at once.
pub const MAX_CONNECTIONS: usize = 4;
/// Commands one connection may send in one second; more closes it.
pub const MAX_COMMANDS_PER_SECOND: u32 = 1_000;
/// How long a client may leave its messages unread before it is cut off.
pub const SLOW_CLIENT: Duration = Duration::from_secs(10);
/// Heavy commands (screenshots, PDFs, snapshots) of one connection the
/// browser may hold at once (sent, not yet answered): a client that floods
/// its tab with them waits for its own answers instead of queueing work in
/// front of the tool API's and the live view's. Other commands are not
/// held back (a client's setup sends dozens at once, some answered only
/// after a later one runs).
pub const MAX_IN_FLIGHT: usize = 8;
/// The most a client's unread messages may hold, KiB (64 MiB).
pub const MAX_UNREAD_KIB: u32 = 64 * 1024;

/// A frame from the client.
#[derive(Debug)]
pub enum FromClient {
    /// A text frame (one CDP command), holding its bytes of
    /// [`MAX_QUEUED_BYTES`] until it is taken.
    Text(String, tokio::sync::OwnedSemaphorePermit),
    /// A binary frame (not CDP).
    Binary,
    /// A frame over [`MAX_CLIENT_MESSAGE`].
    TooLarge,
}

/// How a connection ended: the WebSocket close code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closing {
    /// RFC 6455 close code.
    pub code: u16,
    /// Why (short, no secrets).
    pub reason: &'static str,
}

impl Closing {
    const fn new(code: u16, reason: &'static str) -> Self {
        Self { code, reason }
    }
}

/// A client's place on a session, given back when dropped.
pub struct Slot {
    session: Arc<RunningSession>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.session.cdp_clients.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Slot {
    /// The session.
    pub fn session(&self) -> &Arc<RunningSession> {
        &self.session
    }
}

/// Why a CDP connection cannot start.
#[derive(Debug, thiserror::Error)]
pub enum CdpRefusal {
    /// The session cannot be reached (unknown, another tenant's, ended).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// An operator-mode session whose grant did not ask for CDP.
    #[error(
        "this session carries logins from the vault and its grant did not allow CDP: ask for the grant with \"cdp\": true"
    )]
    NotGranted,
    /// [`MAX_CONNECTIONS`] clients are connected already.
    #[error("this session already serves {MAX_CONNECTIONS} CDP connections; close one first")]
    TooMany,
}

impl SessionManager {
    /// The agent's session `id` as the CDP endpoint serves it (its socket
    /// and its `/json/*` discovery alike): 404 as the tool API answers,
    /// and refused in operator mode unless the grant allowed CDP.
    pub async fn cdp_session(
        &self,
        owner: &ApiKeyOwner,
        id: &crate::domain::SessionId,
    ) -> Result<Arc<RunningSession>, CdpRefusal> {
        let session = self.get(&owner.tenant, id).await?;
        if session.mode == CredentialMode::Operator && !session.cdp_granted {
            return Err(CdpRefusal::NotGranted);
        }
        Ok(session)
    }

    /// A place for one more CDP client on the agent's session `id` (404 for
    /// another tenant's, a refresh session or an unknown one, like the
    /// tool API).
    pub async fn cdp_slot(
        &self,
        owner: &ApiKeyOwner,
        id: &crate::domain::SessionId,
    ) -> Result<Slot, CdpRefusal> {
        let session = self.cdp_session(owner, id).await?;
        let before = session.cdp_clients.fetch_add(1, Ordering::SeqCst);
        let slot = Slot { session };
        if before >= MAX_CONNECTIONS {
            return Err(CdpRefusal::TooMany);
        }
        Ok(slot)
    }
}
