//! Reading a model's answer: the `Thought:` and `Action:` sections, the call
//! syntax, Python string literals and the point spellings. A hand-written
//! scanner, linear in the answer's length; no regular expressions.

use super::action::{Action, Point, ScrollDirection};

/// The largest answer [`parse`] reads. A UI-TARS step is a few hundred bytes;
/// anything this big is refused before any other work.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// How many characters of the answer an error message quotes at most.
const EXCERPT_CHARS: usize = 80;

/// The longest number a point may hold (digits and one dot).
const MAX_NUMBER_LEN: usize = 32;

/// One step of the model: what it thought and the one action it chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The `Thought:` section (or `Action_Summary:`, which some checkpoints
    /// write after a `Reflection:`), trimmed; `None` when absent or empty.
    pub thought: Option<String>,
    /// The action, in the model's image coordinates.
    pub action: Action,
}

/// Why an answer is not a step. Messages quote at most 80 characters of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Longer than [`MAX_ANSWER_BYTES`].
    #[error("the answer is {len} bytes, more than {MAX_ANSWER_BYTES}")]
    TooLong {
        /// The answer's length in bytes.
        len: usize,
    },
    /// Nothing but whitespace.
    #[error("the answer is empty")]
    Empty,
    /// No line starts with `Action:`.
    #[error("the answer has no `Action:` line: {excerpt:?}")]
    NoAction {
        /// The answer's beginning.
        excerpt: String,
    },
    /// A second action follows the first (Cordon runs one action a step, see
    /// [`parse`]).
    #[error("the answer holds more than one action: {excerpt:?}")]
    MultipleActions {
        /// The text from the second action on.
        excerpt: String,
    },
    /// A call of a function the grammar does not have.
    #[error("unknown action {name:?}")]
    UnknownAction {
        /// The name, cut to 80 characters.
        name: String,
    },
    /// The action is not of the shape `name(arg='…', …)`.
    #[error("the action is not a call `name(arg='…', …)`: {excerpt:?}")]
    BadSyntax {
        /// The text from where it went wrong.
        excerpt: String,
    },
    /// A quoted argument never ends.
    #[error("a quoted argument is never closed: {excerpt:?}")]
    UnbalancedQuotes {
        /// The text from the opening quote.
        excerpt: String,
    },
    /// Arguments missing, repeated, unexpected or with a bad value.
    #[error("bad arguments for {action}: {reason}")]
    BadArguments {
        /// The action's name as written.
        action: String,
        /// What is wrong (argument names only, never values).
        reason: String,
    },
    /// A point or box that is not 2 or 4 finite, non-negative numbers.
    #[error("bad point {excerpt:?}: {reason}")]
    BadPoint {
        /// The argument's value.
        excerpt: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Something other than a second action follows the action.
    #[error("unexpected text after the action: {excerpt:?}")]
    TrailingText {
        /// The text after the action.
        excerpt: String,
    },
}

impl ParseError {
    /// A stable machine-readable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLong { .. } => "too_long",
            Self::Empty => "empty",
            Self::NoAction { .. } => "no_action",
            Self::MultipleActions { .. } => "multiple_actions",
            Self::UnknownAction { .. } => "unknown_action",
            Self::BadSyntax { .. } => "bad_syntax",
            Self::UnbalancedQuotes { .. } => "unbalanced_quotes",
            Self::BadArguments { .. } => "bad_arguments",
            Self::BadPoint { .. } => "bad_point",
            Self::TrailingText { .. } => "trailing_text",
        }
    }
}

