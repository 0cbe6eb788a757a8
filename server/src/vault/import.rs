//! Reading cookie files: Playwright storageState JSON, a CDP cookie array
//! (or `Network.getCookies`' `{cookies: […]}`), or a Netscape cookies.txt.
//! Errors name a line, a column or a cookie's name and domain, never a value.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use zeroize::Zeroizing;

use super::domain::Domain;
use crate::domain::{Cookie, Origin, StorageState};

/// The largest file an import reads.
pub const MAX_IMPORT_BYTES: u64 = 5 * 1024 * 1024;

/// The format a file was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"cookies": […], "origins": […]}`.
    StorageState,
    /// `[{name, value, domain, …}, …]`.
    CdpArray,
    /// Netscape `cookies.txt`.
    Netscape,
}

/// A cookie left out because it belongs to another site: name and domain
/// only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// The cookie's name.
    pub name: String,
    /// The cookie's domain.
    pub domain: String,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}@{}", self.name, self.domain)
    }
}

/// Why a file could not be imported. Each is a distinct, one-line error.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {err}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        err: std::io::Error,
    },
    /// Over [`MAX_IMPORT_BYTES`].
    #[error(
        "import file is larger than {} bytes (5 MiB); refusing to read it",
        MAX_IMPORT_BYTES
    )]
    TooLarge,
    /// JSON that does not parse as cookies.
    #[error("malformed cookie JSON at line {line}, column {column}: {reason}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong (never the offending text).
        reason: String,
    },
    /// A JSON object without a `cookies` array.
    #[error("JSON object has no \"cookies\" array (expected a Playwright storageState file)")]
    NoCookiesKey,
    /// A cookies.txt line that is not a cookie.
    #[error("malformed cookies.txt at line {line}: {reason}")]
    Netscape {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// Neither JSON nor UTF-8 text.
    #[error("not a cookie file: neither JSON nor UTF-8 text")]
    NotText,
    /// A cookie with an empty domain or a name holding control characters.
    #[error("cookie #{index} is invalid: {reason}")]
    InvalidCookie {
        /// 1-based position in the file.
        index: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// Nothing to import.
    #[error("no cookies for {0} in the file")]
    Empty(Domain),
    /// Cookies of other sites, refused (listed by name and domain).
    #[error("{count} cookie(s) do not belong to {domain} or its subdomains: {list}", count = .rejected.len(), list = list(.rejected))]
    Foreign {
        /// The domain imported for.
        domain: Domain,
        /// The cookies refused.
        rejected: Vec<Rejected>,
    },
}

impl ImportError {
    /// A stable code for audit rows and callers.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Read { .. } => "unreadable",
            Self::TooLarge => "too_large",
            Self::Json { .. } | Self::NoCookiesKey | Self::Netscape { .. } | Self::NotText => {
                "malformed"
            }
            Self::InvalidCookie { .. } => "invalid_cookie",
            Self::Empty(_) => "empty",
            Self::Foreign { .. } => "foreign_cookies",
        }
    }
}

fn list(rejected: &[Rejected]) -> String {
    const SHOWN: usize = 20;
    let mut text = rejected
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if rejected.len() > SHOWN {
        text.push_str(&format!(" and {} more", rejected.len() - SHOWN));
    }
    text
}

/// Cookies read from a file, before the domain check.
#[derive(Debug)]
pub struct Parsed {
    /// How the file was read.
    pub format: Format,
    /// Every cookie in it, in order.
    pub cookies: Vec<Cookie>,
    /// storageState origins (localStorage), in order.
    pub origins: Vec<Origin>,
}

/// Reads at most [`MAX_IMPORT_BYTES`] from `path`; a larger file is refused
/// before its contents are read. The buffer is wiped when dropped.
pub fn read_file(path: &Path) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let read_err = |err| ImportError::Read {
        path: path.display().to_string(),
        err,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    if len > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge);
    }
    let mut bytes = Zeroizing::new(Vec::with_capacity(usize::try_from(len).unwrap_or(0)));
    // A FIFO or a growing file has no honest length: bound the read too.
    file.take(MAX_IMPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge);
    }
    Ok(bytes)
}

/// Parses a cookie file of any supported format (told apart by its first
/// non-blank character).
pub fn parse(bytes: &[u8]) -> Result<Parsed, ImportError> {
    if bytes.len() as u64 > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge);
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let parsed = match bytes.iter().copied().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => parse_storage_state(bytes)?,
        Some(b'[') => Parsed {
            format: Format::CdpArray,
            cookies: serde_json::from_slice(bytes).map_err(json_error)?,
            origins: Vec::new(),
        },
        _ => parse_netscape(bytes)?,
    };
    for (i, c) in parsed.cookies.iter().enumerate() {
        let invalid = |reason| ImportError::InvalidCookie {
            index: i + 1,
            reason,
        };
        if c.domain.trim_start_matches('.').is_empty() {
            return Err(invalid("empty domain"));
        }
        if c.name.chars().any(char::is_control) || c.domain.chars().any(char::is_control) {
            return Err(invalid("control character in name or domain"));
        }
        if c.value.chars().any(char::is_control) {
            return Err(invalid("control character in value"));
        }
    }
    Ok(parsed)
}

