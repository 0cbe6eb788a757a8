//! Downloads of a session that allows them. The browser saves each under
//! its GUID in the sandbox's download directory; a watcher follows the
//! browser's events, cancels and removes one that grows past
//! `download_max_mb`, and copies a finished one, under its (checked)
//! suggested name, into the session's own folder of the data dir:
//! `<data_dir or shared_dir>/downloads/<tenant>/<session>/`. Each is audited by name,
//! size and SHA-256.
//!
//! The sandbox's folder and the events are the browser's, so untrusted: an
//! id that is not Chromium's GUID shape is refused, and the finished file
//! is opened without following a link and must be a regular file
//! ([`crate::nofollow`]); its bytes are copied from that open handle into
//! a file Cordon creates (never renamed out of the sandbox's folder), and
//! the caps are checked on the bytes copied.
//!
//! A browser that shares no folder with Cordon (`download_transfer`:
//! `cdp`) has its downloads taken over CDP instead ([`capture`]): the
//! same entries, caps, names and audit, the bytes read from the response.

mod capture;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::audit::{Actor, NewEvent};
use crate::cdp::{DownloadEvent, DownloadState};
use crate::domain::{DownloadGuid, FileName, SessionId, TenantId};
use crate::nofollow::{self, OpenError};
use crate::sessions::RunningSession;
use crate::store::Store;

/// Where a download stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DownloadStatus {
    /// Still arriving.
    InProgress,
    /// Saved in full; it can be fetched.
    Completed,
    /// Refused by Cordon (over a cap, see `reason`) and removed.
    Refused,
    /// Cancelled by the page or the browser.
    Canceled,
}

/// One download of a session, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DownloadInfo {
    /// The file's name (the site's suggestion, made safe; `name (2).ext`
    /// when taken); fetch it at `/api/sessions/{id}/downloads/{name}`.
    pub name: String,
    /// Bytes (so far, while in progress).
    pub size: u64,
    /// SHA-256, lowercase hex, once completed.
    pub sha256: Option<String>,
    /// `in_progress`, `completed`, `refused` or `canceled`.
    pub state: DownloadStatus,
    /// When it began (RFC 3339).
    pub created_at: String,
    /// Why it was refused: `too_large` (over `download_max_mb`),
    /// `session_full` (the session's downloads would pass
    /// `download_session_max_mb`), `not_a_file` (the browser left
    /// something other than a regular file, a symbolic link say, under
    /// the download's id) or `not_taken` (downloads taken over CDP: the
    /// browser refused one that never reached the network, a `blob:` or
    /// `data:` URL, or one Cordon did not recognise as a download). A
    /// session lists at most 1,000 downloads; past them each is refused
    /// unlisted, and the first is audited `too_many`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

struct Entry {
    guid: DownloadGuid,
    info: DownloadInfo,
}

/// Why a session's downloads cannot be listed or one fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The session refuses downloads.
    #[error("this session refuses downloads; open one with \"downloads\": \"allow\"")]
    Denied,
    /// No completed download of that name.
    #[error("no completed download named {0:?} in this session")]
    NotFound(String),
    /// Reading it failed.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

/// A session's downloads (only when it allows them).
pub struct Downloads {
    tenant: TenantId,
    session: SessionId,
    /// Finished files: `<data_dir>/downloads/<tenant>/<session>/`.
    dir: PathBuf,
    /// The sandbox's download directory on this host (GUID-named files
    /// while they arrive; removed with the sandbox); `None` when they are
    /// taken over CDP.
    incoming: Option<PathBuf>,
    max_bytes: u64,
    /// What all of its downloads may take together.
    session_max_bytes: u64,
    entries: Mutex<Vec<Entry>>,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Downloads taken over CDP: what was taken and what the browser said.
    taken: capture::Seen,
    /// A download past [`MAX_DOWNLOADS`] was audited (once a session).
    full_audited: std::sync::atomic::AtomicBool,
    /// Malformed ids audited so far.
    bad_ids_audited: std::sync::atomic::AtomicU32,
    /// Ids refused past [`MAX_DOWNLOADS`] (the newest 1,024): one that
    /// goes on arriving is cancelled and removed again.
    refused_ids: Mutex<std::collections::VecDeque<DownloadGuid>>,
}

