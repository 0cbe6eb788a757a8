//! Everything Cordon says to Chromium, over CDP (chromiumoxide).

mod capture;
mod cookies;
mod dialogs;
mod downloads;
mod drawn;
mod error;
mod facts;
mod frames;
mod input;
pub mod meter;
mod navguard;
mod raw;
pub mod snapshot;
mod storage;
mod tab_events;
mod tools;
mod totp;
mod upload;

use anyhow::Context;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    EventDownloadProgress, EventDownloadWillBegin,
};
use chromiumoxide::cdp::browser_protocol::target::EventTargetCrashed;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;

pub use capture::{Capture, Download, Response as HeldResponse};
pub use cookies::{cookie_param, vault_cookie};
pub use dialogs::{Dialog, DialogKind, Dialogs};
pub use downloads::{DownloadEvent, DownloadState};
pub use drawn::frame_drawn;
pub use error::CdpError;
use error::error_kind;
pub use facts::{FACTS_FN, click_checked, element_facts, facts_under_pointer, press_checked};
pub use input::{
    Button, KeyAct, KeyDown, MouseKind, dom_key, insert_text, is_known_key, key_event, key_schema,
    mouse_event, unknown_key, wheel_with,
};
pub use navguard::{Paused, hold_documents, release, tab_ids};
pub use raw::{
    MAX_BROWSER_MESSAGE, MAX_PROTOCOL_DESCRIPTION, RawReceiver, RawSender, connect_raw, http_base,
    protocol_description,
};
pub use storage::{frame_origins, local_storage};
pub use tab_events::TabEvents;
pub use tools::*;
pub use totp::{CodeField, code_field, type_code};
pub use upload::{FileInput, file_input, set_files, set_files_in_page};

/// chromiumoxide's bound on one CDP request, in ms: above the longest tool
/// bound (`tool_timeout_s` ≤ 300), so a tool's own bound fires first.
const REQUEST_TIMEOUT_MS: u64 = 310_000;

/// A CDP connection to one browser, with its event loop running.
pub struct BrowserConn {
    browser: Arc<Browser>,
    closed: Arc<AtomicBool>,
    handler: tokio::task::JoinHandle<()>,
    crashes: TabEvents,
    downloads: TabEvents,
    dialogs: Dialogs,
    /// Whether `dialogs` follows the browser ([`connect`](Self::connect)).
    follow: bool,
    /// The [`meter::front`] chromiumoxide's connection crosses, if it has
    /// one of its own.
    front: Option<tokio::task::JoinHandle<()>>,
    download_feed: downloads::DownloadFeed,
    watcher: tokio::task::JoinHandle<()>,
    /// Tabs already told to let their workers start ([`release_new_targets`]),
    /// by [`pages`](Self::pages), [`new_page`](Self::new_page) or the
    /// dialog follower's hook as a new tab attaches.
    released: Released,
}

/// The ids of the tabs whose workers were released, shared by the
/// connection and the dialog follower's hook ([`attached`]).
type Released = Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

impl BrowserConn {
    /// Connects to a browser-level CDP WebSocket URL, every tab's dialogs
    /// followed ([`Dialogs::follow`]), through a [`meter::front`] that
    /// reaches the browser as `reach` says: no message over
    /// [`MAX_BROWSER_MESSAGE`], and none of the events Cordon never
    /// listens to, reaches chromiumoxide.
    pub async fn connect(ws_url: &str, reach: meter::Reach) -> anyhow::Result<Self> {
        Self::connect_with(ws_url, true, Some(reach)).await
    }

    /// [`connect`](Self::connect) without the dialog follower: chromiumoxide
    /// alone, as any CDP client connects (the benches' raw baseline). No
    /// dialog is known: a call on a tab a dialog stops waits out its bound.
    pub async fn connect_unfollowed(ws_url: &str) -> anyhow::Result<Self> {
        Self::connect_with(ws_url, false, None).await
    }

