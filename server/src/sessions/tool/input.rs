//! The tools' inputs as callers send them (JSON bodies of the HTTP API, and
//! the same types for MCP's schemas), each parsed once into a [`ToolCall`].
//! Shape and size are checked here, before anything is audited or run.

use serde::Deserialize;

use super::{ElementTarget, Tool, ToolCall, ToolError};
use crate::cdp::{ImageFormat, WaitTarget, WaitUntil, snapshot};
use crate::domain::pattern::{NOT_BLANK, URL_PATTERN};
use crate::domain::schema::one_group_of;
use crate::domain::{FileName, MAX_FILE_NAME, MAX_URL_LEN, TargetUrl, TargetUrlError};
use crate::sessions::files::UploadFile;

// Every limit below is checked by the parse functions and stated in the
// schema (schemars attributes naming the same constant), so the OpenAPI
// document and MCP's tool schemas say what is refused. Lengths count
// characters, as JSON Schema's `maxLength` does.

/// The longest selector accepted, in characters.
pub const MAX_SELECTOR: usize = 2048;
/// The longest text `type` accepts, in characters.
pub const MAX_TYPE_CHARS: usize = 64 * 1024;
/// The longest ref accepted, in characters.
pub const MAX_REF: usize = 16;
/// The longest text `wait_for` looks for, in characters.
pub const MAX_WAIT_TEXT: usize = 4096;
/// The most values one `select` chooses.
pub const MAX_SELECT_VALUES: usize = 100;
/// The longest value `select` accepts, in characters.
pub const MAX_SELECT_VALUE: usize = 1024;
/// The largest scroll in either direction, in pixels.
pub const MAX_SCROLL: f64 = 100_000.0;
/// The longest `timeout_ms` accepted (a day; `tool_timeout_s` caps it anyway).
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;
/// `read_dom`'s largest `max_chars`.
pub const MAX_DOM_CHARS: usize = 1_000_000;
/// `snapshot`'s deepest `max_depth`.
pub const MAX_SNAPSHOT_DEPTH: usize = 200;
/// `snapshot`'s largest `max_nodes`.
pub const MAX_SNAPSHOT_NODES: usize = 20_000;
/// The longest TOTP seed label, in characters.
pub const MAX_TOTP_LABEL: usize = 100;
/// A file name as [`FileName`] takes it: no `/`, `\` or control character
/// (`.` and `..` are refused apart). Its length limit is 255 bytes.
pub const FILE_NAME_PATTERN: &str = r"^[^/\\\x00-\x1f\x7f-\x9f]+$";

/// Standard base64 as the upload decoder takes it: padded, and the last
/// symbol carrying no stray bits.
pub const BASE64_PATTERN: &str =
    "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$";

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `{x, y}`, `selector` or `ref`: exactly one.
fn point_selector_or_ref(schema: &mut schemars::Schema) {
    one_group_of(
        schema,
        &[
            &[("x", "number"), ("y", "number")],
            &[("selector", "string")],
            &[("ref", "string")],
        ],
        false,
    );
}

/// `selector` or `ref`: exactly one.
fn selector_or_ref(schema: &mut schemars::Schema) {
    one_group_of(
        schema,
        &[&[("selector", "string")], &[("ref", "string")]],
        false,
    );
}

/// `selector` or `ref`: at most one.
fn selector_or_ref_or_none(schema: &mut schemars::Schema) {
    one_group_of(
        schema,
        &[&[("selector", "string")], &[("ref", "string")]],
        true,
    );
}

/// `text` or `selector`: exactly one.
fn text_or_selector(schema: &mut schemars::Schema) {
    one_group_of(
        schema,
        &[&[("text", "string")], &[("selector", "string")]],
        false,
    );
}

/// A file name is never `.` or `..`.
fn not_dot(schema: &mut schemars::Schema) {
    schema.insert("not".into(), serde_json::json!({ "enum": [".", ".."] }));
}

fn url_error(e: TargetUrlError) -> ToolError {
    match e {
        TargetUrlError::TooLong => ToolError::TooLarge(e.to_string()),
        other => ToolError::Invalid(other.to_string()),
    }
}

