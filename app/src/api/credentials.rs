//! The vault's credentials and TOTP seeds, metadata only: no cookie value,
//! secret or code ever reaches the dashboard.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// One stored credential (tenant + domain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialView {
    /// Tenant.
    pub tenant: String,
    /// Exact host.
    pub domain: String,
    /// Cookies stored.
    pub cookies: i64,
    /// localStorage items stored.
    pub storage: i64,
    /// Unix ms of the first cookie to expire (None: session cookies only).
    pub earliest_expiry: Option<i64>,
    /// Unix ms.
    pub refreshed_at: i64,
    /// Unix ms.
    pub last_injected_at: Option<i64>,
    /// `import`, `refresh`.
    pub source: String,
}

/// Every stored credential.
#[server(prefix = "/ui/fn", endpoint = "list_credentials")]
pub async fn list_credentials() -> Result<Vec<CredentialView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see credentials").await?;
    ctl.credentials(&op).await
}

/// Deletes one tenant's credential for a domain.
#[server(prefix = "/ui/fn", endpoint = "delete_credential")]
pub async fn delete_credential(tenant: String, domain: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "delete credentials").await?;
    ctl.delete_credential(&op, tenant, domain).await
}

/// One TOTP seed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TotpView {
    /// `tp_…`.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// The site whose pages (and subdomains) receive its codes.
    pub domain: String,
    /// Which account.
    pub label: String,
    /// `SHA1`, `SHA256`, `SHA512`.
    pub algorithm: String,
    /// 6–8.
    pub digits: i64,
    /// Seconds.
    pub period: i64,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last code typed.
    pub last_used_at: Option<i64>,
}

/// Every TOTP seed the operator may see.
#[server(prefix = "/ui/fn", endpoint = "list_totp")]
pub async fn list_totp() -> Result<Vec<TotpView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see credentials").await?;
    ctl.totp_seeds(&op).await
}

/// Deletes one tenant's TOTP seed.
#[server(prefix = "/ui/fn", endpoint = "delete_totp")]
pub async fn delete_totp(tenant: String, id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "delete credentials").await?;
    ctl.delete_totp(&op, tenant, id).await
}
