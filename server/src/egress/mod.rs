//! The egress guard: the forward proxy every sandboxed browser must use.
//!
//! Each sandbox gets its own listener on 127.0.0.1 ([`EgressGuard::listen`]);
//! its Chromium is started with [`chromium_proxy_args`]. The proxy resolves
//! names itself, refuses every address that is not the public Internet unless
//! allowlisted ([`AddressPolicy`]), connects to the address it checked, and
//! logs each connection or refusal per sandbox (host and port, never a URL).
//! Chromium's own service endpoints are refused by name ([`is_browser_service`]).

mod forward;
mod io;
mod own;
mod policy;
mod proxy;
mod refusals;
mod resolve;
mod services;
pub mod settings;
mod shared;
mod target;

use std::net::SocketAddr;

pub use crate::store::egress::{Decision, EgressEntry, NewEgressEntry};
pub use forward::REFUSAL_HEADER;
pub use policy::{AddressPolicy, AllowEntry, AllowEntryError, Denied, classify};
pub use proxy::{EgressGuard, EgressListener, EgressPort, Limits};
pub use refusals::{Refusal, Refusals};
pub use resolve::{Resolve, StaticResolver, SystemResolver};
pub use services::is_browser_service;
pub use settings::{EgressResolver, EgressSection};
pub use target::{BadHost, Target, parse_target};

/// The Chromium flags that send all of a browser's traffic through the proxy
/// at `addr`, loopback included, with no UDP (QUIC, WebRTC) around it.
pub fn chromium_proxy_args(addr: SocketAddr) -> Vec<String> {
    vec![
        format!("--proxy-server=http://{addr}"),
        // Without this, Chromium goes direct to localhost and 127.0.0.0/8.
        "--proxy-bypass-list=<-loopback>".to_owned(),
        "--disable-quic".to_owned(),
        "--force-webrtc-ip-handling-policy=disable_non_proxied_udp".to_owned(),
        "--webrtc-ip-handling-policy=disable_non_proxied_udp".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_flags_name_the_address_and_cover_loopback() {
        let args = chromium_proxy_args("127.0.0.1:4567".parse().unwrap());
        assert_eq!(args[0], "--proxy-server=http://127.0.0.1:4567");
        assert!(args.contains(&"--proxy-bypass-list=<-loopback>".to_owned()));
        assert!(args.contains(&"--disable-quic".to_owned()));
    }
}
