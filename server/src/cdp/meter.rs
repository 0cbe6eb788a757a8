//! A bound on what a browser may send Cordon's own CDP connection.
//!
//! chromiumoxide reads a browser's messages whole, of any size (its
//! `Connection::connect` sets no limit and takes no configuration), and
//! parses each on the runtime's thread. Two things could abuse that:
//!
//! - a **compromised browser** can send one message as large as it likes,
//!   and the control plane would allocate it;
//! - a **page** can make an honest browser send events as large and as
//!   many as it likes: a string it logs comes back whole in
//!   `Runtime.consoleAPICalled` (chromiumoxide enables `Runtime` on every
//!   tab; 250 MiB strings arrive), and so does one it throws. Parsing
//!   each would hold the runtime's one thread (`cordon serve` below 8
//!   cores) and every session on it.
//!
//! So every byte from a browser to a connection of Cordon's crosses a
//! [`join`] in this process, which reads only the WebSocket frame headers
//! (and the first bytes of a message in [`Meter::quiet`] mode) as the
//! bytes pass:
//!
//! - a message whose frames add up to more than [`MAX_BROWSER_MESSAGE`]
//!   is never read: on chromiumoxide's connection it is skipped (so an
//!   event a page inflated past it costs the session that one event),
//!   elsewhere it ends the connection at its header (the raw connections
//!   of `raw.rs` have the same bound from tungstenite);
//! - on chromiumoxide's connection ([`front`]), the events Cordon never
//!   listens to ([`UNHEARD`]: console output, uncaught exceptions, log
//!   entries) are dropped unread, whatever their size, so what a page
//!   prints costs the control plane a read and nothing more.
//!
//! A `bwrap` sandbox's other CDP sockets (the raw ones: the dialog
//! follower, the CDP endpoint's clients) cross the host's join in
//! `sandbox::relay::tcp_to_handed`, which bounds their messages only: an
//! agent's own CDP client hears the console as it asked to.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use super::raw::MAX_BROWSER_MESSAGE;

/// The longest handshake answer (status line and headers) taken before the
/// frames start; Chromium's is a few hundred bytes.
const MAX_HEAD: usize = 16 << 10;

/// How long [`front`] waits for chromiumoxide to connect.
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(10);

/// How the events a [`Meter::quiet`] drops begin, as Chromium writes them
/// (the method first): events Cordon's own connection never listens to and
/// a page controls the size and number of.
pub const UNHEARD: &[&[u8]] = &[
    b"{\"method\":\"Runtime.consoleAPICalled\"",
    b"{\"method\":\"Runtime.exceptionThrown\"",
    b"{\"method\":\"Log.entryAdded\"",
];

/// The longest of [`UNHEARD`]: how much of a message is held to judge it.
const PEEK: usize = 40;

/// Why a browser's bytes were not passed on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A message longer than the bound (its frames' lengths so far).
    #[error("a message of at least {0} bytes, over the bound of {MAX_BROWSER_MESSAGE}")]
    TooBig(u64),
    /// Not a server's WebSocket stream: the head too long, a masked frame,
    /// a reserved opcode, a control frame over 125 bytes.
    #[error("not a WebSocket stream: {0}")]
    Malformed(&'static str),
}

/// Where the reader is in the browser's stream.
#[derive(Debug, Clone, Copy)]
enum State {
    /// The HTTP head of the handshake's answer: bytes seen, the first
    /// twelve (the status line's start), the last four.
    Head {
        seen: usize,
        start: [u8; 12],
        last: u32,
    },
    /// Not a WebSocket: an answer other than `101` (a `/json/version`, a
    /// refused upgrade). What follows is passed as it is: a WebSocket
    /// client gives up at such an answer, and an HTTP one bounds its own
    /// read.
    Plain,
    /// A frame header: its bytes so far (held until it is whole).
    Header { buf: [u8; 10], have: usize },
    /// A message's first bytes, held until they tell whether it is heard.
    Peek {
        header: [u8; 10],
        header_len: usize,
        len: u64,
        buf: [u8; PEEK],
        have: usize,
    },
    /// A frame's payload: bytes still to come, and whether they pass.
    Payload { left: u64, pass: bool },
}

/// Where the bytes a [`Meter`] passes on go.
pub trait Pass {
    /// `bytes` go on to the client, after those passed before.
    fn pass(&mut self, bytes: &[u8]);
}

