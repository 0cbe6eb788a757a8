//! Host-side process plumbing of the driver: spawning bwrap from one
//! long-lived thread, reading `/proc`, finding the binaries.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::{Context, bail};

use super::STDERR_TAIL;

/// Keeps the last [`STDERR_TAIL`] bytes of `pipe` in `tail`, on a thread
/// that ends when every writer (bwrap and all inside) has exited.
pub(super) fn keep_tail(mut pipe: std::process::ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let _ = std::thread::Builder::new()
        .name("cordon-bwrap-stderr".into())
        .spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().expect("stderr lock");
                t.extend_from_slice(&chunk[..n]);
                if t.len() > STDERR_TAIL {
                    let cut = t.len() - STDERR_TAIL;
                    t.drain(..cut);
                }
            }
        });
}

/// The first child of `pid` (bwrap's child is the sandbox's pid 1).
pub(super) fn first_child(pid: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The start time (clock ticks after boot) of `pid`, unless it is gone or
/// a zombie.
pub(super) fn running_since(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    // After the command: state, ppid, … starttime is the 20th.
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

type SpawnJob = (
    Command,
    tokio::sync::oneshot::Sender<std::io::Result<Child>>,
);

/// Spawns `cmd` from one thread that lives as long as the process.
/// `--die-with-parent` is `PR_SET_PDEATHSIG`, which fires when the *thread*
/// that forked bwrap ends, not the process: spawned from a runtime thread
/// (which may come and go), a healthy sandbox could be killed at random.
pub(super) async fn spawn_on_keeper(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<std::sync::mpsc::Sender<SpawnJob>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("cordon-sandbox-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the sandbox spawner thread");
        tx
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    keeper
        .send((cmd, tx))
        .map_err(|_| std::io::Error::other("the sandbox spawner thread is gone"))?;
    rx.await
        .map_err(|_| std::io::Error::other("the sandbox spawner thread is gone"))?
}

/// Whether `bwrap` takes `--size`: version 0.7.0 or later, and not setuid
/// (a setuid bwrap refuses it).
pub(super) fn takes_size(bwrap: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let setuid = std::fs::metadata(bwrap).is_ok_and(|m| m.permissions().mode() & 0o4000 != 0);
    let version = std::process::Command::new(bwrap)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    !setuid && version_at_least(&version, (0, 7))
}

/// Whether `bubblewrap X.Y.Z` is at least `min` (major, minor).
fn version_at_least(text: &str, min: (u32, u32)) -> bool {
    let Some(v) = text.split_whitespace().nth(1) else {
        return false;
    };
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= min
}

/// Finds `bwrap` on `PATH`.
pub(super) fn find_bwrap() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join("bwrap"))
        .find(|p| crate::sandbox::chromium_runnable(p))
        .context("bwrap (bubblewrap) is not installed (apt-get install bubblewrap)")
}

/// The `cordon` binary, which runs the relay inside. Normally the running
/// executable; when that is a test harness in cargo's `target/<profile>/deps`,
/// the `cordon` binary cargo built next to it.
pub(super) fn relay_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    if exe.file_name().is_some_and(|n| n == "cordon") {
        return Ok(exe);
    }
    if let Some(dir) = exe.parent()
        && dir.file_name().is_some_and(|n| n == "deps")
        && let Some(bin) = dir.parent().map(|p| p.join("cordon"))
        && crate::sandbox::chromium_runnable(&bin)
    {
        return Ok(bin);
    }
    bail!(
        "the bwrap driver runs its relay from the `cordon` binary, but this process is {}",
        exe.display()
    )
}

/// Opens the `cordon` binary for `--ro-bind-fd`. The running executable is
/// opened through `/proc/self/exe`, which is the file this process runs
/// even if the path now names another one.
pub(super) fn open_relay(bin: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let running = std::env::current_exe().ok();
    let path = if running.as_deref() == Some(bin) {
        std::path::Path::new("/proc/self/exe")
    } else {
        bin
    };
    std::fs::File::open(path).with_context(|| format!("cannot open {}", bin.display()))
}

/// Collects the exit status of a child we no longer hold.
pub(super) fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let _ = waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_binary_is_the_file_opened_not_what_its_path_names_later() {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("cordon");
        std::fs::write(&bin, b"old").unwrap();
        let mut relay = open_relay(&bin).unwrap();
        // An upgrade in place: a new file renamed over the path.
        let new = dir.path().join("cordon.new");
        std::fs::write(&new, b"new").unwrap();
        std::fs::rename(&new, &bin).unwrap();
        let mut seen = String::new();
        relay.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "old");
        // The running executable is opened as the file this process runs.
        let exe = open_relay(&std::env::current_exe().unwrap()).unwrap();
        let running = std::fs::metadata("/proc/self/exe").unwrap();
        let opened = exe.metadata().unwrap();
        assert_eq!((opened.dev(), opened.ino()), (running.dev(), running.ino()));
    }

    #[test]
    fn tmpfs_sizes_need_bubblewrap_0_7() {
        assert!(version_at_least("bubblewrap 0.8.0\n", (0, 7)));
        assert!(version_at_least("bubblewrap 0.7.0", (0, 7)));
        assert!(version_at_least("bubblewrap 1.0.0", (0, 7)));
        assert!(!version_at_least("bubblewrap 0.6.1", (0, 7)));
        assert!(!version_at_least("bubblewrap 0.4.1", (0, 7)));
        assert!(!version_at_least("", (0, 7)));
    }
}
