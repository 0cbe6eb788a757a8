//! The vault's cookies as CDP sees them: each stored cookie becomes one
//! `Network.CookieParam` to set.

use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, CookiePartitionKey, CookieSameSite, TimeSinceEpoch,
};

use crate::vault::{Cookie, PartitionKey, SameSite};

/// The CDP form of a stored cookie. A host-only cookie (`example.com`, or
/// any cookie of an IP address) is set through a URL so it stays host-only;
/// a domain cookie (`.example.com`) through its domain.
pub fn cookie_param(c: &Cookie) -> anyhow::Result<CookieParam> {
    let host = c.domain.strip_prefix('.').unwrap_or(&c.domain);
    if host.is_empty() {
        anyhow::bail!("a stored cookie has no domain");
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let ip = bare.parse::<std::net::IpAddr>().ok();
    let is_ip = ip.is_some();
    // An IPv6 address is written in brackets in a URL.
    let url_host = match ip {
        Some(std::net::IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => host.to_owned(),
    };
    let scheme = if c.secure { "https" } else { "http" };
    let path = if c.path.starts_with('/') {
        c.path.clone()
    } else {
        "/".to_owned()
    };
    let (url, domain) = if c.domain.starts_with('.') && !is_ip {
        (None, Some(c.domain.clone()))
    } else {
        (Some(format!("{scheme}://{url_host}{path}")), None)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cookie(domain: &str) -> Cookie {
        serde_json::from_value(json!({
            "name": "sid", "value": "v", "domain": domain, "path": "/",
            "expires": -1.0, "httpOnly": true, "secure": false,
        }))
        .unwrap()
    }

    #[test]
    fn an_ipv6_cookie_is_set_through_a_bracketed_url() {
        for domain in ["::1", "[::1]"] {
            let p = cookie_param(&cookie(domain)).unwrap();
            assert_eq!(p.url.as_deref(), Some("http://[::1]/"), "{domain}");
            assert_eq!(p.domain, None);
        }
        let p = cookie_param(&cookie("127.0.0.1")).unwrap();
        assert_eq!(p.url.as_deref(), Some("http://127.0.0.1/"));
    }
}
