//! The one path every tool call takes, whoever asks (the HTTP API, MCP,
//! `run_task`, the live view and live links): bound → control →
//! risk gate (`gate.rs`) → audit → tab lock → CDP, with a crashed tab answered at once → a dead
//! browser fails the session → recording → result. Callers only parse their
//! input into a [`ToolCall`] and shape the [`ToolOutput`].

mod exec;
mod gate;
pub mod input;
pub mod output;
mod totp;

use std::sync::Arc;
use std::time::Duration;

use crate::audit::{Actor, NewEvent};
use crate::cdp::{CdpError, ImageFormat, WaitTarget, WaitUntil, snapshot};
use crate::domain::TargetUrl;
use crate::recording::RecordError;

use super::{LiveSession, SessionError, SessionManager};

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
            Self::Input(LiveInput::Mouse { .. }) => "input.mouse",
            Self::Input(LiveInput::Wheel { .. }) => "input.wheel",
            Self::Input(LiveInput::Key { .. }) => "input.key",
            Self::Input(LiveInput::Text(_)) => "input.text",
            Self::Input(LiveInput::Resize(_)) => "input.resize",
        }
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

/// Time a call may take past its bound for the steps around the bounded
/// one (reading the title, resetting a tab) before it is cut off.
const OVERRUN: Duration = Duration::from_secs(5);

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

/// What a tool call can fail with; each variant is one cause with one
/// status and code at the API (`error.rs`).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Malformed or out-of-range input.
    #[error("{0}")]
    Invalid(String),
    /// A field is too large.
    #[error("{0}")]
    TooLarge(String),
    /// A CSS selector the browser cannot parse.
    #[error("{0}")]
    InvalidSelector(String),
    /// A key `press` cannot send.
    #[error("{0}")]
    UnknownKey(String),
    /// No element matches (selector, ref, point).
    #[error("{0}")]
    ElementNotFound(String),
    /// No tab has this id.
    #[error("{0}")]
    TabNotFound(String),
    /// The last tab cannot be closed.
    #[error("cannot close the last tab; close the session instead")]
    LastTab,
    /// The page refused or failed the action (navigation error, no option matches).
    #[error("{0}")]
    ActionFailed(String),
    /// The active tab's renderer crashed; the session is still open.
    #[error(
        "the tab's renderer crashed; the session is still open: navigate again or open a new tab"
    )]
    TabCrashed,
    /// The navigation turned into a download, which is refused.
    #[error("the URL is a download, and downloads are refused")]
    DownloadRefused,
    /// A file name with a path separator, a control character, or out of
    /// range.
    #[error("{0}")]
    InvalidFileName(String),
    /// The target of an `upload` is not an `<input type=file>`.
    #[error("{0}")]
    NotAFileInput(String),
    /// Audit recording is full for the tenant: the screenshot is not kept.
    #[error("{0}")]
    RecordingQuotaFull(String),
    /// The call ran out of time.
    #[error("{0}")]
    Timeout(String),
    /// The browser is gone; the session is now failed.
    #[error("the browser exited unexpectedly; the session is now failed")]
    BrowserFailed,
    /// Another protocol error from the browser.
    #[error("{0}")]
    Protocol(String),
    /// The session cannot be used (ended meanwhile).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The session's grant did not ask for TOTP codes (`totp: true`).
    #[error("{0}")]
    TotpNotGranted(String),
    /// An operator drives the session from the live view; agent calls wait
    /// until they hand control back.
    #[error("operator {0} has taken control of this session; retry after they hand it back")]
    OperatorHasControl(String),
    /// The risk gate refuses this outright (typing into a password field).
    #[error("{0}")]
    DeniedByPolicy(String),
    /// An operator denied the action in the dashboard.
    #[error("{0}")]
    DeniedByOperator(String),
    /// No operator decided within the approval timeout; the action did not run.
    #[error("{0}")]
    ApprovalTimedOut(String),
    /// A bug or an outage (the audit row could not be written).
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
    /// The risk gate stopped a click at its target (read in the click's
    /// own lookup) to wait for an operator. Internal: `run_tool` handles it
    /// and never returns it.
    #[error("the action waits for an operator's decision")]
    Held(Box<gate::Held>),
}

