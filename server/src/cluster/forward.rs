//! The agent API's per-session routes on several replicas: a call for a
//! session another replica runs is sent there over the internal hop, and a
//! hop arriving here is checked before anything else reads it.
//!
//! Both are route layers of the session routes, so the body limit has
//! already applied and the path is known to be one of them.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{Peer, hop};
use crate::api::auth::Agent;
use crate::domain::{CloseReason, SessionState};
use crate::error::ApiError;
use crate::sessions::SessionError;
use crate::state::AppState;
use crate::store::api_keys::ApiKeyOwner;

/// Marks a request that arrived over the hop: it is answered here, never
/// sent on again.
#[derive(Debug, Clone, Copy)]
pub struct Forwarded;

/// The `{id}` of `/api/sessions/{id}` and `/api/sessions/{id}/…`.
pub fn session_segment(path: &str) -> Option<&str> {
    segment(path, "/api/sessions/")
}

/// The `{id}` of `/api/tasks/{id}/…` (a task's loop runs on one replica).
pub fn task_segment(path: &str) -> Option<&str> {
    segment(path, "/api/tasks/")
}

fn segment<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

/// What a call names.
enum Target {
    Session(String),
    Task(String),
}

async fn read_body(body: Body) -> Result<Bytes, ApiError> {
    // The body is already bounded (`limit_bodies`); an error is that bound.
    axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|_| ApiError::PayloadTooLarge("request body is too large".into()))
}

/// A hop from another replica: checked (signature, deployment, target,
/// time, nonce, body), then its agent is the caller and its `Authorization`
/// is ignored. A refusal is logged with its reason, never the header.
pub async fn accept_hop(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if !req.headers().contains_key(hop::HEADER) {
        return next.run(req).await;
    }
    // The body is already bounded (`limit_bodies`).
    let mut arrived = super::arrive::Arrived::read(&state.cluster, req, usize::MAX).await;
    let owner = match &arrived.claims {
        Ok(c) => c.tenant.parse().ok().map(|tenant| ApiKeyOwner {
            key_id: c.key_id.clone(),
            tenant,
        }),
        Err(_) => None,
    };
    let Some(owner) = owner else {
        return ApiError::HopRefused.into_response();
    };
    metrics::counter!("cordon_hops_accepted_total").increment(1);
    arrived.parts.headers.remove(header::AUTHORIZATION);
    arrived.parts.extensions.insert(Agent(owner));
    arrived.parts.extensions.insert(Forwarded);
    next.run(arrived.request()).await
}

