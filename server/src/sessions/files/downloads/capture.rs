//! Downloads taken over CDP, for a browser that shares no folder with
//! Cordon (`download_transfer`: `cdp`; the `kube` driver by default). The
//! browser's own download behaviour stays `deny`; [`crate::cdp::Capture`]
//! holds every document response, and one the browser would save is read
//! here, chunk by chunk, into the session's folder: the caps hold on the
//! bytes read, the name is made safe, the file is hashed and audited as a
//! download saved by the browser is. The tab's navigation then ends where
//! it was, as after a download.
//!
//! The browser's events still say what it refused: a download Cordon did
//! not take (a `blob:` or `data:` URL never reaches the network) is listed
//! as refused, `not_taken`. For one it did take from the download manager
//! (`<a download="name">`), the event carries the name the page gave.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::{Begun, DownloadStatus, Downloads, Over};
use crate::cdp::{Capture, CdpError, Download, DownloadEvent, HeldResponse};
use crate::domain::{DownloadGuid, FileName};
use crate::nofollow;
use crate::sessions::RunningSession;
use crate::store::Store;

/// How long the browser's word on a download is remembered, and how long a
/// refusal waits for a take of the same URL before it counts as one.
const REMEMBER: Duration = Duration::from_secs(30);
/// URLs remembered on each list at most (the oldest go first): a page
/// that starts downloads without end grows neither.
const MAX_SEEN: usize = 1024;
const MATCH_WAIT: Duration = Duration::from_secs(2);
/// How long a take from the download manager waits for the page's name.
const NAME_WAIT: Duration = Duration::from_secs(1);

/// How a file being taken starts its name (hidden; never listed).
const PARTIAL: &str = ".taking-";

/// Why a download is refused when Cordon could not take it.
const NOT_TAKEN: &str = "not_taken";

/// What was taken and what the browser said, recently.
#[derive(Default)]
pub(super) struct Seen(Mutex<SeenLists>);

/// A URL as remembered: its SHA-256 (a URL may be megabytes long).
type UrlKey = [u8; 32];

fn url_key(url: &str) -> UrlKey {
    Sha256::digest(url.as_bytes()).into()
}

#[derive(Default)]
struct SeenLists {
    /// URLs taken, when.
    taken: Vec<(UrlKey, Instant)>,
    /// The browser's refusals: URL, the page's name for it (made safe,
    /// so at most 255 bytes), when.
    refused: Vec<(UrlKey, String, Instant)>,
}

impl Seen {
    fn note_taken(&self, url: &str) {
        let mut lists = self.0.lock().expect("seen lock");
        lists.taken.retain(|(_, at)| at.elapsed() < REMEMBER);
        if lists.taken.len() >= MAX_SEEN {
            lists.taken.remove(0);
        }
        lists.taken.push((url_key(url), Instant::now()));
    }

    fn note_refused(&self, url: &str, name: &str) {
        let mut lists = self.0.lock().expect("seen lock");
        lists.refused.retain(|(_, _, at)| at.elapsed() < REMEMBER);
        if lists.refused.len() >= MAX_SEEN {
            lists.refused.remove(0);
        }
        let name = FileName::sanitize(name).to_string();
        lists.refused.push((url_key(url), name, Instant::now()));
    }

    fn was_taken(&self, url: &str) -> bool {
        let key = url_key(url);
        let lists = self.0.lock().expect("seen lock");
        lists
            .taken
            .iter()
            .any(|(u, at)| *u == key && at.elapsed() < REMEMBER)
    }

    fn name_for(&self, url: &str) -> Option<String> {
        let key = url_key(url);
        let lists = self.0.lock().expect("seen lock");
        lists
            .refused
            .iter()
            .rev()
            .find(|(u, _, at)| *u == key && at.elapsed() < REMEMBER)
            .map(|(_, n, _)| n.clone())
    }
}

/// How reading a body ended.
enum Read {
    /// In full, in `temp`.
    Done {
        temp: PathBuf,
        size: u64,
        sha256: String,
    },
    /// Past a cap after `size` bytes (nothing kept).
    Over(u64, Over),
}

