//! The master key and its id.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// Length of a master key in bytes.
pub const KEY_LEN: usize = 32;

/// A 256-bit master key. Its bytes are wiped on drop and never shown: `Debug`
/// prints the key id only.
#[derive(Clone)]
pub struct MasterKey {
    id: KeyId,
    bytes: Zeroizing<[u8; KEY_LEN]>,
}

impl MasterKey {
    /// A fresh random key (from the thread's CSPRNG, seeded by the OS).
    pub fn generate() -> Self {
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        rand::rng().fill_bytes(&mut bytes[..]);
        Self::from_bytes(bytes)
    }

    /// Parses a key written as 64 hex digits or as base64 (standard or
    /// URL-safe, padded or not) of 32 bytes; surrounding whitespace is
    /// ignored. `None` says only that it is malformed, never why, so no part
    /// of a near-miss key reaches an error message.
    pub fn from_text(text: &str) -> Option<Self> {
        let text = text.trim();
        let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
        if text.len() == 2 * KEY_LEN && hex::decode_to_slice(text, &mut bytes[..]).is_ok() {
            return Some(Self::from_bytes(bytes));
        }
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        for engine in engines {
            if let Ok(decoded) = engine.decode(text).map(Zeroizing::new)
                && decoded.len() == KEY_LEN
            {
                bytes.copy_from_slice(&decoded);
                return Some(Self::from_bytes(bytes));
            }
        }
        None
    }

    fn from_bytes(bytes: Zeroizing<[u8; KEY_LEN]>) -> Self {
        let digest = Sha256::digest(&bytes[..]);
        Self {
            id: KeyId(hex::encode(&digest[..8])),
            bytes,
        }
    }

    /// The key's id, stored next to every ciphertext it seals.
    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The key as 64 hex digits, for writing a key file.
    pub(crate) fn to_text(&self) -> Zeroizing<String> {
        Zeroizing::new(hex::encode(&self.bytes[..]))
    }

    pub(super) fn bytes(&self) -> &[u8; KEY_LEN] {
        &self.bytes
    }

    /// A secret for `purpose`, derived from the key (HMAC-SHA-256 of the
    /// purpose under it): the same on every replica sharing the key, and
    /// telling nothing about the key itself.
    pub fn derive(&self, purpose: &str) -> Zeroizing<[u8; 32]> {
        use hmac::{Hmac, Mac};
        let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.bytes[..])
            .expect("HMAC takes any key length");
        m.update(purpose.as_bytes());
        Zeroizing::new(m.finalize().into_bytes().into())
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A key's id: the first 8 bytes of its SHA-256, as 16 lowercase hex digits.
/// Not secret: it names a key without revealing it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyId(String);

/// Why a string is not a [`KeyId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed key id (expected 16 lowercase hex digits)")]
pub struct KeyIdError;

impl KeyId {
    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for KeyId {
    type Err = KeyIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = s.len() == 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(KeyIdError)
        }
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_from_hex_and_base64_with_the_same_id() {
        let key = MasterKey::generate();
        let hex_text = key.to_text();
        let b64 = base64::engine::general_purpose::STANDARD.encode(key.bytes());
        let from_hex = MasterKey::from_text(&format!("  {}\n", *hex_text)).unwrap();
        let from_b64 = MasterKey::from_text(&b64).unwrap();
        assert_eq!(from_hex.id(), key.id());
        assert_eq!(from_b64.id(), key.id());
        assert_eq!(key.id().as_str().len(), 16);
        assert!(key.id().as_str().parse::<KeyId>().is_ok());
    }

    #[test]
    fn the_id_is_the_start_of_the_keys_sha256() {
        let key = MasterKey::from_text(&"00".repeat(32)).unwrap();
        let expected = &hex::encode(Sha256::digest([0u8; 32]))[..16];
        assert_eq!(key.id().as_str(), expected);
    }

    #[test]
    fn short_long_and_garbled_keys_are_refused() {
        for bad in [
            "",
            "abcd",
            &"0".repeat(63),
            &"0".repeat(66),
            &"zz".repeat(32),
            "not base64 at all!",
        ] {
            assert!(MasterKey::from_text(bad).is_none(), "{bad:?}");
        }
        let sixteen = base64::engine::general_purpose::STANDARD.encode([7u8; 16]);
        assert!(MasterKey::from_text(&sixteen).is_none());
    }

    #[test]
    fn debug_shows_the_id_and_not_the_key() {
        let key = MasterKey::generate();
        let shown = format!("{key:?}");
        assert!(shown.contains(key.id().as_str()));
        assert!(!shown.contains(key.to_text().as_str()));
    }

    #[test]
    fn key_ids_are_parsed_strictly() {
        assert!("0123456789abcdef".parse::<KeyId>().is_ok());
        for bad in [
            "",
            "0123456789ABCDEF",
            "0123456789abcde",
            "0123456789abcdeg",
        ] {
            assert_eq!(bad.parse::<KeyId>(), Err(KeyIdError), "{bad:?}");
        }
    }
}
