//! Agent authentication: `Authorization: Bearer <API key>`.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use crate::error::ApiError;
use crate::state::AppState;
use crate::store::api_keys::{ApiKeyOwner, KEY_PREFIX};

/// The caller, authenticated by API key. Put it first among a handler's
/// extractors so an unauthenticated request learns nothing else.
#[derive(Debug, Clone)]
pub struct Agent(pub ApiKeyOwner);

/// The longest header value worth hashing.
const MAX_KEY_LEN: usize = 256;

impl FromRequestParts<AppState> for Agent {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Looked up (and hashed) once per request, whichever extractor asks first.
        if let Some(agent) = parts.extensions.get::<Self>() {
            return Ok(agent.clone());
        }
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or(ApiError::Unauthorized)?;
        let value = header.to_str().map_err(|_| ApiError::Unauthorized)?;
        let key = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .map(str::trim)
            .ok_or(ApiError::Unauthorized)?;
        if key.len() > MAX_KEY_LEN || !key.starts_with(KEY_PREFIX) {
            return Err(ApiError::Unauthorized);
        }
        let owner = state
            .store
            .api_key_lookup(key)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        parts.extensions.insert(Self(owner.clone()));
        Ok(Self(owner))
    }
}
