//! Checks at the edge of the HTTP surface, before any handler runs.
//!
//! - The dashboard (everything outside `/api/` and `/mcp`) answers only
//!   requests whose `Host` is one of Cordon's own names, so a page on
//!   another site cannot read it through DNS rebinding. The probes
//!   (`/healthz`, `/readyz`, `/metrics`) also take an IP literal or
//!   `localhost` (a kubelet asks by the pod's IP; a name a rebinding page
//!   controls is never an IP literal).
//! - `/api/`, `/mcp` and the CDP endpoint (`/cdp/…`) are reached by any
//!   name: every request there carries a bearer API key (or, on `/cdp/`, a
//!   single-use connect token), which a rebinding page does not have (and
//!   `/mcp` checks `Host` itself, see `api::mcp::allowed_hosts`).
//! - Its server functions and WebSocket upgrades under `/ui/`, and every
//!   other non-GET request to it, need an `Origin` that is Cordon's own, so
//!   a page in another tab cannot post to them.
//! - Every error under `/api/` is the API's JSON shape, whoever produced it
//!   (a 413 from the body limit, a query string that does not parse, a
//!   method the route does not have).
//! - A server function's error answers with its `UiError`'s status, not
//!   server_fn's 500.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The names and origins the dashboard answers to.
#[derive(Debug, Clone)]
pub struct Origins(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// `host[:port]` values accepted in `Host`, lower case.
    hosts: HashSet<String>,
    /// `scheme://host[:port]` values accepted in `Origin`, lower case.
    origins: HashSet<String>,
}

impl Origins {
    /// Cordon's own names: `localhost`, `127.0.0.1` and `[::1]` on the bound
    /// port, reached over `https` when the listener speaks TLS itself (`tls`)
    /// and `http` otherwise, and the host of `public_url` when one is set.
    pub fn new(bound: SocketAddr, tls: bool, public_url: Option<&url::Url>) -> Self {
        let port = bound.port();
        let (scheme, default_port) = if tls { ("https", 443) } else { ("http", 80) };
        let mut hosts: HashSet<String> = [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
        ]
        .into_iter()
        .collect();
        if port == default_port {
            // Browsers leave out the scheme's default port.
            hosts.extend(["localhost", "127.0.0.1", "[::1]"].map(String::from));
        }
        let mut origins: HashSet<String> =
            hosts.iter().map(|h| format!("{scheme}://{h}")).collect();
        if let Some(url) = public_url
            && let Some(host) = url.host_str()
        {
            let host = host.to_ascii_lowercase();
            let with_port = match url.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.clone(),
            };
            origins.insert(format!("{}://{with_port}", url.scheme()));
            if url.port().is_none() {
                // `Host` may or may not name the scheme's default port.
                let default = url.port_or_known_default().unwrap_or(80);
                hosts.insert(format!("{host}:{default}"));
            }
            hosts.insert(with_port);
        }
        Self(Arc::new(Inner { hosts, origins }))
    }

    /// `Host` on a probe: one of Cordon's names, an IP literal (v4, or v6
    /// in brackets) or `localhost`, each with or without a port.
    fn probe_host_ok(&self, headers: &HeaderMap) -> bool {
        self.host_ok(headers)
            || headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .is_some_and(literal_or_localhost)
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| self.0.hosts.contains(&h.to_ascii_lowercase()))
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::ORIGIN)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|o| self.0.origins.contains(&o.to_ascii_lowercase()))
    }
}

/// Paths that are not the dashboard (no login): the agent API and the MCP
/// endpoint (key-authenticated, reached by any name; `/mcp` checks `Host`
/// itself, against the public URL's host and the loopback names) and the
/// probes of whoever runs Cordon.
pub(crate) fn outside_dashboard(path: &str) -> bool {
    path == "/api"
        || path.starts_with("/api/")
        || path.starts_with("/cdp/")
        || path == crate::api::mcp::PATH
        || probe(path)
}

