//! How much a live view may send: two token buckets per view. Pointer
//! moves and wheel turns (they come at the screen's rate) take from one:
//! 240 a second, bursts as many; what acts and is audited one row each
//! (presses, keys, text, a dialog's answer, navigation, tabs, control)
//! from the other: 50 a second, bursts of 100 (a fast typist's down and
//! up for 20 characters a second is 40). Moves never starve a press.
//! What is over is dropped, and the view is told at most once a second.
//! A button or key whose press passed always has its release passed (and
//! queued, `socket.rs`), so nothing is left held down in the browser.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use app::api::live::{ClientMsg, KeyAction, MouseAction, MouseButton};

/// Pointer moves and wheel turns a second: also their largest burst.
pub const MOVES_PER_S: f64 = 240.0;
/// What acts and is audited one row each.
pub const ACTS_PER_S: f64 = 50.0;
/// How often a view is told that it sends too much.
const TELL_EVERY: Duration = Duration::from_secs(1);
/// Presses followed (their release always passes); more are not followed.
const MAX_HELD: usize = 32;

struct Bucket {
    per_s: f64,
    burst: f64,
    tokens: f64,
}

impl Bucket {
    fn new(per_s: f64, burst: f64) -> Self {
        Self {
            per_s,
            burst,
            tokens: burst,
        }
    }

    fn refill(&mut self, elapsed: Duration) {
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.per_s).min(self.burst);
    }
}

/// Something held down that was let through.
#[derive(Hash, PartialEq, Eq)]
enum Held {
    Button(MouseButton),
    Key(String),
}

/// What to do with one message.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    Pass,
    /// Dropped; `tell`: say so to the view now (once a second).
    Drop {
        tell: bool,
    },
}

/// One view's input limit.
pub struct InputLimit {
    moves: Bucket,
    acts: Bucket,
    at: Instant,
    held: HashSet<Held>,
    told: Option<Instant>,
}

impl InputLimit {
    pub fn new(now: Instant) -> Self {
        Self {
            moves: Bucket::new(MOVES_PER_S, MOVES_PER_S),
            acts: Bucket::new(ACTS_PER_S, ACTS_PER_S * 2.0),
            at: now,
            held: HashSet::new(),
            told: None,
        }
    }

    /// Whether `msg`, arriving `now`, passes.
    pub fn admit(&mut self, msg: &ClientMsg, now: Instant) -> Admit {
        let elapsed = now.saturating_duration_since(self.at);
        self.at = now;
        self.moves.refill(elapsed);
        self.acts.refill(elapsed);
        // A release of what was let down passes whatever the buckets hold.
        let release = match msg {
            ClientMsg::Mouse {
                action: MouseAction::Up,
                button,
                ..
            } => Some(Held::Button(*button)),
            ClientMsg::Key {
                action: KeyAction::Up,
                code,
                key,
                ..
            } => Some(Held::Key(key_of(code, key))),
            _ => None,
        };
        if let Some(r) = release
            && self.held.remove(&r)
        {
            return Admit::Pass;
        }
        let moves = matches!(
            msg,
            ClientMsg::Mouse {
                action: MouseAction::Move,
                ..
            } | ClientMsg::Wheel { .. }
        );
        let bucket = if moves {
            &mut self.moves
        } else {
            &mut self.acts
        };
        if bucket.tokens < 1.0 {
            let tell = self
                .told
                .is_none_or(|t| now.saturating_duration_since(t) >= TELL_EVERY);
            if tell {
                self.told = Some(now);
            }
            return Admit::Drop { tell };
        }
        bucket.tokens -= 1.0;
        let press = match msg {
            ClientMsg::Mouse {
                action: MouseAction::Down,
                button,
                ..
            } => Some(Held::Button(*button)),
            ClientMsg::Key {
                action: KeyAction::Down,
                code,
                key,
                ..
            } => Some(Held::Key(key_of(code, key))),
            _ => None,
        };
        if let Some(p) = press
            && self.held.len() < MAX_HELD
        {
            self.held.insert(p);
        }
        Admit::Pass
    }
}

