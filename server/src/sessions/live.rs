//! A running session: its browser, its tabs, its activity clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use tokio::sync::Mutex;

use crate::cdp::{BrowserConn, CdpError};
use crate::domain::{SessionId, TenantId};
use crate::egress::{EgressListener, Refusals};
use crate::recording::RecordMode;
use crate::sandbox::Sandbox;
use crate::time::now_ms;

use super::request::Viewport;

/// Per-session browser state that tool calls share; holding its lock
/// serialises tool calls on one session.
#[derive(Default)]
pub struct Tabs {
    /// The tab tools act on (the first page when unset or closed).
    pub active: Option<TargetId>,
    /// Refs from the last snapshot.
    pub refs: HashMap<String, BackendNodeId>,
}

/// One open session.
pub struct LiveSession {
    /// Id.
    pub id: SessionId,
    /// Owner.
    pub tenant: TenantId,
    /// Recording mode.
    pub record: RecordMode,
    /// Viewport.
    pub viewport: Viewport,
    /// Unix ms after which it is closed.
    pub deadline_at: i64,
    last_activity: AtomicI64,
    screenshot_seq: AtomicU64,
    /// The sandbox running its browser.
    pub sandbox: Sandbox,
    pub(super) conn: BrowserConn,
    pub(super) egress: Mutex<Option<EgressListener>>,
    /// What its egress listener refused lately.
    pub(super) refusals: Refusals,
    /// Tab state; lock it for the duration of a tool call.
    pub tabs: Mutex<Tabs>,
    /// Scripts every new tab gets before its first page (operator mode's
    /// stored localStorage); set once after injection.
    init_scripts: std::sync::Mutex<Vec<super::injection::InitScript>>,
}

impl LiveSession {
    pub(super) fn new(
        id: SessionId,
        tenant: TenantId,
        record: RecordMode,
        viewport: Viewport,
        deadline_at: i64,
        warm: super::pool::Warm,
    ) -> Self {
        Self {
            id,
            tenant,
            record,
            viewport,
            deadline_at,
            last_activity: AtomicI64::new(now_ms()),
            screenshot_seq: AtomicU64::new(0),
            tabs: Mutex::new(Tabs {
                active: Some(warm.page.target_id().clone()),
                refs: HashMap::new(),
            }),
            sandbox: warm.sandbox,
            conn: warm.conn,
            refusals: warm.egress.refusals(),
            egress: Mutex::new(Some(warm.egress)),
            init_scripts: std::sync::Mutex::default(),
        }
    }

    /// Keeps the scripts injection installed on the first tab, for the
    /// tabs [`Self::open_tab`] opens later.
    pub(super) fn set_init_scripts(&self, scripts: Vec<super::injection::InitScript>) {
        *self.init_scripts.lock().expect("init scripts lock") = scripts;
    }

    /// Marks activity now (resets the idle timer).
    pub fn touch(&self) {
        self.last_activity.store(now_ms(), Ordering::Relaxed);
    }

    /// Unix ms of the last tool call.
    pub fn last_activity(&self) -> i64 {
        self.last_activity.load(Ordering::Relaxed)
    }

    /// The next screenshot number (from 1).
    pub fn next_screenshot_seq(&self) -> u64 {
        self.screenshot_seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether the browser connection has ended.
    pub fn browser_gone(&self) -> bool {
        self.conn.is_closed()
    }

    /// All open tabs (page targets), in creation order.
    pub async fn pages(&self) -> Result<Vec<Page>, CdpError> {
        if self.conn.is_closed() {
            return Err(CdpError::BrowserGone);
        }
        Ok(self.conn.browser().pages().await?)
    }

    /// The active tab (falling back to the first open one).
    pub async fn page(&self, tabs: &mut Tabs) -> Result<Page, CdpError> {
        let pages = self.pages().await?;
        if let Some(active) = &tabs.active
            && let Some(p) = pages.iter().find(|p| p.target_id() == active)
        {
            return Ok(p.clone());
        }
        let first = pages
            .into_iter()
            .next()
            .ok_or_else(|| CdpError::NotFound("no tab is open".into()))?;
        tabs.active = Some(first.target_id().clone());
        tabs.refs.clear();
        Ok(first)
    }

    /// Opens a tab (optionally at `url`) and makes it active. With init
    /// scripts, the tab opens blank, gets them, and only then loads `url`.
    pub async fn open_tab(&self, tabs: &mut Tabs, url: Option<&str>) -> Result<Page, CdpError> {
        let sources: Vec<AddScriptToEvaluateOnNewDocumentParams> = self
            .init_scripts
            .lock()
            .expect("init scripts lock")
            .iter()
            .map(super::injection::InitScript::params)
            .collect();
        let first = if sources.is_empty() { url } else { None };
        let page = self
            .conn
            .browser()
            .new_page(first.unwrap_or("about:blank"))
            .await?;
        for params in sources {
            page.execute(params).await?;
        }
        page.execute(super::metrics_override(self.viewport)).await?;
        if let (Some(url), None) = (url, first) {
            page.goto(url).await?;
        }
        tabs.active = Some(page.target_id().clone());
        tabs.refs.clear();
        Ok(page)
    }
}
