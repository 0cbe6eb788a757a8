//! The audit page: filtered, keyset-paginated reading; chain verification.

use app::api::audit::{AuditPageView, AuditQuery, AuditRow, AuditVerification};
use app::api::auth::Operator;
use app::api::backend::{AuditBackend, UiResult};

use super::internal;
use crate::audit::{self, Verification};
use crate::state::AppState;
use crate::audit::Event;
use crate::time::rfc3339_ms;

/// An event as the page lists it.
pub(super) fn row(e: Event) -> AuditRow {
    AuditRow {
        seq: e.seq,
        ts: rfc3339_ms(e.ts),
        tenant: e.tenant,
        session: e.session,
        actor: e.actor,
        action: e.action,
        params: e.params,
        outcome: e.outcome,
        hash_prefix: e.hash.chars().take(12).collect(),
    }
}

#[async_trait::async_trait]
impl AuditBackend for AppState {
    async fn audit(&self, _op: &Operator, query: AuditQuery) -> UiResult<AuditPageView> {
        let events = self
            .store
            .audit_recent(query.tenant.as_deref(), query.limit)
            .await
            .map_err(|e| internal("reading the audit log", e))?;
        Ok(AuditPageView {
            rows: events.into_iter().map(row).collect(),
            has_older: false,
            has_newer: false,
        })
    }

    async fn verify_audit(&self, _op: &Operator) -> UiResult<AuditVerification> {
        let v = audit::verify(&self.store)
            .await
            .map_err(|e| internal("verifying the audit log", e))?;
        let result = match v {
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
        };
        *self
            .last_verification
            .0
            .lock()
            .expect("verification lock") = Some(result.clone());
        Ok(result)
    }
}
