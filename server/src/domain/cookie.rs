//! Cookies in the shape CDP and Playwright use, with the value kept out of
//! `Debug` and wiped on drop.

use std::fmt;

use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

/// One cookie, as `Network.getCookies` returns it and `Network.setCookies`
/// takes it (and as Playwright's storageState holds it). Field names are
/// CDP's in JSON. `Debug` never shows the value.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    /// Name.
    pub name: String,
    /// Value: the secret.
    pub value: String,
    /// `example.com` (host-only) or `.example.com` (domain cookie).
    pub domain: String,
    /// Path (default `/`).
    #[serde(default = "root_path")]
    pub path: String,
    /// Expiry in Unix seconds; negative for a session cookie.
    #[serde(default = "session_expiry", alias = "expirationDate")]
    pub expires: f64,
    /// `HttpOnly`.
    #[serde(default)]
    pub http_only: bool,
    /// `Secure`.
    #[serde(default)]
    pub secure: bool,
    /// `SameSite`, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<SameSite>,
    /// CHIPS partition, if the cookie is partitioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<PartitionKey>,
}

fn root_path() -> String {
    "/".into()
}

fn session_expiry() -> f64 {
    -1.0
}

/// The `SameSite` attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SameSite {
    /// `Strict`.
    #[serde(alias = "strict")]
    Strict,
    /// `Lax`.
    #[serde(alias = "lax")]
    Lax,
    /// `None`.
    #[serde(alias = "none", alias = "no_restriction")]
    None,
}

/// A partitioned cookie's key: CDP's object form, or the top-level site
/// alone as older CDP versions and Playwright write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PartitionKey {
    /// `{topLevelSite, hasCrossSiteAncestor}`.
    #[serde(rename_all = "camelCase")]
    Key {
        /// The top-level site, `https://example.com`.
        top_level_site: String,
        /// Whether a cross-site ancestor frame set it.
        #[serde(default)]
        has_cross_site_ancestor: bool,
    },
    /// The top-level site alone.
    Site(String),
}

impl Cookie {
    /// Whether it lasts only as long as the browser session.
    pub fn is_session(&self) -> bool {
        self.expires.is_nan() || self.expires <= 0.0
    }

    /// Its expiry in Unix milliseconds, `None` for a session cookie.
    pub fn expires_ms(&self) -> Option<i64> {
        if self.is_session() {
            None
        } else {
            // Saturating float-to-int conversion: absurd expiries clamp.
            Some((self.expires * 1000.0) as i64)
        }
    }

    /// Whether it has expired by `now_ms`.
    pub fn expired_at(&self, now_ms: i64) -> bool {
        self.expires_ms().is_some_and(|e| e <= now_ms)
    }

    /// The identity a browser keys cookies by: (name, domain, path).
    pub(crate) fn identity(&self) -> (&str, &str, &str) {
        (&self.name, &self.domain, &self.path)
    }
}

impl Drop for Cookie {
    fn drop(&mut self) {
        self.value.zeroize();
    }
}

impl fmt::Debug for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cookie")
            .field("name", &self.name)
            .field("value", &crate::redact::MASK)
            .field("domain", &self.domain)
            .field("path", &self.path)
            .field("expires", &self.expires)
            .field("http_only", &self.http_only)
            .field("secure", &self.secure)
            .field("same_site", &self.same_site)
            .field("partition_key", &self.partition_key)
            .finish()
    }
}

/// The earliest expiry among `cookies` in Unix ms; `None` if all are
/// session cookies.
pub fn earliest_expiry(cookies: &[Cookie]) -> Option<i64> {
    cookies.iter().filter_map(Cookie::expires_ms).min()
}

/// Playwright's storageState file: cookies, and localStorage per origin.
/// Also the shape of a credential's sealed plaintext.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StorageState {
    /// The cookies.
    pub cookies: Vec<Cookie>,
    /// localStorage per origin.
    #[serde(default)]
    pub origins: Vec<Origin>,
}

/// One origin's localStorage, as storageState holds it:
/// `{"origin": "https://app.example.com", "localStorage": [{name, value}]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    /// `scheme://host[:port]`, as `location.origin` spells it.
    pub origin: String,
    /// Its items.
    #[serde(default)]
    pub local_storage: Vec<StorageItem>,
}

