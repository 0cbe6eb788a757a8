//! One handler per browser tool. Each: authenticate, parse, audit, act
//! within a time bound, answer.

use axum::Json;
use axum::extract::State;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::{MAX_SELECTOR, SessionRef, TargetSpec, begin, bound, finish};
use crate::api::auth::Agent;
use crate::api::json::ApiJson;
use crate::audit::redact;
use crate::cdp::{self, ImageFormat, Navigation, WaitTarget, WaitUntil, snapshot};
use crate::domain::{TargetUrl, TargetUrlError};
use crate::error::ApiError;
use crate::state::AppState;

/// The longest text `type` accepts.
pub const MAX_TYPE_CHARS: usize = 64 * 1024;

fn url_error(e: TargetUrlError) -> ApiError {
    match e {
        TargetUrlError::TooLong => ApiError::PayloadTooLarge(e.to_string()),
        other => ApiError::BadRequest(other.to_string()),
    }
}

/// Body of `navigate`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateReq {
    url: String,
    #[serde(default)]
    wait: WaitUntil,
    timeout_ms: Option<u64>,
}

/// `POST /api/sessions/{id}/navigate` → `{status, final_url, title}`
pub async fn navigate(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<NavigateReq>,
) -> Result<Json<Navigation>, ApiError> {
    let url = TargetUrl::parse(&req.url).map_err(url_error)?;
    let timeout = bound(&state, req.timeout_ms)?;
    let params = json!({ "url": redact::url(url.as_str()), "wait": req.wait });
    let session = begin(&state, &agent.0, &session, "tool.navigate", params).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        tabs.refs.clear();
        cdp::navigate(&page, url.as_str(), req.wait, timeout).await
    }
    .await;
    Ok(Json(finish(&state, &session, res).await?))
}

/// Body of `screenshot`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotReq {
    #[serde(default)]
    full_page: bool,
    #[serde(default)]
    format: ImageFormat,
    quality: Option<i64>,
}

/// What `screenshot` returns.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct ScreenshotRes {
    image_base64: String,
    format: ImageFormat,
    width: u32,
    height: u32,
    captured_at: String,
    /// Where the recorder kept it (absent when recording is off).
    persisted_path: Option<String>,
}

/// `POST /api/sessions/{id}/screenshot`
pub async fn screenshot(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<ScreenshotReq>,
) -> Result<Json<ScreenshotRes>, ApiError> {
    if req.quality.is_some_and(|q| !(1..=100).contains(&q)) {
        return Err(ApiError::BadRequest(
            "quality must be between 1 and 100".into(),
        ));
    }
    let timeout = bound(&state, None)?;
    let params = json!({ "full_page": req.full_page, "format": req.format });
    let session = begin(&state, &agent.0, &session, "tool.screenshot", params).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::screenshot(&page, req.format, req.quality, req.full_page, timeout).await
    }
    .await;
    drop(tabs);
    let bytes = finish(&state, &session, res).await?;
    let (width, height) = image::ImageReader::new(std::io::Cursor::new(&bytes))
        .with_guessed_format()
        .ok()
        .and_then(|r| r.into_dimensions().ok())
        .unwrap_or_default();
    let ext = match req.format {
        ImageFormat::Png => "png",
        ImageFormat::Jpeg => "jpg",
    };
    let seq = session.next_screenshot_seq();
    let persisted = state
        .sessions
        .recorder()
        .save(
            session.record,
            session.tenant.as_str(),
            session.id.as_str(),
            seq,
            ext,
            &bytes,
        )
        .await?;
    Ok(Json(ScreenshotRes {
        image_base64: base64::engine::general_purpose::STANDARD.encode(&bytes),
        format: req.format,
        width,
        height,
        captured_at: crate::dashboard::rfc3339_ms(crate::store::audit::now_ms()),
        persisted_path: persisted.map(|p| p.display().to_string()),
    }))
}

/// `{ "success": true }`
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct Done {
    success: bool,
}

const DONE: Done = Done { success: true };

/// Body of element tools (`click`, `hover`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElementReq {
    #[serde(flatten)]
    target: TargetSpec,
    timeout_ms: Option<u64>,
}

