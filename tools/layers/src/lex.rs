//! Just enough of a Rust lexer to find paths: identifiers, punctuation and
//! string literals with their line, comments dropped. Other literals
//! (numbers, chars, byte strings) become [`Tok::Other`] so a path never
//! runs across them.

/// One token and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (`r#` stripped from raw identifiers).
    Ident(String),
    /// `::`
    PathSep,
    /// Any other punctuation character: `{`, `}`, `;`, `,`, `*`, `#`, `$` …
    Punct(char),
    /// A string literal's text (escapes left as written; raw strings as is).
    Str(String),
    /// A number, char, byte or byte-string literal, or a lifetime.
    Other,
}

/// Splits `src` into tokens. Never fails: text it does not understand
/// becomes punctuation, which at worst ends a path early.
pub fn lex(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let n = chars.len();
    let at = |j: usize| chars.get(j).copied().unwrap_or('\0');

    while i < n {
        let c = chars[i];
        let start_line = line;
        let mut push = |tok: Tok| {
            out.push(Token {
                tok,
                line: start_line,
            })
        };
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < n && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            // Block comments nest in Rust.
            let mut depth = 0usize;
            while i < n {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((prefix_len, hashes)) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…", cr#"…"#: no escapes, ends at `"` + hashes.
            let is_plain = chars[i] == 'r';
            i += prefix_len;
            let body_start = i;
            loop {
                if i >= n {
                    break;
                }
                if chars[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                    break;
                }
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            let body: String = chars[body_start..i.min(n)].iter().collect();
            i = (i + 1 + hashes).min(n);
            push(if is_plain { Tok::Str(body) } else { Tok::Other });
        } else if c == '"' || ((c == 'b' || c == 'c') && at(i + 1) == '"') {
            let is_plain = c == '"';
            i += if is_plain { 1 } else { 2 };
            let body_start = i;
            while i < n && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            let body: String = chars[body_start..i.min(n)].iter().collect();
            i = (i + 1).min(n);
            push(if is_plain { Tok::Str(body) } else { Tok::Other });
        } else if c == '\'' || (c == 'b' && at(i + 1) == '\'') {
            // A char literal ('a', '\n', '\u{1F600}', b'x') or a lifetime ('a).
            let q = if c == 'b' { i + 1 } else { i };
            if at(q + 1) == '\\' {
                i = q + 2;
                while i < n && chars[i] != '\'' && chars[i] != '\n' {
                    i += 1;
                }
                i = (i + 1).min(n);
            } else if at(q + 2) == '\'' {
                i = q + 3;
            } else {
                i = q + 1;
                while i < n && is_ident_continue(chars[i]) {
                    i += 1;
                }
            }
            push(Tok::Other);
        } else if c == 'r' && at(i + 1) == '#' && is_ident_start(at(i + 2)) {
            i += 2;
            let s = i;
            while i < n && is_ident_continue(chars[i]) {
                i += 1;
            }
            push(Tok::Ident(chars[s..i].iter().collect()));
        } else if is_ident_start(c) {
            let s = i;
            while i < n && is_ident_continue(chars[i]) {
                i += 1;
            }
            push(Tok::Ident(chars[s..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < n && (is_ident_continue(chars[i])) {
                i += 1;
            }
            push(Tok::Other);
        } else if c == ':' && at(i + 1) == ':' {
            i += 2;
            push(Tok::PathSep);
        } else {
            i += 1;
            push(Tok::Punct(c));
        }
    }
    out
}

/// At `i`, a raw string's prefix (`r`, `br` or `cr`, then hashes, then `"`):
/// its length and the number of hashes.
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if matches!(chars.get(j), Some('b' | 'c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    // `r` must start the token: not the tail of an identifier like `bar"`.
    if i > 0 && is_ident_continue(chars[i - 1]) {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(src: &str) -> Vec<(String, usize)> {
        lex(src)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(s) => Some((s, t.line)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn comments_and_literals_hide_what_they_contain() {
        let src = "// crate::a\n/* crate::b /* nested crate::c */ still */ x\n\
                   let s = \"crate::d \\\" crate::e\"; let r = r#\"crate::f\"#;\n\
                   let c = '\"'; let l: &'a str = b\"crate::g\";";
        let names: Vec<String> = idents(src).into_iter().map(|(s, _)| s).collect();
        assert_eq!(
            names,
            ["x", "let", "s", "let", "r", "let", "c", "let", "l", "str"]
        );
    }

    #[test]
    fn lines_are_counted_through_comments_and_strings() {
        let src = "/* one\ntwo */\nlet s = \"a\nb\";\nz";
        assert_eq!(idents(src).last(), Some(&("z".to_string(), 5)));
    }

    #[test]
    fn strings_keep_their_text_and_raw_identifiers_lose_their_prefix() {
        let toks: Vec<Tok> = lex("r#type \"crate::x\" r\"y\"")
            .into_iter()
            .map(|t| t.tok)
            .collect();
        assert_eq!(
            toks,
            [
                Tok::Ident("type".into()),
                Tok::Str("crate::x".into()),
                Tok::Str("y".into())
            ]
        );
    }

    #[test]
    fn lifetimes_and_chars_are_not_identifiers() {
        let toks: Vec<Tok> = lex("'a 'b' '\\n' '\\u{1F600}' b'x' fn")
            .into_iter()
            .map(|t| t.tok)
            .collect();
        assert_eq!(
            toks,
            [
                Tok::Other,
                Tok::Other,
                Tok::Other,
                Tok::Other,
                Tok::Other,
                Tok::Ident("fn".into())
            ]
        );
    }

    #[test]
    fn path_separators_are_one_token() {
        let toks: Vec<Tok> = lex("crate::a").into_iter().map(|t| t.tok).collect();
        assert_eq!(
            toks,
            [
                Tok::Ident("crate".into()),
                Tok::PathSep,
                Tok::Ident("a".into())
            ]
        );
    }
}