    async fn connect_with(
        ws_url: &str,
        follow: bool,
        reach: Option<meter::Reach>,
    ) -> anyhow::Result<Self> {
        let (client_url, front) = match reach {
            Some(reach) => {
                let (url, task) = meter::front(ws_url, reach)
                    .await
                    .context("cannot meter the browser's CDP endpoint")?;
                (url, Some(task))
            }
            None => (ws_url.to_owned(), None),
        };
        let config = HandlerConfig {
            // Certificate errors stay errors: an agent's browser must not be
            // silently man-in-the-middled.
            ignore_https_errors: false,
            request_timeout: Duration::from_millis(REQUEST_TIMEOUT_MS),
            viewport: None,
            ..HandlerConfig::default()
        };
        let connected = Browser::connect_with_config(client_url, config).await;
        let (browser, mut handler) = match connected {
            Ok(c) => c,
            Err(e) => {
                if let Some(f) = &front {
                    f.abort();
                }
                return Err(
                    anyhow::Error::new(e).context("cannot connect to the browser's CDP endpoint")
                );
            }
        };
        let browser = Arc::new(browser);
        let closed = Arc::new(AtomicBool::new(false));
        let flag = closed.clone();
        let handler = tokio::spawn(async move {
            // Newer Chromium sends events this crate's protocol snapshot may
            // not know; such errors are logged and the loop goes on.
            while let Some(event) = handler.next().await {
                if let Err(e) = event {
                    if matches!(e, chromiumoxide::error::CdpError::Ws(_)) {
                        break;
                    }
                    // Only the kind: some errors carry the raw CDP message,
                    // which may hold cookie values or typed text.
                    tracing::debug!(kind = error_kind(&e), "cdp handler event error");
                }
            }
            flag.store(true, Ordering::SeqCst);
        });
        let (crashes, downloads) = (TabEvents::default(), TabEvents::default());
        let dialogs = Dialogs::default();
        let released = Released::default();
        let listen = async {
            let watch = |e| anyhow::Error::new(e).context("cannot watch the browser's tabs");
            let crashed = browser
                .event_listener::<EventTargetCrashed>()
                .await
                .map_err(watch)?;
            let downloading = browser
                .event_listener::<EventDownloadWillBegin>()
                .await
                .map_err(watch)?;
            let progress = browser
                .event_listener::<EventDownloadProgress>()
                .await
                .map_err(watch)?;
            // Every tab's dialogs are followed from its start (a popup may
            // alert as it loads, before any call lists it).
            if follow {
                dialogs
                    .follow(ws_url, attached(Arc::downgrade(&browser), released.clone()))
                    .await
                    .context("cannot follow the browser's dialogs")?;
            }
            anyhow::Ok((crashed, downloading, progress))
        };
        // Failed half-way, the connection's loop is not left running.
        let (mut crashed, mut downloading, mut progress) = match listen.await {
            Ok(l) => l,
            Err(e) => {
                handler.abort();
                if let Some(f) = &front {
                    f.abort();
                }
                return Err(e);
            }
        };
        let download_feed = downloads::DownloadFeed::default();
        let (seen_crash, seen_download, feed) =
            (crashes.clone(), downloads.clone(), download_feed.clone());
        let watcher = tokio::spawn(async move {
            loop {
                tokio::select! {
                    Some(ev) = crashed.next() => {
                        tracing::warn!(status = %ev.status, "a tab's renderer crashed");
                        seen_crash.note(ev.target_id.inner().clone());
                    }
                    // A main frame's id is its tab's target id.
                    Some(ev) = downloading.next() => {
                        // Refused, unless the session allowed downloads
                        // (then its watcher hears of it).
                        tracing::info!("a download begins");
                        seen_download.note(ev.frame_id.inner().clone());
                        feed.send(DownloadEvent::Began {
                            guid: ev.guid.clone(),
                            suggested: ev.suggested_filename.clone(),
                            url: ev.url.clone(),
                        });
                    }
                    Some(ev) = progress.next() => {
                        feed.send(DownloadEvent::Progress {
                            guid: ev.guid.clone(),
                            received: downloads::bytes(ev.received_bytes),
                            total: downloads::bytes(ev.total_bytes),
                            state: DownloadState::from(&ev.state),
                        });
                    }
                    else => break,
                }
            }
        });
        Ok(Self {
            browser,
            closed,
            handler,
            crashes,
            downloads,
            dialogs,
            follow,
            front,
            download_feed,
            watcher,
            released,
        })
    }

