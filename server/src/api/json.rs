//! A JSON body extractor whose rejections are [`ApiError`]s.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Like `axum::Json`, but a malformed, wrongly typed or oversized body gets
/// the API's JSON error shape.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => {
                    ApiError::PayloadTooLarge("request body is too large".into())
                }
                _ => ApiError::BadRequest(json_message(&rejection)),
            }),
        }
    }
}

fn json_message(r: &JsonRejection) -> String {
    // serde's messages name the field and the problem, never echo the body.
    let text = r.body_text();
    let text = text
        .strip_prefix("Failed to deserialize the JSON body into the target type: ")
        .unwrap_or(&text);
    format!(
        "invalid JSON body: {}",
        text.chars().take(300).collect::<String>()
    )
}
