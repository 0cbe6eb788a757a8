//! The deployment row and the replicas sharing one database (both backends;
//! the advisory locks are PostgreSQL's, see [`crate::cluster`]).

use anyhow::Context;

use super::column::ReadContext;
use super::{DatabaseKind, Store};
use crate::domain::{DeploymentId, InstanceId};
use crate::time::now_ms;

/// One replica as recorded.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReplicaRow {
    /// Its `replica_name`.
    pub name: String,
    /// Random per process start.
    pub instance: String,
    /// Where the others reach it.
    pub advertise_url: Option<String>,
    /// The master key id it runs with.
    pub key_id: String,
    /// The newest migration its binary knows.
    pub schema_version: i64,
    /// Its binary's version.
    pub version: String,
    /// `up`, `stopped` or `lost`.
    pub state: String,
    /// When it started.
    pub started_at: i64,
    /// Its last heartbeat.
    pub heartbeat_at: i64,
}

const COLUMNS: &str = "name, instance, advertise_url, key_id, schema_version, version, state, started_at, heartbeat_at";

/// The deployment's row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Deployment {
    /// Random, made at the first start.
    #[sqlx(rename = "deployment_id")]
    pub id: String,
    /// The master key id the vault is sealed under.
    pub key_id: Option<String>,
}

impl Store {
    /// The newest migration this binary carries.
    pub fn schema_known(&self) -> i64 {
        let migrator = match self.kind {
            DatabaseKind::Sqlite => super::sqlite::migrator(),
            DatabaseKind::Postgres => super::postgres::migrator(),
        };
        migrator.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// The newest migration applied to the database (`None` on a new one).
    pub async fn schema_applied(&self) -> anyhow::Result<Option<i64>> {
        let exists: i64 = match self.kind {
            DatabaseKind::Sqlite => sqlx::query_scalar(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
            ),
            DatabaseKind::Postgres => sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'",
            ),
        }
        .fetch_one(self.pool())
        .await
        .context("cannot read the database's migrations")?;
        if exists == 0 {
            return Ok(None);
        }
        sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(self.pool())
            .await
            .context("cannot read the database's migrations")
    }

    /// The migrations this binary carries, oldest first.
    pub fn migrations_known(&self) -> Vec<super::schema::Migration> {
        let migrator = match self.kind {
            DatabaseKind::Sqlite => super::sqlite::migrator(),
            DatabaseKind::Postgres => super::postgres::migrator(),
        };
        migrator
            .iter()
            .map(|m| super::schema::Migration {
                version: m.version,
                description: m.description.to_string(),
            })
            .collect()
    }

    /// The migrations the database records as applied, oldest first
    /// (empty on a new database).
    pub async fn migrations_applied(&self) -> anyhow::Result<Vec<super::schema::Migration>> {
        if self.schema_applied().await?.is_none() {
            return Ok(Vec::new());
        }
        sqlx::query_as(
            "SELECT version, description FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(self.pool())
        .await
        .read(
            "cannot read the database's migrations",
            "malformed migration row",
        )
    }

    /// The deployment row, made with `new_id` and `key_id` if missing (and
    /// its key id recorded if it had none).
    pub async fn deployment_ensure(
        &self,
        new_id: &DeploymentId,
        key_id: &str,
    ) -> anyhow::Result<Deployment> {
        sqlx::query(
            "INSERT INTO deployment (id, deployment_id, key_id, created_at) VALUES (1, $1, $2, $3) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(new_id.to_string())
        .bind(key_id.to_owned())
        .bind(now_ms())
        .execute(self.pool())
        .await
        .context("cannot record the deployment")?;
        sqlx::query("UPDATE deployment SET key_id = $1 WHERE id = 1 AND key_id IS NULL")
            .bind(key_id.to_owned())
            .execute(self.pool())
            .await
            .context("cannot record the deployment's key")?;
        self.deployment()
            .await?
            .context("the deployment row is missing")
    }

    /// The deployment row, if the database has one.
    pub async fn deployment(&self) -> anyhow::Result<Option<Deployment>> {
        sqlx::query_as("SELECT deployment_id, key_id FROM deployment WHERE id = 1")
            .fetch_optional(self.pool())
            .await
            .read("cannot read the deployment", "malformed deployment row")
    }

    /// Records the key the vault is sealed under now (`keys rotate`).
    pub async fn deployment_set_key(&self, key_id: &str) -> anyhow::Result<()> {
        sqlx::query("UPDATE deployment SET key_id = $1 WHERE id = 1")
            .bind(key_id.to_owned())
            .execute(self.pool())
            .await
            .context("cannot record the deployment's key")?;
        Ok(())
    }

    /// Records this replica as up (a row of the same name is taken over).
    pub async fn replica_register(&self, r: &ReplicaRow) -> anyhow::Result<()> {
        sqlx::query(&format!(
            "INSERT INTO replicas ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (name) DO UPDATE SET instance = excluded.instance, \
             advertise_url = excluded.advertise_url, key_id = excluded.key_id, \
             schema_version = excluded.schema_version, version = excluded.version, \
             state = excluded.state, started_at = excluded.started_at, \
             heartbeat_at = excluded.heartbeat_at"
        ))
        .bind(r.name.clone())
        .bind(r.instance.clone())
        .bind(r.advertise_url.clone())
        .bind(r.key_id.clone())
        .bind(r.schema_version)
        .bind(r.version.clone())
        .bind(r.state.clone())
        .bind(r.started_at)
        .bind(r.heartbeat_at)
        .execute(self.pool())
        .await
        .context("cannot register this replica")?;
        Ok(())
    }

    /// Moves this replica's heartbeat; false if its row is no longer this
    /// process's (another took the name, or it was declared lost).
    pub async fn replica_heartbeat(
        &self,
        name: &str,
        instance: &InstanceId,
        at: i64,
    ) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE replicas SET heartbeat_at = $1 WHERE name = $2 AND instance = $3 AND state = 'up'",
        )
        .bind(at)
        .bind(name.to_owned())
        .bind(instance.to_string())
        .execute(self.pool())
        .await
        .context("cannot record this replica's heartbeat")?;
        Ok(res.rows_affected() == 1)
    }

