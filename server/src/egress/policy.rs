//! The address policy: which `ip:port` a sandbox may connect to.
//!
//! Every address the guard would connect to passes through [`AddressPolicy::check`]:
//! the explicit allowlist first, then the built-in refusal of every range that
//! is not the public Internet. IPv6 forms that carry an IPv4 address (mapped,
//! compatible, SIIT, NAT64, 6to4, Teredo) are judged by the IPv4 they carry.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::target::{Target, parse_target};

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Denied {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16.
    Private,
    /// Carrier-grade NAT, 100.64.0.0/10.
    Cgnat,
    /// 169.254.0.0/16.
    LinkLocal,
    /// Instance metadata services: 169.254.169.254, fd00:ec2::254, Azure's 168.63.129.16.
    CloudMetadata,
    /// 224.0.0.0/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 0.0.0.0, ::.
    Unspecified,
    /// 0/8, 192.0.0/24, 192.88.99/24, 240/4, and IPv6 outside global unicast.
    Reserved,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 198.18.0.0/15, 2001:2::/48.
    Benchmarking,
    /// fc00::/7.
    Ipv6UniqueLocal,
    /// fe80::/10.
    Ipv6LinkLocal,
    /// fec0::/10 (deprecated site-local).
    Ipv6SiteLocal,
    /// An address of this host's own interfaces (in any range).
    HostAddress,
    /// A port browsers refuse for the web (SMTP, SSH, IRC…), to an
    /// address not allowlisted on it.
    UnsafePort,
}

impl Denied {
    /// A stable name, as written to the egress log.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::Cgnat => "cgnat",
            Self::LinkLocal => "link_local",
            Self::CloudMetadata => "cloud_metadata",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Unspecified => "unspecified",
            Self::Reserved => "reserved",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Ipv6UniqueLocal => "ipv6_unique_local",
            Self::Ipv6LinkLocal => "ipv6_link_local",
            Self::Ipv6SiteLocal => "ipv6_site_local",
            Self::HostAddress => "host_address",
            Self::UnsafePort => "unsafe_port",
        }
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Loopback => "loopback address",
            Self::Private => "private address (RFC 1918)",
            Self::Cgnat => "carrier-grade NAT address",
            Self::LinkLocal => "link-local address",
            Self::CloudMetadata => "cloud metadata address",
            Self::Multicast => "multicast address",
            Self::Broadcast => "broadcast address",
            Self::Unspecified => "unspecified address",
            Self::Reserved => "reserved address",
            Self::Documentation => "documentation address",
            Self::Benchmarking => "benchmarking address",
            Self::Ipv6UniqueLocal => "IPv6 unique local address",
            Self::Ipv6LinkLocal => "IPv6 link-local address",
            Self::Ipv6SiteLocal => "IPv6 site-local address",
            Self::HostAddress => "an address of this host",
            Self::UnsafePort => "a port browsers never use for the web",
        };
        f.write_str(text)
    }
}

impl std::error::Error for Denied {}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(segments: [u16; 8], len: u8) -> Ipv6Net {
    let [a, b, c, d, e, f, g, h] = segments;
    Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len)
}

/// IPv4 refusals; the first match wins, so single addresses come before their ranges.
const V4_RULES: &[(Ipv4Net, Denied)] = &[
    (v4(169, 254, 169, 254, 32), Denied::CloudMetadata),
    (v4(168, 63, 129, 16, 32), Denied::CloudMetadata),
    (v4(255, 255, 255, 255, 32), Denied::Broadcast),
    (v4(0, 0, 0, 0, 32), Denied::Unspecified),
    (v4(0, 0, 0, 0, 8), Denied::Reserved),
    (v4(10, 0, 0, 0, 8), Denied::Private),
    (v4(100, 64, 0, 0, 10), Denied::Cgnat),
    (v4(127, 0, 0, 0, 8), Denied::Loopback),
    (v4(169, 254, 0, 0, 16), Denied::LinkLocal),
    (v4(172, 16, 0, 0, 12), Denied::Private),
    (v4(192, 0, 0, 0, 24), Denied::Reserved),
    (v4(192, 0, 2, 0, 24), Denied::Documentation),
    (v4(192, 88, 99, 0, 24), Denied::Reserved),
    (v4(192, 168, 0, 0, 16), Denied::Private),
    (v4(198, 18, 0, 0, 15), Denied::Benchmarking),
    (v4(198, 51, 100, 0, 24), Denied::Documentation),
    (v4(203, 0, 113, 0, 24), Denied::Documentation),
    (v4(224, 0, 0, 0, 4), Denied::Multicast),
    (v4(240, 0, 0, 0, 4), Denied::Reserved),
];

