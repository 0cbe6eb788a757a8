//! Why an answer is not a step.

use super::parse::MAX_ANSWER_BYTES;

/// How many characters of the answer an error message quotes at most.
const EXCERPT_CHARS: usize = 80;

/// Why an answer is not a step. Messages never quote the answer (it may
/// hold text the model types: a password, a code); the excerpts (at most
/// 80 characters) are kept for the tests and the trace, which holds the
/// answer anyway.
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
    #[error("the answer has no `Action:` line")]
    NoAction {
        /// The answer's beginning.
        excerpt: String,
    },
    /// A second action follows the first (Cordon runs one action a step, see
    /// [`super::parse()`]).
    #[error("the answer holds more than one action")]
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
    #[error("the action is not a call `name(arg='…', …)`")]
    BadSyntax {
        /// The text from where it went wrong.
        excerpt: String,
    },
    /// A quoted argument never ends.
    #[error("a quoted argument is never closed")]
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
    #[error("bad point: {reason}")]
    BadPoint {
        /// The argument's value.
        excerpt: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Something other than a second action follows the action.
    #[error("unexpected text after the action")]
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
pub(super) fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_message_quotes_what_the_model_would_type() {
        for answer in [
            "Action: type(content='hunter2",
            "Action: type(content='hunter2')\nAction: type(content='hunter2')",
            "Action: type(content='hunter2') hunter2",
            "Action: click(start_box='hunter2')",
            "Action: type(content=hunter2)",
            "hunter2",
        ] {
            let e = super::super::parse(answer).expect_err(answer);
            let message = e.to_string();
            assert!(!message.contains("hunter2"), "{answer:?}: {message}");
        }
    }
}
