//! One replica against two on one PostgreSQL, and the internal hop's cost.
//!
//! `cargo bench -p cordon --bench replicas` (needs `CORDON_TEST_POSTGRES_URL`,
//! e.g. from `infra/scripts/test-postgres.sh start`; env: `BENCH_ITER` calls
//! per hop figure, default 300; `BENCH_OPENS` sessions per throughput run,
//! default 24; `BENCH_IDLE` sessions held open at once, default 30;
//! `BENCH_DRIVER`, default `bwrap`). Each replica is the real `cordon serve`
//! binary on a loopback port, as in production. Prints medians and p95s;
//! BENCHMARKS.md keeps the figures.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Stats, env_usize, ms};
use serde_json::{Value, json};

const SECRET: &str = "bench-cluster-secret-of-at-least-32-chars";

struct Replica {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Replica {
    fn start(db: &str, key: &str, name: &str, driver: &str) -> Self {
        use std::io::{BufRead, BufReader};
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
            .current_dir(dir.path())
            .arg("serve")
            .env_remove("RUST_LOG")
            .env("CORDON_BIND", "127.0.0.1:0")
            .env("CORDON_LOG_FORMAT", "json")
            .env("CORDON_LOG_LEVEL", "info")
            .env("CORDON_EGRESS_RESOLVER", "loopback-only")
            .env("CORDON_DATABASE_URL", db)
            .env("CORDON_MASTER_KEY", key)
            .env("CORDON_REPLICA_NAME", name)
            .env("CORDON_CLUSTER_SECRET", SECRET)
            .env("CORDON_SANDBOX_DRIVER", driver)
            .env("CORDON_POOL_SIZE", "2")
            .env("CORDON_MAX_SESSIONS", "200")
            .env("CORDON_MAX_SESSIONS_PER_TENANT", "400")
            .env(
                "CORDON_SITE_ROOT",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../target/site"),
            )
            // The first start prints an enrollment link there.
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cordon serve starts");
        let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = log.next().expect("a log line").expect("utf-8");
            let v: Value = serde_json::from_str(&line).unwrap_or_default();
            if let Some(a) = v["addr"].as_str() {
                break a.to_owned();
            }
        };
        // Drain the log so the pipe never fills.
        std::thread::spawn(move || for _ in log.map_while(Result::ok) {});
        Self {
            child,
            addr,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

fn cli(db: &str, key: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .current_dir(dir.path())
        .args(args)
        .env_remove("RUST_LOG")
        .env("CORDON_LOG_LEVEL", "warn")
        .env("CORDON_DATABASE_URL", db)
        .env("CORDON_MASTER_KEY", key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn fresh_db(admin: &str) -> String {
    use sqlx::Connection;
    let name = format!("cordon_bench_{}", hex::encode(rand::random::<[u8; 6]>()));
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .unwrap();
    format!("{}/{name}", admin.rsplit_once('/').unwrap().0)
}

/// Opens a clean session on `r`: its id, or the refusal's status and body.
async fn try_open(http: &reqwest::Client, key: &str, r: &Replica) -> Result<String, String> {
    let res = http
        .post(r.url("/api/sessions"))
        .bearer_auth(key)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    match body["session_id"].as_str() {
        Some(sid) if status == 201 => Ok(sid.to_owned()),
        _ => Err(format!("{status}: {body}")),
    }
}

async fn open(http: &reqwest::Client, key: &str, r: &Replica) -> String {
    try_open(http, key, r)
        .await
        .unwrap_or_else(|e| panic!("open: {e}"))
}

async fn close(http: &reqwest::Client, key: &str, r: &Replica, sid: &str) {
    let res = http
        .delete(r.url(&format!("/api/sessions/{sid}")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
}

/// Sessions opened per second by `agents` concurrent agents spread over
/// `replicas`, `total` in all (each closed again after its open).
async fn throughput(
    http: &reqwest::Client,
    key: &str,
    replicas: &[&Replica],
    total: usize,
    agents: usize,
) -> (f64, Stats) {
    let started = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..agents {
        let next = next.clone();
        let http = http.clone();
        let key = key.to_owned();
        let urls: Vec<String> = replicas.iter().map(|r| r.addr.clone()).collect();
        tasks.push(tokio::spawn(async move {
            let mut times = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= total {
                    return times;
                }
                let addr = &urls[i % urls.len()];
                let t = Instant::now();
                let res = http
                    .post(format!("http://{addr}/api/sessions"))
                    .bearer_auth(&key)
                    .json(&json!({}))
                    .send()
                    .await
                    .unwrap();
                let status = res.status();
                let body: Value = res.json().await.unwrap();
                assert_eq!(status, 201, "{body}");
                times.push(t.elapsed());
                let sid = body["session_id"].as_str().unwrap();
                http.delete(format!("http://{addr}/api/sessions/{sid}"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap();
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    (rate, Stats(all))
}

fn mem_available_mib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Opens `n` sessions spread over `replicas` and holds them: how many
/// opened, how long it took, the memory they took; then closes them.
async fn idle(http: &reqwest::Client, key: &str, replicas: &[&Replica], n: usize) -> String {
    let before = mem_available_mib();
    let started = Instant::now();
    let mut open_ones = Vec::new();
    let mut failed = 0;
    for i in 0..n {
        let r = replicas[i % replicas.len()];
        match try_open(http, key, r).await {
            Ok(sid) => open_ones.push((i % replicas.len(), sid)),
            Err(_) => failed += 1,
        }
    }
    let took = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = before.saturating_sub(mem_available_mib());
    let held = open_ones.len();
    for (ri, sid) in open_ones {
        close(http, key, replicas[ri], &sid).await;
    }
    format!(
        "{held}/{n} held open ({failed} refused), opened in {:.1} s, {used} MiB ({:.0} MiB each)",
        took.as_secs_f64(),
        used as f64 / held.max(1) as f64
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let admin = std::env::var("CORDON_TEST_POSTGRES_URL")
        .expect("CORDON_TEST_POSTGRES_URL (infra/scripts/test-postgres.sh start)");
    let iters = env_usize("BENCH_ITER", 300);
    let opens = env_usize("BENCH_OPENS", 24);
    let idle_n = env_usize("BENCH_IDLE", 30);
    let driver = std::env::var("BENCH_DRIVER").unwrap_or_else(|_| "bwrap".into());
    let db = fresh_db(&admin).await;
    let key = hex::encode(rand::random::<[u8; 32]>());
    cli(&db, &key, &["tenant", "create", "bench"]);
    let agent = cli(&db, &key, &["apikey", "create", "--tenant", "bench"]);
    let http = reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("replicas bench: driver {driver}, {cpus} cores, one PostgreSQL on loopback");

    let a = Replica::start(&db, &key, "a", &driver);
    let b = Replica::start(&db, &key, "b", &driver);
    // Let both fill their warm pools.
    tokio::time::sleep(Duration::from_secs(5)).await;

    // The hop: the same calls on a session of `a`, sent to `a` and to `b`.
    let sid = open(&http, &agent, &a).await;
    for (what, method, path, body) in [
        (
            "GET session",
            reqwest::Method::GET,
            format!("/api/sessions/{sid}"),
            None,
        ),
        (
            "GET tabs",
            reqwest::Method::GET,
            format!("/api/sessions/{sid}/tabs"),
            None,
        ),
        (
            "POST read_dom",
            reqwest::Method::POST,
            format!("/api/sessions/{sid}/read_dom"),
            Some(json!({})),
        ),
    ] {
        let mut direct = Vec::new();
        let mut hop = Vec::new();
        for i in 0..iters + 20 {
            for (via, out) in [(&a, &mut direct), (&b, &mut hop)] {
                let mut req = http
                    .request(method.clone(), via.url(&path))
                    .bearer_auth(&agent);
                if let Some(b) = &body {
                    req = req.json(b);
                }
                let t = Instant::now();
                let res = req.send().await.unwrap();
                assert!(res.status().is_success(), "{what}: {}", res.status());
                let _ = res.bytes().await.unwrap();
                if i >= 20 {
                    out.push(t.elapsed());
                }
            }
        }
        let (d, h) = (Stats(direct), Stats(hop));
        println!(
            "hop  {what:<14} direct {}  via the other replica {}  added p50 {:.3} ms",
            d.show(),
            h.show(),
            ms(h.median()) - ms(d.median())
        );
    }
    close(&http, &agent, &a, &sid).await;

    // Throughput and idle capacity: one replica, then two.
    for (label, set) in [("one replica ", vec![&a]), ("two replicas", vec![&a, &b])] {
        let (rate, stats) = throughput(&http, &agent, &set, opens, 4).await;
        println!(
            "open {label}: {rate:.2} sessions/s (4 agents, {opens} opens, each closed after) open {}",
            stats.show()
        );
    }
    for (label, set) in [("one replica ", vec![&a]), ("two replicas", vec![&a, &b])] {
        println!("idle {label}: {}", idle(&http, &agent, &set, idle_n).await);
    }
    drop(a);
    drop(b);
}
