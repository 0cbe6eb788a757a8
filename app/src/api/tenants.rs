//! Tenants and their agent API keys (admin).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// An API key as listed (never the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKeyView {
    /// `k_…`.
    pub id: String,
    /// Label.
    pub label: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of its last use (to the minute).
    pub last_used_at: Option<i64>,
    /// Unix ms, if revoked.
    pub revoked_at: Option<i64>,
}

/// A tenant with its keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantView {
    /// Id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Unix ms.
    pub created_at: i64,
    /// Its keys, newest first.
    pub keys: Vec<ApiKeyView>,
}

/// A key just made: shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewApiKey {
    /// `k_…`.
    pub id: String,
    /// The key itself; never shown again.
    pub key: String,
}

/// Tenants and keys.
#[server(prefix = "/ui/fn", endpoint = "list_tenants")]
pub async fn list_tenants() -> Result<Vec<TenantView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "manage tenants").await?;
    ctl.tenants(&op).await
}

/// Creates a tenant.
#[server(prefix = "/ui/fn", endpoint = "create_tenant")]
pub async fn create_tenant(id: String, name: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "create tenants").await?;
    ctl.create_tenant(&op, id, name).await
}

/// Creates an API key for a tenant; the key is in the answer, once.
#[server(prefix = "/ui/fn", endpoint = "create_api_key")]
pub async fn create_api_key(tenant: String, label: String) -> Result<NewApiKey, UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "create API keys").await?;
    ctl.create_api_key(&op, tenant, label).await
}

/// Revokes an API key.
#[server(prefix = "/ui/fn", endpoint = "revoke_api_key")]
pub async fn revoke_api_key(id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "revoke API keys").await?;
    ctl.revoke_api_key(&op, id).await
}
