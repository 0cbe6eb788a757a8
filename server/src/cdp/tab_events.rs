//! `TabEvents`: the tabs one kind of event happened to (a crashed
//! renderer, a refused download), and a guard that answers at once when it
//! happens during a call.

use std::sync::Arc;

use super::CdpError;

/// Tabs one kind of event happened to (their renderer crashed; a download
/// they started was refused), with a notification at each.
#[derive(Clone, Default)]
pub struct TabEvents(Arc<TabEventState>);

#[derive(Default)]
struct TabEventState {
    tabs: std::sync::Mutex<std::collections::HashSet<String>>,
    notify: tokio::sync::Notify,
}

impl TabEvents {
    pub(super) fn note(&self, target: String) {
        self.0.tabs.lock().expect("tab events lock").insert(target);
        self.0.notify.notify_waiters();
    }

    /// Whether it happened to tab `target` (and was not cleared since).
    pub fn happened_to(&self, target: &str) -> bool {
        self.0
            .tabs
            .lock()
            .expect("tab events lock")
            .contains(target)
    }

    /// Forgets it for `target` (a new navigation, a fresh tab).
    pub fn clear(&self, target: &str) {
        self.0.tabs.lock().expect("tab events lock").remove(target);
    }

    /// Runs `fut`, but answers `then()` at once when it happens to tab
    /// `target` meanwhile.
    pub async fn guard<T>(
        &self,
        target: &str,
        then: fn() -> CdpError,
        fut: impl Future<Output = Result<T, CdpError>>,
    ) -> Result<T, CdpError> {
        let happened = async {
            loop {
                let notified = self.0.notify.notified();
                if self.happened_to(target) {
                    return;
                }
                notified.await;
            }
        };
        tokio::select! {
            res = fut => res,
            () = happened => Err(then()),
        }
    }
}
