//! The browser tools, each a bounded sequence of CDP calls on one page.

use std::time::Duration;

use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::network::{EventResponseReceived, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, EventLifecycleEvent,
    EventNavigatedWithinDocument, GetNavigationHistoryParams, NavigateParams,
    NavigateToHistoryEntryParams, PrintToPdfParams, ReloadParams,
};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallFunctionOnParams, EvaluateParams, RemoteObjectId,
};
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};

use super::{CdpError, input};

/// When a navigation counts as done.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum WaitUntil {
    /// The `load` event.
    #[default]
    Load,
    /// `DOMContentLoaded`.
    DomContentLoaded,
    /// No network activity for 500 ms after load.
    NetworkIdle,
}

/// What `navigate` reports.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Navigation {
    /// HTTP status of the main document (after redirects), if there was one.
    pub status: Option<i64>,
    /// The URL finally shown.
    pub final_url: String,
    /// The document's title.
    pub title: String,
}

pub(super) async fn bounded<T>(
    what: &'static str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, CdpError>>,
) -> Result<T, CdpError> {
    match tokio::time::timeout(timeout, fut).await {
        Ok(res) => res,
        Err(_) => Err(CdpError::Timeout(
            what,
            u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        )),
    }
}

/// Sizes `page`'s window so that its viewport is `width`×`height`: the
/// page then renders at its own size, without the emulation a device-metrics
/// override runs at every frame and navigation (about 1.5 ms a repaint and
/// 3 ms a first navigation here: BENCHMARKS.md, issue 25). Chromium
/// resizes the renderer before it answers.
pub async fn size_viewport(page: &Page, width: u32, height: u32) -> Result<(), CdpError> {
    use chromiumoxide::cdp::browser_protocol::browser::{
        GetWindowForTargetParams, SetContentsSizeParams,
    };
    let window = page
        .execute(GetWindowForTargetParams::default())
        .await?
        .result
        .window_id;
    let mut size = SetContentsSizeParams::new(window);
    size.width = Some(i64::from(width));
    size.height = Some(i64::from(height));
    page.execute(size).await?;
    Ok(())
}

/// Loads `url` in `page` and waits as asked.
pub async fn navigate(
    page: &Page,
    url: &str,
    wait: WaitUntil,
    timeout: Duration,
) -> Result<Navigation, CdpError> {
    let res = navigate_inner(page, url, wait, timeout).await;
    if matches!(res, Err(CdpError::Timeout(..))) {
        reset_tab(page).await;
    }
    res
}

/// After a navigation that will not finish (it ran out of time, or turned
/// into a refused download): stop it and commit `about:blank`, so the tab
/// (and chromiumoxide's per-tab navigation queue, which waits for a new
/// document) is usable again at once.
pub async fn reset_tab(page: &Page) {
    // Bounded as a whole: the page may be the reason it is reset.
    let _ = tokio::time::timeout(Duration::from_secs(4), reset_tab_inner(page)).await;
}

async fn reset_tab_inner(page: &Page) {
    use chromiumoxide::cdp::browser_protocol::page::StopLoadingParams;
    let _ = page.execute(StopLoadingParams::default()).await;
    let Ok(mut events) = page.event_listener::<EventLifecycleEvent>().await else {
        return;
    };
    let _ = evaluate(page, "location.replace('about:blank')").await;
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(ev) = events.next().await {
            if ev.name == "load" {
                break;
            }
        }
    })
    .await;
}

async fn navigate_inner(
    page: &Page,
    url: &str,
    wait: WaitUntil,
    timeout: Duration,
) -> Result<Navigation, CdpError> {
    bounded("navigate", timeout, async {
        let mut responses = page.event_listener::<EventResponseReceived>().await?;
        let mut lifecycle = page.event_listener::<EventLifecycleEvent>().await?;
        let nav = page.execute(NavigateParams::new(url));
        let res = match wait {
            WaitUntil::DomContentLoaded => {
                let dcl = async {
                    while let Some(ev) = lifecycle.next().await {
                        if ev.name == "DOMContentLoaded" {
                            return;
                        }
                    }
                };
                tokio::select! {
                    res = nav => Some(res?),
                    () = dcl => None,
                }
            }
            WaitUntil::Load | WaitUntil::NetworkIdle => Some(nav.await?),
        };
        if let Some(err) = res.and_then(|r| r.result.error_text.clone()) {
            return Err(CdpError::Failed(format!("navigation failed: {err}")));
        }
        if wait == WaitUntil::NetworkIdle {
            while let Some(ev) = lifecycle.next().await {
                if ev.name == "networkIdle" {
                    break;
                }
            }
        }
        let mut status = None;
        while let Some(Some(ev)) = responses.next().now_or_never() {
            if ev.r#type == ResourceType::Document {
                status = Some(ev.response.status);
            }
        }
        let final_url = page.url().await?.unwrap_or_default();
        let title = title(page).await?;
        Ok(Navigation {
            status,
            final_url,
            title,
        })
    })
    .await
}