    /// PostgreSQL: how far the database server's clock is ahead of this
    /// process's (ms; negative when behind), read as the midpoint of one
    /// round trip. `None` on SQLite (one process: its clock is the clock).
    pub async fn clock_offset_ms(&self) -> anyhow::Result<Option<i64>> {
        if self.kind() != DatabaseKind::Postgres {
            return Ok(None);
        }
        let before = now_ms();
        let db: i64 = sqlx::query_scalar(
            "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        )
        .fetch_one(self.pool())
        .await
        .context("cannot read the database's clock")?;
        let after = now_ms();
        Ok(Some(db - (before + (after - before) / 2)))
    }

    /// Marks this replica stopped (a clean shutdown).
    pub async fn replica_stopped(&self, name: &str, instance: &InstanceId) -> anyhow::Result<()> {
        sqlx::query("UPDATE replicas SET state = 'stopped' WHERE name = $1 AND instance = $2")
            .bind(name.to_owned())
            .bind(instance.to_string())
            .execute(self.pool())
            .await
            .context("cannot mark this replica stopped")?;
        Ok(())
    }

    /// One replica.
    pub async fn replica_get(&self, name: &str) -> anyhow::Result<Option<ReplicaRow>> {
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM replicas WHERE name = $1"))
            .bind(name.to_owned())
            .fetch_optional(self.pool())
            .await
            .read("cannot read a replica", "malformed replica row")
    }

    /// Every replica recorded as up, newest heartbeat first.
    pub async fn replicas_up(&self) -> anyhow::Result<Vec<ReplicaRow>> {
        // No row has a heartbeat after the end of time: only `up` ones.
        self.replicas_where(
            "state = 'up' OR heartbeat_at > $1 ORDER BY heartbeat_at DESC",
            i64::MAX,
        )
        .await
    }

    async fn replicas_where(&self, filter: &str, bound: i64) -> anyhow::Result<Vec<ReplicaRow>> {
        sqlx::query_as(&format!("SELECT {COLUMNS} FROM replicas WHERE {filter}"))
            .bind(bound)
            .fetch_all(self.pool())
            .await
            .read("cannot list replicas", "malformed replica row")
    }

    /// Replicas up, and those stopped or lost whose last heartbeat is
    /// after `since` (a Deployment's pods get new names: old ones fade out).
    pub async fn replicas_recent(&self, since: i64) -> anyhow::Result<Vec<ReplicaRow>> {
        self.replicas_where("state = 'up' OR heartbeat_at >= $1 ORDER BY name", since)
            .await
    }

    /// PostgreSQL: the replica whose connection holds the advisory lock
    /// `(leader, 1)`, found by the name lock `(names, hashtext(name))` the
    /// same backend holds. `None` on SQLite or when no one holds it.
    pub async fn replica_holding(&self, leader: i32, names: i32) -> anyhow::Result<Option<String>> {
        if self.kind() != DatabaseKind::Postgres {
            return Ok(None);
        }
        let name: Option<String> = sqlx::query_scalar(
            "SELECT r.name FROM pg_locks l \
             JOIN pg_locks n ON n.pid = l.pid AND n.locktype = 'advisory' AND n.granted \
               AND n.classid = $2::int4::oid AND n.objsubid = 2 AND n.database = l.database \
             JOIN replicas r ON n.objid = hashtext(r.name)::oid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::int4::oid \
               AND l.objid = 1 AND l.objsubid = 2 \
               AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             LIMIT 1",
        )
        .bind(leader)
        .bind(names)
        .fetch_optional(self.pool())
        .await
        .context("cannot find the housekeeping lock's holder")?;
        Ok(name)
    }

    /// Marks a replica lost if it is still up with the heartbeat the caller
    /// judged (so one that just beat is not); true if this call did it.
    pub async fn replica_mark_lost(&self, name: &str, heartbeat_at: i64) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "UPDATE replicas SET state = 'lost' WHERE name = $1 AND state = 'up' AND heartbeat_at = $2",
        )
        .bind(name.to_owned())
        .bind(heartbeat_at)
        .execute(self.pool())
        .await
        .context("cannot mark a replica lost")?;
        Ok(res.rows_affected() == 1)
    }
}
