//! The control plane as the dashboard's server functions see it.

use app::api::{AuditRow, AuditVerification, Dashboard, RecordingUsage, SystemStatus};

use crate::audit::{self, Verification};
use crate::config::DatabaseKind;
use crate::sandbox::chromium_runnable;
use crate::state::AppState;
use crate::time::rfc3339_ms;

fn safe(what: &str, err: anyhow::Error) -> String {
    tracing::error!(error = %format!("{err:#}"), "dashboard: {what} failed");
    format!("{what} failed; see the server log")
}

#[async_trait::async_trait]
impl Dashboard for AppState {
    async fn status(&self) -> Result<SystemStatus, String> {
        let database_ok = self.store.ping().await.is_ok();
        let audit_events = if database_ok {
            self.store
                .audit_head()
                .await
                .map_err(|e| safe("reading the audit head", e))?
                .0
        } else {
            0
        };
        Ok(SystemStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            database: match self.store.kind() {
                DatabaseKind::Sqlite => "sqlite".into(),
                DatabaseKind::Postgres => "postgres".into(),
            },
            database_ok,
            chromium_path: self.settings.chromium_path.display().to_string(),
            chromium_ok: chromium_runnable(&self.settings.chromium_path),
            audit_events,
            checked_at: rfc3339_ms(crate::time::now_ms()),
            recordings: if database_ok {
                let recorder = self.sessions.recorder();
                self.store
                    .tenant_list()
                    .await
                    .map_err(|e| safe("listing tenants", e))?
                    .into_iter()
                    .map(|t| RecordingUsage {
                        used_bytes: recorder.usage(t.id.as_str()),
                        quota_bytes: recorder.quota_of(t.id.as_str()),
                        tenant: t.id.to_string(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        })
    }

    async fn recent_audit(&self, limit: i64) -> Result<Vec<AuditRow>, String> {
        let events = self
            .store
            .audit_recent(None, limit)
            .await
            .map_err(|e| safe("reading the audit log", e))?;
        Ok(events
            .into_iter()
            .map(|e| AuditRow {
                seq: e.seq,
                ts: rfc3339_ms(e.ts),
                tenant: e.tenant,
                session: e.session,
                actor: e.actor,
                action: e.action,
                params: e.params,
                outcome: e.outcome,
                hash_prefix: e.hash.chars().take(12).collect(),
            })
            .collect())
    }

    async fn verify_audit(&self) -> Result<AuditVerification, String> {
        let v = audit::verify(&self.store)
            .await
            .map_err(|e| safe("verifying the audit log", e))?;
        Ok(match v {
            Verification::Intact { events } => AuditVerification {
                intact: true,
                events,
                broken_seq: None,
                reason: None,
            },
            Verification::Broken { seq, reason } => AuditVerification {
                intact: false,
                events: seq - 1,
                broken_seq: Some(seq),
                reason: Some(reason),
            },
        })
    }
}
