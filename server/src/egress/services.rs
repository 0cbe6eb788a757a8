//! Chromium's own service endpoints, refused whatever the policy says.
//!
//! A fresh profile still reaches out at start-up even with
//! `--disable-background-networking` and `--disable-component-update`: an
//! on-demand component check to `update.googleapis.com` (http and https)
//! and, before `NetworkTimeServiceQuerying` was turned off, a clock query
//! to `clients2.google.com` (seen in the egress log and a net-log,
//! 2026-11-22). None is a site an agent browses, and each tells Google a
//! session started; the guard answers them 403 with reason
//! `browser_service` before any name is resolved.
//!
//! `accounts.google.com` is not here: it is also a real login site.
//! Chromium's own `ListAccounts` request to it at start-up, and the
//! on-demand component check above, no longer leave the browser at all
//! (`sandbox::chromium::BASE_FLAGS` points both at a port Chromium
//! refuses); this list stays for older or differently built browsers.

/// Exact host names (lower case, no trailing dot).
const HOSTS: &[&str] = &[
    "update.googleapis.com",
    "clients1.google.com",
    "clients2.google.com",
    "clients2.googleusercontent.com",
    "clientservices.googleapis.com",
    "redirector.gvt1.com",
    "edgedl.me.gvt1.com",
    "optimizationguide-pa.googleapis.com",
    "safebrowsingohttpgateway.googleapis.com",
];

/// The refusal reason for these hosts.
pub const REASON: &str = "browser_service";

/// Whether `host` (as the guard parsed it: lower case, no trailing dot) is
/// one of Chromium's service endpoints.
pub fn is_browser_service(host: &str) -> bool {
    HOSTS.contains(&host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::{Target, parse_target};

    fn verdict(spelling: &str) -> bool {
        match parse_target(spelling).unwrap() {
            Target::Name(n) => is_browser_service(&n),
            Target::Ip(_) => false,
        }
    }

    #[test]
    fn chromiums_update_and_time_endpoints_are_refused_in_any_spelling() {
        for s in [
            "update.googleapis.com",
            "UPDATE.googleapis.com",
            "update.googleapis.com.",
            "clients2.google.com",
        ] {
            assert!(verdict(s), "{s}");
        }
    }

    #[test]
    fn sites_that_merely_look_alike_are_not() {
        for s in [
            "accounts.google.com",
            "www.google.com",
            "googleapis.com",
            "evil-update.googleapis.com.example",
            "xupdate.googleapis.com",
            "example.com",
        ] {
            assert!(!verdict(s), "{s}");
        }
    }
}
