//! Operators of the dashboard: accounts and roles, passkeys (webauthn-rs;
//! no passwords anywhere), one-time enrollment links, dashboard sessions
//! (tower-sessions in the database) and the middleware that puts the
//! logged-in operator into each request.
//!
//! - `mod.rs`: the [`Auth`] service the CLI, the ceremony endpoints and the
//!   dashboard's backend call; every change is audited before it is made.
//!   Its methods live by concern: `enroll.rs` (enrollment links, the first
//!   admin's), `operators.rs` (accounts, scopes, disabling, refusals),
//!   `passkeys.rs` (registering and removing passkeys, `Ceremony`),
//!   `login.rs` (logging in, re-authenticating); `error.rs` (`AuthError`).
//! - `session_store.rs`: tower-sessions records in `dashboard_sessions`.
//! - `middleware.rs`: who is asking; log-in redirects; idle and absolute expiry.
//! - `routes.rs`: the passkey ceremonies under `/ui/auth/`.

mod decoy;
mod enroll;
mod error;
mod login;
pub mod middleware;
mod operators;
mod passkeys;
pub mod routes;
mod session_store;
pub mod settings;
mod throttle;

use crate::fix::WithFix;
use std::sync::Arc;

use webauthn_rs::prelude::{Url, Webauthn, WebauthnBuilder};

use crate::audit::NewEvent;
use crate::store::Store;

pub use enroll::{FirstStart, Invitation};
pub use error::AuthError;
pub(crate) use passkeys::Ceremony;
pub use session_store::DbSessionStore;

/// How long an enrollment link works.
pub const ENROLL_TTL_MS: i64 = 60 * 60 * 1000;
/// How long a passkey ceremony may take between its two steps.
const CEREMONY_TTL_MS: i64 = 5 * 60 * 1000;
/// The longest operator or passkey name, in characters.
pub const MAX_NAME: usize = 64;

/// The operators service; cheap to clone.
#[derive(Clone)]
pub struct Auth(Arc<Inner>);

struct Inner {
    store: Store,
    webauthn: Webauthn,
    public_url: Url,
    /// Login options for names that are not operators.
    decoys: decoy::Decoys,
    /// Bounds on the ceremony calls anyone may make.
    throttle: throttle::Throttle,
}

fn checked_name(field: &'static str, name: &str) -> Result<String, AuthError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(|c| c.is_control()) {
        return Err(AuthError::Invalid {
            field,
            message: format!("1 to {MAX_NAME} characters, no control characters"),
        });
    }
    Ok(name.to_owned())
}

/// Operator login names: letters, digits, `.`, `_`, `-`, `@`.
fn checked_login(name: &str) -> Result<String, AuthError> {
    let name = checked_name("name", name)?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err(AuthError::Invalid {
            field: "name",
            message: "letters, digits, '.', '_', '-' and '@' only".into(),
        });
    }
    Ok(name)
}

impl Auth {
    /// The service for the dashboard at `public_url`: its host is the
    /// WebAuthn relying-party id, its origin the only one accepted.
    /// `decoy_key` keys the login options shown for names that are not
    /// operators (derived from the master key, so every replica shows the
    /// same; `None`: random, for a command that answers no login).
    pub fn new(
        store: Store,
        public_url: &Url,
        decoy_key: Option<&[u8; 32]>,
    ) -> anyhow::Result<Self> {
        let host = public_url
            .host_str()
            .ok_or_else(|| anyhow::anyhow!("public_url: has no host"))?;
        if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
            return Err(anyhow::anyhow!(
                "public_url: {public_url} names an IP address, and passkeys are bound to a host name: operators could not log in"
            ))
            .fix(format!(
                "set public_url to the address operators type, with a host name: \
                 http://localhost:{} on this machine, or a DNS name (over https when bind is not \
                 loopback)",
                public_url.port_or_known_default().unwrap_or(8080)
            ));
        }
        let webauthn = WebauthnBuilder::new(host, public_url)
            .map_err(|e| anyhow::anyhow!("public_url: not usable for passkeys: {e}"))?
            .rp_name("Cordon")
            .build()
            .map_err(|e| anyhow::anyhow!("public_url: not usable for passkeys: {e}"))?;
        Ok(Self(Arc::new(Inner {
            store,
            webauthn,
            public_url: public_url.clone(),
            decoys: decoy::Decoys::new(decoy_key)?,
            throttle: throttle::Throttle::default(),
        })))
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    /// The bounds on the passkey calls anyone may make.
    pub(crate) fn throttle(&self) -> &throttle::Throttle {
        &self.0.throttle
    }

    /// The dashboard's URL, whose host passkeys are bound to.
    pub fn public_url(&self) -> &Url {
        &self.0.public_url
    }

    async fn audit(&self, event: NewEvent) -> Result<(), AuthError> {
        self.store().audit_append(event).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_names_are_bounded_and_plain() {
        assert_eq!(checked_login(" alice ").unwrap(), "alice");
        assert!(checked_login("alice@example.com").is_ok());
        for bad in ["", "   ", "a b", "al\u{7}ice", "<script>", &"x".repeat(65)] {
            assert!(checked_login(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn passkey_names_may_hold_spaces_but_no_control_characters() {
        assert_eq!(
            checked_name("passkey_name", "Work laptop").unwrap(),
            "Work laptop"
        );
        assert!(checked_name("passkey_name", "tab\there").is_err());
    }
}
