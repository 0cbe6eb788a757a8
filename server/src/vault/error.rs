//! `VaultError`: what the vault's callers may have to tell apart.

use super::domain::Domain;
use super::import::ImportError;
use crate::crypto::CryptoError;
use crate::domain::TenantId;

/// Why a vault operation failed. Each is a distinct type; none carries a
/// cookie value or key material.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    /// The tenant does not exist.
    #[error("tenant {0} does not exist")]
    UnknownTenant(TenantId),
    /// No credential for that tenant and domain.
    #[error("no stored credential for {domain} in tenant {tenant}")]
    NotFound {
        /// The tenant.
        tenant: TenantId,
        /// The domain.
        domain: Domain,
    },
    /// A TOTP seed was entered wrong (the field and why; never the secret).
    #[error(transparent)]
    Totp(super::totp::FieldError),
    /// No TOTP seed with that id in the tenant.
    #[error("no TOTP seed {0} in this tenant")]
    TotpNotFound(String),
    /// The domain already has a TOTP seed with that label.
    #[error(
        "{domain} already has a TOTP seed labelled {label:?}; delete it first or choose another label"
    )]
    TotpLabelTaken {
        /// The domain.
        domain: Domain,
        /// The label.
        label: String,
    },
    /// The file could not be imported.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// A wrong master key or an altered record.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// Storage failed.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl VaultError {
    /// A stable code for audit rows and callers.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTenant(_) => "unknown_tenant",
            Self::NotFound { .. } | Self::TotpNotFound(_) => "not_found",
            Self::Totp(_) => "invalid_totp",
            Self::TotpLabelTaken { .. } => "conflict",
            Self::Import(e) => e.code(),
            Self::Crypto(CryptoError::WrongKey { .. } | CryptoError::KeyMismatch { .. }) => {
                "wrong_key"
            }
            Self::Crypto(_) => "decrypt_failed",
            Self::Other(_) => "internal",
        }
    }
}
