//! This host's own addresses. A connection to one of them is delivered
//! locally by the kernel (through `lo`), whatever range it is in: a public
//! address of the host's would reach every service bound to `0.0.0.0`
//! (a database, Cordon's own port), past a firewall that trusts `lo`. The
//! built-in ranges refuse the private and loopback ones; this list refuses
//! the rest. Read from the interfaces, again at most every 10 s (an
//! address a DHCP lease gives later is refused from then on).

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a reading of the interfaces is used.
const FRESH: Duration = Duration::from_secs(10);

/// The host's addresses, read now and then.
#[derive(Default)]
pub(super) struct OwnAddresses(Mutex<Option<(Instant, Arc<Vec<IpAddr>>)>>);

impl OwnAddresses {
    /// The addresses as last read (read again when older than 10 s).
    pub(super) fn now(&self) -> Arc<Vec<IpAddr>> {
        let mut cached = self.0.lock().expect("own addresses lock");
        match &*cached {
            Some((at, list)) if at.elapsed() < FRESH => list.clone(),
            _ => {
                let list = Arc::new(read());
                *cached = Some((Instant::now(), list.clone()));
                list
            }
        }
    }
}

/// Every address of every interface of this network namespace (none when
/// they cannot be read: the built-in ranges still hold).
pub(super) fn read() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        tracing::warn!("cannot read this host's addresses; only the built-in ranges are refused");
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = addrs
        .filter_map(|a| a.address)
        .filter_map(|s| {
            s.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .map(|ip| ip.to_canonical())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read from this machine's interfaces: loopback is always there, and
    /// so is every address `/proc/net/fib_trie` names as local (IPv4).
    #[test]
    fn the_interfaces_addresses_are_read() {
        let own = read();
        assert!(own.contains(&IpAddr::from([127, 0, 0, 1])), "{own:?}");
        let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
        let lines: Vec<&str> = trie.lines().collect();
        for pair in lines.windows(2) {
            if pair[1].contains("/32 host LOCAL")
                && let Some(ip) = pair[0]
                    .trim()
                    .trim_start_matches("|-- ")
                    .parse::<IpAddr>()
                    .ok()
            {
                assert!(own.contains(&ip), "{ip} is local but not read: {own:?}");
            }
        }
        let cache = OwnAddresses::default();
        assert!(
            Arc::ptr_eq(&cache.now(), &cache.now()),
            "read once while fresh"
        );
    }
}
