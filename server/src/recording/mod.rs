//! Screenshots kept outside the sandbox: `off`, `transient` (newest 50,
//! removed at close) or `audit` (all, kept for the retention period).
//! Files live in `<data_dir or shared_dir>/sessions/<tenant>/<session>/<seq>.<ext>`, with
//! what the dashboard needs beside them (`<seq>.thumb.jpg` thumbnails and a
//! `frames.log` of each frame's time and size, see [`screenshot`]). The
//! quota and the GC count frames only.

mod disk;
mod screenshot;
pub mod settings;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

pub(crate) use disk::gc_blocking;
use disk::{dir_size, frame_seq, frames, newest_frame_mtime};
pub use screenshot::{
    MalformedScreenshotId, OpenError, ScreenshotBytes, ScreenshotId, ScreenshotInfo, THUMB_JOBS,
    THUMB_WIDTH, Variant,
};

/// How many screenshots a transient session keeps.
pub const TRANSIENT_KEEP: u64 = 50;

/// A session's recording mode, fixed at open.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum RecordMode {
    /// Nothing is written.
    Off,
    /// A ring of the newest [`TRANSIENT_KEEP`], deleted at close.
    #[default]
    Transient,
    /// Everything, kept for the retention period after close.
    Audit,
}

impl RecordMode {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Transient => "transient",
            Self::Audit => "audit",
        }
    }
}

/// Why a screenshot was not kept.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The tenant's recordings fill its disk quota (audit mode keeps
    /// everything, so it refuses instead of dropping).
    #[error(
        "the tenant's recordings fill its disk quota ({used_mb} of {quota_mb} MiB); \
         audit screenshots are refused until old ones expire"
    )]
    QuotaFull {
        /// MiB in use.
        used_mb: u64,
        /// MiB allowed.
        quota_mb: u64,
    },
    /// Writing failed.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

