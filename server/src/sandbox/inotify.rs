//! Room for the browsers' inotify instances. Every Chromium holds one (in
//! its browser process), and Linux allows 128 per user by default: past
//! the limit, a browser's file watching fails (`inotify_init() failed: Too
//! many open files`; BENCHMARKS.md 2026-11-27 20:45: 200 sessions at 128
//! logged it, at 1024 none did). `cordon serve` warns at start and
//! `/readyz` shows it.

/// Instances of inotify the host's other programs of the same user may
/// hold beside the browsers (a desktop session, a file manager, the
/// control plane's own).
pub const MARGIN: usize = 16;

/// The inotify instances this user may hold: the host's
/// `fs.inotify.max_user_instances`, and, inside a user namespace (a
/// container's), the namespace's own `user.max_inotify_instances`; the
/// kernel holds a process to both. In the host's namespace the second is
/// the first under another name, so it is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `fs.inotify.max_user_instances`.
    pub host: Option<usize>,
    /// The user namespace's `user.max_inotify_instances`, outside the host's namespace.
    pub namespace: Option<usize>,
}

impl Limits {
    /// Reads both from `/proc`.
    pub fn read() -> Self {
        let read = |path: &str| -> Option<String> { std::fs::read_to_string(path).ok() };
        let number = |path: &str| read(path)?.trim().parse().ok();
        // The host's namespace maps every uid to itself.
        let in_host_namespace = read("/proc/self/uid_map")
            .is_some_and(|m| m.split_whitespace().eq(["0", "0", "4294967295"]));
        Self {
            host: number("/proc/sys/fs/inotify/max_user_instances"),
            namespace: if in_host_namespace {
                None
            } else {
                number("/proc/sys/user/max_inotify_instances")
            },
        }
    }

    /// The lower of the two, which binds.
    pub fn lowest(&self) -> Option<usize> {
        [self.host, self.namespace].into_iter().flatten().min()
    }
}

/// When `browsers` Chromiums (one inotify instance each, in the browser
/// process) do not fit under `limits` with [`MARGIN`] to spare:
/// the lower limit, and the fix, naming each limit that is too low.
pub fn short(browsers: usize, limits: Limits) -> Option<(usize, String)> {
    let need = browsers + MARGIN;
    let want = need.next_power_of_two();
    let mut fixes = Vec::new();
    if limits.host.is_some_and(|n| n < need) {
        fixes.push(format!(
            "sysctl -w fs.inotify.max_user_instances={want} on the host (a file in \
             /etc/sysctl.d/ keeps it)"
        ));
    }
    if limits.namespace.is_some_and(|n| n < need) {
        fixes.push(format!(
            "user.max_inotify_instances={want} in this container's user namespace (set by \
             whoever starts the container)"
        ));
    }
    let lowest = limits.lowest()?;
    (!fixes.is_empty()).then(|| (lowest, fixes.join(", and ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_whose_inotify_limit_is_below_the_browsers_is_told_which_to_raise() {
        let host = |n| Limits {
            host: Some(n),
            namespace: None,
        };
        // Linux's default against the default max_sessions (150) and pool (2).
        let (limit, fix) = short(152, host(128)).unwrap();
        assert_eq!(limit, 128);
        assert!(fix.starts_with("sysctl -w fs.inotify.max_user_instances=256 on the host"));
        assert!(!fix.contains("user.max_inotify_instances"), "{fix}");
        // The margin counts: 112 browsers leave 16 for everything else.
        assert_eq!(short(112, host(128)), None);
        assert_eq!(short(113, host(128)).unwrap().0, 128);
        assert_eq!(short(152, host(1024)), None);
        // Inside a container: only the limit that is too low is named.
        let both = |h, n| Limits {
            host: Some(h),
            namespace: Some(n),
        };
        let (limit, fix) = short(152, both(1024, 8)).unwrap();
        assert_eq!(limit, 8);
        assert!(
            fix.starts_with("user.max_inotify_instances=256 in this container's"),
            "{fix}"
        );
        let (limit, fix) = short(152, both(128, 8)).unwrap();
        assert_eq!(limit, 8);
        assert!(
            fix.contains("fs.inotify.max_user_instances=256")
                && fix.contains("user.max_inotify_instances=256"),
            "{fix}"
        );
        assert_eq!(short(152, both(1024, 4096)), None);
        // A host that tells nothing is not warned about.
        let none = Limits {
            host: None,
            namespace: None,
        };
        assert_eq!(short(152, none), None);
    }
}