/// Sends a call for a session another replica runs to that replica; a
/// session of a lost replica is ended (`replica_lost`) and answered 410.
pub async fn forward(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.extensions().get::<Forwarded>().is_some() {
        return next.run(req).await;
    }
    let path = req.uri().path();
    let target = match (session_segment(path), task_segment(path)) {
        (Some(id), _) if !state.sessions.is_local(id) => Target::Session(id.to_owned()),
        (_, Some(id)) if !state.tasks.is_local(id) => Target::Task(id.to_owned()),
        _ => return next.run(req).await,
    };
    let (mut parts, body) = req.into_parts();
    let owner = match Agent::from_request_parts(&mut parts, &state).await {
        Ok(Agent(owner)) => owner,
        Err(e) => return e.into_response(),
    };
    let found = match &target {
        Target::Session(id) => state.cluster.owner_of(&owner.tenant, id).await,
        Target::Task(id) => state.cluster.task_owner(&owner.tenant, id).await,
    };
    let is_task = matches!(target, Target::Task(_));
    let id = match target {
        Target::Session(id) => id,
        // A task of a lost replica is answered here (its abort ends it).
        Target::Task(id) => {
            if matches!(&found, Ok(Some(r)) if !matches!(state.cluster.peer(r).await, Ok(Peer::Up(_))))
            {
                return next.run(Request::from_parts(parts, body)).await;
            }
            id
        }
    };
    let replica = match found {
        Ok(Some(r)) => r,
        Ok(None) => return next.run(Request::from_parts(parts, body)).await,
        Err(e) => return ApiError::Internal(e).into_response(),
    };
    let started = std::time::Instant::now();
    let peer = state.cluster.peer(&replica).await;
    if matches!(peer, Ok(Peer::Lost)) && !is_task {
        match state
            .cluster
            .end_lost_session(&state.sessions, &owner.tenant, &id, &replica)
            .await
        {
            // Ended before its replica was lost (its owner was cached):
            // answered here, as any ended session is; under `shared_dir`
            // its kept downloads are here too.
            Ok(false) => return next.run(Request::from_parts(parts, body)).await,
            Ok(true) => {
                metrics::counter!("cordon_forwarded_calls_total", "outcome" => "replica_lost")
                    .increment(1);
                let gone = SessionError::Gone {
                    state: SessionState::Failed,
                    reason: Some(CloseReason::ReplicaLost),
                };
                return ApiError::from(gone).into_response();
            }
            Err(e) => return ApiError::Internal(e).into_response(),
        }
    }
    let answer = match peer {
        Ok(Peer::Up(url)) => match send(&state, &url, &replica, &owner, parts, body, None).await {
            Ok(res) => Ok(res),
            Err(Failure::Answer(res)) => Ok(res),
            Err(Failure::Unreachable(why)) => {
                match state.cluster.peer_after_failure(&replica, why).await {
                    Ok(peer) => Err(peer),
                    Err(e) => return ApiError::Internal(e).into_response(),
                }
            }
        },
        Ok(other) => Err(other),
        Err(e) => return ApiError::Internal(e).into_response(),
    };
    let (outcome, res) = match answer {
        Ok(res) => ("forwarded", res),
        // A task whose replica was lost just now: the retry is answered
        // here (see above).
        Err(Peer::Lost) if is_task => (
            "replica_lost",
            ApiError::ReplicaUnreachable(replica.clone()).into_response(),
        ),
        Err(Peer::Lost) => {
            match state
                .cluster
                .end_lost_session(&state.sessions, &owner.tenant, &id, &replica)
                .await
            {
                Ok(true) => {}
                // It had ended already (its owner was cached) and the
                // request is spent: the retry is answered here (below).
                Ok(false) => {
                    return ApiError::ReplicaUnreachable(replica.clone()).into_response();
                }
                Err(e) => return ApiError::Internal(e).into_response(),
            }
            let gone = SessionError::Gone {
                state: SessionState::Failed,
                reason: Some(CloseReason::ReplicaLost),
            };
            ("replica_lost", ApiError::from(gone).into_response())
        }
        Err(Peer::Unreachable(why)) => {
            tracing::warn!(replica = %replica, reason = %why, "a session's replica is unreachable");
            (
                "unreachable",
                ApiError::ReplicaUnreachable(replica.clone()).into_response(),
            )
        }
        Err(Peer::Up(_)) => unreachable!("an up peer is answered above"),
    };
    metrics::counter!("cordon_forwarded_calls_total", "outcome" => outcome).increment(1);
    metrics::histogram!("cordon_forward_seconds").record(started.elapsed().as_secs_f64());
    res
}

enum Failure {
    /// An answer to give as it is (the body could not be read: 413).
    Answer(Response),
    /// The replica could not be reached.
    Unreachable(String),
}

/// Headers never copied across the hop, either way.
fn skipped(name: &header::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization"
            | "cookie"
            | "host"
            | "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "proxy-authorization"
            | hop::HEADER
    )
}

async fn send(
    state: &AppState,
    base: &str,
    replica: &str,
    owner: &ApiKeyOwner,
    parts: axum::http::request::Parts,
    body: Body,
    host: Option<String>,
) -> Result<Response, Failure> {
    let bytes = read_body(body)
        .await
        .map_err(|e| Failure::Answer(e.into_response()))?;
    let path = super::arrive::path_of(&parts.uri);
    let Some(signed) = state.cluster.sign(
        replica,
        parts.method.as_str(),
        &path,
        &bytes,
        owner.tenant.as_str(),
        &owner.key_id,
    ) else {
        return Err(Failure::Unreachable("no cluster_secret".into()));
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if !skipped(name) {
            headers.append(name, value.clone());
        }
    }
    headers.insert(
        hop::HEADER,
        HeaderValue::from_str(&signed).map_err(|_| Failure::Unreachable("unsignable".into()))?,
    );
    if let Some(h) = host.and_then(|h| HeaderValue::from_str(&h).ok()) {
        headers.insert(header::HOST, h);
    }
    let res = state
        .cluster
        .client()
        .request(parts.method, format!("{base}{path}"))
        .headers(headers)
        .body(bytes)
        .send()
        .await
        .map_err(|e| Failure::Unreachable(why_unreachable(&e)))?;
    let mut out = Response::builder().status(res.status());
    if let Some(h) = out.headers_mut() {
        for (name, value) in res.headers() {
            if !skipped(name) {
                h.append(name, value.clone());
            }
        }
    }
    out.body(Body::from_stream(res.bytes_stream()))
        .map_err(|_| Failure::Unreachable("malformed answer".into()))
}

