//! The CDP endpoint's web side: `/cdp/{id}` (a browser-level CDP WebSocket
//! for Playwright's `connectOverCDP`, Puppeteer's `connect`, browser-use's
//! `cdp_url`), its HTTP discovery (`/cdp/{id}/json/version`, `/json/list`,
//! `/json/protocol`), and `POST /api/sessions/{id}/cdp_token`. It
//! authenticates (the API key as `Authorization: Bearer`, or a single-use
//! connect token in `?token=`), upgrades, and pumps frames through two
//! bounded channels; what passes is decided by `sessions::cdp`.

use axum::Json;
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{SinkExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;

use crate::api::auth::Agent;
use crate::error::ApiError;
use crate::sessions::cdp::{CdpRefusal, FromClient, MAX_CLIENT_MESSAGE};
use crate::state::AppState;
use crate::store::api_keys::ApiKeyOwner;

/// `/cdp/{id}` and its discovery routes. The WebSocket of a session
/// another replica runs is carried there (`cluster::live::route_cdp`); a
/// carried one arrives signed (`accept_hop`: its agent is the caller).
pub fn router(state: &AppState) -> Router<AppState> {
    let socket = get(connect)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::live::route_cdp,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::forward::accept_hop,
        ));
    Router::new()
        .route("/cdp/{id}", socket)
        .route("/cdp/{id}/json/version", get(version))
        .route("/cdp/{id}/json/version/", get(version))
        .route("/cdp/{id}/json", get(list))
        .route("/cdp/{id}/json/", get(list))
        .route("/cdp/{id}/json/list", get(list))
        .route("/cdp/{id}/json/list/", get(list))
        .route("/cdp/{id}/json/protocol", get(protocol))
        .route("/cdp/{id}/json/protocol/", get(protocol))
}

/// `?token=` of the CDP routes.
#[derive(Debug, Deserialize)]
pub struct TokenQuery {
    token: Option<String>,
}

/// Who connects: the key in `Authorization`, else a connect token from
/// `?token=` (used up here).
async fn caller(
    state: &AppState,
    agent: Result<Agent, ApiError>,
    headers: &HeaderMap,
    id: &str,
    token: Option<&str>,
) -> Result<ApiKeyOwner, ApiError> {
    match (agent, token) {
        // The key, or the agent a hop or `route_cdp` already established.
        (Ok(Agent(owner)), _) => Ok(owner),
        (Err(_), Some(token)) if !headers.contains_key(axum::http::header::AUTHORIZATION) => {
            redeem_token(state, token, id).await
        }
        (Err(e), _) => Err(e),
    }
}

/// A connect token for session `id`, used up: whose it is, if its key is
/// still live (a token outlives nothing). Every replica redeems it so.
pub async fn redeem_token(
    state: &AppState,
    token: &str,
    id: &str,
) -> Result<ApiKeyOwner, ApiError> {
    let owner = state
        .live
        .tickets
        .redeem_cdp(&state.store, token, id)
        .await
        .map_err(|_| ApiError::Unauthorized)?;
    match state.store.api_key_active(&owner.key_id).await {
        Ok(true) => Ok(owner),
        Ok(false) => Err(ApiError::Unauthorized),
        Err(e) => Err(ApiError::Internal(e)),
    }
}

/// `ws(s)://…` of an `http(s)://…` base.
fn ws_of(http_base: &str) -> String {
    http_base.replacen("http", "ws", 1)
}

/// A session's CDP URL where no request says how clients reach Cordon
/// (MCP's answer): from the dashboard's public URL.
pub fn cdp_url_public(state: &AppState, session: &str) -> String {
    let base = state.auth.public_url().origin().ascii_serialization();
    format!("{}/cdp/{session}", ws_of(&base))
}