/// An agent's URL: a [`TargetUrl`] that also matches [`URL_PATTERN`] (what
/// the schema says).
pub fn agent_url(raw: &str) -> Result<TargetUrl, ToolError> {
    let url = TargetUrl::parse(raw).map_err(url_error)?;
    if !crate::domain::pattern::is_http_url(raw) {
        return Err(ToolError::Invalid(
            "url must be http(s)://host[:port][/path]: a host name or IPv4 address, no spaces or control characters".into(),
        ));
    }
    Ok(url)
}

/// Where an element tool acts: exactly one of a point, a selector or a ref.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct TargetSpec {
    /// Viewport x (with `y`).
    #[schemars(range(min = 0))]
    pub x: Option<f64>,
    /// Viewport y (with `x`).
    #[schemars(range(min = 0))]
    pub y: Option<f64>,
    /// CSS selector.
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Ref from the last snapshot (`e12`).
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
}

impl TargetSpec {
    /// The target, or `None` when nothing was given.
    pub fn parse(self) -> Result<Option<ElementTarget>, ToolError> {
        match (self.x, self.y, self.selector, self.r#ref) {
            (None, None, None, None) => Ok(None),
            (Some(x), Some(y), None, None) => {
                if !(x.is_finite() && y.is_finite() && x >= 0.0 && y >= 0.0) {
                    return Err(ToolError::Invalid(
                        "x and y must lie inside the viewport".into(),
                    ));
                }
                Ok(Some(ElementTarget::Point(x, y)))
            }
            (None, None, Some(sel), None) => {
                if sel.is_empty() || chars(&sel) > MAX_SELECTOR {
                    return Err(ToolError::Invalid(format!(
                        "selector must be 1 to {MAX_SELECTOR} characters"
                    )));
                }
                Ok(Some(ElementTarget::Selector(sel)))
            }
            (None, None, None, Some(r)) => {
                if r.is_empty() || chars(&r) > MAX_REF {
                    return Err(ToolError::Invalid(format!(
                        "ref must be 1 to {MAX_REF} characters, as a snapshot gave it (e12)"
                    )));
                }
                Ok(Some(ElementTarget::Ref(r)))
            }
            _ => Err(ToolError::Invalid(
                "give exactly one of {x, y}, selector or ref".into(),
            )),
        }
    }

    /// The target, which must be given.
    fn required(self, what: &str) -> Result<ElementTarget, ToolError> {
        self.parse()?
            .ok_or_else(|| ToolError::Invalid(format!("give {what}")))
    }

    fn selector_or_ref(selector: Option<String>, r#ref: Option<String>) -> Self {
        Self {
            selector,
            r#ref,
            ..Self::default()
        }
    }
}

/// Body of `navigate`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateReq {
    /// An http or https URL.
    #[schemars(length(min = 1, max = MAX_URL_LEN), pattern(URL_PATTERN))]
    pub url: String,
    /// When the navigation counts as done.
    #[serde(default)]
    pub wait: WaitUntil,
    /// Bound in ms (capped by the server's `tool_timeout_s`).
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl NavigateReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let url = agent_url(&self.url)?;
        Ok(ToolCall {
            tool: Tool::Navigate {
                url,
                wait: self.wait,
            },
            timeout_ms: self.timeout_ms,
        })
    }
}

/// Body of `screenshot`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotReq {
    /// The whole page, not only the viewport.
    #[serde(default)]
    pub full_page: bool,
    /// `png` (default) or `jpeg`.
    #[serde(default)]
    pub format: ImageFormat,
    /// JPEG quality, 1–100.
    #[schemars(range(min = 1, max = 100))]
    pub quality: Option<i64>,
}

impl ScreenshotReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        if self.quality.is_some_and(|q| !(1..=100).contains(&q)) {
            return Err(ToolError::Invalid(
                "quality must be between 1 and 100".into(),
            ));
        }
        Ok(ToolCall::new(Tool::Screenshot {
            full_page: self.full_page,
            format: self.format,
            quality: self.quality,
        }))
    }
}

