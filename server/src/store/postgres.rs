//! PostgreSQL specifics: pool sizing, migrations.

use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Executor};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

pub(super) fn migrator() -> &'static Migrator {
    &MIGRATOR
}

pub(super) async fn connect(url: &str) -> anyhow::Result<AnyPool> {
    let pool = AnyPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        // NOTICEs (a migration's `relation … already exists, skipping`)
        // are not sent: the CLI printed them on every command.
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET client_min_messages = warning").await?;
                Ok(())
            })
        })
        .connect(url)
        .await?;
    Ok(pool)
}