/// IPv6 refusals that do not depend on an embedded IPv4; first match wins.
const V6_RULES: &[(Ipv6Net, Denied)] = &[
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), Denied::Unspecified),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), Denied::Loopback),
    (
        v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128),
        Denied::CloudMetadata,
    ),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), Denied::Multicast),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), Denied::Ipv6LinkLocal),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), Denied::Ipv6SiteLocal),
    (
        v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        Denied::Ipv6UniqueLocal,
    ),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), Denied::Reserved),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), Denied::Reserved),
    (
        v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        Denied::Documentation,
    ),
    (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), Denied::Documentation),
    (v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48), Denied::Benchmarking),
    (v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28), Denied::Reserved),
    (v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28), Denied::Reserved),
    (v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), Denied::Reserved),
];

/// Judges an address by the built-in rules alone (no allowlist).
pub fn classify(ip: IpAddr) -> Result<(), Denied> {
    match ip {
        IpAddr::V4(a) => classify_v4(a),
        IpAddr::V6(a) => classify_v6(a),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), Denied> {
    match V4_RULES.iter().find(|(net, _)| net.contains(&ip)) {
        Some((_, why)) => Err(*why),
        None => Ok(()),
    }
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), Denied> {
    if let Some((_, why)) = V6_RULES.iter().find(|(net, _)| net.contains(&ip)) {
        return Err(*why);
    }
    let s = ip.segments();
    let bits = ip.to_bits();
    let low32 = Ipv4Addr::from_bits(bits as u32);
    match s {
        // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64) reach the IPv4 itself.
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0x64, 0xff9b, 0, 0, 0, 0, _, _] => classify_v4(low32),
        // ::a.b.c.d (compatible) and ::ffff:0:a.b.c.d (SIIT): deprecated, never public.
        [0, 0, 0, 0, 0, 0, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => {
            classify_v4(low32).and(Err(Denied::Reserved))
        }
        // 6to4: 2002:AABB:CCDD::/48 routes to a.b.c.d.
        [0x2002, hi, lo, ..] => {
            classify_v4(Ipv4Addr::from_bits(u32::from(hi) << 16 | u32::from(lo)))
        }
        // Teredo: the server in bits 32..64, the client (inverted) in the low 32.
        [0x2001, 0, hi, lo, ..] => {
            classify_v4(Ipv4Addr::from_bits(u32::from(hi) << 16 | u32::from(lo)))?;
            classify_v4(Ipv4Addr::from_bits(!(bits as u32)))
        }
        // Only global unicast (2000::/3) is the public IPv6 Internet.
        [first, ..] if first & 0xe000 == 0x2000 => Ok(()),
        _ => Err(Denied::Reserved),
    }
}

/// One allowlist entry: an exact address, a network, or a host name, each with one port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum AllowEntry {
    /// `127.0.0.1:41234`, `[::1]:8080`.
    Addr(SocketAddr),
    /// `10.0.0.0/8:443`, `[fd00::/8]:443`.
    Net(IpNet, u16),
    /// `intranet.example:443`: whatever that name resolves to, on that port.
    Host(String, u16),
}

/// Why an allowlist entry could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowEntryError {
    /// Nothing was given.
    #[error("empty allowlist entry")]
    Empty,
    /// No `:port` at the end.
    #[error("allowlist entry {0:?} has no port (expected host:port)")]
    MissingPort(String),
    /// The port is not a number from 1 to 65535.
    #[error("allowlist entry {0:?} has an invalid port")]
    BadPort(String),
    /// An IPv6 address without brackets.
    #[error("allowlist entry {0:?}: write IPv6 addresses in brackets, as [::1]:8080")]
    UnbracketedIpv6(String),
    /// A malformed `address/prefix`.
    #[error("allowlist entry {0:?} has an invalid network")]
    BadNet(String),
    /// A malformed address or host name.
    #[error("allowlist entry {0:?} has an invalid host")]
    BadHost(String),
}

impl FromStr for AllowEntry {
    type Err = AllowEntryError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let s = raw.trim();
        if s.is_empty() {
            return Err(AllowEntryError::Empty);
        }
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (inner, tail) = rest
                .split_once(']')
                .ok_or_else(|| AllowEntryError::BadHost(raw.into()))?;
            let port = tail
                .strip_prefix(':')
                .ok_or_else(|| AllowEntryError::MissingPort(raw.into()))?;
            (inner, port)
        } else {
            let (host, port) = s
                .rsplit_once(':')
                .ok_or_else(|| AllowEntryError::MissingPort(raw.into()))?;
            if host.contains(':') {
                return Err(AllowEntryError::UnbracketedIpv6(raw.into()));
            }
            (host, port)
        };
        let port = match port.parse::<u16>() {
            Ok(p) if p != 0 && port.bytes().all(|b| b.is_ascii_digit()) => p,
            _ => return Err(AllowEntryError::BadPort(raw.into())),
        };
        if host.contains('/') {
            let net: IpNet = host
                .parse()
                .map_err(|_| AllowEntryError::BadNet(raw.into()))?;
            return Ok(Self::Net(net.trunc(), port));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(Self::Addr(SocketAddr::new(ip, port)));
        }
        match parse_target(host) {
            Ok(Target::Ip(ip)) => Ok(Self::Addr(SocketAddr::new(ip, port))),
            Ok(Target::Name(name)) => Ok(Self::Host(name, port)),
            Err(_) => Err(AllowEntryError::BadHost(raw.into())),
        }
    }
}