impl Downloads {
    /// Creates the session's folder under `root` (`<data_dir>/downloads`);
    /// `incoming` is the sandbox's download folder, or `None` when the
    /// downloads are taken over CDP.
    pub(crate) async fn create(
        root: &Path,
        tenant: &TenantId,
        session: &SessionId,
        incoming: Option<PathBuf>,
        (max_bytes, session_max_bytes): (u64, u64),
    ) -> anyhow::Result<Arc<Self>> {
        use anyhow::Context;
        use std::os::unix::fs::PermissionsExt;
        let dir = Self::folder(root, tenant, session);
        tokio::fs::create_dir_all(&dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
        tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .await
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
        Ok(Arc::new(Self {
            tenant: tenant.clone(),
            session: session.clone(),
            dir,
            incoming,
            max_bytes,
            session_max_bytes,
            entries: Mutex::default(),
            watcher: Mutex::default(),
            taken: capture::Seen::default(),
            full_audited: std::sync::atomic::AtomicBool::new(false),
            bad_ids_audited: std::sync::atomic::AtomicU32::new(0),
            refused_ids: Mutex::default(),
        }))
    }

    /// A session's folder under `root`.
    pub fn folder(root: &Path, tenant: &TenantId, session: &SessionId) -> PathBuf {
        root.join(tenant.as_str()).join(session.as_str())
    }

    /// Whether the browser saves them in a folder shared with Cordon
    /// (else they are taken over CDP).
    pub fn shares_folder(&self) -> bool {
        self.incoming.is_some()
    }

    /// Where its finished files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every download so far, oldest first.
    pub fn list(&self) -> Vec<DownloadInfo> {
        self.entries
            .lock()
            .expect("downloads lock")
            .iter()
            .map(|e| e.info.clone())
            .collect()
    }

    /// A completed download's metadata and its file, open for reading.
    pub async fn open(
        &self,
        name: &FileName,
    ) -> Result<(DownloadInfo, tokio::fs::File), FetchError> {
        let info = self
            .list()
            .into_iter()
            .find(|i| i.state == DownloadStatus::Completed && i.name == name.as_str())
            .ok_or_else(|| FetchError::NotFound(name.to_string()))?;
        // Only Cordon writes this folder; still, nothing but the regular
        // file it kept is served.
        let path = self.dir.join(name.as_str());
        let file = tokio::task::spawn_blocking(move || match nofollow::open_regular(&path) {
            Ok(f) => Ok(f),
            Err(OpenError::NotRegular) => Err(anyhow::anyhow!(
                "{} is not a regular file; not served",
                path.display()
            )),
            Err(OpenError::Io(e)) => {
                Err(anyhow::Error::from(e).context(format!("cannot open {}", path.display())))
            }
        })
        .await
        .map_err(anyhow::Error::from)??;
        Ok((info, tokio::fs::File::from_std(file)))
    }

    /// Follows the browser's download events until they end.
    pub(crate) fn watch(
        self: &Arc<Self>,
        session: Weak<RunningSession>,
        store: Store,
        mut events: mpsc::UnboundedReceiver<DownloadEvent>,
    ) {
        let me = self.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                me.on_event(&session, &store, event).await;
            }
        });
        *self.watcher.lock().expect("downloads lock") = Some(task);
    }

    /// At close, before the sandbox stops: no more events are handled.
    pub(crate) fn stop_watching(&self) {
        if let Some(task) = self.watcher.lock().expect("downloads lock").take() {
            task.abort();
        }
    }

    /// At close, after the sandbox stopped: removes the folder unless
    /// `keep` (the session records for audit).
    pub(crate) async fn finish(&self, keep: bool) {
        self.stop_watching();
        if keep {
            // A download taken over CDP that the close cut short is not
            // kept half-read.
            if !self.shares_folder() {
                capture::remove_partial(&self.dir).await;
            }
            return;
        }
        match tokio::fs::remove_dir_all(&self.dir).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!(error = %e, dir = %self.dir.display(), "failed to remove a session's downloads");
            }
        }
    }

    async fn on_event(&self, session: &Weak<RunningSession>, store: &Store, event: DownloadEvent) {
        match event {
            DownloadEvent::Began {
                guid, suggested, ..
            } => {
                let name = FileName::sanitize(&suggested);
                let Ok(guid) = DownloadGuid::parse(&guid) else {
                    // Not an id Chromium makes: it could name a path
                    // outside the sandbox's folder. No entry, no file.
                    metrics::counter!("cordon_downloads_refused_total", "reason" => BAD_ID)
                        .increment(1);
                    if self.bad_ids_audited.fetch_add(1, Ordering::Relaxed) < MAX_BAD_IDS_AUDITED {
                        tracing::warn!(
                            "a download with a malformed id was refused (hostile browser?)"
                        );
                        self.audit_refused_id(store, &name).await;
                    }
                    return;
                };
                match self.begin(guid.clone(), &name) {
                    Begun::New | Begun::Known => {}
                    Begun::Full => {
                        {
                            let mut refused = self.refused_ids.lock().expect("downloads lock");
                            if refused.len() >= 1024 {
                                refused.pop_front();
                            }
                            refused.push_back(guid.clone());
                        }
                        self.cancel_unlisted(session, &guid).await;
                        self.refuse_too_many(store, &name).await;
                    }
                }
            }
            DownloadEvent::Progress {
                guid,
                received,
                total,
                state,
            } => {
                // An id that never began (a malformed one included) is
                // nothing of this session's.
                let Ok(guid) = DownloadGuid::parse(&guid) else {
                    return;
                };
                let Some(current) = self.state_of(&guid) else {
                    // Refused past the session's number and still
                    // arriving: cancelled and removed again.
                    let refused = self
                        .refused_ids
                        .lock()
                        .expect("downloads lock")
                        .contains(&guid);
                    if refused {
                        self.cancel_unlisted(session, &guid).await;
                    }
                    return;
                };
                if current != DownloadStatus::InProgress {
                    return;
                }
                let want = received.max(total);
                let over = if want > self.max_bytes {
                    Some(Over::File)
                } else if self.used_except(&guid) + want > self.session_max_bytes {
                    Some(Over::Session)
                } else {
                    None
                };
                match state {
                    DownloadState::InProgress if over.is_some() => {
                        if let Some(live) = session.upgrade()
                            && let Err(e) = live.conn.cancel_download(guid.as_str()).await
                        {
                            tracing::warn!(error = %e, "failed to cancel a download over its cap");
                        }
                        self.refuse(store, &guid, want, over.unwrap_or(Over::File))
                            .await;
                    }
                    DownloadState::InProgress => {
                        self.update(&guid, |i| i.size = received);
                    }
                    DownloadState::Completed => self.complete(store, &guid).await,
                    DownloadState::Canceled => {
                        self.remove_incoming(&guid).await;
                        self.update(&guid, |i| i.state = DownloadStatus::Canceled);
                        self.audit(store, &guid, "download.canceled", json!({}), "canceled")
                            .await;
                    }
                }
            }
        }
    }

    /// Cancels a download that has no entry, and removes what arrived.
    async fn cancel_unlisted(&self, session: &Weak<RunningSession>, guid: &DownloadGuid) {
        if let Some(live) = session.upgrade()
            && let Err(e) = live.conn.cancel_download(guid.as_str()).await
        {
            tracing::warn!(error = %e, "failed to cancel a download past the session's number");
        }
        self.remove_incoming(guid).await;
    }

    /// A new entry, in progress, unless `guid` has one already or the
    /// session lists [`MAX_DOWNLOADS`].
    fn begin(&self, guid: DownloadGuid, name: &FileName) -> Begun {
        let mut entries = self.entries.lock().expect("downloads lock");
        if entries.iter().any(|e| e.guid == guid) {
            return Begun::Known;
        }
        if entries.len() >= MAX_DOWNLOADS {
            return Begun::Full;
        }
        entries.push(Entry {
            guid,
            info: DownloadInfo {
                name: name.to_string(),
                size: 0,
                sha256: None,
                state: DownloadStatus::InProgress,
                created_at: crate::time::rfc3339_ms(crate::time::now_ms()),
                reason: None,
            },
        });
        Begun::New
    }

    fn state_of(&self, guid: &DownloadGuid) -> Option<DownloadStatus> {
        self.entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == *guid)
            .map(|e| e.info.state)
    }

    fn update(
        &self,
        guid: &DownloadGuid,
        change: impl FnOnce(&mut DownloadInfo),
    ) -> Option<DownloadInfo> {
        let mut entries = self.entries.lock().expect("downloads lock");
        let entry = entries.iter_mut().find(|e| e.guid == *guid)?;
        change(&mut entry.info);
        Some(entry.info.clone())
    }

    /// Bytes the session's other downloads take or are taking.
    fn used_except(&self, guid: &DownloadGuid) -> u64 {
        self.entries
            .lock()
            .expect("downloads lock")
            .iter()
            .filter(|e| {
                e.guid != *guid
                    && matches!(
                        e.info.state,
                        DownloadStatus::Completed | DownloadStatus::InProgress
                    )
            })
            .map(|e| e.info.size)
            .sum()
    }

    /// Marks it refused, removes what arrived, audits.
    async fn refuse(&self, store: &Store, guid: &DownloadGuid, bytes: u64, over: Over) {
        let reason = over.reason();
        self.update(guid, |i| {
            i.state = DownloadStatus::Refused;
            i.size = 0;
            i.reason = Some(reason.into());
        });
        self.remove_incoming(guid).await;
        let params = json!({
            "bytes": bytes,
            "max_bytes": self.max_bytes,
            "session_max_bytes": self.session_max_bytes,
        });
        let outcome = format!("refused: {reason}");
        self.audit(store, guid, "download.refused", params, &outcome)
            .await;
    }

    /// Copies a finished download into the session's folder, hashed.
    async fn complete(&self, store: &Store, guid: &DownloadGuid) {
        let Some(incoming) = &self.incoming else {
            return;
        };
        let from = incoming.join(guid.as_str());
        // The event may come a moment before the file has its final name.
        // (Whatever stands there, a link included, ends the wait; only a
        // regular file is kept.)
        for _ in 0..40 {
            if tokio::fs::symlink_metadata(&from).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let Some(wanted) = self
            .entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == *guid)
            .map(|e| FileName::sanitize(&e.info.name))
        else {
            return;
        };
        let room = self
            .session_max_bytes
            .saturating_sub(self.used_except(guid));
        let (dir, max) = (self.dir.clone(), self.max_bytes.min(room));
        let moved = tokio::task::spawn_blocking(move || keep_file(&from, &dir, &wanted, max)).await;
        if matches!(moved, Ok(Ok(Kept::NotAFile))) {
            tracing::warn!("a finished download is not a regular file; refused (hostile browser?)");
            self.update(guid, |i| {
                i.state = DownloadStatus::Refused;
                i.size = 0;
                i.reason = Some(NOT_A_FILE.into());
            });
            // Unlinks what was planted (a link, not its target).
            self.remove_incoming(guid).await;
            let outcome = format!("refused: {NOT_A_FILE}");
            self.audit(store, guid, "download.refused", json!({}), &outcome)
                .await;
            return;
        }
        match moved {
            Ok(Ok(Kept::Saved { name, size, sha256 })) => {
                self.update(guid, |i| {
                    i.name = name.to_string();
                    i.size = size;
                    i.sha256 = Some(sha256.clone());
                    i.state = DownloadStatus::Completed;
                });
                let params = json!({ "size": size, "sha256": sha256 });
                self.audit(store, guid, "download.completed", params, "ok")
                    .await;
            }
            Ok(Ok(Kept::TooLarge(size))) => {
                let over = if size > self.max_bytes {
                    Over::File
                } else {
                    Over::Session
                };
                self.refuse(store, guid, size, over).await;
            }
            Ok(Err(e)) => {
                tracing::error!(error = %format!("{e:#}"), "failed to keep a finished download");
                self.remove_incoming(guid).await;
                self.update(guid, |i| {
                    i.state = DownloadStatus::Canceled;
                    i.reason = Some("io".into());
                });
            }
            Ok(Ok(Kept::NotAFile)) => {}
            Err(e) => tracing::error!(error = %e, "the download copier panicked"),
        }
    }

    /// Removes a download's partial or finished file from the sandbox's
    /// directory (Chromium may add a suffix while it writes).
    async fn remove_incoming(&self, guid: &DownloadGuid) {
        let Some(incoming) = &self.incoming else {
            return;
        };
        let Ok(mut entries) = tokio::fs::read_dir(incoming).await else {
            return;
        };
        while let Ok(Some(e)) = entries.next_entry().await {
            if e.file_name().to_string_lossy().starts_with(guid.as_str()) {
                let _ = tokio::fs::remove_file(e.path()).await;
            }
        }
    }

    /// Audits one download's event by its name (never its content or URL).
    async fn audit(
        &self,
        store: &Store,
        guid: &DownloadGuid,
        action: &'static str,
        mut params: serde_json::Value,
        outcome: &str,
    ) {
        let name = self
            .entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == *guid)
            .map(|e| e.info.name.clone())
            .unwrap_or_default();
        params["name"] = json!(name);
        self.append(store, action, params, outcome).await;
    }

    /// A download past [`MAX_DOWNLOADS`]: counted, and audited the
    /// first time in the session.
    pub(super) async fn refuse_too_many(&self, store: &Store, name: &FileName) {
        metrics::counter!("cordon_downloads_refused_total", "reason" => TOO_MANY).increment(1);
        if self.full_audited.swap(true, Ordering::Relaxed) {
            return;
        }
        tracing::warn!(
            max = MAX_DOWNLOADS,
            "a session's downloads are full; more are refused"
        );
        let outcome = format!("refused: {TOO_MANY}");
        let params = json!({ "name": name.as_str(), "max_downloads": MAX_DOWNLOADS });
        self.append(store, "download.refused", params, &outcome)
            .await;
    }

    /// Audits a download refused for its malformed id (the id itself is
    /// not written: it is the browser's, and may be anything).
    async fn audit_refused_id(&self, store: &Store, name: &FileName) {
        let outcome = format!("refused: {BAD_ID}");
        let params = json!({ "name": name.as_str() });
        self.append(store, "download.refused", params, &outcome)
            .await;
    }

    async fn append(
        &self,
        store: &Store,
        action: &'static str,
        params: serde_json::Value,
        outcome: &str,
    ) {
        let event = NewEvent::new(Actor::System, action)
            .tenant(&self.tenant)
            .session(self.session.as_str())
            .params(params)
            .outcome(outcome);
        if let Err(e) = store.audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a download");
        }
    }
}

