//! Second-factor seeds (TOTP, RFC 6238) in the vault: entered by an
//! operator (an `otpauth://` URI, a base32 secret or a QR code image),
//! sealed like cookies, listed without the secret, and turned into a code
//! only to be typed into a page of the seed's domain (`type_totp`, the live
//! view's "Type the code"). No code, secret or remaining validity leaves
//! the control plane any other way; export gives the URI back to an
//! operator with a fresh passkey check.
pub mod code;
mod pick;
pub mod qr;
pub mod seed;

use serde_json::json;
use zeroize::Zeroizing;

pub use code::{Code, MIN_VALIDITY_S, Plan, code_at, plan};
pub use pick::{PickError, Picked, covers};
pub use seed::{Algorithm, FieldError, Params, Seed};

use super::domain::Domain;
use super::error::VaultError;
use super::service::Vault;
use crate::audit::{Actor, NewEvent};
use crate::crypto::AssociatedData;
use crate::domain::{TenantId, TotpId};
pub use crate::store::totp::TotpInfo;
use crate::store::totp::TotpRow;
use crate::time::now_ms;

/// How a seed is entered.
#[derive(Debug)]
pub enum SeedSource<'a> {
    /// An `otpauth://totp/…` URI.
    Uri(&'a str),
    /// A base32 secret with its parameters.
    Base32(&'a str, Params),
    /// A PNG or JPEG holding the URI as a QR code.
    QrImage(&'a [u8]),
}

impl SeedSource<'_> {
    /// The seed it holds, or the field that is wrong.
    pub fn seed(&self) -> Result<Seed, FieldError> {
        match self {
            Self::Uri(uri) => Seed::from_uri(uri),
            Self::Base32(secret, params) => Seed::from_base32(secret, *params),
            Self::QrImage(bytes) => Seed::from_uri(&qr::decode(bytes)?),
        }
    }

    fn as_str(&self) -> &'static str {
        match self {
            Self::Uri(_) => "uri",
            Self::Base32(..) => "secret",
            Self::QrImage(_) => "qr_image",
        }
    }
}

fn ad_of(info: &TotpInfo) -> AssociatedData {
    AssociatedData::record(&info.tenant_id, &info.domain, &info.id)
}

impl Vault {
    /// Stores a seed for `tenant` and `domain` under `label`, audited
    /// (`vault.totp.add`: domain, label, parameters and how it was entered;
    /// never the secret). Refused with the field at fault for bad input,
    /// and when the label is taken for that domain.
    pub async fn totp_add(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        domain: &Domain,
        label: &str,
        source: SeedSource<'_>,
    ) -> Result<TotpInfo, VaultError> {
        let label = seed::label(label).map_err(VaultError::Totp)?;
        let seed = source.seed().map_err(VaultError::Totp)?;
        self.require_tenant(tenant).await?;
        let info = TotpInfo {
            id: TotpId::generate().to_string(),
            tenant_id: tenant.to_string(),
            domain: domain.to_string(),
            label: label.clone(),
            algorithm: seed.params.algorithm.as_str().into(),
            digits: i64::from(seed.params.digits),
            period: i64::from(seed.params.period),
            key_id: self.key.id().as_str().into(),
            created_at: now_ms(),
            last_used_at: None,
        };
        let params = json!({
            "totp": info.id,
            "domain": info.domain,
            "label": info.label,
            "algorithm": info.algorithm,
            "digits": info.digits,
            "period": info.period,
            "from": source.as_str(),
        });
        self.audit(
            NewEvent::new(actor.clone(), "vault.totp.add")
                .tenant(tenant)
                .params(params.clone())
                .outcome("requested"),
        )
        .await?;
        let sealed = self.key.seal(&ad_of(&info), &seed.to_plaintext())?;
        let row = TotpRow {
            info: info.clone(),
            sealed,
        };
        if !self.store.totp_insert(&row).await? {
            self.audit(
                NewEvent::new(actor.clone(), "vault.totp.add")
                    .tenant(tenant)
                    .params(params)
                    .outcome("refused: label taken"),
            )
            .await?;
            return Err(VaultError::TotpLabelTaken {
                domain: domain.clone(),
                label,
            });
        }
        self.audit(
            NewEvent::new(actor.clone(), "vault.totp.add")
                .tenant(tenant)
                .params(params),
        )
        .await?;
        Ok(info)
    }

