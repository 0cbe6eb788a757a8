//! Vault cookies as CDP `Network.CookieParam`s.

use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, CookiePartitionKey, CookieSameSite, TimeSinceEpoch,
};

use crate::vault::{Cookie, PartitionKey, SameSite};

/// The CDP form of a stored cookie. A host-only cookie (`example.com`, or
/// any cookie of an IP address) is set through a URL so it stays host-only;
/// a domain cookie (`.example.com`) through its domain.
pub(super) fn cookie_param(c: &Cookie) -> anyhow::Result<CookieParam> {
    let host = c.domain.strip_prefix('.').unwrap_or(&c.domain);
    if host.is_empty() {
        anyhow::bail!("a stored cookie has no domain");
    }
    let is_ip = host.parse::<std::net::IpAddr>().is_ok();
    let scheme = if c.secure { "https" } else { "http" };
    let path = if c.path.starts_with('/') {
        c.path.clone()
    } else {
        "/".to_owned()
    };
    let (url, domain) = if c.domain.starts_with('.') && !is_ip {
        (None, Some(c.domain.clone()))
    } else {
        (Some(format!("{scheme}://{host}{path}")), None)
    };
    Ok(CookieParam {
        name: c.name.clone(),
        value: c.value.clone(),
        url,
        domain,
        path: Some(path),
        secure: Some(c.secure),
        http_only: Some(c.http_only),
        same_site: c.same_site.map(|s| match s {
            SameSite::Strict => CookieSameSite::Strict,
            SameSite::Lax => CookieSameSite::Lax,
            SameSite::None => CookieSameSite::None,
        }),
        expires: (c.expires > 0.0).then(|| TimeSinceEpoch::new(c.expires)),
        priority: None,
        same_party: None,
        source_scheme: None,
        source_port: None,
        partition_key: c.partition_key.as_ref().map(|k| match k {
            PartitionKey::Key {
                top_level_site,
                has_cross_site_ancestor,
            } => CookiePartitionKey::new(top_level_site.clone(), *has_cross_site_ancestor),
            PartitionKey::Site(site) => CookiePartitionKey::new(site.clone(), false),
        }),
    })
}