fn parse_storage_state(bytes: &[u8]) -> Result<Parsed, ImportError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(json_error)?;
    if value.get("cookies").is_none() {
        return Err(ImportError::NoCookiesKey);
    }
    // Parsed again as the typed shape so errors carry a position.
    let state: StorageState = serde_json::from_slice(bytes).map_err(json_error)?;
    Ok(Parsed {
        format: Format::StorageState,
        cookies: state.cookies,
        origins: state.origins,
    })
}

/// serde_json's messages can quote the offending input (`invalid type:
/// string "…"`), which may be a secret; keep the position and only the
/// messages known to quote nothing but field names.
fn json_error(e: serde_json::Error) -> ImportError {
    use serde_json::error::Category;
    let reason = match e.classify() {
        Category::Eof => "unexpected end of input".to_owned(),
        Category::Syntax => "syntax error".to_owned(),
        Category::Io => "read error".to_owned(),
        Category::Data => {
            let text = e.to_string();
            let head = text.split(" at line ").next().unwrap_or_default();
            if head.starts_with("missing field `") {
                head.to_owned()
            } else {
                "a field has the wrong type or an unknown value".to_owned()
            }
        }
    };
    ImportError::Json {
        line: e.line(),
        column: e.column(),
        reason,
    }
}

/// Netscape format: `domain  include_subdomains  path  secure  expiry  name
/// value`, tab-separated; `#HttpOnly_` before the domain marks an HttpOnly
/// cookie; other `#` lines and blank lines are comments.
fn parse_netscape(bytes: &[u8]) -> Result<Parsed, ImportError> {
    let text = std::str::from_utf8(bytes).map_err(|_| ImportError::NotText)?;
    let mut cookies = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |reason| ImportError::Netscape {
            line: line_no,
            reason,
        };
        let line = raw.trim_end_matches('\r');
        let (line, http_only) = match line.strip_prefix("#HttpOnly_") {
            Some(rest) => (rest, true),
            None if line.trim().is_empty() || line.starts_with('#') => continue,
            None => (line, false),
        };
        let fields: Vec<&str> = line.split('\t').collect();
        // Some writers drop the tab before an empty value.
        let (domain, subdomains, path, secure, expiry, name, value) = match fields[..] {
            [d, s, p, sec, e, n, v] => (d, s, p, sec, e, n, v),
            [d, s, p, sec, e, n] => (d, s, p, sec, e, n, ""),
            _ => return Err(err("expected 7 tab-separated fields")),
        };
        let flag = |f: &str, what| match f {
            "TRUE" | "true" => Ok(true),
            "FALSE" | "false" => Ok(false),
            _ => Err(err(what)),
        };
        let include_subdomains = flag(subdomains, "second field must be TRUE or FALSE")?;
        let secure = flag(secure, "fourth field must be TRUE or FALSE")?;
        let expiry: i64 = expiry
            .trim()
            .parse()
            .map_err(|_| err("fifth field must be an expiry in Unix seconds"))?;
        let host = domain.trim_start_matches('.');
        let domain = if include_subdomains {
            format!(".{host}")
        } else {
            host.to_owned()
        };
        cookies.push(Cookie {
            name: name.to_owned(),
            value: value.to_owned(),
            domain,
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            expires: if expiry > 0 { expiry as f64 } else { -1.0 },
            http_only,
            secure,
            same_site: None,
            partition_key: None,
        });
    }
    Ok(Parsed {
        format: Format::Netscape,
        cookies,
        origins: Vec::new(),
    })
}

/// Splits origins into those whose host `domain` covers and the rest (an
/// origin without a host, `null` say, belongs to no domain).
pub fn partition_origins(origins: Vec<Origin>, domain: &Domain) -> (Vec<Origin>, Vec<Origin>) {
    origins
        .into_iter()
        .partition(|o| o.host().is_some_and(|h| domain.covers(&h)))
}

