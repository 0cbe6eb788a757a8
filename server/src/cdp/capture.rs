//! Downloads taken over CDP, for browsers that share no folder with
//! Cordon (the `kube` driver, an `exec` container): a connection of its
//! own enables `Fetch` on the browser target at the response stage of
//! every document (every tab, frame and popup, and the download manager's
//! own requests, `<a download>` included). A response the browser would
//! save rather than show ([`Response::download`]) is read through
//! `Fetch.takeResponseBodyAsStream` and `IO.read`, then failed, so the
//! page stays where it was, as with a download; every other response goes
//! on at once.
//!
//! What never reaches the network (`blob:`, `data:`) cannot be taken this
//! way: the browser's own download behaviour stays `deny`, and its events
//! tell the session of what was refused.
//!
//! Everything on this connection is the browser's word, so untrusted: the
//! headers only name a file (made safe by the caller), and the caller
//! counts the bytes it reads against its caps.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::{CdpError, RawSender, connect_raw};

/// How much one `IO.read` asks for.
const CHUNK: u64 = 256 * 1024;

type Waiting = Arc<std::sync::Mutex<HashMap<i64, oneshot::Sender<Result<Value, CdpError>>>>>;

/// One browser's document responses, held until passed or taken.
pub struct Capture {
    tx: tokio::sync::Mutex<RawSender>,
    next: AtomicI64,
    waiting: Waiting,
    reader: tokio::task::JoinHandle<()>,
}

/// A document response the browser holds.
#[derive(Debug, Clone)]
pub struct Response {
    id: String,
    /// The URL asked for (without a fragment).
    pub url: String,
    /// The frame whose navigation it answers (a tab's main frame has the
    /// tab's id); empty for the download manager's own requests.
    pub frame: String,
    status: u16,
    headers: Vec<(String, String)>,
    /// Chromium gives a navigation a network id; a request the download
    /// manager makes itself (`<a download>`) has none.
    network_id: Option<String>,
    failed: bool,
}

/// What makes a response a download, and the file name it suggests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Download {
    /// The site's name for it (not yet made safe): the
    /// `Content-Disposition` filename, else the URL's last segment.
    pub name: String,
    /// Whether the name came from the response's own headers (else a
    /// name the page gave, `<a download="…">`, is better).
    pub named_by_headers: bool,
    /// Whether the download manager asked for it itself (`<a download>`):
    /// the browser's refusal event then names it as the page did.
    pub by_download_manager: bool,
}

