//! The credential vault: site cookies and localStorage per (tenant, domain), sealed at rest
//! (see [`crate::crypto`]), imported from files or a refresh session,
//! exported only on explicit request, and decrypted in memory for injection;
//! and second-factor seeds ([`totp`]), typed as codes, never shown.

mod diff;
mod domain;
mod error;
pub mod export;
pub mod import;
mod plaintext;
pub mod rotate;
mod select;
mod service;
pub mod totp;

pub use crate::domain::{
    Cookie, Origin, PartitionKey, SameSite, StorageItem, StorageState, earliest_expiry,
    storage_items,
};
pub use diff::{CredentialDiff, diff};
pub use domain::{Domain, DomainError};
pub use error::VaultError;
pub use import::{ImportError, MAX_IMPORT_BYTES, Rejected};
pub use rotate::{RotateError, Rotation, rotate};
pub use select::Selected;
pub use service::{ImportOptions, ImportReport, Source, Vault};
