//! The vault's cookies as CDP sees them: each stored cookie becomes one
//! `Network.CookieParam` to set, and each cookie the browser holds
//! (`Storage.getCookies`) becomes a vault cookie.

use chromiumoxide::cdp::browser_protocol::network::{
    Cookie as CdpCookie, CookieParam, CookiePartitionKey, CookieSameSite, TimeSinceEpoch,
};

use crate::domain::{Cookie, PartitionKey, SameSite};

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

/// The vault form of a cookie the browser holds: the inverse of
/// [`cookie_param`]. A session cookie gets expiry -1.
pub fn vault_cookie(c: CdpCookie) -> Cookie {
    let expires = if c.session || !c.expires.is_finite() || c.expires <= 0.0 {
        -1.0
    } else {
        c.expires
    };
    Cookie {
        same_site: c.same_site.map(|s| match s {
            CookieSameSite::Strict => SameSite::Strict,
            CookieSameSite::Lax => SameSite::Lax,
            CookieSameSite::None => SameSite::None,
        }),
        partition_key: c.partition_key.map(|k| PartitionKey::Key {
            top_level_site: k.top_level_site,
            has_cross_site_ancestor: k.has_cross_site_ancestor,
        }),
        expires,
        http_only: c.http_only,
        secure: c.secure,
        name: c.name,
        value: c.value,
        domain: c.domain,
        path: c.path,
    }
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
    fn a_browser_cookie_becomes_the_vault_cookie_that_sets_it_again() {
        let cdp: CdpCookie = serde_json::from_value(json!({
            "name": "sid", "value": "v", "domain": ".example.com", "path": "/a",
            "expires": 1_893_456_000.5, "size": 4, "httpOnly": true, "secure": true,
            "session": false, "sameSite": "Lax", "priority": "Medium",
            "sourceScheme": "Secure", "sourcePort": 443,
            "partitionKey": {"topLevelSite": "https://example.com", "hasCrossSiteAncestor": false}
        }))
        .unwrap();
        let c = vault_cookie(cdp);
        assert_eq!(
            (c.name.as_str(), c.domain.as_str(), c.path.as_str()),
            ("sid", ".example.com", "/a")
        );
        assert_eq!(c.expires_ms(), Some(1_893_456_000_500));
        assert!(c.http_only && c.secure && c.same_site == Some(SameSite::Lax));
        let p = cookie_param(&c).unwrap();
        assert_eq!(p.domain.as_deref(), Some(".example.com"));
        assert_eq!(
            p.partition_key.map(|k| k.top_level_site),
            Some("https://example.com".into())
        );

        let session: CdpCookie = serde_json::from_value(json!({
            "name": "s", "value": "v", "domain": "example.com", "path": "/",
            "expires": -1, "size": 2, "httpOnly": false, "secure": false,
            "session": true, "priority": "Medium", "sourceScheme": "NonSecure", "sourcePort": 80
        }))
        .unwrap();
        let c = vault_cookie(session);
        assert!(c.is_session() && c.same_site.is_none() && c.partition_key.is_none());
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
