//! What the dashboard asks of the other replicas, over the same signed hop
//! as forwarded agent calls: the risk gate's pending approvals live in the
//! memory of the replica whose session waits, so the Approvals page lists
//! every replica's, and a decision or a screenshot goes to the one that
//! holds it; the Tasks page's "waits for you" flags come from every
//! replica too. The routes are under `/api/internal/` (outside the dashboard's
//! Host and Origin checks, JSON errors) and take only a hop signed for an
//! operator (`tenant=_operator`, `key=<operator id>`); everything else is
//! 401 `hop_refused`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::{Cluster, hop};
use crate::error::ApiError;
use crate::policy::{DecideError, Pending};
use crate::state::AppState;

/// The claims' tenant of an operator's internal call.
pub const OPERATOR: &str = "_operator";

/// The operator an internal call acts for (its claims' key).
#[derive(Debug, Clone)]
pub struct InternalOperator(pub String);

/// The internal routes.
pub fn router(state: &AppState) -> axum::Router<AppState> {
    axum::Router::new()
        .route("/api/internal/approvals", get(list))
        .route("/api/internal/approvals/{id}/decide", post(decide))
        .route("/api/internal/approvals/{id}/screenshot", get(screenshot))
        .route("/api/internal/live/{session}", get(super::live::serve))
        .route("/api/internal/tasks/waiting", get(waiting))
        .route("/api/internal/timeline/{session}", get(timeline))
        .route("/api/internal/screenshots/{id}", get(image))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), accept))
}

async fn accept(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let mut arrived = super::arrive::Arrived::read(&state.cluster, req, usize::MAX).await;
    match &arrived.claims {
        Ok(c) if c.tenant == OPERATOR => {
            let op = InternalOperator(c.key_id.clone());
            arrived.parts.extensions.insert(op);
            next.run(arrived.request()).await
        }
        Ok(_) => {
            tracing::warn!(path = %arrived.parts.uri.path(), "internal call refused: not an operator's");
            ApiError::HopRefused.into_response()
        }
        Err(_) => ApiError::HopRefused.into_response(),
    }
}

async fn list(State(state): State<AppState>) -> Json<Vec<Pending>> {
    Json(state.sessions.approvals().list())
}

/// A session's screenshot timeline, as this replica (which recorded it)
/// has it.
async fn timeline(
    State(state): State<AppState>,
    axum::Extension(InternalOperator(op)): axum::Extension<InternalOperator>,
    Path(session): Path<String>,
) -> Response {
    let op = app::api::auth::Operator {
        id: op,
        name: String::new(),
        role: app::api::auth::Role::Viewer,
        // The replica that forwarded the call checked the caller's scope.
        tenants: None,
    };
    match state.timeline_here(&op, session).await {
        Ok(view) => Json(view).into_response(),
        Err(e) => crate::auth::middleware::ui_error(&e),
    }
}

#[derive(serde::Deserialize)]
struct ImageQuery {
    #[serde(default)]
    thumb: bool,
}

/// One recorded screenshot (or its thumbnail), by id.
async fn image(
    State(state): State<AppState>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ImageQuery>,
) -> Response {
    let Ok(id) = id.parse::<crate::recording::ScreenshotId>() else {
        return ApiError::NotFound("screenshot").into_response();
    };
    let variant = if q.thumb {
        crate::recording::Variant::Thumb
    } else {
        crate::recording::Variant::Full
    };
    match state.sessions.recorder().open(&id, variant).await {
        Ok(img) => ([(header::CONTENT_TYPE, img.content_type)], img.bytes).into_response(),
        Err(_) => ApiError::NotFound("screenshot").into_response(),
    }
}

async fn waiting(State(state): State<AppState>) -> Json<Vec<String>> {
    Json(state.tasks.waiting().into_iter().collect())
}

#[derive(serde::Deserialize)]
struct DecideBody {
    approve: bool,
}

async fn decide(
    State(state): State<AppState>,
    axum::Extension(InternalOperator(op)): axum::Extension<InternalOperator>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Ok(DecideBody { approve }) = serde_json::from_slice(&body) else {
        return ApiError::BadRequest("expected {\"approve\": bool}".into()).into_response();
    };
    match state.sessions.decide_approval(&id, approve, &op).await {
        Ok(p) => Json(p).into_response(),
        Err(DecideError::NotFound) => ApiError::NotFound("approval").into_response(),
    }
}

async fn screenshot(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.sessions.approvals().screenshot(&id) {
        Some(jpeg) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static("image/jpeg"))],
            jpeg.as_ref().clone(),
        )
            .into_response(),
        None => ApiError::NotFound("approval").into_response(),
    }
}

