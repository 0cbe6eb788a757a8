//! Dashboard change notices across replicas (PostgreSQL only): every topic
//! a replica publishes is sent as `NOTIFY cordon_changes, '<replica>:<topic>'`
//! (coalesced per 100 ms), and each replica `LISTEN`s and republishes the
//! others' topics to its own dashboard streams. A notice carries only the
//! topic's name, never data, as within one process.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::PgListener;

use crate::events::{Changes, Topic};

/// The channel's name.
pub const CHANNEL: &str = "cordon_changes";

/// The payload for `topic` from `replica`.
pub fn payload(replica: &str, topic: Topic) -> String {
    format!("{replica}:{}", topic.as_str())
}

/// A payload's topic, unless it is `me`'s own (or malformed).
pub fn from_other(payload: &str, me: &str) -> Option<Topic> {
    let (replica, topic) = payload.rsplit_once(':')?;
    if replica == me {
        return None;
    }
    Topic::parse(topic)
}

/// Starts relaying `changes` to and from the other replicas on `db_url`;
/// the tasks end when `changes` stops.
pub async fn start(changes: Changes, db_url: &str, me: &str) -> anyhow::Result<()> {
    let mut listener = PgListener::connect(db_url)
        .await
        .context("cannot open the change listener's connection")?;
    listener
        .listen(CHANNEL)
        .await
        .context("cannot listen for changes")?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Topic>();
    if !changes.relay_to(tx) {
        anyhow::bail!("change notices are relayed already");
    }
    let sender = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy(db_url)
        .context("cannot prepare the change sender's connection")?;
    let me_out = me.to_owned();
    let stop_out = changes.clone();
    tokio::spawn(async move {
        loop {
            let first = tokio::select! {
                t = rx.recv() => match t { Some(t) => t, None => return },
                () = stop_out.stopped() => return,
            };
            let mut batch = BTreeSet::from([first]);
            tokio::time::sleep(Duration::from_millis(100)).await;
            while let Ok(t) = rx.try_recv() {
                batch.insert(t);
            }
            for t in batch {
                let sent = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(CHANNEL)
                    .bind(payload(&me_out, t))
                    .execute(&sender)
                    .await;
                if let Err(e) = sent {
                    tracing::warn!(error = %format!("{e:#}"), "cannot send a change notice");
                }
            }
        }
    });
    let me_in = me.to_owned();
    tokio::spawn(async move {
        loop {
            let got = tokio::select! {
                n = listener.recv() => n,
                () = changes.stopped() => return,
            };
            match got {
                Ok(n) => {
                    if let Some(topic) = from_other(n.payload(), &me_in) {
                        changes.publish_local(topic);
                    }
                }
                Err(e) => {
                    // PgListener reconnects on the next recv.
                    tracing::warn!(error = %e, "change listener failed; reconnecting");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_hears_the_others_topics_not_its_own() {
        let p = payload("b", Topic::Grants);
        assert_eq!(p, "b:grants");
        assert_eq!(from_other(&p, "a"), Some(Topic::Grants));
        assert_eq!(from_other(&p, "b"), None);
        assert_eq!(from_other("b:nonsense", "a"), None);
        assert_eq!(from_other("no colon", "a"), None);
    }
}
