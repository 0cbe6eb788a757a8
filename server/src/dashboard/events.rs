//! `GET /ui/events`: change notices as Server-Sent Events, coalesced so a
//! burst of tool calls is one notice per topic per quarter second. Needs a
//! logged-in operator (the auth middleware refuses others with 401).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast::error::RecvError;

use crate::events::Topic;
use crate::state::AppState;

const COALESCE: Duration = Duration::from_millis(250);

/// The stream.
pub async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = state.store.changes().subscribe();
    let stream = async_stream(move |tx| async move {
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
                // Missed some: say everything changed.
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
                if tx
                    .send(Event::default().event(t.as_str()).data(t.as_str()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// A stream fed by a task through a small channel; the task ends when the
/// client goes away (its sends fail).
fn async_stream<F, Fut>(f: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Event>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(f(tx));
    futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
    )
}