/// The base (`http(s)://host[:port]`) clients reach Cordon at:
/// `public_url` when set, else the request's own Host.
pub fn http_base(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = state.settings.public_url() {
        return url.origin().ascii_serialization();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("{}://{host}", state.settings.scheme())
}

/// The WebSocket URL base (`ws(s)://host[:port]`) clients reach Cordon at.
pub fn ws_base(state: &AppState, headers: &HeaderMap) -> String {
    ws_of(&http_base(state, headers))
}

/// A session's CDP URL (browser level).
pub fn cdp_url(state: &AppState, headers: &HeaderMap, session: &str) -> String {
    format!("{}/cdp/{session}", ws_base(state, headers))
}

/// `GET /cdp/{id}`: the CDP WebSocket.
async fn connect(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<TokenQuery>,
    headers: HeaderMap,
    agent: Result<Agent, ApiError>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let owner = match caller(&state, agent, &headers, &id, q.token.as_deref()).await {
        Ok(o) => o,
        Err(e) => return e.into_response(),
    };
    let found = match crate::sessions::session_id(&id) {
        Ok(sid) => state.sessions.cdp_slot(&owner, &sid).await,
        Err(e) => Err(CdpRefusal::Session(e)),
    };
    let slot = match found {
        Ok(s) => s,
        Err(e) => return refusal(e).into_response(),
    };
    let Ok(ws) = ws else {
        return ApiError::BadRequest(
            "this is a CDP WebSocket: connect with a WebSocket client (or use /json/version)"
                .into(),
        )
        .into_response();
    };
    ws.max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| pump(state, slot, owner, socket))
}

/// Runs one connection: the client's frames to the engine, the engine's
/// messages to the client, and the close the engine decides.
async fn pump(
    state: AppState,
    slot: crate::sessions::cdp::Slot,
    owner: ApiKeyOwner,
    socket: WebSocket,
) {
    let (mut sink, mut stream) = socket.split();
    let (in_tx, in_rx) = mpsc::channel::<FromClient>(64);
    // Bytes read and not yet taken by the engine: a client that floods
    // 16 MiB frames at a busy engine waits on its socket instead of
    // filling the server's memory.
    let queued = std::sync::Arc::new(tokio::sync::Semaphore::new(
        crate::sessions::cdp::MAX_QUEUED_BYTES,
    ));
    let (out_tx, mut out_rx) = crate::sessions::cdp::outbound();
    // Once the engine stops listening, the reader goes on draining what
    // the client sends until it closes too: a socket dropped with unread
    // data is reset, and the client would never see the close code.
    let reader = tokio::spawn(async move {
        let mut listening = true;
        while let Some(frame) = stream.next().await {
            let msg = match frame {
                Ok(Message::Text(t)) => {
                    // At most MAX_CLIENT_MESSAGE (the socket's own limit).
                    let bytes = u32::try_from(t.len()).unwrap_or(u32::MAX);
                    let Ok(held) = queued.clone().acquire_many_owned(bytes).await else {
                        break;
                    };
                    FromClient::Text(t.as_str().to_owned(), held)
                }
                Ok(Message::Binary(_)) => FromClient::Binary,
                Ok(Message::Close(_)) => break,
                Ok(_) => continue,
                Err(e) => {
                    if listening && too_large(e) {
                        let _ = in_tx.send(FromClient::TooLarge).await;
                    }
                    break;
                }
            };
            if listening && in_tx.send(msg).await.is_err() {
                listening = false;
            }
        }
    });
    let sessions = state.sessions.clone();
    let engine = tokio::spawn(async move { sessions.serve_cdp(slot, owner, in_rx, out_tx).await });
    // A client that stops reading is dropped after SLOW_CLIENT (its
    // socket closed without a close frame: it would not read one).
    let mut stalled = false;
    while let Some(msg) = out_rx.recv().await {
        let sent = tokio::time::timeout(
            crate::sessions::cdp::SLOW_CLIENT,
            sink.send(Message::Text(msg.text.into())),
        )
        .await;
        if !matches!(sent, Ok(Ok(()))) {
            stalled = !matches!(sent, Ok(Err(_)));
            break;
        }
    }
    drop(out_rx);
    if stalled {
        // The engine sees the client gone, ends and audits it.
        reader.abort();
        drop(sink);
        let _ = engine.await;
        return;
    }
    let closing = match engine.await {
        Ok(c) => c,
        Err(_) => crate::sessions::cdp::Closing {
            code: 1011,
            reason: "internal error",
        },
    };
    let _ = sink
        .send(Message::Close(Some(axum::extract::ws::CloseFrame {
            code: closing.code,
            reason: closing.reason.into(),
        })))
        .await;
    let mut reader = reader;
    if tokio::time::timeout(std::time::Duration::from_secs(5), &mut reader)
        .await
        .is_err()
    {
        reader.abort();
    }
}

