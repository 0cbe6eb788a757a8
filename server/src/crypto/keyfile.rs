//! Where the master key comes from: the `master_key` setting, or the key
//! file of the `master_key_file` setting, by default `<data_dir>/master.key`
//! (created with mode 0600 on first use).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use zeroize::Zeroizing;

use super::key::MasterKey;

/// Where the master key comes from, as the settings say: the key itself
/// (`master_key`), else its file (`master_key_file`, by default
/// `<data_dir>/master.key`). Built by `config`.
#[derive(Debug, Clone)]
pub struct KeySettings {
    /// `master_key`, if set.
    pub master_key: Option<SecretString>,
    /// `master_key_file`, defaulted.
    pub file: PathBuf,
}

/// The key file's name inside the data directory, where it is by default.
pub const KEY_FILE: &str = "master.key";

/// Where a rotation stages the new key until the database has committed.
const STAGED_SUFFIX: &str = "next";

/// Why the master key could not be had. One line each, naming the setting or
/// the file; never any part of a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// `master_key` is set but is not a key.
    #[error("master_key (CORDON_MASTER_KEY): not 32 bytes written as 64 hex digits or base64")]
    MalformedSetting,
    /// The key file holds something else than a key.
    #[error("master key file {}: not 32 bytes written as 64 hex digits or base64", .0.display())]
    MalformedFile(PathBuf),
    /// The key file may be read by group or others.
    #[error(
        "master key file {} has mode {mode:04o}, wider than 0600; refusing to use it (chmod 600 {})",
        .path.display(),
        .path.display()
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Reading or writing a key file failed.
    #[error("master key file {}: {err}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        err: io::Error,
    },
    /// A rotation was asked to install the key already in force.
    #[error("the new master key is the key in force (key id {0})")]
    SameKey(super::KeyId),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> KeyError + '_ {
    move |err| KeyError::Io {
        path: path.to_owned(),
        err,
    }
}

/// Where the key in force came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The `master_key` setting (`CORDON_MASTER_KEY` or `cordon.toml`).
    Setting,
    /// A key file.
    File(PathBuf),
}

/// The master key in force and where it came from.
#[derive(Debug, Clone)]
pub struct Keyring {
    key: MasterKey,
    source: KeySource,
}

impl Keyring {
    /// The key from the `master_key` setting if set, otherwise from the
    /// `master_key_file` (default `<data_dir>/master.key`), which is created
    /// (mode 0600, in a 0700 directory if that is new too) if missing and
    /// refused if its mode is wider than 0600.
    pub fn load(settings: &KeySettings) -> Result<Self, KeyError> {
        if let Some(text) = &settings.master_key {
            let key =
                MasterKey::from_text(text.expose_secret()).ok_or(KeyError::MalformedSetting)?;
            return Ok(Self {
                key,
                source: KeySource::Setting,
            });
        }
        let path = settings.file.clone();
        let key = load_or_create(&path)?;
        Ok(Self {
            key,
            source: KeySource::File(path),
        })
    }

    /// A keyring over a key held in memory (tests, embedding).
    pub fn in_memory(key: MasterKey) -> Self {
        Self {
            key,
            source: KeySource::Setting,
        }
    }

    /// The key in force.
    pub fn key(&self) -> &MasterKey {
        &self.key
    }

    /// Where it came from.
    pub fn source(&self) -> &KeySource {
        &self.source
    }

    /// First step of a rotation: if the key in force lives in a file, writes
    /// `new` beside it as `master.key.next` (mode 0600) and returns that
    /// path. Nothing is staged for a key given by setting: the operator
    /// changes the setting.
    pub fn stage(&self, new: &MasterKey) -> Result<Option<PathBuf>, KeyError> {
        if new.id() == self.key.id() {
            return Err(KeyError::SameKey(new.id().clone()));
        }
        let KeySource::File(path) = &self.source else {
            return Ok(None);
        };
        let staged = sibling(path, STAGED_SUFFIX);
        // A leftover from an interrupted rotation: the database never
        // committed under it (or `load` would have failed), so it is stale.
        match fs::remove_file(&staged) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(&staged)(e)),
            _ => {}
        }
        write_new(&staged, new).map_err(io_err(&staged))?;
        Ok(Some(staged))
    }

    /// Last step of a rotation, after the database committed: keeps the old
    /// key file as `master.key.<old key id>` and moves the staged key into
    /// place (an atomic rename, so `master.key` never goes missing). Returns
    /// where the old key was kept.
    pub fn install(&self, staged: &Path) -> Result<PathBuf, KeyError> {
        let KeySource::File(path) = &self.source else {
            return Err(io_err(staged)(io::Error::other("no key file to replace")));
        };
        let kept = sibling(path, self.key.id().as_str());
        match fs::hard_link(path, &kept) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(io_err(&kept)(e)),
            _ => {}
        }
        fs::rename(staged, path).map_err(io_err(path))?;
        Ok(kept)
    }

    /// Removes a staged key after a failed rotation.
    pub fn discard(staged: &Path) {
        let _ = fs::remove_file(staged);
    }
}

/// `master.key.<suffix>` beside `path`.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| KEY_FILE.to_owned());
    path.with_file_name(format!("{name}.{suffix}"))
}

