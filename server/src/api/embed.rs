//! A live link's page and socket, for an agent's own user (`live::link`):
//!
//! - `GET /embed/{session}?link=llk_…`: a minimal page (the canvas, a status
//!   line, and in control mode the keyboard), framable only by the
//!   tenant's `frame_ancestors`; an unusable link gets a page that says why
//!   (404 unknown, 403 off, 410 expired, revoked or ended).
//! - `GET /embed/{session}/ws?link=llk_…`: the live view's protocol, run
//!   for the link (`live::socket::serve_link_view`). A session another
//!   replica runs is carried there (`cluster::live::route_embed`) and
//!   arrives at `/api/internal/embed/{session}?link_id=…`, signed for the
//!   link's agent.
//! - `GET /embed/assets/embed.{js,css}`: its script and style, compiled in.
//!
//! Nothing here reads the dashboard's cookie or session: the link is the
//! whole capability, and it opens nothing but this session's view.

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::api::auth::Agent;
use crate::domain::{LiveLinkId, SessionId};
use crate::error::ApiError;
use crate::live::link::{self, Link, LinkError, LinkMode, LinkPolicy};
use crate::sessions::SessionError;
use crate::state::AppState;

const SCRIPT: &str = include_str!("../../../public/embed.js");
const STYLE: &str = include_str!("../../../public/embed.css");

/// The embed routes.
pub fn router(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/embed/assets/embed.js", get(script))
        .route("/embed/assets/embed.css", get(style))
        .route("/embed/{session}", get(page))
        .route(
            "/embed/{session}/ws",
            get(socket).route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                crate::cluster::live::route_embed,
            )),
        )
        .route(
            "/api/internal/embed/{session}",
            get(carried).route_layer(axum::middleware::from_fn_with_state(
                state.clone(),
                crate::cluster::forward::accept_hop,
            )),
        )
}

/// `?link=` (a token), or on a carried hop `?link_id=`.
#[derive(Debug, Deserialize)]
pub struct LinkQuery {
    #[serde(default)]
    link: String,
    #[serde(default)]
    link_id: String,
}

/// A tenant's live-link settings, as a lookup `live::link` can call.
fn policies(state: &AppState) -> impl Fn(&str) -> Option<LinkPolicy> + '_ {
    |tenant| state.settings.live.tenant_live_links.get(tenant).cloned()
}

/// Headers every embed answer carries; `frame_ancestors` decides who may
/// frame it.
fn secured(mut res: Response, frame_ancestors: &str) -> Response {
    let csp = format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors {frame_ancestors}"
    );
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}

/// Text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// The page of a link that cannot be used, and why.
fn gone(status: StatusCode, title: &str, why: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{t}</title><link rel=\"stylesheet\" href=\"/embed/assets/embed.css\"></head>\
         <body><main class=\"gone\" data-gone=\"{code}\"><h1>{t}</h1><p data-why>{w}</p></main>\
         </body></html>",
        t = esc(title),
        w = esc(why),
        code = status.as_u16(),
    )
}

/// A link error as the page's status, title and reason.
fn refusal(e: &LinkError) -> (StatusCode, &'static str, String) {
    match e {
        LinkError::Unknown => (
            StatusCode::NOT_FOUND,
            "This link does not work",
            "Check that the whole address was copied, or ask for a new link.".into(),
        ),
        LinkError::Disabled | LinkError::ControlDisabled => (
            StatusCode::FORBIDDEN,
            "Live links are off",
            "This organisation does not allow live links (any more).".into(),
        ),
        LinkError::Expired => (
            StatusCode::GONE,
            "This link has expired",
            "Live links work for a limited time. Ask for a new one if you still need to see the browser.".into(),
        ),
        LinkError::Revoked => (
            StatusCode::GONE,
            "This link was revoked",
            "Whoever shared it has stopped it. Ask for a new one if you still need to see the browser.".into(),
        ),
        LinkError::BadTtl(_) | LinkError::TooMany | LinkError::Internal(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The live view is unavailable",
            "Cordon could not check the link just now. Reload in a moment.".into(),
        ),
    }
}

