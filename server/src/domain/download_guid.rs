//! `DownloadGuid`: the id Chromium gives a download, which is also its
//! file's name in the sandbox's download folder. It comes from the browser,
//! so it is untrusted: only Chromium's own shape (a lowercase UUID,
//! `8-4-4-4-12` hex digits, as `base::Uuid::AsLowercaseString` writes it)
//! is accepted, so it can never name a path outside that folder.

use std::fmt;

/// A download's id as Chromium makes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DownloadGuid(String);

/// An id that is not Chromium's shape (its text is not kept: it came
/// from a browser that may be hostile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a download id must be a lowercase UUID (8-4-4-4-12 hex digits)")]
pub struct DownloadGuidError;

impl DownloadGuid {
    /// A fresh id of the same shape, for a download Cordon takes over CDP
    /// itself (the browser never names those).
    pub fn generate() -> Self {
        let b: [u8; 16] = rand::random();
        let hex = hex::encode(b);
        Self(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ))
    }

    /// Checks `raw`'s shape.
    pub fn parse(raw: &str) -> Result<Self, DownloadGuidError> {
        let groups: Vec<&str> = raw.split('-').collect();
        let shaped = groups.len() == 5
            && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, len)| {
                g.len() == len && g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            });
        if shaped {
            Ok(Self(raw.to_owned()))
        } else {
            Err(DownloadGuidError)
        }
    }

    /// The id (and file name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DownloadGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_id_has_chromiums_shape_and_differs() {
        let (a, b) = (DownloadGuid::generate(), DownloadGuid::generate());
        assert_eq!(DownloadGuid::parse(a.as_str()), Ok(a.clone()));
        assert_ne!(a, b);
    }

    #[test]
    fn only_chromiums_lowercase_uuids_are_download_ids() {
        let ok = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(DownloadGuid::parse(ok).unwrap().as_str(), ok);
        for bad in [
            "",
            "../../master.key",
            "/etc/passwd",
            "0f8fad5b-d9cb-469f-a165-70867728950e/..",
            "../8fad5b-d9cb-469f-a165-70867728950e",
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5b-d9cb-469f-a165-70867728950",
            "0f8fad5b-d9cb-469f-a165-70867728950e0",
            "0f8fad5bd9cb469fa16570867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950e.crdownload",
            "0f8fad5b-d9cb-469f-a165-7086772895\0e",
            "0g8fad5b-d9cb-469f-a165-70867728950e",
            "+f8fad5b-d9cb-469f-a165-70867728950e",
        ] {
            assert_eq!(DownloadGuid::parse(bad), Err(DownloadGuidError), "{bad:?}");
        }
    }
}
