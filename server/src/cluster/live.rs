//! The live view of a session another replica runs: the operator's
//! WebSocket reaches whichever replica the load balancer picks; that one
//! takes the ticket (tickets live in the database) and, when the session
//! runs elsewhere, carries the upgrade to the session's replica over the
//! signed hop and splices the two connections byte for byte. The session's
//! replica runs the view as if the operator were its own (their role and
//! dashboard session are read from the shared database). With built-in
//! HTTPS the carried connection is TLS, trusting only the deployment's
//! certificate (as every hop does).

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Request, State, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;

use super::internal::{InternalOperator, OPERATOR};
use crate::state::AppState;

/// Headers of the browser's upgrade carried to the session's replica.
const CARRIED: [header::HeaderName; 2] = [header::SEC_WEBSOCKET_KEY, header::SEC_WEBSOCKET_VERSION];

/// Route layer of `/live/{session}`: a session of this replica (or none)
/// goes to the live view's handler; one running elsewhere is carried there
/// once its ticket is taken here.
pub async fn route(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(session) = req.uri().path().strip_prefix("/live/").map(str::to_owned) else {
        return next.run(req).await;
    };
    if state.sessions.is_local(&session) {
        return next.run(req).await;
    }
    let Ok(Some(replica)) = state.cluster.session_elsewhere(&session).await else {
        return next.run(req).await;
    };
    let Some(op) = req.extensions().get::<app::api::auth::Operator>().cloned() else {
        return next.run(req).await;
    };
    let ticket = req
        .uri()
        .query()
        .and_then(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "ticket")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default();
    if let Err(e) = state
        .live
        .tickets
        .redeem(&state.store, &ticket, &op.id, &session)
        .await
    {
        return crate::auth::middleware::ui_error(&app::error::UiError::forbidden(e.to_string()));
    }
    let dash = req
        .extensions()
        .get::<tower_sessions::Session>()
        .and_then(tower_sessions::Session::id)
        .map(|id| crate::ids::token_hash(&id.to_string()))
        .unwrap_or_default();
    let path = format!("/api/internal/live/{session}?dash={dash}");
    match carry(&state, req, &replica, &path, (OPERATOR, &op.id)).await {
        Ok(res) => res,
        Err(why) => {
            tracing::warn!(replica = %replica, reason = %why, "live view: cannot reach the session's replica");
            crate::auth::middleware::ui_error(&app::error::UiError::Unavailable {
                message: "the replica that runs this session cannot be reached; retry shortly"
                    .into(),
            })
        }
    }
}

/// Route layer of `/cdp/{session}`: a CDP client whose session runs on
/// another replica is authenticated here (its key, or its connect token,
/// used up here) and its upgrade carried to that replica, signed for the
/// agent (the claims' tenant and key), where `accept_hop` makes it the
/// caller. A session of this replica, or none, goes to the handler.
pub async fn route_cdp(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(session) = req
        .uri()
        .path()
        .strip_prefix("/cdp/")
        .filter(|s| !s.contains('/'))
        .map(str::to_owned)
    else {
        return next.run(req).await;
    };
    if req.headers().contains_key(super::hop::HEADER) || state.sessions.is_local(&session) {
        return next.run(req).await;
    }
    let token = req.uri().query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned())
    });
    let (mut parts, body) = req.into_parts();
    let agent = crate::api::auth::Agent::from_request_parts(&mut parts, &state).await;
    let authorization = parts
        .headers
        .contains_key(axum::http::header::AUTHORIZATION);
    let owner = match (agent, token) {
        (Ok(crate::api::auth::Agent(owner)), _) => owner,
        // A key that was sent and refused is not made good by a token
        // (as on the session's own replica).
        (Err(e), None) => return e.into_response(),
        (Err(e), Some(_)) if authorization => return e.into_response(),
        (Err(_), Some(token)) => {
            match crate::api::cdp::redeem_token(&state, &token, &session).await {
                Ok(owner) => {
                    // The handler below, if it runs, takes it as the caller.
                    parts
                        .extensions
                        .insert(crate::api::auth::Agent(owner.clone()));
                    owner
                }
                Err(e) => return e.into_response(),
            }
        }
    };
    let req = Request::from_parts(parts, body);
    let replica = match state.cluster.owner_of(&owner.tenant, &session).await {
        Ok(Some(r)) => r,
        _ => return next.run(req).await,
    };
    let path = format!("/cdp/{session}");
    match carry(
        &state,
        req,
        &replica,
        &path,
        (owner.tenant.as_str(), &owner.key_id),
    )
    .await
    {
        Ok(res) => res,
        Err(why) => {
            tracing::warn!(replica = %replica, reason = %why, "CDP: cannot reach the session's replica");
            crate::error::ApiError::ReplicaUnreachable(replica).into_response()
        }
    }
}

