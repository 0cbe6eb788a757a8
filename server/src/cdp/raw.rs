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

/// The most of a browser's `/json/protocol` Cordon reads (Chromium 156's
/// is about 1 MiB): a compromised browser's endless answer is cut there.
pub const MAX_PROTOCOL_DESCRIPTION: usize = 16 << 20;

/// The browser's own protocol description (`/json/protocol` at its
/// WebSocket URL's host and port), read to at most
/// [`MAX_PROTOCOL_DESCRIPTION`] bytes within 10 s. `None` when it has no
/// HTTP endpoint, does not answer `200`, or answers more.
pub async fn protocol_description(ws_url: &str) -> Option<Vec<u8>> {
    let base = http_base(ws_url)?;
    let read = async {
        let mut res = reqwest::Client::builder()
            .no_proxy()
            .build()
            .ok()?
            .get(format!("{base}/json/protocol"))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .ok()?;
        let mut body = Vec::new();
        while let Some(chunk) = res.chunk().await.ok()? {
            if body.len() + chunk.len() > MAX_PROTOCOL_DESCRIPTION {
                tracing::warn!("a browser's protocol description is over its bound: not read");
                return None;
            }
            body.extend_from_slice(&chunk);
        }
        Some(body)
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "browser" whose `/json/protocol` answer is `len` bytes long
    /// (chunked, never a length told up front); returns its port and how
    /// many bytes it sent before the reader went away.
    async fn describing_browser(len: u64) -> (u16, tokio::task::JoinHandle<u64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut req = [0u8; 2048];
            let _ = s.read(&mut req).await;
            let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if s.write_all(head).await.is_err() {
                return 0;
            }
            let chunk = vec![b' '; 1 << 20];
            let mut sent = 0u64;
            while sent < len {
                let n = chunk
                    .len()
                    .min(usize::try_from(len - sent).unwrap_or(usize::MAX));
                let framed = [format!("{n:x}\r\n").as_bytes(), &chunk[..n], b"\r\n"].concat();
                if s.write_all(&framed).await.is_err() {
                    return sent;
                }
                sent += n as u64;
            }
            let _ = s.write_all(b"0\r\n\r\n").await;
            sent
        });
        (port, task)
    }

    #[tokio::test]
    async fn a_protocol_description_is_read_within_its_bound() {
        let (port, _) = describing_browser(3 << 20).await;
        let got = protocol_description(&format!("ws://127.0.0.1:{port}/devtools/browser/x")).await;
        assert_eq!(got.map(|b| b.len()), Some(3 << 20));
        // An endless answer: cut at the bound, the rest never sent.
        let (port, sent) = describing_browser(1 << 34).await;
        let got = protocol_description(&format!("ws://127.0.0.1:{port}/devtools/browser/x")).await;
        assert!(got.is_none(), "read {:?} bytes", got.map(|b| b.len()));
        let sent = tokio::time::timeout(std::time::Duration::from_secs(30), sent)
            .await
            .expect("the answer was not cut")
            .unwrap();
        assert!(sent < 1 << 30, "the browser sent {sent} bytes");
        // No HTTP endpoint.
        assert!(protocol_description("file:///etc/passwd").await.is_none());
    }

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