impl Origin {
    /// The origin's host (`app.example.com`, `127.0.0.1`, `[::1]`), or
    /// `None` if it is not a URL with a host (`null`, `file://`).
    pub fn host(&self) -> Option<String> {
        let url = url::Url::parse(&self.origin).ok()?;
        url.host_str().map(str::to_owned)
    }
}

/// One localStorage item. `Debug` never shows the value, which is wiped on
/// drop: sites keep tokens there.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct StorageItem {
    /// The key.
    pub name: String,
    /// The value: a secret.
    pub value: String,
}

impl Drop for StorageItem {
    fn drop(&mut self) {
        self.value.zeroize();
    }
}

impl fmt::Debug for StorageItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageItem")
            .field("name", &self.name)
            .field("value", &crate::redact::MASK)
            .finish()
    }
}

/// How many localStorage items `origins` hold in all.
pub fn storage_items(origins: &[Origin]) -> usize {
    origins.iter().map(|o| o.local_storage.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "canary-c00kie-v4lue";

    fn cookie(expires: f64) -> Cookie {
        Cookie {
            name: "sid".into(),
            value: CANARY.into(),
            domain: ".example.com".into(),
            path: "/".into(),
            expires,
            http_only: true,
            secure: true,
            same_site: Some(SameSite::Lax),
            partition_key: None,
        }
    }

    #[test]
    fn an_origins_debug_hides_its_values_and_its_host_is_parsed() {
        let o: Origin = serde_json::from_value(serde_json::json!({
            "origin": "https://app.example.com:8443",
            "localStorage": [{"name": "token", "value": CANARY}]
        }))
        .unwrap();
        let shown = format!("{o:?}");
        assert!(
            !shown.contains(CANARY) && shown.contains("token"),
            "{shown}"
        );
        assert_eq!(o.host().as_deref(), Some("app.example.com"));
        let null = Origin {
            origin: "null".into(),
            local_storage: Vec::new(),
        };
        assert_eq!(null.host(), None);
    }

    #[test]
    fn debug_hides_the_value() {
        let shown = format!("{:?}", cookie(-1.0));
        assert!(!shown.contains(CANARY));
        assert!(shown.contains("sid") && shown.contains("***"), "{shown}");
    }

    #[test]
    fn the_cdp_shape_round_trips_through_json() {
        let json = r#"{"name":"sid","value":"v","domain":".example.com","path":"/a",
            "expires":1893456000.5,"size":4,"httpOnly":true,"secure":true,"session":false,
            "sameSite":"None","priority":"Medium","sameParty":false,"sourceScheme":"Secure",
            "sourcePort":443,"partitionKey":{"topLevelSite":"https://example.com","hasCrossSiteAncestor":false}}"#;
        let c: Cookie = serde_json::from_str(json).unwrap();
        assert_eq!(c.same_site, Some(SameSite::None));
        assert_eq!(
            c.partition_key,
            Some(PartitionKey::Key {
                top_level_site: "https://example.com".into(),
                has_cross_site_ancestor: false
            })
        );
        assert_eq!(c.expires_ms(), Some(1_893_456_000_500));
        let back: Cookie = serde_json::from_slice(&serde_json::to_vec(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        let text = serde_json::to_string(&c).unwrap();
        assert!(text.contains("\"httpOnly\":true") && text.contains("\"partitionKey\""));
    }

    #[test]
    fn defaults_fill_what_a_minimal_cookie_leaves_out() {
        let c: Cookie =
            serde_json::from_str(r#"{"name":"a","value":"b","domain":"example.com","partitionKey":"https://example.com"}"#)
                .unwrap();
        assert_eq!(c.path, "/");
        assert!(c.is_session() && !c.http_only && !c.secure && c.same_site.is_none());
        assert_eq!(
            c.partition_key,
            Some(PartitionKey::Site("https://example.com".into()))
        );
    }

    #[test]
    fn the_earliest_expiry_ignores_session_cookies() {
        assert_eq!(earliest_expiry(&[cookie(-1.0), cookie(0.0)]), None);
        assert_eq!(
            earliest_expiry(&[cookie(-1.0), cookie(2000.0), cookie(1000.0)]),
            Some(1_000_000)
        );
        assert!(cookie(1000.0).expired_at(1_000_000));
        assert!(!cookie(1000.0).expired_at(999_999));
        assert!(!cookie(-1.0).expired_at(i64::MAX));
    }
}
