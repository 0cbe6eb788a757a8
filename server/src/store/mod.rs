//! Storage: one seam over two backends. SQL that both dialects accept lives
//! once, in the per-resource modules (`audit`, `audit_query`, `tenants`); what differs per
//! backend (connecting, pragmas, migrations) lives in `sqlite` and `postgres`.

mod column;
mod postgres;
mod sqlite;

pub mod api_keys;
pub mod audit;
pub mod audit_query;
pub mod egress;
pub mod grants;
pub mod live_links;
pub mod operators;
pub mod replicas;
pub mod schema;
pub mod sessions;
pub mod tasks;
pub mod tenants;
pub mod tickets;
pub mod totp;
pub mod vault;

use crate::fix::WithFix;
use std::sync::Arc;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use sqlx::{AnyPool, Connection};
use tokio::sync::Mutex;

pub use crate::domain::DatabaseKind;

/// A handle on the database; cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    kind: DatabaseKind,
    /// Serialises audit appends within this process (the database's locks
    /// serialise them across processes and replicas) and, on SQLite, holds
    /// the head of the chain this process last wrote or read.
    audit_lock: Arc<Mutex<Option<audit::AuditHead>>>,
    /// Change notices for the dashboard, published after each commit of
    /// something a page shows.
    pub(crate) changes: crate::events::Changes,
}

impl Store {
    /// Connects to `url` (creating an SQLite file if missing). Does not migrate.
    pub async fn connect(url: &SecretString) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let raw = url.expose_secret();
        let kind = DatabaseKind::of(raw)?;
        let shown = crate::redact::url(raw);
        if kind == DatabaseKind::Postgres {
            // One direct attempt first: a pool only reports "timed out" when
            // the server refuses, which hides the reason.
            let conn = sqlx::AnyConnection::connect(raw)
                .await
                .with_context(|| format!("cannot connect to database {shown}"))
                .fix(
                    "check that PostgreSQL runs and listens where database_url says \
                     (`pg_isready -h <host> -p <port>`), that its user and database exist \
                     (`createuser cordon && createdb -O cordon cordon`), and that pg_hba.conf \
                     lets this host in",
                )?;
            let _ = conn.close().await;
        }
        let pool = match kind {
            DatabaseKind::Sqlite => sqlite::connect(raw).await,
            DatabaseKind::Postgres => postgres::connect(raw).await,
        }
        .with_context(|| format!("cannot open database {shown}"))?;
        Ok(Self {
            pool,
            kind,
            audit_lock: Arc::new(Mutex::new(None)),
            changes: crate::events::Changes::default(),
        })
    }

    /// Applies the backend's pending migrations.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = match self.kind {
            DatabaseKind::Sqlite => sqlite::migrator(),
            DatabaseKind::Postgres => postgres::migrator(),
        };
        // Migrations the database has and this binary does not are a newer
        // release's, which `cluster::Cluster::join` has checked are expand
        // (`schema::rolling`): this binary runs on that schema. The static
        // migrator is copied to say so (its fields are sqlx's, pinned).
        let migrator = sqlx::migrate::Migrator {
            migrations: migrator.migrations.clone(),
            ignore_missing: true,
            locking: migrator.locking,
            no_tx: migrator.no_tx,
        };
        migrator
            .run(&self.pool)
            .await
            .context("failed to apply database migrations")
    }

    /// Change notices (see [`crate::events`]).
    pub fn changes(&self) -> &crate::events::Changes {
        &self.changes
    }

    /// Which backend this is.
    pub fn kind(&self) -> DatabaseKind {
        self.kind
    }

    /// The pool, for the query modules.
    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A round trip to the database, for readiness checks.
    pub async fn ping(&self) -> anyhow::Result<()> {
        sqlx::query("SELECT 1")
            .execute(&self.pool)
            .await
            .context("database did not answer")?;
        Ok(())
    }

    /// Closes the pool, waiting for connections to be returned.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// `tenant_id IN ($k, …)` for `tenants`, their values appended to `binds`
/// (placeholders numbered after `before` other binds of the query, then
/// the ones already in `binds`); an empty set matches nothing.
pub(crate) fn tenant_in(tenants: &[String], before: usize, binds: &mut Vec<String>) -> String {
    if tenants.is_empty() {
        return "1 = 0".to_owned();
    }
    let mut marks = Vec::with_capacity(tenants.len());
    for t in tenants {
        binds.push(t.clone());
        marks.push(format!("${}", before + binds.len()));
    }
    format!("tenant_id IN ({})", marks.join(", "))
}
