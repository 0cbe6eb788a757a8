//! What the benchmarks share. Each bench is its own binary and includes
//! this with `mod common;`; a bench uses only part of it.
#![allow(dead_code)]

use std::time::Duration;

use cordon::cdp::BrowserConn;

/// A `usize` setting from the environment, or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Durations measured, summarised by percentile.
pub struct Stats(pub Vec<Duration>);

impl Stats {
    /// The `p` percentile (0–1), nearest rank; zero when nothing was measured.
    pub fn pct(&self, p: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        if v.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[idx]
    }

    /// The median.
    pub fn median(&self) -> Duration {
        self.pct(0.5)
    }

    /// `p50 … ms  p95 … ms  max … ms  (n=…)`.
    pub fn show(&self) -> String {
        format!(
            "p50 {:>7.2} ms  p95 {:>7.2} ms  max {:>7.2} ms  (n={})",
            ms(self.median()),
            ms(self.pct(0.95)),
            ms(self.pct(1.0)),
            self.0.len()
        )
    }

    /// `p50 / p95` in ms, for a table cell.
    pub fn cell(&self) -> String {
        format!("{:.2} / {:.2}", ms(self.median()), ms(self.pct(0.95)))
    }
}

/// This process's resident memory, KiB.
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap()
}

/// Milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The raw baseline: Debian's Chromium with Cordon's flags (no sandbox
/// driver, no proxy) and a fresh profile in `profile`, in its own process
/// group, connected over CDP.
pub async fn raw_chromium(
    profile: &std::path::Path,
    width: u32,
    height: u32,
) -> (BrowserConn, std::process::Child) {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(profile).unwrap();
    let mut args: Vec<String> = cordon::sandbox::chromium::BASE_FLAGS
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push("--no-sandbox".into());
    args.push(format!("--window-size={width},{height}"));
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push("about:blank".into());
    let child = std::process::Command::new("/usr/lib/chromium/chromium")
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let ws = cordon::sandbox::chromium::wait_for_devtools(
        profile,
        "127.0.0.1",
        Duration::from_secs(20),
        || true,
    )
    .await
    .unwrap();
    (BrowserConn::connect(&ws).await.unwrap(), child)
}

/// A raw Chromium (see [`raw_chromium`]) at 1280×720 with its first tab
/// loaded with `url`.
pub async fn raw_page(
    profile: &std::path::Path,
    url: &str,
) -> (BrowserConn, std::process::Child, chromiumoxide::Page) {
    let (conn, child) = raw_chromium(profile, 1280, 720).await;
    let page = conn.first_page().await.unwrap();
    cordon::cdp::navigate(
        &page,
        url,
        cordon::cdp::WaitUntil::Load,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    (conn, child, page)
}

/// Serves `app` on a task of its own until the sender is used (or dropped).
pub fn serve(
    app: cordon::startup::Application,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        app.run_until(async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (stop, task)
}
