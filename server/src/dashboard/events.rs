//! `GET /ui/events`: change notices as Server-Sent Events, coalesced so a
//! burst of tool calls is one notice per topic per quarter second. Needs a
//! logged-in operator (the auth middleware refuses others with 401). Every
//! stream ends when the server shuts down.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use crate::events::Topic;
use crate::state::AppState;

const COALESCE: Duration = Duration::from_millis(250);

/// The stream.
pub async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let changes = state.store.changes().clone();
    let mut rx = changes.subscribe();
    let (tx, out) = mpsc::channel::<Event>(16);
    tokio::spawn(async move {
        tokio::select! {
            _ = changes.stopped() => {}
            _ = pump(&mut rx, &tx) => {}
        }
    });
    let stream = futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|e| (Ok(e), out))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Forwards coalesced notices until the client goes away (a send fails).
async fn pump(rx: &mut broadcast::Receiver<Topic>, tx: &mpsc::Sender<Event>) {
    // A first event, so the page knows the stream is up.
    if tx
        .send(Event::default().event("ready").data("ready"))
        .await
        .is_err()
    {
        return;
    }
    loop {
        let first = match rx.recv().await {
            Ok(t) => t,
            // Missed some: say the log changed, which every page shows.
            Err(RecvError::Lagged(_)) => Topic::Audit,
            Err(RecvError::Closed) => return,
        };
        let mut topics = BTreeSet::from([first]);
        let deadline = tokio::time::sleep(COALESCE);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                next = rx.recv() => match next {
                    Ok(t) => { topics.insert(t); }
                    Err(RecvError::Lagged(_)) => { topics.insert(Topic::Audit); }
                    Err(RecvError::Closed) => return,
                },
            }
        }
        for t in topics {
            let event = Event::default().event(t.as_str()).data(t.as_str());
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }
}