/// At most [`EXCERPT_CHARS`] characters of `text`, with `…` when cut.
fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Parses one model answer into a [`Step`].
///
/// The answer is `Thought: …` (optional; `Reflection: …` and
/// `Action_Summary: …` are accepted too, the summary then being the thought)
/// followed by a line starting with `Action:` and one call of the grammar.
/// A Markdown code fence around the whole answer and a final `[EOS]` are
/// ignored.
///
/// **One action a step.** The reference parser also accepts several actions
/// separated by blank lines; Cordon refuses them
/// ([`ParseError::MultipleActions`]): each action must be checked by the
/// risk gate against the screen it was chosen on, and after the first one
/// runs that screen is gone. The caller can ask the model again.
pub fn parse(answer: &str) -> Result<Step, ParseError> {
    if answer.len() > MAX_ANSWER_BYTES {
        return Err(ParseError::TooLong { len: answer.len() });
    }
    let text = strip_fence(answer.trim());
    if text.is_empty() {
        return Err(ParseError::Empty);
    }
    let Some((head, call)) = split_action(text) else {
        return Err(ParseError::NoAction {
            excerpt: excerpt(text),
        });
    };
    let (action, rest) = parse_call(call)?;
    let rest = rest.trim();
    let rest = rest.strip_suffix("[EOS]").unwrap_or(rest).trim_end();
    if !rest.is_empty() {
        return Err(if starts_like_action(rest) {
            ParseError::MultipleActions {
                excerpt: excerpt(rest),
            }
        } else {
            ParseError::TrailingText {
                excerpt: excerpt(rest),
            }
        });
    }
    Ok(Step {
        thought: thought(head),
        action,
    })
}

/// `text` without a Markdown code fence around it (the reference prompt
/// shows the output format inside one, and models sometimes copy it).
fn strip_fence(text: &str) -> &str {
    let mut text = text;
    if text.starts_with("```") {
        text = text.split_once('\n').map_or("", |(_, rest)| rest);
    }
    text.strip_suffix("```").unwrap_or(text).trim()
}

/// Splits at the first line that starts (after spaces) with `Action:`: the
/// text before it and the text after the marker.
fn split_action(text: &str) -> Option<(&str, &str)> {
    let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1));
    for start in line_starts {
        let line = &text[start..];
        let trimmed = line.trim_start_matches([' ', '\t']);
        if let Some(call) = trimmed.strip_prefix("Action:") {
            return Some((&text[..start], call));
        }
    }
    None
}

/// The thought in the text before the `Action:` line.
fn thought(head: &str) -> Option<String> {
    let body = if let Some((_, rest)) = head.split_once("Thought:") {
        rest
    } else if let Some((_, rest)) = head.split_once("Action_Summary:") {
        rest
    } else {
        return None;
    };
    let body = body.trim();
    (!body.is_empty()).then(|| body.to_owned())
}

/// Whether `text` starts like another action: `Action:` or `name(`.
fn starts_like_action(text: &str) -> bool {
    if text.starts_with("Action:") {
        return true;
    }
    let name_end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    name_end > 0 && text[name_end..].trim_start().starts_with('(')
}

/// A cursor over the action text.
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// Consumes `c` if it is next.
    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// An identifier (`[A-Za-z0-9_]*`; empty when none is next).
    fn ident(&mut self) -> &'a str {
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn bad_syntax(&self) -> ParseError {
        ParseError::BadSyntax {
            excerpt: excerpt(self.rest()),
        }
    }

    /// A Python string literal in `quote`s, the cursor on the opening quote.
    ///
    /// Escapes `\\ \' \" \n \r \t` are resolved; other backslashes stay, as
    /// in Python. Like the reference, a quote that is not followed (after
    /// spaces) by `,`, `)` or the end is part of the text: models often
    /// write `type(content='it's')`.
    fn string(&mut self, quote: char) -> Result<String, ParseError> {
        let opening = self.pos;
        self.pos += quote.len_utf8();
        let mut out = String::new();
        loop {
            let Some(c) = self.rest().chars().next() else {
                return Err(ParseError::UnbalancedQuotes {
                    excerpt: excerpt(&self.text[opening..]),
                });
            };
            self.pos += c.len_utf8();
            if c == '\\' {
                let Some(next) = self.rest().chars().next() else {
                    return Err(ParseError::UnbalancedQuotes {
                        excerpt: excerpt(&self.text[opening..]),
                    });
                };
                self.pos += next.len_utf8();
                match next {
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    '\\' | '\'' | '"' => out.push(next),
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            } else if c == quote {
                let after = self.rest().trim_start();
                if after.is_empty() || after.starts_with([',', ')']) {
                    return Ok(out);
                }
                out.push(c);
            } else {
                out.push(c);
            }
        }
    }
}

