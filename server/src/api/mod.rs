//! HTTP routes outside the dashboard: operability and the agent API.

pub mod auth;
pub mod cdp;
mod embed;
mod grants;
pub mod json;
pub mod mcp;
pub mod openapi;
mod ops;
mod sessions;
mod tasks;

pub use cdp::router as cdp_router;
pub use embed::router as embed_router;
pub use mcp::router as mcp_router;
pub use ops::router as ops_router;
pub use sessions::UPLOAD_PATH;
pub use sessions::router as sessions_router;

/// The agent API's OpenAPI document (what `/api/openapi.json` serves).
pub fn openapi_document() -> serde_json::Value {
    openapi::document(&sessions::routes())
}
