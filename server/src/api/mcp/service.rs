//! `/mcp`: rmcp's Streamable HTTP service in Cordon's router, behind the
//! agent API's own key check. Each MCP session belongs to the API key that
//! opened it: any other key is told it does not exist.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use super::tools;
use crate::api::auth::Agent;
use crate::domain::TenantId;
use crate::state::AppState;

/// The path of the MCP endpoint.
pub const PATH: &str = "/mcp";

/// What the MCP server tells a client about itself.
const INSTRUCTIONS: &str = "Cordon runs sandboxed browsers. Open a session with \
    browser_open_session, pass its session_id to the other tools, and close it with \
    browser_close_session. browser_snapshot gives refs (e12) that click, type, hover, \
    scroll and select accept. A failed call is a tool error whose text starts with a \
    machine code (not_found, egress_refused, element_not_found …).";

/// The MCP server for one MCP session (rmcp makes one per `initialize`):
/// it holds only the shared state; who calls is read per request.
#[derive(Clone)]
struct Cordon {
    state: AppState,
}

impl ServerHandler for Cordon {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cordon", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::listed().to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // The key was checked by `authenticate` on this very HTTP request.
        let agent = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<Agent>())
            .cloned()
            .ok_or_else(|| ErrorData::internal_error("the caller is not authenticated", None))?;
        let name = request.name.as_ref();
        let args = request.arguments.unwrap_or_default();
        let span = tracing::info_span!("mcp.tool", mcp.tool = name, tenant.id = %agent.0.tenant);
        let result =
            tracing::Instrument::instrument(tools::call(&self.state, &agent, name, args), span)
                .await
                .ok_or_else(|| ErrorData::invalid_params(format!("unknown tool: {name}"), None))?;
        Ok(result.into())
    }
}

/// Resolves the bearer key exactly as the HTTP API does (`Agent`, the same
/// lookup and the same 401) and leaves the caller in the request's
/// extensions, where the tools read it.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    match Agent::from_request_parts(&mut parts, &state).await {
        Ok(_) => next.run(Request::from_parts(parts, body)).await,
        Err(e) => e.into_response(),
    }
}

/// The header naming an MCP session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Bindings kept before the first look for ended sessions.
const PRUNE_FROM: usize = 256;

/// Which API key (and tenant) opened each of this process' MCP sessions,
/// by rmcp's own id. rmcp itself only checks that an id exists, and an id
/// travels in logs and proxies: without this, any tenant's key holding
/// one could list tools on it, read its stream or end it.
#[derive(Clone)]
struct Owners {
    bound: Arc<Mutex<Bound>>,
    /// rmcp's sessions: asked, when the bindings grow, which still exist
    /// (a session rmcp ended for idleness was never DELETEd).
    sessions: Arc<LocalSessionManager>,
}

struct Bound {
    by_id: HashMap<String, (String, TenantId)>,
    /// Size at which the bindings of ended sessions are dropped next.
    prune_at: usize,
}

impl Owners {
    fn new(sessions: Arc<LocalSessionManager>) -> Self {
        Self {
            bound: Arc::new(Mutex::new(Bound {
                by_id: HashMap::new(),
                prune_at: PRUNE_FROM,
            })),
            sessions,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.bound.lock().expect("mcp owners lock")
    }

    /// Binds `id` to `owner`; drops the bindings of sessions rmcp no
    /// longer has once they pass `prune_at` (doubling it, so the cost stays
    /// linear).
    async fn bind(&self, id: String, owner: (String, TenantId)) {
        let ids: Vec<String> = {
            let mut bound = self.lock();
            bound.by_id.insert(id, owner);
            if bound.by_id.len() < bound.prune_at {
                return;
            }
            bound.by_id.keys().cloned().collect()
        };
        let mut gone = Vec::new();
        for id in ids {
            let key: Arc<str> = Arc::from(id.as_str());
            if matches!(self.sessions.has_session(&key).await, Ok(false)) {
                gone.push(id);
            }
        }
        let mut bound = self.lock();
        for id in &gone {
            bound.by_id.remove(id);
        }
        bound.prune_at = (bound.by_id.len() * 2).max(PRUNE_FROM);
    }
}

/// Lets a request naming an MCP session through only with the key that
/// opened it; any other key (or an id no key opened here) gets rmcp's own
/// 404 for an unknown session, whatever the method, so the answer does
/// not tell that the session exists. Records who opens a session, and
/// forgets it once ended (DELETE, or gone from rmcp).
async fn bind_to_key(State(owners): State<Owners>, req: Request, next: Next) -> Response {
    // `authenticate` (or the hop of another replica) put it there.
    let Some(Agent(agent)) = req.extensions().get::<Agent>().cloned() else {
        return crate::error::ApiError::Unauthorized.into_response();
    };
    let me = (agent.key_id, agent.tenant);
    let named = req
        .headers()
        .get(SESSION_HEADER)
        .map(|v| v.to_str().map(str::to_owned));
    let delete = req.method() == axum::http::Method::DELETE;
    match named {
        Some(Ok(id)) => {
            let owner = owners.lock().by_id.get(&id).cloned();
            if owner.as_ref() != Some(&me) {
                if owner.is_some() {
                    tracing::warn!(
                        "an MCP session was asked for with another key; answered as unknown"
                    );
                }
                return unknown_session();
            }
            let res = next.run(req).await;
            if delete && res.status().is_success() {
                owners.lock().by_id.remove(&id);
            }
            res
        }
        Some(Err(_)) => unknown_session(),
        None => {
            let res = next.run(req).await;
            if let Some(id) = res
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                owners.bind(id.to_owned(), me).await;
            }
            res
        }
    }
}

