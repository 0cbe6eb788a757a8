//! Which replica runs a session or a task, and whether it can be reached.

use super::{Cluster, Peer};
use crate::domain::{SessionId, TaskId, TenantId};

impl Cluster {
    /// The replica that runs session `id` of `tenant`, when it is another
    /// one and the session has not ended; `None` means: answer here.
    pub async fn owner_of(&self, tenant: &TenantId, id: &str) -> anyhow::Result<Option<String>> {
        if let Some((t, replica)) = self.0.owners.lock().expect("owners lock").get(id)
            && t == tenant.as_str()
        {
            return Ok(Some(replica.clone()));
        }
        let Ok(sid) = id.parse::<SessionId>() else {
            return Ok(None);
        };
        let Some(row) = self.0.store.session_get(tenant.as_str(), &sid).await? else {
            return Ok(None);
        };
        if row.state.is_ended() || row.host == self.0.name {
            return Ok(None);
        }
        let mut owners = self.0.owners.lock().expect("owners lock");
        if owners.len() >= 10_000 {
            owners.clear();
        }
        owners.insert(id.to_owned(), (tenant.to_string(), row.host.clone()));
        Ok(Some(row.host))
    }

    /// The replica whose loop runs task `id` of `tenant`, when it is
    /// another one and the task still runs; `None` means: answer here.
    pub async fn task_owner(&self, tenant: &TenantId, id: &str) -> anyhow::Result<Option<String>> {
        let Ok(tid) = id.parse::<TaskId>() else {
            return Ok(None);
        };
        let Some(row) = self.0.store.task_get(Some(tenant.as_str()), &tid).await? else {
            return Ok(None);
        };
        if row.status != "running" || row.host == self.0.name {
            return Ok(None);
        }
        Ok(Some(row.host))
    }

    /// The replica that runs session `id` (any tenant's: the dashboard's
    /// view), when it is another one and the session has not ended.
    pub async fn session_elsewhere(&self, id: &str) -> anyhow::Result<Option<String>> {
        let Ok(sid) = id.parse::<SessionId>() else {
            return Ok(None);
        };
        let Some(row) = self.0.store.session_find(&sid).await? else {
            return Ok(None);
        };
        if row.state.is_ended() || row.host == self.0.name {
            return Ok(None);
        }
        Ok(Some(row.host))
    }

    /// Where `replica` stands.
    pub async fn peer(&self, replica: &str) -> anyhow::Result<Peer> {
        let Some(row) = self.0.store.replica_get(replica).await? else {
            return Ok(Peer::Lost);
        };
        if row.state != "up" || self.now() - row.heartbeat_at > self.0.lost_after_ms {
            return Ok(Peer::Lost);
        }
        if self.0.secret.is_none() {
            return Ok(Peer::Unreachable(
                "this replica has no cluster_secret to reach the others with (fix: set the same \
                 cluster_secret, 32–512 characters, on every replica)"
                    .into(),
            ));
        }
        match row.advertise_url {
            Some(url) if self.0.tls.is_some() && !url.starts_with("https://") => {
                Ok(Peer::Unreachable(format!(
                    "replica {replica} advertises {url}, but this deployment serves HTTPS: the hop \
                     goes only over TLS"
                )))
            }
            Some(url) => Ok(Peer::Up(url)),
            None => Ok(Peer::Unreachable(format!(
                "replica {replica} has no advertise_url"
            ))),
        }
    }

    /// After a failed hop: lost if its process is gone, else unreachable.
    pub async fn peer_after_failure(&self, replica: &str, why: String) -> anyhow::Result<Peer> {
        match self.0.store.replica_get(replica).await? {
            Some(r) if !self.is_lost(&r).await => Ok(Peer::Unreachable(why)),
            _ => Ok(Peer::Lost),
        }
    }

    /// Ends session `id`, whose replica is lost, as the leader's pass
    /// would (`SessionManager::end_lost`; a caller must not wait for it),
    /// and forgets its owner. True if this call ended it.
    pub async fn end_lost_session(
        &self,
        sessions: &crate::sessions::SessionManager,
        tenant: &TenantId,
        id: &str,
        replica: &str,
    ) -> anyhow::Result<bool> {
        let Ok(sid) = id.parse::<SessionId>() else {
            return Ok(false);
        };
        let ended = sessions.end_lost(tenant, &sid, replica).await?;
        self.0.owners.lock().expect("owners lock").remove(id);
        Ok(ended)
    }
}