/// What the tab shows now (no status: nothing was loaded).
pub async fn current(page: &Page) -> Result<Navigation, CdpError> {
    Ok(Navigation {
        status: None,
        final_url: page.url().await?.unwrap_or_default(),
        title: title(page).await?,
    })
}

/// The document's title, read in the page's current main-world context
/// (chromiumoxide's `get_title` can hold a context a navigation destroyed).
pub async fn title(page: &Page) -> Result<String, CdpError> {
    // In the isolated world (the page cannot answer for it) and cut there.
    let expr = format!("document.title.slice(0, {})", MAX_TITLE_CHARS * 2);
    Ok(evaluate_isolated_value(page, &expr)
        .await?
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect())
}

/// The most characters of a tab's title an answer carries (a page may set
/// megabytes).
pub const MAX_TITLE_CHARS: usize = 1024;

/// The tab's title as the browser holds it (`Target.getTargetInfo`): no
/// script runs in the page, so it answers while a dialog stops it.
/// Asked of the browser's own session: the page's may wait on its renderer.
pub async fn title_of_target(
    browser: &chromiumoxide::Browser,
    page: &Page,
) -> Result<String, CdpError> {
    use chromiumoxide::cdp::browser_protocol::target::GetTargetInfoParams;
    let info = browser
        .execute(GetTargetInfoParams {
            target_id: Some(page.target_id().clone()),
        })
        .await?;
    Ok(info
        .result
        .target_info
        .title
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect())
}

/// Screenshot options.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// Lossless.
    #[default]
    Png,
    /// Lossy, smaller.
    Jpeg,
}

impl ImageFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Jpeg => "jpg",
        }
    }
}

/// Captures the viewport (or the whole page) as PNG or JPEG bytes.
pub async fn screenshot(
    page: &Page,
    format: ImageFormat,
    quality: Option<i64>,
    full_page: bool,
    timeout: Duration,
) -> Result<Vec<u8>, CdpError> {
    bounded("screenshot", timeout, async {
        let mut params = CaptureScreenshotParams::builder().format(match format {
            ImageFormat::Png => CaptureScreenshotFormat::Png,
            ImageFormat::Jpeg => CaptureScreenshotFormat::Jpeg,
        });
        if format == ImageFormat::Jpeg {
            params = params.quality(quality.unwrap_or(80));
        }
        if full_page {
            let metrics = page.layout_metrics().await?;
            let size = metrics.css_content_size;
            params = params.capture_beyond_viewport(true).clip(
                chromiumoxide::cdp::browser_protocol::page::Viewport {
                    x: 0.0,
                    y: 0.0,
                    width: size.width,
                    height: size.height,
                    scale: 1.0,
                },
            );
        }
        let res = page.execute(params.build()).await?;
        let bytes: &[u8] = res.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(bytes)
            .map_err(|e| CdpError::Protocol(format!("screenshot data: {e}")))
    })
    .await
}

/// Runs `expression` in the page and returns its JSON value.
pub async fn evaluate(page: &Page, expression: &str) -> Result<serde_json::Value, CdpError> {
    evaluate_in(page, expression, None).await
}

/// `expression`'s JSON value, run in execution context `context` (the
/// page's own when `None`), a promise awaited.
async fn evaluate_in(
    page: &Page,
    expression: &str,
    context: Option<chromiumoxide::cdp::js_protocol::runtime::ExecutionContextId>,
) -> Result<serde_json::Value, CdpError> {
    let mut params = EvaluateParams::builder()
        .expression(expression)
        .return_by_value(true)
        .await_promise(true);
    if let Some(ctx) = context {
        params = params.context_id(ctx);
    }
    let res = page
        .execute(params.build().map_err(CdpError::Protocol)?)
        .await?;
    if let Some(ex) = &res.result.exception_details {
        return Err(CdpError::Failed(format!("script error: {}", ex.text)));
    }
    Ok(res
        .result
        .result
        .value
        .clone()
        .unwrap_or(serde_json::Value::Null))
}

