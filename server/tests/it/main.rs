//! Integration tests: one binary (linking is the slow part), one module per area.
//! They start the real server on port 0 with a fresh database of either
//! backend, a real Chromium, and the real `cordon` binary.

mod helpers;

mod audit_query;
mod bwrap;
mod cdp;
mod chromium;
mod cli;
mod dashboard;
mod egress;
mod exec;
mod files;
mod first_start;
mod gate;
mod grants;
mod hostile;
mod hostile_frames;
mod http;
mod infra;
mod limits;
mod live;
mod live_link;
mod malformed_ids;
mod mcp;
mod reaper;
mod replicas;
mod scope;
mod sessions;
mod site;
mod stop;
mod storage;
mod tasks;
mod tls;
mod tools;
mod totp;
mod vault;
