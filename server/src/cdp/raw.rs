//! A raw CDP connection to a browser: text frames in and out, nothing
//! parsed (but the ids of a [`RawClient`]'s answers). The CDP endpoint (`sessions::cdp`) opens one per client, so a
//! client's ids, sessions and event subscriptions never mix with Cordon's
//! own connection (chromiumoxide's) or another client's. The risk gate
//! opens one as a [`RawClient`] to reach an out-of-process frame's own
//! session (`frames.rs`), which chromiumoxide cannot address.

use std::collections::HashMap;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::CdpError;

/// The largest message the browser may send (a full-page screenshot of a
/// long page in base64 is tens of MB).
pub const MAX_BROWSER_MESSAGE: usize = 256 << 20;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Sends to the browser.
pub struct RawSender(SplitSink<Ws, Message>);

/// Receives from the browser.
pub struct RawReceiver(SplitStream<Ws>);

/// Connects to a browser-level CDP WebSocket URL (`ws://…/devtools/browser/…`).
pub async fn connect_raw(ws_url: &str) -> Result<(RawSender, RawReceiver), CdpError> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_BROWSER_MESSAGE))
        .max_frame_size(Some(MAX_BROWSER_MESSAGE));
    let (ws, _) = tokio_tungstenite::connect_async_with_config(ws_url, Some(config), true)
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, "cannot open a raw CDP connection");
            CdpError::BrowserGone
        })?;
    let (tx, rx) = ws.split();
    Ok((RawSender(tx), RawReceiver(rx)))
}

impl RawSender {
    /// Sends one command (a JSON text).
    pub async fn send(&mut self, text: String) -> Result<(), CdpError> {
        self.0
            .send(Message::text(text))
            .await
            .map_err(|_| CdpError::BrowserGone)
    }

    /// Closes the connection (the browser drops this client's sessions).
    pub async fn close(&mut self) {
        let _ = self.0.close().await;
    }
}

impl RawReceiver {
    /// The next message (a response or an event); `None` once the
    /// connection is closed.
    pub async fn next(&mut self) -> Option<String> {
        loop {
            match self.0.next().await? {
                Ok(Message::Text(t)) => return Some(t.as_str().to_owned()),
                Ok(Message::Binary(b)) => return String::from_utf8(b.to_vec()).ok(),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }
}

/// A raw CDP connection used for requests (the gate's, to reach what
/// chromiumoxide cannot address, like a frame's own session): answers are
/// matched by id, events are dropped.
pub(super) struct RawClient {
    tx: RawSender,
    rx: RawReceiver,
    next: i64,
    early: HashMap<i64, Result<Value, CdpError>>,
}

impl RawClient {
    /// Connects to a browser-level CDP WebSocket URL.
    pub(super) async fn open(ws_url: &str) -> Result<Self, CdpError> {
        let (tx, rx) = connect_raw(ws_url).await?;
        Ok(Self {
            tx,
            rx,
            next: 0,
            early: HashMap::new(),
        })
    }

    /// Sends `method` (to the frame's `session`, or the browser) and
    /// answers its id.
    pub(super) async fn send(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<i64, CdpError> {
        self.next += 1;
        let mut msg = json!({ "id": self.next, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = Value::String(s.to_owned());
        }
        self.tx.send(msg.to_string()).await?;
        Ok(self.next)
    }

    /// The answer to request `id`.
    pub(super) async fn answer(&mut self, id: i64) -> Result<Value, CdpError> {
        if let Some(a) = self.early.remove(&id) {
            return a;
        }
        loop {
            let text = self.rx.next().await.ok_or(CdpError::BrowserGone)?;
            let Ok(mut msg) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let Some(got) = msg.get("id").and_then(Value::as_i64) else {
                continue;
            };
            let answer = answer_of(&mut msg);
            if got == id {
                return answer;
            }
            self.early.insert(got, answer);
        }
    }

    /// Sends `method` and waits for its answer.
    pub(super) async fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, CdpError> {
        let id = self.send(session, method, params).await?;
        self.answer(id).await
    }

    /// Closes the connection (the browser drops its sessions).
    pub(super) async fn close(mut self) {
        self.tx.close().await;
    }
}

/// The result of a CDP answer `msg`, or its error.
pub(super) fn answer_of(msg: &mut Value) -> Result<Value, CdpError> {
    match msg.get("error") {
        // The browser's message names the call's failure, never page
        // content.
        Some(e) => Err(CdpError::Failed(
            e["message"].as_str().unwrap_or("failed").to_owned(),
        )),
        None => Ok(msg
            .get_mut("result")
            .map(Value::take)
            .unwrap_or(Value::Null)),
    }
}

/// The browser's HTTP discovery base (`http://host:port`) of its
/// WebSocket URL, for `/json/protocol`.
pub fn http_base(ws_url: &str) -> Option<String> {
    let url = url::Url::parse(ws_url).ok()?;
    let scheme = match url.scheme() {
        "ws" => "http",
        "wss" => "https",
        _ => return None,
    };
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    Some(format!("{scheme}://{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_discovery_base_is_the_websockets_host_and_port() {
        assert_eq!(
            http_base("ws://127.0.0.1:9333/devtools/browser/abc").as_deref(),
            Some("http://127.0.0.1:9333")
        );
        assert_eq!(
            http_base("ws://[::1]:9333/devtools/browser/abc").as_deref(),
            Some("http://[::1]:9333")
        );
        assert_eq!(http_base("file:///etc/passwd"), None);
        assert_eq!(http_base("not a url"), None);
    }
}
