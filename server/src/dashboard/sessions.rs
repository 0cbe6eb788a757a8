//! The sessions list and a session's page.

use app::api::auth::Operator;
use app::api::backend::{SessionsBackend, UiResult};
use app::api::screenshots::{ShotView, TimelineView};
use app::api::sessions::{EgressView, LiveLinkView, SessionDetail, SessionFilter, SessionView};
use app::error::UiError;

use super::{internal, json_list};
use crate::audit::Actor;
use crate::domain::{LiveLinkId, SessionId, SessionState, TenantId};
use crate::sessions::SessionError;
use crate::state::AppState;
use crate::store::egress::Decision;
use crate::store::sessions::SessionRow;

/// The most sessions the list shows.
const LIST_MAX: i64 = 200;

fn view(r: SessionRow, activity: Option<&(i64, Option<String>)>) -> SessionView {
    SessionView {
        domains: json_list(&r.domains),
        id: r.id,
        tenant: r.tenant_id,
        mode: r.credential_mode,
        record: r.record,
        state: r.state.as_str().to_owned(),
        close_reason: r.close_reason.map(|c| c.as_str().to_owned()),
        created_at: r.created_at,
        last_activity_at: r.last_activity_at,
        deadline_at: r.deadline_at,
        closed_at: r.closed_at,
        tool_calls: activity.map_or(0, |a| a.0),
        last_action: activity.and_then(|a| a.1.clone()),
    }
}

#[async_trait::async_trait]
impl SessionsBackend for AppState {
    async fn sessions(&self, op: &Operator, filter: SessionFilter) -> UiResult<Vec<SessionView>> {
        let tenant = match filter.tenant.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => Some(
                t.parse::<TenantId>()
                    .map_err(|e| UiError::invalid("tenant", e.to_string()))?,
            ),
            None => None,
        };
        // A tenant outside the operator's scope has no sessions for them.
        let tenants = match tenant {
            Some(t) if !op.sees(t.as_str()) => {
                self.auth
                    .out_of_scope(&op.id, "list sessions", t.as_str())
                    .await;
                return Ok(Vec::new());
            }
            Some(t) => Some(vec![t.to_string()]),
            None => op.tenants.clone(),
        };
        let state = match filter.state.as_deref().filter(|s| !s.is_empty()) {
            Some(s) => Some(
                s.parse::<SessionState>()
                    .map_err(|e| UiError::invalid("state", e.to_string()))?,
            ),
            None => None,
        };
        let rows = self
            .store
            .session_list_filtered(tenants.as_deref(), state, LIST_MAX)
            .await
            .map_err(|e| internal("listing sessions", e))?;
        // Rows are written with a `SessionId`; one that is not has no activity.
        let ids: Vec<SessionId> = rows.iter().filter_map(|r| r.id.parse().ok()).collect();
        let activity = self
            .store
            .session_activity(&ids)
            .await
            .map_err(|e| internal("reading session activity", e))?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let a = activity.get(&r.id);
                view(r, a)
            })
            .collect())
    }

    async fn session(&self, op: &Operator, id: String) -> UiResult<SessionDetail> {
        let (sid, tenant, row) = find_for(self, op, &id, "show a session").await?;
        let waiting = super::tasks::every_waiting(self, op).await;
        let activity = self
            .store
            .session_activity(std::slice::from_ref(&sid))
            .await
            .map_err(|e| internal("reading session activity", e))?;
        let audit = self
            .store
            .audit_of_session(&sid, 500)
            .await
            .map_err(|e| internal("reading the session's audit trail", e))?;
        let egress = match &row.sandbox_id {
            Some(b) => self
                .store
                .egress_for_sandbox(b, 500)
                .await
                .map_err(|e| internal("reading the egress log", e))?,
            None => Vec::new(),
        };
        let screenshots = self
            .sessions
            .recorder()
            .timeline(&tenant, &sid)
            .await
            .map_err(|e| internal("listing screenshots", e))?
            .len() as i64;
        Ok(SessionDetail {
            session: view(row.clone(), activity.get(&row.id)),
            audit: audit.into_iter().map(super::audit::row).collect(),
            egress: egress
                .into_iter()
                .map(|e| EgressView {
                    ts: e.entry.ts,
                    host: e.entry.host,
                    port: i64::from(e.entry.port),
                    allowed: e.entry.decision == Decision::Allowed,
                    reason: e.entry.reason,
                    bytes_up: i64::try_from(e.entry.bytes_up).unwrap_or(i64::MAX),
                    bytes_down: i64::try_from(e.entry.bytes_down).unwrap_or(i64::MAX),
                })
                .collect(),
            screenshots,
            control: self
                .sessions
                .find_live(&sid)
                .await
                .ok()
                .and_then(|l| l.control())
                .map(|h| h.name),
            tasks: self
                .store
                .task_list_in(op.tenants.as_deref(), Some(&sid), 50)
                .await
                .map_err(|e| internal("listing the session's tasks", e))?
                .iter()
                .map(|t| super::tasks::line(t, &waiting))
                .collect(),
            live_links: crate::live::link::list(&self.store, &tenant, &sid)
                .await
                .map_err(|e| internal("listing the session's live links", e))?
                .into_iter()
                .map(|l| LiveLinkView {
                    id: l.link.id.into(),
                    mode: l.link.mode.as_str().to_owned(),
                    state: l.state.to_owned(),
                    key_id: l.link.key_id,
                    created_at: l.link.created_at,
                    expires_at: l.link.expires_at,
                })
                .collect(),
        })
    }

    async fn timeline(&self, op: &Operator, session: String) -> UiResult<TimelineView> {
        // Here when the session's folder is on this disk: recorded here, or
        // by any replica under `shared_dir` (even one that is gone).
        let found = find(self, &session).await;
        match &found {
            Ok((_, tenant, _)) => {
                super::in_scope(
                    self,
                    op,
                    "read a session's screenshots",
                    tenant.as_str(),
                    || UiError::not_found(format!("session {session:?}")),
                )
                .await?;
            }
            Err(e) if !op.global() => return Err(e.clone()),
            Err(_) => {}
        }
        if let Ok((sid, tenant, _)) = found
            && self
                .sessions
                .recorder()
                .has_session(tenant.as_str(), sid.as_str())
        {
            return self.timeline_here(op, session).await;
        }
        // Recorded by another replica: its data dir has the files.
        if let Some(view) = self
            .cluster
            .peers(&op.id)
            .get_recorded_json(&session, &format!("/api/internal/timeline/{session}"))
            .await
        {
            return Ok(view);
        }
        self.timeline_here(op, session).await
    }
    async fn end_session(&self, op: &Operator, id: String) -> UiResult<()> {
        if let Ok((_, tenant, _)) = find(self, &id).await {
            super::in_scope(self, op, "end a session", tenant.as_str(), || {
                UiError::not_found(format!("session {id:?}"))
            })
            .await?;
        }
        let result = async {
            let sid = crate::sessions::session_id(&id)
                .map_err(|e| session_error(&id, "ending the session", e))?;
            self.sessions
                .end_by_operator(&sid, &op.id)
                .await
                .map_err(|e| session_error(&id, "ending the session", e))
        }
        .await;
        super::audited(self, op, "session.end", result).await
    }

    async fn revoke_live_link(&self, op: &Operator, session: String, id: String) -> UiResult<()> {
        let (sid, tenant, _) = find_for(self, op, &session, "revoke a live link").await?;
        let not_found = || UiError::not_found(format!("live link {id:?}"));
        let link: LiveLinkId = id.parse().map_err(|_| not_found())?;
        crate::live::link::revoke(
            &self.store,
            &Actor::Operator(op.id.clone()),
            &tenant,
            &sid,
            &link,
        )
        .await
        .map_err(|e| match e {
            crate::live::link::LinkError::Internal(e) => internal("revoking a live link", e),
            _ => not_found(),
        })
    }
}