impl Pass for Vec<u8> {
    fn pass(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// For a meter that drops nothing: what it passes is what it was fed.
pub struct Unchanged;

impl Pass for Unchanged {
    fn pass(&mut self, _: &[u8]) {}
}

/// Reads the frame headers in a browser's byte stream (the server side of
/// a WebSocket: an HTTP head, then frames) as it passes, chunk by chunk,
/// however the chunks split it.
#[derive(Debug, Clone)]
pub struct Meter {
    state: State,
    max: u64,
    /// Whether [`UNHEARD`] events are dropped.
    quiet: bool,
    /// The current data message's length so far (its frames' payloads).
    message: u64,
    /// Messages dropped so far.
    dropped: u64,
}

impl Meter {
    /// A meter at the start of a connection, bounding messages to `max`
    /// bytes and dropping none: everything it is fed passes, or the
    /// connection ends (feed it with [`Unchanged`]).
    pub fn new(max: usize) -> Self {
        Self {
            state: State::Head {
                seen: 0,
                start: [0; 12],
                last: 0,
            },
            max: max as u64,
            quiet: false,
            message: 0,
            dropped: 0,
        }
    }

    /// [`new`](Self::new), but dropping the [`UNHEARD`] events, and a
    /// message over the bound that comes in one frame instead of ending the
    /// connection (a fragmented one still ends it: Chromium never
    /// fragments, and what was passed of it cannot be taken back).
    pub fn quiet(max: usize) -> Self {
        Self {
            quiet: true,
            ..Self::new(max)
        }
    }

    /// How many messages it dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Reads `bytes`, the next ones the browser sent, and gives `out` what
    /// of them passes on (a frame header once it is whole; a message's
    /// first bytes once they tell it is heard). An error means the
    /// connection must end: nothing of these bytes is to be passed on.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut impl Pass) -> Result<(), Refused> {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Head { seen, start, last } => {
                    let mut used = 0;
                    let mut done = false;
                    for &b in bytes {
                        if let Some(s) = start.get_mut(*seen) {
                            *s = b;
                        }
                        used += 1;
                        *seen += 1;
                        *last = (*last << 8) | u32::from(b);
                        if *last == u32::from_be_bytes(*b"\r\n\r\n") {
                            done = true;
                            break;
                        }
                        if *seen > MAX_HEAD {
                            return Err(Refused::Malformed("the handshake's head is too long"));
                        }
                    }
                    out.pass(&bytes[..used]);
                    bytes = &bytes[used..];
                    if done {
                        // `HTTP/1.1 101`: the frames start.
                        self.state = if start[9..12] == *b"101" {
                            next_header()
                        } else {
                            State::Plain
                        };
                    }
                }
                State::Plain => {
                    out.pass(bytes);
                    bytes = &[];
                }
                State::Header { buf, have } => {
                    let need = header_len(&buf[..*have]);
                    let take = (need - *have).min(bytes.len());
                    buf[*have..*have + take].copy_from_slice(&bytes[..take]);
                    *have += take;
                    bytes = &bytes[take..];
                    if *have >= 2 && buf[1] & 0x80 != 0 {
                        return Err(Refused::Malformed("a masked frame"));
                    }
                    // The length is known once the first two bytes are.
                    if *have == header_len(&buf[..*have]) {
                        let (header, header_len) = (*buf, *have);
                        let opcode = header[0] & 0x0f;
                        let fin = header[0] & 0x80 != 0;
                        // A whole message in one frame (as Chromium sends
                        // every one) over the bound: a quiet meter skips
                        // it, unread, and the connection goes on.
                        let whole = fin && matches!(opcode, 0x1 | 0x2);
                        let len = match self.frame(&header) {
                            Err(Refused::TooBig(len)) if self.quiet && whole => {
                                self.dropped += 1;
                                self.state = payload(len, false);
                                continue;
                            }
                            other => other?,
                        };
                        self.state = if self.quiet && fin && opcode == 0x1 && len > 0 {
                            State::Peek {
                                header,
                                header_len,
                                len,
                                buf: [0; PEEK],
                                have: 0,
                            }
                        } else {
                            out.pass(&header[..header_len]);
                            payload(len, true)
                        };
                    }
                }
                State::Peek {
                    header,
                    header_len,
                    len,
                    buf,
                    have,
                } => {
                    let need = usize::try_from(*len).map_or(PEEK, |l| l.min(PEEK));
                    let take = (need - *have).min(bytes.len());
                    buf[*have..*have + take].copy_from_slice(&bytes[..take]);
                    *have += take;
                    bytes = &bytes[take..];
                    if *have == need {
                        let start = &buf[..*have];
                        let heard = !UNHEARD.iter().any(|u| start.starts_with(u));
                        if heard {
                            out.pass(&header[..*header_len]);
                            out.pass(start);
                        } else {
                            self.dropped += 1;
                        }
                        self.state = payload(*len - *have as u64, heard);
                    }
                }
                State::Payload { left, pass } => {
                    let take = (*left).min(bytes.len() as u64);
                    let (now, rest) = bytes.split_at(take as usize);
                    if *pass {
                        out.pass(now);
                    }
                    *left -= take;
                    bytes = rest;
                    if *left == 0 {
                        self.state = next_header();
                    }
                }
            }
        }
        Ok(())
    }

    /// Judges a whole frame header; returns its payload's length.
    fn frame(&mut self, h: &[u8; 10]) -> Result<u64, Refused> {
        let opcode = h[0] & 0x0f;
        let len = match h[1] & 0x7f {
            126 => u64::from(u16::from_be_bytes([h[2], h[3]])),
            127 => u64::from_be_bytes([h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]]),
            n => u64::from(n),
        };
        match opcode {
            // Close, ping, pong: between a message's frames, not part of it.
            0x8..=0xa if len > 125 => Err(Refused::Malformed("a control frame over 125 bytes")),
            0x8..=0xa => Ok(len),
            // A text or binary message starts; a continuation adds to it.
            0x0..=0x2 => {
                self.message = if opcode == 0 {
                    self.message.saturating_add(len)
                } else {
                    len
                };
                if self.message > self.max {
                    Err(Refused::TooBig(self.message))
                } else {
                    Ok(len)
                }
            }
            _ => Err(Refused::Malformed("a reserved opcode")),
        }
    }
}

