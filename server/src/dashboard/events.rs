//! `GET /ui/events`: change notices as Server-Sent Events, coalesced so a
//! burst of tool calls is one notice per topic per quarter second. Needs a
//! logged-in operator (the auth middleware refuses others with 401). A
//! stream ends when its dashboard session does (logout, expiry, the
//! operator disabled: checked every few seconds, with an `ended` event),
//! and when the server shuts down.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::Extension;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;

use crate::events::Topic;
use crate::state::AppState;

const COALESCE: Duration = Duration::from_millis(250);
/// How often a stream checks that its dashboard session still holds.
const WATCH: Duration = Duration::from_secs(2);

/// The stream.
pub async fn events(
    State(state): State<AppState>,
    op: Option<Extension<app::api::auth::Operator>>,
    dash: Option<Extension<tower_sessions::Session>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let changes = state.store.changes().clone();
    let mut rx = changes.subscribe();
    let (tx, out) = mpsc::channel::<Event>(16);
    let hash = dash
        .and_then(|Extension(s)| s.id())
        .map(|id| crate::ids::token_hash(&id.to_string()));
    let operator = op.map(|Extension(o)| o.id);
    tokio::spawn(async move {
        tokio::select! {
            _ = changes.stopped() => {}
            _ = pump(&mut rx, &tx) => {}
            () = logged_out(&state, hash, operator) => {
                let _ = tx.send(Event::default().event("ended").data("logged out")).await;
            }
        }
    });
    let stream = futures::stream::unfold(out, |mut out| async move {
        out.recv().await.map(|e| (Ok(e), out))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// Returns once the dashboard session behind the stream has ended (logged
/// out, expired) or its operator is disabled or gone; a database blip ends
/// nothing (the next check decides).
async fn logged_out(state: &AppState, hash: Option<String>, operator: Option<String>) {
    let (Some(hash), Some(operator)) = (hash, operator) else {
        return;
    };
    let Ok(id) = operator.parse::<crate::domain::OperatorId>() else {
        return;
    };
    loop {
        tokio::time::sleep(WATCH).await;
        let session = state
            .store
            .dashboard_session_load(&hash, crate::time::now_ms())
            .await;
        let row = state.auth.get(&id).await;
        match (session, row) {
            (Ok(None), _) | (_, Ok(None)) => return,
            (_, Ok(Some(r))) if r.disabled_at.is_some() => return,
            _ => {}
        }
    }
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
