//! The recording's files on disk: a frame's name, the frames of a
//! session folder, the bytes a tenant's frames take, and the GC of
//! session folders whose newest frame is past the retention.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use super::Recorder;

impl Recorder {
    /// Removes session folders whose newest file is older than `retention`.
    /// Returns how many folders were removed.
    pub async fn gc(&self, retention: Duration) -> anyhow::Result<usize> {
        let root = self.root.clone();
        let removed = tokio::task::spawn_blocking(move || gc_blocking(&root, retention)).await?;
        self.forget_usage(None);
        removed
    }
}

/// The seq and extension of a frame's file name (`000042.png`); `None` for
/// anything else (thumbnails, temporary files).
pub(super) fn frame_seq(name: &str) -> Option<(u64, &'static str)> {
    let (stem, ext) = name.split_once('.')?;
    let ext = match ext {
        "png" => "png",
        "jpg" => "jpg",
        _ => return None,
    };
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

/// The frames directly in `dir`, with their seqs.
pub(super) fn frames(dir: &Path) -> Vec<(u64, PathBuf)> {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter_map(|e| {
                    let (seq, _) = frame_seq(e.file_name().to_str()?)?;
                    Some((seq, e.path()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes of every frame below `dir` (thumbnails are not counted).
pub(super) fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let is_frame = e.file_name().to_str().and_then(frame_seq).is_some();
            match e.file_type() {
                Ok(t) if t.is_dir() => dir_size(&e.path()),
                Ok(_) if is_frame => e.metadata().map_or(0, |m| m.len()),
                _ => 0,
            }
        })
        .sum()
}

/// When the newest frame in `dir` was written: the one with the highest
/// seq, since a session writes its frames in seq order, so one `stat`
/// however long the session (all 10,000 of a long one cost ~25 ms here).
/// Thumbnails and the frames log do not count: looking at old recordings
/// must not keep them.
pub(super) fn newest_frame_mtime(dir: &Path) -> Option<SystemTime> {
    let (_, newest) = frames(dir).into_iter().max_by_key(|(seq, _)| *seq)?;
    std::fs::metadata(newest).ok()?.modified().ok()
}

/// Removes the `<root>/<tenant>/<session>` folders whose newest frame (or,
/// without frames, the folder itself) is older than `retention`: the
/// screenshots' rule, which kept downloads share.
pub(crate) fn gc_blocking(root: &Path, retention: Duration) -> anyhow::Result<usize> {
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
            let newest =
                newest_frame_mtime(&path).or_else(|| session.metadata().ok()?.modified().ok());
            if newest.is_some_and(|t| t < cutoff) {
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}
