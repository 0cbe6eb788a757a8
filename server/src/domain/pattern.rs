//! Text rules that a check and the OpenAPI document share: each is one
//! regular expression, written in the subset that ECMAScript (JSON
//! Schema's `pattern`), Python (schemathesis) and the `regex` crate read
//! alike, and the server checks with that same expression, so the
//! document and the check cannot drift.

use std::sync::LazyLock;

use regex::Regex;

/// A host name or IPv4 address as sessions and grants name them: labels
/// of ASCII letters, digits and `-` (1–63 each, no `-` at either end),
/// the last starting with a letter; or a dotted-quad IPv4 address without
/// leading zeros. (Length, at most 253, is checked apart.)
pub const HOST_PATTERN: &str = r"^(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?|(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})$";

/// An http(s) URL as agents give one to `navigate`, a new tab or a task:
/// the scheme, a host as [`HOST_PATTERN`] says, an optional port
/// (0–65535), then a path, query or fragment without spaces or control
/// characters. (Credentials in it, and its length, are refused apart.)
pub const URL_PATTERN: &str = r"^[Hh][Tt][Tt][Pp][Ss]?://(([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?|(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})(:([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?([/?#][^\x00-\x20\x7f]*)?$";

/// The longest host name, in characters (ASCII only, so also bytes).
pub const MAX_HOST: usize = 253;

/// Text that is not blank: at least one character other than ASCII
/// whitespace (space, tab, line feed, form feed, carriage return).
pub const NOT_BLANK: &str = r"[^\t\n\f\r ]";

static HOST: LazyLock<Regex> = LazyLock::new(|| Regex::new(HOST_PATTERN).expect("HOST_PATTERN"));
static URL: LazyLock<Regex> = LazyLock::new(|| Regex::new(URL_PATTERN).expect("URL_PATTERN"));
static NOT_BLANK_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(NOT_BLANK).expect("NOT_BLANK"));

/// Whether `s` is a host as [`HOST_PATTERN`] and [`MAX_HOST`] say.
pub fn is_host(s: &str) -> bool {
    s.len() <= MAX_HOST && HOST.is_match(s)
}

/// Whether `s` is an http(s) URL as [`URL_PATTERN`] says.
pub fn is_http_url(s: &str) -> bool {
    URL.is_match(s)
}

/// Whether `s` holds something besides ASCII whitespace ([`NOT_BLANK`]).
pub fn is_not_blank(s: &str) -> bool {
    NOT_BLANK_RE.is_match(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_names_or_dotted_quads() {
        for ok in [
            "example.com",
            "localhost",
            "a-b.c0",
            "127.0.0.1",
            "10.0.0.255",
            "xn--bcher-kva.example",
        ] {
            assert!(is_host(ok), "{ok}");
        }
        for bad in [
            "",
            "a..b",
            ".a",
            "a.",
            "1.2.3",
            "01.2.3.4",
            "256.1.1.1",
            "a.com\n",
            "a b",
            "::1",
            "a_b.com",
            "-a.com",
            "a-.com",
            "a.-b",
            "example.com:80",
        ] {
            assert!(!is_host(bad), "{bad:?}");
        }
        assert!(!is_host(&format!("{}.com", "a.".repeat(130))));
    }

    #[test]
    fn urls_are_http_with_a_host_name_or_ipv4_and_no_spaces() {
        for ok in [
            "http://example.com",
            "https://example.com/a?b=c#d",
            "HTTPS://EXAMPLE.COM",
            "http://127.0.0.1:65535/x y".split(' ').next().unwrap(),
            "https://de.wikipedia.org/wiki/Ü",
        ] {
            assert!(is_http_url(ok), "{ok}");
            // Every URL the pattern admits parses as a target.
            assert!(crate::domain::TargetUrl::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "0",
            " http://example.com",
            "http://example.com/ x",
            "http://example.com:65536/",
            "ftp://example.com/",
            "http://[::1]/",
            "http://u:p@example.com/",
            "http://example.com\n",
        ] {
            assert!(!is_http_url(bad), "{bad:?}");
        }
    }

    #[test]
    fn blank_means_ascii_whitespace_only() {
        assert!(is_not_blank("x"));
        assert!(is_not_blank(" x "));
        assert!(is_not_blank("\u{a0}"));
        assert!(!is_not_blank(""));
        assert!(!is_not_blank(" \t\r\n\u{c}"));
    }
}
