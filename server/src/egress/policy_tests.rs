//! The address policy's verdicts. Pure functions: nothing here opens a socket.

use super::*;
use crate::egress::target::parse_target;

use Denied::*;

/// (host as a client may spell it, expected verdict). Spellings go through
/// `parse_target` first, as the proxy does.
const TABLE: &[(&str, Result<(), Denied>)] = &[
    // Public addresses: verdicts only, no traffic.
    ("8.8.8.8", Ok(())),
    ("1.1.1.1", Ok(())),
    ("93.184.216.34", Ok(())),
    ("2606:4700::1111", Ok(())),
    ("2001:4860:4860::8888", Ok(())),
    ("::ffff:8.8.8.8", Ok(())),
    ("64:ff9b::808:808", Ok(())),
    ("2002:808:808::1", Ok(())),
    ("100.63.255.255", Ok(())),
    ("100.128.0.0", Ok(())),
    ("172.15.255.255", Ok(())),
    ("172.32.0.0", Ok(())),
    ("169.253.255.255", Ok(())),
    ("223.255.255.255", Ok(())),
    ("198.20.0.0", Ok(())),
    // Loopback, in every spelling.
    ("127.0.0.1", Err(Loopback)),
    ("127.255.255.254", Err(Loopback)),
    ("2130706433", Err(Loopback)),
    ("0177.0.0.1", Err(Loopback)),
    ("0x7f.0.0.1", Err(Loopback)),
    ("0x7f000001", Err(Loopback)),
    ("127.1", Err(Loopback)),
    ("[::1]", Err(Loopback)),
    ("::ffff:127.0.0.1", Err(Loopback)),
    ("::ffff:7f00:1", Err(Loopback)),
    ("::127.0.0.1", Err(Loopback)),
    ("::ffff:0:127.0.0.1", Err(Loopback)),
    ("64:ff9b::7f00:1", Err(Loopback)),
    ("2002:7f00:1::", Err(Loopback)),
    // RFC 1918.
    ("10.0.0.1", Err(Private)),
    ("10.1", Err(Private)),
    ("10.255.255.53", Err(Private)),
    ("172.16.0.1", Err(Private)),
    ("172.31.255.255", Err(Private)),
    ("192.168.1.1", Err(Private)),
    ("0xc0a80101", Err(Private)),
    ("::ffff:10.0.0.1", Err(Private)),
    ("::ffff:192.168.0.1", Err(Private)),
    ("2002:c0a8:101::1", Err(Private)),
    ("64:ff9b::a00:1", Err(Private)),
    // CGNAT.
    ("100.64.0.1", Err(Cgnat)),
    ("100.127.255.255", Err(Cgnat)),
    ("100.100.100.200", Err(Cgnat)),
    // Link-local and metadata.
    ("169.254.0.1", Err(LinkLocal)),
    ("169.254.169.254", Err(CloudMetadata)),
    ("169.254.43518", Err(CloudMetadata)),
    ("0xa9fea9fe", Err(CloudMetadata)),
    ("::ffff:169.254.169.254", Err(CloudMetadata)),
    ("fd00:ec2::254", Err(CloudMetadata)),
    ("168.63.129.16", Err(CloudMetadata)),
    // Multicast, broadcast, unspecified.
    ("224.0.0.1", Err(Multicast)),
    ("239.255.255.250", Err(Multicast)),
    ("ff02::1", Err(Multicast)),
    ("ff0e::1", Err(Multicast)),
    ("255.255.255.255", Err(Broadcast)),
    ("4294967295", Err(Broadcast)),
    ("0.0.0.0", Err(Unspecified)),
    ("0", Err(Unspecified)),
    ("::", Err(Unspecified)),
    ("::ffff:0.0.0.0", Err(Unspecified)),
    // Reserved, documentation, benchmarking.
    ("0.1.2.3", Err(Reserved)),
    ("192.0.0.1", Err(Reserved)),
    ("192.0.0.192", Err(Reserved)),
    ("192.88.99.1", Err(Reserved)),
    ("240.0.0.1", Err(Reserved)),
    ("255.255.255.254", Err(Reserved)),
    ("192.0.2.1", Err(Documentation)),
    ("198.51.100.7", Err(Documentation)),
    ("203.0.113.9", Err(Documentation)),
    ("2001:db8::1", Err(Documentation)),
    ("3fff::1", Err(Documentation)),
    ("198.18.0.1", Err(Benchmarking)),
    ("198.19.255.255", Err(Benchmarking)),
    ("2001:2::1", Err(Benchmarking)),
    ("::8.8.8.8", Err(Reserved)),
    ("100::1", Err(Reserved)),
    ("64:ff9b:1::1", Err(Reserved)),
    ("2001:10::1", Err(Reserved)),
    ("4000::1", Err(Reserved)),
    ("::2", Err(Reserved)),
    // IPv6 local ranges.
    ("fc00::1", Err(Ipv6UniqueLocal)),
    ("fd12:3456::1", Err(Ipv6UniqueLocal)),
    ("fe80::1", Err(Ipv6LinkLocal)),
    ("[fe80::1%25eth0]", Err(Ipv6LinkLocal)),
    ("febf::1", Err(Ipv6LinkLocal)),
    ("fec0::1", Err(Ipv6SiteLocal)),
    // Teredo: server 65.54.227.120 in bits 32..64; client = !low32.
    ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", Ok(())),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Err(Documentation)),
    ("2001:0:4136:e378::80ff:fffe", Err(Loopback)),
    ("2001:0:a00:1::1", Err(Private)),
];

