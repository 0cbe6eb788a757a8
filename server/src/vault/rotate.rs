//! Master key rotation: database and key file together.
//!
//! Order, so a crash at any point leaves a key that opens every row:
//! 1. the new key is written beside the old as `master.key.next` (0600);
//! 2. every row is re-sealed under it in one transaction;
//! 3. the old key file is kept as `master.key.<old key id>` (a hard link)
//!    and `master.key.next` is renamed over `master.key`.
//!
//! A crash between 2 and 3 leaves the rows under the new key and
//! `master.key` holding the old: the next start fails naming the rows' key
//! id, and `master.key.next` is the file to move into place. When the key
//! comes from `CORDON_MASTER_KEY`, no file is touched: the operator gives
//! the new key as a file and then changes the setting.
//!
//! Rotate with the server stopped: a running server keeps sealing with the
//! key it loaded. So a rotation is refused while any replica on the
//! database has beaten within the last minute (naming them), and the
//! deployment row records the new key id.

use std::path::PathBuf;

use serde_json::json;

use super::error::VaultError;
use super::service::Vault;
use crate::audit::{Actor, NewEvent};
use crate::crypto::{AssociatedData, CryptoError, KeyError, KeyId, Keyring, MasterKey, Sealed};
use crate::store::Store;

/// What a rotation did.
#[derive(Debug, Clone)]
pub struct Rotation {
    /// The key the rows were sealed under.
    pub from: KeyId,
    /// The key they are sealed under now.
    pub to: KeyId,
    /// How many credentials were re-sealed.
    pub credentials: u64,
    /// Where the old key file was kept (`None` when the key came from the setting).
    pub old_key_kept_at: Option<PathBuf>,
}

/// Why a rotation failed; nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// Key file trouble.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The database part.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// Replicas are running on this database.
    #[error(
        "replicas running on this database: {}; stop every replica first (a running one keeps \
         sealing under the old key; one that crashed counts for a minute after its last heartbeat)",
        .0.join(", ")
    )]
    ReplicasRunning(Vec<String>),
}

/// A replica whose heartbeat is this recent counts as running.
const RUNNING_WITHIN_MS: i64 = 60_000;

/// Re-seals every credential under `new` and installs it in place of the
/// key in force.
pub async fn rotate(
    store: &Store,
    keyring: &Keyring,
    new: MasterKey,
    actor: &Actor,
) -> Result<Rotation, RotateError> {
    // Heartbeats are in the database's time (see `cluster`).
    let now = crate::time::now_ms() + store.clock_offset_ms().await.ok().flatten().unwrap_or(0);
    let running: Vec<String> = store
        .replicas_up()
        .await
        .map_err(VaultError::Other)?
        .into_iter()
        .filter(|r| now - r.heartbeat_at <= RUNNING_WITHIN_MS)
        .map(|r| r.name)
        .collect();
    if !running.is_empty() {
        return Err(RotateError::ReplicasRunning(running));
    }
    let vault = Vault::new(store.clone(), keyring.key().clone());
    let staged = keyring.stage(&new)?;
    let credentials = match vault.reseal_all(actor, &new).await {
        Ok((count, _)) => count,
        Err(e) => {
            if let Some(path) = &staged {
                Keyring::discard(path);
            }
            return Err(e.into());
        }
    };
    store
        .deployment_set_key(new.id().as_str())
        .await
        .map_err(VaultError::Other)?;
    let old_key_kept_at = match &staged {
        Some(path) => Some(keyring.install(path)?),
        None => None,
    };
    Ok(Rotation {
        from: keyring.key().id().clone(),
        to: new.id().clone(),
        credentials,
        old_key_kept_at,
    })
}

impl Vault {
    /// Re-seals every credential under `new` in one transaction (nothing
    /// changes if any row fails to open under the key in force), audited as
    /// `keys.rotate`. Returns how many rows were rewritten and a vault that
    /// seals with `new`. The key file is the caller's (see
    /// [`crate::vault::rotate`]).
    pub async fn reseal_all(
        &self,
        actor: &Actor,
        new: &MasterKey,
    ) -> Result<(u64, Vault), VaultError> {
        self.check_keys().await?;
        self.audit(
            NewEvent::new(actor.clone(), "keys.rotate")
                .params(json!({ "from": self.key.id().as_str(), "to": new.id().as_str() }))
                .outcome("requested"),
        )
        .await?;
        let count = self
            .store
            .vault_reseal_all(|bound, sealed| -> anyhow::Result<Sealed> {
                let ad = AssociatedData::record(bound.tenant, bound.domain, bound.id);
                let plaintext = self.key.open(&ad, sealed)?;
                Ok(new.seal(&ad, &plaintext)?)
            })
            .await
            .map_err(|e| match e.downcast::<CryptoError>() {
                Ok(c) => VaultError::Crypto(c),
                Err(e) => VaultError::Other(e),
            })?;
        self.audit(NewEvent::new(actor.clone(), "keys.rotate").params(json!({
            "from": self.key.id().as_str(),
            "to": new.id().as_str(),
            "credentials": count,
        })))
        .await?;
        Ok((count, Vault::new(self.store.clone(), new.clone())))
    }
}
