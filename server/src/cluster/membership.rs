//! Joining the replicas at start, the heartbeat and the advisory locks
//! (the replica's name, the housekeeping leader), and ending the sessions
//! of replicas that were lost.

use crate::fix::WithFix;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::ExposeSecret;
use sqlx::Connection;
use tokio::sync::watch;

use serde_json::json;

use super::{Cluster, Inner, hop, notify};
use crate::audit::{Actor, NewEvent};
use crate::domain::{DeploymentId, InstanceId};
use crate::sessions::SessionManager;
use crate::store::replicas::ReplicaRow;
use crate::store::{DatabaseKind, Store};
use crate::time::now_ms;
/// Whether `url`'s host is a loopback name or address.
fn loopback_url(url: &str) -> bool {
    match url::Url::parse(url)
        .ok()
        .and_then(|u| u.host().map(|h| h.to_owned()))
    {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Advisory lock class of replica names (the object is the name's hash).
const LOCK_NAME: i32 = 4_242_001;
/// Advisory lock of the housekeeping leader: `(LOCK_LEADER, 1)`.
const LOCK_LEADER: i32 = 4_242_000;

/// What joining needs from the settings (`replica_name`,
/// `replica_lost_after_s`, `database_url`, `advertise_url`, `tls_cert` with
/// built-in TLS, `cluster_secret`), built by `config`.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// This replica's name.
    pub name: String,
    /// A replica silent this long is lost, seconds.
    pub lost_after_s: u64,
    /// The database, for the lock connection and `LISTEN`.
    pub database_url: secrecy::SecretString,
    /// Where the other replicas reach this one.
    pub advertise: String,
    /// The certificate every replica serves, when TLS is built in.
    pub tls_cert: Option<std::path::PathBuf>,
    /// The hop's shared secret.
    pub cluster_secret: Option<secrecy::SecretString>,
}

impl Cluster {
    /// Checks this replica may join (its name is free; its schema and key
    /// agree with the running replicas'), applies the migrations and
    /// records it as up.
    pub async fn join(
        settings: &ClusterSettings,
        store: &Store,
        key_id: &str,
    ) -> anyhow::Result<Self> {
        let name = settings.name.clone();
        let lost_after_ms = i64::try_from(settings.lost_after_s * 1000).unwrap_or(i64::MAX);
        let db_url = settings.database_url.clone();
        let locks = match store.kind() {
            DatabaseKind::Postgres => {
                let mut conn = sqlx::AnyConnection::connect(db_url.expose_secret())
                    .await
                    .context("cannot open the replica's lock connection")?;
                if !try_lock(&mut conn, LOCK_NAME, &name).await? {
                    return Err(anyhow::anyhow!(
                        "replica_name: {name:?} is in use by a running replica on this database"
                    ))
                    .fix(
                        "give each replica a name of its own: set replica_name \
                         (CORDON_REPLICA_NAME; the default is the host name, which two processes \
                         on one host share)",
                    );
                }
                Some(conn)
            }
            DatabaseKind::Sqlite => None,
        };
        let known = store.schema_known();
        let applied = store.schema_applied().await?;
        let offset = match store.clock_offset_ms().await? {
            Some(o) => {
                warn_skew(&name, o);
                o
            }
            None => 0,
        };
        let mut running: Vec<(String, i64)> = Vec::new();
        if applied.is_some_and(|a| a >= 10) {
            let now = now_ms() + offset;
            for r in store.replicas_up().await? {
                if r.name == name || now - r.heartbeat_at > lost_after_ms {
                    continue;
                }
                if settings.cluster_secret.is_none() {
                    tracing::warn!(
                        replica = %r.name,
                        "another replica runs on this database, but this one has no \
                         cluster_secret: calls for sessions the other runs will answer 503 \
                         replica_unreachable. Fix: set the same cluster_secret (32–512 \
                         characters, `openssl rand -hex 32`) on every replica"
                    );
                }
                if r.key_id != key_id {
                    bail!(
                        "master key: this replica's key id {key_id} differs from running replica \
                         {:?}'s {}; every replica needs the same master key",
                        r.name,
                        r.key_id
                    );
                }
                running.push((r.name, r.schema_version));
            }
        }
        // Expand-then-contract: replicas of two releases share the database
        // when every migration between their schemas is expand-only.
        let applied_list = store.migrations_applied().await?;
        match crate::store::schema::may_join(&store.migrations_known(), &applied_list, &running) {
            Ok(Some(note)) => tracing::warn!("{note}"),
            Ok(None) => {}
            Err(why) => bail!("{why}"),
        }
        store.migrate().await?;
        let deployment = store
            .deployment_ensure(&DeploymentId::generate(), key_id)
            .await?;
        let instance = InstanceId::generate();
        let advertise = settings.advertise.clone();
        let now = now_ms() + offset;
        store
            .replica_register(&ReplicaRow {
                name: name.clone(),
                instance: instance.to_string(),
                advertise_url: Some(advertise.clone()),
                key_id: key_id.to_owned(),
                schema_version: known,
                version: env!("CARGO_PKG_VERSION").to_owned(),
                state: "up".into(),
                started_at: now,
                heartbeat_at: now,
            })
            .await?;
        // With built-in HTTPS every replica serves the deployment's own
        // certificate, and the hop trusts exactly that one.
        let tls = match &settings.tls_cert {
            Some(cert) => Some(crate::tls::peer::peer_client_config(cert)?),
            None => None,
        };
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true);
        if let Some(config) = &tls {
            client = client
                .use_preconfigured_tls(rustls::ClientConfig::clone(config))
                .https_only(true);
        }
        let client = client
            .build()
            .context("cannot build the internal hop's HTTP client")?;
        if tls.is_none() && store.kind() == DatabaseKind::Postgres && !loopback_url(&advertise) {
            tracing::warn!(
                %advertise,
                "the internal hop between replicas is plain HTTP: requests are signed, but answers \
                 and carried live views cross the network unencrypted; set tls_cert and tls_key \
                 (every replica the same) so replicas talk HTTPS"
            );
        }
        if store.kind() == DatabaseKind::Postgres {
            notify::start(store.changes().clone(), db_url.expose_secret(), &name).await?;
        }
        let (leader, _) = watch::channel(store.kind() == DatabaseKind::Sqlite);
        let (stop, _) = watch::channel(false);
        tracing::info!(replica = %name, %advertise, "joined as replica {name}");
        Ok(Self(Arc::new(Inner {
            name,
            instance,
            advertise,
            secret: settings.cluster_secret.clone(),
            deployment: deployment.id,
            store: store.clone(),
            db_url,
            lost_after_ms,
            beat: Duration::from_millis(u64::try_from(lost_after_ms / 5).unwrap_or(2000).max(500)),
            leader,
            locks: tokio::sync::Mutex::new(locks),
            client,
            tls,
            nonces: hop::Nonces::default(),
            owners: Mutex::new(HashMap::new()),
            stop,
            offset: std::sync::atomic::AtomicI64::new(offset),
        })))
    }

    /// The replica that holds the housekeeping lock now (this one on SQLite).
    pub async fn leader_name(&self) -> anyhow::Result<Option<String>> {
        if self.0.store.kind() == DatabaseKind::Sqlite {
            return Ok(Some(self.0.name.clone()));
        }
        self.0.store.replica_holding(LOCK_LEADER, LOCK_NAME).await
    }

    /// Starts the heartbeat, the housekeeping lock and, while leading, the
    /// end of lost replicas' sessions.
    pub fn start(&self, sessions: SessionManager) {
        let this = self.clone();
        let mut stopped = self.0.stop.subscribe();
        tokio::spawn(async move {
            loop {
                this.tick(&sessions).await;
                tokio::select! {
                    () = tokio::time::sleep(this.0.beat) => {}
                    _ = stopped.wait_for(|s| *s) => return,
                }
            }
        });
    }

    /// Stops the loop, gives up the locks and marks this replica stopped
    /// (its sessions were ended by the shutdown).
    pub async fn leave(&self) {
        self.0.stop.send_replace(true);
        self.0.leader.send_replace(false);
        if let Err(e) = self
            .0
            .store
            .replica_stopped(&self.0.name, &self.0.instance)
            .await
        {
            tracing::warn!(error = %format!("{e:#}"), "cannot mark this replica stopped");
        }
        if let Some(conn) = self.0.locks.lock().await.take() {
            let _ = conn.close().await;
        }
    }

    async fn tick(&self, sessions: &SessionManager) {
        let inner = &self.0;
        match inner.store.clock_offset_ms().await {
            Ok(Some(o)) => {
                let was = inner.offset.swap(o, std::sync::atomic::Ordering::Relaxed);
                if (was.abs() > SKEW_WARN_MS) != (o.abs() > SKEW_WARN_MS) {
                    warn_skew(&inner.name, o);
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "cannot read the database's clock"),
        }
        match inner
            .store
            .replica_heartbeat(&inner.name, &inner.instance, self.now())
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                tracing::error!(
                    replica = %inner.name,
                    "this replica was declared lost (no heartbeat within replica_lost_after_s); \
                     its sessions were ended elsewhere; registering again"
                );
                let _ = self.reregister().await;
            }
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "heartbeat failed"),
        }
        if inner.store.kind() == DatabaseKind::Postgres {
            self.hold_locks().await;
        }
        if self.is_leader()
            && let Err(e) = self.end_lost(sessions).await
        {
            tracing::error!(error = %format!("{e:#}"), "ending lost replicas failed");
        }
    }

    async fn reregister(&self) -> anyhow::Result<()> {
        let inner = &self.0;
        let Some(mut row) = inner.store.replica_get(&inner.name).await? else {
            return Ok(());
        };
        if row.instance != inner.instance.as_str() {
            return Ok(());
        }
        row.state = "up".into();
        row.heartbeat_at = self.now();
        inner.store.replica_register(&row).await
    }

    /// PostgreSQL: keeps the lock connection alive (reconnecting and taking
    /// the name again if it dropped) and takes the housekeeping lock when
    /// free.
    async fn hold_locks(&self) {
        let inner = &self.0;
        let mut guard = inner.locks.lock().await;
        if guard.is_none() {
            inner.leader.send_replace(false);
            match sqlx::AnyConnection::connect(inner.db_url.expose_secret()).await {
                Ok(mut conn) => match try_lock(&mut conn, LOCK_NAME, &inner.name).await {
                    Ok(true) => *guard = Some(conn),
                    Ok(false) => {
                        tracing::error!(replica = %inner.name, "another process holds this replica's name");
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "cannot take the name lock");
                        return;
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "cannot reopen the lock connection");
                    return;
                }
            }
        }
        let conn = guard.as_mut().expect("set above");
        let outcome = if self.is_leader() {
            sqlx::query("SELECT 1")
                .execute(&mut *conn)
                .await
                .map(|_| true)
        } else {
            try_lock_pair(conn, LOCK_LEADER, 1).await
        };
        match outcome {
            Ok(lead) => {
                if lead && !self.is_leader() {
                    tracing::info!(replica = %inner.name, "took the housekeeping lock");
                }
                inner.leader.send_replace(lead);
            }
            Err(e) => {
                tracing::warn!(error = %e, "the lock connection failed; the locks are gone");
                inner.leader.send_replace(false);
                *guard = None;
            }
        }
    }

    /// Whether `r` is lost now.
    pub(super) async fn is_lost(&self, r: &ReplicaRow) -> bool {
        let age = self.now() - r.heartbeat_at;
        if r.state != "up" || age > self.0.lost_after_ms {
            return true;
        }
        let beat = i64::try_from(self.0.beat.as_millis()).unwrap_or(i64::MAX);
        age > 2 * beat && self.name_is_free(&r.name).await
    }

    /// PostgreSQL: nobody holds `name`'s lock (taken and given back at once).
    async fn name_is_free(&self, name: &str) -> bool {
        let mut guard = self.0.locks.lock().await;
        let Some(conn) = guard.as_mut() else {
            return false;
        };
        match try_lock(conn, LOCK_NAME, name).await {
            Ok(true) => {
                let _ = sqlx::query("SELECT pg_advisory_unlock($1, hashtext($2))::text")
                    .bind(LOCK_NAME)
                    .bind(name.to_owned())
                    .execute(&mut *conn)
                    .await;
                true
            }
            _ => false,
        }
    }

    /// The leader's pass: every lost replica is marked so, its sessions are
    /// ended (`replica_lost`), its tasks aborted and its browsers stopped.
    async fn end_lost(&self, sessions: &SessionManager) -> anyhow::Result<()> {
        let store = &self.0.store;
        for r in store.replicas_up().await? {
            if r.name == self.0.name || !self.is_lost(&r).await {
                continue;
            }
            if !store.replica_mark_lost(&r.name, r.heartbeat_at).await? {
                continue;
            }
            let report = sessions.reap_replica(&r.name).await?;
            let tasks = store.task_abort_running(&r.name, now_ms()).await?;
            tracing::warn!(
                replica = %r.name,
                sessions = report.sessions_closed,
                sandboxes = report.sandboxes_killed,
                tasks,
                "replica {} lost: its sessions were ended", r.name
            );
            store
                .audit_append(
                    NewEvent::new(Actor::System, "replica.lost")
                        .params(json!({
                            "replica": r.name,
                            "last_heartbeat_ms_ago": self.now() - r.heartbeat_at,
                            "sessions": report.sessions_closed,
                            "sandboxes": report.sandboxes_killed,
                            "tasks": tasks,
                        }))
                        .outcome("ok"),
                )
                .await?;
            metrics::counter!("cordon_replicas_lost_total").increment(1);
        }
        Ok(())
    }
}

