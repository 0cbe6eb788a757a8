//! Several control planes on one database: who is up, who leads the
//! periodic jobs, who runs which session, and the internal hop between them.
//!
//! - **Names.** Each process runs under `replica_name` (default the host
//!   name); sessions and sandboxes are recorded under it (`host` columns).
//!   On PostgreSQL a running process holds an advisory lock on its name on
//!   a connection of its own, so a second process with the same name is
//!   refused at start, and a name whose lock is free belongs to no live
//!   process.
//! - **Heartbeats.** Every fifth of `replica_lost_after_s` a replica moves
//!   its row's `heartbeat_at`. One older than `replica_lost_after_s` (or,
//!   on PostgreSQL, older than two beats with its name lock free: the
//!   process is gone) is lost.
//! - **The housekeeping lock.** On PostgreSQL, one replica at a time holds
//!   a second advisory lock on the same connection and runs the jobs that
//!   must run once (the reaper, grant and dashboard-session GC, egress-log
//!   pruning, and ending lost replicas' sessions). When it dies its
//!   connection closes, PostgreSQL frees the lock and another replica takes
//!   it at its next beat. On SQLite (one host) the process always leads.
//! - **Forwarding** ([`forward`]): a call for a session another replica
//!   runs goes to that replica's `advertise_url`, signed ([`hop`]).
//! - **Dashboard notices** ([`notify`]): on PostgreSQL every change topic
//!   is also `NOTIFY`d, so a page open on one replica refetches what
//!   another changed.
//! - **At start** ([`Cluster::join`]) a replica whose binary knows another
//!   schema than a running replica's, or whose master key id differs from
//!   one's, is refused, naming which.

pub mod dashboard;
pub mod forward;
pub mod hop;
pub mod internal;
pub mod live;
pub mod notify;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use sqlx::Connection;
use tokio::sync::watch;

use crate::audit::{Actor, NewEvent};
use crate::config::Settings;
use crate::domain::TenantId;
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

/// Whether `name` can name a replica: 1 to 63 of `A-Za-z0-9._-`, starting
/// with a letter or digit (a host name, a pod name).
pub fn check_replica_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > 63 {
        return Err("must be 1 to 63 characters");
    }
    if !name.as_bytes()[0].is_ascii_alphanumeric() {
        return Err("must start with a letter or digit");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may hold only letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// Where a session's replica stands, for a call that must reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Up: forward to this base URL.
    Up(String),
    /// Gone (stopped, lost, or never known): its sessions are over.
    Lost,
    /// Up as far as is known, but not reachable now (why).
    Unreachable(String),
}

/// This replica's place among the others; cheap to clone.
#[derive(Clone)]
pub struct Cluster(Arc<Inner>);

struct Inner {
    name: String,
    instance: String,
    advertise: String,
    secret: Option<SecretString>,
    deployment: String,
    store: Store,
    db_url: SecretString,
    lost_after_ms: i64,
    beat: Duration,
    leader: watch::Sender<bool>,
    /// PostgreSQL: the connection holding this replica's name lock (and,
    /// while it leads, the housekeeping lock). `None` on SQLite, or while
    /// it is being re-established.
    locks: tokio::sync::Mutex<Option<sqlx::AnyConnection>>,
    client: reqwest::Client,
    /// The hop's TLS client configuration (built-in HTTPS only).
    tls: Option<Arc<rustls::ClientConfig>>,
    nonces: hop::Nonces,
    /// Session id → (tenant, replica) for sessions found on other replicas
    /// (a session never moves).
    owners: Mutex<HashMap<String, (String, String)>>,
    stop: watch::Sender<bool>,
    /// The database server's clock minus this process's (ms), measured at
    /// every heartbeat: heartbeats and hop times are in the database's
    /// time, so replicas whose clocks disagree do not declare each other
    /// lost or refuse each other's hops. 0 on SQLite.
    offset: std::sync::atomic::AtomicI64,
}

