//! Exporting a credential to a storageState file only its owner can read.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use zeroize::Zeroizing;

use super::domain::Domain;
use super::error::VaultError;
use super::service::Vault;
use crate::audit::Actor;
use crate::domain::TenantId;

/// Why an export failed. The output file is removed on any failure.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output file could not be created (it may exist: it is never
    /// overwritten) or written.
    #[error("cannot write {path}: {err}")]
    File {
        /// The file.
        path: String,
        /// The cause.
        err: io::Error,
    },
    /// The vault refused.
    #[error(transparent)]
    Vault(#[from] VaultError),
}

/// Writes the tenant's credential for `domain` to `path` as a Playwright
/// storageState file with mode 0600. `path` must not exist. Returns how
/// many cookies were written. The export is audited by the vault before
/// anything is decrypted.
pub async fn export_to_file(
    vault: &Vault,
    actor: &Actor,
    tenant: &TenantId,
    domain: &Domain,
    path: &Path,
) -> Result<usize, ExportError> {
    let file_err = |err| ExportError::File {
        path: path.display().to_string(),
        err,
    };
    // Created first, so a bad path fails before anything is decrypted.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(file_err)?;
    let result: Result<usize, ExportError> = async {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(file_err)?;
        let state = vault.export(actor, tenant, domain).await?;
        let bytes = Zeroizing::new(
            serde_json::to_vec_pretty(&state).map_err(|e| file_err(io::Error::other(e)))?,
        );
        file.write_all(&bytes).map_err(file_err)?;
        file.write_all(b"\n").map_err(file_err)?;
        file.sync_all().map_err(file_err)?;
        Ok(state.cookies.len())
    }
    .await;
    if result.is_err() {
        let _ = fs::remove_file(path);
    }
    result
}