/// Body of element tools (`click`, `hover`).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = point_selector_or_ref)]
pub struct ElementReq {
    /// Exactly one of {x, y}, selector or ref.
    #[serde(flatten)]
    pub target: TargetSpec,
    /// Bound in ms.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl ElementReq {
    /// A `click`.
    pub fn into_click(self) -> Result<ToolCall, ToolError> {
        self.into_call(Tool::Click)
    }

    /// A `hover`.
    pub fn into_hover(self) -> Result<ToolCall, ToolError> {
        self.into_call(Tool::Hover)
    }

    fn into_call(self, tool: fn(ElementTarget) -> Tool) -> Result<ToolCall, ToolError> {
        let target = self
            .target
            .required("exactly one of {x, y}, selector or ref")?;
        Ok(ToolCall {
            tool: tool(target),
            timeout_ms: self.timeout_ms,
        })
    }
}

/// The most files one `upload` call may set.
pub const MAX_UPLOAD_FILES: usize = 32;

/// One file of an `upload` body.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadFileReq {
    /// Its name as the page sees it: no path separators or control
    /// characters, not `.` or `..`, at most 255 bytes.
    #[schemars(length(min = 1, max = MAX_FILE_NAME), pattern(FILE_NAME_PATTERN), transform = not_dot)]
    pub name: String,
    /// Its content, standard base64 (never logged or audited).
    #[schemars(pattern(BASE64_PATTERN))]
    pub content_base64: String,
}

impl std::fmt::Debug for UploadFileReq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadFileReq")
            .field("name", &self.name)
            .field("content_base64", &self.content_base64.len())
            .finish()
    }
}

/// Body of `upload`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = selector_or_ref)]
pub struct UploadReq {
    /// The `<input type=file>` by CSS selector.
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Or by ref.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
    /// 1 to 32 files, in total at most `upload_max_mb`.
    #[schemars(length(min = 1, max = MAX_UPLOAD_FILES))]
    pub files: Vec<UploadFileReq>,
    /// Bound in ms.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl UploadReq {
    /// The call: names checked, contents decoded (the size cap is the
    /// server's, checked by the pipeline before anything is written).
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        use base64::Engine;
        if self.files.is_empty() || self.files.len() > MAX_UPLOAD_FILES {
            return Err(ToolError::Invalid(format!(
                "files must hold 1 to {MAX_UPLOAD_FILES} files"
            )));
        }
        let target = TargetSpec::selector_or_ref(self.selector, self.r#ref)
            .required("a selector or a ref")?;
        let mut files = Vec::with_capacity(self.files.len());
        for f in self.files {
            let name = FileName::parse(&f.name)
                .map_err(|e| ToolError::InvalidFileName(format!("files[].name: {e}")))?;
            if files.iter().any(|u: &UploadFile| u.name == name) {
                return Err(ToolError::InvalidFileName(format!(
                    "files[].name: {name:?} is given twice"
                )));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(f.content_base64.as_bytes())
                .map_err(|_| {
                    ToolError::Invalid(format!("files[].content_base64 of {name:?} is not base64"))
                })?;
            files.push(UploadFile::new(name, bytes));
        }
        Ok(ToolCall {
            tool: Tool::Upload { target, files },
            timeout_ms: self.timeout_ms,
        })
    }
}

/// Body of `type`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = selector_or_ref_or_none)]
pub struct TypeReq {
    /// The text (never logged; audited as its length).
    #[schemars(length(max = MAX_TYPE_CHARS))]
    pub text: String,
    /// Focus this element first.
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Or this ref.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
    /// Press Enter afterwards.
    #[serde(default)]
    pub submit: bool,
    /// Bound in ms.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl TypeReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        if self.text.chars().count() > MAX_TYPE_CHARS {
            return Err(ToolError::TooLarge(format!(
                "text is longer than {MAX_TYPE_CHARS} characters"
            )));
        }
        let target = TargetSpec::selector_or_ref(self.selector, self.r#ref).parse()?;
        Ok(ToolCall {
            tool: Tool::Type {
                text: self.text,
                target,
                submit: self.submit,
            },
            timeout_ms: self.timeout_ms,
        })
    }
}

