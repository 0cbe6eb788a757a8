//! The internal hop's signature: one header, `x-cordon-hop`, that says who
//! the agent is (tenant and API key id, never the key) and binds the
//! request to its deployment, target replica, method, path, time, a nonce
//! and its body, under HMAC-SHA256 with `cluster_secret`.
//!
//! Pure functions; the replay memory ([`Nonces`]) is the receiver's.

use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use sha2::{Digest, Sha256};

use super::Cluster;

/// The header carrying the hop.
pub const HEADER: &str = "x-cordon-hop";
/// How far a hop's time may be from the receiver's clock, in ms.
pub const MAX_SKEW_MS: i64 = 30_000;
/// The longest header value read.
const MAX_HEADER: usize = 1024;

/// What a hop asserts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// When it was signed (Unix ms).
    pub ts: i64,
    /// 128 random bits, hex; seen once.
    pub nonce: String,
    /// The agent's tenant.
    pub tenant: String,
    /// The agent's API key id.
    pub key_id: String,
    /// The replica it is meant for.
    pub to: String,
}

/// What a hop is checked against on arrival.
pub struct Expect<'a> {
    /// The deployment's id (from the database).
    pub deployment: &'a str,
    /// This replica's name.
    pub me: &'a str,
    /// The request's method.
    pub method: &'a str,
    /// Its path and query.
    pub path: &'a str,
    /// Its body.
    pub body: &'a [u8],
    /// Now (Unix ms).
    pub now: i64,
}

/// Why a hop was refused (logged; the secret and signature never are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The header is not one this version writes.
    #[error("malformed hop header")]
    Malformed,
    /// Too old or from the future.
    #[error("hop outside the allowed clock skew")]
    Stale,
    /// Meant for another replica.
    #[error("hop meant for another replica")]
    WrongReplica,
    /// The signature does not match (another secret or deployment, or an
    /// altered request).
    #[error("hop signature does not match")]
    BadSignature,
    /// Its nonce was seen before.
    #[error("hop replayed")]
    Replayed,
    /// This replica has no `cluster_secret`.
    #[error("this replica takes no hops (no cluster_secret)")]
    NoSecret,
}

fn mac(
    secret: &[u8],
    deployment: &str,
    method: &str,
    path: &str,
    body: &[u8],
    c: &Claims,
) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    let body_hash = hex::encode(Sha256::digest(body));
    for part in [
        "cordon-hop-v1",
        deployment,
        &c.to,
        method,
        path,
        &c.ts.to_string(),
        &c.nonce,
        &c.tenant,
        &c.key_id,
        &body_hash,
    ] {
        // Length-prefixed, so no two different lists sign alike.
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part.as_bytes());
    }
    m
}

/// The header value for a request.
pub fn sign(
    secret: &[u8],
    deployment: &str,
    method: &str,
    path: &str,
    body: &[u8],
    c: &Claims,
) -> String {
    let sig = hex::encode(
        mac(secret, deployment, method, path, body, c)
            .finalize()
            .into_bytes(),
    );
    format!(
        "v1 ts={} nonce={} tenant={} key={} to={} sig={sig}",
        c.ts, c.nonce, c.tenant, c.key_id, c.to
    )
}

