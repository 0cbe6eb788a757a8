//! The one state object handlers and server functions share.

use std::ops::Deref;
use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::Settings;
use crate::egress::EgressGuard;
use crate::sessions::SessionManager;
use crate::store::Store;

/// Cheap to clone; everything lives behind one `Arc`.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// What [`AppState`] holds.
pub struct Inner {
    /// Settings as loaded at start.
    pub settings: Settings,
    /// The database.
    pub store: Store,
    /// Where the dashboard's assets are and how they are named.
    pub leptos: LeptosOptions,
    /// The dashboard's built assets (`/pkg/`), read once at start.
    pub assets: crate::dashboard::assets::Assets,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// The forward proxy every browser must use.
    pub egress: EgressGuard,
    /// The session engine.
    pub sessions: SessionManager,
    /// This replica among the others on the database.
    pub cluster: crate::cluster::Cluster,
    /// Encrypted site credentials.
    pub vault: crate::vault::Vault,
    /// The periodic jobs (reaper, GC); stopped at shutdown.
    pub housekeeping: crate::housekeeping::Housekeeping,
    /// Operators, passkeys and dashboard sessions.
    pub auth: crate::auth::Auth,
    /// `run_task`.
    pub tasks: crate::tasks::Tasks,
    /// Live view tickets and open views.
    pub live: crate::live::Live,
    /// The last audit-chain verification run from the dashboard.
    pub last_verification: crate::dashboard::LastVerification,
}

impl AppState {
    /// Wraps the parts.
    pub fn new(inner: Inner) -> Self {
        Self(Arc::new(inner))
    }
}

impl Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}
