//! A cursor over an action's text and the Python string literals in it.

use super::error::{ParseError, excerpt};

/// A cursor over the action text.
pub(super) struct Cursor<'a> {
    /// The whole text.
    pub(super) text: &'a str,
    /// The byte offset of the next character (always a char boundary).
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    /// The text not yet read.
    pub(super) fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    /// Skips whitespace (newlines included).
    pub(super) fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// Consumes `c` if it is next.
    pub(super) fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// An identifier (`[A-Za-z0-9_]*`; empty when none is next).
    pub(super) fn ident(&mut self) -> &'a str {
        let rest = self.rest();
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    /// A [`ParseError::BadSyntax`] quoting the text from here.
    pub(super) fn bad_syntax(&self) -> ParseError {
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
    pub(super) fn string(&mut self, quote: char) -> Result<String, ParseError> {
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
