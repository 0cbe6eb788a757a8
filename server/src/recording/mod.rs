//! Screenshots kept outside the sandbox: `off`, `transient` (newest 50,
//! removed at close) or `audit` (all, kept for the retention period).
//! Files live in `<data_dir>/sessions/<tenant>/<session>/<seq>.<ext>`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

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

/// Where screenshots go.
#[derive(Debug, Clone)]
pub struct Recorder {
    root: PathBuf,
}

impl Recorder {
    /// Screenshots under `<data_dir>/sessions`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            root: data_dir.join("sessions"),
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
    ) -> anyhow::Result<Option<PathBuf>> {
        if mode == RecordMode::Off {
            return Ok(None);
        }
        let dir = self.session_dir(tenant, session);
        tokio::fs::create_dir_all(&dir)
            .await
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(format!("{seq:06}.{ext}"));
        tokio::fs::write(&path, bytes)
            .await
            .with_context(|| format!("cannot write {}", path.display()))?;
        if mode == RecordMode::Transient && seq > TRANSIENT_KEEP {
            let old = seq - TRANSIENT_KEEP;
            for ext in ["png", "jpg"] {
                let _ = tokio::fs::remove_file(dir.join(format!("{old:06}.{ext}"))).await;
            }
        }
        Ok(Some(path))
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

    /// Removes session folders whose newest file is older than `retention`.
    /// Returns how many folders were removed.
    pub async fn gc(&self, retention: Duration) -> anyhow::Result<usize> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || gc_blocking(&root, retention)).await?
    }
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.metadata().ok()?.modified().ok())
        .max()
}

fn gc_blocking(root: &Path, retention: Duration) -> anyhow::Result<usize> {
    let Ok(tenants) = std::fs::read_dir(root) else {
        return Ok(0);
    };
    let cutoff = SystemTime::now()
        .checked_sub(retention)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let mut removed = 0;
    for tenant in tenants.flatten() {
        let Ok(sessions) = std::fs::read_dir(tenant.path()) else {
            continue;
        };
        for session in sessions.flatten() {
            let path = session.path();
            let newest = newest_mtime(&path).or_else(|| session.metadata().ok()?.modified().ok());
            if newest.is_some_and(|t| t < cutoff) {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut names: Vec<_> = std::fs::read_dir(&sdir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names.len(), 50);
        assert_eq!(names[0], "000011.png");
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
        assert_eq!(
            std::fs::read_dir(rec.session_dir("acme", "s2"))
                .unwrap()
                .count(),
            55
        );
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
}
