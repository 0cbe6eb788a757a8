//! Starting the engine: the sandbox driver and its limits (warning where
//! they do not hold), the recorder, the reaper's pass over what a previous
//! run left, the warm pool and the lifecycle ticker.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;

use super::{EngineSettings, Inner, SessionManager, pool};
use crate::egress::EgressGuard;
use crate::recording::Recorder;
use crate::sandbox::inotify;
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
            && let Some((limit, fix)) = inotify::short(browsers, inotify::Limits::read())
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
