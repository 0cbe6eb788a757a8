//! Shared plumbing of tool handlers: finding the session, auditing the call
//! before it runs, resolving element targets, mapping browser errors.

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::Deserialize;

use crate::api::auth::Agent;
use serde_json::Value;

use crate::audit::{Actor, NewEvent};
use crate::cdp::{CdpError, Locator};
use crate::error::ApiError;
use crate::sessions::{LiveSession, Tabs};
use crate::state::AppState;
use crate::store::api_keys::ApiKeyOwner;

/// Where an element tool acts: exactly one of a point, a selector or a ref.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct TargetSpec {
    /// Viewport x (with `y`).
    pub x: Option<f64>,
    /// Viewport y (with `x`).
    pub y: Option<f64>,
    /// CSS selector.
    pub selector: Option<String>,
    /// Ref from the last snapshot (`e12`).
    #[serde(rename = "ref")]
    pub r#ref: Option<String>,
}

/// The longest selector accepted.
pub const MAX_SELECTOR: usize = 2048;

impl TargetSpec {
    /// Whether nothing was given.
    pub fn is_empty(&self) -> bool {
        self.x.is_none() && self.y.is_none() && self.selector.is_none() && self.r#ref.is_none()
    }

    /// For the audit row: what was targeted (selectors and refs are page
    /// structure, not secrets).
    pub fn describe(&self) -> Value {
        serde_json::json!({ "x": self.x, "y": self.y, "selector": self.selector, "ref": self.r#ref })
    }

    /// Resolves to a [`Locator`] against the session's last snapshot.
    pub fn locate(&self, tabs: &Tabs, viewport: (u32, u32)) -> Result<Locator, ApiError> {
        match (self.x, self.y, &self.selector, &self.r#ref) {
            (Some(x), Some(y), None, None) => {
                let inside = x.is_finite()
                    && y.is_finite()
                    && x >= 0.0
                    && y >= 0.0
                    && x <= f64::from(viewport.0)
                    && y <= f64::from(viewport.1);
                if !inside {
                    return Err(ApiError::BadRequest(
                        "x and y must lie inside the viewport".into(),
                    ));
                }
                Ok(Locator::Point(x, y))
            }
            (None, None, Some(sel), None) => {
                if sel.is_empty() || sel.len() > MAX_SELECTOR {
                    return Err(ApiError::BadRequest(format!(
                        "selector must be 1 to {MAX_SELECTOR} bytes"
                    )));
                }
                Ok(Locator::Selector(sel.clone()))
            }
            (None, None, None, Some(r)) => match tabs.refs.get(r) {
                Some(id) => Ok(Locator::Node(*id, r.clone())),
                None => Err(ApiError::Unprocessable {
                    code: "element_not_found",
                    message: format!(
                        "unknown ref {:?}; take a snapshot first",
                        r.chars().take(16).collect::<String>()
                    ),
                }),
            },
            _ => Err(ApiError::BadRequest(
                "give exactly one of {x, y}, selector or ref".into(),
            )),
        }
    }
}

/// A tool call's bound: the request's `timeout_ms` or the server's, whichever is smaller.
pub fn bound(state: &AppState, timeout_ms: Option<u64>) -> Result<Duration, ApiError> {
    let max = state.sessions.tool_timeout();
    match timeout_ms {
        None => Ok(max),
        Some(0) => Err(ApiError::BadRequest("timeout_ms must be positive".into())),
        Some(ms) => Ok(Duration::from_millis(ms).min(max)),
    }
}

/// The caller's live session named by the `{id}` path segment, resolved
/// before the body is read: another tenant's or an unknown id is 404 and an
/// ended one 410, whatever the body says.
pub struct SessionRef(pub Arc<LiveSession>);

impl FromRequestParts<AppState> for SessionRef {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let Agent(owner) = Agent::from_request_parts(parts, state).await?;
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::NotFound("session"))?;
        let id = params.get("id").ok_or(ApiError::NotFound("session"))?;
        Ok(Self(state.sessions.get(&owner.tenant, id).await?))
    }
}

/// Writes the audit row for a tool call, before anything reaches the browser.
pub async fn begin(
    state: &AppState,
    owner: &ApiKeyOwner,
    session: &Arc<LiveSession>,
    action: &str,
    params: Value,
) -> Result<Arc<LiveSession>, ApiError> {
    state
        .store
        .audit_append(
            NewEvent::new(Actor::Agent(owner.key_id.clone()), action)
                .tenant(&owner.tenant)
                .session(session.id.as_str())
                .params(params)
                .outcome("requested"),
        )
        .await?;
    session.touch();
    Ok(session.clone())
}

/// Maps a browser error; a dead browser fails the session.
pub async fn finish<T>(
    state: &AppState,
    session: &LiveSession,
    res: Result<T, CdpError>,
) -> Result<T, ApiError> {
    session.touch();
    match res {
        Ok(v) => Ok(v),
        // A dead browser fails the session, whatever the call reported.
        Err(e) if matches!(e, CdpError::BrowserGone) || session.browser_gone() => {
            tracing::warn!(error = %e, "tool failed: the browser is gone");
            state
                .sessions
                .fail(
                    &session.id,
                    "browser_exited",
                    "the browser exited unexpectedly",
                )
                .await;
            Err(ApiError::BrowserFailed(
                "the browser exited unexpectedly; the session is now failed".into(),
            ))
        }
        Err(CdpError::Timeout(what, ms)) => Err(ApiError::Timeout(format!(
            "{what} did not finish within {ms} ms"
        ))),
        Err(CdpError::NotFound(m)) => Err(ApiError::Unprocessable {
            code: "element_not_found",
            message: m,
        }),
        Err(CdpError::Failed(m)) => Err(ApiError::Unprocessable {
            code: "action_failed",
            message: m,
        }),
        // Caught by the first error arm; listed for exhaustiveness.
        Err(CdpError::BrowserGone) => Err(ApiError::BrowserFailed("the browser is gone".into())),
        Err(CdpError::Protocol(m)) => Err(ApiError::Unprocessable {
            code: "browser_error",
            message: m,
        }),
    }
}
