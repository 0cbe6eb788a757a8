//! Reading recordings back for the dashboard: a session's timeline, one
//! screenshot or its thumbnail by id, and when a session's recordings expire.
//!
//! A screenshot is named by a [`ScreenshotId`] and nothing else: the path is
//! built from the id's parsed parts (`<tenant>/<session>/<seq>.<ext>` under
//! the recordings root), so no text from a request ever becomes a path.
//!
//! Thumbnails (~[`THUMB_WIDTH`] px wide JPEG, `<seq>.thumb.jpg` beside the
//! frame, outside any sandbox) are made on first request and kept: most
//! frames are never looked at, and making one costs a decode and an encode
//! (about 10–30 ms for a 1280×720 frame here). At most [`THUMB_JOBS`] are made
//! at once, in blocking tasks, so a timeline opened on a long session
//! cannot take the host's cores from the sessions. They are derived data:
//! they do not count against the tenant's quota, do not keep a session's
//! folder from expiring, and go when their frame goes.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{Recorder, frame_seq, newest_frame_mtime};
use crate::domain::{SessionId, TenantId};

/// Thumbnails' width in pixels (narrower frames keep theirs).
pub const THUMB_WIDTH: u32 = 320;
/// Thumbnails made at the same time, at most.
pub const THUMB_JOBS: usize = 2;
/// The most a frame being decoded for a thumbnail may take in memory.
const THUMB_MAX_ALLOC: u64 = 256 << 20;
/// A frame taller than this many times its width (a full-page capture) is
/// cut to its top before shrinking, so tiles in a timeline stay alike.
const THUMB_MAX_ASPECT: u32 = 2;

/// One screenshot: `<tenant>:<session>:<seq>` (`acme:s_…:42`).
///
/// *Why no table:* the recorder already names each file by session and seq,
/// and `<tenant>/<session>/<seq>` is all a path needs; an id made of those
/// three, each parsed strictly (tenant slug, `s_` id, decimal seq ≥ 1), gives
/// the dashboard a stable handle with no row to write per screenshot, no
/// second place for the GC and quota to keep in step, and no lookup before
/// a file is served. It shows the tenant and session it belongs to, which an
/// operator who may see the screenshot may see too.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ScreenshotId {
    tenant: TenantId,
    session: SessionId,
    seq: u64,
}

/// Why a string is not a [`ScreenshotId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed screenshot id (expected <tenant>:<session>:<seq>)")]
pub struct MalformedScreenshotId;

impl ScreenshotId {
    /// Screenshot `seq` (from 1) of `session`.
    pub fn new(tenant: TenantId, session: SessionId, seq: u64) -> Self {
        Self {
            tenant,
            session,
            seq,
        }
    }

    /// The tenant the screenshot belongs to (to check an operator may see it).
    pub fn tenant(&self) -> &TenantId {
        &self.tenant
    }

    /// The session it was taken in.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// Its number within the session, from 1.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl FromStr for ScreenshotId {
    type Err = MalformedScreenshotId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split(':');
        let (Some(tenant), Some(session), Some(seq), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(MalformedScreenshotId);
        };
        // Canonical decimal only: one spelling per screenshot.
        let canonical =
            !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()) && !seq.starts_with('0');
        let seq = canonical
            .then(|| seq.parse::<u64>().ok())
            .flatten()
            .ok_or(MalformedScreenshotId)?;
        Ok(Self {
            tenant: tenant.parse().map_err(|_| MalformedScreenshotId)?,
            session: session.parse().map_err(|_| MalformedScreenshotId)?,
            seq,
        })
    }
}

impl std::fmt::Display for ScreenshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.tenant, self.session, self.seq)
    }
}

impl TryFrom<String> for ScreenshotId {
    type Error = MalformedScreenshotId;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ScreenshotId> for String {
    fn from(id: ScreenshotId) -> Self {
        id.to_string()
    }
}

/// Which image of a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The frame as recorded (PNG or JPEG).
    Full,
    /// A ~[`THUMB_WIDTH`] px wide JPEG of it.
    Thumb,
}

