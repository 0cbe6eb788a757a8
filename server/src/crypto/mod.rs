//! Encryption at rest: XChaCha20-Poly1305 under one master key.
//!
//! Every ciphertext carries the id of the key that sealed it (the first 8
//! bytes of the key's SHA-256, hex) and is bound by its associated data to
//! the record it belongs to (tenant, domain, record id), so a ciphertext
//! copied onto another row does not decrypt. The master key comes from the
//! `master_key` setting (`CORDON_MASTER_KEY`) or from `<data_dir>/master.key`,
//! created with mode 0600 on first use and refused if group or others may
//! read it.
//!
//! *Why one key and random 192-bit nonces rather than per-record data keys:*
//! XChaCha20's nonce is large enough to draw at random for every seal, and a
//! rotation re-encrypts every row anyway, so a wrapped data key per row
//! would add a column and a step without adding a property.

mod key;
mod keyfile;
mod seal;
pub mod settings;

pub use key::{KeyId, KeyIdError, MasterKey};
pub use keyfile::{KEY_FILE, KeyError, KeySettings, KeySource, Keyring, read_key_file};
pub use seal::{AssociatedData, CryptoError, NONCE_LEN, Sealed};