/// Body of `type_totp`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = selector_or_ref)]
pub struct TypeTotpReq {
    /// The field (exactly one of `selector` and `ref`).
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Or this ref.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
    /// Which of the domain's seeds (needed when it has several; not blank).
    #[schemars(length(min = 1, max = MAX_TOTP_LABEL), pattern(NOT_BLANK))]
    pub label: Option<String>,
    /// Bound in ms (a code with under 3 s left is typed after the next
    /// period starts: allow for it).
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl TypeTotpReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let target = TargetSpec::selector_or_ref(self.selector, self.r#ref)
            .required("the field: a selector or a ref")?;
        let label = match self.label {
            Some(l) if !crate::domain::pattern::is_not_blank(&l) || chars(&l) > MAX_TOTP_LABEL => {
                return Err(ToolError::Invalid(format!(
                    "label must be 1 to {MAX_TOTP_LABEL} characters, not blank"
                )));
            }
            l => l,
        };
        Ok(ToolCall {
            tool: Tool::TypeTotp {
                target: Some(target),
                label,
            },
            timeout_ms: self.timeout_ms,
        })
    }
}

/// Body of `press`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PressReq {
    /// A `KeyboardEvent.key` name: `Enter`, `Tab`, `ArrowDown`, `a` …
    #[schemars(schema_with = "crate::cdp::key_schema")]
    pub key: String,
}

impl PressReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        if self.key.is_empty() || self.key.len() > 32 {
            return Err(ToolError::Invalid("key must be 1 to 32 bytes".into()));
        }
        if !crate::cdp::is_known_key(&self.key) {
            return Err(ToolError::UnknownKey(crate::cdp::unknown_key(&self.key)));
        }
        Ok(ToolCall::new(Tool::Press { key: self.key }))
    }
}

/// The longest answer `dialog` types into a prompt.
pub const MAX_PROMPT_CHARS: usize = 4096;

/// Body of `dialog`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DialogReq {
    /// OK (true) or Cancel (false). OK on a confirm or prompt is judged
    /// by the risk gate as a click on a button named by its message.
    pub accept: bool,
    /// A prompt's answer (ignored for other dialogs; never logged,
    /// audited as its length).
    #[schemars(length(max = MAX_PROMPT_CHARS))]
    pub text: Option<String>,
    /// The tab whose dialog to answer (a `tab_id` from `dialog_open`,
    /// `dialog_opened` or the tab list); the active tab when left out. A
    /// dialog in one tab stops the others of its site, so an agent may
    /// answer a popup's without focusing it.
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z0-9]+$"))]
    pub tab_id: Option<String>,
}

impl DialogReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        if self
            .text
            .as_ref()
            .is_some_and(|t| t.chars().count() > MAX_PROMPT_CHARS)
        {
            return Err(ToolError::TooLarge(format!(
                "text may hold at most {MAX_PROMPT_CHARS} characters"
            )));
        }
        Ok(ToolCall::new(Tool::Dialog {
            accept: self.accept,
            text: self.text,
            tab: self.tab_id.map(tab_id).transpose()?,
        }))
    }
}

/// Body of `scroll`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = selector_or_ref_or_none)]
pub struct ScrollReq {
    /// Horizontal pixels.
    #[serde(default)]
    #[schemars(range(min = -MAX_SCROLL, max = MAX_SCROLL))]
    pub dx: f64,
    /// Vertical pixels.
    #[serde(default)]
    #[schemars(range(min = -MAX_SCROLL, max = MAX_SCROLL))]
    pub dy: f64,
    /// Scroll at this element (else the viewport centre).
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Or this ref.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
}

impl ScrollReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let ok = |d: f64| d.is_finite() && d.abs() <= MAX_SCROLL;
        if !ok(self.dx) || !ok(self.dy) {
            return Err(ToolError::Invalid(format!(
                "dx and dy must be finite and at most {MAX_SCROLL} in size"
            )));
        }
        let target = TargetSpec::selector_or_ref(self.selector, self.r#ref).parse()?;
        Ok(ToolCall::new(Tool::Scroll {
            dx: self.dx,
            dy: self.dy,
            target,
        }))
    }
}

