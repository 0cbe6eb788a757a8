//! The passkey ceremonies as JSON endpoints under `/ui/auth/` (the
//! browser's WebAuthn API needs its options and answers in exactly these
//! shapes), and logout. The ceremony state stays in the dashboard session
//! between the two steps; a finished or failed step removes it, so a
//! replayed answer finds none.

use std::net::IpAddr;

use axum::Json;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tower_sessions::Session;
use webauthn_rs::prelude::{PublicKeyCredential, RegisterPublicKeyCredential};

use app::error::UiError;

use super::Ceremony;
use super::middleware::{LOGIN_AT_KEY, operator_of, ui_error};
use super::session_store::OPERATOR_KEY;
use crate::audit::{Actor, NewEvent};
use crate::domain::OperatorId;
use crate::state::AppState;
use crate::store::operators::OperatorRow;
use crate::time::now_ms;

const CEREMONY_KEY: &str = "ceremony";

/// The ceremony endpoints.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/ui/auth/enroll/start", post(enroll_start))
        .route("/ui/auth/enroll/finish", post(register_finish))
        .route("/ui/auth/passkeys/start", post(add_start))
        .route("/ui/auth/passkeys/finish", post(register_finish))
        .route("/ui/auth/login/start", post(login_start))
        .route("/ui/auth/login/finish", post(login_finish))
        .route("/ui/auth/reauth/start", post(reauth_start))
        .route("/ui/auth/reauth/finish", post(reauth_finish))
        .route("/ui/auth/logout", post(logout))
}

/// The client's address: the connection's peer, or behind a trusted proxy
/// the address it appended last to `X-Forwarded-For` (with or without a
/// port). Only the last entry is the proxy's: when it cannot be read, the
/// entries before it (the client's own, whatever it sent) are not used
/// instead; the peer is.
fn client_of(
    headers: &axum::http::HeaderMap,
    extensions: &axum::http::Extensions,
    trusted_proxy: bool,
) -> Option<IpAddr> {
    if trusted_proxy
        && let Some(ip) = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .next_back()
            .and_then(forwarded_ip)
    {
        return Some(ip);
    }
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// One `X-Forwarded-For` entry's address: `ip`, `ip:port`, `[ip]:port`.
fn forwarded_ip(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
}

/// A call of an endpoint anyone may call, within the throttle's bounds
/// (`throttle.rs`); over them, 429 with `Retry-After` before anything is
/// read or stored.
struct Throttled;

impl axum::extract::FromRequestParts<AppState> for Throttled {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let client = client_of(
            &parts.headers,
            &parts.extensions,
            state.settings.server.trusted_proxy,
        );
        match state
            .auth
            .throttle()
            .take(client, std::time::Instant::now())
        {
            Ok(()) => Ok(Self),
            Err(wait) => {
                tracing::warn!("passkey endpoint throttled");
                let secs = wait.as_secs().max(1);
                Err((
                    StatusCode::TOO_MANY_REQUESTS,
                    [(axum::http::header::RETRY_AFTER, secs.to_string())],
                    Json(json!({
                        "kind": "unavailable",
                        "message": format!("too many passkey attempts; try again in {secs} s"),
                    })),
                )
                    .into_response())
            }
        }
    }
}

/// An answer of these endpoints: JSON, or a [`UiError`].
type Reply = Result<Response, Fail>;

struct Fail(UiError);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        ui_error(&self.0)
    }
}

impl<E: Into<UiError>> From<E> for Fail {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

/// A JSON body; a malformed one is a [`UiError::Invalid`] naming the body.
struct Body<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = Fail;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Self(v)),
            Err(e) => Err(Fail(UiError::invalid("body", rejection_text(&e)))),
        }
    }
}

fn rejection_text(e: &JsonRejection) -> String {
    let text = e.body_text();
    text.chars().take(300).collect()
}

fn session_error(e: tower_sessions::session::Error) -> UiError {
    UiError::Unavailable {
        message: format!("dashboard sessions are unavailable: {e}"),
    }
}

