//! bubblewrap's command line: what the sandbox sees of the host, and the
//! relay command that runs inside it.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use super::{
    DEVTOOLS_PORT, INSIDE_HOME, INSIDE_PROFILE, INSIDE_RELAY, INSIDE_SOCK_DIR, PROXY_PORT, RELAY_FD,
};
use crate::sandbox::{INSIDE_DOWNLOADS, INSIDE_UPLOADS, chromium};

/// What the sandbox is built from.
#[derive(Debug, Clone)]
pub struct Layout<'a> {
    /// Host directory bound read-only at `/run/cordon`: it holds the
    /// host's `egress.sock`, which the sandbox connects to (connecting
    /// needs no write access to the mount) but cannot replace.
    pub sock_dir: &'a Path,
    /// Host directory bound read-only at [`INSIDE_UPLOADS`]: files an
    /// `upload` call sets on a file input.
    pub uploads_dir: &'a Path,
    /// Host directory bound writable at [`INSIDE_DOWNLOADS`]: where a
    /// session that allows downloads has them saved (the browser refuses
    /// downloads otherwise).
    pub downloads_dir: &'a Path,
    /// The Chromium binary; its directory is bound read-only when it is
    /// outside `/usr`.
    pub chromium: &'a Path,
    /// Forbid creating user namespaces inside (when Chromium's own sandbox,
    /// which needs them, is off).
    pub disable_userns: bool,
    /// Size cap of each tmpfs (`/tmp` with the profile, `/home`, `/run`),
    /// bytes; none when unset.
    pub tmpfs_bytes: Option<u64>,
}

/// The whole `bwrap` argument list that runs `command` in a sandbox laid
/// out by `layout` (the driver passes the relay and Chromium as `command`).
///
/// bwrap must be started with the `cordon` binary open on its fd
/// [`RELAY_FD`] (its stdout): that open file, not a path, is bound at
/// [`INSIDE_RELAY`], so a binary replaced on disk meanwhile cannot run
/// inside next to the control plane that started it.
pub fn bwrap_args(layout: &Layout<'_>, command: &[OsString]) -> Vec<OsString> {
    fn add(a: &mut Vec<OsString>, items: &[&str]) {
        a.extend(items.iter().map(OsString::from));
    }
    fn bind(a: &mut Vec<OsString>, flag: &str, from: &Path, to: &Path) {
        a.extend([flag.into(), from.into(), to.into()]);
    }
    let mut a: Vec<OsString> = Vec::new();
    // Every namespace; the user namespace always (not just "try"), so the
    // layout below is the same everywhere or the probe fails.
    add(&mut a, &["--unshare-all", "--unshare-user"]);
    if layout.disable_userns {
        add(&mut a, &["--disable-userns"]);
    }
    // Run as root, bwrap keeps every capability in the sandbox's user
    // namespace unless told otherwise, and with CAP_SYS_ADMIN there a
    // process could remount the read-only binds writable.
    add(
        &mut a,
        &["--cap-drop", "ALL", "--die-with-parent", "--new-session"],
    );
    add(
        &mut a,
        &["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"],
    );
    for (name, entry) in root_entries() {
        match entry {
            RootEntry::Symlink(target) => bind(&mut a, "--symlink", &target, Path::new(name)),
            RootEntry::Dir => bind(&mut a, "--ro-bind", Path::new(name), Path::new(name)),
        }
    }
    add(&mut a, &["--proc", "/proc", "--dev", "/dev"]);
    for dir in ["/tmp", "/home", "/run"] {
        // bwrap's --size applies to the --tmpfs right after it.
        if let Some(bytes) = layout.tmpfs_bytes {
            add(&mut a, &["--size", &bytes.to_string()]);
        }
        add(&mut a, &["--tmpfs", dir]);
    }
    add(&mut a, &["--dir", INSIDE_HOME, "--chdir", INSIDE_HOME]);
    if let Some(dir) = layout.chromium.parent()
        && !dir.starts_with("/usr")
    {
        bind(&mut a, "--ro-bind", dir, dir);
    }
    add(
        &mut a,
        &["--ro-bind-fd", &RELAY_FD.to_string(), INSIDE_RELAY],
    );
    bind(
        &mut a,
        "--ro-bind",
        layout.sock_dir,
        Path::new(INSIDE_SOCK_DIR),
    );
    // The one writable host path (see the module comment).
    bind(
        &mut a,
        "--bind",
        layout.downloads_dir,
        Path::new(INSIDE_DOWNLOADS),
    );
    bind(
        &mut a,
        "--ro-bind",
        layout.uploads_dir,
        Path::new(INSIDE_UPLOADS),
    );
    add(&mut a, &["--clearenv"]);
    for (k, v) in [
        ("HOME", INSIDE_HOME),
        ("PATH", "/usr/bin:/bin"),
        ("TMPDIR", "/tmp"),
        ("LANG", "C.UTF-8"),
    ] {
        add(&mut a, &["--setenv", k, v]);
    }
    add(&mut a, &["--"]);
    a.extend(command.iter().cloned());
    a
}