/// Why a download whose id is not Chromium's shape was refused.
const BAD_ID: &str = "bad_id";
/// Why a download past [`MAX_DOWNLOADS`] was refused.
const TOO_MANY: &str = "too_many";
/// Downloads one session lists: past them, each is refused (cancelled or
/// ended, no entry), and the first of those is audited. A page (or a
/// compromised browser) that starts downloads without end grows neither
/// the list nor the audit log.
pub const MAX_DOWNLOADS: usize = 1000;
/// Malformed ids audited per session (a compromised browser's flood of
/// them writes no more rows; the rest are counted in the log's place by
/// `cordon_downloads_refused_total`).
const MAX_BAD_IDS_AUDITED: u32 = 16;
/// Why a download whose file is not a regular file was refused.
const NOT_A_FILE: &str = "not_a_file";

/// What [`Downloads::begin`] did.
#[derive(Debug, PartialEq, Eq)]
enum Begun {
    /// A new entry.
    New,
    /// The id has one already (a browser that says "began" twice).
    Known,
    /// The session lists [`MAX_DOWNLOADS`]: no entry.
    Full,
}

/// Which cap a download ran into.
#[derive(Clone, Copy)]
enum Over {
    /// `download_max_mb`.
    File,
    /// `download_session_max_mb`.
    Session,
}

