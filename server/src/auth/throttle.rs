//! The passkey endpoints anyone may call (starting and finishing a login or
//! an enrollment) are throttled: each client address has a small bucket,
//! and all clients together one larger bucket, so neither one client nor
//! many can make Cordon store ceremony sessions (a dashboard-session row
//! each, kept until idle expiry) or verify answers without bound. Over
//! either, the call answers 429 with `Retry-After` and nothing is stored.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Calls one client may make at once, then one a second (a passkey cannot
/// be guessed: this bounds the rows and work one client causes, and leaves
/// room for an office behind one address).
const PER_CLIENT: Rate = Rate {
    burst: 60.0,
    per_s: 1.0,
};
/// Calls all clients together may make at once, then ten a second.
const ALL_CLIENTS: Rate = Rate {
    burst: 300.0,
    per_s: 10.0,
};
/// Client buckets kept before full ones are dropped.
const MAX_CLIENTS: usize = 10_000;

#[derive(Clone, Copy)]
struct Rate {
    burst: f64,
    per_s: f64,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: rate.burst,
            at: now,
        }
    }

    fn refill(&mut self, rate: Rate, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate.per_s).min(rate.burst);
        self.at = now;
    }

    /// How long until one token is there (zero: now).
    fn wait(&self, rate: Rate) -> Duration {
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / rate.per_s)
        }
    }
}

/// The bucket a client address counts in: an IPv4 address its own, an
/// IPv6 address its /64 (one host holds a whole /64 and could otherwise
/// take a bucket per address, draining the shared one alone); an IPv4
/// address written as IPv6 is the IPv4 address.
fn bucket_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut s = v6.segments();
                s[4..].fill(0);
                IpAddr::from(s)
            }
        },
    }
}

/// The buckets.
pub(crate) struct Throttle {
    state: Mutex<(HashMap<IpAddr, Bucket>, Bucket)>,
    per_client: Rate,
    all: Rate,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::with(PER_CLIENT, ALL_CLIENTS)
    }
}

impl Throttle {
    fn with(per_client: Rate, all: Rate) -> Self {
        Self {
            state: Mutex::new((HashMap::new(), Bucket::full(all, Instant::now()))),
            per_client,
            all,
        }
    }

    /// Takes a call for `client` (`None`: address unknown, only the shared
    /// bucket counts), or answers how long to wait.
    pub(crate) fn take(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let client = client.map(bucket_of);
        let mut guard = self.state.lock().expect("throttle lock");
        let (clients, all) = &mut *guard;
        all.refill(self.all, now);
        let mut wait = all.wait(self.all);
        if let Some(ip) = client {
            if clients.len() >= MAX_CLIENTS && !clients.contains_key(&ip) {
                let rate = self.per_client;
                clients.retain(|_, b| {
                    b.refill(rate, now);
                    b.tokens < rate.burst
                });
            }
            let b = clients
                .entry(ip)
                .or_insert_with(|| Bucket::full(self.per_client, now));
            b.refill(self.per_client, now);
            wait = wait.max(b.wait(self.per_client));
            if wait.is_zero() {
                b.tokens -= 1.0;
            }
        }
        if !wait.is_zero() {
            return Err(wait);
        }
        all.tokens -= 1.0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([192, 0, 2, last]))
    }

    #[test]
    fn an_ipv6_slash_64_is_one_client() {
        let t = Throttle::default();
        let now = Instant::now();
        let v6 = |last: u16| Some(IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, last]));
        for i in 0..60 {
            assert!(t.take(v6(i), now).is_ok());
        }
        assert!(
            t.take(v6(999), now).is_err(),
            "a new address of the same /64"
        );
        assert!(
            t.take(Some(IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1])), now)
                .is_ok(),
            "another /64"
        );
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(bucket_of(mapped), IpAddr::from([192, 0, 2, 7]));
    }

    #[test]
    fn one_client_gets_its_burst_then_waits_and_others_go_on() {
        let t = Throttle::default();
        let now = Instant::now();
        for _ in 0..60 {
            assert!(t.take(ip(1), now).is_ok());
        }
        let wait = t.take(ip(1), now).unwrap_err();
        assert!(
            wait > Duration::from_millis(500) && wait <= Duration::from_secs(1),
            "{wait:?}"
        );
        assert!(t.take(ip(2), now).is_ok(), "another client is not held up");
        assert!(t.take(ip(1), now + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn many_clients_together_are_bounded_by_the_shared_bucket() {
        let t = Throttle::default();
        let now = Instant::now();
        let mut ok = 0;
        for n in 0..1_000u32 {
            let a = IpAddr::from(n.to_be_bytes());
            if t.take(Some(a), now).is_ok() {
                ok += 1;
            }
        }
        assert_eq!(ok, 300);
        assert!(t.take(None, now).is_err());
        assert!(t.take(None, now + Duration::from_millis(150)).is_ok());
    }

    #[test]
    fn the_table_of_clients_stays_bounded() {
        let t = Throttle::default();
        let now = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 + 500) {
            let _ = t.take(
                Some(IpAddr::from((n + 1).to_be_bytes())),
                now + Duration::from_secs(u64::from(n) / 10),
            );
        }
        let len = t.state.lock().unwrap().0.len();
        assert!(len <= MAX_CLIENTS + 1, "{len}");
    }
}
