//! Server-side render time of each dashboard page, and the size of the
//! browser bundle.
//!
//! `cargo bench -p cordon --bench pages` (release build). Starts the real
//! application on SQLite in a temporary dir with a few tenants, sessions'
//! worth of audit events and a logged-in admin (a dashboard session record
//! as a passkey login leaves it), then GETs each page `BENCH_ITER` times
//! (default 50) over loopback HTTP and reports the median and p95 from
//! request to the last byte of the rendered HTML (every resource the page
//! reads is awaited before the HTML is complete). Then it reports the wasm
//! bundle in `target/site/pkg` as built (raw and `gzip -9`); build it with
//! `bash infra/scripts/build-site.sh release` first for the shipped size.

use std::time::{Duration, Instant};

use cordon::audit::{Actor, NewEvent};
use cordon::config::Settings;
use cordon::startup::Application;

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let iters: usize = std::env::var("BENCH_ITER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let tmp = tempfile::tempdir().unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let env = vec![
        ("CORDON_BIND".to_string(), "127.0.0.1:0".to_string()),
        (
            "CORDON_DATA_DIR".to_string(),
            tmp.path().display().to_string(),
        ),
        ("CORDON_POOL_SIZE".to_string(), "0".to_string()),
        ("CORDON_LOG_LEVEL".to_string(), "warn".to_string()),
        (
            "CORDON_SITE_ROOT".to_string(),
            root.join("target/site").display().to_string(),
        ),
    ];
    let app = Application::build(Settings::load_from(None, env).unwrap())
        .await
        .unwrap();
    let addr = app.local_addr();
    let state = app.state();
    let store = state.store.clone();
    for t in ["acme", "globex", "initech"] {
        cordon::tenants::create(&store, &Actor::Cli, &t.parse().unwrap(), None)
            .await
            .unwrap();
        cordon::tenants::create_key(&store, &Actor::Cli, &t.parse().unwrap(), "bench")
            .await
            .unwrap();
    }
    for i in 0..2000 {
        store
            .audit_append(NewEvent::new(
                Actor::System,
                format!("bench.event{}", i % 7),
            ))
            .await
            .unwrap();
    }
    // An admin and their dashboard session.
    let op = cordon::store::operators::OperatorRow {
        id: cordon::domain::OperatorId::generate(),
        name: "bench".into(),
        role: app::api::auth::Role::Admin,
        user_handle: "00000000-0000-4000-8000-000000000000".into(),
        created_at: cordon::time::now_ms(),
        created_by: "bench".into(),
        disabled_at: None,
        last_login_at: None,
        passkeys: 0,
    };
    store.operator_create(&op).await.unwrap();
    let sid = tower_sessions::session::Id::default().to_string();
    let data = serde_json::json!({ "op": op.id.as_str(), "login_at": cordon::time::now_ms() });
    store
        .dashboard_session_save(
            &cordon::ids::token_hash(&sid),
            Some(&op.id),
            &data.to_string(),
            cordon::time::now_ms() + 3_600_000,
        )
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until(async {
        let _ = rx.await;
    }));
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let cookie = format!("cordon_session={sid}");
    println!("page render, {iters} requests each (median / p95), SQLite, 2,000 audit events");
    for page in [
        "/",
        "/sessions",
        "/grants",
        "/credentials",
        "/audit",
        "/tenants",
        "/operators",
        "/account",
        "/login",
    ] {
        let url = format!("http://localhost:{}{page}", addr.port());
        let mut times = Vec::with_capacity(iters);
        for _ in 0..iters + 3 {
            let start = Instant::now();
            let res = http
                .get(&url)
                .header("cookie", &cookie)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{page}");
            let body = res.text().await.unwrap();
            times.push(start.elapsed());
            assert!(body.contains("</html>"), "{page}");
        }
        let mut times = times.split_off(3); // warm-up
        times.sort();
        println!(
            "{page:<14} {:>10} {:>10}",
            ms(pct(&times, 0.5)),
            ms(pct(&times, 0.95))
        );
    }
    let _ = tx.send(());
    server.await.unwrap().unwrap();

    let wasm = root.join("target/site/pkg/cordon_bg.wasm");
    match std::fs::metadata(&wasm) {
        Ok(m) => {
            let gz = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("gzip -9 -c '{}' | wc -c", wasm.display()))
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
                .unwrap_or(0);
            println!(
                "wasm bundle: {:.0} KiB raw, {:.0} KiB gzip -9 ({})",
                m.len() as f64 / 1024.0,
                gz as f64 / 1024.0,
                wasm.display()
            );
        }
        Err(_) => println!("wasm bundle: not built (run infra/scripts/build-site.sh release)"),
    }
}