fn next_header() -> State {
    State::Header {
        buf: [0; 10],
        have: 0,
    }
}

/// A payload of `len` bytes, or the next header when there is none.
fn payload(len: u64, pass: bool) -> State {
    if len == 0 {
        next_header()
    } else {
        State::Payload { left: len, pass }
    }
}

/// The length of a frame header whose first bytes are `start` (2 until
/// the second byte is known; a masked one is refused at its second byte).
fn header_len(start: &[u8]) -> usize {
    let Some(&second) = start.get(1) else {
        return 2;
    };
    match second & 0x7f {
        126 => 4,
        127 => 10,
        _ => 2,
    }
}

/// Joins a CDP client's connection (`client`) to a browser's (`browser`)
/// until either ends: the client's bytes pass as they are, the browser's
/// through `meter`. A message over its bound ends both connections before
/// its payload is read (the client sees its connection reset, so
/// chromiumoxide's loop ends and the browser counts as gone). Returns why,
/// if it was refused.
pub async fn join<C, B>(client: C, browser: B, mut meter: Meter) -> Option<Refused>
where
    C: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut client_rx, mut client_tx) = tokio::io::split(client);
    let (mut browser_rx, mut browser_tx) = tokio::io::split(browser);
    let up = async {
        let _ = tokio::io::copy(&mut client_rx, &mut browser_tx).await;
        let _ = browser_tx.shutdown().await;
    };
    let down = async {
        let mut buf = vec![0u8; 32 << 10];
        let mut out = Vec::new();
        let refused = loop {
            let n = match browser_rx.read(&mut buf).await {
                Ok(0) | Err(_) => break None,
                Ok(n) => n,
            };
            let read = &buf[..n];
            let fed = if meter.quiet {
                out.clear();
                meter.feed(read, &mut out).map(|()| &out[..])
            } else {
                meter.feed(read, &mut Unchanged).map(|()| read)
            };
            let pass = match fed {
                Ok(p) => p,
                Err(e) => break Some(e),
            };
            if !pass.is_empty() && client_tx.write_all(pass).await.is_err() {
                break None;
            }
        };
        if refused.is_none() {
            let _ = client_tx.shutdown().await;
        }
        refused
    };
    tokio::pin!(up, down);
    let refused = tokio::select! {
        r = &mut down => {
            if r.is_none() {
                up.await;
            }
            r
        }
        () = &mut up => down.await,
    };
    if let Some(e) = &refused {
        // No byte of the message: only its size.
        tracing::warn!(reason = %e, "a browser sent Cordon's CDP connection what it may not: the connection is closed");
    }
    refused
}

