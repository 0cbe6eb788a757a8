//! Random ids and secret tokens, in one place: each kind's prefix, how ids
//! are drawn, and how tokens are hashed for storage.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Sessions (`s_…`).
pub const SESSION: &str = "s_";
/// Sandboxes (`b_…`).
pub const SANDBOX: &str = "b_";
/// Tasks (`t_…`).
pub const TASK: &str = "t_";
/// Grant requests (`gr_…`).
pub const GRANT_REQUEST: &str = "gr_";
/// Grant tokens' public ids (`gt_…`, the "jti").
pub const GRANT_TOKEN_ID: &str = "gt_";
/// API keys' public ids (`k_…`).
pub const API_KEY: &str = "k_";
/// Stored credentials (`v_…`).
pub const CREDENTIAL: &str = "v_";
/// Stored TOTP seeds (`tp_…`).
pub const TOTP: &str = "tp_";
/// Live links' public ids (`ll_…`), never the link's token.
pub const LIVE_LINK: &str = "ll_";
/// Dashboard operators (`op_…`).
pub const OPERATOR: &str = "op_";
/// Operators' passkeys (`pk_…`).
pub const PASSKEY: &str = "pk_";
/// Enrollment links (`en_…`).
pub const ENROLLMENT: &str = "en_";
/// Pending approvals of the risk gate (`apr_…`).
pub const APPROVAL: &str = "apr_";
/// The deployment, drawn by its first replica (`dep…`, no underscore).
pub const DEPLOYMENT: &str = "dep";
/// One run of a replica's process (`inst…`, no underscore).
pub const INSTANCE: &str = "inst";

/// The secret grant tokens (`cgt_…`), recognisable when leaked.
pub const GRANT_TOKEN_SECRET: &str = "cgt_";
/// The secret API keys (`cordon_…`), recognisable when leaked.
pub const API_KEY_SECRET: &str = "cordon_";
/// The secret of an enrollment link (`cen_…`).
pub const ENROLLMENT_SECRET: &str = "cen_";

/// The characters of an id after its prefix (lowercase base32).
pub const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Characters of an id after its prefix.
pub const ID_CHARS: usize = 26;

/// `prefix` + 26 base32 characters from 128 random bits (130 bits drawn,
/// top two zero): unguessable, so an id leaks nothing.
pub fn random_id(prefix: &str) -> String {
    let bytes: [u8; 16] = rand::random();
    let mut n = u128::from_be_bytes(bytes);
    let mut out = String::with_capacity(prefix.len() + ID_CHARS);
    out.push_str(prefix);
    for _ in 0..ID_CHARS {
        out.push(ALPHABET[(n & 31) as usize] as char);
        n >>= 5;
    }
    out
}

/// Whether `s` is an id [`random_id`] could have drawn with `prefix`.
pub fn is_random_id(prefix: &str, s: &str) -> bool {
    s.strip_prefix(prefix)
        .is_some_and(|rest| rest.len() == ID_CHARS && rest.bytes().all(|b| ALPHABET.contains(&b)))
}

/// A secret token: `prefix` + 256 random bits, base64url. Shown once; only
/// its [`token_hash`] is stored.
pub fn secret_token(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
    )
}

/// Hex SHA-256 of a secret token. Tokens carry 256 random bits, so a plain
/// hash is enough: there is nothing to brute-force.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_ids_have_their_prefix_and_shape_and_differ() {
        let a = random_id(GRANT_REQUEST);
        assert!(is_random_id(GRANT_REQUEST, &a), "{a}");
        assert!(!is_random_id(SESSION, &a));
        assert_ne!(a, random_id(GRANT_REQUEST));
        assert!(!is_random_id(SESSION, "s_AAAAAAAAAAAAAAAAAAAAAAAAAA"));
        assert!(!is_random_id(SESSION, "s_aaaa"));
    }

    #[test]
    fn tokens_are_long_and_only_their_hash_is_kept() {
        let t = secret_token(GRANT_TOKEN_SECRET);
        assert!(t.starts_with("cgt_") && t.len() == 4 + 43, "{t}");
        let h = token_hash(&t);
        assert_eq!(h.len(), 64);
        assert!(!h.contains(&t[4..]));
        assert_eq!(h, token_hash(&t));
    }
}