/// Splits cookies into those of `domain` (or its subdomains) and the rest.
/// Of cookies with the same name, domain and path, the last one wins (in
/// the place of the first).
pub fn partition(cookies: Vec<Cookie>, domain: &Domain) -> (Vec<Cookie>, Vec<Rejected>) {
    let mut kept: Vec<Cookie> = Vec::with_capacity(cookies.len());
    // Identity → position in `kept`: a linear search per cookie made the
    // largest file (5 MiB, 99,000 cookies) take 262 s in a debug build.
    let mut at: HashMap<(String, String, String), usize> = HashMap::new();
    let mut rejected = Vec::new();
    for c in cookies {
        if !domain.covers(&c.domain) {
            rejected.push(Rejected {
                name: c.name.clone(),
                domain: c.domain.clone(),
            });
            continue;
        }
        let (name, cookie_domain, path) = c.identity();
        let key = (name.to_owned(), cookie_domain.to_owned(), path.to_owned());
        match at.get(&key) {
            Some(&i) => kept[i] = c,
            None => {
                at.insert(key, kept.len());
                kept.push(c);
            }
        }
    }
    (kept, rejected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SameSite;

    const CANARY: &str = "canary-s3cret-v4lue";

    fn ex() -> Domain {
        "example.com".parse().unwrap()
    }

    fn no_canary(err: &ImportError) {
        let text = format!("{err} {err:?}");
        assert!(!text.contains(CANARY), "an error quoted the value");
    }

    #[test]
    fn a_playwright_storage_state_is_read() {
        let file = format!(
            r#"{{"cookies":[
              {{"name":"sid","value":"{CANARY}","domain":".example.com","path":"/","expires":-1,"httpOnly":true,"secure":true,"sameSite":"Lax"}},
              {{"name":"pref","value":"1","domain":"app.example.com","path":"/x","expires":1893456000,"httpOnly":false,"secure":false,"sameSite":"None"}}
            ],"origins":[{{"origin":"https://example.com","localStorage":[]}}]}}"#
        );
        let p = parse(file.as_bytes()).unwrap();
        assert_eq!(p.format, Format::StorageState);
        assert_eq!(p.origins.len(), 1);
        assert_eq!(p.origins[0].origin, "https://example.com");
        assert_eq!(p.cookies.len(), 2);
        assert_eq!(p.cookies[0].value, CANARY);
        assert!(p.cookies[0].http_only && p.cookies[0].is_session());
        assert_eq!(p.cookies[1].same_site, Some(SameSite::None));
        assert_eq!(p.cookies[1].path, "/x");
    }

    #[test]
    fn a_cdp_cookie_array_is_read() {
        let file = format!(
            r#"[{{"name":"sid","value":"{CANARY}","domain":"example.com","path":"/","expires":1893456000.25,"size":10,"httpOnly":true,"secure":true,"session":false,"sameSite":"Strict","priority":"Medium"}}]"#
        );
        let p = parse(file.as_bytes()).unwrap();
        assert_eq!(p.format, Format::CdpArray);
        assert_eq!(p.cookies[0].expires_ms(), Some(1_893_456_000_250));
        assert_eq!(p.cookies[0].same_site, Some(SameSite::Strict));
    }

    #[test]
    fn a_netscape_cookies_txt_is_read() {
        let file = format!(
            "# Netscape HTTP Cookie File\n\n\
             .example.com\tTRUE\t/\tTRUE\t1893456000\tsid\t{CANARY}\r\n\
             #HttpOnly_app.example.com\tFALSE\t/api\tFALSE\t0\ttok\tabc\n\
             example.com\tFALSE\t/\tFALSE\t0\tempty\n"
        );
        let p = parse(file.as_bytes()).unwrap();
        assert_eq!(p.format, Format::Netscape);
        assert_eq!(p.cookies.len(), 3);
        let sid = &p.cookies[0];
        assert_eq!(
            (sid.domain.as_str(), sid.value.as_str()),
            (".example.com", CANARY)
        );
        assert!(sid.secure && !sid.http_only && sid.expires_ms() == Some(1_893_456_000_000));
        let tok = &p.cookies[1];
        assert_eq!(
            (tok.domain.as_str(), tok.path.as_str()),
            ("app.example.com", "/api")
        );
        assert!(tok.http_only && tok.is_session());
        assert_eq!(p.cookies[2].value, "");
    }

    #[test]
    fn cookies_of_other_sites_are_rejected_by_name_and_domain() {
        let file = format!(
            r#"[{{"name":"sid","value":"v","domain":".example.com"}},
               {{"name":"_ga","value":"{CANARY}","domain":".tracker.net"}},
               {{"name":"x","value":"{CANARY}","domain":"evil-example.com"}},
               {{"name":"y","value":"w","domain":"a.b.example.com"}}]"#
        );
        let (kept, rejected) = partition(parse(file.as_bytes()).unwrap().cookies, &ex());
        assert_eq!(kept.len(), 2);
        assert_eq!(
            rejected,
            vec![
                Rejected {
                    name: "_ga".into(),
                    domain: ".tracker.net".into()
                },
                Rejected {
                    name: "x".into(),
                    domain: "evil-example.com".into()
                },
            ]
        );
        let err = ImportError::Foreign {
            domain: ex(),
            rejected,
        };
        let msg = err.to_string();
        assert!(
            msg.contains("\"_ga\"@.tracker.net") && msg.contains("evil-example.com"),
            "{msg}"
        );
        no_canary(&err);
    }

    #[test]
    fn duplicate_cookies_keep_the_last() {
        let file = r#"[{"name":"a","value":"1","domain":"example.com"},{"name":"a","value":"2","domain":"example.com"},{"name":"a","value":"3","domain":"example.com","path":"/x"}]"#;
        let (kept, _) = partition(parse(file.as_bytes()).unwrap().cookies, &ex());
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].value, "2");
    }

    #[test]
    fn a_largest_file_of_distinct_cookies_is_split_in_file_order_with_duplicates_in_place() {
        let mut file = String::from("[");
        let mut n = 0;
        while file.len() < MAX_IMPORT_BYTES as usize - 200 {
            file.push_str(&format!(
                r#"{{"name":"c{n}","value":"v{n}","domain":"example.com"}},"#
            ));
            n += 1;
        }
        file.push_str(r#"{"name":"c1","value":"last","domain":"example.com"}]"#);
        let started = std::time::Instant::now();
        let (kept, _) = partition(parse(file.as_bytes()).unwrap().cookies, &ex());
        assert_eq!(kept.len(), n);
        assert_eq!(kept[1].value, "last");
        assert_eq!(kept[n - 1].name, format!("c{}", n - 1));
        // Quadratic took minutes here; linear takes well under a second.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn malformed_files_are_typed_errors_that_quote_no_value() {
        let cases: Vec<(String, &str)> = vec![
            (format!(r#"[{{"name":"a","value":"{CANARY}""#), "malformed"),
            (
                format!(r#"[{{"name":"a","value":{{"x":"{CANARY}"}},"domain":"example.com"}}]"#),
                "malformed",
            ),
            (
                format!(
                    r#"[{{"name":"{CANARY}","value":"v","domain":"example.com","expires":"{CANARY}"}}]"#
                ),
                "malformed",
            ),
            (
                format!(r#"[{{"name":"a","value":"{CANARY}"}}]"#),
                "malformed",
            ),
            (format!(r#"{{"origins":[],"x":"{CANARY}"}}"#), "malformed"),
            (format!("example.com\tTRUE\t/\n{CANARY}"), "malformed"),
            (
                format!("example.com\tMAYBE\t/\tFALSE\t0\tn\t{CANARY}"),
                "malformed",
            ),
            (
                format!("example.com\tTRUE\t/\tFALSE\tsoon\tn\t{CANARY}"),
                "malformed",
            ),
            ("\u{0}\u{ff}\u{fe}".to_string(), "malformed"),
            (
                format!(r#"[{{"name":"a","value":"{CANARY}","domain":"."}}]"#),
                "invalid_cookie",
            ),
            (
                format!(
                    "[{{\"name\":\"a\",\"value\":\"{CANARY}\\u0007\",\"domain\":\"example.com\"}}]"
                ),
                "invalid_cookie",
            ),
        ];
        for (file, code) in cases {
            let err = parse(file.as_bytes()).unwrap_err();
            assert_eq!(err.code(), code, "{err}");
            no_canary(&err);
            assert!(!err.to_string().contains('\n'));
        }
        let err = parse(b"\xff\xfe\x00garbage").unwrap_err();
        assert!(matches!(err, ImportError::NotText), "{err}");
        let err = parse(br#"[{"name":"a","value":"v"}]"#).unwrap_err();
        assert!(err.to_string().contains("missing field `domain`"), "{err}");
        let err = parse(b"a\tb\n").unwrap_err();
        assert!(
            matches!(err, ImportError::Netscape { line: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn an_empty_file_yields_no_cookies() {
        assert!(parse(b"").unwrap().cookies.is_empty());
        assert!(
            parse(b"# Netscape HTTP Cookie File\n")
                .unwrap()
                .cookies
                .is_empty()
        );
        assert!(parse(b"[]").unwrap().cookies.is_empty());
    }

    #[test]
    fn a_file_over_5_mib_is_refused_before_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_IMPORT_BYTES + 1).unwrap();
        assert!(matches!(read_file(&path), Err(ImportError::TooLarge)));
        let exact = dir.path().join("exact.txt");
        std::fs::write(
            &exact,
            vec![b'#'; usize::try_from(MAX_IMPORT_BYTES).unwrap()],
        )
        .unwrap();
        assert_eq!(read_file(&exact).unwrap().len() as u64, MAX_IMPORT_BYTES);
        let big = vec![b' '; usize::try_from(MAX_IMPORT_BYTES).unwrap() + 1];
        assert!(matches!(parse(&big), Err(ImportError::TooLarge)));
        let err = read_file(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.code(), "unreadable");
    }
}