/// Body of `select`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = selector_or_ref)]
pub struct SelectReq {
    /// The `<select>` by CSS selector.
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Or by ref.
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = MAX_REF))]
    pub r#ref: Option<String>,
    /// Option values or visible texts.
    #[schemars(length(min = 1, max = MAX_SELECT_VALUES), inner(length(max = MAX_SELECT_VALUE)))]
    pub values: Vec<String>,
    /// Bound in ms.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl SelectReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        if self.values.is_empty()
            || self.values.len() > MAX_SELECT_VALUES
            || self.values.iter().any(|v| chars(v) > MAX_SELECT_VALUE)
        {
            return Err(ToolError::Invalid(format!(
                "values must hold 1 to {MAX_SELECT_VALUES} strings of at most {MAX_SELECT_VALUE} characters"
            )));
        }
        let target = TargetSpec::selector_or_ref(self.selector, self.r#ref)
            .required("a selector or a ref")?;
        Ok(ToolCall {
            tool: Tool::Select {
                target,
                values: self.values,
            },
            timeout_ms: self.timeout_ms,
        })
    }
}

/// Body of `wait_for`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = text_or_selector)]
pub struct WaitForReq {
    /// Text anywhere in the page.
    #[schemars(length(min = 1, max = MAX_WAIT_TEXT))]
    pub text: Option<String>,
    /// Or an element matching this selector.
    #[schemars(length(min = 1, max = MAX_SELECTOR))]
    pub selector: Option<String>,
    /// Bound in ms (default 5000).
    #[schemars(range(min = 1, max = MAX_TIMEOUT_MS))]
    pub timeout_ms: Option<u64>,
}

impl WaitForReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let target = match (self.text, self.selector) {
            (Some(t), None) if !t.is_empty() && chars(&t) <= MAX_WAIT_TEXT => WaitTarget::Text(t),
            (None, Some(s)) if !s.is_empty() && chars(&s) <= MAX_SELECTOR => {
                WaitTarget::Selector(s)
            }
            _ => {
                return Err(ToolError::Invalid(format!(
                    "give exactly one of text (1–{MAX_WAIT_TEXT} characters) or selector (1–{MAX_SELECTOR})"
                )));
            }
        };
        Ok(ToolCall {
            tool: Tool::WaitFor(target),
            timeout_ms: Some(self.timeout_ms.unwrap_or(5000)),
        })
    }
}

/// Body of `read_dom`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDomReq {
    /// Cut the HTML to this many characters (1–1000000, default 20000).
    #[schemars(range(min = 1, max = MAX_DOM_CHARS))]
    pub max_chars: Option<usize>,
}

impl ReadDomReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let max_chars = self.max_chars.unwrap_or(20_000);
        if !(1..=MAX_DOM_CHARS).contains(&max_chars) {
            return Err(ToolError::Invalid(format!(
                "max_chars must be between 1 and {MAX_DOM_CHARS}"
            )));
        }
        Ok(ToolCall::new(Tool::ReadDom { max_chars }))
    }
}

/// Body of `snapshot`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotReq {
    /// Deepest level kept (1–200, default 40).
    #[schemars(range(min = 1, max = MAX_SNAPSHOT_DEPTH))]
    pub max_depth: Option<usize>,
    /// Most nodes kept (1–20000, default 1500).
    #[schemars(range(min = 1, max = MAX_SNAPSHOT_NODES))]
    pub max_nodes: Option<usize>,
}

impl SnapshotReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let limits = snapshot::Limits {
            max_depth: self.max_depth.unwrap_or(40),
            max_nodes: self.max_nodes.unwrap_or(1500),
        };
        if !(1..=MAX_SNAPSHOT_DEPTH).contains(&limits.max_depth)
            || !(1..=MAX_SNAPSHOT_NODES).contains(&limits.max_nodes)
        {
            return Err(ToolError::Invalid(format!(
                "max_depth must be 1–{MAX_SNAPSHOT_DEPTH} and max_nodes 1–{MAX_SNAPSHOT_NODES}"
            )));
        }
        Ok(ToolCall::new(Tool::Snapshot(limits)))
    }
}

