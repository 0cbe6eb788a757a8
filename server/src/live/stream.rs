//! One tab's screencast into a one-frame slot.
//!
//! Chromium sends a frame and waits for its acknowledgement before it sends
//! many more (it allows a couple in flight). The pump puts each frame into
//! the slot, replacing one the socket has not taken yet, and never
//! acknowledges it itself: the socket's writer does, for the frame it sent
//! and every frame that one replaced, once the send has completed. A slow
//! socket therefore slows Chromium down instead of growing a queue, and
//! what it gets is always the newest picture.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{
    EventFrameStartedLoading, EventFrameStoppedLoading, EventScreencastFrame,
    ScreencastFrameAckParams, StartScreencastFormat, StartScreencastParams, StopScreencastParams,
};
use futures::StreamExt;
use tokio::sync::Notify;

/// One JPEG from Chromium, with what maps it onto the page.
pub struct Frame {
    /// The image.
    pub jpeg: Vec<u8>,
    /// Viewport size in CSS pixels.
    pub width: f64,
    /// Viewport size in CSS pixels.
    pub height: f64,
    /// Pixels above the page.
    pub offset_top: f64,
    /// Pinch zoom.
    pub page_scale: f64,
    /// Scroll, CSS pixels.
    pub scroll_x: f64,
    /// Scroll, CSS pixels.
    pub scroll_y: f64,
    /// Unix ms Chromium made it.
    pub ts: f64,
    /// The tab it came from (acknowledgements go there).
    pub page: Page,
    /// Chromium's frame numbers to acknowledge once this one is sent: its
    /// own and those of the frames it replaced.
    pub acks: Vec<i64>,
}

impl Frame {
    /// Acknowledges this frame and those it replaced, so Chromium sends
    /// the next one.
    pub async fn ack(page: &Page, acks: Vec<i64>) {
        for id in acks {
            if page
                .execute(ScreencastFrameAckParams::new(id))
                .await
                .is_err()
            {
                // The tab closed or the screencast stopped: nothing waits.
                return;
            }
        }
    }
}

/// The newest frame not yet sent.
#[derive(Default)]
pub struct Slot {
    frame: std::sync::Mutex<Option<Frame>>,
    ready: Notify,
    /// Frames replaced before the socket took them.
    pub dropped: AtomicU64,
}

impl Slot {
    fn put(&self, mut frame: Frame) {
        let mut slot = self.frame.lock().expect("frame slot lock");
        if let Some(old) = slot.take() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("cordon_live_frames_dropped_total").increment(1);
            if old.page.target_id() == frame.page.target_id() {
                let mut acks = old.acks;
                acks.append(&mut frame.acks);
                frame.acks = acks;
            }
        }
        *slot = Some(frame);
        drop(slot);
        self.ready.notify_one();
    }

    /// Waits for a frame and takes it.
    pub async fn next(&self) -> Frame {
        loop {
            if let Some(f) = self.frame.lock().expect("frame slot lock").take() {
                return f;
            }
            self.ready.notified().await;
        }
    }

    /// Forgets a frame not yet sent (after a tab switch).
    pub fn clear(&self) {
        self.frame.lock().expect("frame slot lock").take();
    }
}

/// A running screencast of one tab.
pub struct Screencast {
    /// The tab.
    pub page: Page,
    task: tokio::task::JoinHandle<()>,
    /// Whether the tab's main frame is loading.
    pub loading: Arc<AtomicBool>,
    /// The session's count of stopped screencasts when this one started
    /// (`RunningSession::screencast_stops`): when it moved, someone
    /// stopped the tab's one screencast, this one's included.
    pub stops: u64,
}

/// How frames are encoded.
#[derive(Debug, Clone, Copy)]
pub struct Encoding {
    /// JPEG quality.
    pub quality: u8,
    /// Largest width.
    pub max_width: u32,
    /// Largest height.
    pub max_height: u32,
}

impl Encoding {
    /// The `Page.startScreencast` call for these settings (every frame).
    pub fn params(&self) -> StartScreencastParams {
        StartScreencastParams::builder()
            .format(StartScreencastFormat::Jpeg)
            .quality(i64::from(self.quality))
            .max_width(i64::from(self.max_width))
            .max_height(i64::from(self.max_height))
            .every_nth_frame(1)
            .build()
    }
}

impl Screencast {
    /// Starts screencasting `page` into `slot`.
    pub async fn start(
        page: Page,
        slot: Arc<Slot>,
        enc: Encoding,
    ) -> Result<Self, crate::cdp::CdpError> {
        // Subscribed before the start, so the first frame is not missed.
        let mut frames = page.event_listener::<EventScreencastFrame>().await?;
        let mut started = page.event_listener::<EventFrameStartedLoading>().await?;
        let mut stopped = page.event_listener::<EventFrameStoppedLoading>().await?;
        let params = enc.params();
        // Chromium has one screencast per tab: a running task's (its
        // pictures, `tasks/frames.rs`) is restarted with the view's
        // settings; the task keeps hearing the frames.
        if page.execute(params.clone()).await.is_err() {
            let _ = page.execute(StopScreencastParams::default()).await;
            page.execute(params).await?;
        }
        let loading = Arc::new(AtomicBool::new(false));
        let main_frame = page.target_id().inner().clone();
        let (pump_page, is_loading) = (page.clone(), loading.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(ev) = frames.next() => {
                        let Ok(jpeg) = base64::engine::general_purpose::STANDARD.decode(ev.data.as_ref() as &str) else {
                            tracing::debug!("live view: a frame did not decode");
                            Frame::ack(&pump_page, vec![ev.session_id]).await;
                            continue;
                        };
                        let m = &ev.metadata;
                        slot.put(Frame {
                            jpeg,
                            width: m.device_width,
                            height: m.device_height,
                            offset_top: m.offset_top,
                            page_scale: m.page_scale_factor,
                            scroll_x: m.scroll_offset_x,
                            scroll_y: m.scroll_offset_y,
                            ts: m.timestamp.as_ref().map_or_else(
                                || crate::time::now_ms() as f64,
                                |t| *t.inner() * 1000.0,
                            ),
                            page: pump_page.clone(),
                            acks: vec![ev.session_id],
                        });
                    }
                    Some(ev) = started.next() => {
                        if ev.frame_id.inner() == &main_frame {
                            is_loading.store(true, Ordering::Relaxed);
                        }
                    }
                    Some(ev) = stopped.next() => {
                        if ev.frame_id.inner() == &main_frame {
                            is_loading.store(false, Ordering::Relaxed);
                        }
                    }
                    else => break,
                }
            }
        });
        Ok(Self {
            page,
            task,
            loading,
            stops: 0,
        })
    }

    /// Stops listening without stopping Chromium's screencast (someone
    /// else stopped it already, or uses it).
    pub fn abandon(self) {
        self.task.abort();
    }

    /// Stops the screencast (the tab may be gone already).
    pub async fn stop(self) {
        self.task.abort();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            self.page.execute(StopScreencastParams::default()),
        )
        .await;
    }
}
