//! Off-list navigation held at the browser: in an operator-mode session
//! with domains (whose logins were injected), a tab's main frame loads
//! only a host the session's domains cover, one an operator approved (or
//! the tenant's rules let through), or anything while an operator holds
//! control. Whatever starts it — a page's script, an open redirect on an
//! allowed site, a meta refresh, a form posting off-site — a refused
//! document fails in the browser (`net::ERR_BLOCKED_BY_CLIENT`) and is
//! audited as `navigation.refused` with its host (never the URL: it may
//! carry tokens). The risk gate judges the agent's own navigations first
//! (`off_list_navigation`); this is what holds when the page moves itself.

use std::sync::{Arc, Weak};

use futures::StreamExt;
use serde_json::json;

use super::{CredentialMode, RunningSession, SessionManager};
use crate::audit::{Actor, NewEvent};
use crate::policy::Rule;

impl SessionManager {
    /// Starts holding `live`'s main-frame navigations to its domains, when
    /// it is an operator-mode session with domains and the tenant's rules
    /// make an off-list navigation wait.
    pub(super) async fn guard_navigation(&self, live: &Arc<RunningSession>) -> anyhow::Result<()> {
        let rules = self.0.policy.rules(live.tenant.as_str());
        if live.mode != CredentialMode::Operator
            || live.domains.is_empty()
            || !rules.level(Rule::OffListNavigation).waits()
        {
            return Ok(());
        }
        let mut held = crate::cdp::hold_documents(live.conn.browser()).await?;
        let session = Arc::downgrade(live);
        let store = self.0.store.clone();
        let (tenant, id) = (live.tenant.clone(), live.id.clone());
        tokio::spawn(async move {
            let mut tabs = std::collections::HashSet::new();
            while let Some(paused) = held.next().await {
                let Some(live) = session.upgrade() else {
                    break;
                };
                let load = match &paused.host {
                    None => true,
                    Some(host) => live.may_load(host),
                };
                // Only a tab's own document is held back: a frame inside
                // a page of the list is that page's business.
                let refuse = !load && {
                    if !tabs.contains(&paused.frame) {
                        tabs = crate::cdp::tab_ids(live.conn.browser()).await;
                    }
                    tabs.contains(&paused.frame)
                };
                if refuse {
                    let host = paused.host.clone().unwrap_or_default();
                    let event = NewEvent::new(Actor::System, "navigation.refused")
                        .tenant(&tenant)
                        .session(id.as_str())
                        .params(json!({ "host": host, "rule": "off_list_navigation" }))
                        .outcome("refused: outside the session's domains");
                    let store = store.clone();
                    tokio::spawn(async move {
                        if let Err(e) = store.audit_append(event).await {
                            tracing::error!(error = %format!("{e:#}"), "failed to audit a refused navigation");
                        }
                    });
                }
                let weak: Weak<RunningSession> = Arc::downgrade(&live);
                drop(live);
                tokio::spawn(async move {
                    if let Some(live) = weak.upgrade() {
                        crate::cdp::release(live.conn.browser(), paused, !refuse).await;
                    }
                });
            }
        });
        Ok(())
    }
}