/// How far past the cut `read_dom` reads, characters: what is blanked
/// out (a code typed by Cordon) is blanked whole before the cut, never
/// half of it left past a blank that did not match.
const READ_DOM_MARGIN: usize = 64;

/// The page's HTML, with `blank` applied to it, then cut to `max_chars`
/// characters. Read in an isolated world (the page's own getters and
/// prototypes are not called) and cut in the page too, so only what is
/// answered crosses to Cordon, however large the page makes it.
pub async fn read_dom(
    page: &Page,
    max_chars: usize,
    timeout: Duration,
    blank: impl FnOnce(&mut String),
) -> Result<(String, Option<usize>), CdpError> {
    bounded("read_dom", timeout, async {
        // UTF-16 units in the page: twice the characters wanted holds
        // at least as many characters.
        let units = max_chars.saturating_add(READ_DOM_MARGIN).saturating_mul(2);
        let read = evaluate_isolated_value(
            page,
            &format!(
                "(() => {{ const h = document.documentElement ? document.documentElement.outerHTML : ''; \
                 return [h.slice(0, {units}), h.length > {units}]; }})()"
            ),
        )
        .await?;
        let mut html = read[0].as_str().unwrap_or_default().to_owned();
        let more = read[1].as_bool().unwrap_or(false);
        blank(&mut html);
        if more || html.chars().count() > max_chars {
            Ok((html.chars().take(max_chars).collect(), Some(max_chars)))
        } else {
            Ok((html, None))
        }
    })
    .await
}

/// `expression` evaluated in the main frame's isolated world (the page's
/// own script cannot change what it reads there), as its JSON value.
pub(super) async fn evaluate_isolated_value(
    page: &Page,
    expression: &str,
) -> Result<serde_json::Value, CdpError> {
    super::facts::in_isolated_world(page, |ctx| evaluate_in(page, expression, Some(ctx))).await
}

/// What an element-directed tool acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Locator {
    /// Viewport coordinates in CSS pixels.
    Point(f64, f64),
    /// A CSS selector; the first match.
    Selector(String),
    /// A node from the last snapshot.
    Node(BackendNodeId, String),
}

/// Scrolls the element into view and returns the centre of its box.
const CENTER_FN: &str = "function() { this.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'}); \
    const r = this.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2, r.width, r.height]; }";

pub(super) async fn object_for(
    page: &Page,
    locator: &Locator,
) -> Result<Option<RemoteObjectId>, CdpError> {
    match locator {
        Locator::Point(..) => Ok(None),
        // In an isolated world: the page's own `querySelector` (or any
        // prototype it rewrote) is not the one called, and what the tools
        // then run on the element sees the DOM as it is.
        Locator::Selector(sel) => {
            let expr = format!(
                "document.querySelector({})",
                serde_json::to_string(sel).unwrap_or_default()
            );
            let (object, threw) = super::facts::evaluate_isolated(page, &expr).await?;
            // The expression is one `querySelector` call: it throws only
            // when the selector does not parse.
            if threw {
                return Err(invalid_selector(sel));
            }
            Ok(object)
        }
        Locator::Node(id, _) => {
            let ctx = super::facts::isolated_context(page, None).await?;
            let res = page
                .execute(
                    ResolveNodeParams::builder()
                        .backend_node_id(*id)
                        .execution_context_id(ctx)
                        .build(),
                )
                .await;
            if let Ok(r) = res {
                return Ok(r.result.object.object_id.clone());
            }
            // A node of a child frame: resolved in that frame's document.
            match page
                .execute(ResolveNodeParams::builder().backend_node_id(*id).build())
                .await
            {
                Ok(r) => Ok(r.result.object.object_id.clone()),
                Err(_) => Ok(None),
            }
        }
    }
}

pub(super) fn invalid_selector(sel: &str) -> CdpError {
    CdpError::InvalidSelector(format!(
        "invalid CSS selector {:?}",
        sel.chars().take(200).collect::<String>()
    ))
}

fn not_found(locator: &Locator) -> CdpError {
    match locator {
        Locator::Selector(s) => CdpError::NotFound(format!("no element matches selector {s:?}")),
        Locator::Node(_, r) => {
            CdpError::NotFound(format!("ref {r} no longer exists; take a new snapshot"))
        }
        Locator::Point(..) => CdpError::NotFound("no element".into()),
    }
}