/// A clock this far from the database's is worth a warning (heartbeats and
/// hops are corrected for it, but task and audit times are not).
const SKEW_WARN_MS: i64 = 2_000;

fn warn_skew(name: &str, offset: i64) {
    if offset.abs() > SKEW_WARN_MS {
        tracing::warn!(
            replica = %name,
            offset_ms = offset,
            "this host's clock is {} s {} the database server's: heartbeats and hops are \
             corrected for it, audit and task times are not; sync the clocks (NTP)",
            offset.abs() / 1000,
            if offset > 0 { "behind" } else { "ahead of" }
        );
    } else {
        tracing::info!(replica = %name, offset_ms = offset, "this host's clock agrees with the database server's");
    }
}

async fn try_lock(conn: &mut sqlx::AnyConnection, class: i32, name: &str) -> anyhow::Result<bool> {
    let got: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, hashtext($2))")
        .bind(class)
        .bind(name.to_owned())
        .fetch_one(conn)
        .await
        .context("cannot take an advisory lock")?;
    Ok(got)
}

async fn try_lock_pair(
    conn: &mut sqlx::AnyConnection,
    class: i32,
    object: i32,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
        .bind(class)
        .bind(object)
        .fetch_one(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_advertise_urls_skip_the_plain_hop_warning() {
        for quiet in [
            "http://localhost:8080",
            "http://127.0.0.1:8080",
            "http://127.9.9.9:1",
            "http://[::1]:8080",
        ] {
            assert!(loopback_url(quiet), "{quiet}");
        }
        for warned in [
            "http://10.0.0.7:8080",
            "http://cordon-0.cordon:8080",
            "http://localhost.evil.example:8080",
            "http://[fd00::7]:8080",
            "not a url",
        ] {
            assert!(!loopback_url(warned), "{warned}");
        }
    }
}