#[test]
fn every_spelling_in_the_table_gets_its_verdict() {
    assert!(TABLE.len() >= 60);
    let policy = AddressPolicy::new();
    for (host, want) in TABLE {
        let ip = match parse_target(host) {
            Ok(Target::Ip(ip)) => ip,
            other => panic!("{host} should be an IP literal, got {other:?}"),
        };
        assert_eq!(policy.check(ip, 443), *want, "{host} ({ip})");
        assert_eq!(classify(ip), *want, "{host} ({ip})");
    }
}

#[test]
fn an_allowlisted_address_passes_on_its_port_only() {
    let policy = AddressPolicy::with_allowlist(["127.0.0.1:41234", "[::1]:8080"]).unwrap();
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    assert_eq!(policy.check(lo, 41234), Ok(()));
    assert_eq!(policy.check(lo, 41235), Err(Loopback));
    assert_eq!(
        policy.check("127.0.0.2".parse().unwrap(), 41234),
        Err(Loopback)
    );
    assert_eq!(policy.check("::1".parse().unwrap(), 8080), Ok(()));
    assert_eq!(policy.check("::1".parse().unwrap(), 41234), Err(Loopback));
    // The mapped form is the same socket as the IPv4 one.
    assert_eq!(
        policy.check("::ffff:127.0.0.1".parse().unwrap(), 41234),
        Ok(())
    );
    // Public addresses need no entry.
    assert_eq!(policy.check("8.8.8.8".parse().unwrap(), 80), Ok(()));
}

#[test]
fn an_allowlisted_network_passes_on_its_port_only() {
    let policy = AddressPolicy::with_allowlist(["10.0.0.0/8:443", "[fd00::/8]:443"]).unwrap();
    assert_eq!(policy.check("10.2.3.4".parse().unwrap(), 443), Ok(()));
    assert_eq!(policy.check("10.2.3.4".parse().unwrap(), 80), Err(Private));
    assert_eq!(
        policy.check("192.168.0.1".parse().unwrap(), 443),
        Err(Private)
    );
    assert_eq!(policy.check("fd00::5".parse().unwrap(), 443), Ok(()));
    assert_eq!(
        policy.check("fc00::5".parse().unwrap(), 443),
        Err(Ipv6UniqueLocal)
    );
}

#[test]
fn an_allowlisted_host_name_is_matched_by_name_and_port() {
    let policy = AddressPolicy::with_allowlist(["Intranet.Example.:8443"]).unwrap();
    assert!(policy.allows_host("intranet.example", 8443));
    assert!(!policy.allows_host("intranet.example", 443));
    assert!(!policy.allows_host("other.example", 8443));
    // A name entry never allows an address by itself.
    assert_eq!(
        policy.check("10.0.0.1".parse().unwrap(), 8443),
        Err(Private)
    );
}

#[test]
fn allowlist_entries_parse_into_their_kinds() {
    let parse = |s: &str| s.parse::<AllowEntry>().unwrap();
    assert_eq!(
        parse("127.0.0.1:41234"),
        AllowEntry::Addr("127.0.0.1:41234".parse().unwrap())
    );
    assert_eq!(
        parse(" [::1]:8080 "),
        AllowEntry::Addr("[::1]:8080".parse().unwrap())
    );
    assert_eq!(
        parse("127.1:80"),
        AllowEntry::Addr("127.0.0.1:80".parse().unwrap())
    );
    assert_eq!(
        parse("10.9.8.7/8:443"),
        AllowEntry::Net("10.0.0.0/8".parse().unwrap(), 443)
    );
    assert_eq!(
        parse("example.com:443"),
        AllowEntry::Host("example.com".into(), 443)
    );
    assert_eq!(parse("[fd00::/8]:443").to_string(), "[fd00::/8]:443");
    assert_eq!(parse("[::1]:8080").to_string(), "[::1]:8080");
}

