//! Logging in as a name that is not an enabled operator with a passkey
//! answers as a real operator's start does: request options with a fresh
//! challenge and credential ids, the same fields, policy and timeout. The
//! ids come from webauthn-rs's fake-credential generator (realistic counts
//! and lengths) keyed by a secret derived from the master key, so they are
//! the same on every replica and across restarts, and asking twice shows
//! the same "passkeys"; the finish then fails as a wrong passkey does.
//! Real options are stripped of transport hints (they would tell the two
//! apart, and browsers try every transport without them).

use anyhow::Context;
use webauthn_rs::fake::{FakePasskeyDistribution, WebauthnFakeCredentialGenerator};
use webauthn_rs::prelude::RequestChallengeResponse;
use webauthn_rs_proto::{
    AllowCredentials, PublicKeyCredentialRequestOptions, UserVerificationPolicy,
};

/// Makes decoy request options for names that are not operators.
pub(crate) struct Decoys {
    ids: WebauthnFakeCredentialGenerator<FakePasskeyDistribution>,
}

impl Decoys {
    /// Decoys under `key` (derived from the master key; random when none
    /// is known, as in a CLI command that never answers a login).
    pub(crate) fn new(key: Option<&[u8; 32]>) -> anyhow::Result<Self> {
        let random;
        let key = match key {
            Some(k) => &k[..],
            None => {
                random = rand::random::<[u8; 32]>();
                &random[..]
            }
        };
        let ids =
            WebauthnFakeCredentialGenerator::new(key).context("cannot key the login decoys")?;
        Ok(Self { ids })
    }

    /// The stable credential ids shown for `name` (at least one: every
    /// operator who can log in has a passkey).
    fn ids_for(&self, name: &str) -> Vec<Vec<u8>> {
        let name = name.to_lowercase();
        let mut seed = name.clone();
        for _ in 0..8 {
            let ids = self.ids.generate(seed.as_bytes()).unwrap_or_default();
            if !ids.is_empty() {
                return ids.into_iter().map(|id| id.to_vec()).collect();
            }
            seed.push('\0');
        }
        vec![
            self.ids
                .generate(b"\0")
                .unwrap_or_default()
                .first()
                .map_or_else(|| name.as_bytes().to_vec(), |id| id.to_vec()),
        ]
    }

    /// Request options for `name` as a real start makes them (relying
    /// party `rp_id`, webauthn-rs's default timeout, a 32-byte challenge,
    /// user verification required), with the name's decoy ids.
    pub(crate) fn options(&self, name: &str, rp_id: &str) -> RequestChallengeResponse {
        let challenge: [u8; 32] = rand::random();
        RequestChallengeResponse {
            public_key: PublicKeyCredentialRequestOptions {
                challenge: challenge.to_vec(),
                timeout: u32::try_from(webauthn_rs::DEFAULT_AUTHENTICATOR_TIMEOUT.as_millis()).ok(),
                rp_id: rp_id.to_owned(),
                allow_credentials: self
                    .ids_for(name)
                    .into_iter()
                    .map(|id| AllowCredentials {
                        type_: "public-key".into(),
                        id,
                        transports: None,
                    })
                    .collect(),
                user_verification: UserVerificationPolicy::Required,
                hints: None,
                extensions: None,
            },
            mediation: None,
        }
    }
}

/// A real start's options without transport hints (see the module).
pub(crate) fn plain(mut rcr: RequestChallengeResponse) -> RequestChallengeResponse {
    for c in &mut rcr.public_key.allow_credentials {
        c.transports = None;
    }
    rcr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_names_decoy_is_stable_per_key_and_differs_between_names_and_keys() {
        let key = [7u8; 32];
        let (a, b) = (
            Decoys::new(Some(&key)).unwrap(),
            Decoys::new(Some(&key)).unwrap(),
        );
        assert_eq!(a.ids_for("nobody"), b.ids_for("Nobody"));
        assert_ne!(a.ids_for("nobody"), a.ids_for("somebody"));
        assert_ne!(
            a.ids_for("nobody"),
            Decoys::new(None).unwrap().ids_for("nobody")
        );
        for n in 0..200 {
            assert!(!a.ids_for(&format!("user{n}")).is_empty());
        }
        let one = a.options("nobody", "cordon.example");
        let two = a.options("nobody", "cordon.example");
        assert_ne!(one.public_key.challenge, two.public_key.challenge);
        assert_eq!(one.public_key.challenge.len(), 32);
        let ids = |r: &RequestChallengeResponse| {
            r.public_key
                .allow_credentials
                .iter()
                .map(|c| c.id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&one), ids(&two));
        assert_eq!(one.public_key.rp_id, "cordon.example");
        assert_eq!(one.public_key.timeout, Some(300_000));
    }
}
