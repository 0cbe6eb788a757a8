//! The live view's tickets, refresh sessions and handing control back.

use app::api::auth::{Operator, Role};
use app::api::backend::{LiveBackend, UiResult};
use app::api::live::LiveAccess;
use app::error::UiError;

use super::sessions::session_error;
use super::{actor, internal};
use crate::domain::{TargetUrl, TenantId};
use crate::live::TICKET_TTL_S;
use crate::sessions::{Tool, ToolCall};
use crate::state::AppState;

#[async_trait::async_trait]
impl LiveBackend for AppState {
    async fn live_ticket(&self, op: &Operator, session: String) -> UiResult<LiveAccess> {
        let result = async {
            let live = self
                .sessions
                .find_live(&session)
                .await
                .map_err(|e| session_error(&session, "finding the session", e))?;
            let ticket = self.live.tickets.issue(&op.id, live.id.as_str());
            Ok(LiveAccess {
                path: format!("/live/{}?ticket={ticket}", live.id),
                expires_in_s: TICKET_TTL_S,
                may_control: op.role.allows(Role::Operator),
            })
        }
        .await;
        super::audited(self, op, "session.watch", result).await
    }

    async fn start_refresh(
        &self,
        op: &Operator,
        tenant: String,
        domains: String,
        start_url: Option<String>,
    ) -> UiResult<String> {
        let result = async {
            let tenant: TenantId =
                tenant
                    .trim()
                    .parse()
                    .map_err(|e: crate::domain::TenantIdError| {
                        UiError::invalid("tenant", e.to_string())
                    })?;
            if !self
                .store
                .vault_tenant_exists(&tenant)
                .await
                .map_err(|e| internal("reading the tenant", e))?
            {
                return Err(UiError::invalid("tenant", format!("no tenant {tenant}")));
            }
            let domains: Vec<String> = domains
                .split([',', ' ', '\n', '\t'])
                .map(|d| d.trim().to_ascii_lowercase())
                .filter(|d| !d.is_empty())
                .collect();
            let first = domains
                .first()
                .cloned()
                .ok_or_else(|| UiError::invalid("domains", "name at least one domain"))?;
            let start: TargetUrl = match start_url.as_deref().map(str::trim) {
                Some(u) if !u.is_empty() => TargetUrl::parse(u)
                    .map_err(|e| UiError::invalid("start_url", format!("{e}")))?,
                _ => TargetUrl::parse(&format!("https://{first}/"))
                    .map_err(|e| UiError::invalid("domains", format!("{e}")))?,
            };
            let info = self
                .sessions
                .open_refresh(&op.id, &tenant, domains, self.settings.refresh_deadline_s)
                .await
                .map_err(|e| session_error("new", "starting a refresh session", e))?;
            // The first page loads while the operator's browser opens the
            // live view; a refused address shows there as an error.
            let live = self
                .sessions
                .find_live(&info.session_id)
                .await
                .map_err(|e| session_error(&info.session_id, "starting a refresh session", e))?;
            let sessions = self.sessions.clone();
            let who = actor(op);
            tokio::spawn(async move {
                let call = ToolCall::new(Tool::Navigate {
                    url: start,
                    wait: crate::cdp::WaitUntil::Load,
                });
                if let Err(e) = sessions.run_tool(&live, who, call).await {
                    tracing::info!(error = %e, "refresh session: the start page did not load");
                }
            });
            Ok(info.session_id)
        }
        .await;
        super::audited(self, op, "session.refresh", result).await
    }

    async fn release_control(&self, op: &Operator, session: String) -> UiResult<()> {
        let result = async {
            let live = self
                .sessions
                .find_live(&session)
                .await
                .map_err(|e| session_error(&session, "finding the session", e))?;
            let released = self
                .sessions
                .release_control(&live, actor(op))
                .await
                .map_err(|e| session_error(&session, "handing control back", e))?;
            if released {
                Ok(())
            } else {
                Err(UiError::conflict(
                    "no operator holds control of this session",
                ))
            }
        }
        .await;
        super::audited(self, op, "session.control", result).await
    }
}
