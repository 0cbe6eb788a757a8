use std::fmt;

use url::Url;

/// The longest URL a tool accepts.
pub const MAX_URL_LEN: usize = 8 * 1024;

/// A URL a session may navigate to: `http` or `https` with a host, nothing
/// else (`javascript:`, `file:`, `chrome:`, `data:`, `about:` … are refused).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl(Url);

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetUrlError {
    /// Longer than [`MAX_URL_LEN`].
    #[error("url is longer than {MAX_URL_LEN} bytes")]
    TooLong,
    /// Not a URL at all.
    #[error("url is malformed")]
    Malformed,
    /// A scheme other than http/https.
    #[error("url scheme {0:?} is not allowed (only http and https)")]
    Scheme(String),
    /// No host.
    #[error("url has no host")]
    NoHost,
    /// User info in the URL (`https://user:pass@host`).
    #[error("urls with credentials are not allowed")]
    Credentials,
}

impl TargetUrl {
    /// Parses and checks `raw`.
    pub fn parse(raw: &str) -> Result<Self, TargetUrlError> {
        if raw.len() > MAX_URL_LEN {
            return Err(TargetUrlError::TooLong);
        }
        let url = Url::parse(raw.trim()).map_err(|_| TargetUrlError::Malformed)?;
        match url.scheme() {
            "http" | "https" => {}
            other => return Err(TargetUrlError::Scheme(other.to_owned())),
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(TargetUrlError::NoHost);
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(TargetUrlError::Credentials);
        }
        Ok(Self(url))
    }

    /// The URL.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The host (lowercased by the parser).
    pub fn host(&self) -> &str {
        self.0.host_str().unwrap_or_default()
    }
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_and_https_urls_are_accepted() {
        for ok in [
            "http://example.com",
            "https://example.com/a?b=c#d",
            "http://127.0.0.1:8080/x",
            "HTTPS://EXAMPLE.COM",
        ] {
            assert!(TargetUrl::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            TargetUrl::parse("HTTPS://EXAMPLE.COM").unwrap().host(),
            "example.com"
        );
    }

    #[test]
    fn dangerous_schemes_are_refused() {
        for (bad, scheme) in [
            ("javascript:alert(1)", "javascript"),
            ("JavaScript:alert(1)", "javascript"),
            ("file:///etc/passwd", "file"),
            ("chrome://settings", "chrome"),
            ("chrome-extension://abc/x", "chrome-extension"),
            ("data:text/html,<script>x</script>", "data"),
            ("about:blank", "about"),
            ("view-source:http://example.com", "view-source"),
            ("ftp://example.com", "ftp"),
            ("ws://example.com", "ws"),
            ("blob:http://example.com/x", "blob"),
            ("devtools://devtools/bundled/inspector.html", "devtools"),
        ] {
            assert_eq!(
                TargetUrl::parse(bad),
                Err(TargetUrlError::Scheme(scheme.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn malformed_long_and_credentialed_urls_are_refused() {
        assert_eq!(
            TargetUrl::parse("not a url"),
            Err(TargetUrlError::Malformed)
        );
        assert_eq!(TargetUrl::parse(""), Err(TargetUrlError::Malformed));
        assert_eq!(TargetUrl::parse("http://"), Err(TargetUrlError::Malformed));
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(TargetUrl::parse(&long), Err(TargetUrlError::TooLong));
        assert_eq!(
            TargetUrl::parse("https://u:p@example.com/"),
            Err(TargetUrlError::Credentials)
        );
    }
}
