//! Downloads of a session that allows them. The browser saves each under
//! its GUID in the sandbox's download directory; a watcher follows the
//! browser's events, cancels and removes one that grows past
//! `download_max_mb`, and moves a finished one, under its (checked)
//! suggested name, into the session's own folder of the data dir:
//! `<data_dir or shared_dir>/downloads/<tenant>/<session>/`. Each is audited by name,
//! size and SHA-256.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::audit::{Actor, NewEvent};
use crate::cdp::{DownloadEvent, DownloadState};
use crate::domain::{FileName, SessionId, TenantId};
use crate::sessions::LiveSession;
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
    /// Why it was refused: `too_large` (over `download_max_mb`) or
    /// `session_full` (the session's downloads would pass
    /// `download_session_max_mb`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

struct Entry {
    guid: String,
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
    /// while they arrive; removed with the sandbox).
    incoming: PathBuf,
    max_bytes: u64,
    /// What all of its downloads may take together.
    session_max_bytes: u64,
    entries: Mutex<Vec<Entry>>,
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Downloads {
    /// Creates the session's folder under `root` (`<data_dir>/downloads`).
    pub(crate) async fn create(
        root: &Path,
        tenant: &TenantId,
        session: &SessionId,
        incoming: PathBuf,
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
        }))
    }

    /// A session's folder under `root`.
    pub fn folder(root: &Path, tenant: &TenantId, session: &SessionId) -> PathBuf {
        root.join(tenant.as_str()).join(session.as_str())
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
        let path = self.dir.join(name.as_str());
        let file = tokio::fs::File::open(&path).await.map_err(|e| {
            anyhow::Error::from(e).context(format!("cannot open {}", path.display()))
        })?;
        Ok((info, file))
    }

    /// Follows the browser's download events until they end.
    pub(crate) fn watch(
        self: &Arc<Self>,
        session: Weak<LiveSession>,
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

    async fn on_event(&self, session: &Weak<LiveSession>, store: &Store, event: DownloadEvent) {
        match event {
            DownloadEvent::Began { guid, suggested } => {
                let name = FileName::sanitize(&suggested);
                self.entries.lock().expect("downloads lock").push(Entry {
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
            }
            DownloadEvent::Progress {
                guid,
                received,
                total,
                state,
            } => {
                let Some(current) = self.state_of(&guid) else {
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
                            && let Err(e) = live.conn.cancel_download(&guid).await
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

    fn state_of(&self, guid: &str) -> Option<DownloadStatus> {
        self.entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == guid)
            .map(|e| e.info.state)
    }

    fn update(&self, guid: &str, change: impl FnOnce(&mut DownloadInfo)) -> Option<DownloadInfo> {
        let mut entries = self.entries.lock().expect("downloads lock");
        let entry = entries.iter_mut().find(|e| e.guid == guid)?;
        change(&mut entry.info);
        Some(entry.info.clone())
    }

    /// Bytes the session's other downloads take or are taking.
    fn used_except(&self, guid: &str) -> u64 {
        self.entries
            .lock()
            .expect("downloads lock")
            .iter()
            .filter(|e| {
                e.guid != guid
                    && matches!(
                        e.info.state,
                        DownloadStatus::Completed | DownloadStatus::InProgress
                    )
            })
            .map(|e| e.info.size)
            .sum()
    }

    /// Marks it refused, removes what arrived, audits.
    async fn refuse(&self, store: &Store, guid: &str, bytes: u64, over: Over) {
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

    /// Moves a finished download into the session's folder, hashed.
    async fn complete(&self, store: &Store, guid: &str) {
        let from = self.incoming.join(guid);
        // The event may come a moment before the file has its final name.
        for _ in 0..40 {
            if tokio::fs::metadata(&from).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let Some(wanted) = self
            .entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == guid)
            .map(|e| FileName::sanitize(&e.info.name))
        else {
            return;
        };
        let room = self
            .session_max_bytes
            .saturating_sub(self.used_except(guid));
        let (dir, max) = (self.dir.clone(), self.max_bytes.min(room));
        let moved = tokio::task::spawn_blocking(move || keep_file(&from, &dir, &wanted, max)).await;
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
            Err(e) => tracing::error!(error = %e, "the download mover panicked"),
        }
    }

    /// Removes a download's partial or finished file from the sandbox's
    /// directory (Chromium may add a suffix while it writes).
    async fn remove_incoming(&self, guid: &str) {
        let Ok(mut entries) = tokio::fs::read_dir(&self.incoming).await else {
            return;
        };
        while let Ok(Some(e)) = entries.next_entry().await {
            if e.file_name().to_string_lossy().starts_with(guid) {
                let _ = tokio::fs::remove_file(e.path()).await;
            }
        }
    }

    /// Audits one download's event by its name (never its content or URL).
    async fn audit(
        &self,
        store: &Store,
        guid: &str,
        action: &'static str,
        mut params: serde_json::Value,
        outcome: &str,
    ) {
        let name = self
            .entries
            .lock()
            .expect("downloads lock")
            .iter()
            .find(|e| e.guid == guid)
            .map(|e| e.info.name.clone())
            .unwrap_or_default();
        params["name"] = json!(name);
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
}

/// Moves `from` into `dir` as `wanted` (or `wanted (n)` when taken),
/// hashing it; one over `max` bytes is removed instead.
fn keep_file(from: &Path, dir: &Path, wanted: &FileName, max: u64) -> anyhow::Result<Kept> {
    use anyhow::Context;
    use std::io::Read;
    let size = std::fs::metadata(from)
        .with_context(|| format!("cannot stat {}", from.display()))?
        .len();
    if size > max {
        let _ = std::fs::remove_file(from);
        return Ok(Kept::TooLarge(size));
    }
    let mut file =
        std::fs::File::open(from).with_context(|| format!("cannot open {}", from.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let sha256 = hex::encode(hasher.finalize());
    let mut name = wanted.clone();
    let mut n = 2;
    while dir.join(name.as_str()).exists() {
        name = wanted.numbered(n);
        n += 1;
    }
    let to = dir.join(name.as_str());
    if std::fs::rename(from, &to).is_err() {
        // Another file system: copy, then remove.
        std::fs::copy(from, &to).with_context(|| format!("cannot copy to {}", to.display()))?;
        let _ = std::fs::remove_file(from);
    }
    Ok(Kept::Saved { name, size, sha256 })
}
