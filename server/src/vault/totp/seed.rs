//! A second-factor seed as it is entered: an `otpauth://totp/…` URI, a
//! base32 secret with its parameters, or (through [`super::qr`]) a QR
//! code's URI. Every refusal names its field; none repeats the secret.

use anyhow::Context;
use std::fmt;
use std::str::FromStr;

use zeroize::Zeroizing;

/// Longest `otpauth://` URI accepted (bytes).
pub const MAX_URI_BYTES: usize = 4096;
/// Shortest secret accepted: 80 bits (16 base32 characters), what most
/// sites issue; RFC 4226 recommends 160.
pub const MIN_SECRET_BYTES: usize = 10;
/// Longest secret accepted (512 bits).
pub const MAX_SECRET_BYTES: usize = 64;
/// Longest label (characters).
pub const MAX_LABEL_CHARS: usize = 100;
/// Digits a code may have.
pub const DIGITS: std::ops::RangeInclusive<u8> = 6..=8;
/// A code's period in seconds. Below 10 s a code could not be typed with
/// [`super::code::MIN_VALIDITY_S`] left in most steps.
pub const PERIOD_S: std::ops::RangeInclusive<u32> = 10..=300;

/// The HMAC behind the codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// HMAC-SHA-1 (the default and most common).
    #[serde(rename = "SHA1")]
    Sha1,
    /// HMAC-SHA-256.
    #[serde(rename = "SHA256")]
    Sha256,
    /// HMAC-SHA-512.
    #[serde(rename = "SHA512")]
    Sha512,
}

impl Algorithm {
    /// The stored and shown form (`SHA1`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
            Self::Sha512 => "SHA512",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Algorithm {
    type Err = FieldError;

    fn from_str(s: &str) -> Result<Self, FieldError> {
        match s.trim().to_ascii_uppercase().replace('-', "").as_str() {
            "SHA1" => Ok(Self::Sha1),
            "SHA256" => Ok(Self::Sha256),
            "SHA512" => Ok(Self::Sha512),
            _ => Err(FieldError::new(
                "algorithm",
                "must be SHA1, SHA256 or SHA512",
            )),
        }
    }
}

/// RFC 6238's parameters of a seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// The HMAC.
    pub algorithm: Algorithm,
    /// 6 to 8.
    pub digits: u8,
    /// Seconds a code lasts (10–300).
    pub period: u32,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::Sha1,
            digits: 6,
            period: 30,
        }
    }
}

impl Params {
    /// Checks the ranges.
    pub fn checked(self) -> Result<Self, FieldError> {
        if !DIGITS.contains(&self.digits) {
            return Err(FieldError::new("digits", "must be 6, 7 or 8"));
        }
        if !PERIOD_S.contains(&self.period) {
            return Err(FieldError::new(
                "period",
                format!("must be {} to {} seconds", PERIOD_S.start(), PERIOD_S.end()),
            ));
        }
        Ok(self)
    }
}

/// Why an entered seed was refused: the field and what is wrong with it.
/// Never contains the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// `uri`, `secret`, `digits`, `period`, `algorithm`, `label`, `image`, `domain`.
    pub field: &'static str,
    /// What is wrong, for a person.
    pub message: String,
}

impl FieldError {
    /// A refusal of `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// A seed ready to be sealed: the secret's bytes (wiped when dropped) and
/// its parameters.
#[derive(Clone)]
pub struct Seed {
    secret: Zeroizing<Vec<u8>>,
    /// Its parameters.
    pub params: Params,
    /// The issuer named by the URI, if any (shown to help choose a label).
    pub issuer: Option<String>,
}

impl fmt::Debug for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Seed")
            .field("params", &self.params)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

/// A label: 1–[`MAX_LABEL_CHARS`] characters, no control characters,
/// trimmed.
pub fn label(raw: &str) -> Result<String, FieldError> {
    let t = raw.trim();
    if t.is_empty() {
        return Err(FieldError::new("label", "must not be empty"));
    }
    if t.chars().count() > MAX_LABEL_CHARS {
        return Err(FieldError::new(
            "label",
            format!("must be at most {MAX_LABEL_CHARS} characters"),
        ));
    }
    if t.chars().any(char::is_control) {
        return Err(FieldError::new(
            "label",
            "must not contain control characters",
        ));
    }
    Ok(t.to_owned())
}

impl Seed {
    /// A seed from its bytes (checked for length) and parameters.
    pub fn new(secret: Zeroizing<Vec<u8>>, params: Params) -> Result<Self, FieldError> {
        if secret.len() < MIN_SECRET_BYTES || secret.len() > MAX_SECRET_BYTES {
            return Err(FieldError::new(
                "secret",
                format!(
                    "must decode to {MIN_SECRET_BYTES}–{MAX_SECRET_BYTES} bytes \
                     (16–103 base32 characters); this one decodes to {}",
                    secret.len()
                ),
            ));
        }
        Ok(Self {
            secret,
            params: params.checked()?,
            issuer: None,
        })
    }

