//! Starting the engine: the sandbox driver and its limits (warning where
//! they do not hold), the recorder, the reaper's pass over what a previous
//! run left, the warm pool and the lifecycle ticker.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;

use super::{EngineSettings, Inner, SessionManager, pool};
use crate::egress::EgressGuard;
use crate::recording::Recorder;
use crate::store::Store;

impl SessionManager {
    /// Picks the driver, reaps what a previous run left behind, and starts
    /// the warm pool and the lifecycle ticker.
    pub async fn start(
        settings: &EngineSettings,
        store: Store,
        egress: EgressGuard,
        vault: crate::vault::Vault,
    ) -> anyhow::Result<Self> {
        let driver = crate::sandbox::build(&settings.sandbox).await?;
        let limits = if settings.enforce_limits {
            crate::sandbox::limits::Enforcer::detect(
                settings.limits,
                std::path::Path::new("/sys/fs/cgroup"),
            )
        } else {
            crate::sandbox::limits::Enforcer::disabled(settings.limits)
        };
        let status = limits.status();
        if status.memory && status.pids {
            tracing::info!(
                cgroups = status.cgroups,
                cpu = status.cpu,
                "per-session limits enforced"
            );
        } else {
            tracing::warn!(
                cgroups = status.cgroups,
                reason = status.reason.as_deref().unwrap_or_default(),
                "PER-SESSION LIMITS ARE NOT ENFORCED: one page can take this host's memory. \
                 Fix: run Cordon where it can create cgroups (the shipped systemd unit with \
                 Delegate=yes, root, or a container that owns its cgroup v2 subtree)"
            );
        }
        if driver.caps().remote && !settings.sessions.tenant_limits.is_empty() {
            tracing::warn!(
                driver = driver.kind().as_str(),
                "tenant_limits do not reach this sandbox driver (exec, kube): its sandboxes get the \
                 default limits (CORDON_LIMIT_*, a pod's memory limit), since warm sandboxes are made \
                 before their tenant is known"
            );
        }
        if driver.caps().devtools_open_locally {
            tracing::warn!(
                driver = driver.kind().as_str(),
                "sandbox driver \"process\": each browser's DevTools port is open to every local \
                 process, which could drive it and read an operator session's cookies; use bwrap \
                 on a shared host"
            );
        }
        let browsers = settings.sessions.max_total + settings.sessions.pool_size;
        if !driver.caps().remote
            && let Some((limit, fix)) = inotify_short(browsers, InotifyLimits::read())
        {
            tracing::warn!(
                inotify.limit = limit,
                browsers,
                "this user may hold {limit} inotify instances, and max_sessions with the pool \
                 allow {browsers} browsers: each Chromium holds one, and past the limit its \
                 file watching fails (inotify_init: Too many open files). Fix: {fix}"
            );
        }
        let run_dir = settings.data_dir.join("run");
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("data_dir: cannot create {}", run_dir.display()))?;
        // Sessions and sandboxes are recorded under this replica's name.
        let host = settings.replica_name.clone();
        let approvals = crate::policy::Approvals::new(store.changes().clone());
        let inner = Arc::new(Inner {
            store,
            vault,
            driver,
            limits,
            egress,
            recorder: {
                let r = Recorder::with_quotas(
                    &settings.files_dir,
                    settings.recording_quota_bytes,
                    settings
                        .sessions
                        .tenant_limits
                        .iter()
                        .filter_map(|(t, l)| Some((t.clone(), l.recording_quota_mb? << 20)))
                        .collect(),
                );
                if settings.shared_files { r.shared() } else { r }
            },
            cfg: settings.sessions.clone(),
            host,
            run_dir,
            downloads_root: settings.files_dir.join("downloads"),
            live: Default::default(),
            slots: Default::default(),
            known: Default::default(),
            opening: Default::default(),
            ending: Default::default(),
            pool: Default::default(),
            shutdown: AtomicBool::new(false),
            policy: crate::policy::Policy::from_settings(&settings.risk),
            approvals,
        });
        let manager = Self(inner.clone());
        let report = manager.reap().await?;
        if report.sessions_closed + report.sandboxes_killed > 0 {
            tracing::info!(?report, "reaper: cleaned up after a previous run");
        }
        tokio::spawn(pool::refill_loop(inner.clone()));
        tokio::spawn(manager.clone().ticker());
        Ok(manager)
    }
}

/// Instances of inotify the host's other programs of the same user may
/// hold beside the browsers (a desktop session, a file manager, the
/// control plane's own).
const INOTIFY_MARGIN: usize = 16;

/// The inotify instances this user may hold: the host's
/// `fs.inotify.max_user_instances`, and, inside a user namespace (a
/// container's), the namespace's own `user.max_inotify_instances`; the
/// kernel holds a process to both. In the host's namespace the second is
/// the first under another name, so it is not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InotifyLimits {
    host: Option<usize>,
    namespace: Option<usize>,
}

impl InotifyLimits {
    fn read() -> Self {
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
}

/// When `browsers` Chromiums (one inotify instance each, in the browser
/// process) do not fit under `limits` with [`INOTIFY_MARGIN`] to spare:
/// the lower limit, and the fix, naming each limit that is too low.
/// BENCHMARKS.md 2026-11-27 20:45: 200 sessions at Linux's default of 128
/// logged `inotify_init() failed: Too many open files`; at 1024, not.
fn inotify_short(browsers: usize, limits: InotifyLimits) -> Option<(usize, String)> {
    let need = browsers + INOTIFY_MARGIN;
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
    let lowest = [limits.host, limits.namespace]
        .into_iter()
        .flatten()
        .min()?;
    (!fixes.is_empty()).then(|| (lowest, fixes.join(", and ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_whose_inotify_limit_is_below_the_browsers_is_told_which_to_raise() {
        let host = |n| InotifyLimits {
            host: Some(n),
            namespace: None,
        };
        // Linux's default against the default max_sessions (150) and pool (2).
        let (limit, fix) = inotify_short(152, host(128)).unwrap();
        assert_eq!(limit, 128);
        assert!(fix.starts_with("sysctl -w fs.inotify.max_user_instances=256 on the host"));
        assert!(!fix.contains("user.max_inotify_instances"), "{fix}");
        // The margin counts: 112 browsers leave 16 for everything else.
        assert_eq!(inotify_short(112, host(128)), None);
        assert_eq!(inotify_short(113, host(128)).unwrap().0, 128);
        assert_eq!(inotify_short(152, host(1024)), None);
        // Inside a container: only the limit that is too low is named.
        let both = |h, n| InotifyLimits {
            host: Some(h),
            namespace: Some(n),
        };
        let (limit, fix) = inotify_short(152, both(1024, 8)).unwrap();
        assert_eq!(limit, 8);
        assert!(
            fix.starts_with("user.max_inotify_instances=256 in this container's"),
            "{fix}"
        );
        let (limit, fix) = inotify_short(152, both(128, 8)).unwrap();
        assert_eq!(limit, 8);
        assert!(
            fix.contains("fs.inotify.max_user_instances=256")
                && fix.contains("user.max_inotify_instances=256"),
            "{fix}"
        );
        assert_eq!(inotify_short(152, both(1024, 4096)), None);
        // A host that tells nothing is not warned about.
        let none = InotifyLimits {
            host: None,
            namespace: None,
        };
        assert_eq!(inotify_short(152, none), None);
    }
}
