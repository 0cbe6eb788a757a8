//! Cordon's control plane. One module per concern; see ARCHITECTURE.md.

pub mod api;
pub mod audit;
pub mod cdp;
pub mod cli;
pub mod config;
pub mod crypto;
pub mod dashboard;
pub mod domain;
pub mod edge;
pub mod egress;
pub mod error;
pub mod grants;
pub mod housekeeping;
pub mod ids;
pub mod peer;
pub mod recording;
pub mod sandbox;
pub mod sessions;
pub mod startup;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod tenants;
pub mod time;
pub mod vault;
