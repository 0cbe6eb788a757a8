//! What one listener refused lately, kept in memory so the session engine
//! can tell an agent, in a tool's result, which of its requests the guard
//! turned away (the egress log has the durable record).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One refused request: where it wanted to go and why it may not.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Refusal {
    /// The host as asked for (a name or a normalised IP literal).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// The guard's reason (`loopback`, `private`, `unresolved` …).
    pub reason: String,
}

/// How many refusals are remembered; older ones are only counted.
const KEPT: usize = 64;

#[derive(Debug, Default)]
struct Journal {
    /// Refusals since the listener started.
    total: u64,
    /// The newest [`KEPT`], oldest first.
    recent: VecDeque<Refusal>,
}

/// A listener's refusal journal; cheap to clone, shared with its session.
#[derive(Debug, Clone, Default)]
pub struct Refusals(Arc<Mutex<Journal>>);

impl Refusals {
    /// Notes a refusal.
    pub(super) fn record(&self, refusal: Refusal) {
        let mut j = self.0.lock().expect("refusals lock");
        j.total += 1;
        if j.recent.len() == KEPT {
            j.recent.pop_front();
        }
        j.recent.push_back(refusal);
    }

    /// A position to read later refusals from.
    pub fn mark(&self) -> u64 {
        self.0.lock().expect("refusals lock").total
    }

    /// The refusals after `mark`: how many there were, and those still kept.
    pub fn since(&self, mark: u64) -> (u64, Vec<Refusal>) {
        let j = self.0.lock().expect("refusals lock");
        let count = j.total.saturating_sub(mark);
        let kept = usize::try_from(count)
            .unwrap_or(usize::MAX)
            .min(j.recent.len());
        let skip = j.recent.len() - kept;
        (count, j.recent.iter().skip(skip).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(host: &str) -> Refusal {
        Refusal {
            host: host.into(),
            port: 80,
            reason: "loopback".into(),
        }
    }

    #[test]
    fn refusals_after_a_mark_are_returned_in_order() {
        let j = Refusals::default();
        j.record(r("a"));
        let mark = j.mark();
        j.record(r("b"));
        j.record(r("c"));
        let (n, list) = j.since(mark);
        assert_eq!(n, 2);
        assert_eq!(
            list.iter().map(|r| r.host.as_str()).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert_eq!(j.since(j.mark()), (0, vec![]));
    }

    #[test]
    fn only_the_newest_are_kept_but_all_are_counted() {
        let j = Refusals::default();
        let mark = j.mark();
        for i in 0..100 {
            j.record(r(&format!("h{i}")));
        }
        let (n, list) = j.since(mark);
        assert_eq!(n, 100);
        assert_eq!(list.len(), KEPT);
        assert_eq!(list.last().unwrap().host, "h99");
    }
}