impl Cluster {
    /// Checks this replica may join (its name is free; its schema and key
    /// agree with the running replicas'), applies the migrations and
    /// records it as up.
    pub async fn join(
        settings: &Settings,
        store: &Store,
        key_id: &str,
        bound: SocketAddr,
    ) -> anyhow::Result<Self> {
        let name = settings.replica_name();
        let lost_after_ms = i64::try_from(settings.replica_lost_after_s * 1000).unwrap_or(i64::MAX);
        let db_url = settings.database_url();
        let locks = match store.kind() {
            DatabaseKind::Postgres => {
                let mut conn = sqlx::AnyConnection::connect(db_url.expose_secret())
                    .await
                    .context("cannot open the replica's lock connection")?;
                if !try_lock(&mut conn, LOCK_NAME, &name).await? {
                    bail!(
                        "replica_name: {name:?} is in use by a running replica on this database \
                         (give each replica its own name)"
                    );
                }
                Some(conn)
            }
            DatabaseKind::Sqlite => None,
        };
        let known = store.schema_known();
        let applied = store.schema_applied().await?;
        if let Some(applied) = applied
            && applied > known
        {
            bail!(
                "schema version: the database is at migration {applied}, this binary knows only \
                 {known} (run the newer binary)"
            );
        }
        let offset = match store.clock_offset_ms().await? {
            Some(o) => {
                warn_skew(&name, o);
                o
            }
            None => 0,
        };
        if applied.is_some_and(|a| a >= 10) {
            let now = now_ms() + offset;
            for r in store.replicas_up().await? {
                if r.name == name || now - r.heartbeat_at > lost_after_ms {
                    continue;
                }
                if r.schema_version != known {
                    bail!(
                        "schema version: running replica {:?} has schema {} and this binary {known}; \
                         stop every replica before an upgrade that changes the schema",
                        r.name,
                        r.schema_version
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
            }
        }
        store.migrate().await?;
        let deployment = store
            .deployment_ensure(&crate::ids::random_id("dep"), key_id)
            .await?;
        let instance = crate::ids::random_id("inst");
        let advertise = settings.advertise_url(bound);
        let now = now_ms() + offset;
        store
            .replica_register(&ReplicaRow {
                name: name.clone(),
                instance: instance.clone(),
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
            Some(cert) if settings.builtin_tls() => Some(crate::tls::peer_client_config(cert)?),
            _ => None,
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

    /// This replica's name.
    /// The replica that holds the housekeeping lock now (this one on SQLite).
    pub async fn leader_name(&self) -> anyhow::Result<Option<String>> {
        if self.0.store.kind() == DatabaseKind::Sqlite {
            return Ok(Some(self.0.name.clone()));
        }
        self.0.store.replica_holding(LOCK_LEADER, LOCK_NAME).await
    }

    /// Now, in the database's time (this process's clock plus the offset
    /// measured at the last heartbeat).
    pub fn now(&self) -> i64 {
        now_ms() + self.clock_offset_ms()
    }

    /// The database server's clock minus this process's, ms.
    pub fn clock_offset_ms(&self) -> i64 {
        self.0.offset.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Where the others reach it.
    pub fn advertise_url(&self) -> &str {
        &self.0.advertise
    }

    /// Whether it holds the housekeeping lock now.
    pub fn is_leader(&self) -> bool {
        *self.0.leader.borrow()
    }

    /// Follows [`Self::is_leader`].
    pub fn leadership(&self) -> watch::Receiver<bool> {
        self.0.leader.subscribe()
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
        if row.instance != inner.instance {
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
    async fn is_lost(&self, r: &ReplicaRow) -> bool {
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

    /// The replica that runs session `id` of `tenant`, when it is another
    /// one and the session has not ended; `None` means: answer here.
    pub async fn owner_of(&self, tenant: &TenantId, id: &str) -> anyhow::Result<Option<String>> {
        if let Some((t, replica)) = self.0.owners.lock().expect("owners lock").get(id)
            && t == tenant.as_str()
        {
            return Ok(Some(replica.clone()));
        }
        let Some(row) = self.0.store.session_get(tenant.as_str(), id).await? else {
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
        let Some(row) = self.0.store.task_get(Some(tenant.as_str()), id).await? else {
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
        let Some(row) = self.0.store.session_find(id).await? else {
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
                "this replica has no cluster_secret to reach the others with".into(),
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

    /// Ends session `id`, whose replica is lost (the leader's pass would
    /// too; a caller must not wait for it). True if this call ended it.
    pub async fn end_lost_session(
        &self,
        tenant: &TenantId,
        id: &str,
        replica: &str,
    ) -> anyhow::Result<bool> {
        let store = &self.0.store;
        let ended = store
            .session_end(
                id,
                true,
                crate::domain::CloseReason::ReplicaLost,
                Some("the replica that ran it stopped answering"),
                now_ms(),
            )
            .await?;
        if ended {
            store
                .audit_append(
                    NewEvent::new(Actor::System, "session.reap")
                        .tenant(tenant)
                        .session(id.to_owned())
                        .params(json!({ "reason": "replica_lost", "replica": replica }))
                        .outcome("ok"),
                )
                .await?;
        }
        self.0.owners.lock().expect("owners lock").remove(id);
        Ok(ended)
    }

    /// Signs a hop to `to` (`None` without a `cluster_secret`).
    pub fn sign(
        &self,
        to: &str,
        method: &str,
        path: &str,
        body: &[u8],
        tenant: &str,
        key_id: &str,
    ) -> Option<String> {
        let secret = self.0.secret.as_ref()?;
        let claims = hop::Claims {
            ts: self.now(),
            nonce: hex::encode(rand::random::<[u8; 16]>()),
            tenant: tenant.to_owned(),
            key_id: key_id.to_owned(),
            to: to.to_owned(),
        };
        Some(hop::sign(
            secret.expose_secret().as_bytes(),
            &self.0.deployment,
            method,
            path,
            body,
            &claims,
        ))
    }

    /// Checks an arriving hop, replay included.
    pub fn accept(
        &self,
        header: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<hop::Claims, hop::Refusal> {
        let secret = self.0.secret.as_ref().ok_or(hop::Refusal::NoSecret)?;
        let now = self.now();
        let claims = hop::verify(
            secret.expose_secret().as_bytes(),
            header,
            &hop::Expect {
                deployment: &self.0.deployment,
                me: &self.0.name,
                method,
                path,
                body,
                now,
            },
        )?;
        if !self.0.nonces.first_time(&claims.nonce, now) {
            return Err(hop::Refusal::Replayed);
        }
        Ok(claims)
    }

    /// The hop's HTTP client.
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.0.client
    }

    /// The hop's TLS client configuration, when replicas talk HTTPS.
    pub(crate) fn tls(&self) -> Option<&Arc<rustls::ClientConfig>> {
        self.0.tls.as_ref()
    }
}

/// A request that arrived over the hop, read and checked: its parts, its
/// body (to put back) and the claims, or why it was refused (already
/// logged, with the reason only). `max` bounds the body read here.
pub(crate) struct Arrived {
    /// The request's head.
    pub parts: axum::http::request::Parts,
    /// Its body.
    pub body: axum::body::Bytes,
    /// What the hop asserts, or why it is refused.
    pub claims: Result<hop::Claims, hop::Refusal>,
}

impl Arrived {
    /// Reads `req`'s hop header and body and checks them.
    pub(crate) async fn read(cluster: &Cluster, req: axum::extract::Request, max: usize) -> Self {
        let value = req
            .headers()
            .get(hop::HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (parts, body) = req.into_parts();
        let Ok(body) = axum::body::to_bytes(body, max).await else {
            return Self {
                parts,
                body: axum::body::Bytes::new(),
                claims: Err(hop::Refusal::Malformed),
            };
        };
        let path = path_of(&parts.uri);
        let claims = cluster.accept(&value, parts.method.as_str(), &path, &body);
        if let Err(refusal) = &claims {
            tracing::warn!(reason = %refusal, path = %parts.uri.path(), "internal hop refused");
            metrics::counter!("cordon_hops_refused_total").increment(1);
        }
        Self {
            parts,
            body,
            claims,
        }
    }

    /// The request again, for the next layer.
    pub(crate) fn request(self) -> axum::extract::Request {
        axum::extract::Request::from_parts(self.parts, axum::body::Body::from(self.body))
    }
}

/// A request's path and query, as the hop signs it.
pub(crate) fn path_of(uri: &axum::http::Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned())
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

    #[test]
    fn replica_names_are_host_like() {
        for ok in [
            "a",
            "cordon-7d9f-x2",
            "host.example",
            "r_1",
            &"x".repeat(63),
        ] {
            assert_eq!(check_replica_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "a/b",
            "a b",
            "a;b",
            "é",
            &"x".repeat(64),
            "a\n",
        ] {
            assert!(check_replica_name(bad).is_err(), "{bad:?}");
        }
    }
}