/// How [`front`] reaches the browser.
#[derive(Debug, Clone)]
pub enum Reach {
    /// A TCP connection to the URL's host and port.
    Tcp,
    /// The socket a `bwrap` sandbox's relay hands over a connection to
    /// this unix socket (`cdp.sock`): no other join in the way.
    Handed(PathBuf),
}

/// A [`join`] in front of chromiumoxide's connection to `ws_url`, with a
/// [`Meter::quiet`]: a listener on this host's loopback that takes one
/// connection from this process ([`crate::loopback::opened_by_this_process`];
/// any other local client is dropped) and joins it to a new connection
/// to the browser (`reach`). Returns the URL to connect to (the same path)
/// and the task, which ends with the connection; aborting it ends the
/// connection too.
pub async fn front(
    ws_url: &str,
    reach: Reach,
) -> std::io::Result<(String, tokio::task::JoinHandle<()>)> {
    let invalid = |e: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_owned());
    let url = url::Url::parse(ws_url).map_err(|e| invalid(&e.to_string()))?;
    if url.scheme() != "ws" {
        return Err(invalid("only a ws:// CDP endpoint can be metered"));
    }
    let to = url
        .socket_addrs(|| None)?
        .into_iter()
        .next()
        .ok_or_else(|| invalid("the CDP endpoint names no address"))?;
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let local = listener.local_addr()?;
    let mut front = url.clone();
    front
        .set_ip_host(local.ip())
        .and_then(|()| front.set_port(Some(local.port())))
        .map_err(|()| invalid("the CDP endpoint cannot be fronted"))?;
    let task = tokio::spawn(async move {
        let Some(client) = accept_own(&listener, local).await else {
            return;
        };
        drop(listener);
        let browser = match reach {
            Reach::Tcp => TcpStream::connect(to).await.ok(),
            Reach::Handed(path) => crate::sandbox::handover::take(&path)
                .await
                .map_err(|e| tracing::debug!(error = %e, "no DevTools socket handed over"))
                .ok(),
        };
        let Some(browser) = browser else {
            return;
        };
        let _ = (client.set_nodelay(true), browser.set_nodelay(true));
        join(client, browser, Meter::quiet(MAX_BROWSER_MESSAGE)).await;
    });
    Ok((front.to_string(), task))
}

