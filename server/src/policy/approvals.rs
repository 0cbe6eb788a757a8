//! Actions waiting for an operator's decision, in memory: the agent's call
//! holds a [`Waiting`] and sleeps on it; the dashboard lists them and
//! decides. An entry lives exactly as long as its waiting call: a decision,
//! the timeout or the caller going away (its future dropped) removes it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use super::Level;
use crate::events::{Changes, Topic};

/// An operator's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it; by this operator id.
    Approved(String),
    /// Refuse it; by this operator id.
    Denied(String),
}

/// What the dashboard shows of a pending approval (params redacted as in
/// the audit log). Serialised between replicas (`cluster::internal`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pending {
    /// `apr_…`.
    pub id: String,
    /// The session's tenant.
    pub tenant: String,
    /// `s_…`.
    pub session: String,
    /// The actor asking (`agent:k_…`).
    pub actor: String,
    /// `tool.click`, …
    pub action: String,
    /// Redacted params.
    pub params: Value,
    /// The assessed level.
    pub level: Level,
    /// Why.
    pub reasons: Vec<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms; denied after.
    pub expires_at: i64,
    /// A screenshot of the page at request time is kept.
    pub has_screenshot: bool,
}

struct Entry {
    info: Pending,
    screenshot: Option<Arc<Vec<u8>>>,
    tx: oneshot::Sender<Decision>,
}

/// The registry; cheap to clone.
#[derive(Clone)]
pub struct Approvals {
    pending: Arc<Mutex<BTreeMap<String, Entry>>>,
    changes: Changes,
}

/// Why a decision could not be recorded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// Unknown id, or already decided, timed out or abandoned.
    #[error("no pending approval has this id (decided, timed out or withdrawn)")]
    NotFound,
}

/// A call waiting for its decision; dropping it withdraws the request.
pub struct Waiting {
    /// `apr_…`.
    pub id: String,
    rx: Option<oneshot::Receiver<Decision>>,
    approvals: Approvals,
}

impl Waiting {
    /// The decision, or `None` once `timeout` has passed (the request is
    /// then withdrawn; a decision that raced the timeout still counts).
    pub async fn decision(mut self, timeout: std::time::Duration) -> Option<Decision> {
        let mut rx = self.rx.take()?;
        match tokio::time::timeout(timeout, &mut rx).await {
            Ok(decision) => decision.ok(),
            Err(_) if self.approvals.withdraw(&self.id) => None,
            // Decided just now: the sender was taken out with the entry.
            Err(_) => rx.await.ok(),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.approvals.withdraw(&self.id);
    }
}

impl Approvals {
    /// An empty registry publishing on `changes`.
    pub fn new(changes: Changes) -> Self {
        Self {
            pending: Arc::default(),
            changes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.pending.lock().expect("approvals lock")
    }

    /// Adds a pending approval (its `id` is drawn here).
    pub fn open(&self, mut info: Pending, screenshot: Option<Vec<u8>>) -> (Waiting, Pending) {
        let (tx, rx) = oneshot::channel();
        info.id = crate::ids::random_id(crate::ids::APPROVAL);
        info.has_screenshot = screenshot.is_some();
        self.lock().insert(
            info.id.clone(),
            Entry {
                info: info.clone(),
                screenshot: screenshot.map(Arc::new),
                tx,
            },
        );
        self.changes.publish(Topic::Approvals);
        let waiting = Waiting {
            id: info.id.clone(),
            rx: Some(rx),
            approvals: self.clone(),
        };
        (waiting, info)
    }

    /// Records a decision and wakes the waiting call; answers what was decided.
    pub fn decide(&self, id: &str, decision: Decision) -> Result<Pending, DecideError> {
        let entry = self.lock().remove(id).ok_or(DecideError::NotFound)?;
        self.changes.publish(Topic::Approvals);
        // A caller that went away in between has withdrawn nothing yet
        // (the entry was still here), so the decision still stands.
        let _ = entry.tx.send(decision);
        Ok(entry.info)
    }

    /// Removes a request; whether it was still pending.
    fn withdraw(&self, id: &str) -> bool {
        let removed = self.lock().remove(id).is_some();
        if removed {
            self.changes.publish(Topic::Approvals);
        }
        removed
    }

    /// Every pending approval, oldest first.
    pub fn list(&self) -> Vec<Pending> {
        let mut all: Vec<Pending> = self.lock().values().map(|e| e.info.clone()).collect();
        all.sort_by_key(|p| p.created_at);
        all
    }

    /// How many wait.
    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// A pending approval's screenshot (JPEG).
    pub fn screenshot(&self, id: &str) -> Option<Arc<Vec<u8>>> {
        self.lock().get(id).and_then(|e| e.screenshot.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pending() -> Pending {
        Pending {
            id: String::new(),
            tenant: "acme".into(),
            session: "s_x".into(),
            actor: "agent:k_x".into(),
            action: "tool.click".into(),
            params: serde_json::json!({}),
            level: Level::High,
            reasons: vec![],
            created_at: 1,
            expires_at: 2,
            has_screenshot: false,
        }
    }

    #[tokio::test]
    async fn a_decision_wakes_the_waiting_call_and_removes_the_entry() {
        let a = Approvals::new(Changes::default());
        let (waiting, info) = a.open(pending(), Some(vec![1, 2]));
        assert!(info.id.starts_with("apr_") && info.has_screenshot);
        assert_eq!(a.count(), 1);
        assert_eq!(a.screenshot(&info.id).unwrap().as_slice(), &[1, 2]);
        a.decide(&info.id, Decision::Approved("op_1".into()))
            .unwrap();
        assert_eq!(
            waiting.decision(Duration::from_secs(5)).await,
            Some(Decision::Approved("op_1".into()))
        );
        assert_eq!(a.count(), 0);
        assert_eq!(
            a.decide(&info.id, Decision::Denied("op_1".into())),
            Err(DecideError::NotFound)
        );
    }

    #[tokio::test]
    async fn a_timeout_or_a_dropped_call_withdraws_the_request() {
        let a = Approvals::new(Changes::default());
        let (waiting, info) = a.open(pending(), None);
        assert_eq!(waiting.decision(Duration::from_millis(10)).await, None);
        assert!(a.decide(&info.id, Decision::Denied("op".into())).is_err());
        let (waiting, _) = a.open(pending(), None);
        assert_eq!(a.count(), 1);
        drop(waiting);
        assert_eq!(a.count(), 0);
    }
}