/// Route layer of `/embed/{session}/ws`: a live link's socket whose session
/// runs on another replica is checked here (the link in force) and carried
/// to that replica's `/api/internal/embed/{session}?link_id=…`, signed for
/// the link's agent; the token itself never crosses the hop. Anything else
/// (a session of this replica, an unusable link) goes to the handler,
/// which answers it.
pub async fn route_embed(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(session) = req
        .uri()
        .path()
        .strip_prefix("/embed/")
        .and_then(|rest| rest.strip_suffix("/ws"))
        .filter(|s| !s.contains('/'))
        .map(str::to_owned)
    else {
        return next.run(req).await;
    };
    if state.sessions.is_local(&session) {
        return next.run(req).await;
    }
    let token = req
        .uri()
        .query()
        .and_then(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == "link")
                .map(|(_, v)| v.into_owned())
        })
        .unwrap_or_default();
    let settings = &state.settings.live.tenant_live_links;
    let Ok(link) =
        crate::live::link::check(&state.store, &token, &session, |t| settings.get(t).cloned())
            .await
    else {
        return next.run(req).await;
    };
    let replica = match state.cluster.owner_of(&link.tenant, &session).await {
        Ok(Some(r)) => r,
        _ => return next.run(req).await,
    };
    let path = format!("/api/internal/embed/{session}?link_id={}", link.id);
    match carry(
        &state,
        req,
        &replica,
        &path,
        (link.tenant.as_str(), &link.key_id),
    )
    .await
    {
        Ok(res) => res,
        Err(why) => {
            tracing::warn!(replica = %replica, reason = %why, "live link: cannot reach the session's replica");
            crate::error::ApiError::ReplicaUnreachable(replica).into_response()
        }
    }
}

/// Carries `req`'s WebSocket upgrade to `path` on `replica`, signed for
/// `claims` (tenant, key), and splices the two connections.
async fn carry(
    state: &AppState,
    mut req: Request,
    replica: &str,
    path: &str,
    claims: (&str, &str),
) -> Result<Response, String> {
    let base = match state.cluster.peer(replica).await {
        Ok(super::Peer::Up(base)) => base,
        other => return Err(format!("{other:?}")),
    };
    let url = url::Url::parse(&base).map_err(|e| format!("advertise_url {base}: {e}"))?;
    let host = url
        .host_str()
        .ok_or("advertise_url has no host")?
        .to_owned();
    let port = url
        .port_or_known_default()
        .ok_or("advertise_url has no port")?;
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let signed = state
        .cluster
        .sign(replica, "GET", path, b"", claims.0, claims.1)
        .ok_or("no cluster_secret")?;
    let downstream = req
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or("not an upgrade")?;
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = match (url.scheme(), state.cluster.tls()) {
        ("https", Some(config)) => {
            let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']))
                .map_err(|e| format!("server name: {e}"))?
                .to_owned();
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            Box::new(tls)
        }
        ("http", None) => Box::new(tcp),
        (scheme, _) => {
            return Err(format!(
                "the session's replica advertises {scheme}://, which this replica does not \
                 speak over the hop"
            ));
        }
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn.with_upgrades());
    let mut up = axum::http::Request::get(path)
        .header(header::HOST, &authority)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, "websocket")
        .header(super::hop::HEADER, signed);
    for name in CARRIED {
        if let Some(v) = req.headers().get(&name) {
            up = up.header(name, v);
        }
    }
    let up = up
        .body(http_body_util::Empty::<axum::body::Bytes>::new())
        .map_err(|e| format!("request: {e}"))?;
    let res = sender
        .send_request(up)
        .await
        .map_err(|e| format!("send: {e}"))?;
    if res.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Err(format!("the session's replica answered {}", res.status()));
    }
    let mut out = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
    for name in [
        header::UPGRADE,
        header::CONNECTION,
        header::SEC_WEBSOCKET_ACCEPT,
    ] {
        if let Some(v) = res.headers().get(&name) {
            out = out.header(name, v);
        }
    }
    let upstream = hyper::upgrade::on(res);
    tokio::spawn(async move {
        let (Ok(a), Ok(b)) = (downstream.await, upstream.await) else {
            return;
        };
        let (mut a, mut b) = (TokioIo::new(a), TokioIo::new(b));
        let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
    });
    out.body(Body::empty()).map_err(|e| format!("answer: {e}"))
}

/// The carried connection to the session's replica: TCP, or TLS over it.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

#[derive(serde::Deserialize)]
pub(super) struct DashQuery {
    #[serde(default)]
    dash: String,
}

/// `GET /api/internal/live/{session}`: the carried upgrade, on the
/// session's replica.
pub(super) async fn serve(
    State(state): State<AppState>,
    axum::Extension(InternalOperator(op_id)): axum::Extension<InternalOperator>,
    Path(session): Path<String>,
    axum::extract::Query(q): axum::extract::Query<DashQuery>,
    ws: WebSocketUpgrade,
) -> Response {
    let Ok(id) = op_id.parse::<crate::domain::OperatorId>() else {
        return crate::error::ApiError::HopRefused.into_response();
    };
    let row = match state.auth.get(&id).await {
        Ok(Some(row)) if row.disabled_at.is_none() => row,
        _ => return crate::error::ApiError::HopRefused.into_response(),
    };
    let Ok(op) = state.auth.dashboard_operator(row).await else {
        return crate::error::ApiError::HopRefused.into_response();
    };
    let Ok(sid) = session.parse::<crate::domain::SessionId>() else {
        return crate::error::ApiError::NotFound("session").into_response();
    };
    let Ok(live) = state.sessions.find_live(&sid).await else {
        return crate::error::ApiError::NotFound("session").into_response();
    };
    let dash = (!q.dash.is_empty()).then_some(q.dash);
    crate::live::socket::serve_view(state, live, op, dash, ws)
}