#[test]
fn bad_allowlist_entries_are_typed_errors() {
    let err = |s: &str| s.parse::<AllowEntry>().unwrap_err();
    assert_eq!(err(""), AllowEntryError::Empty);
    assert_eq!(err("   "), AllowEntryError::Empty);
    assert!(matches!(err("127.0.0.1"), AllowEntryError::MissingPort(_)));
    assert!(matches!(err("[::1]"), AllowEntryError::MissingPort(_)));
    assert!(matches!(err("127.0.0.1:"), AllowEntryError::BadPort(_)));
    assert!(matches!(err("127.0.0.1:0"), AllowEntryError::BadPort(_)));
    assert!(matches!(
        err("127.0.0.1:65536"),
        AllowEntryError::BadPort(_)
    ));
    assert!(matches!(err("127.0.0.1:+80"), AllowEntryError::BadPort(_)));
    assert!(matches!(err("127.0.0.1:http"), AllowEntryError::BadPort(_)));
    assert!(matches!(
        err("::1:8080"),
        AllowEntryError::UnbracketedIpv6(_)
    ));
    assert!(matches!(err("10.0.0.0/33:443"), AllowEntryError::BadNet(_)));
    assert!(matches!(err("10.0.0.0/x:443"), AllowEntryError::BadNet(_)));
    assert!(matches!(err("[::1:80"), AllowEntryError::BadHost(_)));
    assert!(matches!(err("a b:80"), AllowEntryError::BadHost(_)));
    assert!(matches!(err("256.1.1.1:80"), AllowEntryError::BadHost(_)));
    assert!(matches!(err(":80"), AllowEntryError::BadHost(_)));
    // A list fails on its first bad entry, and the message names it.
    let e = AddressPolicy::with_allowlist(["127.0.0.1:1", "nope"]).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"allowlist entry "nope" has no port (expected host:port)"#
    );
}

#[test]
fn allowlist_entries_deserialize_from_strings() {
    let entries: Vec<AllowEntry> = serde_json::from_str(r#"["127.0.0.1:1", "[::1]:2"]"#).unwrap();
    assert_eq!(entries.len(), 2);
    assert!(serde_json::from_str::<Vec<AllowEntry>>(r#"["nope"]"#).is_err());
}

/// This host's own addresses are refused in any range, a public one
/// included (the kernel delivers them locally), in any spelling; an exact
/// allowlist entry still lets one through on its port.
#[test]
fn the_hosts_own_addresses_are_refused_unless_allowlisted() {
    let public: IpAddr = "8.8.4.4".parse().unwrap();
    let v6: IpAddr = "2001:4860:4860::8844".parse().unwrap();
    let own = [public, v6];
    let policy = AddressPolicy::new();
    assert_eq!(policy.check(public, 5432), Ok(()), "public, not ours");
    assert_eq!(
        policy.check_besides(public, 5432, &own),
        Err(Denied::HostAddress)
    );
    // The same address mapped into IPv6.
    let mapped: IpAddr = "::ffff:8.8.4.4".parse().unwrap();
    assert_eq!(
        policy.check_besides(mapped, 80, &own),
        Err(Denied::HostAddress)
    );
    assert_eq!(
        policy.check_besides(v6, 443, &own),
        Err(Denied::HostAddress)
    );
    assert_eq!(Denied::HostAddress.as_str(), "host_address");
    let allowed = AddressPolicy::with_allowlist(["8.8.4.4:8080"]).unwrap();
    assert_eq!(allowed.check_besides(public, 8080, &own), Ok(()));
    assert_eq!(
        allowed.check_besides(public, 8081, &own),
        Err(Denied::HostAddress)
    );
    // A private one of the host's keeps its range's reason.
    assert_eq!(
        policy.check_besides(
            "10.1.2.3".parse().unwrap(),
            80,
            &["10.1.2.3".parse().unwrap()]
        ),
        Err(Private)
    );
    // Another public address is not.
    assert_eq!(
        policy.check_besides("1.1.1.1".parse().unwrap(), 443, &own),
        Ok(())
    );
}

/// The ports browsers never use for the web are refused unless an
/// allowlist entry names the port; the list is sorted (it is searched).
#[test]
fn ports_browsers_refuse_are_refused_unless_allowlisted() {
    assert!(UNSAFE_PORTS.windows(2).all(|w| w[0] < w[1]));
    let policy = AddressPolicy::new();
    for port in [25, 22, 465, 587, 6667, 1] {
        assert!(!policy.allows_port(port), "{port}");
    }
    for port in [80, 443, 8080, 8443, 3000, 65535] {
        assert!(policy.allows_port(port), "{port}");
    }
    let listed =
        AddressPolicy::with_allowlist(["mail.internal:25", "[::1]:22", "10.0.0.0/8:6667"]).unwrap();
    assert!(listed.allows_port(25) && listed.allows_port(22) && listed.allows_port(6667));
    assert!(!listed.allows_port(587));
    // Only the destinations listed on the port pass it.
    assert_eq!(listed.check("::1".parse().unwrap(), 22), Ok(()));
    assert_eq!(listed.check("10.1.2.3".parse().unwrap(), 6667), Ok(()));
    assert_eq!(
        listed.check("8.8.8.8".parse().unwrap(), 25),
        Err(UnsafePort)
    );
    assert_eq!(
        listed.check("8.8.8.8".parse().unwrap(), 22),
        Err(UnsafePort)
    );
    assert!(listed.allows_host("mail.internal", 25));
}