impl TryFrom<String> for AllowEntry {
    type Error = AllowEntryError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl fmt::Display for AllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Addr(a) => write!(f, "{a}"),
            Self::Net(IpNet::V4(n), port) => write!(f, "{n}:{port}"),
            Self::Net(IpNet::V6(n), port) => write!(f, "[{n}]:{port}"),
            Self::Host(h, port) => write!(f, "{h}:{port}"),
        }
    }
}

/// The built-in refusals plus an explicit allowlist. The default refuses
/// everything but the public Internet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allow: Vec<AllowEntry>,
}

impl AddressPolicy {
    /// The built-in rules with an empty allowlist.
    pub fn new() -> Self {
        Self::default()
    }

    /// The built-in rules plus `entries`, each parsed as an [`AllowEntry`].
    pub fn with_allowlist<I, S>(entries: I) -> Result<Self, AllowEntryError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let allow = entries
            .into_iter()
            .map(|e| e.as_ref().parse())
            .collect::<Result<_, _>>()?;
        Ok(Self { allow })
    }

    /// The built-in rules plus entries already parsed (from the settings).
    pub fn with_entries(entries: &[AllowEntry]) -> Self {
        Self {
            allow: entries.to_vec(),
        }
    }

    /// Adds one entry.
    pub fn allow(mut self, entry: AllowEntry) -> Self {
        self.allow.push(entry);
        self
    }

    /// The allowlist.
    pub fn allowlist(&self) -> &[AllowEntry] {
        &self.allow
    }

    /// May the guard connect to `ip:port`? An allowlisted address or network
    /// passes on its port only; anything else must be on the public Internet.
    pub fn check(&self, ip: IpAddr, port: u16) -> Result<(), Denied> {
        self.check_besides(ip, port, &[])
    }

    /// [`check`](Self::check), and `own` (this host's addresses) refused
    /// too unless allowlisted, a public one included: the kernel delivers
    /// a connection to one of them locally.
    pub fn check_besides(&self, ip: IpAddr, port: u16, own: &[IpAddr]) -> Result<(), Denied> {
        let ip = ip.to_canonical();
        let listed = self.allow.iter().any(|entry| match entry {
            AllowEntry::Addr(a) => a.ip().to_canonical() == ip && a.port() == port,
            AllowEntry::Net(net, p) => *p == port && net.contains(&ip),
            AllowEntry::Host(..) => false,
        });
        if listed {
            return Ok(());
        }
        // An allowlisted port opens only the destinations listed on it.
        if unsafe_port(port) {
            return Err(Denied::UnsafePort);
        }
        // The ranges name the reason first (loopback, private…); what
        // passes them and is still the host's is refused as such.
        classify(ip)?;
        if own.contains(&ip) {
            Err(Denied::HostAddress)
        } else {
            Ok(())
        }
    }

    /// May anything be reached on `port`? Not the ports browsers refuse
    /// for the web themselves ([`unsafe_port`]: SMTP, SSH, IRC…), so only
    /// a compromised browser would ask for them, unless an allowlist entry
    /// names that port; then only its destinations pass
    /// ([`check`](Self::check) refuses the others, after the lookup).
    pub fn allows_port(&self, port: u16) -> bool {
        !unsafe_port(port)
            || self.allow.iter().any(|e| match e {
                AllowEntry::Addr(a) => a.port() == port,
                AllowEntry::Net(_, p) | AllowEntry::Host(_, p) => *p == port,
            })
    }

    /// Is the host name `name` (as [`parse_target`] normalised it) allowlisted on `port`?
    /// Its resolved addresses then skip [`check`](Self::check).
    pub fn allows_host(&self, name: &str, port: u16) -> bool {
        self.allow
            .iter()
            .any(|e| matches!(e, AllowEntry::Host(h, p) if h == name && *p == port))
    }
}

/// Chromium's restricted ports (`net/base/port_util.cc`): a page cannot
/// use them (`ERR_UNSAFE_PORT`), so the guard refuses them too, and a
/// compromised browser cannot relay mail, SSH or IRC through it.
const UNSAFE_PORTS: &[u16] = &[
    1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
    103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465,
    512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993,
    995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668,
    6669, 6679, 6697, 10080,
];

/// Whether browsers refuse `port` for the web ([`UNSAFE_PORTS`]).
pub fn unsafe_port(port: u16) -> bool {
    UNSAFE_PORTS.binary_search(&port).is_ok()
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
