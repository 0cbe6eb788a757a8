//! A task's pictures. Asking Chromium for a capture costs about 40 ms here
//! (it composites and encodes a frame on demand), so a task screencasts
//! its session's active tab instead: Chromium encodes a frame whenever the
//! page repaints, the pump keeps the newest, and a step takes the first one
//! made after its last action, or, when nothing repainted, the newest
//! there is (it is the page as it is). That nothing repainted is told by
//! the page: once it has drawn a frame after the action
//! (`cdp::frame_drawn`, two animation frames) and no screencast frame
//! followed within the settle time, the action changed nothing on screen;
//! `task_frame_wait_ms` only bounds a page that never answers.
//!
//! Why a settle time at all: Chromium encodes screencast frames on its
//! thread pool, with no order against the page's own frames. On a quiet
//! machine a repaint's frame arrives within 5 ms of the second animation
//! frame; with the machine loaded (load 17 on 2 cores) it came up to 94 ms
//! after, when the draw itself took 37–82 ms. So the step waits
//! `task_frame_settle_ms` (25) or as long again as the draw took, whichever
//! is longer: the slower the machine, the longer it gives the encoder.
//!
//! The pump acknowledges every frame at once, so Chromium keeps sending.
//! A live view of the same tab shares the screencast (Chromium has one per
//! tab and refuses a second start: whoever comes second restarts it, or
//! just listens): when the view stops it, the session counts the stop and
//! the task starts its own again at its next step.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{EventScreencastFrame, ScreencastFrameAckParams};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cdp::CdpError;
use crate::sessions::RunningSession;

/// One encoded frame.
#[derive(Debug)]
pub struct Frame {
    /// The JPEG.
    pub jpeg: Vec<u8>,
    /// Its size in pixels.
    pub width: u32,
    /// Its size in pixels.
    pub height: u32,
    /// The viewport's width in CSS pixels (the frame may be scaled).
    pub css_width: f64,
    /// When it arrived.
    pub at: Instant,
}

/// A running screencast of one tab, for a task.
pub struct Frames {
    page: Page,
    newest: watch::Receiver<Option<Arc<Frame>>>,
    pump: tokio::task::JoinHandle<()>,
    /// The session's screencast stops when it started.
    stops: u64,
}

impl Frames {
    /// Starts screencasting `page` (JPEG at `quality`, at most the
    /// session's viewport).
    pub async fn start(live: &RunningSession, page: Page, quality: u8) -> Result<Self, CdpError> {
        let stops = live.screencast_stops();
        let mut events = page.event_listener::<EventScreencastFrame>().await?;
        let v = live.viewport();
        let started = page
            .execute(
                crate::live::Encoding {
                    quality,
                    max_width: v.width,
                    max_height: v.height,
                }
                .params(),
            )
            .await;
        // A live view screencasts this tab already: its frames are heard
        // as well (Chromium sends every listener of the tab each frame).
        if let Err(e) = started
            && !e.to_string().contains("already active")
        {
            return Err(e.into());
        }
        let (tx, newest) = watch::channel(None);
        let acks = page.clone();
        let pump = tokio::spawn(async move {
            while let Some(ev) = events.next().await {
                let at = Instant::now();
                // Acknowledged at once (Chromium encodes the next one
                // meanwhile), without waiting for the answer: the frame is
                // published a round trip sooner.
                let (ack, session) = (acks.clone(), ev.session_id);
                tokio::spawn(async move {
                    let _ = ack.execute(ScreencastFrameAckParams::new(session)).await;
                });
                let Ok(jpeg) =
                    base64::engine::general_purpose::STANDARD.decode(ev.data.as_ref() as &str)
                else {
                    continue;
                };
                let Some((width, height)) = image::ImageReader::new(std::io::Cursor::new(&jpeg))
                    .with_guessed_format()
                    .ok()
                    .and_then(|r| r.into_dimensions().ok())
                else {
                    continue;
                };
                let frame = Frame {
                    jpeg,
                    width,
                    height,
                    css_width: ev.metadata.device_width,
                    at,
                };
                if tx.send(Some(Arc::new(frame))).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            page,
            newest,
            pump,
            stops,
        })
    }

    /// Whether this still shows `target` with nobody having stopped it.
    pub fn shows(&self, live: &RunningSession, target: &str) -> bool {
        self.page.target_id().inner() == target
            && self.stops == live.screencast_stops()
            && !self.pump.is_finished()
    }

    /// The first frame that arrived after `since`, waiting up to `wait`
    /// for it; then the newest there is (nothing repainted since), if any.
    /// When `drawn` answers true (the page has drawn a frame made after
    /// `since`: `cdp::frame_drawn`), the wait ends `settle` later, or as
    /// long again as the drawing took, whichever is longer.
    pub async fn after(
        &mut self,
        since: Instant,
        wait: Duration,
        settle: Duration,
        drawn: impl std::future::Future<Output = bool>,
    ) -> Option<Arc<Frame>> {
        let asked = Instant::now();
        let mut deadline = since.max(asked) + wait;
        let mut heard = false;
        tokio::pin!(drawn);
        loop {
            if let Some(f) = self.newest.borrow_and_update().clone()
                && f.at > since
            {
                return Some(f);
            }
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, self.newest.changed()) => {
                    if !matches!(changed, Ok(Ok(()))) {
                        return self.newest.borrow().clone();
                    }
                }
                yes = &mut drawn, if !heard => {
                    heard = true;
                    if yes {
                        let now = Instant::now();
                        deadline = deadline.min(now + settle.max(now - asked));
                    }
                }
            }
        }
    }

    /// Stops listening. Chromium's screencast is left running: a live view
    /// may be showing it (it restarts one it finds active), and the task's
    /// session closes with the task.
    pub fn stop(self) {
        self.pump.abort();
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        self.pump.abort();
    }
}