impl Over {
    fn reason(self) -> &'static str {
        match self {
            Self::File => "too_large",
            Self::Session => "session_full",
        }
    }
}

enum Kept {
    Saved {
        name: FileName,
        size: u64,
        sha256: String,
    },
    TooLarge(u64),
    /// A link, FIFO, folder … stands under the download's id.
    NotAFile,
}

/// Copies `from` into a new file of `dir` named `wanted` (or `wanted (n)`
/// when taken), hashing it, then removes `from`. `from` is opened without
/// following a link and must be a regular file; the bytes come from that
/// handle, so nothing swapped in under its name afterwards is read. One
/// over `max` bytes (stated or copied) is not kept.
fn keep_file(from: &Path, dir: &Path, wanted: &FileName, max: u64) -> anyhow::Result<Kept> {
    use anyhow::Context;
    use std::io::{Read, Write};
    let mut src = match nofollow::open_regular(from) {
        Ok(f) => f,
        Err(OpenError::NotRegular) => return Ok(Kept::NotAFile),
        Err(OpenError::Io(e)) => {
            return Err(e).with_context(|| format!("cannot open {}", from.display()));
        }
    };
    let stated = src.metadata()?.len();
    if stated > max {
        return Ok(Kept::TooLarge(stated));
    }
    let mut name = wanted.clone();
    let mut n = 2;
    let (to, mut out) = loop {
        let to = dir.join(name.as_str());
        match nofollow::create_private(&to) {
            Ok(f) => break (to, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if n > crate::domain::MAX_NUMBERED {
                    anyhow::bail!("{} names like this one are taken already", n - 1);
                }
                name = wanted.numbered(n);
                n += 1;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", to.display())),
        }
    };
    let mut copy = || -> std::io::Result<Option<(u64, String)>> {
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            size += n as u64;
            if size > max {
                // It grew after the check: the cap holds on what is read.
                return Ok(None);
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
        }
        out.flush()?;
        Ok(Some((size, hex::encode(hasher.finalize()))))
    };
    match copy() {
        Ok(Some((size, sha256))) => {
            let _ = std::fs::remove_file(from);
            Ok(Kept::Saved { name, size, sha256 })
        }
        Ok(None) => {
            let _ = std::fs::remove_file(&to);
            Ok(Kept::TooLarge(max.saturating_add(1)))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&to);
            Err(e).with_context(|| format!("cannot copy to {}", to.display()))
        }
    }
}

