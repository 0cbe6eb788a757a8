//! Tenants and their agent API keys: created and revoked only through
//! here (the CLI and the dashboard's Tenants page), each change
//! audited before it is made. Keys are shown once; only their hash is kept.

use serde_json::json;

use crate::audit::{Actor, NewEvent};
use crate::domain::{ApiKeyId, TenantId};
use crate::store::Store;
use crate::store::api_keys::ApiKeyInfo;
use crate::store::tenants::{CreateTenantError, Tenant};

/// The longest tenant name or key label, in characters.
pub const MAX_NAME: usize = 100;

/// What managing tenants and keys can fail with.
#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    /// A name or label that is empty, too long or holds control characters.
    #[error("{0}")]
    Invalid(String),
    /// The id is taken.
    #[error("tenant {0} already exists")]
    Exists(TenantId),
    /// No such tenant.
    #[error("tenant {0} does not exist (create it with `cordon tenant create {0}`)")]
    NoSuchTenant(TenantId),
    /// No active key with this id.
    #[error("no active API key {0}")]
    NoSuchKey(ApiKeyId),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

fn checked_text<'a>(what: &str, text: &'a str) -> Result<&'a str, TenantError> {
    let text = text.trim();
    if text.is_empty() || text.chars().count() > MAX_NAME || text.chars().any(char::is_control) {
        return Err(TenantError::Invalid(format!(
            "{what}: 1 to {MAX_NAME} characters, no control characters"
        )));
    }
    Ok(text)
}

/// A key's label: optional, else as bounded as a name.
fn checked_label(label: &str) -> Result<&str, TenantError> {
    if label.trim().is_empty() {
        return Ok("");
    }
    checked_text("label", label)
}

/// Creates tenant `id` named `name` (its id when none is given).
pub async fn create(
    store: &Store,
    actor: &Actor,
    id: &TenantId,
    name: Option<&str>,
) -> Result<Tenant, TenantError> {
    let name = checked_text("name", name.unwrap_or(id.as_str()))?;
    store
        .audit_append(
            NewEvent::new(actor.clone(), "tenant.create")
                .tenant(id)
                .params(json!({ "name": name }))
                .outcome("requested"),
        )
        .await?;
    store.tenant_create(id, name).await.map_err(|e| match e {
        CreateTenantError::Exists(id) => TenantError::Exists(id),
        CreateTenantError::Other(e) => TenantError::Internal(e),
    })
}

/// Every tenant.
pub async fn list(store: &Store) -> Result<Vec<Tenant>, TenantError> {
    Ok(store.tenant_list().await?)
}

/// Creates an API key for `tenant`; returns its id and the key, which is
/// shown this once.
pub async fn create_key(
    store: &Store,
    actor: &Actor,
    tenant: &TenantId,
    label: &str,
) -> Result<(String, String), TenantError> {
    let label = checked_label(label)?;
    if !store.tenant_list().await?.iter().any(|t| &t.id == tenant) {
        return Err(TenantError::NoSuchTenant(tenant.clone()));
    }
    store
        .audit_append(
            NewEvent::new(actor.clone(), "apikey.create")
                .tenant(tenant)
                .params(json!({ "label": label }))
                .outcome("requested"),
        )
        .await?;
    Ok(store.api_key_create(tenant, label).await?)
}

/// The keys (of one tenant, or all), never the keys themselves.
pub async fn list_keys(
    store: &Store,
    tenant: Option<&TenantId>,
) -> Result<Vec<ApiKeyInfo>, TenantError> {
    Ok(store.api_key_list(tenant).await?)
}

/// Revokes an active key: its next request is refused.
pub async fn revoke_key(store: &Store, actor: &Actor, id: &ApiKeyId) -> Result<(), TenantError> {
    store
        .audit_append(
            NewEvent::new(actor.clone(), "apikey.revoke")
                .params(json!({ "id": id.as_str() }))
                .outcome("requested"),
        )
        .await?;
    if !store.api_key_revoke(id).await? {
        return Err(TenantError::NoSuchKey(id.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_labels_are_bounded_and_printable() {
        assert_eq!(checked_text("label", "  ci bot ").unwrap(), "ci bot");
        assert_eq!(checked_label("").unwrap(), "");
        assert!(checked_label("a\nb").is_err());
        for bad in ["", "   ", "a\u{7}b", &"x".repeat(MAX_NAME + 1)] {
            let err = checked_text("label", bad).unwrap_err();
            assert!(err.to_string().starts_with("label: "), "{err}");
        }
    }
}