impl ToolError {
    /// The machine-readable code (`element_not_found`, `denied_by_policy` …).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "bad_request",
            Self::TooLarge(_) => "payload_too_large",
            Self::InvalidSelector(_) => "invalid_selector",
            Self::UnknownKey(_) => "unknown_key",
            Self::ElementNotFound(_) => "element_not_found",
            Self::TabNotFound(_) => "tab_not_found",
            Self::LastTab => "last_tab",
            Self::DeniedByPolicy(_) => "denied_by_policy",
            Self::TotpNotGranted(_) => "totp_not_granted",
            Self::DeniedByOperator(_) => "denied_by_operator",
            Self::ApprovalTimedOut(_) => "approval_timed_out",
            // Handled inside `run_tool`; reaching a caller is a bug.
            Self::Held(_) => "internal",
            Self::OperatorHasControl(_) => "operator_has_control",
            Self::ActionFailed(_) => "action_failed",
            Self::TabCrashed => "tab_crashed",
            Self::DownloadRefused => "download_refused",
            Self::InvalidFileName(_) => "invalid_file_name",
            Self::NotAFileInput(_) => "not_a_file_input",
            Self::RecordingQuotaFull(_) => "recording_quota_full",
            Self::Timeout(_) => "timeout",
            Self::BrowserFailed => "browser_failed",
            Self::Protocol(_) => "browser_error",
            Self::Session(s) => s.code(),
            Self::Internal(_) => "internal",
        }
    }

    /// The message a caller may see.
    pub fn public_message(&self) -> String {
        match self {
            Self::Held(_) | Self::Internal(_) => super::codes::INTERNAL.into(),
            Self::Session(s) => s.public_message(),
            other => other.to_string(),
        }
    }
}

impl From<CdpError> for ToolError {
    fn from(e: CdpError) -> Self {
        match e {
            CdpError::Timeout(what, ms) => {
                Self::Timeout(format!("{what} did not finish within {ms} ms"))
            }
            CdpError::NotFound(m) => Self::ElementNotFound(m),
            CdpError::InvalidSelector(m) => Self::InvalidSelector(m),
            CdpError::UnknownKey(m) => Self::UnknownKey(m),
            CdpError::TabNotFound(m) => Self::TabNotFound(m),
            CdpError::TabCrashed => Self::TabCrashed,
            CdpError::DownloadRefused => Self::DownloadRefused,
            CdpError::NotAFileInput(m) => Self::NotAFileInput(m),
            CdpError::Failed(m) => Self::ActionFailed(m),
            CdpError::BrowserGone => Self::BrowserFailed,
            CdpError::Protocol(m) => Self::Protocol(m),
        }
    }
}

