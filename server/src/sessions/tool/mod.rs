//! The one path every tool call takes, whoever asks (the HTTP API, MCP,
//! `run_task`, the live view and live links): bound → control →
//! risk gate (`gate.rs`) → audit → tab lock → CDP, with a crashed tab answered at once → a dead
//! browser fails the session → recording → result. Callers only parse their
//! input into a [`ToolCall`] and shape the [`ToolOutput`].
mod error;
mod exec;
mod gate;
pub use gate::CALLED_OFF;
pub mod input;
pub mod output;
mod pipeline;
mod totp;

use crate::cdp::{ImageFormat, WaitTarget, WaitUntil, snapshot};
use crate::domain::TargetUrl;

pub use error::ToolError;
pub use input::TargetSpec;
pub use output::ToolOutput;
pub(super) use totp::TypedCodeMark;

/// Where an element tool acts, checked for shape at the edge (the viewport
/// bound and refs are checked against the session when the call runs).
#[derive(Debug, Clone, PartialEq)]
pub enum ElementTarget {
    /// Viewport coordinates in CSS pixels.
    Point(f64, f64),
    /// A CSS selector (its first match).
    Selector(String),
    /// A ref from the last snapshot (`e12`).
    Ref(String),
}

/// An operator's raw input from the live view. Coordinates are the page's
/// CSS pixels; finite values outside the viewport are clamped onto its
/// edge, never forwarded as they are.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveInput {
    /// A mouse event.
    Mouse {
        /// Move, down or up.
        kind: crate::cdp::MouseKind,
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
        /// Which button changed.
        button: crate::cdp::Button,
        /// Buttons held (bit mask).
        buttons: i64,
        /// 1, 2 (double click), …
        click_count: i64,
        /// Modifier bits.
        modifiers: i64,
    },
    /// A wheel turn.
    Wheel {
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
        /// Horizontal delta.
        dx: f64,
        /// Vertical delta.
        dy: f64,
        /// Modifier bits.
        modifiers: i64,
    },
    /// A key down or up.
    Key {
        /// Down (true) or up.
        down: bool,
        /// `KeyboardEvent.key`.
        key: String,
        /// `KeyboardEvent.code`.
        code: String,
        /// Modifier bits.
        modifiers: i64,
    },
    /// Text inserted at the focus (IME, paste); audited as its length.
    Text(String),
    /// A new viewport size.
    Resize(super::Viewport),
}

/// One browser tool with its checked arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Tool {
    /// Load a URL and wait.
    Navigate {
        /// Where.
        url: TargetUrl,
        /// Until when.
        wait: WaitUntil,
    },
    /// Capture the viewport or the whole page.
    Screenshot {
        /// The whole page, not just the viewport.
        full_page: bool,
        /// PNG or JPEG.
        format: ImageFormat,
        /// JPEG quality 1–100.
        quality: Option<i64>,
    },
    /// Click an element or point.
    Click(ElementTarget),
    /// Move the mouse over an element or point.
    Hover(ElementTarget),
    /// Type text at the focus or into an element.
    Type {
        /// The text (audited as its length only).
        text: String,
        /// Focus this first.
        target: Option<ElementTarget>,
        /// Press Enter afterwards.
        submit: bool,
    },
    /// Type the current code of a TOTP seed from the vault into a field
    /// (operator-mode sessions whose grant has `totp`); the caller never
    /// sees the code.
    TypeTotp {
        /// The field (`None`: the focused element, for `run_task`).
        target: Option<ElementTarget>,
        /// Which of the domain's seeds (optional when it has one).
        label: Option<String>,
    },
    /// Press one key.
    Press {
        /// A `KeyboardEvent.key` name.
        key: String,
    },
    /// Wheel-scroll at an element or the viewport centre.
    Scroll {
        /// Horizontal pixels.
        dx: f64,
        /// Vertical pixels.
        dy: f64,
        /// Where to scroll.
        target: Option<ElementTarget>,
    },
    /// Choose options of a `<select>`.
    Select {
        /// The select element.
        target: ElementTarget,
        /// Values or visible texts.
        values: Vec<String>,
    },
    /// Wait for text or a selector.
    WaitFor(WaitTarget),
    /// The page's HTML.
    ReadDom {
        /// Cut to this many characters.
        max_chars: usize,
    },
    /// The accessibility snapshot with refs.
    Snapshot(snapshot::Limits),
    /// One step back in history.
    Back,
    /// One step forward in history.
    Forward,
    /// Reload the tab.
    Reload,
    /// Print to PDF.
    Pdf,
    /// List the tabs.
    TabsList,
    /// Open a tab (optionally at a URL) and make it active.
    TabOpen {
        /// Where.
        url: Option<TargetUrl>,
    },
    /// Make a tab active.
    TabFocus {
        /// Its id.
        tab: String,
    },
    /// Close a tab.
    TabClose {
        /// Its id.
        tab: String,
    },
    /// Set files on an `<input type=file>`, from bytes the caller sent.
    Upload {
        /// The file input (a selector or a ref).
        target: ElementTarget,
        /// The files, in order (their content is never audited or logged).
        files: Vec<crate::sessions::files::UploadFile>,
    },
    /// Answer the JavaScript dialog open in a tab (the active one unless
    /// named): OK (with a prompt's text) or Cancel.
    Dialog {
        /// OK (true) or Cancel.
        accept: bool,
        /// A prompt's answer (audited as its length only).
        text: Option<String>,
        /// The tab whose dialog it answers; `None`: the active tab.
        tab: Option<String>,
    },
    /// An operator's input from the live view.
    Input(LiveInput),
}