/// The probes: no key, no login, so their `Host` is checked (a page that
/// rebinds its own name to Cordon's address must not read them).
fn probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Whether `host` (a `Host` value) is an IP literal or `localhost`, with
/// or without a port. DNS rebinding needs a name the attacker's DNS
/// answers, so it can never arrive under one of these.
fn literal_or_localhost(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return false;
        };
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => return true,
            p => match p.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return false,
            },
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (Some(name), Some(port)),
            None => (Some(host), None),
        }
    };
    let port_ok = match port {
        None => true,
        Some(p) => !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()),
    };
    let name_ok = match name {
        // A bracketed IPv6 literal, checked above.
        None => true,
        Some(n) => n.eq_ignore_ascii_case("localhost") || n.parse::<std::net::Ipv4Addr>().is_ok(),
    };
    port_ok && name_ok
}

/// Refuses dashboard requests with a foreign `Host`, and state-changing or
/// upgrading ones with a foreign or missing `Origin`: 403, nothing runs.
pub async fn check_host_and_origin(
    State(origins): State<Origins>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if probe(path) {
        if !origins.probe_host_ok(req.headers()) {
            tracing::warn!(
                "probe refused: Host is neither Cordon's nor an IP literal (DNS rebinding?)"
            );
            return refused("this host name is not Cordon's; use its public URL or an IP address");
        }
        return next.run(req).await;
    }
    if outside_dashboard(path) {
        return next.run(req).await;
    }
    if !origins.host_ok(req.headers()) {
        tracing::warn!(
            "dashboard request refused: Host is not one of Cordon's names (DNS rebinding?)"
        );
        return refused("this host name is not Cordon's; use its public URL");
    }
    // Browsers send `Origin` on every request that is not a plain read
    // (a POST of a server function) and on WebSocket upgrades.
    let upgrade = req.headers().contains_key(header::UPGRADE);
    let read = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if (upgrade || !read) && !origins.origin_ok(req.headers()) {
        tracing::warn!("dashboard request refused: Origin missing or foreign");
        return refused("cross-origin request refused");
    }
    next.run(req).await
}

/// The dashboard is never framed (clickjacking: a page on another site
/// cannot show an Approvals page under a decoy button). Only a live link's
/// page (`/embed/`, outside the dashboard) may be, by its tenant's origins.
pub async fn no_framing(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::X_FRAME_OPTIONS,
        axum::http::HeaderValue::from_static("DENY"),
    );
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            axum::http::HeaderValue::from_static("frame-ancestors 'none'"),
        );
    }
    res
}

fn refused(message: &'static str) -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

/// The largest error body of another layer that is carried into the JSON
/// message.
const MAX_CARRIED: usize = 300;

/// The largest request body any route accepts; larger ones get 413 (the
/// upload route's own limit aside, see `startup`'s body limit).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Turns any error answer under `/api/` that is not already JSON into the
/// API's `{error: {code, message}}`.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path != "/api" && !path.starts_with("/api/") && !path.starts_with("/cdp/") {
        return next.run(req).await;
    }
    let res = next.run(req).await;
    let status = res.status();
    let is_json = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_owned(),
        Err(_) => String::new(),
    };
    let error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(format!(
            "request body is larger than {} bytes",
            MAX_BODY_BYTES
        )),
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::BAD_REQUEST | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            let text = text
                .strip_prefix("Failed to deserialize query string: ")
                .map(|t| format!("invalid query string: {t}"))
                .unwrap_or(text);
            ApiError::BadRequest(if text.is_empty() {
                "malformed request".into()
            } else {
                text.chars().take(MAX_CARRIED).collect()
            })
        }
        StatusCode::NOT_FOUND => ApiError::NotFound("route"),
        _ => ApiError::Internal(anyhow::anyhow!("{status}: {text}")),
    };
    let mut out = error.into_response();
    // Keep what the other layer said about the connection and methods.
    for name in [header::CONNECTION, header::ALLOW] {
        if let Some(v) = parts.headers.get(&name) {
            out.headers_mut().insert(name, v.clone());
        }
    }
    out
}

