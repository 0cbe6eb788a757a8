//! Starting and stopping one browser per session. The drivers (`process`,
//! `bwrap`, `exec`) arrive with the session engine; for now this module knows
//! how to tell whether the configured Chromium can run at all.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Whether `path` is a regular file with an execute bit set.
pub fn chromium_runnable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_plain_file_is_not_runnable() {
        assert!(!chromium_runnable(Path::new("/nonexistent/chromium")));
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(!chromium_runnable(file.path()));
        assert!(!chromium_runnable(Path::new("/")));
    }

    #[test]
    fn an_executable_file_is_runnable() {
        assert!(chromium_runnable(Path::new("/bin/sh")));
    }
}
