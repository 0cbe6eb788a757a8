//! Sealing and opening records with the master key.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

use super::key::{KeyId, MasterKey};

/// XChaCha20-Poly1305's nonce length: 192 bits, drawn at random per seal.
pub const NONCE_LEN: usize = 24;

/// The associated data of a vault record: what a ciphertext is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssociatedData(Vec<u8>);

impl AssociatedData {
    /// Binds a vault record to its tenant, domain and id. Each part is
    /// length-prefixed, so no two different triples give the same bytes.
    pub fn record(tenant: &str, domain: &str, id: &str) -> Self {
        let mut bytes = b"cordon.vault.v1".to_vec();
        for part in [tenant, domain, id] {
            bytes.extend_from_slice(&(part.len() as u64).to_be_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        Self(bytes)
    }
}

/// A sealed record: what is stored (read from its columns by name).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Sealed {
    /// Id of the key that sealed it.
    pub key_id: KeyId,
    /// The random nonce ([`NONCE_LEN`] bytes).
    pub nonce: Vec<u8>,
    /// Ciphertext with the 16-byte Poly1305 tag appended.
    pub ciphertext: Vec<u8>,
}

/// Why a record could not be sealed or opened. Messages name key ids, never
/// key material or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    /// The record was sealed under another key than the one in force.
    #[error(
        "record sealed under key id {stored}, but the master key in force has key id {current}"
    )]
    WrongKey {
        /// The key id stored with the record.
        stored: KeyId,
        /// The key id of the master key in force.
        current: KeyId,
    },
    /// Stored credentials were sealed under another key than the one in force.
    #[error(
        "master key mismatch: {count} stored credential(s) are encrypted under key id {stored}, \
         but the master key in force has key id {current} (set CORDON_MASTER_KEY to the key \
         with id {stored}, or restore the key file kept as master.key.{stored})"
    )]
    KeyMismatch {
        /// A key id found on stored rows.
        stored: KeyId,
        /// How many rows carry it.
        count: i64,
        /// The key id of the master key in force.
        current: KeyId,
    },
    /// The right key, but the tag did not verify: the ciphertext, nonce or
    /// associated data differ from what was sealed (altered, or copied from
    /// another record).
    #[error(
        "decryption under key id {key_id} failed: the record was altered or belongs to another tenant, domain or id"
    )]
    Tampered {
        /// The key id of the record (and of the key in force).
        key_id: KeyId,
    },
    /// The AEAD refused to encrypt (only for absurd lengths).
    #[error("encryption failed")]
    Encrypt,
}

impl MasterKey {
    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(Key::from_slice(self.bytes()))
    }

    /// Encrypts `plaintext` bound to `ad`, under a fresh random nonce.
    pub fn seal(&self, ad: &AssociatedData, plaintext: &[u8]) -> Result<Sealed, CryptoError> {
        let nonce: [u8; NONCE_LEN] = rand::random();
        let ciphertext = self
            .cipher()
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &ad.0,
                },
            )
            .map_err(|_| CryptoError::Encrypt)?;
        Ok(Sealed {
            key_id: self.id().clone(),
            nonce: nonce.to_vec(),
            ciphertext,
        })
    }

    /// Decrypts a sealed record bound to `ad`. All or nothing: a wrong key,
    /// nonce, associated data or a single changed byte yields an error and
    /// no plaintext. The plaintext is wiped when dropped.
    pub fn open(
        &self,
        ad: &AssociatedData,
        sealed: &Sealed,
    ) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        if sealed.key_id != *self.id() {
            return Err(CryptoError::WrongKey {
                stored: sealed.key_id.clone(),
                current: self.id().clone(),
            });
        }
        let tampered = || CryptoError::Tampered {
            key_id: self.id().clone(),
        };
        if sealed.nonce.len() != NONCE_LEN {
            return Err(tampered());
        }
        self.cipher()
            .decrypt(
                XNonce::from_slice(&sealed.nonce),
                Payload {
                    msg: &sealed.ciphertext,
                    aad: &ad.0,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| tampered())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"canary-cookie-value-0123456789";

    fn ad() -> AssociatedData {
        AssociatedData::record("acme", "example.com", "v_1")
    }

    #[test]
    fn a_sealed_record_opens_to_the_same_bytes() {
        let key = MasterKey::generate();
        let sealed = key.seal(&ad(), SECRET).unwrap();
        assert_eq!(sealed.key_id, *key.id());
        assert_eq!(sealed.nonce.len(), NONCE_LEN);
        assert!(!sealed.ciphertext.windows(SECRET.len()).any(|w| w == SECRET));
        assert_eq!(key.open(&ad(), &sealed).unwrap().as_slice(), SECRET);
    }

    #[test]
    fn two_seals_of_the_same_bytes_differ() {
        let key = MasterKey::generate();
        let a = key.seal(&ad(), SECRET).unwrap();
        let b = key.seal(&ad(), SECRET).unwrap();
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.ciphertext, b.ciphertext);
    }

    #[test]
    fn a_record_does_not_open_under_another_tenant_domain_or_id() {
        let key = MasterKey::generate();
        let sealed = key.seal(&ad(), SECRET).unwrap();
        for other in [
            AssociatedData::record("other", "example.com", "v_1"),
            AssociatedData::record("acme", "evil.com", "v_1"),
            AssociatedData::record("acme", "example.com", "v_2"),
            // Same concatenation, different split: the length prefixes tell them apart.
            AssociatedData::record("acmee", "xample.com", "v_1"),
        ] {
            let err = key.open(&other, &sealed).unwrap_err();
            assert!(matches!(err, CryptoError::Tampered { .. }), "{err}");
        }
    }

    #[test]
    fn a_wrong_key_is_named_by_id_and_yields_nothing() {
        let key = MasterKey::generate();
        let other = MasterKey::generate();
        let sealed = key.seal(&ad(), SECRET).unwrap();
        let err = other.open(&ad(), &sealed).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(key.id().as_str()), "{msg}");
        assert!(msg.contains(other.id().as_str()), "{msg}");
        // A record relabelled with the other key's id still does not open.
        let relabelled = Sealed {
            key_id: other.id().clone(),
            ..sealed
        };
        assert!(matches!(
            other.open(&ad(), &relabelled),
            Err(CryptoError::Tampered { .. })
        ));
    }

    #[test]
    fn any_changed_byte_is_detected() {
        let key = MasterKey::generate();
        let sealed = key.seal(&ad(), SECRET).unwrap();
        for i in 0..sealed.ciphertext.len() {
            let mut bad = sealed.clone();
            bad.ciphertext[i] ^= 0x01;
            assert!(key.open(&ad(), &bad).is_err(), "byte {i}");
        }
        let mut bad = sealed.clone();
        bad.nonce[0] ^= 0x80;
        assert!(key.open(&ad(), &bad).is_err());
        let mut short = sealed.clone();
        short.nonce.truncate(12);
        assert!(key.open(&ad(), &short).is_err());
        let mut cut = sealed;
        cut.ciphertext.truncate(4);
        assert!(key.open(&ad(), &cut).is_err());
    }

    #[test]
    fn errors_never_carry_plaintext() {
        let key = MasterKey::generate();
        let mut sealed = key.seal(&ad(), SECRET).unwrap();
        sealed.ciphertext[0] ^= 1;
        let err = key.open(&ad(), &sealed).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains(std::str::from_utf8(SECRET).unwrap()));
    }
}
