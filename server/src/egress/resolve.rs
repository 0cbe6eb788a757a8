//! Name resolution for the guard. The guard resolves each name once per
//! request, checks every address, and connects to a checked address: the
//! browser's resolver is never asked, and no second lookup can rebind.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;

/// Resolves a host name to its addresses.
#[async_trait::async_trait]
pub trait Resolve: Send + Sync + 'static {
    /// All addresses of `name` (already lower-cased, without a trailing dot).
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo`, through `tokio::net::lookup_host`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait::async_trait]
impl Resolve for SystemResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        let addrs = tokio::net::lookup_host((name, 0)).await?;
        Ok(addrs.map(|a| a.ip()).collect())
    }
}

/// A fixed table of names, for tests and closed deployments; any other name
/// does not resolve. It never sends a packet.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table: nothing resolves.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) `name`'s addresses.
    pub fn with(mut self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.names
            .insert(name.to_ascii_lowercase(), addrs.into_iter().collect());
        self
    }
}

#[async_trait::async_trait]
impl Resolve for StaticResolver {
    async fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        self.names
            .get(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "name not in the static table"))
    }
}