    /// A base32 secret (RFC 4648; case, spaces, dashes and padding are
    /// ignored, as authenticator apps do) with `params`.
    pub fn from_base32(secret: &str, params: Params) -> Result<Self, FieldError> {
        Self::new(base32(secret)?, params)
    }

    /// An `otpauth://totp/<label>?secret=…[&issuer=…][&algorithm=…]
    /// [&digits=…][&period=…]` URI (Google Authenticator's key URI format).
    pub fn from_uri(uri: &str) -> Result<Self, FieldError> {
        let uri = uri.trim();
        if uri.len() > MAX_URI_BYTES {
            return Err(FieldError::new(
                "uri",
                format!("must be at most {MAX_URI_BYTES} bytes"),
            ));
        }
        // Never echo the URI: it holds the secret.
        let parsed = url::Url::parse(uri)
            .map_err(|_| FieldError::new("uri", "is not a URI (expected otpauth://totp/…)"))?;
        if parsed.scheme() != "otpauth" {
            return Err(FieldError::new("uri", "must start with otpauth://"));
        }
        match parsed.host_str().map(str::to_ascii_lowercase).as_deref() {
            Some("totp") => {}
            Some("hotp") => {
                return Err(FieldError::new(
                    "uri",
                    "is a counter-based (HOTP) seed; only time-based (TOTP) seeds are supported",
                ));
            }
            _ => return Err(FieldError::new("uri", "must be otpauth://totp/…")),
        }
        let mut secret = None;
        let mut params = Params::default();
        let mut issuer = None;
        for (k, v) in parsed.query_pairs() {
            match k.to_ascii_lowercase().as_str() {
                "secret" => secret = Some(Zeroizing::new(v.into_owned())),
                "algorithm" => params.algorithm = v.parse()?,
                "digits" => {
                    params.digits = v
                        .parse()
                        .map_err(|_| FieldError::new("digits", "must be 6, 7 or 8"))?;
                }
                "period" => {
                    params.period = v.parse().map_err(|_| {
                        FieldError::new(
                            "period",
                            format!("must be {} to {} seconds", PERIOD_S.start(), PERIOD_S.end()),
                        )
                    })?;
                }
                "issuer" => issuer = Some(v.chars().take(MAX_LABEL_CHARS).collect()),
                _ => {}
            }
        }
        let secret = secret.ok_or_else(|| FieldError::new("secret", "the URI has no secret"))?;
        let mut seed = Self::from_base32(&secret, params)?;
        seed.issuer = issuer.filter(|s: &String| !s.trim().is_empty());
        Ok(seed)
    }

    /// The secret's bytes.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// The sealed form: parameters and secret together, so the parameters
    /// used for codes are the ones sealed (the clear copies are for lists).
    pub(crate) fn to_plaintext(&self) -> Zeroizing<Vec<u8>> {
        let secret = Zeroizing::new(hex::encode(&*self.secret));
        Zeroizing::new(
            serde_json::to_vec(&serde_json::json!({
                "v": 1,
                "secret_hex": &*secret,
                "params": self.params,
            }))
            .unwrap_or_default(),
        )
    }