/// `GET /embed/{session}?link=…`
async fn page(
    State(state): State<AppState>,
    Path(session): Path<String>,
    Query(q): Query<LinkQuery>,
) -> Response {
    let lookup = policies(&state);
    let link = match link::check(&state.store, &q.link, &session, &lookup).await {
        Ok(l) => l,
        Err(e) => {
            if let LinkError::Internal(err) = &e {
                tracing::error!(error = %format!("{err:#}"), "live link: lookup failed");
            }
            // A known link's refusal may show in its tenant's frames.
            let frame = match link::tenant_of(&state.store, &q.link, &session).await {
                Some(t) => lookup(&t).map_or("'none'".into(), |p| p.frame_ancestors_csp()),
                None => "'none'".into(),
            };
            let (status, title, why) = refusal(&e);
            return secured(html(status, gone(status, title, &why)), &frame);
        }
    };
    let frame = lookup(link.tenant.as_str()).map_or("'none'".into(), |p| p.frame_ancestors_csp());
    // The link names a well-formed session, which `check` matched.
    let found = match session.parse::<SessionId>() {
        Ok(sid) => state.store.session_get(link.tenant.as_str(), &sid).await,
        Err(_) => Ok(None),
    };
    let ended = match found {
        Ok(Some(row)) => row.state.is_ended(),
        Ok(None) => true,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "live link: session lookup failed");
            false
        }
    };
    if ended {
        let status = StatusCode::GONE;
        let body = gone(
            status,
            "This session has ended",
            "The browser this link showed has been closed; there is nothing more to see.",
        );
        return secured(html(status, body), &frame);
    }
    let mode = link.mode.as_str();
    let hint = match link.mode {
        LinkMode::View => "View only",
        LinkMode::Control => "Click the picture to type",
    };
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>Live browser</title><link rel=\"stylesheet\" href=\"/embed/assets/embed.css\">\
         </head><body><main class=\"embed\" data-embed data-mode=\"{mode}\" data-state=\"connecting\">\
         <div class=\"stage\"><canvas data-canvas aria-label=\"The browser, live\"></canvas>\
         <div class=\"overlay\" data-overlay>Connecting…</div>\
         <div class=\"dialog\" data-dialog role=\"alertdialog\" aria-labelledby=\"dialog-kind\" aria-describedby=\"dialog-message\" hidden>\
         <p class=\"kind\" id=\"dialog-kind\" data-dialog-kind>The page asks</p>\
         <p class=\"message\" id=\"dialog-message\" data-dialog-message></p>\
         <input type=\"text\" data-dialog-text aria-label=\"Your answer\" autocomplete=\"off\" hidden>\
         <div class=\"buttons\" data-dialog-buttons><button type=\"button\" data-dialog-answer=\"cancel\">Cancel</button>\
         <button type=\"button\" data-dialog-answer=\"ok\">OK</button></div></div>\
         <div class=\"toast\" data-error role=\"alert\" hidden></div></div>\
         <textarea class=\"keys\" data-keys aria-label=\"Keyboard input for the browser\" \
         autocapitalize=\"off\" autocomplete=\"off\" autocorrect=\"off\" spellcheck=\"false\"></textarea>\
         <footer class=\"bar\"><span data-status role=\"status\">Connecting…</span>\
         <span data-note>{hint}</span></footer></main>\
         <script src=\"/embed/assets/embed.js\"></script></body></html>"
    );
    secured(html(StatusCode::OK, body), &frame)
}

/// `GET /embed/{session}/ws?link=…`
async fn socket(
    State(state): State<AppState>,
    Path(session): Path<String>,
    Query(q): Query<LinkQuery>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let link = match link::check(&state.store, &q.link, &session, policies(&state)).await {
        Ok(l) => l,
        Err(e) => return ApiError::from(e).into_response(),
    };
    serve(state, link, ws).await
}

/// `GET /api/internal/embed/{session}?link_id=…`: a link's socket carried
/// from another replica, signed for the link's agent.
async fn carried(
    State(state): State<AppState>,
    Path(session): Path<String>,
    Query(q): Query<LinkQuery>,
    agent: Option<axum::Extension<Agent>>,
    forwarded: Option<axum::Extension<crate::cluster::forward::Forwarded>>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let (Some(axum::Extension(Agent(owner))), Some(_)) = (agent, forwarded) else {
        return ApiError::HopRefused.into_response();
    };
    let recheck = match q.link_id.parse::<LiveLinkId>() {
        Ok(id) => link::recheck(&state.store, &id, policies(&state)).await,
        Err(_) => Err(LinkError::Unknown),
    };
    let link = match recheck {
        Ok(l)
            if l.session_id == session && l.tenant == owner.tenant && l.key_id == owner.key_id =>
        {
            l
        }
        Ok(_) => return ApiError::HopRefused.into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    serve(state, link, ws).await
}

/// Serves `link`'s view of its session, which runs here.
async fn serve(
    state: AppState,
    link: Link,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let found = match crate::sessions::session_id(&link.session_id) {
        Ok(sid) => state.sessions.get(&link.tenant, &sid).await,
        Err(e) => Err(e),
    };
    let live = match found {
        Ok(l) => l,
        Err(e @ SessionError::Gone { .. }) => return ApiError::from(e).into_response(),
        Err(_) => return ApiError::NotFound("session").into_response(),
    };
    let Ok(ws) = ws else {
        return ApiError::BadRequest("this is a WebSocket: open the link's page instead".into())
            .into_response();
    };
    crate::live::socket::serve_link_view(state, live, link, ws)
}

fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=300"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}