/// Where screenshots go, and how much each tenant may keep.
#[derive(Debug, Clone)]
pub struct Recorder {
    root: PathBuf,
    /// Bytes a tenant's recordings may take, by default.
    quota: u64,
    /// Tenants' own quotas, bytes.
    quotas: std::collections::BTreeMap<String, u64>,
    /// Bytes in use per tenant, read from disk on first use (and again
    /// after `reread`), with when it was read.
    used: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, (u64, std::time::Instant)>>,
    >,
    /// On a directory other replicas write to as well (`shared_dir`), a
    /// tenant's usage is read from disk again when this old.
    reread: Option<Duration>,
    /// Thumbnails being made, at most [`THUMB_JOBS`] at once.
    thumb_jobs: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Recorder {
    /// Screenshots under `<data_dir>/sessions`, with no quota.
    pub fn new(data_dir: &Path) -> Self {
        Self::with_quotas(data_dir, u64::MAX, Default::default())
    }

    /// Screenshots under `<data_dir>/sessions`; each tenant may keep
    /// `quota` bytes, or its own from `quotas`.
    pub fn with_quotas(
        data_dir: &Path,
        quota: u64,
        quotas: std::collections::BTreeMap<String, u64>,
    ) -> Self {
        Self {
            root: data_dir.join("sessions"),
            quota,
            quotas,
            used: Default::default(),
            reread: None,
            thumb_jobs: std::sync::Arc::new(tokio::sync::Semaphore::new(THUMB_JOBS)),
        }
    }

    /// The recordings' directory is shared with other replicas: usage
    /// counted here alone would miss theirs, so it is read from disk again
    /// once a minute (a quota may be overrun by what the replicas write in
    /// that minute).
    pub fn shared(mut self) -> Self {
        self.reread = Some(Duration::from_secs(60));
        self
    }

    /// Whether session `session`'s folder is on this replica's disk (its
    /// own recordings, or any replica's under `shared_dir`).
    pub fn has_session(&self, tenant: &str, session: &str) -> bool {
        self.session_dir(tenant, session).is_dir()
    }

    /// Bytes `tenant`'s recordings may take.
    pub fn quota_of(&self, tenant: &str) -> u64 {
        self.quotas.get(tenant).copied().unwrap_or(self.quota)
    }

    /// Bytes the tenant's recordings take (walked once, then kept up to date).
    pub fn usage(&self, tenant: &str) -> u64 {
        if let Some((n, at)) = self.used.lock().expect("usage lock").get(tenant)
            && self.reread.is_none_or(|r| at.elapsed() < r)
        {
            return *n;
        }
        let n = dir_size(&self.root.join(tenant));
        self.used
            .lock()
            .expect("usage lock")
            .insert(tenant.to_owned(), (n, std::time::Instant::now()));
        n
    }

    fn add_usage(&self, tenant: &str, delta: i64) {
        if let Some((n, _)) = self.used.lock().expect("usage lock").get_mut(tenant) {
            *n = n.saturating_add_signed(delta);
        }
    }

    /// Forgets what is known of usage (after files went away in bulk).
    fn forget_usage(&self, tenant: Option<&str>) {
        let mut used = self.used.lock().expect("usage lock");
        match tenant {
            Some(t) => {
                used.remove(t);
            }
            None => used.clear(),
        }
    }

    /// The folder of one session.
    pub fn session_dir(&self, tenant: &str, session: &str) -> PathBuf {
        self.root.join(tenant).join(session)
    }

    /// Stores screenshot number `seq` (from 1) per `mode`; returns its path.
    pub async fn save(
        &self,
        mode: RecordMode,
        tenant: &str,
        session: &str,
        seq: u64,
        ext: &str,
        bytes: &[u8],
    ) -> Result<Option<PathBuf>, RecordError> {
        if mode == RecordMode::Off {
            return Ok(None);
        }
        let dir = self.session_dir(tenant, session);
        let quota = self.quota_of(tenant);
        let size = bytes.len() as u64;
        if self.usage(tenant).saturating_add(size) > quota {
            if mode == RecordMode::Audit {
                return Err(RecordError::QuotaFull {
                    used_mb: self.usage(tenant) >> 20,
                    quota_mb: quota >> 20,
                });
            }
            // Transient frames make room by dropping their own oldest.
            let mut frames = frames(&dir);
            frames.sort();
            for (old_seq, old) in frames {
                if self.usage(tenant).saturating_add(size) <= quota {
                    break;
                }
                self.remove_frame(tenant, &dir, old_seq, &old).await;
            }
            if self.usage(tenant).saturating_add(size) > quota {
                // Kept audit recordings fill the quota: a transient frame
                // is best effort, so it is not kept.
                return Ok(None);
            }
        }
        tokio::fs::create_dir_all(&dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("{seq:06}.{ext}"));
        crate::nofollow::write(&path, bytes)
            .await
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.add_usage(tenant, i64::try_from(size).unwrap_or(i64::MAX));
        screenshot::note_frame(&dir, seq, ext, size).await;
        if mode == RecordMode::Transient && seq > TRANSIENT_KEEP {
            let old = seq - TRANSIENT_KEEP;
            for ext in ["png", "jpg"] {
                let path = dir.join(format!("{old:06}.{ext}"));
                self.remove_frame(tenant, &dir, old, &path).await;
            }
        }
        Ok(Some(path))
    }

    /// Removes frame `seq` at `path` (if there) and its thumbnail, and
    /// takes the frame off the tenant's usage.
    async fn remove_frame(&self, tenant: &str, dir: &Path, seq: u64, path: &Path) {
        let len = std::fs::metadata(path).map_or(0, |m| m.len());
        if tokio::fs::remove_file(path).await.is_ok() {
            self.add_usage(tenant, -i64::try_from(len).unwrap_or(i64::MAX));
            let _ = tokio::fs::remove_file(screenshot::thumb_path(dir, seq)).await;
        }
    }

    /// At close: a transient session's screenshots are removed; audit ones stay.
    pub async fn finish(
        &self,
        mode: RecordMode,
        tenant: &str,
        session: &str,
    ) -> anyhow::Result<()> {
        if mode == RecordMode::Transient {
            let dir = self.session_dir(tenant, session);
            self.forget_usage(Some(tenant));
            match tokio::fs::remove_dir_all(&dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot remove {}", dir.display()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[tokio::test]
    async fn transient_keeps_the_newest_fifty_and_removes_all_at_close() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        for seq in 1..=60 {
            rec.save(RecordMode::Transient, "acme", "s1", seq, "png", b"x")
                .await
                .unwrap();
        }
        let sdir = rec.session_dir("acme", "s1");
        let mut kept: Vec<u64> = frames(&sdir).into_iter().map(|(seq, _)| seq).collect();
        kept.sort();
        assert_eq!(kept, (11..=60).collect::<Vec<_>>());
        rec.finish(RecordMode::Transient, "acme", "s1")
            .await
            .unwrap();
        assert!(!sdir.exists());
    }

    #[tokio::test]
    async fn off_writes_nothing_and_audit_keeps_everything() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        assert_eq!(
            rec.save(RecordMode::Off, "acme", "s1", 1, "png", b"x")
                .await
                .unwrap(),
            None
        );
        assert!(!rec.session_dir("acme", "s1").exists());
        for seq in 1..=55 {
            rec.save(RecordMode::Audit, "acme", "s2", seq, "png", b"x")
                .await
                .unwrap();
        }
        rec.finish(RecordMode::Audit, "acme", "s2").await.unwrap();
        assert_eq!(frames(&rec.session_dir("acme", "s2")).len(), 55);
    }

    #[tokio::test]
    async fn gc_removes_only_expired_session_folders() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        rec.save(RecordMode::Audit, "acme", "old", 1, "png", b"x")
            .await
            .unwrap();
        rec.save(RecordMode::Audit, "acme", "new", 1, "png", b"x")
            .await
            .unwrap();
        let old_file = rec.session_dir("acme", "old").join("000001.png");
        let past = SystemTime::now() - Duration::from_secs(8 * 24 * 3600);
        std::fs::File::options()
            .write(true)
            .open(&old_file)
            .unwrap()
            .set_modified(past)
            .unwrap();
        assert_eq!(rec.gc(Duration::from_secs(7 * 24 * 3600)).await.unwrap(), 1);
        assert!(!rec.session_dir("acme", "old").exists());
        assert!(rec.session_dir("acme", "new").exists());
    }

    #[tokio::test]
    async fn transient_frames_drop_their_oldest_to_stay_in_the_quota() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::with_quotas(dir.path(), 250, Default::default());
        for seq in 1..=3 {
            let kept = rec
                .save(RecordMode::Transient, "acme", "s_x", seq, "png", &[7; 100])
                .await
                .unwrap();
            assert!(kept.is_some(), "frame {seq} kept");
        }
        let left = frames(&rec.session_dir("acme", "s_x"));
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(!left.iter().any(|(seq, _)| *seq == 1), "{left:?}");
        assert_eq!(rec.usage("acme"), 200);
        // Audit frames are refused instead.
        let err = rec
            .save(RecordMode::Audit, "acme", "s_y", 1, "png", &[7; 100])
            .await
            .unwrap_err();
        assert!(matches!(err, RecordError::QuotaFull { .. }), "{err}");
    }
}
