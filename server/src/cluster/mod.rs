//! Several control planes on one database: who is up, who leads the
//! periodic jobs, who runs which session, and the internal hop between them.
//!
//! - **Names.** Each process runs under `replica_name` (default the host
//!   name); sessions and sandboxes are recorded under it (`host` columns).
//!   On PostgreSQL a running process holds an advisory lock on its name on
//!   a connection of its own, so a second process with the same name is
//!   refused at start, and a name whose lock is free belongs to no live
//!   process.
//! - **Heartbeats.** Every fifth of `replica_lost_after_s` a replica moves
//!   its row's `heartbeat_at`. One older than `replica_lost_after_s` (or,
//!   on PostgreSQL, older than two beats with its name lock free: the
//!   process is gone) is lost.
//! - **The housekeeping lock.** On PostgreSQL, one replica at a time holds
//!   a second advisory lock on the same connection and runs the jobs that
//!   must run once (the reaper, grant and dashboard-session GC, egress-log
//!   pruning, and ending lost replicas' sessions). When it dies its
//!   connection closes, PostgreSQL frees the lock and another replica takes
//!   it at its next beat. On SQLite (one host) the process always leads.
//! - **Forwarding** ([`forward`]): a call for a session another replica
//!   runs goes to that replica's `advertise_url`, signed ([`hop`]).
//! - **Dashboard notices** ([`notify`]): on PostgreSQL every change topic
//!   is also `NOTIFY`d, so a page open on one replica refetches what
//!   another changed.
//! - **At start** ([`Cluster::join`]) a replica whose binary knows another
//!   schema than a running replica's, or whose master key id differs from
//!   one's, is refused, naming which.
//!
//! Files: `membership.rs` (joining, the heartbeat, the locks, ending lost
//! replicas), `ownership.rs` (which replica runs a session or task, and
//! how to reach it), `hop.rs` (the signed hop: its header, signing and
//! checking), `arrive.rs` (a hop's request as the web layer reads it), `forward.rs`, `internal.rs`, `live.rs`, `dashboard.rs` (what
//! crosses the hop), `notify.rs`.

pub(crate) mod arrive;
pub mod dashboard;
pub mod forward;
pub mod hop;
pub mod internal;
pub mod live;
mod membership;
pub use membership::ClusterSettings;
pub mod notify;
mod ownership;
pub mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use secrecy::SecretString;
use tokio::sync::watch;

use crate::store::Store;
use crate::time::now_ms;

/// Whether `name` can name a replica: 1 to 63 of `A-Za-z0-9._-`, starting
/// with a letter or digit (a host name, a pod name).
pub fn check_replica_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1 to 63 characters");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("must start with a letter or digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may hold only letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// Where a session's replica stands, for a call that must reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Up: forward to this base URL.
    Up(String),
    /// Gone (stopped, lost, or never known): its sessions are over.
    Lost,
    /// Up as far as is known, but not reachable now (why).
    Unreachable(String),
}

/// This replica's place among the others; cheap to clone.
#[derive(Clone)]
pub struct Cluster(Arc<Inner>);

struct Inner {
    name: String,
    instance: crate::domain::InstanceId,
    advertise: String,
    secret: Option<SecretString>,
    deployment: String,
    store: Store,
    db_url: SecretString,
    lost_after_ms: i64,
    beat: Duration,
    leader: watch::Sender<bool>,
    /// PostgreSQL: the connection holding this replica's name lock (and,
    /// while it leads, the housekeeping lock). `None` on SQLite, or while
    /// it is being re-established.
    locks: tokio::sync::Mutex<Option<sqlx::AnyConnection>>,
    client: reqwest::Client,
    /// The hop's TLS client configuration (built-in HTTPS only).
    tls: Option<Arc<rustls::ClientConfig>>,
    nonces: hop::Nonces,
    /// Session id → (tenant, replica) for sessions found on other replicas
    /// (a session never moves).
    owners: Mutex<HashMap<String, (String, String)>>,
    stop: watch::Sender<bool>,
    /// The database server's clock minus this process's (ms), measured at
    /// every heartbeat: heartbeats and hop times are in the database's
    /// time, so replicas whose clocks disagree do not declare each other
    /// lost or refuse each other's hops. 0 on SQLite.
    offset: std::sync::atomic::AtomicI64,
}

impl Cluster {
    /// Now, in the database's time (this process's clock plus the offset
    /// measured at the last heartbeat).
    pub fn now(&self) -> i64 {
        now_ms() + self.clock_offset_ms()
    }

    /// The database server's clock minus this process's, ms.
    pub fn clock_offset_ms(&self) -> i64 {
        self.0.offset.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// This replica's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Where the others reach it.
    pub fn advertise_url(&self) -> &str {
        &self.0.advertise
    }

    /// Whether it holds the housekeeping lock now.
    pub fn is_leader(&self) -> bool {
        *self.0.leader.borrow()
    }

    /// Follows [`Self::is_leader`].
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.0.leader.subscribe()
    }

    /// The hop's HTTP client.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.0.client
    }

    /// The hop's TLS client configuration, when replicas talk HTTPS.
    pub(crate) fn tls(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.0.tls.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_names_are_host_like() {
        for ok in [
            "a",
            "cordon-7d9f-x2",
            "host.example",
            "r_1",
            &"x".repeat(63),
        ] {
            assert_eq!(check_replica_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "a/b",
            "a b",
            "a;b",
            "é",
            &"x".repeat(64),
            "a\n",
        ] {
            assert!(check_replica_name(bad).is_err(), "{bad:?}");
        }
    }
}