    /// Reads [`Self::to_plaintext`]'s form back.
    pub(crate) fn from_plaintext(bytes: &[u8]) -> anyhow::Result<Self> {
        #[derive(serde::Deserialize)]
        struct Stored {
            secret_hex: Zeroizing<String>,
            params: Params,
        }
        let stored: Stored = serde_json::from_slice(bytes)
            .map_err(|_| anyhow::anyhow!("a stored TOTP seed is malformed"))?;
        let secret = Zeroizing::new(
            hex::decode(stored.secret_hex.as_bytes())
                .map_err(|_| anyhow::anyhow!("a stored TOTP seed is malformed"))?,
        );
        Self::new(secret, stored.params).context("a stored TOTP seed")
    }
}

/// Decodes RFC 4648 base32 leniently (case, spaces, dashes, padding).
fn base32(raw: &str) -> Result<Zeroizing<Vec<u8>>, FieldError> {
    let clean: Zeroizing<String> = Zeroizing::new(
        raw.chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .collect::<String>()
            .trim_end_matches('=')
            .to_ascii_uppercase(),
    );
    if clean.is_empty() {
        return Err(FieldError::new("secret", "must not be empty"));
    }
    if clean.len() > MAX_SECRET_BYTES * 8 / 5 + 1 {
        return Err(FieldError::new(
            "secret",
            format!("must decode to at most {MAX_SECRET_BYTES} bytes"),
        ));
    }
    let mut out = Zeroizing::new(Vec::with_capacity(clean.len() * 5 / 8));
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in clean.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => {
                return Err(FieldError::new(
                    "secret",
                    "is not base32 (letters A–Z and digits 2–7)",
                ));
            }
        };
        acc = (acc << 5) | u32::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    // Leftover bits must be zero padding of the last quantum (a length
    // that no byte count encodes to is a typo).
    if bits >= 5 || acc != 0 {
        return Err(FieldError::new(
            "secret",
            "is not base32 (its length or last character is off: check for a missing or extra character)",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const B32: &str = "JBSWY3DPEHPK3PXP"; // "Hello!\xde\xad\xbe\xef"

    #[test]
    fn base32_is_read_leniently_and_strictly_where_it_matters() {
        let want = b"Hello!\xde\xad\xbe\xef".to_vec();
        assert_eq!(*base32(B32).unwrap(), want);
        assert_eq!(*base32("jbsw y3dp-ehpk 3pxp").unwrap(), want);
        assert_eq!(*base32("JBSWY3DPEHPK3PXP====").unwrap(), want);
        for bad in [
            "JBSWY3DPEHPK3PX1",
            "JBSWY3DPEHPK3PX",
            "",
            "   ",
            "JBSWY3DPEHPK3PX8",
        ] {
            let e = base32(bad).unwrap_err();
            assert_eq!(e.field, "secret", "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_key_uri_gives_its_secret_and_parameters() {
        let s = Seed::from_uri(
            "otpauth://totp/ACME%20Co:john@example.com?secret=JBSWY3DPEHPK3PXP&issuer=ACME%20Co&algorithm=SHA256&digits=8&period=60",
        )
        .unwrap();
        assert_eq!(s.secret(), b"Hello!\xde\xad\xbe\xef");
        assert_eq!(
            s.params,
            Params {
                algorithm: Algorithm::Sha256,
                digits: 8,
                period: 60
            }
        );
        assert_eq!(s.issuer.as_deref(), Some("ACME Co"));
        let d = Seed::from_uri("otpauth://totp/x?secret=JBSWY3DPEHPK3PXP").unwrap();
        assert_eq!(d.params, Params::default());
    }

    #[test]
    fn bad_uris_and_parameters_name_their_field_and_never_the_secret() {
        let cases = [
            ("not a uri", "uri"),
            ("https://totp/x?secret=JBSWY3DPEHPK3PXP", "uri"),
            ("otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP&counter=1", "uri"),
            ("otpauth://totp/x?issuer=a", "secret"),
            ("otpauth://totp/x?secret=NOT-BASE32!!", "secret"),
            ("otpauth://totp/x?secret=JBSWY3DP", "secret"),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=0",
                "digits",
            ),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=20",
                "digits",
            ),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&digits=six",
                "digits",
            ),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&period=0",
                "period",
            ),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&period=-30",
                "period",
            ),
            (
                "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&algorithm=MD5",
                "algorithm",
            ),
        ];
        for (uri, field) in cases {
            let e = Seed::from_uri(uri).unwrap_err();
            assert_eq!(e.field, field, "{uri}: {e}");
            assert!(!e.to_string().contains("JBSWY3DP"), "{uri}: {e}");
        }
        let long = format!(
            "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP&issuer={}",
            "a".repeat(MAX_URI_BYTES)
        );
        assert_eq!(Seed::from_uri(&long).unwrap_err().field, "uri");
        let huge = "A".repeat(200);
        assert_eq!(
            Seed::from_base32(&huge, Params::default())
                .unwrap_err()
                .field,
            "secret"
        );
    }

    #[test]
    fn labels_are_trimmed_bounded_and_printable() {
        assert_eq!(label("  admin account ").unwrap(), "admin account");
        assert_eq!(label("").unwrap_err().field, "label");
        assert_eq!(label(&"x".repeat(10 * 1024)).unwrap_err().field, "label");
        assert_eq!(label("a\u{0}b").unwrap_err().field, "label");
        assert_eq!(label(&"é".repeat(100)).unwrap(), "é".repeat(100));
    }

    #[test]
    fn the_sealed_form_round_trips_and_debug_hides_the_secret() {
        let s = Seed::from_base32(B32, Params::default()).unwrap();
        let back = Seed::from_plaintext(&s.to_plaintext()).unwrap();
        assert_eq!(back.secret(), s.secret());
        assert_eq!(back.params, s.params);
        assert!(!format!("{s:?}").contains("48656c6c6f"));
        assert!(Seed::from_plaintext(b"{}").is_err());
    }
}