/// Calls `function` on the located element, waiting up to `timeout` for it to appear.
pub(super) async fn call_on(
    page: &Page,
    locator: &Locator,
    function: &str,
    timeout: Duration,
) -> Result<serde_json::Value, CdpError> {
    // Stop looking well before the tool's bound, so a missing element is
    // reported as such rather than as a timeout.
    let deadline = tokio::time::Instant::now() + timeout.mul_f64(0.75);
    loop {
        if let Some(object) = object_for(page, locator).await? {
            let res = page
                .execute(
                    CallFunctionOnParams::builder()
                        .object_id(object)
                        .function_declaration(function)
                        .return_by_value(true)
                        .build()
                        .map_err(CdpError::Protocol)?,
                )
                .await?;
            if let Some(ex) = &res.result.exception_details {
                return Err(CdpError::Failed(format!("script error: {}", ex.text)));
            }
            return Ok(res
                .result
                .result
                .value
                .clone()
                .unwrap_or(serde_json::Value::Null));
        }
        if matches!(locator, Locator::Node(..)) || tokio::time::Instant::now() >= deadline {
            return Err(not_found(locator));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The viewport point to act at for `locator`.
pub(super) async fn point_of(
    page: &Page,
    locator: &Locator,
    timeout: Duration,
) -> Result<(f64, f64), CdpError> {
    if let Locator::Point(x, y) = locator {
        return Ok((*x, *y));
    }
    let v = call_on(page, locator, CENTER_FN, timeout).await?;
    let nums: Vec<f64> =
        serde_json::from_value(v).map_err(|e| CdpError::Protocol(e.to_string()))?;
    match nums.as_slice() {
        [_, _, w, h] if *w <= 0.0 || *h <= 0.0 => {
            Err(CdpError::Failed("the element is not visible".into()))
        }
        [x, y, ..] => Ok((*x, *y)),
        _ => Err(CdpError::Protocol("unexpected element box".into())),
    }
}

/// Clicks the element (or point).
pub async fn click(page: &Page, locator: &Locator, timeout: Duration) -> Result<(), CdpError> {
    bounded("click", timeout, async {
        let (x, y) = point_of(page, locator, timeout).await?;
        input::click(page, x, y, 1).await
    })
    .await
}

/// Moves the mouse over the element (or point).
pub async fn hover(page: &Page, locator: &Locator, timeout: Duration) -> Result<(), CdpError> {
    bounded("hover", timeout, async {
        let (x, y) = point_of(page, locator, timeout).await?;
        input::mouse_move(page, x, y).await
    })
    .await
}

/// Types `text`: into the element if given (focusing it first), else at the focus.
pub async fn type_text(
    page: &Page,
    locator: Option<&Locator>,
    text: &str,
    submit: bool,
    timeout: Duration,
) -> Result<(), CdpError> {
    bounded("type", timeout, async {
        if let Some(locator) = locator {
            // The text goes where the focus is: if the target did not
            // take it (not focusable, or the page moved it on), typing
            // would land in another element than the one judged: refused.
            let focused = call_on(
                page,
                locator,
                "function() { this.scrollIntoView({block: 'center'}); this.focus(); \
                 const root = this.getRootNode(); \
                 const active = root.activeElement !== undefined ? root.activeElement : document.activeElement; \
                 return !!active && (active === this || this.contains(active)); }",
                timeout,
            )
            .await?;
            if focused != serde_json::Value::Bool(true) {
                return Err(CdpError::Failed(
                    "the target does not take the focus: the text would go to another element"
                        .into(),
                ));
            }
        }
        input::insert_text(page, text).await?;
        if submit {
            input::press(page, "Enter", 0).await?;
        }
        Ok(())
    })
    .await
}

/// Presses one key.
pub async fn press(page: &Page, key: &str, timeout: Duration) -> Result<(), CdpError> {
    bounded("press", timeout, input::press(page, key, 0)).await
}

/// Scrolls by (dx, dy) at the element's centre (or the viewport's).
pub async fn scroll(
    page: &Page,
    locator: Option<&Locator>,
    dx: f64,
    dy: f64,
    viewport: (u32, u32),
    timeout: Duration,
) -> Result<(), CdpError> {
    bounded("scroll", timeout, async {
        let (x, y) = match locator {
            Some(l) => point_of(page, l, timeout).await?,
            None => (f64::from(viewport.0) / 2.0, f64::from(viewport.1) / 2.0),
        };
        input::wheel(page, x, y, dx, dy).await
    })
    .await
}

/// Chooses options of a `<select>` by value or visible text; returns the values now selected.
pub async fn select(
    page: &Page,
    locator: &Locator,
    values: &[String],
    timeout: Duration,
) -> Result<Vec<String>, CdpError> {
    bounded("select", timeout, async {
        let values = serde_json::to_string(values).unwrap_or_default();
        let function = format!(
            "function() {{ if (this.tagName !== 'SELECT') throw new Error('not a <select> element'); \
             const want = {values}; \
             const hits = Array.from(this.options).filter(o => want.includes(o.value) || want.includes(o.text.trim())); \
             if (!hits.length) throw new Error('no option matches'); \
             if (this.multiple) {{ for (const o of this.options) o.selected = hits.includes(o); }} else {{ this.value = hits[0].value; }} \
             this.dispatchEvent(new Event('input', {{bubbles: true}})); this.dispatchEvent(new Event('change', {{bubbles: true}})); \
             return Array.from(this.selectedOptions).map(o => o.value); }}"
        );
        let v = call_on(page, locator, &function, timeout).await?;
        serde_json::from_value(v).map_err(|e| CdpError::Protocol(e.to_string()))
    })
    .await
}

/// What `wait_for` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitTarget {
    /// Text anywhere in the page's visible text.
    Text(String),
    /// An element matching a CSS selector.
    Selector(String),
}

/// Polls until the text or selector is present, or fails after `timeout`.
pub async fn wait_for(
    page: &Page,
    target: &WaitTarget,
    timeout: Duration,
) -> Result<u64, CdpError> {
    let start = tokio::time::Instant::now();
    let expr = match target {
        WaitTarget::Text(t) => format!(
            "!!document.body && document.body.innerText.includes({})",
            serde_json::to_string(t).unwrap_or_default()
        ),
        WaitTarget::Selector(s) => format!(
            "(() => {{ try {{ return !!document.querySelector({}); }} catch (e) {{ return 'invalid selector'; }} }})()",
            serde_json::to_string(s).unwrap_or_default()
        ),
    };
    bounded("wait_for", timeout, async {
        loop {
            let found = evaluate(page, &expr).await?;
            if found == serde_json::Value::Bool(true) {
                return Ok(u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX));
            }
            if let (Some("invalid selector"), WaitTarget::Selector(s)) = (found.as_str(), target) {
                return Err(invalid_selector(s));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
}

/// Goes `delta` entries through the history (-1 back, +1 forward); false at either end.
/// The URL `delta` steps away in the tab's history, if there is one.
pub async fn history_url(
    page: &Page,
    delta: i64,
    timeout: Duration,
) -> Result<Option<String>, CdpError> {
    bounded("reading the history", timeout, async {
        let h = page.execute(GetNavigationHistoryParams::default()).await?;
        let target = h.result.current_index + delta;
        Ok(usize::try_from(target)
            .ok()
            .and_then(|i| h.result.entries.get(i))
            .map(|e| e.url.clone()))
    })
    .await
}

pub async fn history(page: &Page, delta: i64, timeout: Duration) -> Result<bool, CdpError> {
    bounded("history", timeout, async {
        let h = page.execute(GetNavigationHistoryParams::default()).await?;
        let target = h.result.current_index + delta;
        let Some(entry) = usize::try_from(target)
            .ok()
            .and_then(|i| h.result.entries.get(i))
        else {
            return Ok(false);
        };
        let mut loads = page.event_listener::<EventLifecycleEvent>().await?;
        let mut same_doc = page.event_listener::<EventNavigatedWithinDocument>().await?;
        page.execute(NavigateToHistoryEntryParams::new(entry.id)).await?;
        // A new document fires `load`; a same-document entry (#hash,
        // pushState) only reports that it navigated.
        tokio::select! {
            _ = async { while let Some(ev) = loads.next().await { if ev.name == "load" { break; } } } => {}
            _ = same_doc.next() => {}
        }
        Ok(true)
    })
    .await
}

/// Reloads and waits for `load`.
pub async fn reload(page: &Page, timeout: Duration) -> Result<(), CdpError> {
    bounded("reload", timeout, async {
        let mut events = page.event_listener::<EventLifecycleEvent>().await?;
        page.execute(ReloadParams::default()).await?;
        while let Some(ev) = events.next().await {
            if ev.name == "load" {
                break;
            }
        }
        Ok(())
    })
    .await
}

/// Prints the page to PDF bytes.
pub async fn pdf(page: &Page, timeout: Duration) -> Result<Vec<u8>, CdpError> {
    bounded("pdf", timeout, async {
        let res = page.execute(PrintToPdfParams::default()).await?;
        let bytes: &[u8] = res.result.data.as_ref();
        base64::engine::general_purpose::STANDARD
            .decode(bytes)
            .map_err(|e| CdpError::Protocol(format!("pdf data: {e}")))
    })
    .await
}