/// What rmcp answers for an MCP session it does not know.
fn unknown_session() -> Response {
    (
        axum::http::StatusCode::NOT_FOUND,
        "Not Found: Session not found",
    )
        .into_response()
}

/// The host names the endpoint answers to: the loopback names and the
/// public URL's host (rmcp refuses any other `Host`, against DNS
/// rebinding; its default is the loopback names only).
pub fn allowed_hosts(public_url: &url::Url) -> Vec<String> {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
    if let Some(host) = public_url.host_str() {
        let host = host.trim_matches(['[', ']']).to_ascii_lowercase();
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

/// `/mcp`, key-authenticated. `shutdown` ends the MCP sessions' open
/// streams when the server shuts down (or they would hold it open).
pub fn router(
    state: AppState,
    public_url: &url::Url,
    shutdown: CancellationToken,
) -> Router<AppState> {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(public_url))
        .with_cancellation_token(shutdown)
        .with_max_request_body_bytes(crate::edge::MAX_BODY_BYTES);
    let handler = Cordon {
        state: state.clone(),
    };
    let sessions = Arc::new(LocalSessionManager::default());
    let owners = Owners::new(sessions.clone());
    let service = StreamableHttpService::new(move || Ok(handler.clone()), sessions, config);
    // Outermost first: a hop from another replica names the agent; the key
    // check; then a request for another replica's MCP session goes there;
    // one for this replica's must come with the key that opened it.
    Router::new()
        .route_service(PATH, service)
        .route_layer(middleware::from_fn_with_state(owners, bind_to_key))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::forward::mcp_route,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .route_layer(middleware::from_fn_with_state(
            state,
            crate::cluster::forward::accept_hop,
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bindings_of_sessions_rmcp_ended_are_dropped_as_they_grow() {
        let sessions = Arc::new(LocalSessionManager::default());
        let owners = Owners::new(sessions.clone());
        let (live, _transport) = sessions.create_session().await.unwrap();
        let owner = ("k_1".to_owned(), "acme".parse::<TenantId>().unwrap());
        owners.bind(live.to_string(), owner.clone()).await;
        for n in 1..PRUNE_FROM {
            owners.bind(format!("ended-{n}"), owner.clone()).await;
        }
        let bound = owners.lock();
        let ids: Vec<&String> = bound.by_id.keys().collect();
        assert_eq!(
            ids,
            [&live.to_string()],
            "only the live session stays bound"
        );
        assert_eq!(bound.prune_at, PRUNE_FROM);
    }

    #[test]
    fn the_public_urls_host_is_allowed_besides_loopback() {
        let url = url::Url::parse("https://Cordon.Example.com/").unwrap();
        let hosts = allowed_hosts(&url);
        assert!(hosts.contains(&"cordon.example.com".to_owned()));
        assert!(hosts.contains(&"127.0.0.1".to_owned()));
        let local = allowed_hosts(&url::Url::parse("http://localhost:8080/").unwrap());
        assert_eq!(local.len(), 3);
    }
}
