//! HTTP routes outside the dashboard: operability now, the agent API next.

mod ops;

pub use ops::router as ops_router;
