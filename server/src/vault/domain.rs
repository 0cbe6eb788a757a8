//! `Domain`: the site a credential belongs to.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A site's host name (`example.com`, `app.example.com`, `localhost`) or an
/// IPv4 address, lowercased, without scheme, port, path or dots at either
/// end. A credential for `example.com` holds cookies of `example.com` and of
/// its subdomains.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Domain(String);

/// Why a string is not a [`Domain`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// Empty, or longer than 253 characters.
    #[error("domain must be 1 to 253 characters long")]
    Length,
    /// A URL, a port or a path rather than a host name.
    #[error("domain must be a bare host name such as example.com, not a URL, port or path")]
    NotAHost,
    /// A label that is empty, too long, or holds other than `a-z0-9-`.
    #[error(
        "domain labels must be 1 to 63 characters of a-z, 0-9 and '-', not starting or ending with '-'"
    )]
    Label,
}

impl Domain {
    /// The domain as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a cookie's `domain` attribute (`example.com`, `.example.com`,
    /// `app.example.com`) names this domain or one of its subdomains.
    pub fn covers(&self, cookie_domain: &str) -> bool {
        let host = cookie_domain.strip_prefix('.').unwrap_or(cookie_domain);
        if host.eq_ignore_ascii_case(&self.0) {
            return true;
        }
        if self.0.parse::<Ipv4Addr>().is_ok() {
            return false;
        }
        host.to_ascii_lowercase()
            .strip_suffix(self.0.as_str())
            .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.'))
    }
}

impl FromStr for Domain {
    type Err = DomainError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > 253 {
            return Err(DomainError::Length);
        }
        if s.contains(['/', ':', '@', '?', '#', ' ']) {
            return Err(DomainError::NotAHost);
        }
        let lower = s.to_ascii_lowercase();
        if lower.parse::<Ipv4Addr>().is_ok() {
            return Ok(Self(lower));
        }
        let labels_ok = lower.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        });
        if !labels_ok {
            return Err(DomainError::Label);
        }
        Ok(Self(lower))
    }
}

impl TryFrom<String> for Domain {
    type Error = DomainError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Domain> for String {
    fn from(d: Domain) -> Self {
        d.0
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Domain {
        s.parse().unwrap()
    }

    #[test]
    fn host_names_and_ipv4_addresses_are_accepted_lowercased() {
        assert_eq!(d("Example.COM").as_str(), "example.com");
        for ok in [
            "localhost",
            "127.0.0.1",
            "a-b.c0.example",
            "xn--bcher-kva.example",
        ] {
            assert_eq!(d(ok).as_str(), ok);
        }
    }

    #[test]
    fn urls_ports_and_odd_labels_are_refused() {
        for (bad, err) in [
            ("", DomainError::Length),
            ("https://example.com", DomainError::NotAHost),
            ("example.com:443", DomainError::NotAHost),
            ("example.com/x", DomainError::NotAHost),
            (".example.com", DomainError::Label),
            ("example.com.", DomainError::Label),
            ("a..b", DomainError::Label),
            ("-a.com", DomainError::Label),
            ("under_score.com", DomainError::Label),
            ("bücher.example", DomainError::Label),
        ] {
            assert_eq!(bad.parse::<Domain>(), Err(err), "{bad:?}");
        }
        assert_eq!("a".repeat(254).parse::<Domain>(), Err(DomainError::Length));
    }

    #[test]
    fn a_domain_covers_itself_and_its_subdomains_only() {
        let ex = d("example.com");
        for yes in [
            "example.com",
            ".example.com",
            "app.example.com",
            ".a.b.EXAMPLE.com",
        ] {
            assert!(ex.covers(yes), "{yes}");
        }
        for no in [
            "",
            ".",
            "com",
            "evil-example.com",
            "example.com.evil.net",
            "notexample.com",
            "xample.com",
            "example.co",
        ] {
            assert!(!ex.covers(no), "{no}");
        }
        let ip = d("127.0.0.1");
        assert!(ip.covers("127.0.0.1"));
        assert!(!ip.covers("1.127.0.0.1"));
    }
}
