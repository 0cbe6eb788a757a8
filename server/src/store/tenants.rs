//! Tenant queries (both backends).

use super::Store;
use super::column::ReadContext;
use crate::domain::TenantId;
use crate::time::now_ms;

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Tenant {
    /// Its id.
    pub id: TenantId,
    /// Display name.
    pub name: String,
    /// Unix milliseconds.
    pub created_at: i64,
}

/// Why a tenant could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateTenantError {
    /// The id is taken.
    #[error("tenant {0} already exists")]
    Exists(TenantId),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl Store {
    /// Creates a tenant.
    #[tracing::instrument(skip_all, fields(tenant.id = %id))]
    pub async fn tenant_create(
        &self,
        id: &TenantId,
        name: &str,
    ) -> Result<Tenant, CreateTenantError> {
        let created_at = now_ms();
        let res = sqlx::query("INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)")
            .bind(id.as_str().to_owned())
            .bind(name.to_owned())
            .bind(created_at)
            .execute(self.pool())
            .await;
        match res {
            Ok(_) => Ok(Tenant {
                id: id.clone(),
                name: name.to_owned(),
                created_at,
            }),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(CreateTenantError::Exists(id.clone()))
            }
            Err(e) => Err(anyhow::Error::new(e)
                .context("failed to insert tenant")
                .into()),
        }
    }

    /// All tenants, by id.
    pub async fn tenant_list(&self) -> anyhow::Result<Vec<Tenant>> {
        sqlx::query_as("SELECT id, name, created_at FROM tenants ORDER BY id")
            .fetch_all(self.pool())
            .await
            .read("failed to list tenants", "malformed tenant row")
    }
}
