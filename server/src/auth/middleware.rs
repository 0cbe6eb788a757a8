//! Who is asking: the dashboard session cookie → the operator, put into
//! the request for pages, server functions and streams. Anonymous requests
//! to pages are sent to `/login`; to server functions and streams they get
//! `401` with the dashboard's error shape.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, Session, SessionManagerLayer};

use app::api::auth::Operator;
use app::error::UiError;

use super::AuthError;
use super::session_store::{DbSessionStore, OPERATOR_KEY};
use crate::domain::OperatorId;
use crate::state::AppState;
use crate::store::Store;
use crate::time::now_ms;

/// The session cookie's name over plain http (a local install).
pub const COOKIE: &str = "cordon_session";
/// Its name over https: the `__Host-` prefix makes the browser keep it
/// only when it is `Secure`, for this host alone (no `Domain`) and the
/// whole site (`Path=/`), so a page on a sibling subdomain, or a
/// plain-http answer on the way, cannot plant or overwrite it.
pub const SECURE_COOKIE: &str = "__Host-cordon_session";

/// The session cookie's name, `secure` when the public URL is https.
pub fn cookie_name(secure: bool) -> &'static str {
    if secure { SECURE_COOKIE } else { COOKIE }
}
/// When the operator logged in (Unix ms), for the absolute expiry.
pub(crate) const LOGIN_AT_KEY: &str = "login_at";
/// When the session was last extended (Unix ms).
const SEEN_KEY: &str = "seen";
/// The idle expiry is pushed back at most this often, so a busy page does
/// not write the session row on every request.
const EXTEND_EVERY_MS: i64 = 60_000;

/// How dashboard sessions behave.
#[derive(Debug, Clone, Copy)]
pub struct SessionSettings {
    /// Set `Secure` on the cookie (the public URL is https).
    pub secure: bool,
    /// Idle expiry.
    pub idle_minutes: u64,
    /// Absolute expiry after login.
    pub absolute_hours: u64,
}

/// The tower-sessions layer: cookie `cordon_session` (on https
/// `__Host-cordon_session`, `Secure`), HttpOnly, SameSite=Strict, path
/// `/`, no domain, records in the database.
pub fn session_layer(store: Store, s: SessionSettings) -> SessionManagerLayer<DbSessionStore> {
    let idle = i64::try_from(s.idle_minutes).unwrap_or(30);
    SessionManagerLayer::new(DbSessionStore(store))
        .with_name(cookie_name(s.secure))
        .with_http_only(true)
        .with_same_site(SameSite::Strict)
        .with_secure(s.secure)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::minutes(idle)))
}

/// Paths anyone may load: the login and enrollment pages, their ceremony
/// endpoints (which check the session themselves), the wasm bundle, CSS
/// and static files, and everything that is not the dashboard.
fn public(path: &str) -> bool {
    matches!(
        path,
        "/login" | "/enroll" | "/favicon.svg" | "/passkey.js" | "/live.js" | "/totp.js"
    ) || path.starts_with("/pkg/")
        || path.starts_with("/ui/auth/")
        || crate::edge::outside_dashboard(path)
}

/// Passkeys are bound to the public URL's host: the login and enrollment
/// pages reached by another of Cordon's names (`127.0.0.1`, an IP address)
/// send the browser there (the link's `#fragment` goes along).
fn elsewhere(state: &AppState, req: &Request) -> Option<Response> {
    let url = state.auth.public_url();
    let want = match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        _ => return None,
    };
    let host = req.headers().get(header::HOST)?.to_str().ok()?;
    let default_port = url
        .port_or_known_default()
        .map(|p| format!("{}:{p}", url.host_str().unwrap_or_default()));
    if host.eq_ignore_ascii_case(&want)
        || default_port.is_some_and(|d| host.eq_ignore_ascii_case(&d))
    {
        return None;
    }
    let mut to = url.clone();
    to.set_path(req.uri().path());
    to.set_query(req.uri().query());
    Some(Redirect::to(to.as_str()).into_response())
}

