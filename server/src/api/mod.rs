//! HTTP routes outside the dashboard: operability and the agent API.

pub mod auth;
mod grants;
pub mod json;
pub mod openapi;
mod ops;
mod sessions;

pub use ops::router as ops_router;
pub use sessions::router as sessions_router;
