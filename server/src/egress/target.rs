//! What a client asks the proxy for: an IP literal or a DNS name.
//!
//! Browsers and libc accept IPv4 in odd spellings (`2130706433`, `0177.0.0.1`,
//! `0x7f.1`, `127.1`). Such a host is an address, not a name: it is decoded
//! here, by the WHATWG URL rules, and judged as the address it means. It never
//! reaches the resolver, whose own reading of it may differ.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A parsed host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An IP literal, whatever its spelling.
    Ip(IpAddr),
    /// A DNS name: lower case, without a trailing dot.
    Name(String),
}

impl fmt::Display for Target {
    /// The form written to the egress log: the address, or the name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ip(ip) => write!(f, "{ip}"),
            Self::Name(n) => f.write_str(n),
        }
    }
}

/// Why a host is neither an address nor a usable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadHost {
    /// Nothing was given.
    #[error("empty host")]
    Empty,
    /// Longer than a DNS name may be.
    #[error("host name too long")]
    TooLong,
    /// Brackets or colons, but not an IPv6 address.
    #[error("invalid IPv6 address")]
    BadIpv6,
    /// Ends in a number, so it is an IPv4 address, but not a valid one.
    #[error("invalid IPv4 address")]
    BadIpv4,
    /// A character no host name has (spaces, `%`, `@`, non-ASCII …).
    #[error("invalid character in host")]
    BadCharacter,
    /// An empty or over-long label.
    #[error("invalid label in host name")]
    BadLabel,
}

/// Parses the host part of a request target (`[::1]`, `127.1`, `example.com`).
pub fn parse_target(host: &str) -> Result<Target, BadHost> {
    if host.is_empty() {
        return Err(BadHost::Empty);
    }
    if let Some(rest) = host.strip_prefix('[') {
        let inner = rest.strip_suffix(']').ok_or(BadHost::BadIpv6)?;
        return parse_v6(inner).map(Target::Ip);
    }
    if host.contains(':') {
        return parse_v6(host).map(Target::Ip);
    }
    if host.len() > 254 {
        return Err(BadHost::TooLong);
    }
    let lower = host.to_ascii_lowercase();
    if !lower
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(BadHost::BadCharacter);
    }
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if name.len() > 253 {
        return Err(BadHost::TooLong);
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.iter().any(|l| l.is_empty() || l.len() > 63) {
        return Err(BadHost::BadLabel);
    }
    let last = labels[labels.len() - 1];
    if last.bytes().all(|b| b.is_ascii_digit()) || ipv4_number(last).is_some() {
        return parse_ipv4(&labels)
            .map(|ip| Target::Ip(IpAddr::V4(ip)))
            .ok_or(BadHost::BadIpv4);
    }
    Ok(Target::Name(name.to_owned()))
}

/// An IPv6 literal, without brackets; a zone id (`%eth0`, `%25eth0`) is dropped.
fn parse_v6(s: &str) -> Result<IpAddr, BadHost> {
    let addr = s.split_once('%').map_or(s, |(a, _zone)| a);
    addr.parse::<Ipv6Addr>()
        .map(IpAddr::V6)
        .map_err(|_| BadHost::BadIpv6)
}

/// One part of an IPv4 literal: `0x` hex, `0`-prefixed octal, or decimal.
fn ipv4_number(part: &str) -> Option<u64> {
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        // "0x" alone is 0 by the URL standard.
        return (radix == 16).then_some(0);
    }
    if !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix)
        .ok()
        .filter(|n| *n <= u64::from(u32::MAX))
}

/// The WHATWG IPv4 parser: 1 to 4 parts, the last filling the remaining bytes.
fn parse_ipv4(labels: &[&str]) -> Option<Ipv4Addr> {
    if labels.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = labels
        .iter()
        .map(|l| ipv4_number(l))
        .collect::<Option<_>>()?;
    let (last, head) = numbers.split_last()?;
    if head.iter().any(|n| *n > 255) {
        return None;
    }
    let room = 32 - 8 * head.len() as u32;
    if *last >= 1u64 << room {
        return None;
    }
    let mut bits = *last;
    for (i, n) in head.iter().enumerate() {
        bits |= n << (24 - 8 * i);
    }
    u32::try_from(bits).ok().map(Ipv4Addr::from_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Target {
        Target::Ip(s.parse().unwrap())
    }

    #[test]
    fn odd_ipv4_spellings_are_the_addresses_they_mean() {
        let cases = [
            ("127.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("0x7f.0.0.1", "127.0.0.1"),
            ("0X7F.0.0.1", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("127.0.1", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("10.1", "10.0.0.1"),
            ("0", "0.0.0.0"),
            ("0x", "0.0.0.0"),
            ("127.0.0.1.", "127.0.0.1"),
            ("169.254.43518", "169.254.169.254"),
            ("0xa9fea9fe", "169.254.169.254"),
            ("4294967295", "255.255.255.255"),
            ("8.8.8.8", "8.8.8.8"),
        ];
        for (host, want) in cases {
            assert_eq!(parse_target(host), Ok(ip(want)), "{host}");
        }
    }

    #[test]
    fn ipv6_literals_lose_brackets_and_zone_ids() {
        assert_eq!(parse_target("[::1]"), Ok(ip("::1")));
        assert_eq!(parse_target("::1"), Ok(ip("::1")));
        assert_eq!(parse_target("[fe80::1%25eth0]"), Ok(ip("fe80::1")));
        assert_eq!(parse_target("fe80::1%eth0"), Ok(ip("fe80::1")));
        assert_eq!(
            parse_target("[::ffff:127.0.0.1]"),
            Ok(ip("::ffff:127.0.0.1"))
        );
    }

    #[test]
    fn names_are_lower_cased_without_the_trailing_dot() {
        assert_eq!(
            parse_target("Example.COM."),
            Ok(Target::Name("example.com".into()))
        );
        assert_eq!(
            parse_target("localhost"),
            Ok(Target::Name("localhost".into()))
        );
        // Ends in a label that is not a number: a name, resolved then checked.
        assert_eq!(
            parse_target("127.0.0.1.nip.io"),
            Ok(Target::Name("127.0.0.1.nip.io".into()))
        );
        assert_eq!(
            parse_target("0x7f.example"),
            Ok(Target::Name("0x7f.example".into()))
        );
    }

    #[test]
    fn malformed_hosts_are_typed_errors() {
        let cases = [
            ("", BadHost::Empty),
            ("256.0.0.1", BadHost::BadIpv4),
            ("1.2.3.4.5", BadHost::BadIpv4),
            ("4294967296", BadHost::BadIpv4),
            ("09.0.0.1", BadHost::BadIpv4),
            ("1.0x100.0.1", BadHost::BadIpv4),
            ("1.2.3.99999999999999999999", BadHost::BadIpv4),
            ("[::1", BadHost::BadIpv6),
            ("[127.0.0.1]", BadHost::BadIpv6),
            ("::ffff:0177.0.0.1", BadHost::BadIpv6),
            ("a b", BadHost::BadCharacter),
            ("%31%32%37.0.0.1", BadHost::BadCharacter),
            ("user@host", BadHost::BadCharacter),
            ("ｌocalhost", BadHost::BadCharacter),
            ("a..b", BadHost::BadLabel),
            (".", BadHost::BadLabel),
        ];
        for (host, want) in cases {
            assert_eq!(parse_target(host), Err(want), "{host:?}");
        }
        assert_eq!(parse_target(&"a".repeat(300)), Err(BadHost::TooLong));
        assert_eq!(parse_target(&"a".repeat(64)), Err(BadHost::BadLabel));
    }
}
