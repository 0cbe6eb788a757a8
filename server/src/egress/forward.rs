//! One proxied request: `CONNECT host:port` (https, wss) or an absolute-form
//! `http://` request (with WebSocket upgrades). Each is parsed, resolved once,
//! checked address by address, and connected to a checked address.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri, Version};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::io::{Flow, Meter, Metered, idle, stopped, tunnel};
use super::shared::Session;
use super::target::{Target, parse_target};
use crate::store::egress::{Decision, NewEgressEntry};
use crate::time::now_ms;

type Body = BoxBody<Bytes, hyper::Error>;
type Upstream = Metered<TcpStream>;

/// A client connection's place among the listener's
/// (`Limits::max_connections`): held while it is served, and handed to the
/// tunnel it becomes (a CONNECT's, a WebSocket's), which outlives hyper's
/// serving of it.
pub(super) type Place = Arc<std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>;

/// Answers one request from the browser.
pub(super) async fn handle(
    session: Arc<Session>,
    place: Place,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(if req.method() == Method::CONNECT {
        connect(session, place, req).await
    } else {
        forward(session, place, req).await
    })
}

/// Takes the connection's place for its tunnel.
fn take_place(place: &Place) -> Option<tokio::sync::OwnedSemaphorePermit> {
    place.lock().expect("place lock").take()
}

async fn connect(session: Arc<Session>, place: Place, req: Request<Incoming>) -> Response<Body> {
    let Some((host, port)) = req
        .uri()
        .authority()
        .and_then(|a| Some((a.host().to_owned(), a.port_u16()?)))
    else {
        return text(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    let (upstream, meter) = match open(&session, &host, port).await {
        Ok(up) => up,
        Err(refusal) => return refusal,
    };
    // The tunnel keeps the connection's place until it closes.
    let place = take_place(&place);
    let on_upgrade = hyper::upgrade::on(req);
    let limit = session.guard.limits.idle_timeout;
    let stop = session.stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            upgraded = on_upgrade => match upgraded {
                Ok(client) => tunnel(TokioIo::new(client), upstream, meter, limit, stop).await,
                Err(err) => tracing::debug!(error = %err, "CONNECT was not upgraded"),
            },
            () = stopped(stop.clone()) => {}
        }
        drop(place);
    });
    Response::new(empty())
}

