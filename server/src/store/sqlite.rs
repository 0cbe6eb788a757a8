//! SQLite specifics: file creation, WAL, busy timeout, migrations.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AnyPool, Executor};

static MIGRATOR: Migrator = sqlx::migrate!("../migrations/sqlite");

pub(super) fn migrator() -> &'static Migrator {
    &MIGRATOR
}

pub(super) async fn connect(url: &str) -> anyhow::Result<AnyPool> {
    // Parsed with the SQLite driver's own parser only to find the file and to
    // reject a malformed URL before any file is created.
    let opts = SqliteConnectOptions::from_str(url).context("malformed sqlite URL")?;
    let file = opts.get_filename();
    let in_memory = file.as_os_str().is_empty() || url.contains(":memory:");
    if !in_memory {
        create_file(file)?;
    }
    let pool = AnyPoolOptions::new()
        .max_connections(if in_memory { 1 } else { 8 })
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                // WAL lets the dashboard read while sessions write; the busy
                // timeout makes writers queue for the lock instead of failing.
                conn.execute("PRAGMA journal_mode = WAL").await?;
                conn.execute("PRAGMA busy_timeout = 10000").await?;
                conn.execute("PRAGMA synchronous = NORMAL").await?;
                conn.execute("PRAGMA foreign_keys = ON").await?;
                Ok(())
            })
        })
        .connect(url)
        .await?;
    Ok(pool)
}

/// Creates the database file (and its directory) readable by its owner
/// only: it holds tokens' hashes, the audit log and sealed credentials.
/// SQLite gives the `-wal` and `-shm` files the database file's mode; ones
/// left by an older run are tightened too.
fn create_file(file: &Path) -> anyhow::Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)
        .with_context(|| format!("cannot create or open {}", file.display()))?;
    for suffix in ["", "-wal", "-shm"] {
        let mut path = file.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            // Someone else's file that this process may still use: its owner
            // chose its mode.
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => tracing::warn!(
                file = %Path::new(&path).display(),
                error = %e,
                "cannot make the database file private (mode 0600)"
            ),
            _ => {}
        }
    }
    Ok(())
}
