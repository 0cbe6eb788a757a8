//! Operator take-over: while an operator holds a session's control from the
//! live view, agent tool calls are refused (`409 operator_has_control`).
//! Taking and handing back are audited (`session.control`) and shown on the
//! session's page.

use std::sync::Arc;

use serde_json::json;

use super::running::ControlHolder;
use super::{RunningSession, SessionError, SessionManager};
use crate::audit::{Actor, NewEvent};
use crate::time::now_ms;

impl SessionManager {
    /// Gives control of `live` to the operator. Taking it from another
    /// operator is allowed (and audited with whom it was taken from); taking
    /// it again is a no-op.
    pub async fn take_control(
        &self,
        live: &Arc<RunningSession>,
        operator_id: &str,
        name: &str,
    ) -> Result<(), SessionError> {
        // A refresh session is its operator's alone: control never passes.
        if !live.open_to(operator_id) {
            return Err(SessionError::NotFound);
        }
        let previous = live.control();
        if previous
            .as_ref()
            .is_some_and(|h| h.operator_id == operator_id)
        {
            return Ok(());
        }
        self.0
            .store
            .audit_append(
                NewEvent::new(Actor::Operator(operator_id.to_owned()), "session.control")
                    .tenant(&live.tenant)
                    .session(live.id.as_str())
                    .params(json!({
                        "from": previous.as_ref().map(|h| h.operator_id.clone()),
                    }))
                    .outcome("taken"),
            )
            .await?;
        live.set_control(Some(ControlHolder {
            operator_id: operator_id.to_owned(),
            name: name.to_owned(),
            since: now_ms(),
        }));
        Ok(())
    }

    /// Hands control back to the agent. `operator_id` is who asks (or the
    /// system, when the holder's last live view closed long enough ago);
    /// answers whether anybody held it.
    pub async fn release_control(
        &self,
        live: &Arc<RunningSession>,
        actor: Actor,
    ) -> Result<bool, SessionError> {
        let Some(holder) = live.control() else {
            return Ok(false);
        };
        self.0
            .store
            .audit_append(
                NewEvent::new(actor, "session.control")
                    .tenant(&live.tenant)
                    .session(live.id.as_str())
                    .params(json!({ "from": holder.operator_id }))
                    .outcome("released"),
            )
            .await?;
        live.set_control(None);
        Ok(true)
    }

    /// A running session of any tenant, for the dashboard; `NotFound` if it
    /// never existed, `Gone` if it ended or runs on another control plane.
    pub async fn find_live(
        &self,
        sid: &crate::domain::SessionId,
    ) -> Result<Arc<RunningSession>, SessionError> {
        let live = self.0.live.lock().expect("live lock").get(sid).cloned();
        if let Some(live) = live {
            return Ok(live);
        }
        match self.0.store.session_find(sid).await? {
            Some(row) => Err(SessionError::Gone {
                state: row.state,
                reason: row.close_reason,
            }),
            None => Err(SessionError::NotFound),
        }
    }
}