async fn put_ceremony(session: &Session, c: &Ceremony) -> Result<(), UiError> {
    session.insert(CEREMONY_KEY, c).await.map_err(session_error)
}

async fn take_ceremony(session: &Session) -> Result<Ceremony, UiError> {
    session
        .remove::<Ceremony>(CEREMONY_KEY)
        .await
        .map_err(session_error)?
        .ok_or_else(|| super::AuthError::NoCeremony.into())
}

fn ok_json(v: impl serde::Serialize) -> Reply {
    Ok(Json(v).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EnrollStart {
    token: String,
    passkey_name: String,
}

async fn enroll_start(
    _: Throttled,
    State(state): State<AppState>,
    session: Session,
    Body(body): Body<EnrollStart>,
) -> Reply {
    let (options, ceremony) = state
        .auth
        .enroll_start(&body.token, &body.passkey_name)
        .await?;
    put_ceremony(&session, &ceremony).await?;
    ok_json(options)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddStart {
    passkey_name: String,
}

async fn add_start(
    State(state): State<AppState>,
    session: Session,
    Body(body): Body<AddStart>,
) -> Reply {
    let id = logged_in(&state, &session).await?;
    // A stolen dashboard session must not add its own passkey: one
    // passkey check allows one new passkey.
    if !take_fresh(&session).await? {
        return Err(Fail(UiError::forbidden(
            "adding a passkey needs a fresh passkey check with one you have: use the Add passkey button, which asks for one",
        )));
    }
    let (options, ceremony) = state.auth.add_start(&id, &body.passkey_name).await?;
    put_ceremony(&session, &ceremony).await?;
    ok_json(options)
}

/// Finishes enrolling (logged in afterwards) or adding a passkey.
async fn register_finish(
    _: Throttled,
    State(state): State<AppState>,
    session: Session,
    Body(credential): Body<RegisterPublicKeyCredential>,
) -> Reply {
    let ceremony = take_ceremony(&session).await?;
    let enrolling = matches!(ceremony, Ceremony::Enroll { .. });
    if let Ceremony::Add { operator, .. } = &ceremony {
        // Adding needs the same operator still logged in.
        let current = operator_of(&state, &session).await?;
        if current.is_none_or(|o| o.id != operator.as_str()) {
            return Err(Fail(UiError::Unauthorized));
        }
    }
    let op = state.auth.register_finish(ceremony, &credential).await?;
    if enrolling {
        log_in(&state, &session, &op).await?;
    }
    ok_json(who(&op))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginStart {
    name: String,
}

async fn login_start(
    _: Throttled,
    State(state): State<AppState>,
    session: Session,
    Body(body): Body<LoginStart>,
) -> Reply {
    let (options, ceremony) = state.auth.login_start(&body.name).await?;
    put_ceremony(&session, &ceremony).await?;
    ok_json(options)
}

async fn login_finish(
    _: Throttled,
    State(state): State<AppState>,
    session: Session,
    Body(credential): Body<PublicKeyCredential>,
) -> Reply {
    let ceremony = take_ceremony(&session).await?;
    if matches!(ceremony, Ceremony::Login { reauth: true, .. }) {
        return Err(Fail(super::AuthError::NoCeremony.into()));
    }
    let op = state.auth.login_finish(ceremony, &credential).await?;
    log_in(&state, &session, &op).await?;
    ok_json(who(&op))
}

/// A logged-in operator starts proving presence again.
async fn reauth_start(State(state): State<AppState>, session: Session) -> Reply {
    let id = logged_in(&state, &session).await?;
    let (options, ceremony) = state.auth.reauth_start(&id).await?;
    put_ceremony(&session, &ceremony).await?;
    ok_json(options)
}

/// Verifies the fresh assertion and marks the session fresh for one
/// sensitive step within [`FRESH_MS`].
async fn reauth_finish(
    State(state): State<AppState>,
    session: Session,
    Body(credential): Body<PublicKeyCredential>,
) -> Reply {
    let current = logged_in(&state, &session).await?;
    let ceremony = take_ceremony(&session).await?;
    match &ceremony {
        Ceremony::Login {
            reauth: true,
            operator,
            ..
        } if *operator == current => {}
        _ => return Err(Fail(super::AuthError::NoCeremony.into())),
    }
    state.auth.login_finish(ceremony, &credential).await?;
    session
        .insert(FRESH_KEY, now_ms())
        .await
        .map_err(session_error)?;
    ok_json(json!({ "fresh": true }))
}

/// How long a fresh passkey check allows one sensitive step.
pub(crate) const FRESH_MS: i64 = 5 * 60 * 1000;
/// When the operator last proved presence again (Unix ms).
pub(crate) const FRESH_KEY: &str = "fresh_at";

/// Whether the session proved presence within [`FRESH_MS`]; the proof is
/// used up by asking.
pub(crate) async fn take_fresh(session: &Session) -> Result<bool, UiError> {
    let at = session
        .remove::<i64>(FRESH_KEY)
        .await
        .map_err(session_error)?;
    Ok(at.is_some_and(|t| now_ms() - t < FRESH_MS))
}

/// The id of the session's logged-in operator, or [`UiError::Unauthorized`].
async fn logged_in(state: &AppState, session: &Session) -> Result<OperatorId, UiError> {
    let op = operator_of(state, session)
        .await?
        .ok_or(UiError::Unauthorized)?;
    op.id
        .parse()
        .map_err(|_| UiError::internal("malformed operator id"))
}

/// Makes `op` the session's operator under a fresh session id.
async fn log_in(state: &AppState, session: &Session, op: &OperatorRow) -> Result<(), UiError> {
    let _ = state;
    session.cycle_id().await.map_err(session_error)?;
    session
        .insert(OPERATOR_KEY, op.id.as_str())
        .await
        .map_err(session_error)?;
    session
        .insert(LOGIN_AT_KEY, now_ms())
        .await
        .map_err(session_error)?;
    Ok(())
}

fn who(op: &OperatorRow) -> serde_json::Value {
    json!({ "id": op.id.as_str(), "name": op.name, "role": op.role.as_str() })
}

/// Ends the dashboard session; a form post is sent to the login page.
async fn logout(State(state): State<AppState>, session: Session) -> Reply {
    if let Some(op) = operator_of(&state, &session).await? {
        state
            .store
            .audit_append(
                NewEvent::new(Actor::Operator(op.id.clone()), "operator.logout").outcome("ok"),
            )
            .await
            .map_err(|e| {
                tracing::error!(error = %format!("{e:#}"), "failed to audit a logout");
                UiError::internal("logging out failed on the server; see its log")
            })?;
    }
    session.flush().await.map_err(session_error)?;
    Ok((StatusCode::SEE_OTHER, Redirect::to("/login")).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(xff: &[&str], trusted: bool) -> Option<IpAddr> {
        let mut headers = axum::http::HeaderMap::new();
        for v in xff {
            headers.append("x-forwarded-for", v.parse().unwrap());
        }
        let mut ext = axum::http::Extensions::new();
        ext.insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            [10, 0, 0, 9],
            4000,
        ))));
        client_of(&headers, &ext, trusted)
    }

    #[test]
    fn only_the_proxys_own_last_entry_names_the_client() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(client(&["203.0.113.5"], true), ip("203.0.113.5"));
        // What the client sent comes first; the proxy appends last.
        assert_eq!(client(&["1.2.3.4, 203.0.113.5"], true), ip("203.0.113.5"));
        assert_eq!(client(&["1.2.3.4", "203.0.113.5"], true), ip("203.0.113.5"));
        // With a port.
        assert_eq!(
            client(&["1.2.3.4, 203.0.113.5:5555"], true),
            ip("203.0.113.5")
        );
        assert_eq!(client(&["[2001:db8::1]:443"], true), ip("2001:db8::1"));
        // A last entry that cannot be read: the peer, not the client's own.
        assert_eq!(client(&["1.2.3.4, unknown"], true), ip("10.0.0.9"));
        // Without a trusted proxy the header is not read at all.
        assert_eq!(client(&["203.0.113.5"], false), ip("10.0.0.9"));
        assert_eq!(client(&[], true), ip("10.0.0.9"));
    }
}
