//! `/mcp`: the agent API as MCP tools (Streamable HTTP, the official `rmcp`
//! SDK). An adapter like the HTTP handlers: it parses into the same input
//! types and calls the same engine functions, with the same key check.

mod answer;
mod service;
mod tools;

pub use service::{PATH, router};
