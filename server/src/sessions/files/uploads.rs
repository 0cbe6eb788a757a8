//! The `upload` tool's files: written into the sandbox's read-only upload
//! directory, one folder per call, then set on a file input.

use std::sync::Arc;

use serde::Serialize;

use crate::domain::FileName;
use crate::sandbox::SharedDir;

/// One file of an `upload` call. `Debug` shows its name and size, never
/// its content.
#[derive(Clone, PartialEq)]
pub struct UploadFile {
    /// Checked name.
    pub name: FileName,
    /// The content.
    pub bytes: Arc<[u8]>,
    /// Its SHA-256 (hex), for the audit row and the answer.
    pub sha256: String,
}

impl UploadFile {
    /// A file from its name and content.
    pub fn new(name: FileName, bytes: Vec<u8>) -> Self {
        let sha256 = super::sha256_hex(&bytes);
        Self {
            name,
            bytes: bytes.into(),
            sha256,
        }
    }

    /// What is audited and answered about it.
    pub fn meta(&self) -> UploadedFile {
        UploadedFile {
            name: self.name.to_string(),
            size: self.bytes.len() as u64,
            sha256: self.sha256.clone(),
        }
    }
}

impl std::fmt::Debug for UploadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadFile")
            .field("name", &self.name)
            .field("size", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// A file set on the input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct UploadedFile {
    /// Its name as the page sees it.
    pub name: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256, lowercase hex.
    pub sha256: String,
}

/// What `upload` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Uploaded {
    /// The files now on the input, in order.
    pub files: Vec<UploadedFile>,
}

/// Writes `files` into folder `call` of the sandbox's upload directory
/// (created fresh, as is each file in it, so a call never overwrites
/// another's files nor follows a link planted there) and
/// returns their paths as the browser sees them. The names are
/// [`FileName`]s: every path stays inside that folder.
pub(crate) async fn write(
    dir: &SharedDir,
    call: u64,
    files: &[UploadFile],
) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    use tokio::io::AsyncWriteExt;
    let folder = call.to_string();
    let host = dir.host.join(&folder);
    tokio::fs::create_dir(&host)
        .await
        .with_context(|| format!("cannot create {}", host.display()))?;
    let mut inside = Vec::with_capacity(files.len());
    for f in files {
        let path = host.join(f.name.as_str());
        // A new file in the new folder: nothing already there (a link the
        // browser planted, say) is written through or reused.
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .await
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(&f.bytes)
            .await
            .and(file.flush().await)
            .with_context(|| format!("cannot write {}", path.display()))?;
        inside.push(
            dir.inside
                .join(&folder)
                .join(f.name.as_str())
                .display()
                .to_string(),
        );
    }
    Ok(inside)
}
