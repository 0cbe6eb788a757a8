//! The end of sessions: closing one (at its owner's or an operator's
//! request, after a save, on a failure), the ticker (deadlines, idle, dead
//! browsers), and shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use super::{RunningSession, SessionError, SessionInfo, SessionManager, TICK};
use crate::audit::{Actor, NewEvent};
use crate::domain::{CloseReason, SessionId};
use crate::store::api_keys::ApiKeyOwner;
use crate::time::now_ms;

impl SessionManager {
    /// Closes a session at its owner's request.
    pub async fn close(
        &self,
        owner: &ApiKeyOwner,
        id: &SessionId,
    ) -> Result<SessionInfo, SessionError> {
        let live = self.get(&owner.tenant, id).await?;
        self.end(
            &live.id,
            CloseReason::Client,
            None,
            Actor::Agent(owner.key_id.clone()),
        )
        .await;
        self.info(&owner.tenant, id).await
    }

    /// Ends a running session of any tenant at an operator's request
    /// (dashboard). `NotFound` if it never existed, `Gone` if it has ended
    /// or runs on another control plane.
    pub async fn end_by_operator(
        &self,
        id: &SessionId,
        operator: &str,
    ) -> Result<(), SessionError> {
        let live = self.find_live(id).await?;
        self.end(
            &live.id,
            CloseReason::Operator,
            None,
            Actor::Operator(operator.to_owned()),
        )
        .await;
        Ok(())
    }

    /// Ends a refresh session whose login was saved (dashboard).
    pub async fn end_saved(&self, live: &RunningSession, operator: &str) {
        self.end(
            &live.id,
            CloseReason::Saved,
            None,
            Actor::Operator(operator.to_owned()),
        )
        .await;
    }

    /// Marks a session failed because its browser is gone, and stops it.
    pub async fn fail(&self, id: &SessionId, reason: CloseReason, error: &str) {
        self.end(id, reason, Some(error.to_owned()), Actor::System)
            .await;
    }

    /// Ends a live session: audit, stop the sandbox, keep or drop screenshots,
    /// record the outcome. Safe to call twice (the second does nothing).
    pub(super) async fn end(
        &self,
        id: &SessionId,
        reason: CloseReason,
        error: Option<String>,
        actor: Actor,
    ) {
        self.end_inner(id, reason, error, actor, true).await;
    }

    /// [`Self::end`], but leaving the session's slot reserved for the
    /// caller to release (an open that fails after the session went live).
    pub(super) async fn end_keeping_slot(
        &self,
        id: &SessionId,
        reason: CloseReason,
        error: Option<String>,
        actor: Actor,
    ) {
        self.end_inner(id, reason, error, actor, false).await;
    }