impl Tool {
    /// The audit action (`tool.navigate`, …).
    pub fn action(&self) -> &'static str {
        match self {
            Self::Navigate { .. } => "tool.navigate",
            Self::Screenshot { .. } => "tool.screenshot",
            Self::Click(_) => "tool.click",
            Self::Hover(_) => "tool.hover",
            Self::Type { .. } => "tool.type",
            Self::TypeTotp { .. } => "tool.type_totp",
            Self::Press { .. } => "tool.press",
            Self::Scroll { .. } => "tool.scroll",
            Self::Select { .. } => "tool.select",
            Self::WaitFor(_) => "tool.wait_for",
            Self::ReadDom { .. } => "tool.read_dom",
            Self::Snapshot(_) => "tool.snapshot",
            Self::Back => "tool.back",
            Self::Forward => "tool.forward",
            Self::Reload => "tool.reload",
            Self::Pdf => "tool.pdf",
            Self::TabsList => "tool.tabs.list",
            Self::TabOpen { .. } => "tool.tabs.open",
            Self::TabFocus { .. } => "tool.tabs.focus",
            Self::TabClose { .. } => "tool.tabs.close",
            Self::Upload { .. } => "tool.upload",
            Self::Dialog { .. } => "tool.dialog",
            Self::Input(LiveInput::Mouse { .. }) => "input.mouse",
            Self::Input(LiveInput::Wheel { .. }) => "input.wheel",
            Self::Input(LiveInput::Key { .. }) => "input.key",
            Self::Input(LiveInput::Text(_)) => "input.text",
            Self::Input(LiveInput::Resize(_)) => "input.resize",
        }
    }

    /// Whether the tool acts on the page or the tabs (everything but the
    /// reads): an agent's acting calls on one session run one at a time
    /// from the risk gate's check to the end of the action.
    pub fn acts(&self) -> bool {
        !matches!(
            self,
            Self::Screenshot { .. }
                | Self::ReadDom { .. }
                | Self::Snapshot(_)
                | Self::WaitFor(_)
                | Self::Pdf
                | Self::TabsList
        )
    }

    /// Whether the tool loads a new document in the active tab (which also
    /// brings a crashed tab back).
    fn navigates(&self) -> bool {
        matches!(
            self,
            Self::Navigate { .. } | Self::Back | Self::Forward | Self::Reload
        )
    }
}

/// A tool and its caller's time bound.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// What to do.
    pub tool: Tool,
    /// The caller's bound in ms (the server's `tool_timeout_s` caps it).
    pub timeout_ms: Option<u64>,
}

impl ToolCall {
    /// A call with the server's bound.
    pub fn new(tool: Tool) -> Self {
        Self {
            tool,
            timeout_ms: None,
        }
    }
}