/// One entry of a session's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScreenshotInfo {
    /// Its id, for [`Recorder::open`].
    pub id: ScreenshotId,
    /// Its number within the session.
    pub seq: u64,
    /// When it was written (the file's time), Unix ms.
    pub taken_at_ms: i64,
    /// The full image's size.
    pub bytes: u64,
    /// `image/png` or `image/jpeg`.
    pub content_type: &'static str,
}

/// An image read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenshotBytes {
    /// The image.
    pub bytes: Vec<u8>,
    /// `image/png` or `image/jpeg`.
    pub content_type: &'static str,
}

/// Why [`Recorder::open`] has nothing to serve.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No such screenshot (never taken, transient and gone, or expired).
    #[error("no such screenshot")]
    NotFound,
    /// Reading, or making the thumbnail, failed.
    #[error(transparent)]
    Io(#[from] anyhow::Error),
}

fn content_type(ext: &str) -> &'static str {
    if ext == "png" {
        "image/png"
    } else {
        "image/jpeg"
    }
}

fn ms(t: std::time::SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Each session folder's list of frames written: `<seq> <unix ms> <bytes>
/// <ext>` per line, appended at save time, so a timeline of thousands of
/// frames reads one file instead of asking the file system about each
/// (10,000 `stat` calls cost ~20 ms on this project's VMs). The folder's
/// listing stays the truth about which frames exist; a frame missing from
/// this log (written by an older Cordon, or a torn last line) is looked at
/// directly.
const FRAMES_LOG: &str = "frames.log";

/// Notes frame `seq` in the session folder's [`FRAMES_LOG`]. A failure only
/// costs the timeline a `stat`, so it is logged and not returned.
pub(super) async fn note_frame(dir: &Path, seq: u64, ext: &str, bytes: u64) {
    use tokio::io::AsyncWriteExt;
    let line = format!("{seq} {} {bytes} {ext}\n", crate::time::now_ms());
    let path = dir.join(FRAMES_LOG);
    let res = async {
        let mut f = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .await?;
        f.write_all(line.as_bytes()).await
    }
    .await;
    if let Err(e) = res {
        tracing::warn!(file = %path.display(), error = %e, "cannot note a screenshot for the timeline");
    }
}

/// [`FRAMES_LOG`] read back: seq → (unix ms, bytes, ext). Malformed lines
/// are skipped.
fn read_frames_log(dir: &Path) -> std::collections::HashMap<u64, (i64, u64, &'static str)> {
    let Ok(text) = std::fs::read_to_string(dir.join(FRAMES_LOG)) else {
        return Default::default();
    };
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(' ');
            let seq = f.next()?.parse().ok()?;
            let at = f.next()?.parse().ok()?;
            let bytes = f.next()?.parse().ok()?;
            let ext = match f.next()? {
                "png" => "png",
                "jpg" => "jpg",
                _ => return None,
            };
            f.next().is_none().then_some((seq, (at, bytes, ext)))
        })
        .collect()
}

/// The thumbnail's file beside frame `seq`.
pub(super) fn thumb_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:06}.thumb.jpg"))
}

/// A ~[`THUMB_WIDTH`] px wide JPEG of a PNG or JPEG frame.
fn make_thumbnail(frame: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut reader = image::ImageReader::new(std::io::Cursor::new(frame))
        .with_guessed_format()
        .context("unreadable frame")?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(THUMB_MAX_ALLOC);
    reader.limits(limits);
    let img = reader.decode().context("cannot decode the frame")?;
    let (w, h) = (img.width(), img.height());
    let img = if h > w.saturating_mul(THUMB_MAX_ASPECT) {
        img.crop_imm(0, 0, w, w * THUMB_MAX_ASPECT)
    } else {
        img
    };
    let img = if img.width() > THUMB_WIDTH {
        img.thumbnail(THUMB_WIDTH, u32::MAX)
    } else {
        img
    };
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 70)
        .encode_image(&img.to_rgb8())
        .context("cannot encode the thumbnail")?;
    Ok(out)
}