/// A server function's error answers with its [`UiError`]'s status
/// (401, 403, 404, 400, 409, 503), not server_fn's blanket 500: the error
/// is decoded from the body server_fn wrote, so every server function and
/// every argument error gets it in one place.
pub async fn server_fn_status(req: Request, next: Next) -> Response {
    if !req.uri().path().starts_with("/ui/fn/") {
        return next.run(req).await;
    }
    let res = next.run(req).await;
    if res.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    if let Ok(e) = serde_json::from_slice::<app::error::UiError>(&bytes) {
        parts.status =
            StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        parts.headers.insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_cordons_own_names_are_accepted_as_host() {
        let o = Origins::new("127.0.0.1:8080".parse().unwrap(), false, None);
        assert!(o.host_ok(&headers(&[(header::HOST, "localhost:8080")])));
        assert!(o.host_ok(&headers(&[(header::HOST, "127.0.0.1:8080")])));
        assert!(o.host_ok(&headers(&[(header::HOST, "[::1]:8080")])));
        assert!(!o.host_ok(&headers(&[(header::HOST, "evil.test:8080")])));
        assert!(!o.host_ok(&headers(&[(header::HOST, "localhost:9999")])));
        assert!(!o.host_ok(&HeaderMap::new()));
    }

    #[test]
    fn on_port_80_the_names_without_a_port_are_ours_too() {
        let o = Origins::new("127.0.0.1:80".parse().unwrap(), false, None);
        assert!(o.host_ok(&headers(&[(header::HOST, "localhost")])));
        assert!(o.origin_ok(&headers(&[(header::ORIGIN, "http://localhost")])));
        let other = Origins::new("127.0.0.1:8080".parse().unwrap(), false, None);
        assert!(!other.host_ok(&headers(&[(header::HOST, "localhost")])));
    }

    #[test]
    fn with_builtin_tls_the_loopback_names_are_https_origins() {
        let o = Origins::new("127.0.0.1:8443".parse().unwrap(), true, None);
        assert!(o.origin_ok(&headers(&[(header::ORIGIN, "https://localhost:8443")])));
        assert!(!o.origin_ok(&headers(&[(header::ORIGIN, "http://localhost:8443")])));
        let o = Origins::new("127.0.0.1:443".parse().unwrap(), true, None);
        assert!(o.host_ok(&headers(&[(header::HOST, "localhost")])));
        assert!(o.origin_ok(&headers(&[(header::ORIGIN, "https://localhost")])));
    }

    #[test]
    fn the_public_url_adds_its_host_and_origin() {
        let url = url::Url::parse("https://cordon.example.com/").unwrap();
        let o = Origins::new("127.0.0.1:8080".parse().unwrap(), false, Some(&url));
        assert!(o.host_ok(&headers(&[(header::HOST, "cordon.example.com")])));
        assert!(o.host_ok(&headers(&[(header::HOST, "cordon.example.com:443")])));
        assert!(o.origin_ok(&headers(&[(header::ORIGIN, "https://cordon.example.com")])));
        assert!(!o.origin_ok(&headers(&[(header::ORIGIN, "http://cordon.example.com")])));
        assert!(!o.origin_ok(&headers(&[(header::ORIGIN, "null")])));
    }

    #[test]
    fn probes_take_cordons_names_ip_literals_and_localhost_only() {
        let url = url::Url::parse("https://cordon.example.com/").unwrap();
        let o = Origins::new("127.0.0.1:8080".parse().unwrap(), false, Some(&url));
        for ok in [
            "cordon.example.com",
            "127.0.0.1:8080",
            "10.1.2.3:8080",
            "10.1.2.3",
            "[::1]:8080",
            "[fd00::12]",
            "[fd00::12]:9090",
            "localhost",
            "LOCALHOST:1",
        ] {
            assert!(o.probe_host_ok(&headers(&[(header::HOST, ok)])), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.nip.io",
            "localhost.evil.example",
            "10.1.2.3:",
            "10.1.2.3:80:80",
            "10.1.2.3:http",
            "0x7f.1",
            "127.1",
            "[evil.example]:80",
            "[::1",
            "[::1]x",
            "::1",
            "",
        ] {
            assert!(!o.probe_host_ok(&headers(&[(header::HOST, bad)])), "{bad}");
        }
        assert!(!o.probe_host_ok(&HeaderMap::new()));
    }

    #[test]
    fn the_agent_api_and_probes_are_not_the_dashboard() {
        assert!(outside_dashboard("/api/sessions"));
        assert!(outside_dashboard("/healthz"));
        assert!(outside_dashboard("/mcp"));
        assert!(outside_dashboard("/cdp/s_x"));
        assert!(!outside_dashboard("/cdpx"));
        assert!(!outside_dashboard("/mcpx"));
        assert!(!outside_dashboard("/apix"));
        assert!(!outside_dashboard("/ui/fn/recent_audit"));
        assert!(!outside_dashboard("/"));
    }
}
