//! The orphan reaper: sessions whose sandbox is gone are ended; sandboxes
//! whose session is gone are killed by pid (after checking the pid is still
//! theirs). Runs at start and every minute; running it twice changes nothing.

use serde_json::json;

use crate::audit::{Actor, NewEvent};
use crate::domain::{CloseReason, SessionId};
use crate::sandbox::{Sandbox, kill_group};
use crate::store::sessions::SessionRow;

use super::SessionManager;

/// What one reaper pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReapReport {
    /// Sessions ended as orphaned.
    pub sessions_closed: usize,
    /// Sandboxes whose processes were signalled.
    pub sandboxes_killed: usize,
    /// Sandbox rows marked stopped.
    pub sandboxes_cleared: usize,
}

impl SessionManager {
    /// One reaper pass over this host's rows.
    #[tracing::instrument(skip_all)]
    pub async fn reap(&self) -> anyhow::Result<ReapReport> {
        let inner = &self.0;
        let mut report = ReapReport::default();
        let live: Vec<String> = inner
            .live
            .lock()
            .expect("live lock")
            .keys()
            .map(|k| k.to_string())
            .collect();
        for row in inner.store.sessions_unended_on(&inner.host).await? {
            if live.contains(&row.id)
                || inner
                    .opening
                    .lock()
                    .expect("opening lock")
                    .contains(&row.id)
                || inner.ending.lock().expect("ending lock").contains(&row.id)
            {
                continue;
            }
            let ended = self
                .end_orphan(
                    &row,
                    CloseReason::Orphaned,
                    "the control plane lost this session (restart or crash)",
                    json!({}),
                )
                .await?;
            if ended {
                report.sessions_closed += 1;
            }
        }
        let known = inner.known.lock().expect("known lock").clone();
        for sb in inner.store.sandboxes_unstopped_on(&inner.host).await? {
            if known.contains(sb.id.as_str()) {
                continue;
            }
            if self.stop_orphan(&sb).await {
                report.sandboxes_killed += 1;
            }
            report.sandboxes_cleared += 1;
        }
        // An engine that lists its own browsers (kube: pods by label) stops
        // those no replica has recorded as running.
        let keep = inner
            .store
            .sandbox_ids_unstopped()
            .await?
            .into_iter()
            .chain(known)
            .collect();
        match inner.driver.sweep(&keep).await {
            Ok(n) => report.sandboxes_killed += n,
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "reaper: sweep failed"),
        }
        Ok(report)
    }

    /// Ends every session of `replica`, a lost replica (the leader's job,
    /// see `cluster`), and stops its browsers as far as this replica's
    /// driver can: an `exec` or `kube` engine's by its own command or API;
    /// a local one's by pid when it ran on this host (the marker check
    /// means a pid of another host is never signalled).
    pub async fn reap_replica(&self, replica: &str) -> anyhow::Result<ReapReport> {
        let inner = &self.0;
        let mut report = ReapReport::default();
        for row in inner.store.sessions_unended_on(replica).await? {
            // Under `shared_dir` its files are here too.
            let ended = self
                .end_orphan(
                    &row,
                    CloseReason::ReplicaLost,
                    "the replica that ran it stopped answering",
                    json!({ "reason": "replica_lost", "replica": replica }),
                )
                .await?;
            if ended {
                report.sessions_closed += 1;
            }
        }
        for sb in inner.store.sandboxes_unstopped_on(replica).await? {
            if self.stop_orphan(&sb).await {
                report.sandboxes_killed += 1;
            }
            report.sandboxes_cleared += 1;
        }
        Ok(report)
    }

    /// Ends session `id` of `tenant`, which ran on `replica`, a replica
    /// found lost when a request for it arrived (ahead of the leader's
    /// [`reap_replica`](Self::reap_replica)), as that reap would: the row,
    /// the files its close would have removed, `session.reap`. False when
    /// it had ended already or is not the tenant's.
    pub async fn end_lost(
        &self,
        tenant: &crate::domain::TenantId,
        id: &SessionId,
        replica: &str,
    ) -> anyhow::Result<bool> {
        let Some(row) = self.0.store.session_get(tenant.as_str(), id).await? else {
            return Ok(false);
        };
        self.end_orphan(
            &row,
            CloseReason::ReplicaLost,
            "the replica that ran it stopped answering",
            json!({ "reason": "replica_lost", "replica": replica }),
        )
        .await
    }

    /// Ends a session row no replica runs any more (as `reason`, with
    /// `message`), removes what its close would have, and audits
    /// `session.reap` with its previous state and `params`' fields; false
    /// (and nothing done) if it had ended meanwhile.
    async fn end_orphan(
        &self,
        row: &SessionRow,
        reason: CloseReason,
        message: &str,
        params: serde_json::Value,
    ) -> anyhow::Result<bool> {
        let inner = &self.0;
        // Rows are written with a `SessionId`; one that is not is no session.
        let Ok(sid) = row.id.parse::<SessionId>() else {
            tracing::warn!(session.id = %row.id, "reaper: a session row with a malformed id");
            return Ok(false);
        };
        let ended = inner
            .store
            .session_end(&sid, true, reason, Some(message), row.last_activity_at)
            .await?;
        if !ended {
            return Ok(false);
        }
        self.drop_files_as_at_close(row).await;
        if let Ok(tenant) = row.tenant_id.parse() {
            let mut params = params;
            params["previous_state"] = json!(row.state.as_str());
            inner
                .store
                .audit_append(
                    NewEvent::new(Actor::System, "session.reap")
                        .tenant(&tenant)
                        .session(row.id.clone())
                        .params(params)
                        .outcome("ok"),
                )
                .await?;
        }
        Ok(true)
    }

    /// What a close removes, for a session that ended without one: its
    /// downloads unless it recorded for audit, and its frames if they were
    /// transient (nothing is there when another replica's data dir has them).
    async fn drop_files_as_at_close(&self, row: &SessionRow) {
        use crate::recording::RecordMode;
        let (Ok(tenant), Ok(sid)) = (
            row.tenant_id.parse::<crate::domain::TenantId>(),
            row.id.parse::<crate::domain::SessionId>(),
        ) else {
            return;
        };
        if row.record != RecordMode::Audit.as_str() {
            let dir = super::files::Downloads::folder(&self.0.downloads_root, &tenant, &sid);
            let _ = tokio::fs::remove_dir_all(&dir).await;
        }
        if row.record == RecordMode::Transient.as_str() {
            let _ = self
                .0
                .recorder
                .finish(RecordMode::Transient, tenant.as_str(), sid.as_str())
                .await;
        }
    }

    /// Stops a sandbox no session of this replica holds and marks it
    /// stopped; true if its browser was signalled or destroyed.
    async fn stop_orphan(&self, sb: &crate::store::sessions::SandboxRow) -> bool {
        let inner = &self.0;
        let mut killed = false;
        if inner.driver.caps().remote && sb.driver == inner.driver.kind().as_str() {
            // An external engine's sandbox: only its destroy command can end it.
            let orphan = Sandbox {
                id: sb.id.to_string(),
                driver: inner.driver.kind(),
                cdp_url: sb.cdp_url.clone().unwrap_or_default(),
                pid: None,
                marker: sb.marker.clone(),
                runtime_dir: inner.run_dir.join(sb.id.as_str()),
                limits: None,
            };
            match inner.driver.stop(&orphan).await {
                Ok(()) => killed = true,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), sandbox.id = %sb.id, "reaper: destroy failed")
                }
            }
        } else if let Some(pid) = sb.pid.and_then(|p| i32::try_from(p).ok())
            && kill_group(pid, &sb.marker, std::time::Duration::from_millis(1500)).await
        {
            killed = true;
            tracing::warn!(sandbox.id = %sb.id, pid, "reaper: killed an orphaned browser");
        }
        // Its cgroups, emptied when its processes died.
        inner.limits.remove_stale(sb.id.as_str());
        // A `SandboxId` is one path segment of base32 after `b_`.
        let dir = inner.run_dir.join(sb.id.as_str());
        if dir.starts_with(&inner.run_dir) {
            let _ = tokio::fs::remove_dir_all(&dir).await;
        }
        if let Err(e) = inner.store.sandbox_stopped(&sb.id).await {
            tracing::warn!(error = %format!("{e:#}"), sandbox.id = %sb.id, "reaper: cannot mark a sandbox stopped");
        }
        killed
    }
}
