//! Which database backend a URL names.

use anyhow::bail;

/// The two storage backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    /// Embedded, one host.
    Sqlite,
    /// Shared by several control-plane replicas.
    Postgres,
}

impl DatabaseKind {
    /// Picks the backend from a URL's scheme.
    pub fn of(url: &str) -> anyhow::Result<Self> {
        let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or("");
        match scheme {
            "sqlite" => Ok(Self::Sqlite),
            "postgres" | "postgresql" => Ok(Self::Postgres),
            "" => bail!("database_url: missing scheme (expected sqlite://… or postgres://…)"),
            other => bail!(
                "database_url: unknown scheme {other:?} (expected sqlite://… or postgres://…)"
            ),
        }
    }
}