/// The operator of a dashboard session, if it is valid: logged in, not
/// past its absolute expiry, the operator still enabled. An invalid one
/// is emptied (so its cookie is removed).
pub(crate) async fn operator_of(
    state: &AppState,
    session: &Session,
) -> Result<Option<Operator>, UiError> {
    let unavailable = |e: tower_sessions::session::Error| UiError::Unavailable {
        message: format!("dashboard sessions are unavailable: {e}"),
    };
    let Some(id) = session
        .get::<String>(OPERATOR_KEY)
        .await
        .map_err(unavailable)?
    else {
        return Ok(None);
    };
    let login_at = session
        .get::<i64>(LOGIN_AT_KEY)
        .await
        .map_err(unavailable)?
        .unwrap_or(0);
    let absolute_ms =
        i64::try_from(state.settings.auth.dashboard_session_hours).unwrap_or(12) * 3_600_000;
    let now = now_ms();
    let operator = match id.parse::<OperatorId>() {
        Ok(id) if now - login_at < absolute_ms => {
            state.auth.get(&id).await.map_err(UiError::from)?
        }
        _ => None,
    };
    let Some(op) = operator.filter(|o| o.disabled_at.is_none()) else {
        session.flush().await.map_err(unavailable)?;
        return Ok(None);
    };
    let seen = session.get::<i64>(SEEN_KEY).await.map_err(unavailable)?;
    if seen.is_none_or(|s| now - s > EXTEND_EVERY_MS) {
        session.insert(SEEN_KEY, now).await.map_err(unavailable)?;
    }
    Ok(Some(state.auth.dashboard_operator(op).await?))
}

/// The middleware: puts the [`Operator`] into the request, or refuses.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if matches!(path.as_str(), "/login" | "/enroll")
        && let Some(to) = elsewhere(&state, &req)
    {
        return to;
    }
    if public(&path) {
        return next.run(req).await;
    }
    // A session's call sent on by another replica (see
    // `cluster::dashboard`): the hop names the operator.
    if path.starts_with("/ui/fn/") && req.headers().contains_key(crate::cluster::hop::HEADER) {
        return match crate::cluster::dashboard::operator_of_hop(&state, req).await {
            Ok(req) => next.run(req).await,
            Err(e) => ui_error(&e),
        };
    }
    let Some(session) = req.extensions().get::<Session>().cloned() else {
        tracing::error!("no session layer in front of the auth middleware");
        return ui_error(&UiError::internal("dashboard sessions are not configured"));
    };
    match operator_of(&state, &session).await {
        Ok(Some(op)) => {
            req.extensions_mut().insert(op);
            next.run(req).await
        }
        Ok(None) if path.starts_with("/ui/") || path.starts_with("/live/") => {
            ui_error(&UiError::Unauthorized)
        }
        Ok(None) => {
            let next_path = req
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            let mut url = url::Url::parse("http://x/login").expect("a valid URL");
            if next_path != "/" && safe_next(&next_path) {
                url.query_pairs_mut().append_pair("next", &next_path);
            }
            let target = match url.query() {
                Some(q) => format!("/login?{q}"),
                None => "/login".to_owned(),
            };
            Redirect::to(&target).into_response()
        }
        Err(e) => ui_error(&e),
    }
}

/// Whether `next` is a path of this dashboard that a login may send the
/// browser back to: one `/` followed by neither `/` nor `\` (browsers read
/// `//host`, `/\host` as another site), no backslash or control character
/// anywhere. `public/passkey.js` (`safeNext`) checks the same in the browser.
fn safe_next(next: &str) -> bool {
    let mut chars = next.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !next.chars().any(|c| c == '\\' || c.is_control())
}

/// The auth service's errors as the dashboard shows them.
impl From<AuthError> for UiError {
    fn from(e: AuthError) -> Self {
        match e {
            AuthError::Invalid { field, message } => UiError::invalid(field, message),
            AuthError::Link(m) => UiError::invalid("link", m),
            e @ AuthError::Ceremony(_) => UiError::invalid("passkey", e.to_string()),
            e @ (AuthError::NoCeremony | AuthError::Conflict(_)) => {
                UiError::conflict(e.to_string())
            }
            e @ (AuthError::UnknownOperator(_) | AuthError::Disabled(_)) => {
                UiError::invalid("name", e.to_string())
            }
            AuthError::NotFound(what) => UiError::not_found(what),
            AuthError::Internal(e) => {
                tracing::error!(error = %format!("{e:#}"), "dashboard auth failed");
                UiError::internal("the request failed on the server; see its log")
            }
        }
    }
}

/// A [`UiError`] as an HTTP answer: its status, `{error: {code, message}}`
/// plus the error itself under `ui` (what server functions decode).
pub(crate) fn ui_error(e: &UiError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = serde_json::to_value(e).unwrap_or_default();
    if let Some(obj) = body.as_object_mut() {
        obj.insert(
            "error".into(),
            serde_json::json!({ "code": e.code(), "message": e.to_string() }),
        );
    }
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_paths_of_this_dashboard_are_kept_as_next() {
        for ok in ["/grants", "/tasks?x=1#y", "/sessions/s_1", "/a//b"] {
            assert!(safe_next(ok), "{ok:?}");
        }
        for bad in [
            "//evil.example",
            "/\\evil.example/",
            "/\\/evil.example",
            "/\t/evil.example",
            "/x\\y",
            "/x\ny",
            "https://evil.example/",
            "evil.example",
            "",
        ] {
            assert!(!safe_next(bad), "{bad:?}");
        }
    }
}
