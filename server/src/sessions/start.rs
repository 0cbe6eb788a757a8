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
        if !driver.caps().remote
            && let Some(limit) = inotify_instances()
            && let Some(browsers) = inotify_short(
                settings.sessions.max_total + settings.sessions.pool_size,
                limit,
            )
        {
            tracing::warn!(
                limit,
                browsers,
                "this user may hold {limit} inotify instances (fs.inotify.max_user_instances, or \
                 a container's user.max_inotify_instances), and max_sessions with the pool allow \
                 {browsers} browsers: each Chromium holds one, and past the limit its file \
                 watching fails and a browser may crash at start. Fix: \
                 sysctl fs.inotify.max_user_instances={} (in /etc/sysctl.d/ to keep it)",
                (browsers + INOTIFY_MARGIN).next_power_of_two()
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

/// How many inotify instances this user may hold: the host's
/// `fs.inotify.max_user_instances`, or the user namespace's own
/// `user.max_inotify_instances` (a container's) when that is lower.
fn inotify_instances() -> Option<usize> {
    let read =
        |path: &str| -> Option<usize> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    [
        read("/proc/sys/fs/inotify/max_user_instances"),
        read("/proc/sys/user/max_inotify_instances"),
    ]
    .into_iter()
    .flatten()
    .min()
}

/// `browsers` when that many Chromiums (one inotify instance each, in the
/// browser process) do not fit under `limit` with [`INOTIFY_MARGIN`] to
/// spare. BENCHMARKS.md 2026-11-27 20:45: 200 sessions at Linux's default
/// of 128 logged `inotify_init() failed: Too many open files` and one
/// browser crashed at start (SIGSEGV; Cordon retried it), as in two
/// earlier runs; at 1024, neither.
fn inotify_short(browsers: usize, limit: usize) -> Option<usize> {
    (browsers + INOTIFY_MARGIN > limit).then_some(browsers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_whose_inotify_limit_is_below_the_browsers_is_told() {
        // Linux's default against the default max_sessions (150) and pool (2).
        assert_eq!(inotify_short(152, 128), Some(152));
        // The margin counts: 112 browsers leave 16 for everything else.
        assert_eq!(inotify_short(112, 128), None);
        assert_eq!(inotify_short(113, 128), Some(113));
        assert_eq!(inotify_short(152, 1024), None);
    }
}