/// Reads a key file, refusing it if group or others have any permission on
/// it (the mode is read from the opened file, so it cannot change between
/// the check and the read).
pub fn read_key_file(path: &Path) -> Result<MasterKey, KeyError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mode = file.metadata().map_err(io_err(path))?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_owned(),
            mode,
        });
    }
    let mut text = Zeroizing::new(String::new());
    file.take(1024)
        .read_to_string(&mut text)
        .map_err(|_| KeyError::MalformedFile(path.to_owned()))?;
    MasterKey::from_text(&text).ok_or_else(|| KeyError::MalformedFile(path.to_owned()))
}

fn load_or_create(path: &Path) -> Result<MasterKey, KeyError> {
    match read_key_file(path) {
        Err(KeyError::Io { err, .. }) if err.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io_err(dir))?;
    }
    let key = MasterKey::generate();
    match write_new(path, &key) {
        Ok(()) => {
            tracing::info!(key.id = %key.id(), path = %path.display(), "created a new master key");
            Ok(key)
        }
        // Another process created it first: use theirs.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Writes `key` to `path`, which must not exist, with mode 0600. The key is
/// written to a private temporary file first and then hard-linked into
/// place, so no reader ever sees a half-written key and two processes racing
/// to create it end up with the same one.
fn write_new(path: &Path, key: &MasterKey) -> io::Result<()> {
    let tmp = sibling(
        path,
        &format!("tmp-{}", hex::encode(rand::random::<[u8; 6]>())),
    );
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The mode above is filtered by the umask; this is not.
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        let mut text = key.to_text();
        text.push('\n');
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::hard_link(&tmp, path)
    })();
    let _ = fs::remove_file(&tmp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings' defaults: the key file in `<dir>/data`.
    fn settings(dir: &Path, key: Option<&str>) -> KeySettings {
        KeySettings {
            master_key: key.map(|k| SecretString::from(k.to_owned())),
            file: dir.join("data").join(KEY_FILE),
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_key_file_is_created_0600_once_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Keyring::load(&settings(dir.path(), None)).unwrap();
        let path = dir.path().join("data").join(KEY_FILE);
        assert_eq!(first.source(), &KeySource::File(path.clone()));
        assert_eq!(mode(&path), 0o600);
        let second = Keyring::load(&settings(dir.path(), None)).unwrap();
        assert_eq!(first.key().id(), second.key().id());
        // Only the key file: no temporary left behind.
        assert_eq!(fs::read_dir(dir.path().join("data")).unwrap().count(), 1);
    }

    #[test]
    fn a_key_file_readable_by_others_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        Keyring::load(&settings(dir.path(), None)).unwrap();
        let path = dir.path().join("data").join(KEY_FILE);
        for wide in [0o644, 0o640, 0o604, 0o660] {
            fs::set_permissions(&path, fs::Permissions::from_mode(wide)).unwrap();
            let err = Keyring::load(&settings(dir.path(), None)).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, KeyError::Permissions { .. }), "{msg}");
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(0o400)).unwrap();
        assert!(Keyring::load(&settings(dir.path(), None)).is_ok());
    }

    #[test]
    fn a_key_file_outside_the_data_dir_is_created_and_used_there() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("keys").join("cordon.key");
        let settings = KeySettings {
            master_key: None,
            file: elsewhere.clone(),
        };
        let first = Keyring::load(&settings).unwrap();
        assert_eq!(first.source(), &KeySource::File(elsewhere.clone()));
        assert_eq!(mode(&elsewhere), 0o600);
        assert_eq!(mode(&dir.path().join("keys")), 0o700);
        assert!(!dir.path().join("data").join(KEY_FILE).exists());
        let again = Keyring::load(&settings).unwrap();
        assert_eq!(first.key().id(), again.key().id());
    }

    #[test]
    fn the_setting_wins_over_the_file_and_creates_none() {
        let dir = tempfile::tempdir().unwrap();
        let key = MasterKey::generate();
        let ring = Keyring::load(&settings(dir.path(), Some(key.to_text().as_str()))).unwrap();
        assert_eq!(ring.key().id(), key.id());
        assert_eq!(ring.source(), &KeySource::Setting);
        assert!(!dir.path().join("data").join(KEY_FILE).exists());
    }

    #[test]
    fn a_malformed_setting_or_file_is_refused_without_echoing_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = Keyring::load(&settings(dir.path(), Some("hunter2-not-a-key"))).unwrap_err();
        assert!(matches!(err, KeyError::MalformedSetting));
        assert!(!err.to_string().contains("hunter2"));
        let path = dir.path().join("bad.key");
        fs::write(&path, "hunter2\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = read_key_file(&path).unwrap_err();
        assert!(matches!(err, KeyError::MalformedFile(_)));
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn staging_and_installing_keeps_the_old_key_under_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let ring = Keyring::load(&settings(dir.path(), None)).unwrap();
        let new = MasterKey::generate();
        let staged = ring.stage(&new).unwrap().unwrap();
        assert_eq!(mode(&staged), 0o600);
        let kept = ring.install(&staged).unwrap();
        assert!(kept.ends_with(format!("master.key.{}", ring.key().id())));
        assert_eq!(read_key_file(&kept).unwrap().id(), ring.key().id());
        assert_eq!(mode(&kept), 0o600);
        let reloaded = Keyring::load(&settings(dir.path(), None)).unwrap();
        assert_eq!(reloaded.key().id(), new.id());
        assert!(!staged.exists());
        assert!(matches!(reloaded.stage(&new), Err(KeyError::SameKey(_))));
    }
}