/// The API's answer to a CDP refusal.
fn refusal(e: CdpRefusal) -> ApiError {
    match e {
        CdpRefusal::Session(e) => ApiError::from(e),
        e @ CdpRefusal::NotGranted => ApiError::Forbidden {
            code: "cdp_not_granted",
            message: e.to_string(),
        },
        e @ CdpRefusal::TooMany => ApiError::TooManyRequests {
            message: e.to_string(),
            retry_after_s: 5,
        },
    }
}

/// The session `id` as the `/json/*` discovery routes serve it: as the
/// socket would (404, or `cdp_not_granted` in operator mode without CDP
/// in the grant: a tab's address and title are the session's pages).
async fn discovered(
    state: &AppState,
    owner: &crate::store::api_keys::ApiKeyOwner,
    id: &str,
) -> Result<std::sync::Arc<crate::sessions::RunningSession>, ApiError> {
    let sid = crate::sessions::session_id(id)?;
    state
        .sessions
        .cdp_session(owner, &sid)
        .await
        .map_err(refusal)
}

/// Whether a read failed on a message over the size limit.
fn too_large(e: axum::Error) -> bool {
    use tokio_tungstenite::tungstenite::Error as WsError;
    e.into_inner()
        .downcast_ref::<WsError>()
        .is_some_and(|e| matches!(e, WsError::Capacity(_)))
}

/// `GET /cdp/{id}/json/version`, as Chromium answers it, with Cordon's
/// WebSocket URL.
async fn version(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Agent(owner): Agent,
) -> Result<Json<serde_json::Value>, ApiError> {
    let session = discovered(&state, &owner, &id).await?;
    let v = session
        .browser_version()
        .await
        .map_err(|e| ApiError::BrowserFailed(e.to_string()))?;
    Ok(Json(json!({
        "Browser": v.product,
        "Protocol-Version": v.protocol_version,
        "User-Agent": v.user_agent,
        "V8-Version": v.js_version,
        "WebKit-Version": v.revision,
        "webSocketDebuggerUrl": cdp_url(&state, &headers, &id),
    })))
}

/// One target of `/json/list`.
#[derive(Debug, Serialize)]
struct TargetEntry {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    title: String,
    url: String,
    description: String,
}

/// `GET /cdp/{id}/json/list`: the session's tabs. Only the browser-level
/// WebSocket is served, so entries carry no page WebSocket URL.
async fn list(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Agent(owner): Agent,
) -> Result<Json<Vec<TargetEntry>>, ApiError> {
    let session = discovered(&state, &owner, &id).await?;
    let tabs = session
        .tab_targets()
        .await
        .map_err(|e| ApiError::BrowserFailed(e.to_string()))?;
    Ok(Json(
        tabs.into_iter()
            .map(|t| TargetEntry {
                id: t.target_id.inner().clone(),
                kind: t.r#type,
                title: t.title,
                url: t.url,
                description: String::new(),
            })
            .collect(),
    ))
}

/// `GET /cdp/{id}/json/protocol`: the browser's own protocol description.
async fn protocol(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Agent(owner): Agent,
) -> Result<Response, ApiError> {
    let session = discovered(&state, &owner, &id).await?;
    crate::cdp::http_base(&session.sandbox.cdp_url)
        .ok_or_else(|| ApiError::Unavailable("the browser has no HTTP endpoint".into()))?;
    // At most `MAX_PROTOCOL_DESCRIPTION` bytes: what comes from the browser
    // is not trusted.
    let body = crate::cdp::protocol_description(&session.sandbox.cdp_url)
        .await
        .ok_or_else(|| {
            ApiError::BrowserFailed("the browser did not describe its protocol".into())
        })?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}
