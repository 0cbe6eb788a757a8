use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A browser session's id: `s_` followed by 26 lowercase base32 characters
/// (128 random bits). Opaque to clients; unguessable, so ids leak nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

const PREFIX: &str = "s_";
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Why a string is not a [`SessionId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed session id")]
pub struct SessionIdError;

impl SessionId {
    /// A fresh random id.
    pub fn generate() -> Self {
        Self(random_id(PREFIX))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `prefix` + 26 base32 characters from 128 random bits (130 bits drawn, top two zero).
pub fn random_id(prefix: &str) -> String {
    let bytes: [u8; 16] = rand::random();
    let mut n = u128::from_be_bytes(bytes);
    let mut out = String::with_capacity(prefix.len() + 26);
    out.push_str(prefix);
    for _ in 0..26 {
        out.push(ALPHABET[(n & 31) as usize] as char);
        n >>= 5;
    }
    out
}

impl FromStr for SessionId {
    type Err = SessionIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let rest = s.strip_prefix(PREFIX).ok_or(SessionIdError)?;
        if rest.len() != 26 || !rest.bytes().all(|b| ALPHABET.contains(&b)) {
            return Err(SessionIdError);
        }
        Ok(Self(s.to_owned()))
    }
}

impl TryFrom<String> for SessionId {
    type Error = SessionIdError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = SessionId::generate();
        let b = SessionId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
        assert_eq!(a.as_str().len(), 28);
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "",
            "s_",
            "x_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            "s_AAAAAAAAAAAAAAAAAAAAAAAAAA",
            "s_aaaa",
            "s_aaaaaaaaaaaaaaaaaaaaaaaaa1",
            "s_aaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "s_../../../../etc/passwd00",
        ] {
            assert_eq!(bad.parse::<SessionId>(), Err(SessionIdError), "{bad:?}");
        }
    }
}
