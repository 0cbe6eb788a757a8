//! The dashboard's calls on one running session, when another replica runs
//! it: handing control back, a refresh session's preview and save, ending
//! a session. Each is a server function whose form names the session; it
//! is sent as it is to the session's replica over the signed hop (the
//! operator as the claim, never their cookie), where the auth middleware
//! takes the hop instead of a dashboard session.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::forward::Forwarded;
use super::internal::OPERATOR;
use super::{Peer, hop};
use crate::state::AppState;

/// The server functions that act on one running session, and the form
/// field naming it.
const SESSION_FNS: [(&str, &str); 4] = [
    ("/ui/fn/release_control", "session"),
    ("/ui/fn/refresh_preview", "session"),
    ("/ui/fn/save_refresh", "session"),
    ("/ui/fn/end_session", "id"),
];

/// The largest form read here (these forms are a session id and domains).
const MAX_FORM: usize = 64 * 1024;

/// Inside the auth middleware: a session function for a session another
/// replica runs goes there.
pub async fn forward_fn(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(field) = SESSION_FNS
        .iter()
        .find(|(p, _)| *p == req.uri().path())
        .map(|(_, f)| *f)
    else {
        return next.run(req).await;
    };
    if req.extensions().get::<Forwarded>().is_some() {
        return next.run(req).await;
    }
    let Some(op) = req.extensions().get::<app::api::auth::Operator>().cloned() else {
        return next.run(req).await;
    };
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM).await else {
        return crate::auth::middleware::ui_error(&app::error::UiError::invalid(
            "form",
            "too large",
        ));
    };
    let session = url::form_urlencoded::parse(&bytes)
        .find(|(k, _)| k == field)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let elsewhere = if session.is_empty() || state.sessions.is_local(&session) {
        None
    } else {
        state
            .cluster
            .session_elsewhere(&session)
            .await
            .ok()
            .flatten()
    };
    let Some(replica) = elsewhere else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let base = match state.cluster.peer(&replica).await {
        Ok(Peer::Up(base)) => base,
        // Gone or unreachable: answered here (the session is then gone).
        _ => {
            return next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
        }
    };
    let path = parts.uri.path().to_owned();
    let Some(signed) = state.cluster.sign(
        &replica,
        parts.method.as_str(),
        &path,
        &bytes,
        OPERATOR,
        &op.id,
    ) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let (host, origin) = edge_names(&state, &base);
    let mut headers = HeaderMap::new();
    for name in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(v) = parts.headers.get(&name) {
            headers.insert(name, v.clone());
        }
    }
    headers.insert(hop::HEADER, HeaderValue::from_str(&signed).expect("ASCII"));
    if let Ok(o) = HeaderValue::from_str(&origin) {
        headers.insert(header::ORIGIN, o);
    }
    let sent = state
        .cluster
        .client()
        .post(format!("{base}{path}"))
        .headers(headers)
        .header(header::HOST, host)
        .body(bytes)
        .send()
        .await;
    match sent {
        Ok(res) => {
            let mut out = Response::builder().status(res.status());
            for name in [header::CONTENT_TYPE, header::CACHE_CONTROL] {
                if let Some(v) = res.headers().get(&name) {
                    out = out.header(name, v);
                }
            }
            let body = res.bytes().await.unwrap_or_default();
            out.body(Body::from(body)).unwrap_or_else(|_| {
                crate::auth::middleware::ui_error(&app::error::UiError::internal(
                    "a malformed answer",
                ))
            })
        }
        Err(e) => {
            tracing::warn!(replica = %replica, error = %e, "dashboard call: the session's replica is unreachable");
            crate::auth::middleware::ui_error(&app::error::UiError::Unavailable {
                message: "the replica that runs this session cannot be reached; retry shortly"
                    .into(),
            })
            .into_response()
        }
    }
}

/// The `Host` and `Origin` the session's replica's edge accepts: the
/// public URL's, which every replica shares; without one (loopback trials),
/// `localhost` at the replica's own port.
fn edge_names(state: &AppState, base: &str) -> (String, String) {
    if let Some(public) = state.settings.public_url() {
        let host = match public.port() {
            Some(p) => format!("{}:{p}", public.host_str().unwrap_or("localhost")),
            None => public.host_str().unwrap_or("localhost").to_owned(),
        };
        return (host, public.origin().ascii_serialization());
    }
    let (scheme, port) = url::Url::parse(base)
        .ok()
        .map(|u| {
            (
                u.scheme().to_owned(),
                u.port_or_known_default().unwrap_or(80),
            )
        })
        .unwrap_or(("http".into(), 80));
    let host = format!("localhost:{port}");
    (host.clone(), format!("{scheme}://{host}"))
}

/// In the auth middleware: a request that carries a hop is the operator
/// it names (enabled, from the shared database) or refused.
pub async fn operator_of_hop(
    state: &AppState,
    req: Request,
) -> Result<Request, app::error::UiError> {
    let arrived = super::arrive::Arrived::read(&state.cluster, req, MAX_FORM).await;
    let claims = arrived
        .claims
        .clone()
        .map_err(|_| app::error::UiError::Unauthorized)?;
    let mut parts = arrived.parts;
    let bytes = arrived.body;
    if claims.tenant != OPERATOR {
        tracing::warn!(path = %parts.uri.path(), "dashboard hop refused: not an operator's");
        return Err(app::error::UiError::Unauthorized);
    }
    let id: crate::domain::OperatorId = claims
        .key_id
        .parse()
        .map_err(|_| app::error::UiError::Unauthorized)?;
    let row = state
        .auth
        .get(&id)
        .await
        .ok()
        .flatten()
        .filter(|r| r.disabled_at.is_none())
        .ok_or(app::error::UiError::Unauthorized)?;
    let op = state
        .auth
        .dashboard_operator(row)
        .await
        .map_err(app::error::UiError::from)?;
    parts.extensions.insert(op);
    parts.extensions.insert(Forwarded);
    Ok(Request::from_parts(parts, Body::from(bytes)))
}