    async fn end_inner(
        &self,
        id: &SessionId,
        reason: CloseReason,
        error: Option<String>,
        actor: Actor,
        release: bool,
    ) {
        let inner = &self.0;
        let Some(live) = ({
            // Out of `live` and into `ending` in one step: the reaper never
            // sees it in neither.
            let mut map = inner.live.lock().expect("live lock");
            let live = map.remove(id);
            if live.is_some() {
                inner
                    .ending
                    .lock()
                    .expect("ending lock")
                    .insert(id.to_string());
            }
            live
        }) else {
            return;
        };
        let failed = error.is_some();
        // While the replica stops, the browser goes first: a database that
        // is gone must not keep it running (each write would wait out the
        // pool's timeout before the stop).
        let browser_first = inner.shutting_down();
        if browser_first {
            self.teardown(&live).await;
        }
        if let Err(e) = inner.store.session_closing(id).await {
            tracing::error!(error = %format!("{e:#}"), "failed to mark a session closing");
        }
        if let Err(e) = inner
            .store
            .audit_append(
                NewEvent::new(actor, "session.close")
                    .tenant(&live.tenant)
                    .session(id.as_str())
                    .params(json!({ "reason": reason.as_str() }))
                    .outcome("requested"),
            )
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a session close");
        }
        if !browser_first {
            self.teardown(&live).await;
        }
        if let Err(e) = inner.store.sandbox_stopped(&live.sandbox_id).await {
            tracing::error!(error = %format!("{e:#}"), sandbox.id = %live.sandbox.id, "failed to record a sandbox's stop");
        }
        // Downloads stay for audit with the session's screenshots, and go
        // otherwise.
        if let Some(downloads) = &live.downloads {
            downloads
                .finish(live.record == crate::recording::RecordMode::Audit)
                .await;
        }
        if let Err(e) = inner
            .recorder
            .finish(live.record, live.tenant.as_str(), id.as_str())
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to remove transient screenshots");
        }
        if let Err(e) = inner
            .store
            .session_end(id, failed, reason, error.as_deref(), live.last_activity())
            .await
        {
            tracing::error!(error = %format!("{e:#}"), "failed to record a session's end");
        }
        inner
            .ending
            .lock()
            .expect("ending lock")
            .remove(id.as_str());
        if release {
            self.release(&live.tenant);
        }
        metrics::counter!("cordon_sessions_closed_total", "reason" => reason.as_str()).increment(1);
    }

    /// Stops a session's browser and what runs beside it (limits, egress).
    async fn teardown(&self, live: &RunningSession) {
        let inner = &self.0;
        // Wait for a running tool call to let go of the tabs, but not forever.
        let _tabs = tokio::time::timeout(Duration::from_secs(2), live.tabs.lock()).await;
        if let Some(downloads) = &live.downloads {
            downloads.stop_watching();
        }
        if let Err(e) = inner.driver.stop(&live.sandbox).await {
            tracing::error!(error = %format!("{e:#}"), sandbox.id = %live.sandbox.id, "failed to stop a sandbox");
        }
        if let Some(limits) = &live.sandbox.limits {
            limits.remove().await;
        }
        inner
            .known
            .lock()
            .expect("known lock")
            .remove(&live.sandbox.id);
        if let Some(egress) = live.egress.lock().await.take() {
            egress.close().await;
        }
    }

    /// Closes sessions past their deadline or idle timeout or whose grant
    /// was revoked or expired, and fails those whose browser died. (The
    /// periodic jobs live in `housekeeping`.)
    pub(super) async fn ticker(self) {
        let mut ticks = 0u64;
        while !self.0.shutting_down() {
            tokio::time::sleep(TICK).await;
            ticks += 1;
            // A grant's revocation is read from the database (any replica
            // may have revoked it) every other tick.
            let read_grants = ticks.is_multiple_of(2);
            let now = now_ms();
            let idle_ms = i64::try_from(self.0.cfg.idle.as_millis()).unwrap_or(i64::MAX);
            let sessions: Vec<Arc<RunningSession>> = self
                .0
                .live
                .lock()
                .expect("live lock")
                .values()
                .cloned()
                .collect();
            for s in sessions {
                if let Some(limits) = &s.sandbox.limits
                    && let Some(breach) = limits.breach()
                {
                    self.fail(
                        &s.id,
                        CloseReason::ResourceLimit,
                        &breach.describe(&limits.limits()),
                    )
                    .await;
                } else if s.browser_gone() {
                    self.fail(
                        &s.id,
                        CloseReason::BrowserExited,
                        "the browser exited unexpectedly",
                    )
                    .await;
                } else if now >= s.deadline_at {
                    self.end(&s.id, CloseReason::Deadline, None, Actor::System)
                        .await;
                } else if let Some(reason) = self.grant_ended(&s, now, read_grants).await {
                    self.end(&s.id, reason, None, Actor::System).await;
                } else if now - s.last_activity() >= idle_ms {
                    self.end(&s.id, CloseReason::Idle, None, Actor::System)
                        .await;
                }
            }
        }
    }

    /// Why an operator-mode session's grant no longer holds: expired (by
    /// the clock, or by the database's row when `read`), or revoked (read
    /// from the database when `read`; a token the database no longer has
    /// counts as revoked). An unreadable
    /// database ends nothing: the next tick reads again.
    async fn grant_ended(&self, s: &RunningSession, now: i64, read: bool) -> Option<CloseReason> {
        let (jti, expires_at) = s.grant.as_ref()?;
        if now >= *expires_at {
            return Some(CloseReason::GrantExpired);
        }
        if !read {
            return None;
        }
        match self.0.store.grant_token_get(jti).await {
            Ok(Some(t)) if t.revoked_at.is_none() && t.expires_at > now => None,
            Ok(Some(t)) if t.revoked_at.is_none() => Some(CloseReason::GrantExpired),
            Ok(_) => Some(CloseReason::GrantRevoked),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "cannot read a session's grant; trying again");
                None
            }
        }
    }

    /// Stops taking new sessions and refilling the pool (the first step of
    /// [`Self::shutdown`]).
    pub fn stop_accepting(&self) {
        self.0.shutdown.store(true, Ordering::SeqCst);
        self.0.pool.wake.notify_one();
    }

    /// The sandboxes running now: open sessions' and the warm pool's.
    pub fn sandboxes(&self) -> Vec<crate::sandbox::Sandbox> {
        let mut out: Vec<crate::sandbox::Sandbox> = self
            .0
            .live
            .lock()
            .expect("live lock")
            .values()
            .map(|s| s.sandbox.clone())
            .collect();
        out.extend(self.0.pool.sandboxes());
        out
    }

    /// Stops everything: open sessions (reason `shutdown`) and the warm
    /// pool, by `deadline`. Every browser is stopped first and all at once;
    /// the database's bookkeeping follows for what time is left (what it
    /// cuts, the reaper finishes at the next start).
    pub async fn shutdown(&self, deadline: tokio::time::Instant) {
        self.stop_accepting();
        let ids: Vec<SessionId> = self
            .0
            .live
            .lock()
            .expect("live lock")
            .keys()
            .cloned()
            .collect();
        let ends = futures::future::join_all(
            ids.iter()
                .map(|id| self.end(id, CloseReason::Shutdown, None, Actor::System)),
        );
        let pool = async {
            // Let browsers that are still starting finish, then stop them too.
            while self.0.pool.starting() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            futures::future::join_all(self.0.pool.drain().into_iter().map(|w| self.0.dispose(w)))
                .await;
        };
        if tokio::time::timeout_at(deadline, futures::future::join(ends, pool))
            .await
            .is_err()
        {
            tracing::warn!(
                sessions = ids.len(),
                "shutdown: time is up; the next start's reaper finishes the bookkeeping"
            );
            // Whatever is left (a browser still starting): stop it now.
            for sb in self.sandboxes() {
                if let Some(pid) = sb.pid {
                    crate::sandbox::kill_group(pid, &sb.marker, Duration::ZERO).await;
                }
            }
        }
    }
}