async fn element_tool(
    agent: Agent,
    state: AppState,
    session: std::sync::Arc<crate::sessions::LiveSession>,
    req: ElementReq,
    action: &'static str,
) -> Result<Json<Done>, ApiError> {
    if req.target.is_empty() {
        return Err(ApiError::BadRequest(
            "give exactly one of {x, y}, selector or ref".into(),
        ));
    }
    let timeout = bound(&state, req.timeout_ms)?;
    let session = begin(&state, &agent.0, &session, action, req.target.describe()).await?;
    let mut tabs = session.tabs.lock().await;
    let locator = req
        .target
        .locate(&tabs, (session.viewport.width, session.viewport.height))?;
    let res = async {
        let page = session.page(&mut tabs).await?;
        match action {
            "tool.click" => cdp::click(&page, &locator, timeout).await,
            _ => cdp::hover(&page, &locator, timeout).await,
        }
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(DONE))
}

/// `POST /api/sessions/{id}/click` with `{x, y}`, `{selector}` or `{ref}`
pub async fn click(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<ElementReq>,
) -> Result<Json<Done>, ApiError> {
    element_tool(agent, state, session, req, "tool.click").await
}

/// `POST /api/sessions/{id}/hover`
pub async fn hover(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<ElementReq>,
) -> Result<Json<Done>, ApiError> {
    element_tool(agent, state, session, req, "tool.hover").await
}

/// Body of `type`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeReq {
    text: String,
    selector: Option<String>,
    #[serde(rename = "ref")]
    r#ref: Option<String>,
    #[serde(default)]
    submit: bool,
    timeout_ms: Option<u64>,
}

/// `POST /api/sessions/{id}/type`: the text is never logged or audited, only its length.
pub async fn type_text(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<TypeReq>,
) -> Result<Json<Done>, ApiError> {
    if req.text.chars().count() > MAX_TYPE_CHARS {
        return Err(ApiError::PayloadTooLarge(format!(
            "text is longer than {MAX_TYPE_CHARS} characters"
        )));
    }
    let timeout = bound(&state, req.timeout_ms)?;
    let target = TargetSpec {
        selector: req.selector,
        r#ref: req.r#ref,
        ..TargetSpec::default()
    };
    let params = json!({
        "text": redact::typed_text(&req.text),
        "selector": target.selector,
        "ref": target.r#ref,
        "submit": req.submit,
    });
    let session = begin(&state, &agent.0, &session, "tool.type", params).await?;
    let mut tabs = session.tabs.lock().await;
    let locator = if target.is_empty() {
        None
    } else {
        Some(target.locate(&tabs, (session.viewport.width, session.viewport.height))?)
    };
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::type_text(&page, locator.as_ref(), &req.text, req.submit, timeout).await
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(DONE))
}

/// Body of `press`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PressReq {
    key: String,
}

/// `POST /api/sessions/{id}/press` with a `KeyboardEvent.key` name (`Enter`, `Tab`, `a`)
pub async fn press(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<PressReq>,
) -> Result<Json<Done>, ApiError> {
    if req.key.is_empty() || req.key.len() > 32 {
        return Err(ApiError::BadRequest("key must be 1 to 32 bytes".into()));
    }
    let timeout = bound(&state, None)?;
    // A single printable key is typed text: audit it redacted.
    let shown = if req.key.chars().count() == 1 {
        redact::typed_text(&req.key)
    } else {
        req.key.clone()
    };
    let session = begin(
        &state,
        &agent.0,
        &session,
        "tool.press",
        json!({ "key": shown }),
    )
    .await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::press(&page, &req.key, timeout).await
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(DONE))
}

/// Body of `scroll`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScrollReq {
    #[serde(default)]
    dx: f64,
    #[serde(default)]
    dy: f64,
    selector: Option<String>,
    #[serde(rename = "ref")]
    r#ref: Option<String>,
}

