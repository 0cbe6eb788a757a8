//! The internal hop's header (`cluster::hop::verify`): malformed, forged,
//! stale and misdirected headers, and correctly signed ones with odd
//! claims in them (only a holder of the cluster secret can send those, but
//! the receiver must still not fall over).

use cordon::cluster::hop::{self, Claims, Expect};
use rand::Rng;

use crate::mutate::Gen;
use crate::{Outcome, Target};

const SECRET: &[u8] = b"fuzz-cluster-secret-0123456789abcdef";
const NOW: i64 = 1_795_000_000_000;
const BODY: &[u8] = b"{\"selector\":\"#go\"}";

fn expect() -> Expect<'static> {
    Expect {
        deployment: "d_fuzz",
        me: "r1",
        method: "POST",
        path: "/api/sessions/s_abc/click",
        body: BODY,
        now: NOW,
    }
}

pub const TARGET: Target = Target {
    name: "hop",
    dict: &[
        "v1 ",
        "v2 ",
        " ts=",
        " nonce=",
        " tenant=",
        " key=",
        " to=",
        " sig=",
        "=",
        " ",
        "  ",
        "r1",
        "-",
        "00112233445566778899aabbccddeeff",
    ],
    shape,
    run,
};

fn token(g: &mut Gen) -> String {
    match g.below(8) {
        0 => String::new(),
        1 => "a".repeat(129),
        2 => g.text(6),
        _ => format!("t{}", g.below(1000)),
    }
}

fn shape(g: &mut Gen) -> Vec<u8> {
    let ts = match g.below(6) {
        0 => g.odd_number().parse().unwrap_or(i64::MIN),
        1 => g.pick(&[i64::MIN, i64::MIN + 1, i64::MAX, 0, -1]),
        2 => NOW - hop::MAX_SKEW_MS - 1,
        _ => NOW + g.rng.random_range(-40_000..40_000),
    };
    let mut nonce = [0u8; 16];
    g.rng.fill(&mut nonce);
    let claims = Claims {
        ts,
        nonce: hex::encode(nonce),
        tenant: token(g),
        key_id: token(g),
        to: if g.chance(0.8) { "r1".into() } else { token(g) },
    };
    let e = expect();
    let header = hop::sign(SECRET, e.deployment, e.method, e.path, e.body, &claims);
    header.into_bytes()
}

fn run(input: &[u8]) -> Outcome {
    // Header values reach `verify` as `&str` (`HeaderValue::to_str`).
    let Ok(header) = std::str::from_utf8(input) else {
        return Outcome::Refused("not_text");
    };
    match hop::verify(SECRET, header, &expect()) {
        Ok(claims) => {
            let e = expect();
            let again = hop::sign(SECRET, e.deployment, e.method, e.path, e.body, &claims);
            if hop::verify(SECRET, &again, &e).as_ref() != Ok(&claims) {
                return Outcome::Odd(format!("{claims:?} does not verify once re-signed"));
            }
            Outcome::Accepted
        }
        Err(r) => Outcome::Refused(match r {
            hop::Refusal::Malformed => "malformed",
            hop::Refusal::Stale => "stale",
            hop::Refusal::WrongReplica => "wrong_replica",
            hop::Refusal::BadSignature => "bad_signature",
            hop::Refusal::Replayed => "replayed",
            hop::Refusal::NoSecret => "no_secret",
        }),
    }
}
