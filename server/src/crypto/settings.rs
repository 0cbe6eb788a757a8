//! Where the master key comes from (`master_key`, `master_key_file`),
//! declared here; `config` flattens it into `Settings`.

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::{KEY_FILE, KeySettings};

/// The master key's settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct KeySection {
    /// The vault's master key (32 bytes as 64 hex digits or base64). When
    /// unset, the key lives in `master_key_file`, created with mode 0600 on
    /// first use. Shown as `***`.
    #[serde(default, serialize_with = "crate::setting::masked")]
    #[schemars(with = "Option<String>")]
    pub master_key: Option<SecretString>,
    /// Where the master key file lives when `master_key` is unset; defaults
    /// to `<data_dir>/master.key`. Keep it outside the data dir so a backup
    /// or copy of the data dir is not a decryptable vault (`serve` warns
    /// when it is inside).
    #[serde(default)]
    pub master_key_file: Option<PathBuf>,
}

impl KeySection {
    /// The master key file in force, defaulted into `data_dir`.
    pub fn master_key_file(&self, data_dir: &Path) -> PathBuf {
        self.master_key_file
            .clone()
            .unwrap_or_else(|| data_dir.join(KEY_FILE))
    }

    /// Where the master key comes from, with the data dir the file
    /// defaults into.
    pub fn key_settings(&self, data_dir: &Path) -> KeySettings {
        KeySettings {
            master_key: self.master_key.clone(),
            file: self.master_key_file(data_dir),
        }
    }
}
