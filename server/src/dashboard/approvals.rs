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

#[async_trait::async_trait]
impl ApprovalsBackend for AppState {
    async fn approvals(&self, _op: &Operator) -> UiResult<ApprovalsView> {
        Ok(ApprovalsView {
            pending: self
                .sessions
                .approvals()
                .list()
                .into_iter()
                .map(view)
                .collect(),
            now: now_ms(),
        })
    }

    async fn approval_count(&self, _op: &Operator) -> UiResult<usize> {
        Ok(self.sessions.approvals().count())
    }

    async fn decide_approval(&self, op: &Operator, id: String, approve: bool) -> UiResult<()> {
        let result = match self.sessions.decide_approval(&id, approve, &op.id).await {
            Ok(_) => Ok(()),
            Err(DecideError::NotFound) => Err(UiError::conflict(
                "this action is no longer waiting: it was decided, timed out or withdrawn",
            )),
        };
        super::audited(self, op, "approval.decide", result).await
    }
}