    /// The tenant's seeds (metadata only).
    pub async fn totp_list(&self, tenant: &TenantId) -> Result<Vec<TotpInfo>, VaultError> {
        self.require_tenant(tenant).await?;
        Ok(self.store.totp_list(Some(tenant)).await?)
    }

    /// Every tenant's seeds (metadata only).
    pub async fn totp_list_all(&self) -> Result<Vec<TotpInfo>, VaultError> {
        Ok(self.store.totp_list(None).await?)
    }

    /// Seed id `id` of `tenant` as an edge gives it: a malformed one is
    /// `TotpNotFound`, after the tenant's own check, as an unknown id is.
    pub async fn totp_id(&self, tenant: &TenantId, id: &str) -> Result<TotpId, VaultError> {
        match id.parse() {
            Ok(id) => Ok(id),
            Err(_) => {
                self.require_tenant(tenant).await?;
                Err(VaultError::TotpNotFound(id.chars().take(64).collect()))
            }
        }
    }

    /// Deletes one of the tenant's seeds, audited (`vault.totp.delete`).
    pub async fn totp_delete(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        id: &TotpId,
    ) -> Result<TotpInfo, VaultError> {
        self.requested(actor, tenant, id, "vault.totp.delete")
            .await?;
        self.store
            .totp_delete(tenant, id)
            .await?
            .ok_or_else(|| VaultError::TotpNotFound(id.to_string()))
    }

    /// One seed as its `otpauth://` URI, for an operator moving it to
    /// another authenticator; audited (`vault.totp.export`) before anything
    /// is decrypted. Callers require a fresh passkey check (as for cookies).
    pub async fn totp_export(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        id: &TotpId,
    ) -> Result<(TotpInfo, Zeroizing<String>), VaultError> {
        let row = self
            .requested(actor, tenant, id, "vault.totp.export")
            .await?;
        let seed = self.open_totp(&row)?;
        let secret = Zeroizing::new(base32_encode(seed.secret()));
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let uri = Zeroizing::new(format!(
            "otpauth://totp/{}:{}?secret={}&issuer={}&algorithm={}&digits={}&period={}",
            enc(&row.info.domain),
            enc(&row.info.label),
            &*secret,
            enc(&row.info.domain),
            seed.params.algorithm,
            seed.params.digits,
            seed.params.period
        ));
        Ok((row.info, uri))
    }

    /// The tenant's seed `id`, once `action` on it is audited as requested
    /// (by id, domain and label); `TotpNotFound` if there is none.
    async fn requested(
        &self,
        actor: &Actor,
        tenant: &TenantId,
        id: &TotpId,
        action: &str,
    ) -> Result<TotpRow, VaultError> {
        self.require_tenant(tenant).await?;
        let row = self
            .store
            .totp_get(tenant, id)
            .await?
            .ok_or_else(|| VaultError::TotpNotFound(id.to_string()))?;
        self.audit(
            NewEvent::new(actor.clone(), action)
                .tenant(tenant)
                .params(json!({ "totp": row.info.id, "domain": row.info.domain, "label": row.info.label }))
                .outcome("requested"),
        )
        .await?;
        Ok(row)
    }

    fn open_totp(&self, row: &TotpRow) -> Result<Seed, VaultError> {
        let plaintext = self.key.open(&ad_of(&row.info), &row.sealed)?;
        Ok(Seed::from_plaintext(&plaintext)?)
    }
}

/// RFC 4648 base32 without padding (what authenticator apps read).
fn base32_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn base32_encoding_round_trips_through_the_parser() {
        for len in [10usize, 16, 20, 32, 64] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let enc = base32_encode(&bytes);
            let seed = Seed::from_base32(&enc, Params::default()).unwrap();
            assert_eq!(seed.secret(), bytes.as_slice(), "{len}");
        }
        assert_eq!(base32_encode(b"Hello!\xde\xad\xbe\xef"), "JBSWY3DPEHPK3PXP");
    }
}