impl SessionManager {
    /// Runs one tool call on `session` as `actor`: the only way a tool
    /// reaches a browser. The audit row is written before anything is sent
    /// to the browser; tool calls on one session run one at a time.
    #[tracing::instrument(skip_all, fields(session.id = %session.id, tool = call.tool.action()))]
    pub async fn run_tool(
        &self,
        session: &Arc<LiveSession>,
        actor: Actor,
        via: crate::audit::Surface,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        // A refresh session is its operator's alone, whatever path an
        // agent's call took to get here.
        if session.mode == super::CredentialMode::Refresh && !matches!(actor, Actor::Operator(_)) {
            return Err(ToolError::Session(SessionError::NotFound));
        }
        let timeout = self.bound(call.timeout_ms)?;
        let tool = call.tool;
        // Over the cap, nothing is audited as requested or written.
        if let Tool::Upload { files, .. } = &tool {
            let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
            let max = self.0.cfg.upload_max_bytes;
            if total > max {
                return Err(ToolError::TooLarge(format!(
                    "the files hold {total} bytes; an upload may hold at most {max} (upload_max_mb)"
                )));
            }
        }
        let mut params = exec::audit_params(&tool);
        params["via"] = serde_json::json!(via.as_str());
        let event = NewEvent::new(actor.clone(), tool.action())
            .tenant(&session.tenant)
            .session(session.id.as_str())
            .params(params);
        // Whoever does not hold control while an operator does is refused,
        // and the refusal is audited.
        if let Some(holder) = session.control()
            && !matches!(&actor, Actor::Operator(id) if *id == holder.operator_id)
        {
            self.0
                .store
                .audit_append(event.outcome("refused: operator_has_control"))
                .await?;
            return Err(ToolError::OperatorHasControl(holder.name));
        }
        // The risk gate: may wait for an operator's decision, which is not
        // part of the call's own bound. A click is checked at its target,
        // inside the click (below).
        let mut check_click =
            self.gate(session, &actor, &tool, &event, timeout).await? == gate::Gate::AtClick;
        // Pointer moves are audited one a second at most; every other
        // input is.
        let sampled_out = matches!(
            tool,
            Tool::Input(LiveInput::Mouse {
                kind: crate::cdp::MouseKind::Move,
                ..
            })
        ) && !session.sample_move();
        if !sampled_out {
            self.0
                .store
                .audit_append(event.clone().outcome("requested"))
                .await?;
        }
        let refusals = session.refusals.mark();
        // The whole call, waiting for the tab lock included, is bounded: a
        // step without a bound of its own (a title read on a page whose
        // script never yields, say) cannot hold the session past it.
        let budget = timeout + OVERRUN;
        let mut approved = None;
        let res = loop {
            session.touch();
            let check = check_click.then(|| self.click_check(session, &tool, approved.as_ref()));
            let res = match tokio::time::timeout(budget, async {
                let mut tabs = session.tabs.lock().await;
                match &tool {
                    Tool::TypeTotp { target, label } => {
                        self.type_totp(
                            session,
                            &mut tabs,
                            target.as_ref(),
                            label.as_deref(),
                            timeout,
                        )
                        .await
                    }
                    _ => exec::run(session, &mut tabs, &tool, timeout, check.as_ref()).await,
                }
            })
            .await
            {
                Ok(res) => res,
                Err(_) => Err(ToolError::Timeout(format!(
                    "{} did not finish within {} ms",
                    tool.action(),
                    budget.as_millis()
                ))),
            };
            drop(check);
            match res {
                // Held at the target: the decision, then the click again,
                // looked up and judged anew: if the page changed what is
                // under the pointer while the approval waited, it waits
                // again (a dry run only records, and clicks).
                Err(ToolError::Held(held)) => {
                    approved = self.hold(session, &actor, &tool, &event, *held).await?;
                    check_click = approved.is_some();
                }
                res => break res,
            }
        };
        session.touch();
        let out = match res {
            Ok(out) => out,
            Err(e) => return Err(self.map_failure(session, e).await),
        };
        let out = match out {
            ToolOutput::Navigated(mut nav) => {
                nav.note_refusals(session.refusals.since(refusals));
                if let Some(failure) = nav.failure.take()
                    && nav.egress_refused.is_none()
                {
                    return Err(ToolError::ActionFailed(failure));
                }
                ToolOutput::Navigated(nav)
            }
            ToolOutput::Screenshot(mut shot) => {
                let seq = session.next_screenshot_seq();
                let saved = self
                    .recorder()
                    .save(
                        session.record,
                        session.tenant.as_str(),
                        session.id.as_str(),
                        seq,
                        shot.format.extension(),
                        &shot.bytes,
                    )
                    .await;
                shot.persisted_path = match saved {
                    Ok(path) => path.map(|p| p.display().to_string()),
                    Err(RecordError::QuotaFull { used_mb, quota_mb }) => {
                        self.0
                            .store
                            .audit_append(
                                NewEvent::new(Actor::System, "recording.refused")
                                    .tenant(&session.tenant)
                                    .session(session.id.as_str())
                                    .params(serde_json::json!({
                                        "used_mb": used_mb,
                                        "quota_mb": quota_mb,
                                    }))
                                    .outcome("quota_full"),
                            )
                            .await?;
                        return Err(ToolError::RecordingQuotaFull(
                            RecordError::QuotaFull { used_mb, quota_mb }.to_string(),
                        ));
                    }
                    Err(RecordError::Io(e)) => return Err(ToolError::Internal(e)),
                };
                ToolOutput::Screenshot(shot)
            }
            other => other,
        };
        Ok(out)
    }

    /// A tool call's bound: the caller's `timeout_ms` or the server's, whichever is smaller.
    fn bound(&self, timeout_ms: Option<u64>) -> Result<Duration, ToolError> {
        let max = self.tool_timeout();
        match timeout_ms {
            None => Ok(max),
            Some(ms) if ms == 0 || ms > input::MAX_TIMEOUT_MS => Err(ToolError::Invalid(format!(
                "timeout_ms must be between 1 and {}",
                input::MAX_TIMEOUT_MS
            ))),
            Some(ms) => Ok(Duration::from_millis(ms).min(max)),
        }
    }

    /// A dead browser fails the session, whatever the call reported.
    async fn map_failure(&self, session: &LiveSession, e: ToolError) -> ToolError {
        // A page that ran into its limits crashed its tab (or the browser):
        // the session ends now, and the agent hears why.
        if let Some(limits) = &session.sandbox.limits
            && let Some(breach) = limits.breach()
        {
            let why = breach.describe(&limits.limits());
            tracing::warn!(reason = %why, "tool failed: a resource limit was hit");
            self.fail(&session.id, crate::domain::CloseReason::ResourceLimit, &why)
                .await;
            return ToolError::Session(SessionError::Gone {
                state: crate::domain::SessionState::Failed,
                reason: Some(crate::domain::CloseReason::ResourceLimit),
            });
        }
        if matches!(e, ToolError::BrowserFailed) || session.browser_gone() {
            tracing::warn!(error = %e, "tool failed: the browser is gone");
            self.fail(
                &session.id,
                crate::domain::CloseReason::BrowserExited,
                "the browser exited unexpectedly",
            )
            .await;
            return ToolError::BrowserFailed;
        }
        e
    }
}
