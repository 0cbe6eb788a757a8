//! The step's picture: a frame of the tab's screencast made after the
//! last action (`frames.rs`), kept in the recording store like a
//! screenshot tool's, or else a capture through the tool pipeline; `Shot`,
//! the picture with the image space the model's coordinates map from.

use std::time::Duration;

use super::act::StepError;
use super::frames::Frames;
use super::runner::Runner;
use super::uitars::ImageSpace;
use crate::cdp::ImageFormat;
use crate::sessions::{Tool, ToolOutput};

/// How long a step waits for the first frame of a new screencast before it
/// asks for a capture instead.
const FIRST_FRAME_WAIT: Duration = Duration::from_secs(1);
/// JPEG quality of the step's picture.
const QUALITY: u8 = 80;

/// A screenshot the model saw.
pub(super) struct Shot {
    pub(super) jpeg: Vec<u8>,
    pub(super) space: ImageSpace,
    pub(super) id: Option<String>,
}

impl Runner {
    /// The step's picture: a screencast frame made after the last action
    /// (see `frames.rs`), or a capture when there is none.
    pub(super) async fn screenshot(&mut self) -> Result<Shot, StepError> {
        // A dialog a page opened since (a timer's, a popup's) stops the
        // tab's renderer: cancelled first, as the steps' own are.
        if !self.live.dialog_tabs().is_empty() {
            self.cancel_dialog().await?;
        }
        if let Some(shot) = self.frame().await {
            metrics::counter!("cordon_task_pictures_total", "source" => "screencast").increment(1);
            return Ok(shot);
        }
        metrics::counter!("cordon_task_pictures_total", "source" => "capture").increment(1);
        self.capture().await
    }

    async fn frame(&mut self) -> Option<Shot> {
        let page = {
            let mut tabs = self.live.tabs.lock().await;
            self.live.page(&mut tabs).await.ok()?
        };
        let target = page.target_id().inner().clone();
        let (mut since, mut wait) = (self.acted, self.tasks.0.settings.frame_wait);
        let mut fresh = false;
        if !self
            .frames
            .as_ref()
            .is_some_and(|f| f.shows(&self.live, &target))
        {
            if let Some(old) = self.frames.take() {
                old.stop();
            }
            since = tokio::time::Instant::now();
            wait = FIRST_FRAME_WAIT;
            fresh = true;
            self.frames = Some(
                Frames::start(&self.live, page.clone(), QUALITY)
                    .await
                    .ok()?,
            );
        }
        // A new screencast always sends a first frame; after an action,
        // the page tells when it has drawn (then nothing more is coming).
        let drawn = async {
            if fresh {
                std::future::pending::<()>().await;
            }
            crate::cdp::frame_drawn(&page).await.is_ok()
        };
        let frame = self
            .frames
            .as_mut()?
            .after(since, wait, self.tasks.0.settings.frame_settle, drawn)
            .await?;
        let scale = f64::from(frame.width) / frame.css_width;
        let space = ImageSpace::new(
            frame.width,
            frame.height,
            scale,
            self.tasks.0.settings.coordinates,
        )
        .ok()?;
        // Kept like a screenshot tool's picture; when the recorder refuses
        // (a full audit quota), the capture's path says so.
        let seq = self.live.next_screenshot_seq();
        let saved = self
            .tasks
            .0
            .sessions
            .recorder()
            .save(
                self.live.record,
                self.live.tenant.as_str(),
                self.live.id.as_str(),
                seq,
                "jpg",
                &frame.jpeg,
            )
            .await
            .ok()?;
        let id = saved.map(|_| {
            crate::recording::ScreenshotId::new(self.live.tenant.clone(), self.live.id.clone(), seq)
                .to_string()
        });
        Some(Shot {
            jpeg: frame.jpeg.clone(),
            space,
            id,
        })
    }

    /// A capture through the tool pipeline.
    async fn capture(&self) -> Result<Shot, StepError> {
        // Right after a click or an Enter the page may be between two
        // documents, and the capture fails: try again a little later.
        let mut tries = 0;
        let out = loop {
            tries += 1;
            match self
                .tool(Tool::Screenshot {
                    full_page: false,
                    format: ImageFormat::Jpeg,
                    quality: Some(80),
                })
                .await
            {
                Err(e) if tries < 4 && matches!(e.code(), "timeout" | "browser_error") => {
                    tokio::time::sleep(Duration::from_millis(250 * tries)).await;
                }
                other => break other?,
            }
        };
        let ToolOutput::Screenshot(s) = out else {
            return Err(StepError::internal(anyhow::anyhow!(
                "a screenshot that is not one"
            )));
        };
        let space = ImageSpace::new(s.width, s.height, 1.0, self.tasks.0.settings.coordinates)
            .map_err(|e| StepError::internal(e.into()))?;
        Ok(Shot {
            jpeg: s.bytes,
            space,
            id: s.screenshot_id,
        })
    }
}
