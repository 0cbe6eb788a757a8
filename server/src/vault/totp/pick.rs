//! Choosing the seed for a page: among the tenant's seeds for the
//! session's granted domains that cover the page's host, the labelled one
//! or the only one (`PickError` says why none was), and marking its use.

use super::Seed;
use crate::domain::{TenantId, TotpId};
use crate::store::totp::TotpInfo;
use crate::time::now_ms;
use crate::vault::error::VaultError;
use crate::vault::service::Vault;

/// The seed chosen for a page, opened.
pub struct Picked {
    /// Its metadata.
    pub info: TotpInfo,
    /// Its secret and parameters (from the sealed copy).
    pub seed: Seed,
}

/// Why no seed was chosen for a page.
#[derive(Debug, thiserror::Error)]
pub enum PickError {
    /// No seed of a granted domain covers the page's host.
    #[error("no TOTP seed is stored for {host} among the session's domains")]
    NoSeed {
        /// The page's host.
        host: String,
    },
    /// Several seeds cover the host and no label was given.
    #[error("several TOTP seeds match {host}; pass label (one of: {})", .labels.join(", "))]
    Ambiguous {
        /// The page's host.
        host: String,
        /// Their labels.
        labels: Vec<String>,
    },
    /// No seed with that label covers the host.
    #[error("no TOTP seed labelled {label:?} for {host} (labels: {})", .labels.join(", "))]
    UnknownLabel {
        /// The label asked for.
        label: String,
        /// The page's host.
        host: String,
        /// The labels there are.
        labels: Vec<String>,
    },
    /// The vault failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
}

/// Whether `host` is `domain` or one of its subdomains.
pub fn covers(domain: &str, host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == domain
        || host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

impl Vault {
    /// The seed for a page of `host`: among the tenant's seeds for
    /// `domains` (the session's granted domains) that cover `host`, the
    /// one labelled `label`, or the only one.
    pub async fn totp_pick(
        &self,
        tenant: &TenantId,
        domains: &[String],
        host: &str,
        label: Option<&str>,
    ) -> Result<Picked, PickError> {
        let covering: Vec<String> = domains
            .iter()
            .filter(|d| covers(d, host))
            .cloned()
            .collect();
        let rows = self
            .store
            .totp_for_domains(tenant, &covering)
            .await
            .map_err(VaultError::Other)?;
        let labels = || {
            rows.iter()
                .map(|r| r.info.label.clone())
                .collect::<Vec<_>>()
        };
        let row = match label {
            Some(l) => rows
                .iter()
                .find(|r| r.info.label == l.trim())
                .ok_or_else(|| PickError::UnknownLabel {
                    label: l.chars().take(100).collect(),
                    host: host.into(),
                    labels: labels(),
                })?,
            None => match rows.as_slice() {
                [] => return Err(PickError::NoSeed { host: host.into() }),
                [one] => one,
                _ => {
                    return Err(PickError::Ambiguous {
                        host: host.into(),
                        labels: labels(),
                    });
                }
            },
        };
        let seed = self.open_totp(row)?;
        Ok(Picked {
            info: row.info.clone(),
            seed,
        })
    }

    /// Records that a code of `id` was typed.
    pub async fn totp_mark_used(&self, id: &TotpId) -> Result<(), VaultError> {
        Ok(self.store.totp_mark_used(id, now_ms()).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_covers_itself_and_its_subdomains_only() {
        assert!(covers("example.com", "example.com"));
        assert!(covers("example.com", "login.example.com"));
        assert!(covers("example.com", "Login.Example.com."));
        assert!(!covers("example.com", "evilexample.com"));
        assert!(!covers("example.com", "example.com.evil.net"));
        assert!(!covers("login.example.com", "example.com"));
        assert!(!covers("example.com", ""));
    }
}