/// Body of opening a tab.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenTabReq {
    /// Load this http(s) URL in it.
    #[schemars(length(min = 1, max = MAX_URL_LEN), pattern(URL_PATTERN))]
    pub url: Option<String>,
}

impl OpenTabReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let url = self.url.as_deref().map(agent_url).transpose()?;
        Ok(ToolCall::new(Tool::TabOpen { url }))
    }
}

/// What `tabs` does (the MCP tool's `action`; the HTTP API has a route each).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TabAction {
    /// List the tabs.
    #[default]
    List,
    /// Open a tab (at `url` if given) and make it active.
    Open,
    /// Make the tab `tab_id` active.
    Focus,
    /// Close the tab `tab_id` (not the last).
    Close,
}

/// The tab tools in one input: the MCP tool `browser_tabs`, parsed into the
/// same calls as `GET/POST /api/sessions/{id}/tabs` and `…/tabs/{tab}…`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsReq {
    /// `list` (default), `open`, `focus` or `close`.
    #[serde(default)]
    pub action: TabAction,
    /// The tab to focus or close (from a list).
    pub tab_id: Option<String>,
    /// For `open`: load this http(s) URL in the new tab.
    pub url: Option<String>,
}

impl TabsReq {
    /// The call.
    pub fn into_call(self) -> Result<ToolCall, ToolError> {
        let needs_tab = matches!(self.action, TabAction::Focus | TabAction::Close);
        if self.url.is_some() && self.action != TabAction::Open {
            return Err(ToolError::Invalid("url is only for action open".into()));
        }
        if self.tab_id.is_some() != needs_tab {
            return Err(ToolError::Invalid(
                "tab_id is needed for focus and close, and only for them".into(),
            ));
        }
        let tab = || tab_id(self.tab_id.clone().unwrap_or_default());
        match self.action {
            TabAction::List => Ok(ToolCall::new(Tool::TabsList)),
            TabAction::Open => OpenTabReq { url: self.url }.into_call(),
            TabAction::Focus => Ok(ToolCall::new(Tool::TabFocus { tab: tab()? })),
            TabAction::Close => Ok(ToolCall::new(Tool::TabClose { tab: tab()? })),
        }
    }
}

