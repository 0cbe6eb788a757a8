//! Downloads as the browser reports them: refused by default; a session
//! that allows them has them saved under a GUID in one directory and
//! hears of each one through a [`DownloadFeed`].

use std::path::Path;
use std::sync::{Arc, Mutex};

use chromiumoxide::cdp::browser_protocol::browser::{
    CancelDownloadParams, DownloadProgressState, SetDownloadBehaviorBehavior,
    SetDownloadBehaviorParams,
};
use tokio::sync::mpsc;

use super::{BrowserConn, CdpError};

/// What the browser says about one download.
#[derive(Debug, Clone, PartialEq)]
pub enum DownloadEvent {
    /// A download starts: its GUID (its file's name while it is saved) and
    /// the file name the site suggested (not yet checked).
    Began {
        /// Chromium's id for it.
        guid: String,
        /// The site's name for the file.
        suggested: String,
        /// Where it comes from (`blob:` and `data:` included).
        url: String,
    },
    /// Progress, or its end.
    Progress {
        /// Chromium's id for it.
        guid: String,
        /// Bytes so far.
        received: u64,
        /// Bytes expected (0 when unknown).
        total: u64,
        /// Whether it goes on, finished or was cancelled.
        state: DownloadState,
    },
}

/// Where a download stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownloadState {
    /// Still receiving.
    InProgress,
    /// Saved in full.
    Completed,
    /// Cancelled (by the page, the browser or Cordon).
    Canceled,
}

impl From<&DownloadProgressState> for DownloadState {
    fn from(s: &DownloadProgressState) -> Self {
        match s {
            DownloadProgressState::InProgress => Self::InProgress,
            DownloadProgressState::Completed => Self::Completed,
            DownloadProgressState::Canceled => Self::Canceled,
        }
    }
}

/// Where one browser's download events go once a session allows
/// downloads; nowhere before (they are dropped).
#[derive(Clone, Default)]
pub(super) struct DownloadFeed(Arc<Mutex<Option<mpsc::UnboundedSender<DownloadEvent>>>>);

impl DownloadFeed {
    pub(super) fn send(&self, event: DownloadEvent) {
        if let Some(tx) = self.0.lock().expect("download feed lock").as_ref() {
            let _ = tx.send(event);
        }
    }

    fn subscribe(&self) -> mpsc::UnboundedReceiver<DownloadEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.0.lock().expect("download feed lock") = Some(tx);
        rx
    }
}

/// Bytes as Chromium reports them (a JSON number).
pub(super) fn bytes(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        // Saturating: a count past u64 is over every cap anyway.
        v as u64
    } else {
        0
    }
}

impl BrowserConn {
    /// Refuses every download of this browser: no file is written, in the
    /// sandbox or (process driver) in the host user's Downloads folder.
    pub async fn deny_downloads(&self) -> Result<(), CdpError> {
        let params = SetDownloadBehaviorParams::builder()
            .behavior(SetDownloadBehaviorBehavior::Deny)
            // So a navigation that turns into a download is told at once.
            .events_enabled(true)
            .build()
            .map_err(CdpError::Protocol)?;
        self.browser.execute(params).await?;
        Ok(())
    }

    /// Allows downloads, saved as their GUID in `dir` (the path as the
    /// browser sees it), never in the profile; returns their events.
    pub async fn allow_downloads(
        &self,
        dir: &Path,
    ) -> Result<mpsc::UnboundedReceiver<DownloadEvent>, CdpError> {
        let events = self.download_feed.subscribe();
        let params = SetDownloadBehaviorParams::builder()
            .behavior(SetDownloadBehaviorBehavior::AllowAndName)
            .download_path(dir.display().to_string())
            .events_enabled(true)
            .build()
            .map_err(CdpError::Protocol)?;
        self.browser.execute(params).await?;
        Ok(events)
    }

    /// The browser's download events, its downloads still refused (a
    /// session whose downloads are taken over CDP hears of those the
    /// browser refused: ones that never reached the network).
    pub fn download_events(&self) -> mpsc::UnboundedReceiver<DownloadEvent> {
        self.download_feed.subscribe()
    }

    /// Notes that a tab's navigation turned into a download taken over
    /// CDP, as the browser's own event does for one it saves.
    pub fn note_download(&self, frame: &str) {
        self.downloads.note(frame.to_owned());
    }

    /// Cancels a download in progress (Chromium removes its partial file).
    pub async fn cancel_download(&self, guid: &str) -> Result<(), CdpError> {
        self.browser
            .execute(CancelDownloadParams::new(guid.to_owned()))
            .await?;
        Ok(())
    }
}