/// The keyword arguments of one call, in order, each name once.
struct Args<'a> {
    action: &'a str,
    items: Vec<(&'a str, String)>,
}

impl Args<'_> {
    fn bad(&self, reason: String) -> ParseError {
        ParseError::BadArguments {
            action: excerpt(self.action),
            reason,
        }
    }

    /// Removes and returns the argument spelled by one of `names`; an error
    /// when two of them are given.
    fn take(&mut self, names: &[&str]) -> Result<Option<String>, ParseError> {
        let mut found = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, (name, _))| names.contains(name))
            .map(|(i, _)| i);
        let (Some(first), second) = (found.next(), found.next()) else {
            return Ok(None);
        };
        if let Some(second) = second {
            return Err(self.bad(format!(
                "both `{}` and `{}` given",
                self.items[first].0, self.items[second].0
            )));
        }
        Ok(Some(self.items.remove(first).1))
    }

    /// Like [`Args::take`], but the argument must be there.
    fn require(&mut self, names: &[&str]) -> Result<String, ParseError> {
        let name = names.first().copied().unwrap_or_default();
        self.take(names)?
            .ok_or_else(|| self.bad(format!("`{name}` is missing")))
    }

    /// A point argument.
    fn point(&mut self, names: &[&str]) -> Result<Point, ParseError> {
        parse_point(&self.require(names)?)
    }

    /// Errs if any argument was not taken.
    fn done(&self) -> Result<(), ParseError> {
        match self.items.first() {
            Some((name, _)) => Err(self.bad(format!("unexpected argument `{}`", excerpt(name)))),
            None => Ok(()),
        }
    }
}

/// The names a single point may be given under.
const POINT: &[&str] = &["start_box", "point", "start_point"];
/// A drag's start.
const FROM: &[&str] = &["start_box", "start_point"];
/// A drag's end.
const TO: &[&str] = &["end_box", "end_point"];

/// Parses `name(arg='…', …)` at the start of `text` (after spaces) and
/// returns the action and the text after the closing parenthesis.
fn parse_call(text: &str) -> Result<(Action, &str), ParseError> {
    let mut cur = Cursor { text, pos: 0 };
    cur.skip_ws();
    let name = cur.ident();
    if name.is_empty() {
        return Err(cur.bad_syntax());
    }
    cur.skip_ws();
    if !cur.eat('(') {
        return Err(cur.bad_syntax());
    }
    if !matches!(
        name,
        "click"
            | "left_single"
            | "left_double"
            | "right_single"
            | "drag"
            | "hotkey"
            | "type"
            | "scroll"
            | "wait"
            | "finished"
            | "call_user"
    ) {
        return Err(ParseError::UnknownAction {
            name: excerpt(name),
        });
    }
    let mut args = Args {
        action: name,
        items: Vec::new(),
    };
    loop {
        cur.skip_ws();
        if cur.eat(')') {
            break;
        }
        let key = cur.ident();
        if key.is_empty() {
            return Err(cur.bad_syntax());
        }
        cur.skip_ws();
        if !cur.eat('=') {
            return Err(cur.bad_syntax());
        }
        cur.skip_ws();
        let value = match cur.rest().chars().next() {
            Some(quote @ ('\'' | '"')) => cur.string(quote)?,
            _ => return Err(args.bad(format!("`{}` is not a quoted string", excerpt(key)))),
        };
        if args.items.iter().any(|(name, _)| *name == key) {
            return Err(args.bad(format!("`{}` given twice", excerpt(key))));
        }
        args.items.push((key, value));
        cur.skip_ws();
        if cur.eat(')') {
            break;
        }
        if !cur.eat(',') {
            return Err(cur.bad_syntax());
        }
    }
    let action = action(name, &mut args)?;
    args.done()?;
    Ok((action, cur.rest()))
}