/// A tab id from a path.
pub fn tab_id(raw: String) -> Result<String, ToolError> {
    if raw.is_empty() || raw.len() > 64 || !raw.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(ToolError::TabNotFound("no such tab".into()));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base64_pattern_admits_exactly_what_the_upload_decodes() {
        use base64::Engine;
        let pattern = regex::Regex::new(BASE64_PATTERN).unwrap();
        let alphabet = b"AQgw+/=9z";
        // Every string of up to 4 symbols from a small alphabet, and a few longer.
        let mut cases: Vec<String> = vec![
            String::new(),
            "aGVsbG8=".into(),
            "aGVsbA==".into(),
            "aGVsbB==".into(),
        ];
        for n in 1..=4u32 {
            for i in 0..alphabet.len().pow(n) {
                let mut k = i;
                let s: String = (0..n)
                    .map(|_| {
                        let c = alphabet[k % alphabet.len()] as char;
                        k /= alphabet.len();
                        c
                    })
                    .collect();
                cases.push(s);
            }
        }
        for c in cases {
            let decodes = base64::engine::general_purpose::STANDARD.decode(&c).is_ok();
            assert_eq!(pattern.is_match(&c), decodes, "{c:?}");
        }
    }

    fn upload(files: serde_json::Value) -> Result<ToolCall, ToolError> {
        serde_json::from_value::<UploadReq>(serde_json::json!({ "selector": "#f", "files": files }))
            .unwrap()
            .into_call()
    }

    #[test]
    fn an_upload_checks_names_and_base64_and_hashes_the_content() {
        let call =
            upload(serde_json::json!([{ "name": "a.txt", "content_base64": "aGVsbG8=" }])).unwrap();
        let Tool::Upload { files, target } = call.tool else {
            panic!("not an upload");
        };
        assert_eq!(target, ElementTarget::Selector("#f".into()));
        assert_eq!(&*files[0].bytes, b"hello");
        assert_eq!(
            files[0].sha256,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        // The content never shows in Debug (logs) or the audit's params.
        assert!(!format!("{files:?}").contains("hello"));
        for (bad, kind) in [
            (
                serde_json::json!([{ "name": "../x", "content_base64": "" }]),
                "name",
            ),
            (
                serde_json::json!([{ "name": "a\nb", "content_base64": "" }]),
                "name",
            ),
            (
                serde_json::json!([{ "name": "", "content_base64": "" }]),
                "name",
            ),
            (
                serde_json::json!([{ "name": "a", "content_base64": "" }, { "name": "a", "content_base64": "" }]),
                "name",
            ),
            (
                serde_json::json!([{ "name": "a", "content_base64": "!!" }]),
                "base64",
            ),
            (serde_json::json!([]), "count"),
        ] {
            let err = upload(bad.clone()).unwrap_err();
            match kind {
                "name" => assert!(
                    matches!(err, ToolError::InvalidFileName(_)),
                    "{bad}: {err:?}"
                ),
                _ => assert!(matches!(err, ToolError::Invalid(_)), "{bad}: {err:?}"),
            }
        }
    }

    #[test]
    fn a_target_is_exactly_one_of_point_selector_or_ref() {
        let both = TargetSpec {
            x: Some(1.0),
            y: Some(1.0),
            selector: Some("a".into()),
            r#ref: None,
        };
        assert!(matches!(both.parse(), Err(ToolError::Invalid(_))));
        let half = TargetSpec {
            x: Some(1.0),
            ..TargetSpec::default()
        };
        assert!(matches!(half.parse(), Err(ToolError::Invalid(_))));
        let nan = TargetSpec {
            x: Some(f64::NAN),
            y: Some(1.0),
            ..TargetSpec::default()
        };
        assert!(matches!(nan.parse(), Err(ToolError::Invalid(_))));
        assert_eq!(TargetSpec::default().parse().unwrap(), None);
        let r = TargetSpec::selector_or_ref(None, Some("e3".into()));
        assert_eq!(r.parse().unwrap(), Some(ElementTarget::Ref("e3".into())));
    }

    #[test]
    fn an_unknown_key_is_refused_before_anything_runs() {
        let err = PressReq {
            key: "NotAKey".into(),
        }
        .into_call()
        .unwrap_err();
        assert!(matches!(err, ToolError::UnknownKey(_)), "{err:?}");
        assert!(
            PressReq {
                key: "Enter".into()
            }
            .into_call()
            .is_ok()
        );
    }

    #[test]
    fn over_long_text_is_too_large_not_invalid() {
        let err = TypeReq {
            text: "x".repeat(MAX_TYPE_CHARS + 1),
            selector: None,
            r#ref: None,
            submit: false,
            timeout_ms: None,
        }
        .into_call()
        .unwrap_err();
        assert!(matches!(err, ToolError::TooLarge(_)), "{err:?}");
    }

    #[test]
    fn the_tabs_input_names_what_each_action_needs() {
        let focus = TabsReq {
            action: TabAction::Focus,
            tab_id: Some("ABC123".into()),
            url: None,
        };
        assert_eq!(
            focus.into_call().unwrap().tool,
            Tool::TabFocus {
                tab: "ABC123".into()
            }
        );
        assert_eq!(TabsReq::default().into_call().unwrap().tool, Tool::TabsList);
        let no_tab = TabsReq {
            action: TabAction::Close,
            ..TabsReq::default()
        };
        assert!(matches!(no_tab.into_call(), Err(ToolError::Invalid(_))));
        let stray_url = TabsReq {
            url: Some("http://example.com/".into()),
            ..TabsReq::default()
        };
        assert!(matches!(stray_url.into_call(), Err(ToolError::Invalid(_))));
    }

    #[test]
    fn tab_ids_are_plain_hex_like_tokens() {
        assert!(tab_id("ABCDEF0123".into()).is_ok());
        assert!(matches!(
            tab_id("../x".into()),
            Err(ToolError::TabNotFound(_))
        ));
        assert!(tab_id(String::new()).is_err());
    }
}
