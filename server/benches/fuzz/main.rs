//! Fuzzing the parsers at Cordon's edges, on stable Rust, with fixed budgets.
//!
//! `cargo bench -p cordon --profile dev --bench fuzz` (the dev profile keeps
//! overflow checks and debug assertions on, as `cargo fuzz` does, and reuses
//! the test build). Env: `FUZZ_EXECS` per target (default 1,000,000),
//! `FUZZ_ONLY=uitars,import,live,api,hop` (default all), `FUZZ_SEED`
//! (default 20261126; the same seed replays the same inputs).
//!
//! Each input is one of: a valid shape of the target (15 %), a valid shape
//! after 1–6 mutations (70 %), or random bytes, half of them printable with
//! the target's words spliced in (15 %). A target returns a typed outcome;
//! a panic is caught per input and the first failing input is printed in
//! hex. Exits non-zero on any panic or broken property. TESTING.md says more.

mod api;
mod hop;
mod import;
mod live;
mod mutate;
mod uitars;

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::time::Instant;

use mutate::{Gen, hex_prefix};

/// What a target made of one input.
pub enum Outcome {
    /// Parsed and checked.
    Accepted,
    /// Refused with a typed error (its code).
    Refused(&'static str),
    /// Parsed, but a property the code promises does not hold.
    Odd(String),
}

/// One fuzz target.
pub struct Target {
    /// Its name in `FUZZ_ONLY` and the report.
    pub name: &'static str,
    /// Words spliced into inputs.
    pub dict: &'static [&'static str],
    /// A valid (or nearly valid) input.
    pub shape: fn(&mut Gen) -> Vec<u8>,
    /// The code under test.
    pub run: fn(&[u8]) -> Outcome,
}

const TARGETS: &[Target] = &[
    uitars::TARGET,
    import::TARGET,
    live::TARGET,
    api::TARGET,
    hop::TARGET,
];

/// The last panic's message and place, set by the hook.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

struct Report {
    execs: u64,
    accepted: u64,
    refused: BTreeMap<&'static str, u64>,
    panics: u64,
    first_panic: Option<(String, String)>,
    odd: u64,
    first_odd: Option<(String, String)>,
    secs: f64,
}

fn fuzz(t: &Target, execs: u64, seed: u64) -> Report {
    // Each target its own stream, so FUZZ_ONLY does not change the inputs.
    let name_hash = t.name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut g = Gen::new(seed ^ name_hash, t.dict);
    let mut r = Report {
        execs: 0,
        accepted: 0,
        refused: BTreeMap::new(),
        panics: 0,
        first_panic: None,
        odd: 0,
        first_odd: None,
        secs: 0.0,
    };
    let started = Instant::now();
    for _ in 0..execs {
        let input = match g.below(100) {
            0..15 => (t.shape)(&mut g),
            15..85 => {
                let shape = (t.shape)(&mut g);
                g.mutate(shape)
            }
            _ => g.random_bytes(),
        };
        r.execs += 1;
        match panic::catch_unwind(AssertUnwindSafe(|| (t.run)(&input))) {
            Ok(Outcome::Accepted) => r.accepted += 1,
            Ok(Outcome::Refused(code)) => *r.refused.entry(code).or_default() += 1,
            Ok(Outcome::Odd(what)) => {
                r.odd += 1;
                r.first_odd
                    .get_or_insert_with(|| (hex_prefix(&input, 256), what));
            }
            Err(_) => {
                r.panics += 1;
                let msg = LAST_PANIC
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .unwrap_or_default();
                r.first_panic
                    .get_or_insert_with(|| (hex_prefix(&input, 256), msg));
            }
        }
    }
    r.secs = started.elapsed().as_secs_f64();
    r
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read from the command line.
    let execs: u64 = std::env::var("FUZZ_EXECS")
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(1_000_000);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_261_126);
    let only: Option<Vec<String>> = std::env::var("FUZZ_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    if let Some(only) = &only
        && let Some(unknown) = only.iter().find(|n| !TARGETS.iter().any(|t| t.name == *n))
    {
        eprintln!("FUZZ_ONLY: no target {unknown:?}");
        std::process::exit(2);
    }
    panic::set_hook(Box::new(|info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{msg} at {place}"));
    }));
    println!(
        "fuzz: {execs} executions per target, seed {seed}, debug assertions {}",
        if cfg!(debug_assertions) { "on" } else { "off" }
    );
    let mut failed = false;
    for t in TARGETS {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == t.name))
        {
            continue;
        }
        let r = fuzz(t, execs, seed);
        let refused: u64 = r.refused.values().sum();
        println!(
            "{:<7} {:>9} execs  {:>7.1} s  {:>8.0}/s  accepted {:>8}  refused {:>8}  panics {}  broken properties {}",
            t.name,
            r.execs,
            r.secs,
            r.execs as f64 / r.secs.max(1e-9),
            r.accepted,
            refused,
            r.panics,
            r.odd,
        );
        let codes: Vec<String> = r.refused.iter().map(|(c, n)| format!("{c} {n}")).collect();
        println!("        refusals: {}", codes.join(", "));
        if let Some((input, msg)) = &r.first_panic {
            println!("        FIRST PANIC: {msg}\n        input (hex): {input}");
        }
        if let Some((input, what)) = &r.first_odd {
            println!("        FIRST BROKEN PROPERTY: {what}\n        input (hex): {input}");
        }
        failed |= r.panics > 0 || r.odd > 0;
    }
    if failed {
        std::process::exit(1);
    }
}
