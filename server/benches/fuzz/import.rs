//! Cookie imports (`vault::import`): storageState JSON, a CDP cookie
//! array, Netscape cookies.txt; then what `Vault::import` does with them
//! (the domain split, cookies and origins) and what injection does with
//! a kept cookie (`cdp::cookie_param`).

use cordon::vault::{Domain, import};
use rand::Rng;
use serde_json::{Value, json};

use crate::mutate::Gen;
use crate::{Outcome, Target};

pub const TARGET: Target = Target {
    name: "import",
    dict: &[
        "{\"cookies\":[",
        "\"origins\":[",
        "{\"name\":\"a\",\"value\":\"b\",\"domain\":\".example.com\"}",
        "\"localStorage\":[{\"name\":\"k\",\"value\":\"v\"}]",
        "\"expires\":",
        "\"expirationDate\":",
        "\"sameSite\":\"Lax\"",
        "\"partitionKey\":",
        "\"topLevelSite\":",
        "\"httpOnly\":true",
        "null",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\t",
        "\n",
        "#HttpOnly_",
        "# Netscape HTTP Cookie File\n",
        "TRUE",
        "FALSE",
        ".example.com",
        "\u{feff}",
    ],
    shape,
    run,
};

fn domain(g: &mut Gen) -> String {
    g.pick(&[
        "example.com",
        ".example.com",
        "app.example.com",
        ".app.example.com",
        "evil.com",
        "example.com.evil.com",
        "xn--exmple-cua.com",
        "127.0.0.1",
        "[::1]",
        "",
        ".",
    ])
    .to_string()
}

fn cookie(g: &mut Gen) -> Value {
    let mut c = json!({ "name": g.text(12), "value": g.text(30), "domain": domain(g) });
    let o = c.as_object_mut().expect("an object");
    if g.chance(0.5) {
        o.insert("path".into(), json!(g.pick(&["/", "/app", "", "x"])));
    }
    if g.chance(0.5) {
        let key = g.pick(&["expires", "expirationDate"]);
        let v = match g.below(4) {
            0 => json!(-1),
            1 => json!(1.9e9),
            2 => json!(g.rng.random::<f64>() * 1e12),
            _ => json!(i64::MAX),
        };
        o.insert(key.into(), v);
    }
    for flag in ["httpOnly", "secure"] {
        if g.chance(0.3) {
            o.insert(flag.into(), json!(g.chance(0.5)));
        }
    }
    if g.chance(0.3) {
        let s = g.pick(&["Strict", "Lax", "None", "no_restriction", "lax", "Bogus"]);
        o.insert("sameSite".into(), json!(s));
    }
    if g.chance(0.1) {
        let k = if g.chance(0.5) {
            json!("https://example.com")
        } else {
            json!({ "topLevelSite": "https://example.com", "hasCrossSiteAncestor": false })
        };
        o.insert("partitionKey".into(), k);
    }
    c
}

fn netscape(g: &mut Gen) -> String {
    let mut s = String::from("# Netscape HTTP Cookie File\n");
    for _ in 0..g.below(5) {
        let prefix = if g.chance(0.3) { "#HttpOnly_" } else { "" };
        let flag = |g: &mut Gen| g.pick(&["TRUE", "FALSE", "true", "yes"]);
        s.push_str(&format!(
            "{prefix}{}\t{}\t/\t{}\t{}\t{}\t{}\n",
            domain(g),
            flag(g),
            flag(g),
            g.pick(&["0", "1900000000", "-1", "99999999999999999999"]),
            g.text(10),
            g.text(20)
        ));
    }
    s
}

fn shape(g: &mut Gen) -> Vec<u8> {
    let cookies: Vec<Value> = (0..g.below(6)).map(|_| cookie(g)).collect();
    match g.below(3) {
        0 => {
            let origins: Vec<Value> = (0..g.below(3))
                .map(|_| {
                    let origin = g.pick(&[
                        "https://example.com",
                        "https://app.example.com:8443",
                        "http://evil.com",
                        "null",
                        "file:///etc",
                    ]);
                    json!({ "origin": origin,
                            "localStorage": [{ "name": g.text(8), "value": g.text(20) }] })
                })
                .collect();
            serde_json::to_vec(&json!({ "cookies": cookies, "origins": origins }))
        }
        1 => serde_json::to_vec(&json!({ "cookies": cookies })).map(|v| {
            // `Network.getCookies`' answer, or a bare array.
            if g.chance(0.5) {
                serde_json::to_vec(&cookies).unwrap_or(v)
            } else {
                v
            }
        }),
        _ => Ok(netscape(g).into_bytes()),
    }
    .expect("JSON of JSON values")
}

fn run(input: &[u8]) -> Outcome {
    let domain: Domain = "example.com".parse().expect("a domain");
    let parsed = match import::parse(input) {
        Ok(p) => p,
        Err(e) => return Outcome::Refused(e.code()),
    };
    let (kept, rejected) = import::partition(parsed.cookies, &domain);
    let (origins, _ignored) = import::partition_origins(parsed.origins, &domain);
    for c in &kept {
        // What injection sends Chromium; an error here is a typed refusal.
        if cordon::cdp::cookie_param(c).is_err() {
            return Outcome::Refused("cookie_param");
        }
        let _ = c.expires_ms();
    }
    for o in &origins {
        if o.host().is_none_or(|h| !domain.covers(&h)) {
            return Outcome::Odd(format!("origin {:?} kept for {domain}", o.origin));
        }
    }
    if !rejected.is_empty() {
        // `Vault::import` then fails with `foreign_cookies` (unless told to
        // drop them); its message lists them.
        let _ = import::ImportError::Foreign {
            domain: domain.clone(),
            rejected,
        }
        .to_string();
        return Outcome::Refused("foreign_cookies");
    }
    if kept.is_empty() {
        return Outcome::Refused("empty");
    }
    Outcome::Accepted
}
