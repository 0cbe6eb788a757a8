//! Built-in HTTPS: the certificate and key from `tls_cert` / `tls_key`,
//! checked at start, and the accept loop that serves the router over TLS.
//! Without them Cordon serves plain HTTP through `axum::serve` (on loopback,
//! or behind a TLS-terminating proxy). With them, the internal hop between
//! replicas is HTTPS too, trusting only this deployment's certificate.

mod certs;
pub mod peer;
mod serve;

pub use certs::server_config;
pub use peer::peer_client_config;
pub use serve::{HANDSHAKE_TIMEOUT, serve};