    /// Whether the connection has ended (browser exited or crashed), or
    /// the dialog follower's has: a browser whose dialogs are no longer
    /// seen is not driven on (a call on a tab a dialog stops would wait
    /// out its bound, and the gate would not see what OK answers).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
            || self.handler.is_finished()
            || self.front.as_ref().is_some_and(|f| f.is_finished())
            || (self.follow && !self.dialogs.following())
    }

    /// Tabs whose renderer crashed.
    pub fn crashes(&self) -> &TabEvents {
        &self.crashes
    }

    /// Tabs whose navigation turned into a download (refused, or saved
    /// when the session allows downloads).
    pub fn downloads(&self) -> &TabEvents {
        &self.downloads
    }

    /// The JavaScript dialogs open in its tabs.
    pub fn dialogs(&self) -> &Dialogs {
        &self.dialogs
    }

    /// The browser.
    pub fn browser(&self) -> &Browser {
        &self.browser
    }

    /// The first page (the `about:blank` the browser starts with), or a new one.
    pub async fn first_page(&self) -> Result<Page, CdpError> {
        // The initial target may not be attached yet right after connect.
        for _ in 0..50 {
            if let Some(page) = self.pages().await?.into_iter().next() {
                return Ok(page);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.new_page("about:blank").await
    }

    /// Every open tab, in creation order; a tab seen for the first time is
    /// first released ([`release_new_targets`]).
    pub async fn pages(&self) -> Result<Vec<Page>, CdpError> {
        let pages = self.browser.pages().await?;
        // Closed tabs are forgotten: a page that opens popups in a loop
        // does not grow the set for the session's life. (A tab the hook
        // released that chromiumoxide does not list yet would be released
        // again: one round trip, no harm.)
        self.released
            .lock()
            .expect("released lock")
            .retain(|id| pages.iter().any(|p| p.target_id().inner() == id));
        for page in &pages {
            let id = page.target_id().inner().clone();
            // A tab whose renderer a dialog stops is released once it is
            // answered (the call would wait on it).
            if self.dialogs.any_open(&id).is_some() {
                continue;
            }
            let first = self.released.lock().expect("released lock").insert(id);
            if first && let Err(e) = release_new_targets(page).await {
                // A tab closing meanwhile; one still open is tried again.
                tracing::debug!(
                    closed = matches!(e, CdpError::BrowserGone),
                    "cannot release a tab's workers (closing?)"
                );
                self.released
                    .lock()
                    .expect("released lock")
                    .remove(page.target_id().inner());
            }
        }
        Ok(pages)
    }

    /// Whether the tab `target` has had its workers released (and will not
    /// be again) since it opened: by the dialog follower's hook as it
    /// attached, by [`pages`](Self::pages) or [`new_page`](Self::new_page).
    /// A closed tab is forgotten at the next [`pages`](Self::pages).
    pub fn released(&self, target: &str) -> bool {
        self.released
            .lock()
            .expect("released lock")
            .contains(target)
    }

    /// A new tab at `url`, released ([`release_new_targets`]).
    pub async fn new_page(&self, url: &str) -> Result<Page, CdpError> {
        let page = self.browser.new_page(url).await?;
        self.released
            .lock()
            .expect("released lock")
            .insert(page.target_id().inner().clone());
        release_new_targets(&page).await?;
        Ok(page)
    }
}

/// Waits, at most two seconds, until chromiumoxide has attached to a new
/// tab and set it up, and releases its workers ([`release_new_targets`];
/// noted in `released`, so [`BrowserConn::pages`] does not do it again):
/// the dialog follower holds the tab until then ([`Dialogs::follow`]),
/// since a dialog the tab opened meanwhile would stop that set-up, and
/// with it every call that lists the tabs.
fn attached(browser: std::sync::Weak<Browser>, released: Released) -> dialogs::Attached {
    use chromiumoxide::cdp::browser_protocol::target::TargetId;
    const BOUND: Duration = Duration::from_secs(2);
    Arc::new(move |tab: String| {
        let (browser, released) = (browser.clone(), released.clone());
        Box::pin(async move {
            let id = TargetId::from(tab);
            let set_up = async {
                loop {
                    let Some(b) = browser.upgrade() else { return };
                    let page = b.get_page(id.clone()).await;
                    drop(b);
                    // The page answers once chromiumoxide has set it up;
                    // its workers are let start from its first document
                    // on (chromiumoxide's set-up holds them).
                    if let Ok(page) = page {
                        let _ = page.url().await;
                        let tab = id.inner().clone();
                        let first = released.lock().expect("released lock").insert(tab.clone());
                        if first && let Err(e) = release_new_targets(&page).await {
                            tracing::debug!(error = %e, "cannot release a new tab's workers (closing?)");
                            released.lock().expect("released lock").remove(&tab);
                        }
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            if tokio::time::timeout(BOUND, set_up).await.is_err() {
                tracing::debug!("a new tab is let go before Cordon's connection set it up");
            }
        })
    })
}

/// Lets the workers and frames a page starts run at once. chromiumoxide
/// auto-attaches to them paused (`waitForDebuggerOnStart`), then resumes
/// a service worker and detaches from it in the same breath, and in most
/// sessions the worker was left paused: `navigator.serviceWorker.register()`
/// never settled. Auto-attaching without the pause keeps chromiumoxide's
/// view of frames and workers and lets them start on their own.
pub async fn release_new_targets(page: &Page) -> Result<(), CdpError> {
    use chromiumoxide::cdp::browser_protocol::target::SetAutoAttachParams;
    page.execute(SetAutoAttachParams {
        auto_attach: true,
        wait_for_debugger_on_start: false,
        flatten: Some(true),
        filter: None,
    })
    .await?;
    Ok(())
}

impl Drop for BrowserConn {
    fn drop(&mut self) {
        self.handler.abort();
        self.watcher.abort();
        if let Some(f) = &self.front {
            f.abort();
        }
    }
}
