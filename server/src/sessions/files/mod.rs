//! Files that cross a session's sandbox: downloads (when the session
//! allows them) and uploads. Both live in the control plane's data dir,
//! never in the browser's profile, and are audited by name, size and
//! SHA-256, never by content.

mod downloads;
pub(crate) mod uploads;

pub use downloads::{DownloadInfo, DownloadStatus, Downloads, FetchError};
pub use uploads::{UploadFile, Uploaded, UploadedFile};

use std::sync::Arc;

use serde_json::json;
use sha2::{Digest, Sha256};

use super::{RunningSession, SessionManager};
use crate::audit::{Actor, NewEvent};
use crate::domain::FileName;

impl SessionManager {
    /// Removes kept downloads (of sessions that recorded for audit) by the
    /// screenshots' rule: `retention` after the newest file of a session.
    pub async fn downloads_gc(&self, retention: std::time::Duration) -> anyhow::Result<usize> {
        let root = self.0.downloads_root.clone();
        tokio::task::spawn_blocking(move || crate::recording::gc_blocking(&root, retention)).await?
    }

    /// The session's downloads so far.
    pub fn downloads(&self, session: &RunningSession) -> Result<Vec<DownloadInfo>, FetchError> {
        Ok(session.downloads.as_ref().ok_or(FetchError::Denied)?.list())
    }

    /// A completed download's metadata and open file, fetched by `actor`
    /// (audited by name, size and SHA-256).
    #[tracing::instrument(skip_all, fields(session.id = %session.id))]
    pub async fn fetch_download(
        &self,
        session: &Arc<RunningSession>,
        actor: Actor,
        name: &FileName,
    ) -> Result<(DownloadInfo, tokio::fs::File), FetchError> {
        let downloads = session.downloads.as_ref().ok_or(FetchError::Denied)?;
        let (info, file) = downloads.open(name).await?;
        session.touch();
        self.0
            .store
            .audit_append(
                NewEvent::new(actor, "download.fetch")
                    .tenant(&session.tenant)
                    .session(session.id.as_str())
                    .params(json!({ "name": info.name, "size": info.size, "sha256": info.sha256 }))
                    .outcome("ok"),
            )
            .await?;
        Ok((info, file))
    }
}

/// The SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The content type a fetched download is served with: a short list of
/// types a browser shows inertly, `application/octet-stream` for the rest
/// (HTML, SVG, scripts: the control plane's origin never serves a site's
/// active content).
pub fn content_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "txt" | "log" => "text/plain; charset=utf-8",
        "csv" => "text/csv; charset=utf-8",
        "json" => "application/json",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_content_is_served_as_bytes() {
        assert_eq!(content_type("report.PDF"), "application/pdf");
        assert_eq!(content_type("data.csv"), "text/csv; charset=utf-8");
        for name in ["page.html", "x.svg", "a.js", "README", "x.htm"] {
            assert_eq!(content_type(name), "application/octet-stream", "{name}");
        }
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