impl Downloads {
    /// Takes the session's downloads over CDP until the session ends
    /// ([`Downloads::stop_watching`]): `held` are the responses `capture`
    /// holds, `refused` the browser's own download events.
    pub(crate) fn capture(
        self: &Arc<Self>,
        session: Weak<RunningSession>,
        store: Store,
        capture: Capture,
        mut held: mpsc::UnboundedReceiver<HeldResponse>,
        mut refused: mpsc::UnboundedReceiver<DownloadEvent>,
    ) {
        let me = self.clone();
        let capture = Arc::new(capture);
        let task = tokio::spawn(async move {
            // Aborted with this task: no take outlives the session.
            let mut work = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    Some(response) = held.recv() => {
                        let (me, capture) = (me.clone(), capture.clone());
                        let (session, store) = (session.clone(), store.clone());
                        work.spawn(async move {
                            match response.download() {
                                None => capture.pass(&response).await,
                                Some(d) => me.take(&session, &store, &capture, response, d).await,
                            }
                        });
                    }
                    Some(event) = refused.recv() => {
                        if let DownloadEvent::Began { suggested, url, .. } = event {
                            let (me, store) = (me.clone(), store.clone());
                            work.spawn(async move { me.refused_by_browser(&store, &url, &suggested).await });
                        }
                    }
                    Some(_) = work.join_next(), if !work.is_empty() => {}
                    else => break,
                }
            }
        });
        *self.watcher.lock().expect("downloads lock") = Some(task);
    }

    /// Reads one download into the session's folder, then ends its
    /// request.
    async fn take(
        &self,
        session: &Weak<RunningSession>,
        store: &Store,
        capture: &Capture,
        held: HeldResponse,
        download: Download,
    ) {
        let guid = DownloadGuid::generate();
        let name = FileName::sanitize(&download.name);
        self.taken.note_taken(&held.url);
        if self.begin(guid.clone(), &name) == Begun::Full {
            // Nothing is read; the request ends as after a download.
            if let Some(live) = session.upgrade()
                && !held.frame.is_empty()
            {
                live.conn.note_download(&held.frame);
            }
            capture.end(&held).await;
            self.refuse_too_many(store, &name).await;
            return;
        }
        let read = self.read(capture, &held, &guid).await;
        // The tool that navigated hears of a download, not a failure; only
        // now, since it resets the tab, which would cut the read short.
        if let Some(live) = session.upgrade()
            && !held.frame.is_empty()
        {
            live.conn.note_download(&held.frame);
        }
        capture.end(&held).await;
        match read {
            Ok(Read::Over(bytes, over)) => self.refuse(store, &guid, bytes, over).await,
            Ok(Read::Done { temp, size, sha256 }) => {
                let mut wanted = download.name.clone();
                if download.by_download_manager && !download.named_by_headers {
                    // The page's `<a download="…">` name is in the
                    // browser's event, which follows the request's end.
                    let deadline = Instant::now() + NAME_WAIT;
                    while Instant::now() < deadline {
                        if let Some(name) = self.taken.name_for(&held.url) {
                            wanted = name;
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
                let wanted = FileName::sanitize(&wanted);
                let dir = self.dir.clone();
                let settled =
                    tokio::task::spawn_blocking(move || settle(&temp, &dir, &wanted)).await;
                match settled {
                    Ok(Ok(name)) => {
                        self.update(&guid, |i| {
                            i.name = name.to_string();
                            i.size = size;
                            i.sha256 = Some(sha256.clone());
                            i.state = DownloadStatus::Completed;
                        });
                        let params = json!({ "size": size, "sha256": sha256, "via": "cdp" });
                        self.audit(store, &guid, "download.completed", params, "ok")
                            .await;
                    }
                    Ok(Err(e)) => self.failed(&guid, &e).await,
                    Err(e) => self.failed(&guid, &anyhow::Error::from(e)).await,
                }
            }
            Err(e) => self.failed(&guid, &e).await,
        }
    }

    async fn failed(&self, guid: &DownloadGuid, e: &anyhow::Error) {
        tracing::warn!(error = %format!("{e:#}"), "failed to take a download over CDP");
        self.update(guid, |i| {
            i.state = DownloadStatus::Canceled;
            i.size = 0;
            i.reason = Some("io".into());
        });
    }

    /// Reads the body into a new hidden file of the session's folder,
    /// counting every chunk against the caps.
    async fn read(
        &self,
        capture: &Capture,
        held: &HeldResponse,
        guid: &DownloadGuid,
    ) -> anyhow::Result<Read> {
        use anyhow::Context;
        // Counted against the caps from the start, as the browser's
        // announced total is.
        let announced = held.announced_len().unwrap_or(0);
        if announced > self.max_bytes {
            return Ok(Read::Over(announced, Over::File));
        }
        let temp = self.dir.join(format!("{PARTIAL}{guid}"));
        let file = nofollow::create_private(&temp)
            .with_context(|| format!("cannot create {}", temp.display()))?;
        let mut out = tokio::fs::File::from_std(file);
        let mut body = capture
            .body(held)
            .await
            .map_err(|e| anyhow::anyhow!("cannot take the response: {e}"))?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let outcome = loop {
            let chunk = match body.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break Ok(None),
                Err(e) => break Err(e),
            };
            size += chunk.len() as u64;
            let want = size.max(announced);
            let over = if want > self.max_bytes {
                Some(Over::File)
            } else if self.used_except(guid) + want > self.session_max_bytes {
                Some(Over::Session)
            } else {
                None
            };
            if let Some(over) = over {
                break Ok(Some(over));
            }
            hasher.update(&chunk);
            if let Err(e) = out.write_all(&chunk).await {
                break Err(CdpError::Failed(format!("cannot write: {e}")));
            }
            self.update(guid, |i| i.size = size);
        };
        body.close().await;
        let flushed = out.flush().await;
        match (outcome, flushed) {
            (Ok(None), Ok(())) => Ok(Read::Done {
                temp,
                size,
                sha256: hex::encode(hasher.finalize()),
            }),
            (Ok(Some(over)), _) => {
                let _ = tokio::fs::remove_file(&temp).await;
                Ok(Read::Over(size, over))
            }
            (Err(e), _) => {
                let _ = tokio::fs::remove_file(&temp).await;
                Err(anyhow::anyhow!("the body could not be read: {e}"))
            }
            (Ok(None), Err(e)) => {
                let _ = tokio::fs::remove_file(&temp).await;
                Err(anyhow::Error::from(e).context("cannot write the download"))
            }
        }
    }

    /// The browser refused a download (its behaviour is `deny`): unless it
    /// was one taken over CDP, it is listed and audited as refused.
    async fn refused_by_browser(&self, store: &Store, url: &str, suggested: &str) {
        let url = url.split('#').next().unwrap_or(url);
        self.taken.note_refused(url, suggested);
        // The browser may speak before or after the take began.
        tokio::time::sleep(MATCH_WAIT).await;
        if self.taken.was_taken(url) {
            return;
        }
        let guid = DownloadGuid::generate();
        let name = FileName::sanitize(suggested);
        if self.begin(guid.clone(), &name) == Begun::Full {
            self.refuse_too_many(store, &name).await;
            return;
        }
        self.update(&guid, |i| {
            i.state = DownloadStatus::Refused;
            i.reason = Some(NOT_TAKEN.into());
        });
        let outcome = format!("refused: {NOT_TAKEN}");
        self.audit(store, &guid, "download.refused", json!({}), &outcome)
            .await;
    }
}

/// Removes what takes left half-read in `dir` (cut short by the close).
pub(super) async fn remove_partial(dir: &Path) {
    let Ok(mut entries) = tokio::fs::read_dir(dir).await else {
        return;
    };
    while let Ok(Some(e)) = entries.next_entry().await {
        if e.file_name().to_string_lossy().starts_with(PARTIAL) {
            let _ = tokio::fs::remove_file(e.path()).await;
        }
    }
}

/// Gives the taken file in `temp` its name in `dir` (`wanted`, or
/// `wanted (n)` when taken), never replacing a file.
fn settle(temp: &Path, dir: &Path, wanted: &FileName) -> anyhow::Result<FileName> {
    use anyhow::Context;
    let mut name = wanted.clone();
    let mut n = 2;
    loop {
        let to = dir.join(name.as_str());
        match std::fs::hard_link(temp, &to) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if n > crate::domain::MAX_NUMBERED {
                    anyhow::bail!("{} names like this one are taken already", n - 1);
                }
                name = wanted.numbered(n);
                n += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot name {}", to.display())),
        }
    }
    std::fs::remove_file(temp).with_context(|| format!("cannot remove {}", temp.display()))?;
    Ok(name)
}
