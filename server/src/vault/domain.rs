//! `Domain`: the site a credential belongs to.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::egress::{BadHost, Target, parse_target};

/// A site's host name (`example.com`, `app.example.com`, `localhost`) or an
/// IP address (`127.0.0.1`, `::1`), lowercased, without scheme, port, path
/// or dots at either end. A credential for `example.com` holds cookies of
/// `example.com` and of its subdomains; one for an address, of that address.
///
/// IP literals are read by the egress guard's parser ([`parse_target`]), so
/// the vault and the guard agree on which address a spelling means: `127.1`
/// is stored as `127.0.0.1`, `[::1]` as `::1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Domain(String);

/// Why a string is not a [`Domain`]; each message names the rule broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    /// Empty, or longer than 253 characters.
    #[error("domain must be 1 to 253 characters long")]
    Length,
    /// A URL, a port or a path rather than a host name.
    #[error(
        "domain must be a bare host name or IP address (example.com, 127.0.0.1, ::1), not a URL, port or path"
    )]
    NotAHost,
    /// Ends in a number, so it is an IPv4 address, but not a valid one.
    #[error(
        "domain ends in a number, so it must be an IPv4 address such as 127.0.0.1 (at most 4 parts, each in range)"
    )]
    Ipv4,
    /// In brackets or with several colons, but not an IPv6 address.
    #[error("domain in brackets or with colons must be an IPv6 address such as ::1 or [::1]")]
    Ipv6,
    /// A dot at either end, or two dots in a row.
    #[error("domain labels must not be empty: no dot at either end, no two dots in a row")]
    EmptyLabel,
    /// A label over 63 characters.
    #[error("domain labels must be at most 63 characters long")]
    LabelTooLong,
    /// A label holding other than `a-z0-9-`.
    #[error(
        "domain labels may hold only a-z, 0-9 and '-' (write a non-ASCII name in its xn-- form)"
    )]
    LabelCharacter,
    /// A label starting or ending with `-`.
    #[error("domain labels must not start or end with '-'")]
    LabelHyphen,
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
        if let Ok(ip) = self.0.parse::<IpAddr>() {
            // An address has no subdomains; a cookie may spell it otherwise
            // (`[::1]`), so it is compared as the address it means.
            return matches!(parse_target(host), Ok(Target::Ip(other)) if other == ip);
        }
        if host.eq_ignore_ascii_case(&self.0) {
            return true;
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
        if s.contains(['/', '@', '?', '#', ' ']) {
            return Err(DomainError::NotAHost);
        }
        if s.starts_with('[') || s.matches(':').count() > 1 {
            return match parse_target(s) {
                Ok(Target::Ip(ip @ IpAddr::V6(_))) => Ok(Self(ip.to_string())),
                _ => Err(DomainError::Ipv6),
            };
        }
        // One colon: a host and a port.
        if s.contains(':') {
            return Err(DomainError::NotAHost);
        }
        match parse_target(s) {
            Ok(Target::Ip(ip)) => return Ok(Self(ip.to_string())),
            Err(BadHost::BadIpv4) => return Err(DomainError::Ipv4),
            // Names are held to stricter rules than the guard's (no `_`, no
            // trailing dot): they are checked below.
            Ok(Target::Name(_)) | Err(_) => {}
        }
        let lower = s.to_ascii_lowercase();
        for label in lower.split('.') {
            if label.is_empty() {
                return Err(DomainError::EmptyLabel);
            }
            if label.len() > 63 {
                return Err(DomainError::LabelTooLong);
            }
            if !label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(DomainError::LabelCharacter);
            }
            if label.starts_with('-') || label.ends_with('-') {
                return Err(DomainError::LabelHyphen);
            }
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

    /// Every host the OpenAPI document's host pattern admits is a vault
    /// domain too (the pattern lives in `domain::pattern`, below this layer).
    #[test]
    fn every_host_the_document_admits_is_a_domain() {
        for ok in [
            "example.com",
            "localhost",
            "a-b.c0",
            "127.0.0.1",
            "10.0.0.255",
            "xn--bcher-kva.example",
        ] {
            assert!(crate::domain::pattern::is_host(ok), "{ok}");
            assert!(ok.parse::<Domain>().is_ok(), "{ok}");
        }
    }

    use super::*;

    fn d(s: &str) -> Domain {
        s.parse().unwrap()
    }

    #[test]
    fn host_names_and_ip_addresses_are_accepted_lowercased() {
        assert_eq!(d("Example.COM").as_str(), "example.com");
        for ok in [
            "localhost",
            "127.0.0.1",
            "::1",
            "2001:db8::1",
            "a-b.c0.example",
            "xn--bcher-kva.example",
        ] {
            assert_eq!(d(ok).as_str(), ok);
        }
    }

    #[test]
    fn ip_literals_are_stored_as_the_address_the_egress_guard_reads() {
        for (spelling, stored) in [
            ("127.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("[::1]", "::1"),
            ("::1", "::1"),
            ("[0:0:0:0:0:0:0:1]", "::1"),
            ("[2001:DB8::1]", "2001:db8::1"),
        ] {
            assert_eq!(d(spelling).as_str(), stored, "{spelling}");
            let Ok(Target::Ip(ip)) = parse_target(spelling) else {
                panic!("the guard reads {spelling} as an address");
            };
            assert_eq!(ip.to_string(), stored, "{spelling}");
        }
    }

    #[test]
    fn urls_ports_and_odd_labels_are_refused_naming_the_rule() {
        for (bad, err) in [
            ("", DomainError::Length),
            ("https://example.com", DomainError::NotAHost),
            ("example.com:443", DomainError::NotAHost),
            ("127.0.0.1:80", DomainError::NotAHost),
            ("example.com/x", DomainError::NotAHost),
            ("[::1]:443", DomainError::Ipv6),
            ("[::1", DomainError::Ipv6),
            ("[127.0.0.1]", DomainError::Ipv6),
            ("::g", DomainError::Ipv6),
            ("256.0.0.1", DomainError::Ipv4),
            ("1.2.3.4.5", DomainError::Ipv4),
            (".example.com", DomainError::EmptyLabel),
            ("example.com.", DomainError::EmptyLabel),
            ("a..b", DomainError::EmptyLabel),
            ("-a.com", DomainError::LabelHyphen),
            ("a-.com", DomainError::LabelHyphen),
            ("under_score.com", DomainError::LabelCharacter),
            ("bücher.example", DomainError::LabelCharacter),
        ] {
            assert_eq!(bad.parse::<Domain>(), Err(err), "{bad:?}");
        }
        assert_eq!("a".repeat(254).parse::<Domain>(), Err(DomainError::Length));
        let long = format!("{}.example", "a".repeat(64));
        assert_eq!(long.parse::<Domain>(), Err(DomainError::LabelTooLong));
        let msg = "under_score.com".parse::<Domain>().unwrap_err().to_string();
        assert!(msg.contains("a-z, 0-9 and '-'"), "{msg}");
        let msg = "[::1".parse::<Domain>().unwrap_err().to_string();
        assert!(msg.contains("IPv6"), "{msg}");
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
        assert!(!ip.covers("127.0.0.2"));
        let v6 = d("[::1]");
        assert!(v6.covers("::1"));
        assert!(v6.covers("[::1]"));
        assert!(!v6.covers("::2"));
        assert!(!v6.covers("example.com"));
    }
}
