//! Change notices for the dashboard: after the store commits a change that
//! a page shows, it publishes the page's topic here; `/ui/events` streams
//! them (Server-Sent Events) and pages refetch what they show. Notices
//! carry no data, only "this area changed", so nothing secret can travel
//! this way and a missed notice costs only freshness.

use tokio::sync::broadcast;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Topic {
    /// Sessions (opened, state changed, tool calls).
    Sessions,
    /// Grant requests and tokens.
    Grants,
    /// Stored credentials.
    Credentials,
    /// Tenants and API keys.
    Tenants,
    /// Operators and passkeys.
    Operators,
    /// The audit log grew.
    Audit,
    /// Risk-gate approvals (one waits, was decided, timed out).
    Approvals,
}

impl Topic {
    /// The SSE event name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sessions => "sessions",
            Self::Grants => "grants",
            Self::Credentials => "credentials",
            Self::Tenants => "tenants",
            Self::Operators => "operators",
            Self::Audit => "audit",
            Self::Approvals => "approvals",
        }
    }

    /// The topic of an SSE event name.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::Sessions,
            Self::Grants,
            Self::Credentials,
            Self::Tenants,
            Self::Operators,
            Self::Audit,
            Self::Approvals,
        ]
        .into_iter()
        .find(|t| t.as_str() == name)
    }

    /// The area an audited action belongs to, if a page shows it.
    pub fn of_action(action: &str) -> Option<Self> {
        let area = action.split('.').next().unwrap_or_default();
        match area {
            "session" | "tool" | "live_link" => Some(Self::Sessions),
            "grant" => Some(Self::Grants),
            "creds" | "vault" => Some(Self::Credentials),
            "tenant" | "apikey" => Some(Self::Tenants),
            "operator" => Some(Self::Operators),
            "approval" => Some(Self::Approvals),
            _ => None,
        }
    }
}

/// The publishing side; cheap to clone.
#[derive(Debug, Clone)]
pub struct Changes {
    topics: broadcast::Sender<Topic>,
    /// True once the server shuts down: streams end, so an open dashboard
    /// tab does not hold the graceful shutdown forever.
    stopping: std::sync::Arc<tokio::sync::watch::Sender<bool>>,
    /// Several replicas: every topic published here also goes to the
    /// others (PostgreSQL `NOTIFY`, see `cluster::notify`).
    outbox: std::sync::Arc<std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<Topic>>>,
}

impl Default for Changes {
    fn default() -> Self {
        Self {
            topics: broadcast::channel(256).0,
            stopping: std::sync::Arc::new(tokio::sync::watch::channel(false).0),
            outbox: std::sync::Arc::default(),
        }
    }
}

impl Changes {
    /// Tells listeners that `topic` changed (nobody listening is fine).
    pub fn publish(&self, topic: Topic) {
        let _ = self.topics.send(topic);
        if let Some(out) = self.outbox.get() {
            let _ = out.send(topic);
        }
    }

    /// Tells this process's listeners only (a notice from another replica).
    pub fn publish_local(&self, topic: Topic) {
        let _ = self.topics.send(topic);
    }

    /// From now on, every published topic is also sent to `out`; false if
    /// an outbox was set already.
    pub fn relay_to(&self, out: tokio::sync::mpsc::UnboundedSender<Topic>) -> bool {
        self.outbox.set(out).is_ok()
    }

    /// A new listener.
    pub fn subscribe(&self) -> broadcast::Receiver<Topic> {
        self.topics.subscribe()
    }

    /// Ends every stream (at shutdown).
    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once [`Self::stop`] was called.
    pub async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_parse_from_their_names_and_nothing_else() {
        for t in [Topic::Sessions, Topic::Approvals, Topic::Audit] {
            assert_eq!(Topic::parse(t.as_str()), Some(t));
        }
        assert_eq!(Topic::parse("Sessions"), None);
        assert_eq!(Topic::parse(""), None);
    }

    #[test]
    fn actions_map_to_the_pages_that_show_them() {
        assert_eq!(Topic::of_action("tool.navigate"), Some(Topic::Sessions));
        assert_eq!(Topic::of_action("grant.approve"), Some(Topic::Grants));
        assert_eq!(Topic::of_action("apikey.create"), Some(Topic::Tenants));
        assert_eq!(Topic::of_action("approval.decided"), Some(Topic::Approvals));
        assert_eq!(Topic::of_action("audit.verify"), None);
    }

    #[tokio::test]
    async fn stopping_wakes_whoever_waits_for_it_even_if_they_came_late() {
        let c = Changes::default();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.stopped().await }
        });
        c.stop();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), c.stopped())
            .await
            .expect("already stopped");
    }

    #[tokio::test]
    async fn listeners_hear_what_is_published_after_they_subscribed() {
        let c = Changes::default();
        c.publish(Topic::Audit);
        let mut rx = c.subscribe();
        c.publish(Topic::Grants);
        assert_eq!(rx.recv().await.unwrap(), Topic::Grants);
    }
}