async fn forward(
    session: Arc<Session>,
    place: Place,
    mut req: Request<Incoming>,
) -> Response<Body> {
    let uri = req.uri().clone();
    if uri.scheme_str() != Some("http") {
        return text(
            StatusCode::BAD_REQUEST,
            "expected CONNECT or an absolute http:// URL",
        );
    }
    let Some(authority) = uri.authority() else {
        return text(StatusCode::BAD_REQUEST, "the URL has no host");
    };
    let (host, port) = (authority.host(), authority.port_u16());
    // A proxy replaces Host with the URL's authority (RFC 9112, 3.2.2).
    let host_header = match port {
        Some(p) => format!("{host}:{p}"),
        None => host.to_owned(),
    };
    let Ok(host_header) = HeaderValue::from_str(&host_header) else {
        return text(StatusCode::BAD_REQUEST, "invalid host");
    };
    let (upstream, meter) = match open(&session, host, port.unwrap_or(80)).await {
        Ok(up) => up,
        Err(refusal) => return refusal,
    };
    let upgrade = wants_upgrade(req.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));

    let (parts, body) = req.into_parts();
    let mut out = Request::new(body);
    *out.method_mut() = parts.method;
    *out.uri_mut() = parts
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
    *out.version_mut() = Version::HTTP_11;
    let mut headers = parts.headers;
    let upgrade_to = headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(&mut headers);
    headers.insert(header::HOST, host_header);
    match upgrade_to.filter(|_| upgrade) {
        Some(to) => {
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            headers.insert(header::UPGRADE, to);
        }
        // One upstream connection per request: each one checked, pinned and logged.
        None => {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
    *out.headers_mut() = headers;

    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(err) => {
                tracing::debug!(error = %err, "egress upstream handshake failed");
                return text(StatusCode::BAD_GATEWAY, "the upstream server failed");
            }
        };
    let limit = session.guard.limits.idle_timeout;
    let stop = session.stop.clone();
    let conn_meter = meter.clone();
    tokio::spawn(async move {
        tokio::select! {
            res = conn.with_upgrades() => if let Err(err) = res {
                tracing::debug!(error = %err, "egress upstream connection ended with an error");
            },
            () = idle(&conn_meter, limit) => {}
            () = stopped(stop) => {}
        }
    });
    let mut resp = match sender.send_request(out).await {
        Ok(resp) => resp,
        Err(err) => {
            tracing::debug!(error = %err, "egress upstream request failed");
            return text(StatusCode::BAD_GATEWAY, "the upstream server failed");
        }
    };
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let Some(client_upgrade) = client_upgrade else {
            return text(StatusCode::BAD_GATEWAY, "unexpected protocol switch");
        };
        let upstream_upgrade = hyper::upgrade::on(&mut resp);
        // The WebSocket's tunnel keeps the connection's place.
        let place = take_place(&place);
        let stop = session.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                both = async { tokio::try_join!(client_upgrade, upstream_upgrade) } => match both {
                    Ok((client, upstream)) => {
                        tunnel(TokioIo::new(client), TokioIo::new(upstream), meter, limit, stop).await;
                    }
                    Err(err) => tracing::debug!(error = %err, "egress upgrade failed"),
                },
                () = stopped(stop.clone()) => {}
            }
            drop(place);
        });
        let (parts, _) = resp.into_parts();
        return Response::from_parts(parts, empty());
    }
    strip_hop_by_hop(resp.headers_mut());
    resp.map(BodyExt::boxed)
}

/// Parses, resolves, checks every address and connects to a checked one.
/// A refusal is logged here and comes back as the response to send.
async fn open(
    session: &Session,
    host: &str,
    port: u16,
) -> Result<(Upstream, Arc<Meter>), Response<Body>> {
    let ts = now_ms();
    let guard = &session.guard;
    let target = match parse_target(host) {
        Ok(target) => target,
        Err(err) => {
            refuse(session, ts, "(invalid)", port, "invalid_host");
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "invalid_host",
                &format!("invalid host: {err}"),
            ));
        }
    };
    let label = target.to_string();
    if !guard.policy.allows_port(port) {
        refuse(session, ts, &label, port, "unsafe_port");
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "unsafe_port",
            "cordon egress: refused (a port browsers never use for the web)",
        ));
    }
    if let Target::Name(name) = &target
        && super::services::is_browser_service(name)
    {
        refuse(session, ts, &label, port, super::services::REASON);
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "browser_service",
            "cordon egress: refused (a browser service endpoint)",
        ));
    }
    let addrs = match &target {
        Target::Ip(ip) => vec![*ip],
        Target::Name(name) => {
            match tokio::time::timeout(guard.limits.resolve_timeout, guard.resolver.resolve(name))
                .await
            {
                Ok(Ok(addrs)) if !addrs.is_empty() => addrs,
                _ => {
                    refuse(session, ts, &label, port, "unresolved");
                    return Err(refusal(
                        StatusCode::BAD_GATEWAY,
                        "unresolved",
                        "cordon egress: cannot resolve the host",
                    ));
                }
            }
        }
    };
    let named = matches!(&target, Target::Name(n) if guard.policy.allows_host(n, port));
    if !named {
        // All or nothing: one bad address refuses the name.
        let own = guard.own.now();
        if let Some(why) = addrs
            .iter()
            .find_map(|ip| guard.policy.check_besides(*ip, port, &own).err())
        {
            refuse(session, ts, &label, port, why.as_str());
            return Err(refusal(
                StatusCode::FORBIDDEN,
                why.as_str(),
                &format!("cordon egress: refused ({why})"),
            ));
        }
    }
    let mut entry = NewEgressEntry {
        sandbox_id: session.sandbox_id.to_string(),
        ts,
        host: label,
        port,
        decision: Decision::Allowed,
        reason: None,
        bytes_up: 0,
        bytes_down: 0,
    };
    metrics::counter!("cordon_egress_requests_total", "decision" => "allowed").increment(1);
    // Pinned: the addresses just checked, never the name again.
    match tokio::time::timeout(guard.limits.connect_timeout, connect_any(&addrs, port)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            let meter = Meter::new();
            let flow = Flow::new(entry, meter.clone(), session.log.clone());
            Ok((Metered::new(stream, meter.clone(), Some(flow)), meter))
        }
        _ => {
            entry.reason = Some("connect_failed".into());
            session.log.push(entry);
            Err(refusal(
                StatusCode::BAD_GATEWAY,
                "connect_failed",
                "cordon egress: cannot connect to the host",
            ))
        }
    }
}

