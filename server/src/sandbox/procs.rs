//! Signalling sandbox processes safely: by process group, and only after
//! checking that the pid still belongs to the sandbox.

use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// True if `pid` runs and its command line contains `marker`.
pub fn is_alive(pid: i32, marker: &str) -> bool {
    if pid <= 1 {
        return false;
    }
    match std::fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // A zombie (state Z) is gone for our purposes.
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        }
        Err(_) => false,
    }
}

/// Stops the process group `pid` if its leader is the sandbox named by
/// `marker`: SIGTERM, up to `grace`, then SIGKILL. Returns whether it signalled.
pub async fn kill_group(pid: i32, marker: &str, grace: Duration) -> bool {
    if !is_alive(pid, marker) {
        return false;
    }
    let group = Pid::from_raw(pid);
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if !is_alive(pid, marker) {
            // The leader is gone; make sure no helper of the group lingers.
            let _ = killpg(group, Signal::SIGKILL);
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let _ = killpg(group, Signal::SIGKILL);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[tokio::test]
    async fn a_group_is_killed_only_when_the_marker_matches() {
        let marker = format!("cordon-test-marker-{}", rand::random::<u32>());
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30; : ", &marker])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Until the child has exec'd, its command line is still ours.
        for _ in 0..200 {
            if is_alive(pid, &marker) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(is_alive(pid, &marker));
        assert!(!is_alive(pid, "some-other-marker"));
        assert!(!kill_group(pid, "some-other-marker", Duration::from_millis(100)).await);
        assert!(is_alive(pid, &marker), "a wrong marker must not kill");
        assert!(kill_group(pid, &marker, Duration::from_secs(2)).await);
        let _ = child.wait();
        assert!(!is_alive(pid, &marker));
    }

    #[test]
    fn pids_0_and_1_are_never_alive() {
        assert!(!is_alive(0, ""));
        assert!(!is_alive(1, ""));
    }
}