/// A session engine's refusal as the dashboard shows it: unknown → 404,
/// ended → 409, anything else a fault while doing `what`.
pub(super) fn session_error(id: &str, what: &str, e: SessionError) -> UiError {
    match e {
        SessionError::NotFound => UiError::not_found(format!("session {id:?}")),
        SessionError::Gone { state, .. } => {
            UiError::conflict(format!("this session is {state} already"))
        }
        SessionError::Limit { message, .. } => UiError::Unavailable { message },
        SessionError::Invalid(e) => UiError::invalid("domains", e.to_string()),
        e => internal(what, e),
    }
}

/// A session of any tenant by its id (the dashboard's view): its parsed id,
/// its tenant and its row; `NotFound` for a malformed or unknown id.
async fn find(state: &AppState, id: &str) -> UiResult<(SessionId, TenantId, SessionRow)> {
    let not_found = || UiError::not_found(format!("session {id:?}"));
    let sid: SessionId = id.parse().map_err(|_| not_found())?;
    let row = state
        .store
        .session_find(&sid)
        .await
        .map_err(|e| internal("reading the session", e))?
        .ok_or_else(not_found)?;
    let tenant: TenantId = row
        .tenant_id
        .parse()
        .map_err(|e| internal("reading the session", e))?;
    Ok((sid, tenant, row))
}

/// [`find`], for `op`: a session of a tenant outside their scope is
/// `NotFound` (audited, `what` saying what was tried).
pub(super) async fn find_for(
    state: &AppState,
    op: &Operator,
    id: &str,
    what: &str,
) -> UiResult<(SessionId, TenantId, SessionRow)> {
    let found = find(state, id).await?;
    super::in_scope(state, op, what, found.1.as_str(), || {
        UiError::not_found(format!("session {id:?}"))
    })
    .await?;
    Ok(found)
}

impl AppState {
    /// A session's timeline from this replica's data dir.
    pub(crate) async fn timeline_here(
        &self,
        _op: &Operator,
        session: String,
    ) -> UiResult<TimelineView> {
        let (sid, tenant, row) = find(self, &session).await?;
        let recorder = self.sessions.recorder();
        let shots = recorder
            .timeline(&tenant, &sid)
            .await
            .map_err(|e| internal("listing screenshots", e))?;
        let retention = std::time::Duration::from_secs(
            self.settings.recording.recording_retention_days * 24 * 3600,
        );
        let retained_until = if row.record == "audit" {
            recorder
                .expires_at(&tenant, &sid, retention)
                .await
                .map_err(|e| internal("reading screenshot ages", e))?
        } else {
            None
        };
        Ok(TimelineView {
            session: row.id,
            tenant: row.tenant_id,
            record: row.record,
            retained_until,
            shots: shots
                .into_iter()
                .map(|s| ShotView {
                    id: s.id.to_string(),
                    seq: s.seq,
                    taken_at: s.taken_at_ms,
                    bytes: s.bytes,
                })
                .collect(),
        })
    }
}
