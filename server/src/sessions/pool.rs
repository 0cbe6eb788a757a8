//! The warm pool: browsers started ahead of demand, each used for exactly
//! one session and then destroyed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use chromiumoxide::Page;
use tokio::sync::Notify;

use crate::cdp::BrowserConn;
use crate::domain::SandboxId;
use crate::egress::EgressListener;
use crate::sandbox::{EgressReach, Sandbox, SandboxSpec};
use crate::sessions::Viewport;
use crate::store::sessions::SandboxRow;

use super::Inner;

/// A started, connected browser nobody uses yet.
pub(super) struct Warm {
    /// The sandbox's id as drawn (the driver's [`Sandbox`] holds its text).
    pub sandbox_id: SandboxId,
    pub sandbox: Sandbox,
    pub conn: BrowserConn,
    pub page: Page,
    pub egress: EgressListener,
    /// The viewport its window was sized for.
    pub viewport: Viewport,
}

#[derive(Default)]
pub(super) struct Pool {
    ready: std::sync::Mutex<VecDeque<Warm>>,
    starting: AtomicUsize,
    /// When a session last took a browser.
    last_take: std::sync::Mutex<Option<Instant>>,
    pub wake: Notify,
}

impl Pool {
    /// The oldest warm browser, if one is ready (the caller checks that it
    /// is still alive), and wakes the refill.
    pub fn take(&self) -> Option<Warm> {
        let mut ready = self.ready.lock().expect("pool lock");
        let warm = ready.pop_front();
        drop(ready);
        if warm.is_some() {
            *self.last_take.lock().expect("pool lock") = Some(Instant::now());
        }
        self.wake.notify_one();
        warm
    }

    pub fn len(&self) -> usize {
        self.ready.lock().expect("pool lock").len()
    }

    pub fn starting(&self) -> usize {
        self.starting.load(Ordering::SeqCst)
    }

    /// The warm browsers' sandboxes.
    pub fn sandboxes(&self) -> Vec<Sandbox> {
        self.ready
            .lock()
            .expect("pool lock")
            .iter()
            .map(|w| w.sandbox.clone())
            .collect()
    }

    pub fn drain(&self) -> Vec<Warm> {
        self.ready.lock().expect("pool lock").drain(..).collect()
    }
}

/// Starts one browser, trying a second time when the first start fails.
///
/// About one Chromium start in 150 crashes on its own (SIGSEGV during
/// start-up, exit 139, measured here under bwrap: 1 of 150 cold opens in a
/// row). That was the cold open behind the pool test's rare failure in CI.
/// A second, fresh sandbox is almost never unlucky too; a browser that
/// cannot start at all still fails after two tries.
pub(super) async fn start_browser(inner: &Inner, state: &str) -> anyhow::Result<Warm> {
    match start_once(inner, state).await {
        Ok(warm) => Ok(warm),
        Err(e) if !inner.shutting_down() => {
            tracing::warn!(error = %format!("{e:#}"), "a browser failed to start; trying once more");
            metrics::counter!("cordon_browser_start_retries_total").increment(1);
            start_once(inner, state)
                .await
                .map_err(|again| again.context(format!("and before that: {e:#}")))
        }
        Err(e) => Err(e),
    }
}

/// Starts one browser: egress listener, sandbox, CDP connection, first page.
/// The sandbox is recorded (for the reaper) as soon as it has a pid.
async fn start_once(inner: &Inner, state: &str) -> anyhow::Result<Warm> {
    let sandbox_id = SandboxId::generate();
    let id = sandbox_id.to_string();
    inner.known.lock().expect("known lock").insert(id.clone());
    let result = start_inner(inner, sandbox_id, state).await;
    if result.is_err() {
        inner.known.lock().expect("known lock").remove(&id);
    }
    result
}