impl Recorder {
    /// The recorded frames of one session, by seq; empty when it recorded
    /// nothing (or its recordings are gone).
    pub async fn timeline(
        &self,
        tenant: &TenantId,
        session: &SessionId,
    ) -> anyhow::Result<Vec<ScreenshotInfo>> {
        let dir = self.session_dir(tenant.as_str(), session.as_str());
        let (tenant, session) = (tenant.clone(), session.clone());
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot list {}", dir.display()));
                }
            };
            let noted = read_frames_log(&dir);
            let mut shots: Vec<ScreenshotInfo> = entries
                .flatten()
                .filter_map(|entry| {
                    let name = entry.file_name();
                    let (seq, ext) = frame_seq(name.to_str()?)?;
                    let (taken_at_ms, bytes) = match noted.get(&seq) {
                        Some((at, bytes, noted_ext)) if *noted_ext == ext => (*at, *bytes),
                        // Not noted: asked directly (a frame removed since
                        // the listing is simply left out).
                        _ => {
                            let meta = entry.metadata().ok()?;
                            (meta.modified().map_or(0, ms), meta.len())
                        }
                    };
                    Some(ScreenshotInfo {
                        id: ScreenshotId::new(tenant.clone(), session.clone(), seq),
                        seq,
                        taken_at_ms,
                        bytes,
                        content_type: content_type(ext),
                    })
                })
                .collect();
            shots.sort_by_key(|s| s.seq);
            shots.dedup_by_key(|s| s.seq);
            Ok(shots)
        })
        .await?
    }

    /// The frame `id` names (PNG or JPEG, as recorded), if it is there.
    async fn frame(&self, id: &ScreenshotId) -> Result<(PathBuf, &'static str), OpenError> {
        let dir = self.session_dir(id.tenant.as_str(), id.session.as_str());
        for ext in ["png", "jpg"] {
            let path = dir.join(format!("{:06}.{ext}", id.seq));
            if tokio::fs::try_exists(&path).await.unwrap_or(false) {
                return Ok((path, content_type(ext)));
            }
        }
        Err(OpenError::NotFound)
    }

    /// The image `id` names: the frame itself, or its thumbnail (made and
    /// kept beside the frame on first request). The path comes from the
    /// parsed id alone.
    pub async fn open(
        &self,
        id: &ScreenshotId,
        variant: Variant,
    ) -> Result<ScreenshotBytes, OpenError> {
        // Only a regular file is served, never what a link points to.
        let read = |path: PathBuf| async move {
            match crate::nofollow::read(&path).await {
                Ok(bytes) => Ok(bytes),
                Err(crate::nofollow::OpenError::NotRegular) => {
                    tracing::warn!(path = %path.display(), "a screenshot is not a regular file; not served");
                    Ok(None)
                }
                Err(crate::nofollow::OpenError::Io(e)) => Err(OpenError::Io(
                    anyhow::Error::new(e).context(format!("cannot read {}", path.display())),
                )),
            }
        };
        let (frame, frame_type) = self.frame(id).await?;
        if variant == Variant::Full {
            let bytes = read(frame).await?.ok_or(OpenError::NotFound)?;
            return Ok(ScreenshotBytes {
                bytes,
                content_type: frame_type,
            });
        }
        let dir = self.session_dir(id.tenant.as_str(), id.session.as_str());
        let thumb = thumb_path(&dir, id.seq);
        if let Some(bytes) = read(thumb.clone()).await? {
            return Ok(ScreenshotBytes {
                bytes,
                content_type: "image/jpeg",
            });
        }
        let _permit = self
            .thumb_jobs
            .acquire()
            .await
            .context("thumbnail jobs closed")?;
        // Another request may have made it while this one waited.
        if let Some(bytes) = read(thumb.clone()).await? {
            return Ok(ScreenshotBytes {
                bytes,
                content_type: "image/jpeg",
            });
        }
        let original = read(frame.clone()).await?.ok_or(OpenError::NotFound)?;
        let bytes = tokio::task::spawn_blocking(move || make_thumbnail(&original))
            .await
            .context("thumbnail task failed")??;
        // Written under a temporary name and renamed, so no reader sees half
        // a thumbnail.
        let tmp = dir.join(format!(
            "{:06}.thumb.{}.tmp",
            id.seq,
            hex::encode(rand::random::<[u8; 6]>())
        ));
        crate::nofollow::write(&tmp, &bytes)
            .await
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        tokio::fs::rename(&tmp, &thumb)
            .await
            .with_context(|| format!("cannot write {}", thumb.display()))?;
        // A transient frame dropped meanwhile takes its thumbnail along.
        if !tokio::fs::try_exists(&frame).await.unwrap_or(false) {
            let _ = tokio::fs::remove_file(&thumb).await;
        }
        Ok(ScreenshotBytes {
            bytes,
            content_type: "image/jpeg",
        })
    }

    /// When a session's kept (`audit`) recordings will be removed:
    /// `retention` after its newest frame, the same rule the hourly GC
    /// applies (it runs hourly, so they may stay up to an hour longer).
    /// `None` when the session has no frames. Unix ms.
    pub async fn expires_at(
        &self,
        tenant: &TenantId,
        session: &SessionId,
        retention: Duration,
    ) -> anyhow::Result<Option<i64>> {
        let dir = self.session_dir(tenant.as_str(), session.as_str());
        let newest = tokio::task::spawn_blocking(move || newest_frame_mtime(&dir)).await?;
        Ok(newest.map(|t| {
            ms(t).saturating_add(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::RecordMode;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_fn(w, h, |x, y| {
            image::Rgb([(x % 256) as u8, (y % 256) as u8, 90])
        });
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    }

    fn ids() -> (TenantId, SessionId) {
        ("acme".parse().unwrap(), SessionId::generate())
    }

    #[test]
    fn screenshot_ids_round_trip_and_refuse_anything_else() {
        let (t, s) = ids();
        let id = ScreenshotId::new(t.clone(), s.clone(), 42);
        assert_eq!(id.to_string(), format!("acme:{s}:42"));
        assert_eq!(id.to_string().parse::<ScreenshotId>(), Ok(id));
        for bad in [
            String::new(),
            format!("acme:{s}"),
            format!("acme:{s}:"),
            format!("acme:{s}:0"),
            format!("acme:{s}:042"),
            format!("acme:{s}:-1"),
            format!("acme:{s}:+1"),
            format!("acme:{s}:1:2"),
            format!("acme:{s}:99999999999999999999999"),
            format!("../acme:{s}:1"),
            "acme:../../etc:1".into(),
            format!("acme:{s}/..:1"),
            format!("Acme:{s}:1"),
            "acme:s_aaaaaaaaaaaaaaaaaaaaaaaaaa:1/../../x".into(),
            format!("acme:{s}:1.png"),
            format!("acme:{s}:1\0"),
        ] {
            assert_eq!(
                bad.parse::<ScreenshotId>(),
                Err(MalformedScreenshotId),
                "{bad:?}"
            );
        }
    }

    #[tokio::test]
    async fn the_timeline_lists_frames_by_seq_without_thumbnails() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        let (t, s) = ids();
        for seq in [3, 1, 1_000_002, 2] {
            let ext = if seq == 2 { "jpg" } else { "png" };
            rec.save(RecordMode::Audit, "acme", s.as_str(), seq, ext, b"xyz")
                .await
                .unwrap();
        }
        let sdir = rec.session_dir("acme", s.as_str());
        std::fs::write(thumb_path(&sdir, 1), b"t").unwrap();
        std::fs::write(sdir.join("notes.txt"), b"?").unwrap();
        // A frame the log does not know (an older Cordon wrote it) and a
        // torn last line.
        std::fs::write(sdir.join("000004.png"), b"four").unwrap();
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(sdir.join(FRAMES_LOG))
            .unwrap();
        std::io::Write::write_all(&mut log, b"4 17").unwrap();
        let shots = rec.timeline(&t, &s).await.unwrap();
        let seqs: Vec<u64> = shots.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 1_000_002]);
        assert_eq!(shots[1].content_type, "image/jpeg");
        assert_eq!((shots[0].bytes, shots[3].bytes), (3, 4));
        assert_eq!(shots[0].id, ScreenshotId::new(t.clone(), s.clone(), 1));
        for shot in &shots {
            assert!(shot.taken_at_ms > 1_700_000_000_000, "{shot:?}");
        }
        // The log never makes a removed frame appear.
        std::fs::remove_file(sdir.join("000003.png")).unwrap();
        let seqs: Vec<u64> = rec
            .timeline(&t, &s)
            .await
            .unwrap()
            .iter()
            .map(|s| s.seq)
            .collect();
        assert_eq!(seqs, [1, 2, 4, 1_000_002]);
        // A session that recorded nothing has an empty timeline.
        assert!(
            rec.timeline(&t, &SessionId::generate())
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_thumbnail_is_made_once_and_kept_beside_its_frame() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        let (t, s) = ids();
        let frame = png(1280, 720);
        rec.save(RecordMode::Audit, "acme", s.as_str(), 1, "png", &frame)
            .await
            .unwrap();
        let id = ScreenshotId::new(t, s.clone(), 1);
        let full = rec.open(&id, Variant::Full).await.unwrap();
        assert_eq!(
            (full.bytes, full.content_type),
            (frame.clone(), "image/png")
        );
        let thumb = rec.open(&id, Variant::Thumb).await.unwrap();
        assert_eq!(thumb.content_type, "image/jpeg");
        let img = image::load_from_memory(&thumb.bytes).unwrap();
        assert_eq!((img.width(), img.height()), (320, 180));
        let stored = thumb_path(&rec.session_dir("acme", s.as_str()), 1);
        assert_eq!(std::fs::read(&stored).unwrap(), thumb.bytes);
        // The second request reads the kept file.
        std::fs::write(&stored, b"kept").unwrap();
        assert_eq!(rec.open(&id, Variant::Thumb).await.unwrap().bytes, b"kept");
    }

    #[tokio::test]
    async fn a_link_in_place_of_a_frame_or_thumbnail_is_neither_served_nor_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(&dir.path().join("rec"));
        let (t, s) = ids();
        let secret = dir.path().join("master.key");
        std::fs::write(&secret, b"the master key").unwrap();
        let sdir = rec.session_dir("acme", s.as_str());
        std::fs::create_dir_all(&sdir).unwrap();
        std::os::unix::fs::symlink(&secret, sdir.join("000001.png")).unwrap();
        let id = ScreenshotId::new(t, s.clone(), 1);
        for variant in [Variant::Full, Variant::Thumb] {
            let got = rec.open(&id, variant).await;
            assert!(
                matches!(got, Err(OpenError::NotFound)),
                "{variant:?}: {:?}",
                got.map(|b| b.bytes.len())
            );
        }
        // Saving frame 1 again does not write through the link either.
        let saved = rec
            .save(RecordMode::Audit, "acme", s.as_str(), 1, "png", b"frame")
            .await;
        assert!(saved.is_err(), "{saved:?}");
        assert_eq!(std::fs::read(&secret).unwrap(), b"the master key");
    }

    #[tokio::test]
    async fn tall_frames_are_cut_to_their_top_and_small_ones_not_enlarged() {
        let tall = make_thumbnail(&png(400, 3000)).unwrap();
        let img = image::load_from_memory(&tall).unwrap();
        assert_eq!((img.width(), img.height()), (320, 640));
        let small = make_thumbnail(&png(200, 100)).unwrap();
        let img = image::load_from_memory(&small).unwrap();
        assert_eq!((img.width(), img.height()), (200, 100));
        assert!(make_thumbnail(b"not an image").is_err());
    }

    #[tokio::test]
    async fn ids_of_missing_screenshots_find_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::new(dir.path());
        let (t, s) = ids();
        rec.save(
            RecordMode::Audit,
            "acme",
            s.as_str(),
            1,
            "png",
            &png(10, 10),
        )
        .await
        .unwrap();
        for id in [
            ScreenshotId::new(t.clone(), s.clone(), 2),
            ScreenshotId::new(t.clone(), SessionId::generate(), 1),
            ScreenshotId::new("other".parse().unwrap(), s.clone(), 1),
        ] {
            for variant in [Variant::Full, Variant::Thumb] {
                assert!(
                    matches!(rec.open(&id, variant).await, Err(OpenError::NotFound)),
                    "{id} {variant:?}"
                );
            }
        }
        // No thumbnail was made for them.
        let thumbs = std::fs::read_dir(rec.session_dir("acme", s.as_str()))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_str().unwrap().contains("thumb")
            })
            .count();
        assert_eq!(thumbs, 0);
    }

    #[tokio::test]
    async fn thumbnails_do_not_count_against_the_quota_nor_delay_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let (t, s) = ids();
        let frame = png(640, 360);
        let size = frame.len() as u64;
        let rec = Recorder::with_quotas(dir.path(), 2 * size, Default::default());
        rec.save(RecordMode::Audit, "acme", s.as_str(), 1, "png", &frame)
            .await
            .unwrap();
        let id = ScreenshotId::new(t.clone(), s.clone(), 1);
        rec.open(&id, Variant::Thumb).await.unwrap();
        assert_eq!(rec.usage("acme"), size);
        // Walked afresh, the thumbnail is still not counted.
        let fresh = Recorder::with_quotas(dir.path(), 2 * size, Default::default());
        assert_eq!(fresh.usage("acme"), size);
        // The quota still holds exactly two frames.
        rec.save(RecordMode::Audit, "acme", s.as_str(), 2, "png", &frame)
            .await
            .unwrap();
        assert!(
            rec.save(RecordMode::Audit, "acme", s.as_str(), 3, "png", &frame)
                .await
                .is_err()
        );
        // Expiry follows the newest frame, not a thumbnail made later.
        let sdir = rec.session_dir("acme", s.as_str());
        let past = std::time::SystemTime::now() - Duration::from_secs(10 * 24 * 3600);
        for seq in [1, 2] {
            std::fs::File::options()
                .write(true)
                .open(sdir.join(format!("{seq:06}.png")))
                .unwrap()
                .set_modified(past)
                .unwrap();
        }
        rec.open(&ScreenshotId::new(t.clone(), s.clone(), 2), Variant::Thumb)
            .await
            .unwrap();
        let week = Duration::from_secs(7 * 24 * 3600);
        let expires = rec.expires_at(&t, &s, week).await.unwrap().unwrap();
        assert_eq!(expires, ms(past) + week.as_millis() as i64);
        assert!(expires < crate::time::now_ms());
        assert_eq!(rec.gc(week).await.unwrap(), 1);
        assert!(!sdir.exists());
        assert_eq!(rec.expires_at(&t, &s, week).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_dropped_transient_frame_takes_its_thumbnail_along() {
        let dir = tempfile::tempdir().unwrap();
        let (t, s) = ids();
        let rec = Recorder::new(dir.path());
        let frame = png(64, 64);
        rec.save(RecordMode::Transient, "acme", s.as_str(), 1, "png", &frame)
            .await
            .unwrap();
        rec.open(&ScreenshotId::new(t, s.clone(), 1), Variant::Thumb)
            .await
            .unwrap();
        let sdir = rec.session_dir("acme", s.as_str());
        assert!(thumb_path(&sdir, 1).exists());
        for seq in 2..=super::super::TRANSIENT_KEEP + 1 {
            rec.save(
                RecordMode::Transient,
                "acme",
                s.as_str(),
                seq,
                "png",
                &frame,
            )
            .await
            .unwrap();
        }
        assert!(!sdir.join("000001.png").exists());
        assert!(!thumb_path(&sdir, 1).exists());
    }
}