/// The separator between the replica's name and rmcp's own id in an
/// `Mcp-Session-Id` (names cannot hold it).
const MCP_SEPARATOR: char = '~';

/// `/mcp` on several replicas, inside the key check: MCP sessions live in
/// the process that served `initialize`, so their ids name it
/// (`<replica>~<id>`, set on the way out); a request for another replica's
/// MCP session goes there over the hop, one for this replica's continues
/// with rmcp's own id.
pub async fn mcp_route(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    const HEADER: &str = "mcp-session-id";
    let named = req
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(MCP_SEPARATOR))
        .map(|(r, id)| (r.to_owned(), id.to_owned()));
    if let Some((replica, id)) = named {
        if replica != state.cluster.name() && req.extensions().get::<Forwarded>().is_none() {
            let (mut parts, body) = req.into_parts();
            let owner = match Agent::from_request_parts(&mut parts, &state).await {
                Ok(Agent(owner)) => owner,
                Err(e) => return e.into_response(),
            };
            return match state.cluster.peer(&replica).await {
                Ok(Peer::Up(base)) => {
                    let host = mcp_host(&state, &base);
                    match send(&state, &base, &replica, &owner, parts, body, Some(host)).await {
                        Ok(res) | Err(Failure::Answer(res)) => {
                            metrics::counter!("cordon_forwarded_calls_total", "outcome" => "mcp")
                                .increment(1);
                            res
                        }
                        Err(Failure::Unreachable(_)) => {
                            ApiError::ReplicaUnreachable(replica).into_response()
                        }
                    }
                }
                // Its replica is gone, and the MCP session with it: as for
                // any unknown MCP session, the client starts a new one.
                Ok(_) => {
                    (axum::http::StatusCode::NOT_FOUND, "MCP session not found").into_response()
                }
                Err(e) => ApiError::Internal(e).into_response(),
            };
        }
        if let Ok(v) = HeaderValue::from_str(&id) {
            req.headers_mut().insert(HEADER, v);
        }
    }
    let mut res = next.run(req).await;
    let own = res
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.contains(MCP_SEPARATOR))
        .map(|v| format!("{}{MCP_SEPARATOR}{v}", state.cluster.name()));
    if let Some(v) = own.and_then(|v| HeaderValue::from_str(&v).ok()) {
        res.headers_mut().insert(HEADER, v);
    }
    res
}

/// The `Host` the replica's MCP endpoint answers to: the public URL's
/// host, else `localhost` at its port.
fn mcp_host(state: &AppState, base: &str) -> String {
    if let Some(host) = state
        .settings
        .public_url()
        .and_then(|u| u.host_str().map(str::to_owned))
    {
        return host;
    }
    let port = url::Url::parse(base)
        .ok()
        .and_then(|u| u.port_or_known_default())
        .unwrap_or(80);
    format!("localhost:{port}")
}

/// Why a hop could not be sent, for the log: a TLS refusal (the peer does
/// not present this deployment's certificate) is named as such.
pub(crate) fn why_unreachable(e: &reqwest::Error) -> String {
    // An `io::Error`'s `source()` skips the error it wraps (tokio-rustls
    // wraps rustls' in one, hyper-util that in another): look inside.
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cause {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return format!("TLS: {tls} (every replica must serve this deployment's tls_cert)");
        }
        cause = match err
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    if e.is_connect() {
        "connection refused or timed out".into()
    } else {
        "the hop failed".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_segment_is_the_id_after_api_sessions() {
        assert_eq!(session_segment("/api/sessions/s_1"), Some("s_1"));
        assert_eq!(session_segment("/api/sessions/s_1/click"), Some("s_1"));
        assert_eq!(
            session_segment("/api/sessions/s_1/tabs/t/close"),
            Some("s_1")
        );
        assert_eq!(session_segment("/api/sessions"), None);
        assert_eq!(session_segment("/api/sessions/"), None);
        assert_eq!(session_segment("/api/tasks/x"), None);
        assert_eq!(task_segment("/api/tasks/t_1/abort"), Some("t_1"));
        assert_eq!(task_segment("/api/tasks"), None);
    }

    #[test]
    fn credentials_and_the_hop_itself_never_cross() {
        for h in [
            "authorization",
            "cookie",
            "host",
            "x-cordon-hop",
            "proxy-authorization",
        ] {
            assert!(skipped(&header::HeaderName::from_static(h)), "{h}");
        }
        for h in [
            "content-type",
            "accept",
            "retry-after",
            "content-disposition",
        ] {
            assert!(!skipped(&header::HeaderName::from_static(h)), "{h}");
        }
    }
}