/// A compromised browser, simulated: its events and its download folder
/// are the attacker's.
#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    const GUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
    const MAX: u64 = 1 << 20;

    struct Case {
        _tmp: tempfile::TempDir,
        /// The stand-in for the master key: outside every folder Cordon
        /// moves files between.
        secret: PathBuf,
        incoming: PathBuf,
        store: Store,
        downloads: Arc<Downloads>,
    }

    async fn case() -> Case {
        let tmp = tempfile::tempdir().unwrap();
        let secret = tmp.path().join("master.key");
        std::fs::write(&secret, b"the master key").unwrap();
        let incoming = tmp.path().join("sandbox/downloads");
        std::fs::create_dir_all(&incoming).unwrap();
        let store = Store::connect(&secrecy::SecretString::from("sqlite::memory:".to_owned()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let tenant: TenantId = "acme".parse().unwrap();
        let downloads = Downloads::create(
            &tmp.path().join("data/downloads"),
            &tenant,
            &SessionId::generate(),
            Some(incoming.clone()),
            (MAX, MAX),
        )
        .await
        .unwrap();
        Case {
            _tmp: tmp,
            secret,
            incoming,
            store,
            downloads,
        }
    }

    impl Case {
        /// The browser says `guid` began and finished (bounded: a FIFO
        /// must not hang it).
        async fn finish(&self, guid: &str) {
            let events = [
                DownloadEvent::Began {
                    guid: guid.into(),
                    suggested: "report.pdf".into(),
                    url: "https://a.example/report.pdf".into(),
                },
                DownloadEvent::Progress {
                    guid: guid.into(),
                    received: 14,
                    total: 14,
                    state: DownloadState::Completed,
                },
            ];
            let gone = Weak::new();
            for event in events {
                let handled = self.downloads.on_event(&gone, &self.store, event.clone());
                tokio::time::timeout(Duration::from_secs(20), handled)
                    .await
                    .unwrap_or_else(|_| panic!("{event:?} did not finish in 20 s"));
            }
        }

        async fn refusals(&self) -> Vec<String> {
            self.store
                .audit_page(0, 1000)
                .await
                .unwrap()
                .into_iter()
                .filter(|e| e.action == "download.refused")
                .map(|e| format!("{} {}", e.outcome, e.params))
                .collect()
        }

        fn kept(&self) -> Vec<PathBuf> {
            std::fs::read_dir(self.downloads.dir())
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        }

        /// The secret is where it was, whole, and no copy of it exists.
        fn assert_secret_untouched(&self, ino: u64) {
            let meta = std::fs::symlink_metadata(&self.secret).unwrap();
            assert!(meta.is_file() && meta.ino() == ino, "{meta:?}");
            assert_eq!(std::fs::read(&self.secret).unwrap(), b"the master key");
            assert_eq!(self.kept(), Vec::<PathBuf>::new(), "kept files");
        }
    }

    #[tokio::test]
    async fn a_link_planted_under_a_downloads_id_is_refused_audited_and_its_target_left_alone() {
        let c = case().await;
        let ino = std::fs::metadata(&c.secret).unwrap().ino();
        let planted = c.incoming.join(GUID);
        std::os::unix::fs::symlink(&c.secret, &planted).unwrap();

        c.finish(GUID).await;

        c.assert_secret_untouched(ino);
        let list = c.downloads.list();
        assert!(
            list.len() == 1
                && list[0].state == DownloadStatus::Refused
                && list[0].reason.as_deref() == Some("not_a_file"),
            "{list:?}"
        );
        let refusals = c.refusals().await;
        assert!(
            refusals.len() == 1 && refusals[0].starts_with("refused: not_a_file"),
            "{refusals:?}"
        );
        // The link itself is gone from the sandbox's folder.
        assert!(std::fs::symlink_metadata(&planted).is_err());
        assert!(matches!(
            c.downloads
                .open(&FileName::parse("report.pdf").unwrap())
                .await,
            Err(FetchError::NotFound(_))
        ));
    }

    #[tokio::test]
    async fn a_fifo_or_a_folder_under_a_downloads_id_is_refused_without_hanging() {
        for kind in ["fifo", "folder"] {
            let c = case().await;
            let ino = std::fs::metadata(&c.secret).unwrap().ino();
            let planted = c.incoming.join(GUID);
            if kind == "fifo" {
                nix::unistd::mkfifo(&planted, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .unwrap();
            } else {
                std::fs::create_dir(&planted).unwrap();
            }

            c.finish(GUID).await;

            c.assert_secret_untouched(ino);
            let refusals = c.refusals().await;
            assert!(
                refusals.len() == 1 && refusals[0].starts_with("refused: not_a_file"),
                "{kind}: {refusals:?}"
            );
        }
    }

    #[tokio::test]
    async fn absolute_and_relative_ids_are_refused_audited_and_touch_no_file() {
        let c = case().await;
        let ino = std::fs::metadata(&c.secret).unwrap().ino();
        let absolute = c.secret.display().to_string();
        for id in [absolute.as_str(), "../../master.key", "../master.key", ""] {
            c.finish(id).await;
        }

        c.assert_secret_untouched(ino);
        assert_eq!(c.downloads.list(), vec![]);
        let refusals = c.refusals().await;
        assert!(
            refusals.len() == 4 && refusals.iter().all(|r| r.starts_with("refused: bad_id")),
            "{refusals:?}"
        );
        // The id is the browser's: it is not written into the audit log.
        assert!(
            refusals.iter().all(|r| !r.contains("master.key")),
            "{refusals:?}"
        );
    }

    #[tokio::test]
    async fn a_regular_download_is_copied_into_a_private_new_file_and_only_that_file_is_served() {
        let c = case().await;
        let arrived = c.incoming.join(GUID);
        std::fs::write(&arrived, b"%PDF- a report").unwrap();

        c.finish(GUID).await;

        let kept = c.downloads.dir().join("report.pdf");
        assert_eq!(std::fs::read(&kept).unwrap(), b"%PDF- a report");
        let mode = std::fs::metadata(&kept).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
        assert!(!arrived.exists(), "the sandbox's copy is removed");
        let list = c.downloads.list();
        assert_eq!(list[0].state, DownloadStatus::Completed, "{list:?}");
        assert!(c.refusals().await.is_empty());
        let name = FileName::parse("report.pdf").unwrap();
        assert!(c.downloads.open(&name).await.is_ok());

        // Had a link taken the kept file's place, it would not be served.
        std::fs::remove_file(&kept).unwrap();
        std::os::unix::fs::symlink(&c.secret, &kept).unwrap();
        let served = c.downloads.open(&name).await;
        assert!(
            matches!(served, Err(FetchError::Io(_))),
            "{:?}",
            served.map(|(i, _)| i)
        );
    }

    /// A browser that begins downloads without end (new ids, one id over
    /// and over, ids of no shape) lists at most [`MAX_DOWNLOADS`] and
    /// writes a bounded number of rows: one `too_many`, 16 `bad_id`.
    #[tokio::test]
    async fn a_flood_of_downloads_lists_a_bounded_number_and_audits_a_bounded_number() {
        let c = case().await;
        let gone = Weak::new();
        let began = |guid: String| DownloadEvent::Began {
            guid,
            suggested: "a.txt".into(),
            url: "https://a.example/a.txt".into(),
        };
        for _ in 0..3 {
            c.downloads
                .on_event(&gone, &c.store, began(GUID.into()))
                .await;
        }
        assert_eq!(c.downloads.list().len(), 1, "one id, one entry");
        for _ in 0..MAX_DOWNLOADS + 50 {
            let guid = DownloadGuid::generate();
            c.downloads
                .on_event(&gone, &c.store, began(guid.as_str().into()))
                .await;
        }
        for i in 0..100 {
            c.downloads
                .on_event(&gone, &c.store, began(format!("../{i}")))
                .await;
        }
        assert_eq!(c.downloads.list().len(), MAX_DOWNLOADS);
        let refusals = c.refusals().await;
        let count = |why: &str| refusals.iter().filter(|r| r.starts_with(why)).count();
        assert_eq!(count("refused: too_many"), 1, "{refusals:?}");
        assert_eq!(
            count("refused: bad_id"),
            MAX_BAD_IDS_AUDITED as usize,
            "{refusals:?}"
        );
        assert_eq!(refusals.len(), 1 + MAX_BAD_IDS_AUDITED as usize);
        // One refused past the number that goes on arriving: what arrived
        // is removed, and it stays unlisted.
        let late = DownloadGuid::generate();
        c.downloads
            .on_event(&gone, &c.store, began(late.as_str().into()))
            .await;
        std::fs::write(c.incoming.join(late.as_str()), b"more").unwrap();
        c.downloads
            .on_event(
                &gone,
                &c.store,
                DownloadEvent::Progress {
                    guid: late.as_str().into(),
                    received: 4,
                    total: 4,
                    state: DownloadState::InProgress,
                },
            )
            .await;
        assert!(
            !c.incoming.join(late.as_str()).exists(),
            "a refused download's bytes stayed"
        );
        assert_eq!(c.downloads.list().len(), MAX_DOWNLOADS);
        // The listed ones still finish: the first id's file is kept.
        std::fs::write(c.incoming.join(GUID), b"hello").unwrap();
        c.downloads
            .on_event(
                &gone,
                &c.store,
                DownloadEvent::Progress {
                    guid: GUID.into(),
                    received: 5,
                    total: 5,
                    state: DownloadState::Completed,
                },
            )
            .await;
        assert_eq!(c.downloads.list()[0].state, DownloadStatus::Completed);
    }
}