/// A key by its place on the keyboard, or its meaning when no place is
/// given (cut: a key's name is short; a hostile one is not kept whole).
fn key_of(code: &str, key: &str) -> String {
    let k = if code.is_empty() { key } else { code };
    k.chars().take(32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use app::api::live::Modifiers;

    fn key(action: KeyAction, code: &str) -> ClientMsg {
        ClientMsg::Key {
            action,
            key: "a".into(),
            code: code.into(),
            modifiers: Modifiers::default(),
        }
    }

    fn mouse(action: MouseAction) -> ClientMsg {
        ClientMsg::Mouse {
            action,
            x: 1.0,
            y: 1.0,
            button: MouseButton::Left,
            buttons: 0,
            click_count: 1,
            modifiers: Modifiers::default(),
        }
    }

    fn wheel() -> ClientMsg {
        ClientMsg::Wheel {
            x: 1.0,
            y: 1.0,
            dx: 0.0,
            dy: 10.0,
            modifiers: Modifiers::default(),
        }
    }

    fn passed(limit: &mut InputLimit, msg: &ClientMsg, now: Instant, n: usize) -> usize {
        (0..n)
            .filter(|_| limit.admit(msg, now) == Admit::Pass)
            .count()
    }

    #[test]
    fn a_burst_passes_then_the_rate_and_the_view_is_told_once_a_second() {
        let t0 = Instant::now();
        let mut l = InputLimit::new(t0);
        let text = ClientMsg::Text { text: "x".into() };
        // A burst of twice the acting rate, then nothing.
        assert_eq!(passed(&mut l, &text, t0, 1000), 100);
        // Told once for the 900, then again a second later.
        let mut l = InputLimit::new(t0);
        let tells: Vec<bool> = (0..300)
            .filter_map(|_| match l.admit(&text, t0) {
                Admit::Drop { tell } => Some(tell),
                Admit::Pass => None,
            })
            .collect();
        assert_eq!(tells.iter().filter(|t| **t).count(), 1, "{tells:?}");
        let t1 = t0 + Duration::from_millis(100);
        // A tenth of a second refills five.
        assert_eq!(passed(&mut l, &text, t1, 100), 5);
        assert_eq!(l.admit(&text, t1), Admit::Drop { tell: false });
        let t2 = t0 + Duration::from_millis(1100);
        assert_eq!(passed(&mut l, &text, t2, 50), 50);
        assert_eq!(l.admit(&text, t2), Admit::Drop { tell: true });
        // The acting bucket never holds more than twice its rate.
        let later = t2 + Duration::from_secs(3600);
        assert_eq!(passed(&mut l, &text, later, 1000), 100);
    }

    #[test]
    fn moves_and_wheel_turns_have_their_own_bucket_and_never_starve_a_press() {
        let t0 = Instant::now();
        let mut l = InputLimit::new(t0);
        assert_eq!(passed(&mut l, &wheel(), t0, 2000), 240);
        assert_eq!(passed(&mut l, &mouse(MouseAction::Move), t0, 10), 0);
        // The acting bucket is untouched: a key still goes down.
        assert_eq!(l.admit(&key(KeyAction::Down, "KeyA"), t0), Admit::Pass);
        let mut l = InputLimit::new(t0);
        assert_eq!(
            passed(&mut l, &ClientMsg::Text { text: "x".into() }, t0, 500),
            100
        );
        assert_eq!(passed(&mut l, &mouse(MouseAction::Move), t0, 200), 200);
    }

    #[test]
    fn a_press_that_passed_is_always_released_and_a_stray_release_is_not_free() {
        let t0 = Instant::now();
        let mut l = InputLimit::new(t0);
        assert_eq!(l.admit(&mouse(MouseAction::Down), t0), Admit::Pass);
        assert_eq!(l.admit(&key(KeyAction::Down, "ShiftLeft"), t0), Admit::Pass);
        // Exhaust the acting bucket.
        passed(&mut l, &ClientMsg::Text { text: "x".into() }, t0, 500);
        assert!(matches!(
            l.admit(&key(KeyAction::Down, "KeyB"), t0),
            Admit::Drop { .. }
        ));
        // The two held are released; a second release of either, or of
        // one never let down, is dropped.
        assert_eq!(l.admit(&mouse(MouseAction::Up), t0), Admit::Pass);
        assert_eq!(l.admit(&key(KeyAction::Up, "ShiftLeft"), t0), Admit::Pass);
        assert!(matches!(
            l.admit(&mouse(MouseAction::Up), t0),
            Admit::Drop { .. }
        ));
        assert!(matches!(
            l.admit(&key(KeyAction::Up, "KeyB"), t0),
            Admit::Drop { .. }
        ));
        assert!(matches!(
            l.admit(&key(KeyAction::Up, "ShiftLeft"), t0),
            Admit::Drop { .. }
        ));
    }

    #[test]
    fn a_flood_of_distinct_presses_follows_a_bounded_number() {
        let t0 = Instant::now();
        let mut l = InputLimit::new(t0);
        for i in 0..10_000u32 {
            let long = format!("{i}{}", "x".repeat(10_000));
            let _ = l.admit(
                &key(KeyAction::Down, &long),
                t0 + Duration::from_secs(u64::from(i)),
            );
        }
        assert!(l.held.len() <= MAX_HELD);
        assert!(l.held.iter().all(|h| match h {
            Held::Key(k) => k.chars().count() <= 32,
            Held::Button(_) => true,
        }));
    }
}