enum RootEntry {
    Symlink(PathBuf),
    Dir,
}

/// `/lib`, `/lib64`, `/bin`, `/sbin` as this host has them: the symlinks of
/// a merged /usr (`/lib -> usr/lib`), or read-only binds of real directories.
fn root_entries() -> Vec<(&'static str, RootEntry)> {
    let mut out = Vec::new();
    for name in ["/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin"] {
        match std::fs::symlink_metadata(name) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(name) {
                    out.push((name, RootEntry::Symlink(target)));
                }
            }
            Ok(m) if m.is_dir() => out.push((name, RootEntry::Dir)),
            _ => {}
        }
    }
    out
}

/// What runs inside: the relay, which starts Chromium as its child.
pub fn sandbox_command(chromium: &Path, window: (u32, u32), no_sandbox: bool) -> Vec<OsString> {
    let proxy = SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT));
    let devtools = SocketAddr::from((Ipv4Addr::LOCALHOST, DEVTOOLS_PORT));
    let mut cmd: Vec<OsString> = vec![
        INSIDE_RELAY.into(),
        "relay".into(),
        "--proxy-listen".into(),
        proxy.to_string().into(),
        "--egress-socket".into(),
        format!("{INSIDE_SOCK_DIR}/egress.sock").into(),
        "--cdp-target".into(),
        devtools.to_string().into(),
        "--".into(),
        chromium.into(),
    ];
    // The same flags as the process driver, with a fixed DevTools port.
    // `--no-sandbox` (added when Cordon runs as root, where Chromium's own
    // sandbox refuses to start) is acceptable here: bwrap is the sandbox,
    // with no capabilities, no writable host path but the download directory,
    // no network but its loopback, and no user namespaces to escalate in.
    cmd.extend(
        chromium::args(Path::new(INSIDE_PROFILE), proxy, window, no_sandbox)
            .into_iter()
            .map(|arg| {
                if arg.starts_with("--remote-debugging-port=") {
                    format!("--remote-debugging-port={DEVTOOLS_PORT}")
                } else {
                    arg
                }
                .into()
            }),
    );
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[OsString]) -> Vec<String> {
        a.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    fn layout_args(chromium: &str, disable_userns: bool) -> Vec<String> {
        let layout = Layout {
            sock_dir: Path::new("/data/run/b_x/sock"),
            uploads_dir: Path::new("/data/run/b_x/uploads"),
            downloads_dir: Path::new("/data/run/b_x/downloads"),
            chromium: Path::new(chromium),
            disable_userns,
            tmpfs_bytes: None,
        };
        strings(&bwrap_args(
            &layout,
            &["/bin/sh".into(), "-c".into(), "true".into()],
        ))
    }

    /// The index of `seq` as consecutive items of `a`.
    fn find(a: &[String], seq: &[&str]) -> Option<usize> {
        a.windows(seq.len())
            .position(|w| w.iter().zip(seq).all(|(x, y)| x == y))
    }

    #[test]
    fn every_namespace_no_capabilities_and_death_with_the_parent() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        for flag in [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
        ] {
            assert!(a.contains(&flag.to_owned()), "{flag} missing: {a:?}");
        }
        assert!(find(&a, &["--cap-drop", "ALL"]).is_some());
        let b = layout_args("/usr/lib/chromium/chromium", false);
        assert!(!b.contains(&"--disable-userns".to_owned()));
    }

    #[test]
    fn only_the_download_directory_is_bound_writable() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        let rw: Vec<usize> = a
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                [
                    "--bind",
                    "--bind-try",
                    "--dev-bind",
                    "--dev-bind-try",
                    "--bind-fd",
                ]
                .contains(&s.as_str())
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(rw.len(), 1, "{a:?}");
        assert_eq!(
            a[rw[0] + 1..rw[0] + 3],
            ["/data/run/b_x/downloads", "/downloads"]
        );
        // The socket directory and uploads are only read.
        let sock = find(&a, &["--ro-bind", "/data/run/b_x/sock", INSIDE_SOCK_DIR]).unwrap();
        assert!(find(&a, &["--ro-bind", "/data/run/b_x/uploads", "/uploads"]).is_some());
        // The relay is the binary open on bwrap's stdout, not a path.
        let relay = find(&a, &["--ro-bind-fd", "1", INSIDE_RELAY]).unwrap();
        assert!(
            !a.iter()
                .any(|s| s.contains("cordon") && s != INSIDE_SOCK_DIR && s != INSIDE_RELAY),
            "{a:?}"
        );
        // Both come after the /run tmpfs they live in.
        let run = find(&a, &["--tmpfs", "/run"]).unwrap();
        assert!(sock > run && relay > run);
        for ro in [["--ro-bind", "/usr", "/usr"], ["--ro-bind", "/etc", "/etc"]] {
            assert!(find(&a, &ro).is_some(), "{ro:?}");
        }
        for fs in [
            ["--proc", "/proc"],
            ["--dev", "/dev"],
            ["--tmpfs", "/tmp"],
            ["--tmpfs", "/home"],
        ] {
            assert!(find(&a, &fs).is_some(), "{fs:?}");
        }
        // Chromium under /usr needs no bind of its own; elsewhere, read-only.
        assert!(!a.iter().any(|s| s.contains("chromium")));
        let c = layout_args("/opt/chromium/chrome", true);
        assert!(find(&c, &["--ro-bind", "/opt/chromium", "/opt/chromium"]).is_some());
    }

    #[test]
    fn the_environment_is_cleared_and_the_command_comes_last() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        let clear = a.iter().position(|s| s == "--clearenv").unwrap();
        let home = find(&a, &["--setenv", "HOME", INSIDE_HOME]).unwrap();
        assert!(home > clear);
        let setenvs: Vec<&String> = a
            .iter()
            .enumerate()
            .filter(|(i, s)| *s == "--setenv" && *i > clear)
            .map(|(i, _)| &a[i + 1])
            .collect();
        assert_eq!(setenvs, ["HOME", "PATH", "TMPDIR", "LANG"]);
        assert_eq!(a[a.len() - 4..], ["--", "/bin/sh", "-c", "true"]);
    }

    #[test]
    fn root_links_mirror_this_host() {
        let a = layout_args("/usr/lib/chromium/chromium", true);
        // On this (merged-/usr) host: the symlinks STACK.md lists.
        if std::fs::read_link("/lib").is_ok() {
            assert!(
                find(&a, &["--symlink", "usr/lib", "/lib"]).is_some(),
                "{a:?}"
            );
            assert!(
                find(&a, &["--symlink", "usr/bin", "/bin"]).is_some(),
                "{a:?}"
            );
        }
    }

    #[test]
    fn chromium_runs_under_the_relay_with_the_in_sandbox_proxy_and_a_fixed_port() {
        let cmd = strings(&sandbox_command(
            Path::new("/usr/lib/chromium/chromium"),
            (1280, 720),
            true,
        ));
        assert_eq!(cmd[..2], [INSIDE_RELAY, "relay"]);
        let dashdash = cmd.iter().position(|s| s == "--").unwrap();
        assert_eq!(cmd[dashdash + 1], "/usr/lib/chromium/chromium");
        let relay = &cmd[..dashdash];
        assert!(find(relay, &["--proxy-listen", "127.0.0.1:3128"]).is_some());
        assert!(find(relay, &["--egress-socket", "/run/cordon/egress.sock"]).is_some());
        // CDP comes in on the relay's stdin (a listener the host made).
        assert!(!relay.iter().any(|a| a.contains("cdp.sock")), "{relay:?}");
        assert!(find(relay, &["--cdp-target", "127.0.0.1:9222"]).is_some());
        let browser = &cmd[dashdash + 1..];
        assert!(browser.contains(&"--proxy-server=http://127.0.0.1:3128".to_owned()));
        assert!(browser.contains(&"--proxy-bypass-list=<-loopback>".to_owned()));
        assert!(browser.contains(&"--remote-debugging-port=9222".to_owned()));
        assert!(!browser.contains(&"--remote-debugging-port=0".to_owned()));
        assert!(browser.contains(&"--user-data-dir=/tmp/profile".to_owned()));
        assert!(browser.contains(&"--no-sandbox".to_owned()));
        // That the relay's own arguments parse is checked in `cli`'s tests.
    }
}