/// `POST /api/sessions/{id}/scroll`: a wheel of (dx, dy) pixels at the element or the viewport centre
pub async fn scroll(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<ScrollReq>,
) -> Result<Json<Done>, ApiError> {
    if !req.dx.is_finite()
        || !req.dy.is_finite()
        || req.dx.abs() > 100_000.0
        || req.dy.abs() > 100_000.0
    {
        return Err(ApiError::BadRequest(
            "dx and dy must be finite and at most 100000 in size".into(),
        ));
    }
    let timeout = bound(&state, None)?;
    let target = TargetSpec {
        selector: req.selector,
        r#ref: req.r#ref,
        ..TargetSpec::default()
    };
    let params =
        json!({ "dx": req.dx, "dy": req.dy, "selector": target.selector, "ref": target.r#ref });
    let session = begin(&state, &agent.0, &session, "tool.scroll", params).await?;
    let mut tabs = session.tabs.lock().await;
    let vp = (session.viewport.width, session.viewport.height);
    let locator = if target.is_empty() {
        None
    } else {
        Some(target.locate(&tabs, vp)?)
    };
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::scroll(&page, locator.as_ref(), req.dx, req.dy, vp, timeout).await
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(DONE))
}

/// Body of `select`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectReq {
    selector: Option<String>,
    #[serde(rename = "ref")]
    r#ref: Option<String>,
    values: Vec<String>,
    timeout_ms: Option<u64>,
}

/// `POST /api/sessions/{id}/select` → `{selected: [values]}`
pub async fn select(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<SelectReq>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if req.values.is_empty() || req.values.len() > 100 || req.values.iter().any(|v| v.len() > 1024)
    {
        return Err(ApiError::BadRequest(
            "values must hold 1 to 100 strings of at most 1024 bytes".into(),
        ));
    }
    let timeout = bound(&state, req.timeout_ms)?;
    let target = TargetSpec {
        selector: req.selector,
        r#ref: req.r#ref,
        ..TargetSpec::default()
    };
    if target.is_empty() {
        return Err(ApiError::BadRequest("give a selector or a ref".into()));
    }
    let params =
        json!({ "selector": target.selector, "ref": target.r#ref, "values": req.values.len() });
    let session = begin(&state, &agent.0, &session, "tool.select", params).await?;
    let mut tabs = session.tabs.lock().await;
    let locator = target.locate(&tabs, (session.viewport.width, session.viewport.height))?;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::select(&page, &locator, &req.values, timeout).await
    }
    .await;
    let selected = finish(&state, &session, res).await?;
    Ok(Json(json!({ "selected": selected })))
}

/// Body of `wait_for`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitForReq {
    text: Option<String>,
    selector: Option<String>,
    timeout_ms: Option<u64>,
}

/// `POST /api/sessions/{id}/wait_for` → `{waited_ms}`, or 504 after `timeout_ms`
pub async fn wait_for(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<WaitForReq>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let target = match (req.text, req.selector) {
        (Some(t), None) if !t.is_empty() && t.len() <= 4096 => WaitTarget::Text(t),
        (None, Some(s)) if !s.is_empty() && s.len() <= MAX_SELECTOR => WaitTarget::Selector(s),
        _ => {
            return Err(ApiError::BadRequest(
                "give exactly one of text (1–4096 bytes) or selector".into(),
            ));
        }
    };
    let timeout = bound(&state, Some(req.timeout_ms.unwrap_or(5000)))?;
    let params = match &target {
        WaitTarget::Text(t) => json!({ "text": redact::typed_text(t) }),
        WaitTarget::Selector(s) => json!({ "selector": s }),
    };
    let session = begin(&state, &agent.0, &session, "tool.wait_for", params).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::wait_for(&page, &target, timeout).await
    }
    .await;
    let waited = finish(&state, &session, res).await?;
    Ok(Json(json!({ "waited_ms": waited })))
}

/// Body of `read_dom`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDomReq {
    max_chars: Option<usize>,
}

