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

/// Counts from a comma-separated setting (`1,4,8`), or `default`'s;
/// zeros dropped. A count that is not a number stops the bench, naming
/// the setting.
pub fn env_counts(name: &str, default: &str) -> Vec<usize> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: counts apart by commas, e.g. {default}"))
        })
        .filter(|&n| n > 0)
        .collect()
}

/// The bench's async runtime: `BENCH_WORKERS` worker threads (default 2;
/// 0 for one thread that runs everything, the shape `runtime_workers = 1`
/// gives `cordon serve`). Its threads are named `bench`, so a section can
/// tell their CPU from a Cordon running on a runtime of its own.
pub fn runtime() -> tokio::runtime::Runtime {
    let workers = env_usize("BENCH_WORKERS", 2);
    let built = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("bench")
            .enable_all()
            .build()
    };
    built.expect("the bench's runtime")
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

/// A process's proportional set size (PSS, `smaps_rollup`), KiB: its
/// private pages and its share of the pages it shares. 0 once it is gone.
pub fn pss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The memory `pid` has written and holds alone (`Private_Dirty` of its
/// `smaps_rollup`: heap, stacks, its own copies), KiB: what one more such
/// process costs. PSS and `Private_Clean` also count the pages of
/// Chromium's own code a lone browser touched, which every browser
/// running at the time shares; at 200 sessions that share is a few
/// hundred KiB each, for one browser alone it is over 100 MiB.
pub fn dirty_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Private_Dirty:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Every process below `pid` (children, their children, …), not `pid`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        // `pid (comm) state ppid …`: the comm may hold spaces and ')'.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            continue;
        };
        parent_of.push((p, ppid));
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parent_of {
            if parent == p {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

/// The processes of each session's cgroup (`cordon-…` beside or below
/// this process's memory cgroup, v1 or v2), keyed by the cgroup's name.
/// Empty where the sandboxes get no cgroup.
pub fn session_cgroups() -> Vec<(String, Vec<u32>)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let base = match controllers {
            "memory" => std::path::PathBuf::from("/sys/fs/cgroup/memory"),
            "" => std::path::PathBuf::from("/sys/fs/cgroup"),
            _ => continue,
        };
        let here = base.join(path.trim_start_matches('/'));
        dirs.push(here.clone());
        if let Some(up) = here.parent() {
            dirs.push(up.to_path_buf());
        }
    }
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("cordon-") || out.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let procs = std::fs::read_to_string(e.path().join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect::<Vec<u32>>();
            if !procs.is_empty() {
                out.push((name, procs));
            }
        }
    }
    out
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
    raw_chromium_with(profile, width, height, &[]).await
}

/// [`raw_chromium`] with `extra` flags after Cordon's (a later
/// `--disable-features=` replaces an earlier one: repeat Cordon's list);
/// an entry `!FLAG` leaves Cordon's `FLAG` out instead.
pub async fn raw_chromium_with(
    profile: &std::path::Path,
    width: u32,
    height: u32,
    extra: &[String],
) -> (BrowserConn, std::process::Child) {
    let left_out: Vec<&str> = extra.iter().filter_map(|f| f.strip_prefix('!')).collect();
    for flag in &left_out {
        assert!(
            cordon::sandbox::chromium::BASE_FLAGS.contains(flag),
            "!{flag}: not one of Cordon's flags"
        );
    }
    let mut flags: Vec<String> = cordon::sandbox::chromium::BASE_FLAGS
        .iter()
        .filter(|f| !left_out.contains(f))
        .map(|s| s.to_string())
        .collect();
    flags.extend(extra.iter().filter(|f| !f.starts_with('!')).cloned());
    raw_chromium_flags(profile, width, height, flags).await
}

/// A raw Chromium with exactly `flags` (and `--no-sandbox`, the window
/// size, the profile and `about:blank` after them), connected as any CDP
/// client connects (no dialog follower).
pub async fn raw_chromium_flags(
    profile: &std::path::Path,
    width: u32,
    height: u32,
    flags: Vec<String>,
) -> (BrowserConn, std::process::Child) {
    let (ws, child) = raw_chromium_ws(profile, width, height, flags).await;
    (BrowserConn::connect_unfollowed(&ws).await.unwrap(), child)
}

/// [`raw_chromium`] connected as Cordon connects to a session's browser:
/// every tab's dialogs followed, a new tab held until it is set up, through
/// a meter in front (`cdp::meter::front`).
pub async fn raw_chromium_followed(
    profile: &std::path::Path,
) -> (BrowserConn, std::process::Child) {
    let flags = cordon::sandbox::chromium::BASE_FLAGS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (ws, child) = raw_chromium_ws(profile, 1280, 720, flags).await;
    (
        BrowserConn::connect(&ws, cordon::cdp::meter::Reach::Tcp)
            .await
            .unwrap(),
        child,
    )
}

/// A raw Chromium started as [`raw_chromium_flags`] starts it: its
/// DevTools WebSocket URL.
async fn raw_chromium_ws(
    profile: &std::path::Path,
    width: u32,
    height: u32,
    flags: Vec<String>,
) -> (String, std::process::Child) {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(profile).unwrap();
    let mut args = flags;
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
    (ws, child)
}

/// A raw Chromium (see [`raw_chromium`]) at 1280×720 with its first tab
/// loaded with `url`.
pub async fn raw_page(
    profile: &std::path::Path,
    url: &str,
) -> (BrowserConn, std::process::Child, chromiumoxide::Page) {
    raw_page_with(profile, url, &[]).await
}

/// [`raw_page`] with `extra` flags (see [`raw_chromium_with`]).
pub async fn raw_page_with(
    profile: &std::path::Path,
    url: &str,
    extra: &[String],
) -> (BrowserConn, std::process::Child, chromiumoxide::Page) {
    let (conn, child) = raw_chromium_with(profile, 1280, 720, extra).await;
    let page = conn.first_page().await.unwrap();
    load(&page, url).await;
    (conn, child, page)
}

/// Loads `url` in `page` (until `load`, 10 s at most).
pub async fn load(page: &chromiumoxide::Page, url: &str) {
    cordon::cdp::navigate(
        page,
        url,
        cordon::cdp::WaitUntil::Load,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
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
