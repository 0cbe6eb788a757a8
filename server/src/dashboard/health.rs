//! The overview: health, what waits for operators, and what runs.

use std::sync::Mutex;

use app::api::audit::AuditVerification;
use app::api::auth::Operator;
use app::api::backend::{HealthBackend, UiResult};
use app::api::credentials::CredentialView;
use app::api::health::{RecordingUsage, ReplicaLine, SystemStatus};

use super::internal;
use crate::sandbox::chromium_runnable;
use crate::state::AppState;
use crate::store::DatabaseKind;
use crate::time::{now_ms, rfc3339_ms};

/// The last audit-chain verification run from the dashboard, shown on the
/// overview (verifying a million events on every overview load is too slow).
#[derive(Default)]
pub struct LastVerification(pub Mutex<Option<AuditVerification>>);

const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

#[async_trait::async_trait]
impl HealthBackend for AppState {
    async fn status(&self, op: &Operator) -> UiResult<SystemStatus> {
        let database_ok = self.store.ping().await.is_ok();
        let mut status = SystemStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            database: match self.store.kind() {
                DatabaseKind::Sqlite => "sqlite".into(),
                DatabaseKind::Postgres => "postgres".into(),
            },
            database_ok,
            chromium_path: self.settings.sandbox.chromium_path.display().to_string(),
            chromium_ok: chromium_runnable(&self.settings.sandbox.chromium_path),
            audit_events: 0,
            checked_at: rfc3339_ms(now_ms()),
            recordings: Vec::new(),
            sessions: Vec::new(),
            driver: self.sessions.driver_kind().as_str().to_owned(),
            pool_ready: self.sessions.pool_ready() as u64,
            pool_size: u64::from(self.settings.sessions.pool_size),
            pending_grants: 0,
            expiring: Vec::new(),
            last_verification: self
                .last_verification
                .0
                .lock()
                .expect("verification lock")
                .clone(),
            replicas: Vec::new(),
        };
        if !database_ok {
            return Ok(status);
        }
        // A scoped operator's overview counts only their tenants.
        let scope = op.tenants.as_deref();
        if let Some(v) = status.last_verification.take() {
            status.last_verification = Some(super::audit::scoped_verification(self, op, v).await?);
        }
        let store = &self.store;
        status.audit_events = match scope {
            None => {
                store
                    .audit_head()
                    .await
                    .map_err(|e| internal("reading the audit head", e))?
                    .0
            }
            Some(ts) => store
                .audit_count_in(ts)
                .await
                .map_err(|e| internal("counting audit events", e))?,
        };
        let recorder = self.sessions.recorder();
        status.recordings = store
            .tenant_list()
            .await
            .map_err(|e| internal("listing tenants", e))?
            .into_iter()
            .filter(|t| op.sees(t.id.as_str()))
            .map(|t| RecordingUsage {
                used_bytes: recorder.usage(t.id.as_str()),
                quota_bytes: recorder.quota_of(t.id.as_str()),
                tenant: t.id.to_string(),
            })
            .collect();
        status.sessions = store
            .session_counts(now_ms() - 24 * 3600 * 1000, scope)
            .await
            .map_err(|e| internal("counting sessions", e))?;
        status.pending_grants = store
            .grant_requests_waiting(op.tenants.as_deref())
            .await
            .map_err(|e| internal("counting grant requests", e))?;
        let soon = now_ms() + WEEK_MS;
        status.expiring = store
            .vault_list(None)
            .await
            .map_err(|e| internal("listing credentials", e))?
            .into_iter()
            .filter(|c| c.earliest_expiry.is_some_and(|e| e <= soon) && op.sees(&c.tenant_id))
            .map(super::credentials::view)
            .collect::<Vec<CredentialView>>();
        status.replicas = self.replica_lines().await?;
        if scope.is_some() {
            // Sessions per replica count every tenant's.
            for r in &mut status.replicas {
                r.running = 0;
            }
        }
        Ok(status)
    }
}

impl AppState {
    /// The replicas on this database, with who leads and what each runs.
    async fn replica_lines(&self) -> UiResult<Vec<ReplicaLine>> {
        let rows = self
            .store
            .replicas_recent(now_ms() - 24 * 3600 * 1000)
            .await
            .map_err(|e| internal("listing replicas", e))?;
        let leader = self
            .cluster
            .leader_name()
            .await
            .map_err(|e| internal("finding the housekeeping replica", e))?;
        let running: std::collections::HashMap<String, i64> = self
            .store
            .sessions_running_by_host()
            .await
            .map_err(|e| internal("counting sessions per replica", e))?
            .into_iter()
            .collect();
        Ok(rows
            .into_iter()
            .map(|r| ReplicaLine {
                this: r.name == self.cluster.name(),
                leader: r.state == "up" && leader.as_deref() == Some(r.name.as_str()),
                running: running.get(&r.name).copied().unwrap_or(0),
                name: r.name,
                state: r.state,
                heartbeat_at: r.heartbeat_at,
                started_at: r.started_at,
                version: r.version,
            })
            .collect())
    }
}