fn token_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Parses and checks a header value (everything but replay, which needs
/// the receiver's memory: [`Nonces::first_time`]).
pub fn verify(secret: &[u8], header: &str, want: &Expect<'_>) -> Result<Claims, Refusal> {
    if header.len() > MAX_HEADER {
        return Err(Refusal::Malformed);
    }
    let mut parts = header.split(' ');
    if parts.next() != Some("v1") {
        return Err(Refusal::Malformed);
    }
    let mut fields: HashMap<&str, &str> = HashMap::new();
    for p in parts {
        let (k, v) = p.split_once('=').ok_or(Refusal::Malformed)?;
        if !token_ok(v) || fields.insert(k, v).is_some() {
            return Err(Refusal::Malformed);
        }
    }
    let get = |k: &str| fields.get(k).copied().ok_or(Refusal::Malformed);
    if fields.len() != 6 {
        return Err(Refusal::Malformed);
    }
    let claims = Claims {
        ts: get("ts")?.parse().map_err(|_| Refusal::Malformed)?,
        nonce: get("nonce")?.to_owned(),
        tenant: get("tenant")?.to_owned(),
        key_id: get("key")?.to_owned(),
        to: get("to")?.to_owned(),
    };
    let sig = hex::decode(get("sig")?).map_err(|_| Refusal::Malformed)?;
    if claims.nonce.len() != 32 {
        return Err(Refusal::Malformed);
    }
    // The signature first: an unsigned header learns nothing from which
    // check failed.
    mac(
        secret,
        want.deployment,
        want.method,
        want.path,
        want.body,
        &claims,
    )
    .verify_slice(&sig)
    .map_err(|_| Refusal::BadSignature)?;
    // `abs_diff`: a signed `ts` near `i64::MIN` must not overflow the check.
    if want.now.abs_diff(claims.ts) > MAX_SKEW_MS.unsigned_abs() {
        return Err(Refusal::Stale);
    }
    if claims.to != want.me {
        return Err(Refusal::WrongReplica);
    }
    Ok(claims)
}

/// Nonces seen within the skew window, so a captured hop is not replayed.
#[derive(Default)]
pub struct Nonces(Mutex<HashMap<String, i64>>);

/// Beyond this many remembered nonces the oldest half is forgotten early
/// (a flood then costs memory, never a refusal of fresh hops).
const MAX_NONCES: usize = 200_000;

impl Nonces {
    /// True the first time `nonce` is seen within the window.
    pub fn first_time(&self, nonce: &str, now: i64) -> bool {
        let mut seen = self.0.lock().expect("nonces lock");
        if seen.len() >= MAX_NONCES {
            let cutoff = now - MAX_SKEW_MS;
            seen.retain(|_, t| *t >= cutoff);
        }
        if seen.contains_key(nonce) {
            return false;
        }
        seen.insert(nonce.to_owned(), now + MAX_SKEW_MS);
        // Forget expired ones now and then.
        if seen.len().is_multiple_of(1024) {
            seen.retain(|_, t| *t >= now - MAX_SKEW_MS);
        }
        true
    }
}

impl Cluster {
    /// Signs a hop to `to` (`None` without a `cluster_secret`).
    pub fn sign(
        &self,
        to: &str,
        method: &str,
        path: &str,
        body: &[u8],
        tenant: &str,
        key_id: &str,
    ) -> Option<String> {
        let secret = self.0.secret.as_ref()?;
        let claims = Claims {
            ts: self.now(),
            nonce: hex::encode(rand::random::<[u8; 16]>()),
            tenant: tenant.to_owned(),
            key_id: key_id.to_owned(),
            to: to.to_owned(),
        };
        Some(sign(
            secret.expose_secret().as_bytes(),
            &self.0.deployment,
            method,
            path,
            body,
            &claims,
        ))
    }

    /// Checks an arriving hop, replay included.
    pub fn accept(
        &self,
        header: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Claims, Refusal> {
        let secret = self.0.secret.as_ref().ok_or(Refusal::NoSecret)?;
        let now = self.now();
        let claims = verify(
            secret.expose_secret().as_bytes(),
            header,
            &Expect {
                deployment: &self.0.deployment,
                me: &self.0.name,
                method,
                path,
                body,
                now,
            },
        )?;
        if !self.0.nonces.first_time(&claims.nonce, now) {
            return Err(Refusal::Replayed);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn claims() -> Claims {
        Claims {
            ts: 1_000_000,
            nonce: "a".repeat(32),
            tenant: "acme".into(),
            key_id: "key_abc".into(),
            to: "b".into(),
        }
    }

    fn expect(body: &[u8]) -> Expect<'_> {
        Expect {
            deployment: "dep1",
            me: "b",
            method: "POST",
            path: "/api/sessions/s_1/click",
            body,
            now: 1_000_500,
        }
    }

    fn header() -> String {
        sign(
            SECRET,
            "dep1",
            "POST",
            "/api/sessions/s_1/click",
            b"{}",
            &claims(),
        )
    }

    #[test]
    fn a_signed_hop_verifies_with_its_claims() {
        assert_eq!(verify(SECRET, &header(), &expect(b"{}")), Ok(claims()));
    }

    #[test]
    fn the_header_carries_no_secret() {
        let h = header();
        assert!(!h.contains("0123456789abcdef0123456789abcdef"), "{h}");
    }

    #[test]
    fn another_secret_deployment_body_path_or_method_is_a_bad_signature() {
        let h = header();
        let other = b"another secret of thirty-two byt";
        assert_eq!(
            verify(other, &h, &expect(b"{}")),
            Err(Refusal::BadSignature)
        );
        let mut e = expect(b"{}");
        e.deployment = "dep2";
        assert_eq!(verify(SECRET, &h, &e), Err(Refusal::BadSignature));
        assert_eq!(
            verify(SECRET, &h, &expect(b"{\"x\":1}")),
            Err(Refusal::BadSignature)
        );
        let mut e = expect(b"{}");
        e.path = "/api/sessions/s_2/click";
        assert_eq!(verify(SECRET, &h, &e), Err(Refusal::BadSignature));
        let mut e = expect(b"{}");
        e.method = "DELETE";
        assert_eq!(verify(SECRET, &h, &e), Err(Refusal::BadSignature));
    }

    #[test]
    fn altered_claims_are_a_bad_signature() {
        let h = header().replace("tenant=acme", "tenant=evil");
        assert_eq!(
            verify(SECRET, &h, &expect(b"{}")),
            Err(Refusal::BadSignature)
        );
        let h = header().replace("key=key_abc", "key=key_xyz");
        assert_eq!(
            verify(SECRET, &h, &expect(b"{}")),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn a_signed_hop_with_an_extreme_time_is_stale_not_a_panic() {
        // Found by the fuzz bench: `now - ts` overflowed for ts = i64::MIN.
        for ts in [i64::MIN, i64::MIN + 1, i64::MAX, -1] {
            let c = Claims { ts, ..claims() };
            let h = sign(SECRET, "dep1", "POST", "/api/sessions/s_1/click", b"{}", &c);
            assert_eq!(
                verify(SECRET, &h, &expect(b"{}")),
                Err(Refusal::Stale),
                "{ts}"
            );
        }
    }

    #[test]
    fn an_old_or_future_hop_is_stale_and_one_for_another_replica_is_refused() {
        let mut e = expect(b"{}");
        e.now = 1_000_000 + MAX_SKEW_MS + 1;
        assert_eq!(verify(SECRET, &header(), &e), Err(Refusal::Stale));
        e.now = 1_000_000 - MAX_SKEW_MS - 1;
        assert_eq!(verify(SECRET, &header(), &e), Err(Refusal::Stale));
        let mut e = expect(b"{}");
        e.me = "c";
        assert_eq!(verify(SECRET, &header(), &e), Err(Refusal::WrongReplica));
    }

    #[test]
    fn malformed_headers_are_refused() {
        for bad in [
            String::new(),
            "v2 ts=1".into(),
            "v1".into(),
            "v1 ts=1 nonce=x tenant=a key=b to=c".into(),
            header().replace(" sig=", " sig=zz"),
            header() + " extra=1",
            header().replace("tenant=acme", "tenant=a;b"),
            header().replace("tenant=acme", "tenant=acme tenant=acme"),
            "v1 ".to_owned() + &"x".repeat(2000),
            header().replace(&"a".repeat(32), "short"),
        ] {
            assert_eq!(
                verify(SECRET, &bad, &expect(b"{}")),
                Err(Refusal::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_nonce_is_taken_once() {
        let n = Nonces::default();
        assert!(n.first_time("abc", 10));
        assert!(!n.first_time("abc", 20), "replayed");
        assert!(n.first_time("abd", 20));
    }
}
