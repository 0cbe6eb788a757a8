//! What a credential's ciphertext decrypts to: a storageState-shaped JSON
//! object `{"cookies": […], "origins": […]}`. Rows sealed before the vault
//! held localStorage decrypt to a bare cookie array, read as cookies only.

use serde::Deserialize;
use zeroize::Zeroizing;

use crate::domain::{Cookie, Origin, StorageState};

/// The two stored shapes, told apart by JSON type.
#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    /// The current form.
    State(StorageState),
    /// The first form: cookies only.
    Cookies(Vec<Cookie>),
}

/// The plaintext to seal for `cookies` and `origins`; wiped when dropped.
pub(super) fn encode(
    cookies: &[Cookie],
    origins: &[Origin],
) -> serde_json::Result<Zeroizing<Vec<u8>>> {
    #[derive(serde::Serialize)]
    struct Borrowed<'a> {
        cookies: &'a [Cookie],
        origins: &'a [Origin],
    }
    serde_json::to_vec(&Borrowed { cookies, origins }).map(Zeroizing::new)
}

/// Reads a decrypted plaintext of either form. The error says nothing of
/// the contents (serde's messages can quote them).
pub(super) fn decode(bytes: &[u8]) -> Result<StorageState, Malformed> {
    match serde_json::from_slice(bytes) {
        Ok(Stored::State(state)) => Ok(state),
        Ok(Stored::Cookies(cookies)) => Ok(StorageState {
            cookies,
            origins: Vec::new(),
        }),
        Err(_) => Err(Malformed),
    }
}

/// A plaintext that is neither stored form.
#[derive(Debug)]
pub(super) struct Malformed;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vault::StorageItem;

    const CANARY: &str = "canary-pl41ntext";

    fn cookie() -> Cookie {
        serde_json::from_value(serde_json::json!({
            "name": "sid", "value": CANARY, "domain": ".example.com", "path": "/",
            "expires": -1.0, "httpOnly": true, "secure": true, "sameSite": "Lax"
        }))
        .unwrap()
    }

    #[test]
    fn the_first_form_a_cookie_array_still_opens_as_cookies_only() {
        let old = serde_json::to_vec(&vec![cookie()]).unwrap();
        let state = decode(&old).unwrap();
        assert_eq!(state.cookies, vec![cookie()]);
        assert!(state.origins.is_empty());
    }

    #[test]
    fn cookies_and_local_storage_round_trip_in_the_storage_state_shape() {
        let origins = vec![Origin {
            origin: "https://app.example.com".into(),
            local_storage: vec![StorageItem {
                name: "token".into(),
                value: CANARY.into(),
            }],
        }];
        let bytes = encode(&[cookie()], &origins).unwrap();
        let json: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(json["origins"][0]["origin"], "https://app.example.com");
        assert_eq!(json["origins"][0]["localStorage"][0]["name"], "token");
        let state = decode(&bytes).unwrap();
        assert_eq!(state.cookies, vec![cookie()]);
        assert_eq!(state.origins, origins);
    }

    #[test]
    fn anything_else_is_malformed() {
        for bad in [&b"{\"x\":1}"[..], b"\"text\"", b"{"] {
            assert!(decode(bad).is_err());
        }
    }
}