/// `POST /api/sessions/{id}/read_dom` → `{html, truncated_to}`
pub async fn read_dom(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<ReadDomReq>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let max = req.max_chars.unwrap_or(20_000);
    if !(1..=1_000_000).contains(&max) {
        return Err(ApiError::BadRequest(
            "max_chars must be between 1 and 1000000".into(),
        ));
    }
    let timeout = bound(&state, None)?;
    let session = begin(
        &state,
        &agent.0,
        &session,
        "tool.read_dom",
        json!({ "max_chars": max }),
    )
    .await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::read_dom(&page, max, timeout).await
    }
    .await;
    let (html, truncated_to) = finish(&state, &session, res).await?;
    Ok(Json(json!({ "html": html, "truncated_to": truncated_to })))
}

/// Body of `snapshot`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotReq {
    max_depth: Option<usize>,
    max_nodes: Option<usize>,
}

/// `POST /api/sessions/{id}/snapshot` → `{nodes, truncated, count}`; refs stay valid until the next snapshot or navigation
pub async fn snapshot(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<SnapshotReq>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limits = snapshot::Limits {
        max_depth: req.max_depth.unwrap_or(40),
        max_nodes: req.max_nodes.unwrap_or(1500),
    };
    if !(1..=200).contains(&limits.max_depth) || !(1..=20_000).contains(&limits.max_nodes) {
        return Err(ApiError::BadRequest(
            "max_depth must be 1–200 and max_nodes 1–20000".into(),
        ));
    }
    let timeout = bound(&state, None)?;
    let params = json!({ "max_depth": limits.max_depth, "max_nodes": limits.max_nodes });
    let session = begin(&state, &agent.0, &session, "tool.snapshot", params).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        match tokio::time::timeout(timeout, snapshot::take(&page, limits)).await {
            Ok(r) => r,
            Err(_) => Err(cdp::CdpError::Timeout(
                "snapshot",
                u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            )),
        }
    }
    .await;
    let snap = match res {
        Ok(snap) => {
            tabs.refs = snap.refs.clone();
            Ok(snap)
        }
        Err(e) => Err(e),
    };
    drop(tabs);
    let snap = finish(&state, &session, snap).await?;
    Ok(Json(
        json!({ "nodes": snap.nodes, "truncated": snap.truncated, "count": snap.count }),
    ))
}

async fn history_tool(
    agent: Agent,
    state: AppState,
    session: std::sync::Arc<crate::sessions::LiveSession>,
    delta: i64,
) -> Result<Json<serde_json::Value>, ApiError> {
    let timeout = bound(&state, None)?;
    let action = if delta < 0 {
        "tool.back"
    } else {
        "tool.forward"
    };
    let session = begin(&state, &agent.0, &session, action, json!({})).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        tabs.refs.clear();
        let moved = cdp::history(&page, delta, timeout).await?;
        let url = page.url().await?.unwrap_or_default();
        Ok((moved, url))
    }
    .await;
    let (moved, url) = finish(&state, &session, res).await?;
    Ok(Json(json!({ "moved": moved, "url": url })))
}

/// `POST /api/sessions/{id}/back` → `{moved, url}`
pub async fn back(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
) -> Result<Json<serde_json::Value>, ApiError> {
    history_tool(agent, state, session, -1).await
}

/// `POST /api/sessions/{id}/forward` → `{moved, url}`
pub async fn forward(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
) -> Result<Json<serde_json::Value>, ApiError> {
    history_tool(agent, state, session, 1).await
}

/// `POST /api/sessions/{id}/reload`
pub async fn reload(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
) -> Result<Json<Done>, ApiError> {
    let timeout = bound(&state, None)?;
    let session = begin(&state, &agent.0, &session, "tool.reload", json!({})).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        tabs.refs.clear();
        cdp::reload(&page, timeout).await
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(DONE))
}

/// `POST /api/sessions/{id}/pdf` → `{pdf_base64}`
pub async fn pdf(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
) -> Result<Json<serde_json::Value>, ApiError> {
    let timeout = bound(&state, None)?;
    let session = begin(&state, &agent.0, &session, "tool.pdf", json!({})).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session.page(&mut tabs).await?;
        cdp::pdf(&page, timeout).await
    }
    .await;
    let bytes = finish(&state, &session, res).await?;
    Ok(Json(
        json!({ "pdf_base64": base64::engine::general_purpose::STANDARD.encode(bytes) }),
    ))
}