async fn start_inner(inner: &Inner, sandbox_id: SandboxId, state: &str) -> anyhow::Result<Warm> {
    let id = sandbox_id.to_string();
    // A bwrap browser reaches its listener only through this process's own
    // forwarder; any other client of that port is someone else.
    let caps = inner.driver.caps();
    let egress = match caps.egress {
        EgressReach::Private => inner.egress.listen_private(id.clone()).await?,
        // Every pod can reach the listener's address: it serves its own
        // pod's address alone, once known (below).
        EgressReach::Pod => inner.egress.listen_for_pod(id.clone()).await?,
        EgressReach::Loopback => inner.egress.listen(id.clone()).await?,
    };
    // A sandbox on another engine: the engine gets the numbers.
    let made = if caps.remote {
        Ok(inner.limits.remote())
    } else {
        inner.limits.create(&id)
    };
    let limits = match made {
        Ok(_) if !inner.limits.enabled() => None,
        Ok(l) => Some(Arc::new(l)),
        Err(e) => {
            egress.close().await;
            return Err(anyhow::Error::from(e).context("cannot set up the sandbox's limits"));
        }
    };
    let spec = SandboxSpec {
        limits: limits.clone(),
        egress: egress.port(),
        id: id.clone(),
        proxy: egress.addr,
        runtime_dir: inner.run_dir.join(&id),
        window: (1280, 720),
    };
    let sandbox = match inner.driver.start(spec).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            // The driver stopped what it started; what is ours goes too.
            if let Some(limits) = &limits {
                limits.remove().await;
            }
            egress.close().await;
            return Err(e);
        }
    };
    if caps.egress == EgressReach::Pod {
        // The browser's CDP address is its pod's.
        let pod = url::Url::parse(&sandbox.cdp_url)
            .ok()
            .and_then(|u| match u.host()? {
                url::Host::Ipv4(ip) => Some(std::net::IpAddr::V4(ip)),
                url::Host::Ipv6(ip) => Some(std::net::IpAddr::V6(ip)),
                url::Host::Domain(_) => None,
            });
        match pod {
            Some(ip) => {
                egress.admit_only(ip);
            }
            None => tracing::warn!(
                "the browser pod's address is not an IP address: its egress listener serves no one"
            ),
        }
    }
    let row = SandboxRow {
        id: sandbox_id.clone(),
        driver: sandbox.driver.as_str().to_owned(),
        host: inner.host.clone(),
        pid: sandbox.pid.map(i64::from),
        marker: sandbox.marker.clone(),
        state: state.to_owned(),
        session_id: None,
        cdp_url: None,
    };
    let viewport = Viewport::default();
    let connected = async {
        inner.store.sandbox_insert(&row, &sandbox.cdp_url).await?;
        let conn = BrowserConn::connect(&sandbox.cdp_url, sandbox.cdp_reach()).await?;
        // Downloads are refused unless a later policy allows them.
        let (denied, page) = tokio::join!(conn.deny_downloads(), conn.first_page());
        denied?;
        let page = page?;
        // The window sized for the usual viewport ahead of time: an open
        // that asks for it has nothing to set (an override would cost
        // every frame: `cdp::size_viewport`).
        crate::cdp::size_viewport(&page, viewport.width, viewport.height)
            .await
            .context("failed to size the browser's window")?;
        anyhow::Ok((conn, page))
    }
    .await;
    match connected {
        Ok((conn, page)) => Ok(Warm {
            sandbox_id,
            sandbox,
            conn,
            page,
            egress,
            viewport,
        }),
        Err(e) => {
            if let Err(e) = inner.driver.stop(&sandbox).await {
                tracing::warn!(error = %format!("{e:#}"), sandbox.id = %id, "failed to stop a sandbox that did not connect");
            }
            if let Some(limits) = &sandbox.limits {
                limits.remove().await;
            }
            if let Err(e) = inner.store.sandbox_stopped(&sandbox_id).await {
                tracing::error!(error = %format!("{e:#}"), sandbox.id = %id, "failed to record a sandbox's stop");
            }
            egress.close().await;
            Err(e)
        }
    }
}

/// Keeps `pool_size` browsers ready until shutdown. A replacement starts
/// `pool_refill_delay` after the last take: a Chromium start takes both
/// cores of a small host for a quarter second, which would otherwise slow
/// the new session's smoke probe and first page load by half.
pub(super) async fn refill_loop(inner: Arc<Inner>) {
    let target = inner.cfg.pool_size;
    loop {
        if inner.shutting_down() {
            return;
        }
        let last_take = *inner.pool.last_take.lock().expect("pool lock");
        if let Some(at) = last_take {
            let since = at.elapsed();
            // One pause per round, however many takes follow, so a steady
            // stream of opens cannot starve the pool.
            if since < inner.cfg.pool_refill_delay {
                tokio::time::sleep(inner.cfg.pool_refill_delay - since).await;
                if inner.shutting_down() {
                    return;
                }
            }
        }
        while inner.pool.len() + inner.pool.starting.load(Ordering::SeqCst) < target
            && !inner.shutting_down()
        {
            inner.pool.starting.fetch_add(1, Ordering::SeqCst);
            let inner2 = inner.clone();
            tokio::spawn(async move {
                match start_browser(&inner2, "warm").await {
                    Ok(warm) if !inner2.shutting_down() => {
                        inner2.pool.ready.lock().expect("pool lock").push_back(warm);
                    }
                    Ok(warm) => inner2.dispose(warm).await,
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "warm pool: a browser failed to start");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
                inner2.pool.starting.fetch_sub(1, Ordering::SeqCst);
                inner2.pool.wake.notify_one();
            });
        }
        inner.pool.wake.notified().await;
    }
}