impl Cluster {
    /// The other replicas up now: `(name, base URL)`.
    pub async fn others(&self) -> anyhow::Result<Vec<(String, String)>> {
        let now = self.now();
        Ok(self
            .0
            .store
            .replicas_up()
            .await?
            .into_iter()
            .filter(|r| r.name != self.0.name && now - r.heartbeat_at <= self.0.lost_after_ms)
            .filter_map(|r| Some((r.name, r.advertise_url?)))
            .collect())
    }

    /// One internal call to replica `to` at `base`, for operator `op`.
    async fn internal(
        &self,
        to: &str,
        base: &str,
        method: Method,
        path: &str,
        body: Vec<u8>,
        op: &str,
    ) -> anyhow::Result<reqwest::Response> {
        let signed = self
            .sign(to, method.as_str(), path, &body, OPERATOR, op)
            .ok_or_else(|| anyhow::anyhow!("no cluster_secret"))?;
        let res = self
            .client()
            .request(method, format!("{base}{path}"))
            .header(hop::HEADER, signed)
            .header(header::CONTENT_TYPE, "application/json")
            .timeout(std::time::Duration::from_secs(10))
            .body(body)
            .send()
            .await?;
        Ok(res)
    }

    /// The other replicas, asked over the hop as operator `op`.
    pub fn peers<'a>(&'a self, op: &'a str) -> Peers<'a> {
        Peers { cluster: self, op }
    }

    /// The up replica (name, base URL) that recorded session `id`'s
    /// screenshots, when it is another one.
    pub async fn recorder_of(&self, id: &str) -> Option<(String, String)> {
        let id = id.parse::<crate::domain::SessionId>().ok()?;
        let row = self.0.store.session_find(&id).await.ok()??;
        if row.host == self.0.name {
            return None;
        }
        match self.peer(&row.host).await {
            Ok(super::Peer::Up(base)) => Some((row.host, base)),
            _ => None,
        }
    }
}

/// The one typed client of the internal routes: a replica-aware feature
/// adds its route to [`router`] and asks through one of these, never a
/// method of its own here.
pub struct Peers<'a> {
    cluster: &'a Cluster,
    op: &'a str,
}

impl Peers<'_> {
    /// `GET path` on every other replica up: the items of every JSON list
    /// answered (a replica that does not answer is skipped and logged).
    pub async fn get_all<T: serde::de::DeserializeOwned>(&self, path: &str) -> Vec<T> {
        let Ok(others) = self.cluster.others().await else {
            return Vec::new();
        };
        let calls = others.iter().map(|(name, base)| async move {
            match self
                .cluster
                .internal(name, base, Method::GET, path, Vec::new(), self.op)
                .await
            {
                Ok(r) if r.status() == StatusCode::OK => r.json::<Vec<T>>().await.ok(),
                Ok(r) => {
                    tracing::warn!(replica = %name, status = %r.status(), path, "internal call refused");
                    None
                }
                Err(e) => {
                    tracing::warn!(replica = %name, error = %e, path, "internal call: replica unreachable");
                    None
                }
            }
        });
        futures::future::join_all(calls)
            .await
            .into_iter()
            .flatten()
            .flatten()
            .collect()
    }

    /// `method path` on each other replica up until one answers 200 OK:
    /// that answer's body (`None`: none did).
    pub async fn first_ok(&self, method: Method, path: &str, body: Vec<u8>) -> Option<Bytes> {
        for (name, base) in self.cluster.others().await.ok()? {
            if let Ok(r) = self
                .cluster
                .internal(&name, &base, method.clone(), path, body.clone(), self.op)
                .await
                && r.status() == StatusCode::OK
                && let Ok(b) = r.bytes().await
            {
                return Some(b);
            }
        }
        None
    }

    /// `GET path` on the replica that recorded session `session`, when it
    /// is another one and answers 200 OK: the body and its content type.
    pub async fn get_recorded(&self, session: &str, path: &str) -> Option<(Bytes, Option<String>)> {
        let (name, base) = self.cluster.recorder_of(session).await?;
        let r = self
            .cluster
            .internal(&name, &base, Method::GET, path, Vec::new(), self.op)
            .await
            .ok()?;
        if r.status() != StatusCode::OK {
            return None;
        }
        let kind = r
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        Some((r.bytes().await.ok()?, kind))
    }

    /// [`Self::get_recorded`], read as JSON.
    pub async fn get_recorded_json<T: serde::de::DeserializeOwned>(
        &self,
        session: &str,
        path: &str,
    ) -> Option<T> {
        let (body, _) = self.get_recorded(session, path).await?;
        serde_json::from_slice(&body).ok()
    }
}
