//! The actions a UI-TARS answer can ask for, and their canonical text.

use std::fmt;

/// A point in the model's image coordinates (see [`super::CoordinateMode`]):
/// finite and never negative when it comes from [`super::parse()`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Distance from the image's left edge.
    pub x: f64,
    /// Distance from the image's top edge.
    pub y: f64,
}

/// Which way a [`Action::Scroll`] moves the content into view: `Down` shows
/// what is below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrollDirection {
    /// `direction='up'`.
    Up,
    /// `direction='down'`.
    Down,
    /// `direction='left'`.
    Left,
    /// `direction='right'`.
    Right,
}

impl ScrollDirection {
    /// The grammar's word for the direction.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Left => "left",
            Self::Right => "right",
        }
    }

    /// Parses the grammar's word (case and surrounding spaces ignored).
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "up" => Some(Self::Up),
            "down" => Some(Self::Down),
            "left" => Some(Self::Left),
            "right" => Some(Self::Right),
            _ => None,
        }
    }
}

/// One action of the UI-TARS grammar, in the model's image coordinates.
///
/// [`fmt::Display`] renders the canonical text (`click(start_box='(x,y)')`),
/// which [`super::parse()`] reads back as the same action.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `click(…)` or `left_single(…)`: one left click.
    Click {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
    },
    /// `left_double(…)`: a left double click.
    DoubleClick {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
    },
    /// `right_single(…)`: one right click.
    RightClick {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
    },
    /// `drag(start_box=…, end_box=…)`: press at `from`, move to `to`, release.
    Drag {
        /// Where the button goes down.
        from: Point,
        /// Where it comes up.
        to: Point,
    },
    /// `hotkey(key='ctrl c')`: the keys pressed together, in order, lowercase
    /// (names as the model wrote them, e.g. `enter`, `arrowleft`; mapping
    /// them to DevTools key codes is the executor's job).
    Hotkey {
        /// At least one key, none empty or holding whitespace.
        keys: Vec<String>,
    },
    /// `type(content='…')`: text typed into the focused element.
    Type {
        /// The text, Python escapes resolved, without the final newline.
        content: String,
        /// The content ended with a newline: press Enter after typing.
        submit: bool,
    },
    /// `scroll(start_box=…, direction=…)`: scroll the element under the point.
    Scroll {
        /// Horizontal position.
        x: f64,
        /// Vertical position.
        y: f64,
        /// Which way.
        direction: ScrollDirection,
    },
    /// `wait()`: wait (the reference waits 5 s) and take a new screenshot.
    Wait,
    /// `finished(content='…')` or `finished()`: the task is done.
    Finished {
        /// The model's final answer or summary, empty when it gave none.
        content: String,
    },
    /// `call_user()`: the model needs a person (unsolvable task, a login, …).
    CallUser,
}

impl Action {
    /// The grammar's name of the action (the canonical one: `click`, not
    /// `left_single`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Click { .. } => "click",
            Self::DoubleClick { .. } => "left_double",
            Self::RightClick { .. } => "right_single",
            Self::Drag { .. } => "drag",
            Self::Hotkey { .. } => "hotkey",
            Self::Type { .. } => "type",
            Self::Scroll { .. } => "scroll",
            Self::Wait => "wait",
            Self::Finished { .. } => "finished",
            Self::CallUser => "call_user",
        }
    }
}

/// Writes `value` as a single-quoted Python string literal.
fn quoted(f: &mut fmt::Formatter<'_>, value: &str) -> fmt::Result {
    f.write_str("'")?;
    for c in value.chars() {
        match c {
            '\\' => f.write_str("\\\\")?,
            '\'' => f.write_str("\\'")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("'")
}

/// Writes `name='(x,y)'`. `f64`'s `Display` is the shortest text that reads
/// back as the same number and never uses an exponent.
fn point(f: &mut fmt::Formatter<'_>, name: &str, x: f64, y: f64) -> fmt::Result {
    write!(f, "{name}='({x},{y})'")
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())?;
        f.write_str("(")?;
        match self {
            Self::Click { x, y } | Self::DoubleClick { x, y } | Self::RightClick { x, y } => {
                point(f, "start_box", *x, *y)?;
            }
            Self::Drag { from, to } => {
                point(f, "start_box", from.x, from.y)?;
                f.write_str(", ")?;
                point(f, "end_box", to.x, to.y)?;
            }
            Self::Hotkey { keys } => {
                f.write_str("key=")?;
                quoted(f, &keys.join(" "))?;
            }
            Self::Type { content, submit } => {
                f.write_str("content=")?;
                if *submit {
                    quoted(f, &format!("{content}\n"))?;
                } else {
                    quoted(f, content)?;
                }
            }
            Self::Scroll { x, y, direction } => {
                point(f, "start_box", *x, *y)?;
                write!(f, ", direction='{}'", direction.as_str())?;
            }
            Self::Finished { content } if !content.is_empty() => {
                f.write_str("content=")?;
                quoted(f, content)?;
            }
            Self::Wait | Self::Finished { .. } | Self::CallUser => {}
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_render_in_the_canonical_grammar() {
        let cases = [
            (
                Action::Click { x: 100.0, y: 200.5 },
                "click(start_box='(100,200.5)')",
            ),
            (
                Action::Drag {
                    from: Point { x: 1.0, y: 2.0 },
                    to: Point { x: 3.0, y: 4.0 },
                },
                "drag(start_box='(1,2)', end_box='(3,4)')",
            ),
            (
                Action::Hotkey {
                    keys: vec!["ctrl".into(), "c".into()],
                },
                "hotkey(key='ctrl c')",
            ),
            (
                Action::Type {
                    content: "it's a \\ \"test\"".into(),
                    submit: true,
                },
                r#"type(content='it\'s a \\ "test"\n')"#,
            ),
            (
                Action::Scroll {
                    x: 5.0,
                    y: 6.0,
                    direction: ScrollDirection::Left,
                },
                "scroll(start_box='(5,6)', direction='left')",
            ),
            (Action::Wait, "wait()"),
            (
                Action::Finished {
                    content: String::new(),
                },
                "finished()",
            ),
            (
                Action::Finished {
                    content: "done".into(),
                },
                "finished(content='done')",
            ),
            (Action::CallUser, "call_user()"),
        ];
        for (action, text) in cases {
            assert_eq!(action.to_string(), text);
        }
    }
}
