//! Asking a browser's DevTools HTTP endpoint (a bwrap sandbox's host-side
//! port, an `exec` engine's `http://host:port`) for its browser WebSocket
//! path.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `GET /json/version` on `addr`; the path of the browser's WebSocket URL.
pub(super) async fn browser_path(addr: SocketAddr) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr).await?;
    s.write_all(b"GET /json/version HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > 64 * 1024 {
            bail!("DevTools answer too long");
        }
        if let Some(path) = parse_version_answer(&buf) {
            return Ok(path);
        }
    }
    parse_version_answer(&buf).context("no browser WebSocket URL in DevTools' answer")
}

/// The `/devtools/browser/<id>` path from a complete `/json/version` HTTP
/// answer, if `raw` holds one.
fn parse_version_answer(raw: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let ws = v["webSocketDebuggerUrl"].as_str()?;
    let at = ws.find("/devtools/browser/")?;
    Some(ws[at..].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_browser_path_is_read_from_a_version_answer() {
        let body = r#"{"Browser":"Chrome/156","webSocketDebuggerUrl":"ws://127.0.0.1:9222/devtools/browser/abc-123"}"#;
        let raw = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_eq!(
            parse_version_answer(raw.as_bytes()).as_deref(),
            Some("/devtools/browser/abc-123")
        );
        // Incomplete or refused answers are not (yet) an answer.
        assert!(parse_version_answer(&raw.as_bytes()[..raw.len() - 3]).is_none());
        assert!(parse_version_answer(b"HTTP/1.1 500 Oops\r\n\r\n{}").is_none());
    }
}
