//! The periodic jobs, in one place: the orphan reaper and grant GC every
//! minute, screenshot GC, egress-log pruning, expired dashboard sessions and
//! live links a day after they ended every hour. Each runs in its
//! own task, logs what it removed (and its failures) once, and stops when
//! the server does.
//!
//! With several replicas on one database, the jobs on shared rows (the
//! reaper, grant GC, egress-log pruning, dashboard-session GC) run only on
//! the replica holding the housekeeping lock (`cluster`); the screenshot
//! and download GC walks this replica's own data dir, so every replica runs
//! it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::sessions::SessionManager;
use crate::store::Store;

/// One job's work: how many things it removed.
type Work =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = anyhow::Result<usize>> + Send>> + Send + Sync>;

/// The running jobs; dropping or stopping it ends them.
pub struct Housekeeping {
    stop: watch::Sender<bool>,
}

/// What the jobs need.
pub struct Parts {
    /// Runs the reaper and owns the recorder.
    pub sessions: SessionManager,
    /// Grants and the egress log.
    pub store: Store,
    /// How long `audit` screenshots are kept.
    pub recording_retention: Duration,
    /// How long egress log rows are kept.
    pub egress_log_retention: Duration,
    /// Whether this replica holds the housekeeping lock.
    pub leader: watch::Receiver<bool>,
    /// Screenshots and downloads are in `shared_dir`: their GC runs on the
    /// leader alone (else every replica walks the same tree).
    pub shared_files: bool,
}

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
/// How long an ended live link's row is kept (the session page lists it).
const DAY_MS: i64 = 24 * 3600 * 1000;

impl Housekeeping {
    /// Starts every job. The reaper's first pass already ran when the
    /// session engine started; the hourly jobs run once at start.
    pub fn start(parts: Parts) -> Self {
        let (stop, stopped) = watch::channel(false);
        let Parts {
            sessions,
            store,
            recording_retention,
            egress_log_retention,
            leader,
            shared_files,
        } = parts;
        let reaper: Work = {
            let sessions = sessions.clone();
            Arc::new(move || {
                let sessions = sessions.clone();
                Box::pin(async move {
                    let r = sessions.reap().await?;
                    Ok(r.sessions_closed + r.sandboxes_killed)
                })
            })
        };
        let grants: Work = {
            let store = store.clone();
            Arc::new(move || {
                let store = store.clone();
                Box::pin(async move {
                    let (tokens, requests) = crate::grants::gc(&store).await?;
                    Ok(usize::try_from(tokens + requests).unwrap_or(usize::MAX))
                })
            })
        };
        let dashboard: Work = {
            let store = store.clone();
            Arc::new(move || {
                let store = store.clone();
                Box::pin(async move {
                    let now = crate::time::now_ms();
                    let n = store.dashboard_session_gc(now).await?;
                    // Live links a day after they ended (their audit rows stay).
                    let links = store.live_links_prune(now.saturating_sub(DAY_MS)).await?;
                    Ok(usize::try_from(n.saturating_add(links)).unwrap_or(usize::MAX))
                })
            })
        };
        let recording: Work = {
            let sessions = sessions.clone();
            Arc::new(move || {
                let sessions = sessions.clone();
                Box::pin(async move {
                    let frames = sessions.recorder().gc(recording_retention).await?;
                    // Downloads kept for audit follow the same retention.
                    let downloads = sessions.downloads_gc(recording_retention).await?;
                    Ok(frames + downloads)
                })
            })
        };
        let egress: Work = {
            let store = store.clone();
            Arc::new(move || {
                let store = store.clone();
                Box::pin(async move {
                    let keep = i64::try_from(egress_log_retention.as_millis()).unwrap_or(i64::MAX);
                    let cutoff = crate::time::now_ms().saturating_sub(keep);
                    Ok(usize::try_from(store.egress_prune(cutoff).await?).unwrap_or(usize::MAX))
                })
            })
        };
        for (name, every, first_at_start, leader_only, work) in [
            ("reaper", MINUTE, false, true, reaper),
            ("grant gc", MINUTE, false, true, grants),
            ("screenshot gc", HOUR, true, shared_files, recording),
            ("egress log pruning", HOUR, true, true, egress),
            (
                "dashboard session and live link gc",
                HOUR,
                true,
                true,
                dashboard,
            ),
        ] {
            let leader = leader_only.then(|| leader.clone());
            tokio::spawn(run(
                name,
                every,
                first_at_start,
                work,
                leader,
                stopped.clone(),
            ));
        }
        Self { stop }
    }

    /// Ends every job (a job already running finishes first).
    pub fn stop(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for Housekeeping {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

async fn run(
    name: &'static str,
    every: Duration,
    first_at_start: bool,
    work: Work,
    leader: Option<watch::Receiver<bool>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut first = first_at_start;
    loop {
        if !first {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
        first = false;
        if *stopped.borrow() {
            return;
        }
        if leader.as_ref().is_some_and(|l| !*l.borrow()) {
            continue;
        }
        metrics::counter!("cordon_housekeeping_runs_total", "job" => name).increment(1);
        match work().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(job = name, removed = n, "housekeeping: {name} done"),
            Err(e) => {
                tracing::error!(job = name, error = %format!("{e:#}"), "housekeeping: {name} failed")
            }
        }
    }
}