/// Builds the action `name` from its arguments.
fn action(name: &str, args: &mut Args<'_>) -> Result<Action, ParseError> {
    Ok(match name {
        "click" | "left_single" => {
            let Point { x, y } = args.point(POINT)?;
            Action::Click { x, y }
        }
        "left_double" => {
            let Point { x, y } = args.point(POINT)?;
            Action::DoubleClick { x, y }
        }
        "right_single" => {
            let Point { x, y } = args.point(POINT)?;
            Action::RightClick { x, y }
        }
        "drag" => Action::Drag {
            from: args.point(FROM)?,
            to: args.point(TO)?,
        },
        "hotkey" => {
            let raw = args.require(&["key", "hotkey"])?;
            let keys: Vec<String> = raw.split_whitespace().map(str::to_lowercase).collect();
            if keys.is_empty() {
                return Err(args.bad("`key` names no key".to_owned()));
            }
            Action::Hotkey { keys }
        }
        "type" => {
            let mut content = args.require(&["content"])?;
            let submit = content.ends_with('\n');
            if submit {
                content.pop();
            }
            Action::Type { content, submit }
        }
        "scroll" => {
            let Point { x, y } = args.point(POINT)?;
            let raw = args.require(&["direction"])?;
            let direction = ScrollDirection::parse(&raw).ok_or_else(|| {
                args.bad("`direction` is not one of up, down, left, right".to_owned())
            })?;
            Action::Scroll { x, y, direction }
        }
        "wait" => Action::Wait,
        "finished" => Action::Finished {
            content: args.take(&["content"])?.unwrap_or_default(),
        },
        "call_user" => Action::CallUser,
        other => {
            return Err(ParseError::UnknownAction {
                name: excerpt(other),
            });
        }
    })
}

/// A point argument's value: `(x,y)`, `[x,y]`, `<point>x y</point>`, any of
/// these inside `<|box_start|>…<|box_end|>`, or a box of four numbers
/// (`(x1,y1,x2,y2)`, `[…]`, `<bbox>x1 y1 x2 y2</bbox>`), which stands for its
/// centre. Numbers are integers or decimals, never negative.
fn parse_point(value: &str) -> Result<Point, ParseError> {
    let bad = |reason| ParseError::BadPoint {
        excerpt: excerpt(value),
        reason,
    };
    let mut inner = value.trim();
    for (open, close) in [
        ("<|box_start|>", "<|box_end|>"),
        ("<point>", "</point>"),
        ("<bbox>", "</bbox>"),
        ("(", ")"),
        ("[", "]"),
    ] {
        if let Some(rest) = inner.strip_prefix(open) {
            inner = rest
                .strip_suffix(close)
                .ok_or_else(|| bad("unclosed bracket or tag"))?
                .trim();
        }
    }
    let mut numbers = [0.0; 4];
    let mut count = 0;
    let mut tokens: Box<dyn Iterator<Item = &str>> = if inner.contains(',') {
        Box::new(inner.split(',').map(str::trim))
    } else {
        Box::new(inner.split_whitespace())
    };
    for token in &mut tokens {
        let slot = numbers
            .get_mut(count)
            .ok_or_else(|| bad("expected 2 or 4 numbers"))?;
        *slot = parse_number(token).map_err(bad)?;
        count += 1;
    }
    match count {
        2 => Ok(Point {
            x: numbers[0],
            y: numbers[1],
        }),
        4 => Ok(Point {
            x: (numbers[0] + numbers[2]) / 2.0,
            y: (numbers[1] + numbers[3]) / 2.0,
        }),
        _ => Err(bad("expected 2 or 4 numbers")),
    }
}

/// `123` or `12.5`: digits with at most one dot, no sign, no exponent.
fn parse_number(token: &str) -> Result<f64, &'static str> {
    if token.starts_with('-') {
        return Err("negative coordinate");
    }
    let digits = token.bytes().filter(u8::is_ascii_digit).count();
    let dots = token.bytes().filter(|b| *b == b'.').count();
    if token.len() > MAX_NUMBER_LEN {
        return Err("number too long");
    }
    if digits == 0 || dots > 1 || digits + dots != token.len() {
        return Err("not a number");
    }
    match token.parse::<f64>() {
        Ok(n) if n.is_finite() => Ok(n),
        _ => Err("not a number"),
    }
}