impl Response {
    fn from_event(params: &Value) -> Option<Self> {
        let id = params.get("requestId")?.as_str()?.to_owned();
        let mut url = params.pointer("/request/url")?.as_str()?.to_owned();
        if let Some(hash) = url.find('#') {
            url.truncate(hash);
        }
        let headers = params
            .get("responseHeaders")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|h| {
                        Some((
                            h.get("name")?.as_str()?.to_ascii_lowercase(),
                            h.get("value")?.as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            id,
            url,
            frame: params
                .get("frameId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            status: params
                .get("responseStatusCode")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(0),
            headers,
            network_id: params
                .get("networkId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            failed: params.get("responseErrorReason").is_some(),
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body's length as announced (`Content-Length`, when the body is
    /// not encoded): a download announced past a cap is refused unread.
    pub fn announced_len(&self) -> Option<u64> {
        if self
            .header("content-encoding")
            .is_some_and(|e| !e.eq_ignore_ascii_case("identity"))
        {
            return None;
        }
        self.header("content-length")?.trim().parse().ok()
    }

    /// Whether the browser would save this response rather than show it,
    /// by Chromium's rules: a `Content-Disposition` other than `inline`, a
    /// request of the download manager's own, or a type it does not
    /// render. (One these rules miss is refused by the browser and
    /// reported by its events.)
    pub fn download(&self) -> Option<Download> {
        if self.failed || !(200..300).contains(&self.status) {
            return None;
        }
        let disposition = self.header("content-disposition").unwrap_or("");
        let kind = disposition
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let attachment = !kind.is_empty() && kind != "inline";
        let mime = self
            .header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !(attachment || self.network_id.is_none() || !renders(&mime)) {
            return None;
        }
        let from_headers = disposition_filename(disposition);
        let named_by_headers = from_headers.is_some();
        let name = from_headers
            .or_else(|| last_segment(&self.url))
            .unwrap_or_else(|| "download".to_owned());
        Some(Download {
            name,
            named_by_headers,
            by_download_manager: self.network_id.is_none(),
        })
    }
}

/// Whether Chromium shows a document of this type (an empty type is
/// sniffed, and shown unless it looks binary: the browser's events report
/// that case).
fn renders(mime: &str) -> bool {
    if mime.is_empty() {
        return true;
    }
    let Some((top, sub)) = mime.split_once('/') else {
        return false;
    };
    match top {
        "text" => !matches!(
            sub,
            "csv" | "calendar" | "x-calendar" | "vcard" | "x-vcard" | "directory"
        ),
        "image" => matches!(
            sub,
            "png"
                | "jpeg"
                | "jpg"
                | "pjpeg"
                | "gif"
                | "webp"
                | "bmp"
                | "x-ms-bmp"
                | "x-icon"
                | "vnd.microsoft.icon"
                | "svg+xml"
                | "avif"
                | "apng"
        ),
        "audio" | "video" => true,
        "application" => {
            matches!(
                sub,
                "json"
                    | "xml"
                    | "xhtml+xml"
                    | "javascript"
                    | "x-javascript"
                    | "ecmascript"
                    | "pdf"
                    | "x-pdf"
            ) || sub.ends_with("+xml")
                || sub.ends_with("+json")
        }
        "multipart" => sub == "x-mixed-replace",
        _ => false,
    }
}

/// The file name a `Content-Disposition` gives: `filename*` (RFC 5987,
/// UTF-8) first, then `filename`.
fn disposition_filename(value: &str) -> Option<String> {
    let mut plain = None;
    for part in value.split(';').skip(1) {
        let Some((key, val)) = part.split_once('=') else {
            continue;
        };
        let (key, val) = (key.trim().to_ascii_lowercase(), val.trim());
        if key == "filename*" {
            let mut pieces = val.splitn(3, '\'');
            let (charset, _lang, encoded) = (pieces.next()?, pieces.next(), pieces.next());
            if let Some(encoded) = encoded
                && charset.eq_ignore_ascii_case("utf-8")
                && let Ok(name) = percent_encoding::percent_decode_str(encoded).decode_utf8()
                && !name.is_empty()
            {
                return Some(name.into_owned());
            }
        } else if key == "filename" && plain.is_none() {
            let name = val.trim_matches('"');
            if !name.is_empty() {
                plain = Some(name.to_owned());
            }
        }
    }
    plain
}

/// The URL's last path segment, decoded.
fn last_segment(url: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    let last = url.path_segments()?.next_back()?;
    let name = percent_encoding::percent_decode_str(last)
        .decode_utf8()
        .ok()?;
    (!name.is_empty()).then(|| name.into_owned())
}

impl Capture {
    /// Connects to the browser (`ws://…/devtools/browser/…`) and starts
    /// holding every document response; they arrive on the receiver and
    /// each must be passed on or taken.
    pub async fn start(
        ws_url: &str,
    ) -> Result<(Self, mpsc::UnboundedReceiver<Response>), CdpError> {
        let (tx, mut rx) = connect_raw(ws_url).await?;
        let waiting: Waiting = Arc::default();
        let (held_tx, held) = mpsc::unbounded_channel();
        let answers = waiting.clone();
        let reader = tokio::spawn(async move {
            while let Some(text) = rx.next().await {
                let Ok(mut msg) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = msg.get("id").and_then(Value::as_i64) {
                    let answer = super::raw::answer_of(&mut msg);
                    let to = answers.lock().expect("capture lock").remove(&id);
                    if let Some(to) = to {
                        let _ = to.send(answer);
                    }
                } else if msg.get("method").and_then(Value::as_str) == Some("Fetch.requestPaused")
                    && let Some(held) = msg.get("params").and_then(Response::from_event)
                    && held_tx.send(held).is_err()
                {
                    break;
                }
            }
            // Whoever still waits hears that the browser is gone.
            answers.lock().expect("capture lock").clear();
        });
        let capture = Self {
            tx: tokio::sync::Mutex::new(tx),
            next: AtomicI64::new(0),
            waiting,
            reader,
        };
        let patterns = json!([{
            "urlPattern": "*",
            "resourceType": "Document",
            "requestStage": "Response",
        }]);
        capture
            .call("Fetch.enable", json!({ "patterns": patterns }))
            .await?;
        Ok((capture, held))
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, CdpError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().expect("capture lock").insert(id, tx);
        let msg = json!({ "id": id, "method": method, "params": params });
        if let Err(e) = self.tx.lock().await.send(msg.to_string()).await {
            self.waiting.lock().expect("capture lock").remove(&id);
            return Err(e);
        }
        rx.await.unwrap_or(Err(CdpError::BrowserGone))
    }

    /// Lets the response go on to the page.
    pub async fn pass(&self, held: &Response) {
        if let Err(e) = self
            .call("Fetch.continueRequest", json!({ "requestId": held.id }))
            .await
        {
            tracing::debug!(error = %e, "a held response could not be passed on");
        }
    }

    /// Ends the request (`net::ERR_ABORTED`): the page stays where it
    /// was, as after a download.
    pub async fn end(&self, held: &Response) {
        if let Err(e) = self
            .call(
                "Fetch.failRequest",
                json!({ "requestId": held.id, "errorReason": "Aborted" }),
            )
            .await
        {
            tracing::debug!(error = %e, "a taken response could not be ended");
        }
    }

    /// The response's body, to read in chunks.
    pub async fn body(&self, held: &Response) -> Result<Body<'_>, CdpError> {
        let stream = self
            .call(
                "Fetch.takeResponseBodyAsStream",
                json!({ "requestId": held.id }),
            )
            .await?;
        let handle = stream
            .get("stream")
            .and_then(Value::as_str)
            .ok_or_else(|| CdpError::Failed("the browser gave no stream".into()))?
            .to_owned();
        Ok(Body {
            capture: self,
            handle,
            done: false,
        })
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // The socket closes with its reader: the browser then lets go of
        // whatever this connection held.
        self.reader.abort();
    }
}

/// A response body being read.
pub struct Body<'a> {
    capture: &'a Capture,
    handle: String,
    done: bool,
}

impl Body<'_> {
    /// The next bytes; `None` at the end.
    pub async fn chunk(&mut self) -> Result<Option<Vec<u8>>, CdpError> {
        if self.done {
            return Ok(None);
        }
        let read = self
            .capture
            .call("IO.read", json!({ "handle": self.handle, "size": CHUNK }))
            .await?;
        self.done = read.get("eof").and_then(Value::as_bool).unwrap_or(true);
        let data = read.get("data").and_then(Value::as_str).unwrap_or("");
        let bytes = if read
            .get("base64Encoded")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| CdpError::Failed("the browser sent a malformed chunk".into()))?
        } else {
            data.as_bytes().to_vec()
        };
        if bytes.is_empty() && self.done {
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// Lets go of the stream.
    pub async fn close(self) {
        let _ = self
            .capture
            .call("IO.close", json!({ "handle": self.handle }))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(headers: &[(&str, &str)], network_id: bool) -> Response {
        let headers: Vec<Value> = headers
            .iter()
            .map(|(n, v)| json!({ "name": n, "value": v }))
            .collect();
        let mut ev = json!({
            "requestId": "interception-job-1.0",
            "request": { "url": "https://shop.example/files/Q3%20report.pdf?x=1#top", "method": "GET" },
            "frameId": "F1",
            "resourceType": "Document",
            "responseStatusCode": 200,
            "responseHeaders": headers,
        });
        if network_id {
            ev["networkId"] = json!("N1");
        }
        Response::from_event(&ev).unwrap()
    }

    #[test]
    fn a_response_is_a_download_by_chromiums_rules() {
        let attached = response(
            &[
                ("Content-Type", "text/html"),
                ("Content-Disposition", "attachment; filename=\"a.csv\""),
            ],
            true,
        );
        assert_eq!(
            attached.download(),
            Some(Download {
                name: "a.csv".into(),
                named_by_headers: true,
                by_download_manager: false,
            })
        );
        assert_eq!(
            attached.url,
            "https://shop.example/files/Q3%20report.pdf?x=1"
        );
        // An unknown disposition type is an attachment (RFC 6266).
        assert!(
            response(&[("content-disposition", "foo")], true)
                .download()
                .is_some()
        );
        // `inline` is shown, whatever the name.
        assert_eq!(
            response(
                &[
                    ("content-type", "text/html"),
                    ("content-disposition", "inline; filename=x.html")
                ],
                true
            )
            .download(),
            None
        );
        // Types the browser renders stay pages; the others are saved.
        for shown in [
            "text/html; charset=utf-8",
            "text/plain",
            "application/json",
            "image/png",
            "image/svg+xml",
            "application/pdf",
            "video/mp4",
            "application/ld+json",
            "",
        ] {
            assert_eq!(
                response(&[("content-type", shown)], true).download(),
                None,
                "{shown}"
            );
        }
        for saved in [
            "text/csv",
            "application/zip",
            "application/octet-stream",
            "image/x-foo",
            "text/calendar",
            "font/woff2",
            "application/wasm",
        ] {
            let d = response(&[("content-type", saved)], true).download();
            assert_eq!(
                d,
                Some(Download {
                    name: "Q3 report.pdf".into(),
                    named_by_headers: false,
                    by_download_manager: false,
                }),
                "{saved}"
            );
        }
        // The download manager's own request (`<a download>`) has no
        // network id: saved whatever its type.
        assert!(
            response(&[("content-type", "text/plain")], false)
                .download()
                .is_some_and(|d| d.by_download_manager)
        );
    }

    #[test]
    fn the_announced_length_is_the_plain_bodys_only() {
        let plain = response(&[("content-length", " 3145728")], true);
        assert_eq!(plain.announced_len(), Some(3 << 20));
        let zipped = response(
            &[("content-length", "10"), ("content-encoding", "gzip")],
            true,
        );
        assert_eq!(zipped.announced_len(), None, "a gzip body decodes larger");
        assert_eq!(
            response(&[("content-length", "lots")], true).announced_len(),
            None
        );
    }

    #[test]
    fn only_a_successful_response_is_taken() {
        let mut r = response(&[("content-disposition", "attachment")], true);
        r.status = 404;
        assert_eq!(r.download(), None);
        let mut r = response(&[("content-disposition", "attachment")], true);
        r.failed = true;
        assert_eq!(r.download(), None);
    }

    #[test]
    fn the_name_comes_from_the_disposition_then_the_url() {
        assert_eq!(
            disposition_filename(
                "attachment; filename=\"plain.txt\"; filename*=UTF-8''%C3%A9t%C3%A9.txt"
            )
            .as_deref(),
            Some("été.txt")
        );
        assert_eq!(
            disposition_filename("attachment; FILENAME=../../etc/passwd").as_deref(),
            Some("../../etc/passwd"),
            "made safe by the caller (FileName::sanitize), not here"
        );
        assert_eq!(disposition_filename("attachment"), None);
        assert_eq!(disposition_filename("attachment; filename=\"\""), None);
        // A charset other than UTF-8 is not guessed at.
        assert_eq!(
            disposition_filename("attachment; filename*=iso-8859-1''%E9.txt"),
            None
        );
        assert_eq!(last_segment("https://a.example/").as_deref(), None);
        assert_eq!(
            last_segment("https://a.example/x/y%2Fz.bin?q").as_deref(),
            Some("y/z.bin")
        );
    }

    #[test]
    fn a_malformed_event_is_no_response() {
        assert!(Response::from_event(&json!({ "requestId": 5 })).is_none());
        assert!(Response::from_event(&json!({ "request": { "url": "x" } })).is_none());
    }
}
