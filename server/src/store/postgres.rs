//! PostgreSQL specifics: pool sizing, migrations.

use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/postgres");

pub(super) fn migrator() -> &'static Migrator {
    &MIGRATOR
}

pub(super) async fn connect(url: &str) -> anyhow::Result<AnyPool> {
    let pool = AnyPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(url)
        .await?;
    Ok(pool)
}