/// The first connection to `listener` that this process opened, within
/// [`ACCEPT_TIMEOUT`]; others are closed unread.
async fn accept_own(listener: &TcpListener, local: SocketAddr) -> Option<TcpStream> {
    let accept = async {
        loop {
            match listener.accept().await {
                Ok((s, peer)) if crate::loopback::opened_by_this_process(local, peer) => {
                    return Some(s);
                }
                Ok(_) => tracing::warn!(
                    port = local.port(),
                    "refused a connection to a browser's metered CDP port from another process"
                ),
                Err(_) => return None,
            }
        }
    };
    tokio::time::timeout(ACCEPT_TIMEOUT, accept)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"HTTP/1.1 101 WebSocket Protocol Handshake\r\nUpgrade: websocket\r\n\r\n";

    /// A frame header: FIN, opcode, length, unmasked.
    fn header(fin: bool, opcode: u8, len: u64) -> Vec<u8> {
        let mut h = vec![(if fin { 0x80 } else { 0 }) | opcode];
        match len {
            0..=125 => h.push(len as u8),
            126..=0xffff => {
                h.push(126);
                h.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                h.push(127);
                h.extend_from_slice(&len.to_be_bytes());
            }
        }
        h
    }

    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = header(fin, opcode, payload.len() as u64);
        f.extend_from_slice(payload);
        f
    }

    /// Feeds `bytes` to a fresh meter in chunks of `step` bytes.
    fn feed(max: usize, bytes: &[u8], step: usize) -> Result<(), Refused> {
        let mut m = Meter::new(max);
        bytes
            .chunks(step)
            .try_for_each(|c| m.feed(c, &mut Unchanged))
    }

    /// Feeds `bytes` to a fresh quiet meter in chunks of `step` bytes;
    /// returns what it passed on and how many messages it dropped.
    fn quiet(bytes: &[u8], step: usize) -> (Vec<u8>, u64) {
        let mut m = Meter::quiet(MAX_BROWSER_MESSAGE);
        let mut out = Vec::new();
        for c in bytes.chunks(step) {
            m.feed(c, &mut out).unwrap();
        }
        (out, m.dropped())
    }

    #[test]
    fn messages_up_to_the_bound_pass_however_the_reads_split_them() {
        let mut s = HEAD.to_vec();
        s.extend(frame(true, 1, &[b'a'; 100]));
        s.extend(frame(true, 2, &[b'b'; 300])); // 16-bit length
        s.extend(frame(true, 9, b"ping"));
        s.extend(frame(false, 1, &[b'c'; 200])); // fragmented: 200 + 100
        s.extend(frame(true, 10, b"")); // a pong between the fragments
        s.extend(frame(true, 0, &[b'd'; 100]));
        s.extend(frame(true, 1, b""));
        for step in [1, 2, 3, 7, 64, s.len()] {
            assert_eq!(feed(300, &s, step), Ok(()), "chunks of {step}");
        }
    }

    #[test]
    fn a_message_over_the_bound_is_refused_at_its_header() {
        // One frame: refused once its header is read, the payload unsent.
        let mut s = HEAD.to_vec();
        s.extend(header(true, 1, 301));
        assert_eq!(feed(300, &s, 1), Err(Refused::TooBig(301)));
        // A 64-bit length far beyond memory.
        let mut s = HEAD.to_vec();
        s.extend(header(true, 2, u64::MAX));
        assert_eq!(feed(300, &s, 5), Err(Refused::TooBig(u64::MAX)));
        // Fragments that add up past it, a control frame between them.
        let mut s = HEAD.to_vec();
        s.extend(frame(false, 1, &[b'x'; 200]));
        s.extend(frame(true, 9, b""));
        s.extend(header(true, 0, 101));
        assert_eq!(feed(300, &s, 3), Err(Refused::TooBig(301)));
    }

    #[test]
    fn an_answer_other_than_101_passes_as_it_is() {
        // `/json/version` through the same join: a head, then a body that
        // is no frame at all.
        let mut s = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n".to_vec();
        s.extend(br#"{"Browser":"Chrome/156","webSocketDebuggerUrl":"ws://x"}"#);
        s.extend(vec![0xff; 1000]);
        assert_eq!(feed(300, &s, 3), Ok(()));
        let (out, dropped) = quiet(&s, 7);
        assert_eq!((out == s, dropped), (true, 0));
        // A 101 is followed by frames.
        let mut s = b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec();
        s.extend(header(true, 3, 0));
        assert_eq!(
            feed(300, &s, 3),
            Err(Refused::Malformed("a reserved opcode"))
        );
    }

    #[test]
    fn a_new_message_starts_the_count_again() {
        let mut s = HEAD.to_vec();
        for _ in 0..10 {
            s.extend(frame(true, 1, &[b'y'; 250]));
        }
        assert_eq!(feed(300, &s, 17), Ok(()));
    }

    #[test]
    fn what_is_not_a_websocket_stream_is_refused() {
        assert_eq!(
            feed(300, &vec![b'h'; MAX_HEAD + 2], 1000),
            Err(Refused::Malformed("the handshake's head is too long"))
        );
        let mut s = HEAD.to_vec();
        s.extend(header(true, 3, 1));
        assert_eq!(
            feed(300, &s, 4),
            Err(Refused::Malformed("a reserved opcode"))
        );
        // A browser never masks (RFC 6455 5.1); a compromised one may.
        let mut s = HEAD.to_vec();
        let mut h = header(true, 1, 4);
        h[1] |= 0x80;
        s.extend(h);
        assert_eq!(feed(300, &s, 1), Err(Refused::Malformed("a masked frame")));
        let mut s = HEAD.to_vec();
        s.extend(header(true, 9, 126));
        assert_eq!(
            feed(300, &s, 4),
            Err(Refused::Malformed("a control frame over 125 bytes"))
        );
    }

    /// An event as Chromium writes it.
    fn event(method: &str, params: &str) -> Vec<u8> {
        format!(r#"{{"method":"{method}","params":{params},"sessionId":"S"}}"#).into_bytes()
    }

    #[test]
    fn a_quiet_meter_drops_the_unheard_events_whole_and_passes_the_rest_unchanged() {
        let big = format!(
            r#"{{"type":"log","args":[{{"type":"string","value":"{}"}}]}}"#,
            "x".repeat(70_000)
        );
        let dropped = [
            event("Runtime.consoleAPICalled", &big), // 64-bit length
            event("Runtime.exceptionThrown", r#"{"timestamp":1}"#),
            event("Log.entryAdded", r#"{"entry":{}}"#),
        ];
        let kept = [
            br#"{"id":7,"result":{"result":{"type":"string","value":"Runtime.consoleAPICalled"}}}"#
                .to_vec(),
            event("Runtime.executionContextCreated", r#"{"context":{"id":1}}"#),
            event("Runtime.consoleAPICalledSoon", "{}"), // a prefix is not a name
            br#"{"id":8}"#.to_vec(),                     // shorter than the peek
        ];
        let mut input = HEAD.to_vec();
        let mut want = HEAD.to_vec();
        for (d, k) in dropped.iter().zip(kept.iter().cycle()) {
            input.extend(frame(true, 1, d));
            let f = frame(true, 1, k);
            input.extend(&f);
            want.extend(&f);
        }
        for k in &kept[2..] {
            let f = frame(true, 1, k);
            input.extend(&f);
            want.extend(&f);
        }
        // Control frames, a binary message and a fragmented one pass as
        // they are (Chromium sends text messages whole).
        for f in [
            frame(true, 9, b"p"),
            frame(true, 2, b"{\"method\":\"Log.entryAdded\"}"),
            frame(false, 1, b"{\"method\":\"Log.entryAdded\""),
            frame(true, 0, b"}"),
        ] {
            input.extend(&f);
            want.extend(&f);
        }
        for step in [1, 2, 5, 39, 41, 4096, input.len()] {
            let (out, n) = quiet(&input, step);
            assert_eq!(n, 3, "chunks of {step}: dropped");
            assert!(
                out == want,
                "chunks of {step}: {} bytes passed, {} wanted",
                out.len(),
                want.len()
            );
        }
        // Over the bound in one frame: skipped, and the stream goes on; in
        // fragments: refused.
        let mut m = Meter::quiet(300);
        let mut out = Vec::new();
        let mut s = HEAD.to_vec();
        s.extend(frame(true, 1, &[b'{'; 301]));
        s.extend(frame(true, 2, &[b'q'; 400]));
        s.extend(frame(true, 1, b"{\"id\":1}"));
        for c in s.chunks(9) {
            m.feed(c, &mut out).unwrap();
        }
        let mut want = HEAD.to_vec();
        want.extend(frame(true, 1, b"{\"id\":1}"));
        assert_eq!((out == want, m.dropped()), (true, 2));
        let mut m = Meter::quiet(300);
        let mut s = HEAD.to_vec();
        s.extend(frame(false, 1, &[b'{'; 200]));
        s.extend(header(true, 0, 101));
        assert_eq!(m.feed(&s, &mut Vec::new()), Err(Refused::TooBig(301)));
        // Without quiet, nothing is dropped.
        let mut m = Meter::new(MAX_BROWSER_MESSAGE);
        m.feed(&input, &mut Unchanged).unwrap();
        assert_eq!(m.dropped(), 0);
    }

    /// A "browser" that answers the handshake, then sends a frame header
    /// claiming `len` bytes (`fin`: the whole message) and as many as it
    /// can of them, then a small answer; returns how many it sent before
    /// the other side closed.
    async fn oversending_browser(
        fin: bool,
        len: u64,
    ) -> (SocketAddr, tokio::task::JoinHandle<u64>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req).await;
            s.write_all(HEAD).await.unwrap();
            s.write_all(&header(fin, 1, len)).await.unwrap();
            let chunk = vec![b'z'; 1 << 20];
            let mut sent = 0u64;
            while sent < len {
                let n = chunk
                    .len()
                    .min(usize::try_from(len - sent).unwrap_or(usize::MAX));
                match s.write_all(&chunk[..n]).await {
                    Ok(()) => sent += n as u64,
                    Err(_) => return sent,
                }
            }
            let _ = s.write_all(&frame(true, 1, ANSWER)).await;
            let _ = s.read(&mut req).await;
            sent
        });
        (addr, task)
    }

    const ANSWER: &[u8] = b"{\"id\":1,\"result\":{}}";

    /// Connects to a front's URL as chromiumoxide would; returns what it
    /// read until the connection ended or `until` was read, or `None` if
    /// neither came within 60 s.
    async fn through_front(url: &str, until: Option<&[u8]>) -> Option<Vec<u8>> {
        let port = url::Url::parse(url).unwrap().port().unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        c.write_all(b"GET /devtools/browser/x HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), async {
            let mut buf = [0u8; 4096];
            loop {
                match c.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
                if until.is_some_and(|u| got.ends_with(u)) {
                    break;
                }
            }
        })
        .await
        .ok()?;
        Some(got)
    }

    #[tokio::test]
    async fn a_front_skips_a_whole_message_over_the_bound_unread_and_goes_on() {
        let len = MAX_BROWSER_MESSAGE as u64 + 1;
        let (addr, browser) = oversending_browser(true, len).await;
        let (url, front) = front(&format!("ws://{addr}/devtools/browser/x"), Reach::Tcp)
            .await
            .unwrap();
        assert!(url.ends_with("/devtools/browser/x"), "{url}");
        assert!(!url.contains(&addr.port().to_string()), "{url}");
        let got = through_front(&url, Some(ANSWER))
            .await
            .expect("the answer after the skipped message did not come");
        let mut want = HEAD.to_vec();
        want.extend(frame(true, 1, ANSWER));
        assert!(
            got == want,
            "the client got {} bytes, not the head and the answer",
            got.len()
        );
        front.abort();
        let sent = browser.await.unwrap();
        assert_eq!(sent, len, "the browser sent the whole message");
    }

    #[tokio::test]
    async fn a_front_ends_the_connection_at_a_fragmented_message_over_the_bound() {
        let len = 1u64 << 34; // 16 GiB: never sent whole
        let (addr, browser) = oversending_browser(false, len).await;
        let (url, front) = front(&format!("ws://{addr}/devtools/browser/x"), Reach::Tcp)
            .await
            .unwrap();
        let got = through_front(&url, None)
            .await
            .expect("the client's connection was not ended");
        // At most the head passed (it may share a read with the frame's
        // header, and then goes with it); nothing of the frame did.
        assert!(HEAD.starts_with(&got), "the client got {} bytes", got.len());
        let sent = tokio::time::timeout(Duration::from_secs(60), browser)
            .await
            .expect("the browser's connection was not ended")
            .unwrap();
        assert!(sent < len / 2, "the browser sent {sent} of {len} bytes");
        tokio::time::timeout(Duration::from_secs(10), front)
            .await
            .expect("the front's task ends with its connection")
            .unwrap();
    }

    /// A "browser" that answers the handshake and holds the connection.
    async fn answering_browser() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut req = [0u8; 1024];
            let _ = s.read(&mut req).await;
            s.write_all(HEAD).await.unwrap();
            while s.read(&mut req).await.is_ok_and(|n| n > 0) {}
        });
        addr
    }

    #[tokio::test]
    async fn a_front_takes_one_connection_from_this_process_only() {
        let addr = answering_browser().await;
        let (url, front) = front(&format!("ws://{addr}/devtools/browser/x"), Reach::Tcp)
            .await
            .unwrap();
        let port = url::Url::parse(&url).unwrap().port().unwrap();
        // Another process connects first: it is closed unread.
        let mut other = std::process::Command::new("bash")
            .args([
                "-c",
                &format!("exec 3<>/dev/tcp/127.0.0.1/{port}; cat <&3 | wc -c"),
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = tokio::task::spawn_blocking(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(other.stdout.as_mut().unwrap(), &mut s).unwrap();
            other.wait().unwrap();
            s
        });
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .expect("another process's connection was not closed")
            .unwrap();
        assert_eq!(out.trim(), "0", "another process read {out:?}");
        // This process's connection is still taken and joined.
        let mut c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut head = vec![0u8; HEAD.len()];
        tokio::time::timeout(Duration::from_secs(30), c.read_exact(&mut head))
            .await
            .expect("this process's connection was not joined")
            .unwrap();
        assert_eq!(head, HEAD);
        front.abort();
    }
}
