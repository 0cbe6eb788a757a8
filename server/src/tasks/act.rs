//! Acting on the page: the model's action mapped from its image to the
//! page and run as browser tools through the one tool pipeline (waiting
//! while an operator drives), UI-TARS key names as `KeyboardEvent.key`,
//! and `StepError`, a tool call's failure as the trace shows it.

use std::time::Duration;

use super::runner::Runner;
use super::uitars::{Action, ImageSpace, ScrollDirection};
use crate::cdp::{Button, MouseKind};
use crate::sessions::tool::ElementTarget;
use crate::sessions::{LiveInput, Tool, ToolCall, ToolOutput};

/// How long `wait()` waits.
const WAIT: Duration = Duration::from_secs(2);

impl Runner {
    pub(super) async fn tool(&self, tool: Tool) -> Result<ToolOutput, StepError> {
        let sessions = &self.tasks.0.sessions;
        loop {
            // An action held for an operator runs nothing once the task
            // is aborted.
            let call = sessions.run_tool(
                &self.live,
                self.actor(),
                crate::audit::Surface::Task,
                ToolCall::new(tool.clone()),
            );
            match crate::sessions::tool::CALLED_OFF
                .scope(self.aborted.clone(), call)
                .await
            {
                // An operator drives: wait until they hand back.
                Err(crate::sessions::ToolError::OperatorHasControl(_)) => {
                    if !self.wait_for_operator().await {
                        return Err(StepError::from(crate::sessions::ToolError::Timeout(
                            "the session ended while an operator had control".into(),
                        )));
                    }
                }
                // The model neither sees nor answers dialogs: Cancel (an
                // alert's OK is the same), and the step's trace says so.
                Ok(ToolOutput::DialogOpened(d)) => {
                    self.cancel_dialog().await?;
                    *self.cancelled.lock().expect("cancelled lock") = Some(d.dialog_opened.kind);
                    return Ok(ToolOutput::DialogOpened(d));
                }
                other => return other.map_err(StepError::from),
            }
        }
    }

    /// Answers every tab's dialog with Cancel (a popup's stops the task's
    /// tab too: tabs of one site share a renderer), each through the
    /// pipeline (audited as the task's); one answered or closed meanwhile
    /// is fine.
    pub(super) async fn cancel_dialog(&self) -> Result<(), StepError> {
        for tab in self.live.dialog_tabs() {
            let cancel = Tool::Dialog {
                accept: false,
                text: None,
                tab: Some(tab),
            };
            match self
                .tasks
                .0
                .sessions
                .run_tool(
                    &self.live,
                    self.actor(),
                    crate::audit::Surface::Task,
                    ToolCall::new(cancel),
                )
                .await
            {
                Ok(_)
                | Err(
                    crate::sessions::ToolError::NoDialog
                    | crate::sessions::ToolError::TabNotFound(_),
                ) => {}
                Err(e) => return Err(StepError::from(e)),
            }
        }
        Ok(())
    }