async fn connect_any(addrs: &[IpAddr], port: u16) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other("no address");
    for ip in addrs {
        match TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(stream) => return Ok(stream),
            Err(err) => last = err,
        }
    }
    Err(last)
}

fn refuse(session: &Session, ts: i64, host: &str, port: u16, reason: &str) {
    metrics::counter!("cordon_egress_requests_total", "decision" => "denied").increment(1);
    let budget = session
        .refused_rows
        .lock()
        .expect("refusal budget lock")
        .take(std::time::Instant::now());
    let Some(unlogged) = budget else {
        // Past the listener's rate: counted, not logged (the journal of
        // recent refusals keeps its newest few anyway; the browser's own
        // service lookups are never the agent's doing).
        metrics::counter!("cordon_egress_log_dropped_total", "why" => "rate").increment(1);
        if reason != super::services::REASON {
            session.refusals.record(super::Refusal {
                host: host.to_owned(),
                port,
                reason: reason.to_owned(),
            });
        }
        return;
    };
    if unlogged > 0 {
        session
            .log
            .push(super::io::unlogged_row(&session.sandbox_id, ts, unlogged));
    }
    if reason == super::services::REASON {
        // Every fresh browser asks for these at start: not news, and not
        // the agent's doing.
        tracing::debug!(sandbox.id = %session.sandbox_id, egress.host = host, "egress refused a browser service");
        metrics::counter!("cordon_egress_browser_service_refused_total").increment(1);
    } else {
        tracing::info!(
            sandbox.id = %session.sandbox_id,
            egress.host = host,
            egress.port = port,
            egress.reason = reason,
            "egress refused"
        );
        session.refusals.record(super::Refusal {
            host: host.to_owned(),
            port,
            reason: reason.to_owned(),
        });
    }
    session.log.push(NewEgressEntry {
        sandbox_id: session.sandbox_id.to_string(),
        ts,
        host: host.to_owned(),
        port,
        decision: Decision::Denied,
        reason: Some(reason.to_owned()),
        bytes_up: 0,
        bytes_down: 0,
    });
}

fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && connection_tokens(headers).any(|t| t.eq_ignore_ascii_case("upgrade"))
}

fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// Removes the headers that concern only one hop, and those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = connection_tokens(headers)
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("proxy-connection"),
        HeaderName::from_static("keep-alive"),
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
}

fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// The header on every answer the guard gives in place of the upstream's,
/// so the session engine can tell a refusal from a page that says 403. Its
/// value is the logged reason (`loopback`, `unresolved`, `connect_failed` …).
pub const REFUSAL_HEADER: &str = "x-cordon-egress";

/// A refusal: `msg` as text, with [`REFUSAL_HEADER`] set to `reason`.
fn refusal(status: StatusCode, reason: &'static str, msg: &str) -> Response<Body> {
    let mut resp = text(status, msg);
    resp.headers_mut().insert(
        HeaderName::from_static(REFUSAL_HEADER),
        HeaderValue::from_static(reason),
    );
    resp
}

fn text(status: StatusCode, msg: &str) -> Response<Body> {
    let mut resp = Response::new(
        Full::new(Bytes::from(format!("{msg}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
