//! The caller's session named by the path, resolved before the body is read.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use crate::api::auth::Agent;
use crate::error::ApiError;
use crate::sessions::RunningSession;
use crate::state::AppState;
use crate::store::api_keys::ApiKeyOwner;

/// The caller (API key resolved once per request) and its live session
/// named by the `{id}` path segment. Another tenant's or an unknown id is
/// 404 and an ended one 410, whatever the body says.
pub struct SessionRef {
    /// Who asks.
    pub owner: ApiKeyOwner,
    /// The session.
    pub session: Arc<RunningSession>,
}

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
        let id = crate::sessions::session_id(id)?;
        let session = state.sessions.get(&owner.tenant, &id).await?;
        Ok(Self { owner, session })
    }
}
