//! The approvals page: the risk gate's pending actions, and decisions on
//! them (audited by the session engine as `approval.decided`).

use app::api::approvals::{ApprovalView, ApprovalsView};
use app::api::auth::Operator;
use app::api::backend::{ApprovalsBackend, UiResult};
use app::error::UiError;

use crate::policy::{DecideError, Pending};
use crate::state::AppState;
use crate::time::now_ms;

fn view(p: Pending) -> ApprovalView {
    ApprovalView {
        id: p.id,
        tenant: p.tenant,
        session: p.session,
        actor: p.actor,
        action: p.action,
        params: serde_json::to_string_pretty(&p.params).unwrap_or_default(),
        level: p.level.as_str().to_owned(),
        reasons: p.reasons,
        created_at: p.created_at,
        expires_at: p.expires_at,
        has_screenshot: p.has_screenshot,
    }
}

/// This replica's pending approvals and every other replica's, oldest
/// first.
async fn every_pending(state: &AppState, op: &Operator) -> Vec<Pending> {
    let mut all = every_tenants_pending(state, op).await;
    all.retain(|p| op.sees(&p.tenant));
    all
}

/// [`every_pending`] of every tenant, whatever `op`'s scope.
async fn every_tenants_pending(state: &AppState, op: &Operator) -> Vec<Pending> {
    let mut all = state.sessions.approvals().list();
    all.extend(
        state
            .cluster
            .peers(&op.id)
            .get_all::<Pending>("/api/internal/approvals")
            .await,
    );
    all.sort_by_key(|p| p.created_at);
    all
}

#[async_trait::async_trait]
impl ApprovalsBackend for AppState {
    async fn approvals(&self, op: &Operator) -> UiResult<ApprovalsView> {
        Ok(ApprovalsView {
            pending: every_pending(self, op)
                .await
                .into_iter()
                .map(view)
                .collect(),
            now: now_ms(),
        })
    }

    async fn approval_count(&self, op: &Operator) -> UiResult<usize> {
        Ok(every_pending(self, op).await.len())
    }

    async fn decide_approval(&self, op: &Operator, id: String, approve: bool) -> UiResult<()> {
        // A scoped operator decides only what the listing shows in their
        // scope: an approval it does not show (decided, or on a replica
        // whose listing failed just now) is not decided on trust.
        if !op.global() {
            let found = every_tenants_pending(self, op)
                .await
                .into_iter()
                .find(|p| p.id == id);
            let Some(p) = found else {
                return super::audited(
                    self,
                    op,
                    "approval.decide",
                    Err(UiError::conflict(
                        "this action is no longer waiting: it was decided, timed out or withdrawn",
                    )),
                )
                .await;
            };
            super::in_scope(self, op, "decide an approval", &p.tenant, || {
                UiError::not_found(format!("approval {id:?}"))
            })
            .await?;
        }
        let local = self.sessions.decide_approval(&id, approve, &op.id).await;
        // Not waiting here: the session may run on another replica.
        let decided = match local {
            Ok(_) => Ok(()),
            Err(DecideError::NotFound) => decide_elsewhere(self, &id, approve, &op.id).await,
        };
        let result = match decided {
            Ok(()) => Ok(()),
            Err(DecideError::NotFound) => Err(UiError::conflict(
                "this action is no longer waiting: it was decided, timed out or withdrawn",
            )),
        };
        super::audited(self, op, "approval.decide", result).await
    }
}

/// Decides approval `id` on the replica that holds it.
async fn decide_elsewhere(
    state: &AppState,
    id: &str,
    approve: bool,
    op: &str,
) -> Result<(), DecideError> {
    if !crate::ids::is_random_id(crate::ids::APPROVAL, id) {
        return Err(DecideError::NotFound);
    }
    let body = serde_json::to_vec(&serde_json::json!({ "approve": approve })).unwrap_or_default();
    let path = format!("/api/internal/approvals/{id}/decide");
    match state
        .cluster
        .peers(op)
        .first_ok(axum::http::Method::POST, &path, body)
        .await
    {
        Some(_) => Ok(()),
        None => Err(DecideError::NotFound),
    }
}