    /// Runs one action as browser tools, mapped from the model's image to
    /// the page.
    pub(super) async fn execute(
        &self,
        action: &Action,
        space: &ImageSpace,
    ) -> Result<(), StepError> {
        let at = |x: f64, y: f64| {
            space.to_page(x, y).map_err(|e| {
                StepError::from(crate::sessions::ToolError::Invalid(format!(
                    "the model pointed outside the page: {e}"
                )))
            })
        };
        let mouse = |kind, x, y, button, buttons, clicks| {
            Tool::Input(LiveInput::Mouse {
                kind,
                x,
                y,
                button,
                buttons,
                click_count: clicks,
                modifiers: 0,
            })
        };
        match action {
            Action::Click { x, y } => {
                let (x, y) = at(*x, *y)?;
                self.tool(Tool::Click(ElementTarget::Point(x, y))).await?;
            }
            Action::DoubleClick { x, y } => {
                let (x, y) = at(*x, *y)?;
                for clicks in [1, 2] {
                    self.tool(mouse(MouseKind::Down, x, y, Button::Left, 1, clicks))
                        .await?;
                    self.tool(mouse(MouseKind::Up, x, y, Button::Left, 0, clicks))
                        .await?;
                }
            }
            Action::RightClick { x, y } => {
                let (x, y) = at(*x, *y)?;
                self.tool(mouse(MouseKind::Down, x, y, Button::Right, 2, 1))
                    .await?;
                self.tool(mouse(MouseKind::Up, x, y, Button::Right, 0, 1))
                    .await?;
            }
            Action::Drag { from, to } => {
                let (fx, fy) = at(from.x, from.y)?;
                let (tx, ty) = at(to.x, to.y)?;
                self.tool(mouse(MouseKind::Move, fx, fy, Button::None, 0, 0))
                    .await?;
                self.tool(mouse(MouseKind::Down, fx, fy, Button::Left, 1, 1))
                    .await?;
                for i in 1..=8 {
                    let t = f64::from(i) / 8.0;
                    self.tool(mouse(
                        MouseKind::Move,
                        fx + (tx - fx) * t,
                        fy + (ty - fy) * t,
                        Button::Left,
                        1,
                        0,
                    ))
                    .await?;
                }
                self.tool(mouse(MouseKind::Up, tx, ty, Button::Left, 0, 1))
                    .await?;
            }
            Action::Hotkey { keys } => {
                let names: Vec<String> = keys.iter().map(|k| key_name(k)).collect();
                let modifiers = names.iter().fold(0i64, |m, k| m | modifier_bit(k));
                for (i, k) in names.iter().enumerate() {
                    let held = names[..i].iter().fold(0i64, |m, k| m | modifier_bit(k));
                    self.tool(Tool::Input(LiveInput::Key {
                        down: true,
                        key: k.clone(),
                        code: String::new(),
                        modifiers: held,
                    }))
                    .await?;
                }
                for k in names.iter().rev() {
                    self.tool(Tool::Input(LiveInput::Key {
                        down: false,
                        key: k.clone(),
                        code: String::new(),
                        modifiers: modifiers & !modifier_bit(k),
                    }))
                    .await?;
                }
            }
            // `{{totp}}` / `{{totp:label}}`: Cordon types the code of the
            // vault's seed into the focused field; the model never sees it.
            Action::Type { content, submit } => {
                let tool = match super::prompt::totp_placeholder(content) {
                    Some(label) => Tool::TypeTotp {
                        target: None,
                        label,
                    },
                    None => Tool::Type {
                        text: content.clone(),
                        target: None,
                        submit: *submit,
                    },
                };
                let totp = matches!(tool, Tool::TypeTotp { .. });
                self.tool(tool).await?;
                if totp && *submit {
                    self.tool(Tool::Press {
                        key: "Enter".into(),
                    })
                    .await?;
                }
            }
            Action::Scroll { x, y, direction } => {
                let (x, y) = at(*x, *y)?;
                let (dx, dy) = match direction {
                    ScrollDirection::Up => (0.0, -400.0),
                    ScrollDirection::Down => (0.0, 400.0),
                    ScrollDirection::Left => (-400.0, 0.0),
                    ScrollDirection::Right => (400.0, 0.0),
                };
                self.tool(Tool::Scroll {
                    dx,
                    dy,
                    target: Some(ElementTarget::Point(x, y)),
                })
                .await?;
            }
            Action::Wait => tokio::time::sleep(WAIT).await,
            Action::Finished { .. } | Action::CallUser => {}
        }
        Ok(())
    }
}

/// A tool call's failure as the task's trace and result show it: the code
/// and the message the agent API answers the same failure with (an internal
/// cause hidden).
#[derive(Debug)]
pub(super) struct StepError {
    code: &'static str,
    message: String,
}

impl StepError {
    pub(super) fn internal(cause: anyhow::Error) -> Self {
        crate::sessions::ToolError::Internal(cause).into()
    }

    pub(super) fn code(&self) -> &'static str {
        self.code
    }
}

impl From<crate::sessions::ToolError> for StepError {
    fn from(e: crate::sessions::ToolError) -> Self {
        Self {
            code: e.code(),
            message: e.public_message(),
        }
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A UI-TARS key name as `KeyboardEvent.key`.
fn key_name(k: &str) -> String {
    match k {
        "ctrl" | "control" => "Control".into(),
        "shift" => "Shift".into(),
        "alt" | "option" => "Alt".into(),
        "cmd" | "command" | "meta" | "win" | "super" => "Meta".into(),
        "enter" | "return" => "Enter".into(),
        "tab" => "Tab".into(),
        "esc" | "escape" => "Escape".into(),
        "space" => " ".into(),
        "backspace" => "Backspace".into(),
        "delete" | "del" => "Delete".into(),
        "up" | "arrowup" => "ArrowUp".into(),
        "down" | "arrowdown" => "ArrowDown".into(),
        "left" | "arrowleft" => "ArrowLeft".into(),
        "right" | "arrowright" => "ArrowRight".into(),
        "home" => "Home".into(),
        "end" => "End".into(),
        "pageup" => "PageUp".into(),
        "pagedown" => "PageDown".into(),
        other if other.len() > 1 && other.starts_with('f') && other[1..].parse::<u8>().is_ok() => {
            other.to_uppercase()
        }
        other => other.to_owned(),
    }
}

/// CDP's modifier bit of a key (Alt 1, Ctrl 2, Meta 4, Shift 8), 0 for others.
fn modifier_bit(k: &str) -> i64 {
    match k {
        "Alt" => 1,
        "Control" => 2,
        "Meta" => 4,
        "Shift" => 8,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hotkey_names_become_keyboard_event_keys() {
        assert_eq!(key_name("ctrl"), "Control");
        assert_eq!(key_name("enter"), "Enter");
        assert_eq!(key_name("f5"), "F5");
        assert_eq!(key_name("c"), "c");
        assert_eq!(modifier_bit("Control") | modifier_bit("Shift"), 10);
    }
}
