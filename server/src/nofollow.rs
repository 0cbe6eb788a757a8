//! Files in folders another party can write (a sandbox's download folder,
//! where a compromised browser may plant a symbolic link, a FIFO or a
//! directory under a name Cordon expects), and Cordon's own files served
//! back: opened without following a link, checked to be regular files on
//! the opened descriptor (not by a path lookup a swap could outrun), and
//! created fresh (`O_EXCL`, mode 0600), never reused.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::libc;

/// Why a file was not opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A symbolic link, FIFO, socket, device or directory stands where a
    /// regular file was expected.
    #[error("not a regular file")]
    NotRegular,
    /// It does not exist, or reading it failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Opens `path` for reading only if its last component is a regular file:
/// a symbolic link there is refused (`O_NOFOLLOW`), a FIFO does not block
/// the open (`O_NONBLOCK`, meaningless for a regular file) and is refused
/// by the descriptor's own type, as a directory or device is.
pub fn open_regular(path: &Path) -> Result<File, OpenError> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        // ELOOP: a symbolic link; ENXIO: a socket (or a FIFO without a
        // reader, for writing only).
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENXIO)) => {
            return Err(OpenError::NotRegular);
        }
        Err(e) => return Err(OpenError::Io(e)),
    };
    if !file.metadata()?.file_type().is_file() {
        return Err(OpenError::NotRegular);
    }
    Ok(file)
}

/// Creates `path` as a new file only Cordon's user can read (0600); fails
/// if anything, a symbolic link included, already has that name.
pub fn create_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Writes `bytes` to `path`, replacing a regular file of that name but
/// never writing through a symbolic link (`O_NOFOLLOW`: refused).
pub async fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// Reads a whole regular file (see [`open_regular`]); `Ok(None)` when
/// nothing has that name.
pub async fn read(path: &Path) -> Result<Option<Vec<u8>>, OpenError> {
    let path = path.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut file = match open_regular(&path) {
            Ok(f) => f,
            Err(OpenError::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    });
    read.await.map_err(|e| OpenError::Io(io::Error::other(e)))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_regular_files_open_and_links_fifos_and_folders_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("master.key");
        std::fs::write(&secret, b"secret").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let folder = dir.path().join("folder");
        std::fs::create_dir(&folder).unwrap();

        let mut text = String::new();
        open_regular(&secret)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "secret");
        for refused in [&link, &fifo, &folder] {
            let got = open_regular(refused);
            assert!(
                matches!(got, Err(OpenError::NotRegular)),
                "{}: {got:?}",
                refused.display()
            );
        }
        assert!(matches!(
            open_regular(&dir.path().join("missing")),
            Err(OpenError::Io(_))
        ));
    }

    #[test]
    fn a_created_file_is_new_and_private_and_never_written_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"keep").unwrap();
        let planted = dir.path().join("planted");
        std::os::unix::fs::symlink(&outside, &planted).unwrap();
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();

        for taken in [&outside, &planted, &dangling] {
            let got = create_private(taken);
            assert!(got.is_err(), "{}: {got:?}", taken.display());
        }
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert!(!dir.path().join("nowhere").exists());
        let fresh = dir.path().join("fresh");
        create_private(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
}
