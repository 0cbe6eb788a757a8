//! Session engine benchmark: Cordon against raw CDP on the same machine.
//!
//! `cargo bench -p cordon --bench sessions` (env: `BENCH_ITER` rounds per
//! figure, default 20; `BENCH_CAPACITY` sessions for the capacity run,
//! default 200, 0 skips it; `BENCH_HOLD_S`, how long they are held, default 60; `BENCH_DRIVER`, default `auto`). Prints medians and p95s; BENCHMARKS.md keeps
//! the figures. Everything runs on 127.0.0.1; no DNS leaves the machine.

use std::time::{Duration, Instant};

use axum::response::Html;
use chromiumoxide::cdp::browser_protocol::input::{DispatchKeyEventParams, DispatchKeyEventType};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use cordon::cdp::BrowserConn;
use cordon::config::Settings;
use cordon::startup::Application;
use serde_json::{Value, json};

mod common;
use common::{Stats, env_usize, ms, rss_kib};

/// A heading that counts the clicks on it: each click repaints.
const COUNT: &str = "<!doctype html><html><head><title>Count</title></head><body><h1 onclick=\"this.textContent = 'clicked ' + (window.n = (window.n || 0) + 1)\">Count</h1><p>Hello</p></body></html>";

/// A page 3000 px tall of random pixels: its full-page PNG is about as
/// large as its pixels (some 15 MB), a heavy neighbour's screenshot.
const NOISE: &str = "<!doctype html><html><head><title>Noise</title></head><body style=margin:0><canvas id=c width=1280 height=3000 style=display:block></canvas><script>\
const x = document.getElementById('c').getContext('2d'); const d = x.createImageData(1280, 3000);\
for (let i = 0; i < d.data.length; i += 65536) crypto.getRandomValues(d.data.subarray(i, i + 65536));\
for (let i = 3; i < d.data.length; i += 4) d.data[i] = 255; x.putImageData(d, 0, 0);</script></body></html>";

const PAGE: &str = "<!doctype html><html><head><title>Bench</title></head><body><h1>Bench</h1><input id=i><p>Hello</p></body></html>";

async fn page_server() -> std::net::SocketAddr {
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { Html(PAGE) }))
        .route("/count", axum::routing::get(|| async { Html(COUNT) }))
        .route("/noise", axum::routing::get(|| async { Html(NOISE) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> Value {
        let res = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        let v: Value = res.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }
    async fn open(&self) -> String {
        self.post("/api/sessions", json!({ "record": "off" })).await["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
    async fn close(&self, sid: &str) {
        self.http
            .delete(format!("{}/api/sessions/{sid}", self.base))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
    }
}

/// An API key of the tenant `bench`, created with it when it is new.
async fn bench_key(store: &cordon::store::Store) -> String {
    let tenant: cordon::domain::TenantId = "bench".parse().unwrap();
    let _ = store.tenant_create(&tenant, "bench").await;
    store.api_key_create(&tenant, "bench").await.unwrap().1
}

/// The settings every Cordon of this bench runs with, `extra` last.
fn cordon_env(
    data: &std::path::Path,
    page: std::net::SocketAddr,
    pool: usize,
    extra_env: &[(&str, String)],
) -> Vec<(String, String)> {
    let mut env = vec![
        ("CORDON_BIND".to_string(), "127.0.0.1:0".to_string()),
        ("CORDON_DATA_DIR".to_string(), data.display().to_string()),
        ("CORDON_POOL_SIZE".to_string(), pool.to_string()),
        ("CORDON_EGRESS_ALLOW".to_string(), page.to_string()),
        (
            "CORDON_EGRESS_RESOLVER".to_string(),
            "loopback-only".to_string(),
        ),
        ("CORDON_LOG_LEVEL".to_string(), "warn".to_string()),
        ("CORDON_MAX_SESSIONS".to_string(), "400".to_string()),
        (
            "CORDON_MAX_SESSIONS_PER_TENANT".to_string(),
            "400".to_string(),
        ),
        ("CORDON_SESSION_IDLE_S".to_string(), "3600".to_string()),
        (
            "CORDON_SANDBOX_DRIVER".to_string(),
            std::env::var("BENCH_DRIVER").unwrap_or_else(|_| "auto".into()),
        ),
    ];
    env.retain(|(k, _)| !extra_env.iter().any(|(e, _)| e == k));
    env.extend(extra_env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    env
}

async fn start_cordon(
    data: &std::path::Path,
    page: std::net::SocketAddr,
    pool: usize,
    extra_env: &[(&str, String)],
) -> (
    Api,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
    cordon::state::AppState,
) {
    let env = cordon_env(data, page, pool, extra_env);
    let app = Application::build(Settings::load_from(None, env).unwrap())
        .await
        .unwrap();
    let base = format!("http://{}", app.local_addr());
    let state = app.state();
    let kept = state.clone();
    let key = bench_key(&state.store).await;
    let (tx, task) = common::serve(app);
    (
        Api {
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            base,
            key,
        },
        tx,
        task,
        kept,
    )
}

/// Raw: spawn Chromium with the same flags (no proxy) and connect over CDP.
/// Returns (spawn → connected, connection, child).
async fn raw_spawn(dir: &std::path::Path, i: usize) -> (Instant, BrowserConn, std::process::Child) {
    let t = Instant::now();
    let (conn, child) = common::raw_chromium(&dir.join(format!("raw-{i}")), 1280, 720).await;
    (t, conn, child)
}

/// Raw cold: spawn, connect, load the page.
async fn raw_cold(
    page: &str,
    dir: &std::path::Path,
    i: usize,
) -> (Duration, BrowserConn, std::process::Child) {
    let (t, conn, child) = raw_spawn(dir, i).await;
    let p = conn.first_page().await.unwrap();
    cordon::cdp::navigate(
        &p,
        page,
        cordon::cdp::WaitUntil::Load,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
    (t.elapsed(), conn, child)
}

fn kill(mut child: std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
}

/// The 20 cookies both sides inject: host-only, httpOnly, for 127.0.0.1.
fn bench_cookies() -> Vec<Value> {
    (0..20)
        .map(|i| {
            json!({ "name": format!("c{i}"), "value": format!("v{i}-{}", "x".repeat(40)),
                    "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": true })
        })
        .collect()
}

/// Raw injection + smoke probe: a fresh Chromium (same flags, no proxy)
/// left idle as long as a pooled one, then the same 20 cookies set over
/// `Network.setCookies`, the probe page loaded and its text checked, with
/// the same CDP helpers Cordon uses.
async fn raw_inject_rounds(page: &str, dir: &std::path::Path, iters: usize) -> Stats {
    let mut out = Vec::new();
    for i in 0..iters {
        let (_, conn, child) = raw_spawn(dir, 1000 + i).await;
        let p = conn.first_page().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let params: Vec<_> = bench_cookies()
            .iter()
            .map(|c| {
                let c: cordon::vault::Cookie = serde_json::from_value(c.clone()).unwrap();
                cordon::cdp::cookie_param(&c).unwrap()
            })
            .collect();
        let t = Instant::now();
        p.execute(chromiumoxide::cdp::browser_protocol::network::SetCookiesParams::new(params))
            .await
            .unwrap();
        let nav = cordon::cdp::navigate(
            &p,
            page,
            cordon::cdp::WaitUntil::Load,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
        assert_eq!(nav.status, Some(200));
        let found = cordon::cdp::evaluate(
            &p,
            "!!document.body && document.body.innerText.includes(\"Hello\")",
        )
        .await
        .unwrap();
        assert_eq!(found, Value::Bool(true));
        out.push(t.elapsed());
        drop(conn);
        kill(child);
    }
    Stats(out)
}

/// Operator-mode opens from the warm pool: grant checked and consumed, 20
/// cookies decrypted and set over CDP, the configured smoke probe run (when
/// `probe`), then the agent's first navigation. Returns (open → ready,
/// open → agent's page loaded).
async fn operator_rounds(
    api: &Api,
    state: &cordon::state::AppState,
    page: &str,
    iters: usize,
    probe: bool,
) -> (Stats, Stats) {
    let tenant: cordon::domain::TenantId = "bench".parse().unwrap();
    state
        .vault
        .import(
            &cordon::audit::Actor::Cli,
            &tenant,
            &"127.0.0.1".parse().unwrap(),
            &serde_json::to_vec(&bench_cookies()).unwrap(),
            cordon::vault::ImportOptions::default(),
        )
        .await
        .unwrap();
    let owner = state.store.api_key_lookup(&api.key).await.unwrap().unwrap();
    let (mut ready, mut nav) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        let req = cordon::grants::NewGrantRequest {
            domains: vec!["127.0.0.1".into()],
            reason: "bench".into(),
            cdp: false,
            totp: false,
        };
        let asked = cordon::grants::request(&state.store, &owner, &req)
            .await
            .unwrap();
        cordon::grants::approve(
            &state.store,
            &cordon::audit::Actor::Cli,
            &asked.request_id.parse().unwrap(),
            15,
            true,
        )
        .await
        .unwrap();
        let token = cordon::grants::poll(&state.store, &owner, &asked.request_id.parse().unwrap())
            .await
            .unwrap()
            .grant_token
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let t = Instant::now();
        let opened = api
            .post(
                "/api/sessions",
                json!({ "record": "off", "credential_mode": "operator",
                        "domains": ["127.0.0.1"], "grant_token": token }),
            )
            .await;
        ready.push(t.elapsed());
        assert_eq!(opened["injected"]["127.0.0.1"], 20);
        if probe {
            assert_eq!(opened["smoke"]["127.0.0.1"], "ok", "{opened}");
        }
        let sid = opened["session_id"].as_str().unwrap().to_owned();
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        nav.push(t.elapsed());
        api.close(&sid).await;
    }
    (Stats(ready), Stats(nav))
}

/// A raw CDP client for the `cdp` section.
struct RawCdp {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next: u64,
}

impl RawCdp {
    async fn connect(url: &str, key: Option<&str>) -> Self {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = url.into_client_request().unwrap();
        if let Some(k) = key {
            req.headers_mut()
                .insert("authorization", format!("Bearer {k}").parse().unwrap());
        }
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(256 << 20))
            .max_frame_size(Some(256 << 20));
        let (ws, _) = tokio_tungstenite::connect_async_with_config(req, Some(config), true)
            .await
            .unwrap();
        Self { ws, next: 1 }
    }

    /// One command; answers the response's text (events in between are
    /// skipped).
    async fn call(&mut self, method: &str, params: Value, session: Option<&str>) -> String {
        use futures::{SinkExt, StreamExt};
        let id = self.next;
        self.next += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws
            .send(tokio_tungstenite::tungstenite::Message::text(
                msg.to_string(),
            ))
            .await
            .unwrap();
        let prefix = format!("{{\"id\":{id},");
        loop {
            match self.ws.next().await {
                Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t))) => {
                    if t.as_str().starts_with(&prefix) {
                        return t.as_str().to_owned();
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("{method}: the connection ended: {other:?}"),
            }
        }
    }

    /// Attaches to the first tab; answers its CDP session.
    async fn attach(&mut self) -> String {
        let targets: Value =
            serde_json::from_str(&self.call("Target.getTargets", json!({}), None).await).unwrap();
        let tab = targets["result"]["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap()["targetId"]
            .clone();
        let attached: Value = serde_json::from_str(
            &self
                .call(
                    "Target.attachToTarget",
                    json!({ "targetId": tab, "flatten": true }),
                    None,
                )
                .await,
        )
        .unwrap();
        attached["result"]["sessionId"].as_str().unwrap().to_owned()
    }
}

/// The CDP endpoint against the same browser's own DevTools socket:
/// `Runtime.evaluate` round trips and full-page screenshots, alternating,
/// and the control plane's memory per idle CDP connection.
async fn cdp_proxy(
    page_addr: std::net::SocketAddr,
    page: &str,
    tmp: &std::path::Path,
    iters: usize,
) {
    let (api, stop, task, state) = start_cordon(&tmp.join("cdp"), page_addr, 1, &[]).await;
    let sid = api.open().await;
    api.post(
        &format!("/api/sessions/{sid}/navigate"),
        json!({ "url": format!("{page}count") }),
    )
    .await;
    let tenant: cordon::domain::TenantId = "bench".parse().unwrap();
    let live = state
        .sessions
        .get(&tenant, &sid.parse().unwrap())
        .await
        .unwrap();
    let through_url = format!("{}/cdp/{sid}", api.base.replacen("http", "ws", 1));
    let mut direct = RawCdp::connect(&live.sandbox.cdp_url, None).await;
    let mut through = RawCdp::connect(&through_url, Some(&api.key)).await;
    let (d_tab, t_tab) = (direct.attach().await, through.attach().await);
    let rounds = (iters * 25).max(500);
    let (mut d, mut t) = (Vec::new(), Vec::new());
    let eval = json!({ "expression": "1+1", "returnByValue": true });
    for _ in 0..50 {
        direct
            .call("Runtime.evaluate", eval.clone(), Some(&d_tab))
            .await;
        through
            .call("Runtime.evaluate", eval.clone(), Some(&t_tab))
            .await;
    }
    for _ in 0..rounds {
        let s = Instant::now();
        direct
            .call("Runtime.evaluate", eval.clone(), Some(&d_tab))
            .await;
        d.push(s.elapsed());
        let s = Instant::now();
        through
            .call("Runtime.evaluate", eval.clone(), Some(&t_tab))
            .await;
        t.push(s.elapsed());
    }
    let (d, t) = (Stats(d), Stats(t));
    println!("cdp Runtime.evaluate(1+1) round trip, alternating:");
    println!("  direct          {}", d.show());
    println!("  through Cordon  {}", t.show());
    println!("  added p50 {:.3} ms", ms(t.median()) - ms(d.median()));
    // A large full-page PNG, bytes per second each way.
    // Noise does not compress: the PNG is about as large as the pixels.
    let tall = "(() => { const c = document.createElement('canvas'); c.width = 1280; c.height = 3000; \
        c.style.display = 'block'; document.body.prepend(c); const x = c.getContext('2d'); \
        const d = x.createImageData(1280, 3000); \
        for (let i = 0; i < d.data.length; i += 65536) crypto.getRandomValues(d.data.subarray(i, i + 65536)); \
        for (let i = 3; i < d.data.length; i += 4) d.data[i] = 255; \
        x.putImageData(d, 0, 0); return 1; })()";
    direct
        .call(
            "Runtime.evaluate",
            json!({ "expression": tall }),
            Some(&d_tab),
        )
        .await;
    let shot = json!({ "format": "png", "captureBeyondViewport": true, "clip": { "x": 0, "y": 0, "width": 1280, "height": 3000, "scale": 1 } });
    let (mut d_rate, mut t_rate, mut bytes) = (Vec::new(), Vec::new(), 0usize);
    for _ in 0..(iters / 2).max(8) {
        let s = Instant::now();
        bytes = direct
            .call("Page.captureScreenshot", shot.clone(), Some(&d_tab))
            .await
            .len();
        d_rate.push(s.elapsed());
        let s = Instant::now();
        let n = through
            .call("Page.captureScreenshot", shot.clone(), Some(&t_tab))
            .await
            .len();
        t_rate.push(s.elapsed());
        assert!(n > bytes / 2, "the proxied screenshot is whole");
    }
    let (d_rate, t_rate) = (Stats(d_rate), Stats(t_rate));
    let mbps = |s: &Stats| bytes as f64 / 1e6 / s.median().as_secs_f64();
    println!(
        "cdp full-page screenshot ({:.1} MB of JSON): direct {} ({:.0} MB/s); through Cordon {} ({:.0} MB/s) = {:.0} % of direct",
        bytes as f64 / 1e6,
        d_rate.show(),
        mbps(&d_rate),
        t_rate.show(),
        mbps(&t_rate),
        100.0 * mbps(&t_rate) / mbps(&d_rate)
    );
    drop((direct, through));
    // Memory of the control plane per idle connection (this process runs
    // Cordon; the browser's own share is not counted): 4 is the limit per
    // session, so 4 connections on each of several sessions.
    let mut sessions = vec![sid.clone()];
    for _ in 0..4 {
        sessions.push(api.open().await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_kib();
    let mut idle = Vec::new();
    for s in &sessions {
        for _ in 0..4 {
            let url = format!("{}/cdp/{s}", api.base.replacen("http", "ws", 1));
            idle.push(RawCdp::connect(&url, Some(&api.key)).await);
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib();
    println!(
        "cdp idle connections: {} cost the control plane {} KiB of RSS = {:.0} KiB each",
        idle.len(),
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 / idle.len() as f64
    );
    drop(idle);
    for s in &sessions {
        api.close(s).await;
    }
    let _ = stop.send(());
    let _ = task.await;
}

fn mem_available_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap()
}

/// Injection of 20 cookies plus a smoke probe (text and status checked):
/// raw CDP on a fresh idle Chromium against Cordon's operator open with the
/// probe configured, in the same run.
async fn inject(page_addr: std::net::SocketAddr, page: &str, tmp: &std::path::Path, iters: usize) {
    let raw = raw_inject_rounds(page, tmp, iters).await;
    println!("raw  setCookies(20) + probe load + text    {}", raw.show());
    let probes =
        json!({ "127.0.0.1": { "url": page, "expect_status": 200, "expect_text": "Hello" } });
    let (api, stop, task, state) = start_cordon(
        &tmp.join("inject"),
        page_addr,
        2,
        &[("CORDON_SMOKE_PROBES", probes.to_string())],
    )
    .await;
    let (ready, nav) = operator_rounds(&api, &state, page, iters, true).await;
    println!(
        "cordon operator open + probe → ready      {}   ratio to raw {:.2}",
        ready.show(),
        ms(ready.median()) / ms(raw.median())
    );
    println!("  + agent's first navigation loaded       {}", nav.show());
    let _ = stop.send(());
    task.await.unwrap();
    let (api, stop, task, state) = start_cordon(&tmp.join("inject-np"), page_addr, 2, &[]).await;
    let (ready, nav) = operator_rounds(&api, &state, page, iters, false).await;
    println!("cordon operator open, no probe → ready   {}", ready.show());
    println!("  + agent's first navigation loaded       {}", nav.show());
    let _ = stop.send(());
    task.await.unwrap();
}

/// The cost of the per-session limits: cold open → ready and memory per
/// idle session, with limits on and off, in the same run (interleaved so
/// drift hits both alike).
async fn limits_cost(page_addr: std::net::SocketAddr, tmp: &std::path::Path, iters: usize) {
    let on = [("CORDON_SESSION_LIMITS", "true".to_string())];
    let off = [("CORDON_SESSION_LIMITS", "false".to_string())];
    let (api_on, stop_on, task_on, state_on) =
        start_cordon(&tmp.join("limits-on"), page_addr, 0, &on).await;
    let (api_off, stop_off, task_off, _) =
        start_cordon(&tmp.join("limits-off"), page_addr, 0, &off).await;
    println!("limits in force: {:?}", state_on.sessions.limits_status());
    let (mut t_on, mut t_off) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        for (api, out) in [(&api_on, &mut t_on), (&api_off, &mut t_off)] {
            let t = Instant::now();
            let sid = api.open().await;
            out.push(t.elapsed());
            api.close(&sid).await;
        }
    }
    let (on_s, off_s) = (Stats(t_on), Stats(t_off));
    println!("cold open → ready, limits on            {}", on_s.show());
    println!(
        "cold open → ready, limits off           {}   on/off {:.3}",
        off_s.show(),
        on_s.median().as_secs_f64() / off_s.median().as_secs_f64()
    );
    let idle = env_usize("BENCH_LIMITS_IDLE", 20);
    // Each measured twice, in both orders, so neither gains from going first.
    for (name, api) in [
        ("on", &api_on),
        ("off", &api_off),
        ("off", &api_off),
        ("on", &api_on),
    ] {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let base = mem_available_kib();
        let mut open = Vec::new();
        for _ in 0..idle {
            open.push(api.open().await);
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        let used = base.saturating_sub(mem_available_kib());
        println!(
            "memory per idle session, limits {name:<3}   {:.0} MiB ({idle} sessions, MemAvailable drop)",
            used as f64 / 1024.0 / idle as f64
        );
        for sid in &open {
            api.close(sid).await;
        }
    }
    let _ = stop_on.send(());
    let _ = stop_off.send(());
    task_on.await.unwrap();
    task_off.await.unwrap();
}

async fn engine(page_addr: std::net::SocketAddr, page: &str, tmp: &std::path::Path, iters: usize) {
    // --- raw CDP baselines ------------------------------------------------
    let mut raw_cold_t = Vec::new();
    let mut raw_nav = Vec::new();
    let mut raw_key = Vec::new();
    let mut raw_eval = Vec::new();
    for i in 0..iters {
        let (t, conn, child) = raw_cold(page, tmp, i).await;
        raw_cold_t.push(t);
        let p = conn.first_page().await.unwrap();
        let t = Instant::now();
        common::load(&p, page).await;
        raw_nav.push(t.elapsed());
        for _ in 0..10 {
            let t = Instant::now();
            for kind in [
                DispatchKeyEventType::RawKeyDown,
                DispatchKeyEventType::KeyUp,
            ] {
                let mut ev = DispatchKeyEventParams::new(kind);
                ev.key = Some("Tab".into());
                ev.code = Some("Tab".into());
                ev.windows_virtual_key_code = Some(9);
                p.execute(ev).await.unwrap();
            }
            raw_key.push(t.elapsed());
            let t = Instant::now();
            p.execute(
                EvaluateParams::builder()
                    .expression("document.documentElement.outerHTML")
                    .return_by_value(true)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
            raw_eval.push(t.elapsed());
        }
        drop(conn);
        kill(child);
    }
    let raw_cold_t = Stats(raw_cold_t);
    println!(
        "raw  spawn → page loaded (cold)        {}",
        raw_cold_t.show()
    );
    println!(
        "raw  navigate → load (warm browser)    {}",
        Stats(raw_nav.clone()).show()
    );

    // --- Cordon cold (no pool) --------------------------------------------
    let (api, stop, task, _) = start_cordon(&tmp.join("cold"), page_addr, 0, &[]).await;
    let mut cold_ready = Vec::new();
    let mut cold_nav = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        let sid = api.open().await;
        cold_ready.push(t.elapsed());
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        cold_nav.push(t.elapsed());
        api.close(&sid).await;
    }
    let _ = stop.send(());
    task.await.unwrap();
    let cold_nav = Stats(cold_nav);
    println!(
        "cordon open → ready (cold)             {}",
        Stats(cold_ready).show()
    );
    println!(
        "cordon open → first page loaded (cold) {}   ratio to raw {:.2}",
        cold_nav.show(),
        ms(cold_nav.median()) / ms(raw_cold_t.median())
    );

    // --- Cordon warm pool ---------------------------------------------------
    let (api, stop, task, state) = start_cordon(&tmp.join("warm"), page_addr, 2, &[]).await;
    let mut warm_ready = Vec::new();
    let mut warm_nav = Vec::new();
    let mut tool_key = Vec::new();
    let mut tool_eval = Vec::new();
    // A `press`'s stages, in-process (no HTTP): the key's lookup, one
    // audit append, and the whole pipeline (`run_tool`: the audit append,
    // the tab lock, the two key events).
    let (mut lookup, mut append, mut pipeline) = (Vec::new(), Vec::new(), Vec::new());
    let mut floor = Vec::new();
    for _ in 0..iters {
        // Let the pool refill: this measures the pool, not the cold path.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let t = Instant::now();
        let sid = api.open().await;
        warm_ready.push(t.elapsed());
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        warm_nav.push(t.elapsed());
        for _ in 0..10 {
            let t = Instant::now();
            api.post(
                &format!("/api/sessions/{sid}/press"),
                json!({ "key": "Tab" }),
            )
            .await;
            tool_key.push(t.elapsed());
            // The HTTP floor: a request through every layer the API's
            // requests pass (no key, no body, no browser).
            let t = Instant::now();
            let res = api
                .http
                .get(format!("{}/healthz", api.base))
                .send()
                .await
                .unwrap();
            assert!(res.status().is_success());
            res.bytes().await.unwrap();
            floor.push(t.elapsed());
            let t = Instant::now();
            api.post(&format!("/api/sessions/{sid}/read_dom"), json!({}))
                .await;
            tool_eval.push(t.elapsed());
        }
        let live = state
            .sessions
            .find_live(&sid.parse().unwrap())
            .await
            .unwrap();
        let actor = cordon::audit::Actor::Agent("bench".into());
        for _ in 0..10 {
            let t = Instant::now();
            let found = state.store.api_key_lookup(&api.key).await.unwrap();
            lookup.push(t.elapsed());
            assert!(found.is_some(), "the bench's key");
            let t = Instant::now();
            state
                .store
                .audit_append(cordon::audit::NewEvent::new(actor.clone(), "bench.probe"))
                .await
                .unwrap();
            append.push(t.elapsed());
            let t = Instant::now();
            state
                .sessions
                .run_tool(
                    &live,
                    actor.clone(),
                    cordon::audit::Surface::Http,
                    cordon::sessions::ToolCall::new(cordon::sessions::Tool::Press {
                        key: "Tab".into(),
                    }),
                )
                .await
                .unwrap();
            pipeline.push(t.elapsed());
        }
        drop(live);
        api.close(&sid).await;
    }
    let (tool_key, raw_key) = (Stats(tool_key), Stats(raw_key));
    let (tool_eval, raw_eval) = (Stats(tool_eval), Stats(raw_eval));
    println!(
        "cordon open → ready (warm pool)        {}",
        Stats(warm_ready).show()
    );
    println!(
        "cordon open → first page loaded (warm) {}",
        Stats(warm_nav).show()
    );
    println!(
        "tool press  (HTTP)                     {}   raw {}   overhead p50 {:.2} ms",
        tool_key.show(),
        raw_key.show(),
        ms(tool_key.median()) - ms(raw_key.median())
    );
    println!(
        "tool read_dom (HTTP)                   {}   raw {}   overhead p50 {:.2} ms",
        tool_eval.show(),
        raw_eval.show(),
        ms(tool_eval.median()) - ms(raw_eval.median())
    );
    let (lookup, append, pipeline) = (Stats(lookup), Stats(append), Stats(pipeline));
    let floor = Stats(floor);
    println!("HTTP floor (GET /healthz, every layer) {}", floor.show());
    println!(
        "press in-process: run_tool {}\n  of which one audit append {}\n  the key's lookup (HTTP only) {}",
        pipeline.show(),
        append.show(),
        lookup.show()
    );
    let http = ms(tool_key.median()) - ms(pipeline.median()) - ms(lookup.median());
    println!(
        "  split of the press overhead p50 {:.2} ms: audit {:.2}, the rest of run_tool {:.2}, key lookup {:.2}, HTTP and routing {:.2} ms (of which the floor {:.2}, the tool route's own {:.2})",
        ms(tool_key.median()) - ms(raw_key.median()),
        ms(append.median()),
        ms(pipeline.median()) - ms(append.median()) - ms(raw_key.median()),
        ms(lookup.median()),
        http,
        ms(floor.median()),
        http - ms(floor.median())
    );

    let _ = stop.send(());
    task.await.unwrap();
}

/// A minimal MCP client (Streamable HTTP): POST JSON-RPC with the session id.
struct McpClient {
    http: reqwest::Client,
    url: String,
    key: String,
    session: String,
    next_id: u64,
}

impl McpClient {
    async fn connect(api: &Api) -> Self {
        let url = format!("{}/mcp", api.base);
        let res = api
            .http
            .post(&url)
            .bearer_auth(&api.key)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": { "name": "bench", "version": "0" } } }),
            )
            .send()
            .await
            .unwrap();
        let session = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        res.text().await.unwrap();
        let mut c = Self {
            http: api.http.clone(),
            url,
            key: api.key.clone(),
            session,
            next_id: 1,
        };
        c.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        c
    }

    async fn send(&mut self, body: Value) -> String {
        let res = self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{}", res.status());
        res.text().await.unwrap()
    }

    /// One tool call; panics on a tool error.
    async fn call(&mut self, name: &str, args: Value) {
        let id = self.next_id;
        self.next_id += 1;
        let body = self
            .send(json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": name, "arguments": args } }))
            .await;
        assert!(!body.contains("\"isError\":true"), "{name}: {body}");
    }
}

/// One tool call over MCP against the same call over the HTTP API, on one
/// warm session, alternating so both see the same browser.
async fn mcp_cost(
    page_addr: std::net::SocketAddr,
    page: &str,
    tmp: &std::path::Path,
    iters: usize,
) {
    let (api, stop, task, _) = start_cordon(&tmp.join("mcp"), page_addr, 1, &[]).await;
    let sid = api.open().await;
    api.post(
        &format!("/api/sessions/{sid}/navigate"),
        json!({ "url": page }),
    )
    .await;
    let mut mcp = McpClient::connect(&api).await;
    let (mut http_press, mut mcp_press, mut http_snap, mut mcp_snap) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..iters * 10 {
        let t = Instant::now();
        api.post(
            &format!("/api/sessions/{sid}/press"),
            json!({ "key": "Tab" }),
        )
        .await;
        http_press.push(t.elapsed());
        let t = Instant::now();
        mcp.call("browser_press", json!({ "session_id": sid, "key": "Tab" }))
            .await;
        mcp_press.push(t.elapsed());
        let t = Instant::now();
        api.post(&format!("/api/sessions/{sid}/snapshot"), json!({}))
            .await;
        http_snap.push(t.elapsed());
        let t = Instant::now();
        mcp.call("browser_snapshot", json!({ "session_id": sid }))
            .await;
        mcp_snap.push(t.elapsed());
    }
    for (name, http, mcp) in [
        ("press   ", http_press, mcp_press),
        ("snapshot", http_snap, mcp_snap),
    ] {
        let (http, mcp) = (Stats(http), Stats(mcp));
        println!(
            "tool {name} HTTP {}   MCP {}   MCP/HTTP p50 {:.2}, +{:.2} ms",
            http.show(),
            mcp.show(),
            ms(mcp.median()) / ms(http.median()),
            ms(mcp.median()) - ms(http.median())
        );
    }
    api.close(&sid).await;
    let _ = stop.send(());
    task.await.unwrap();
}

/// A chat-completions endpoint that answers `click` `clicks` times per
/// task, then `finished`: the model's own time is near zero, so a step's
/// time is the control plane's (screenshot, request, parse, the click
/// through the pipeline and the gate, the trace row).
async fn fake_model(clicks: usize) -> std::net::SocketAddr {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // A model's thinking time (`BENCH_MODEL_MS`, default 0: at once). A real
    // model takes hundreds of milliseconds; the step figures leave it out.
    let think = Duration::from_millis(env_usize("BENCH_MODEL_MS", 0) as u64);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let count = count.clone();
            async move {
                tokio::time::sleep(think).await;
                let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let text = if n % (clicks + 1) == clicks {
                    "Action: finished(content='done')"
                } else {
                    "Thought: click the heading.\nAction: click(start_box='(60,30)')"
                };
                axum::Json(
                    json!({ "choices": [{ "message": { "role": "assistant", "content": text } }] }),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// (sum s, count) of the task step histograms `picture` and `action`.
async fn step_metrics(api: &Api) -> [(f64, f64); 2] {
    let text = api
        .http
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let get = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    [
        (
            get("cordon_task_step_picture_seconds_sum"),
            get("cordon_task_step_picture_seconds_count"),
        ),
        (
            get("cordon_task_step_action_seconds_sum"),
            get("cordon_task_step_action_seconds_count"),
        ),
    ]
}

/// `run_task`'s time per step without the model: from one step's trace row
/// to the next, less the model's answer time.
async fn task_step(
    page_addr: std::net::SocketAddr,
    page: &str,
    tmp: &std::path::Path,
    iters: usize,
    what: &str,
) {
    let clicks = 10;
    let model = fake_model(clicks).await;
    let (api, stop, task, state) = start_cordon(
        &tmp.join(format!("task-{}", what.len())),
        page_addr,
        1,
        &[("CORDON_MODEL_BASE_URL", format!("http://{model}/v1"))],
    )
    .await;
    let mut per_step = Vec::new();
    let mut whole = Vec::new();
    let before = step_metrics(&api).await;
    for _ in 0..iters.div_ceil(4).max(2) {
        let t = Instant::now();
        let r = api
            .post(
                "/api/tasks",
                json!({ "instruction": "click the heading ten times", "start_url": page,
                        "max_steps": clicks + 1, "record": "transient" }),
            )
            .await;
        whole.push(t.elapsed());
        assert_eq!(r["status"], "finished", "{r}");
        let id = r["task_id"].as_str().unwrap();
        let steps = state.store.task_steps(&id.parse().unwrap()).await.unwrap();
        for w in steps.windows(2) {
            let model = w[1].model_ms.unwrap_or(0);
            let gap = w[1].created_at - w[0].created_at - model;
            per_step.push(Duration::from_millis(gap.max(0) as u64));
        }
    }
    let after = step_metrics(&api).await;
    let mean = |i: usize| {
        let n = after[i].1 - before[i].1;
        if n > 0.0 {
            (after[i].0 - before[i].0) / n * 1000.0
        } else {
            0.0
        }
    };
    let (picture, action) = (mean(0), mean(1));
    // The two browser calls a step makes, alone, on the same page.
    let sid = api.open().await;
    api.post(
        &format!("/api/sessions/{sid}/navigate"),
        json!({ "url": page }),
    )
    .await;
    let (mut shot, mut click) = (Vec::new(), Vec::new());
    for _ in 0..per_step.len() {
        let t = Instant::now();
        api.post(
            &format!("/api/sessions/{sid}/screenshot"),
            json!({ "format": "jpeg", "quality": 80 }),
        )
        .await;
        shot.push(t.elapsed());
        let t = Instant::now();
        api.post(
            &format!("/api/sessions/{sid}/click"),
            json!({ "x": 60, "y": 30 }),
        )
        .await;
        click.push(t.elapsed());
    }
    api.close(&sid).await;
    println!(
        "run_task, a click that {what}: control plane per step (picture + model call overhead + parse + click + trace), model excluded: {}",
        Stats(per_step.clone()).show()
    );
    println!(
        "  the same step's browser calls alone over the API: screenshot (JPEG q80, 1280×720) {}   click {}",
        Stats(shot).show(),
        Stats(click).show()
    );
    println!(
        "run_task: whole {clicks}-click task incl. session open and close: {}",
        Stats(whole).show()
    );
    let step = ms(Stats(per_step.clone()).median());
    println!(
        "  of a step (means, Cordon's histograms): waiting for the picture {picture:.1} ms, the action {action:.1} ms; the rest (request, parse, recorder, trace): {:.1} ms",
        step - picture - action
    );
    if what == "repaints" {
        let repaint = chromium_repaint(page, tmp, per_step.len()).await;
        println!(
            "  Chromium alone (raw CDP): click start → the screencast frame of its repaint {}",
            repaint.show()
        );
    }
    let _ = stop.send(());
    task.await.unwrap();
}

/// Screencasts `page` (JPEG q80, 1280×720, as a task does) and sends the
/// arrival time of each frame, stamped on receipt; each is acknowledged
/// without waiting for the answer and its data decoded, as the task's pump
/// does.
async fn screencast_arrivals(
    page: &chromiumoxide::Page,
) -> (
    tokio::sync::mpsc::UnboundedReceiver<Instant>,
    tokio::task::JoinHandle<()>,
) {
    screencast_arrivals_with(
        page,
        cordon::live::Encoding {
            quality: 80,
            max_width: 1280,
            max_height: 720,
        }
        .params(),
    )
    .await
}

/// [`screencast_arrivals`] with other screencast parameters.
async fn screencast_arrivals_with(
    page: &chromiumoxide::Page,
    params: chromiumoxide::cdp::browser_protocol::page::StartScreencastParams,
) -> (
    tokio::sync::mpsc::UnboundedReceiver<Instant>,
    tokio::task::JoinHandle<()>,
) {
    use base64::Engine;
    use chromiumoxide::cdp::browser_protocol::page::{
        EventScreencastFrame, ScreencastFrameAckParams,
    };
    use futures::StreamExt;
    let mut frames = page.event_listener::<EventScreencastFrame>().await.unwrap();
    page.execute(params).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let acks = page.clone();
    let pump = tokio::spawn(async move {
        while let Some(ev) = frames.next().await {
            let at = Instant::now();
            let (ack, session) = (acks.clone(), ev.session_id);
            tokio::spawn(async move {
                let _ = ack.execute(ScreencastFrameAckParams::new(session)).await;
            });
            let _ = base64::engine::general_purpose::STANDARD.decode(ev.data.as_ref() as &str);
            let _ = tx.send(at);
        }
    });
    (rx, pump)
}

/// Chromium's own share of a task step on `page` (whose clicks repaint):
/// from a click's start to the arrival of the screencast frame showing it.
async fn chromium_repaint(page_url: &str, tmp: &std::path::Path, n: usize) -> Stats {
    let (conn, child, page) = common::raw_page(&tmp.join("repaint"), page_url).await;
    let (mut rx, pump) = screencast_arrivals(&page).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut out = Vec::new();
    for _ in 0..n {
        while rx.try_recv().is_ok() {}
        let t = Instant::now();
        cordon::cdp::click(
            &page,
            &cordon::cdp::Locator::Point(60.0, 30.0),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        let at = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a frame after the click")
            .unwrap();
        out.push(at - t);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pump.abort();
    drop(page);
    drop(conn);
    kill(child);
    Stats(out)
}

/// The risk gate's added latency on a low-risk click: the click as the
/// pipeline runs it when a rule looks at clicks (the target's facts read in
/// the click's own lookup, then the assessment) against the plain click,
/// alternating on one page, by selector and by point.
async fn gate_cost(page_url: &str, tmp: &std::path::Path, iters: usize) {
    use cordon::cdp::{Locator, click, click_checked};
    let settings = Settings::load_from(None, Vec::<(String, String)>::new()).unwrap();
    let policy = cordon::policy::Policy::from_settings(&settings.risk_settings());
    let rules = policy.rules("bench");
    let (conn, child, page) = common::raw_page(&tmp.join("gate"), page_url).await;
    let bound = Duration::from_secs(5);
    let rounds = (iters * 10).max(100);
    // Back to back, and after a pause (a page at rest). A click's pointer
    // move is handled at the tab's next frame (60 Hz), so how long it
    // waits depends on where in the frame it starts. A fixed 40 ms pause
    // after a click (which ends just after a frame) starts every click at
    // the same point of the frame: the figure is the one of that point.
    // "after 40–56 ms" adds 0..16 ms, so the clicks start at every point
    // of the frame alike.
    let mut k = 0u64;
    for (name, locator, pause, spread) in [
        (
            "selector, back to back   ",
            Locator::Selector("h1".into()),
            0,
            false,
        ),
        (
            "point, back to back      ",
            Locator::Point(60.0, 30.0),
            0,
            false,
        ),
        (
            "selector, after 40 ms    ",
            Locator::Selector("h1".into()),
            40,
            false,
        ),
        (
            "point, after 40 ms       ",
            Locator::Point(60.0, 30.0),
            40,
            false,
        ),
        (
            "selector, after 40–56 ms ",
            Locator::Selector("h1".into()),
            40,
            true,
        ),
        (
            "point, after 40–56 ms    ",
            Locator::Point(60.0, 30.0),
            40,
            true,
        ),
    ] {
        let mut pause_for = || {
            k += 1;
            Duration::from_millis(if spread { pause + (k * 7) % 17 } else { pause })
        };
        let tool = cordon::sessions::Tool::Click(match &locator {
            Locator::Point(x, y) => cordon::sessions::tool::ElementTarget::Point(*x, *y),
            _ => cordon::sessions::tool::ElementTarget::Selector("h1".into()),
        });
        let (mut plain, mut checked) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            tokio::time::sleep(pause_for()).await;
            let t = Instant::now();
            click(&page, &locator, bound).await.unwrap();
            plain.push(t.elapsed());
            tokio::time::sleep(pause_for()).await;
            let t = Instant::now();
            click_checked(&page, &locator, bound, "", |host, el| {
                let facts = cordon::policy::Facts {
                    page_host: Some(host.to_owned()),
                    element: serde_json::from_value(el).map_err(|_| ())?,
                    ..Default::default()
                };
                let a = cordon::policy::assess(&tool, &facts, rules);
                if a.waits() { Err(()) } else { Ok(()) }
            })
            .await
            .unwrap()
            .expect("a low-risk click is let through");
            checked.push(t.elapsed());
        }
        let (plain, checked) = (Stats(plain), Stats(checked));
        println!(
            "gate, low-risk click by {name}: plain {}   checked {}   added p50 {:+.3} ms",
            plain.show(),
            checked.show(),
            ms(checked.median()) - ms(plain.median())
        );
    }
    // Enter on the focus, as `press` sends it: plain; judged once, at the
    // focus before the key (the gate before 2026-11-28); and judged again
    // where it acts, once the page has handled the keydown (the key in two
    // steps, `press_checked`: what `press Enter` costs now).
    {
        use cordon::cdp::{KeyAct, KeyDown, element_facts, press, press_checked};
        let enter = cordon::sessions::Tool::Press {
            key: "Enter".into(),
        };
        let judge = |host: &str, el: serde_json::Value| {
            let facts = cordon::policy::Facts {
                page_host: Some(host.to_owned()),
                element: serde_json::from_value(el).map_err(|_| ())?,
                ..Default::default()
            };
            let a = cordon::policy::assess(&enter, &facts, rules);
            if a.waits() { Err(()) } else { Ok(()) }
        };
        let key = KeyDown::Named(KeyAct {
            key: "Enter",
            code: "",
            modifiers: 0,
            up: true,
        });
        let (mut plain, mut once, mut twice) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            press(&page, "Enter", bound).await.unwrap();
            plain.push(t.elapsed());
            let t = Instant::now();
            let (host, el) = element_facts(&page, None, bound, "").await.unwrap();
            judge(&host, el).expect("low risk");
            press(&page, "Enter", bound).await.unwrap();
            once.push(t.elapsed());
            let t = Instant::now();
            let (host, el) = element_facts(&page, None, bound, "").await.unwrap();
            judge(&host, el).expect("low risk");
            press_checked(&page, key, bound, "", false, judge)
                .await
                .unwrap()
                .expect("low risk");
            twice.push(t.elapsed());
        }
        let (plain, once, twice) = (Stats(plain), Stats(once), Stats(twice));
        println!(
            "gate, Enter on the focus: plain {}   judged before the key {}   and again after its keydown {}   added by the second look p50 {:+.3} ms",
            plain.show(),
            once.show(),
            twice.show(),
            ms(twice.median()) - ms(once.median())
        );
    }
    let hover =
        cordon::sessions::Tool::Hover(cordon::sessions::tool::ElementTarget::Point(1.0, 1.0));
    let mut pure = Vec::new();
    for _ in 0..10_000 {
        let t = Instant::now();
        std::hint::black_box(cordon::policy::assess::needs_page(&hover, rules));
        pure.push(t.elapsed());
    }
    println!("gate, a tool no rule looks at: {}", Stats(pure).show());
    drop(page);
    drop(conn);
    kill(child);
}

/// The gate's reads apart, as the checked click makes them (Chromium's hit
/// test, the node's facts in an isolated world, its accessibility names),
/// each alone before a plain click, then the two layouts of all three, on
/// one page, back to back and at rest (40–56 ms pauses). Also how long a
/// hit test sent after a pending pointer move takes, on the tab's session
/// and on a second session of its own, and the reads made after the move
/// (what the gate does since it judges the page under the pointer).
async fn gate_split(page_url: &str, tmp: &std::path::Path, iters: usize) {
    use chromiumoxide::cdp::browser_protocol::accessibility::{
        EnableParams as AxEnable, GetPartialAxTreeParams,
    };
    use chromiumoxide::cdp::browser_protocol::dom::{GetNodeForLocationParams, ResolveNodeParams};
    use chromiumoxide::cdp::browser_protocol::input::{
        DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
    };
    use chromiumoxide::cdp::js_protocol::runtime::CallFunctionOnParams;
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let profile = tmp.join("gate-split");
    let (conn, child, page) = common::raw_page(&profile, page_url).await;
    let rounds = (iters * 10).max(100);
    let (x, y) = (60.0, 30.0);

    // A second CDP session on the same tab, over a connection of its own.
    let ws = cordon::sandbox::chromium::wait_for_devtools(
        &profile,
        "127.0.0.1",
        Duration::from_secs(5),
        || true,
    )
    .await
    .unwrap();
    let sock = tokio::sync::Mutex::new(tokio_tungstenite::connect_async(&ws).await.unwrap().0);
    let next_id = std::sync::atomic::AtomicU64::new(1);
    let raw = |session: Option<&str>, method: &'static str, params: Value| {
        let (sock, next_id) = (&sock, &next_id);
        let session = session.map(str::to_owned);
        async move {
            let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut msg = json!({ "id": id, "method": method, "params": params });
            if let Some(s) = session {
                msg["sessionId"] = json!(s);
            }
            let mut sock = sock.lock().await;
            sock.send(Message::Text(msg.to_string().into()))
                .await
                .unwrap();
            loop {
                if let Message::Text(t) = sock.next().await.unwrap().unwrap() {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["id"] == json!(id) {
                        assert!(v.get("error").is_none(), "{method}: {v}");
                        return v["result"].clone();
                    }
                }
            }
        }
    };
    let second = raw(
        None,
        "Target.attachToTarget",
        json!({ "targetId": page.target_id().inner(), "flatten": true }),
    )
    .await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    let hit_test = || async {
        page.execute(
            GetNodeForLocationParams::builder()
                .x(60)
                .y(30)
                .include_user_agent_shadow_dom(false)
                .ignore_pointer_events_none(false)
                .build()
                .unwrap(),
        )
        .await
        .unwrap()
        .result
        .clone()
    };
    let hit = hit_test().await;
    let backend = hit.backend_node_id;
    let ctx = page
        .frame_secondary_execution_context(hit.frame_id.clone())
        .await
        .unwrap()
        .expect("chromiumoxide's utility world");
    let resolve = || async {
        page.execute(
            ResolveNodeParams::builder()
                .backend_node_id(backend)
                .execution_context_id(ctx)
                .build(),
        )
        .await
        .unwrap()
        .result
        .object
        .object_id
        .clone()
        .unwrap()
    };
    let call = |obj| {
        let page = &page;
        async move {
            page.execute(
                CallFunctionOnParams::builder()
                    .object_id(obj)
                    .function_declaration(cordon::cdp::FACTS_FN)
                    .return_by_value(true)
                    .build()
                    .unwrap(),
            )
            .await
            .unwrap();
        }
    };
    let facts = || async { call(resolve().await).await };
    let ax = || async {
        page.execute(
            GetPartialAxTreeParams::builder()
                .backend_node_id(backend)
                .fetch_relatives(true)
                .build(),
        )
        .await
        .unwrap();
    };
    let mouse = |kind: DispatchMouseEventType| {
        let moved = kind == DispatchMouseEventType::MouseMoved;
        let mut ev = DispatchMouseEventParams::new(kind, x, y);
        if !moved {
            ev.button = Some(MouseButton::Left);
            ev.buttons = Some(1);
            ev.click_count = Some(1);
        }
        ev
    };
    let moved = || async {
        page.execute(mouse(DispatchMouseEventType::MouseMoved))
            .await
            .unwrap();
    };
    let press = || async {
        page.execute(mouse(DispatchMouseEventType::MousePressed))
            .await
            .unwrap();
        page.execute(mouse(DispatchMouseEventType::MouseReleased))
            .await
            .unwrap();
    };
    let names = [
        "plain click (move, then press)    ",
        "hit test, then the click          ",
        "isolated-world facts, then click  ",
        "accessibility names, then click   ",
        "all three, then move, then press  ",
        "hit, resolve, facts‖AX‖move, press",
        "move, then hit test (same session)",
        "move, then hit test (2nd session) ",
        "move, then hit, resolve, facts‖AX  ",
        "move‖hit, then resolve, facts‖AX   ",
    ];
    let mut k = 0u64;
    for (pass, at_rest, enable) in [
        ("back to back", false, false),
        ("after 40–56 ms", true, false),
        ("after 40–56 ms, Accessibility.enable", true, true),
    ] {
        if enable {
            page.execute(AxEnable::default()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Per row: the reads' time (to the last answer), the whole click's.
        let mut rows: Vec<(Vec<Duration>, Vec<Duration>)> =
            names.iter().map(|_| (Vec::new(), Vec::new())).collect();
        for _ in 0..rounds {
            for (i, row) in rows.iter_mut().enumerate() {
                if at_rest {
                    k += 1;
                    tokio::time::sleep(Duration::from_millis(40 + (k * 7) % 17)).await;
                }
                let t = Instant::now();
                match i {
                    0 => moved().await,
                    1 => {
                        hit_test().await;
                        row.0.push(t.elapsed());
                        moved().await;
                    }
                    2 => {
                        facts().await;
                        row.0.push(t.elapsed());
                        moved().await;
                    }
                    3 => {
                        ax().await;
                        row.0.push(t.elapsed());
                        moved().await;
                    }
                    4 => {
                        hit_test().await;
                        futures::join!(facts(), ax());
                        row.0.push(t.elapsed());
                        moved().await;
                    }
                    5 => {
                        hit_test().await;
                        futures::join!(
                            async {
                                let obj = resolve().await;
                                futures::join!(
                                    async {
                                        call(obj).await;
                                        row.0.push(t.elapsed());
                                    },
                                    moved()
                                );
                            },
                            ax()
                        );
                    }
                    6 => {
                        futures::join!(moved(), async {
                            tokio::task::yield_now().await;
                            hit_test().await;
                            row.0.push(t.elapsed());
                        });
                    }
                    // The layout of 2026-11-26 08:xx: the reads after the
                    // move's answer (they see the page under the pointer).
                    8 => {
                        moved().await;
                        hit_test().await;
                        futures::join!(facts(), ax());
                        row.0.push(t.elapsed());
                    }
                    // The hit test sent right behind the move, not after
                    // its answer (held by Chromium until the move is
                    // handled): one round trip less, if that order holds.
                    9 => {
                        futures::join!(moved(), async {
                            tokio::task::yield_now().await;
                            hit_test().await;
                        });
                        futures::join!(facts(), ax());
                        row.0.push(t.elapsed());
                    }
                    _ => {
                        futures::join!(moved(), async {
                            tokio::task::yield_now().await;
                            raw(
                                Some(&second),
                                "DOM.getNodeForLocation",
                                json!({ "x": 60, "y": 30 }),
                            )
                            .await;
                            row.0.push(t.elapsed());
                        });
                    }
                }
                press().await;
                row.1.push(t.elapsed());
            }
        }
        let plain = Stats(rows[0].1.clone()).median();
        for (name, (reads, total)) in names.iter().zip(rows) {
            let total = Stats(total);
            println!(
                "gate split, {pass}: {name}: reads p50 {:5.2} ms   click {}   over plain p50 {:+.2} ms",
                if reads.is_empty() {
                    0.0
                } else {
                    ms(Stats(reads).median())
                },
                total.show(),
                ms(total.median()) - ms(plain)
            );
        }
    }
    drop(page);
    drop(conn);
    kill(child);
}

fn main() {
    common::runtime().block_on(bench());
}

async fn bench() {
    // Warnings and errors of the Cordons under test (why a start failed).
    cordon::telemetry::init_tracing(cordon::config::LogFormat::Text, "warn");
    let iters = env_usize("BENCH_ITER", 20);
    let capacity = env_usize("BENCH_CAPACITY", 200);
    let page_addr = page_server().await;
    let page = format!("http://{page_addr}/");
    let tmp = tempfile::tempdir().unwrap();
    // BENCH_ONLY: comma-separated sections (engine, inject, limits, mcp, task, gate, cdp, capacity); all
    // when unset. `gatesplit` (the gate's reads timed apart), `repaint` (the
    // click → frame bisection), `firstpage` (the warm first page, split),
    // `framesignal`, `memflags`, `busy` (many sessions at once, one
    // runtime thread against a worker per core) and `tabs` (what the
    // dialog follower costs a new tab) run only when named.
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|s| s.trim() == name);
    println!(
        "cordon session benchmark: {iters} rounds, {} cores, {} runtime workers",
        std::thread::available_parallelism().unwrap(),
        env_usize("BENCH_WORKERS", 2)
    );

    if run("engine") {
        engine(page_addr, &page, tmp.path(), iters).await;
    }
    if run("inject") {
        inject(page_addr, &page, tmp.path(), iters).await;
    }
    if run("limits") {
        limits_cost(page_addr, tmp.path(), iters).await;
    }
    if run("mcp") {
        mcp_cost(page_addr, &page, tmp.path(), iters).await;
    }
    if run("task") {
        // Each click repaints (a step's action usually changes the page),
        // and each does not (the step waits for a frame, then takes the
        // newest).
        task_step(
            page_addr,
            &format!("{page}count"),
            tmp.path(),
            iters,
            "repaints",
        )
        .await;
        task_step(page_addr, &page, tmp.path(), iters, "changes nothing").await;
    }
    if run("gate") {
        gate_cost(&page, tmp.path(), iters).await;
    }
    if run("cdp") {
        cdp_proxy(page_addr, &page, tmp.path(), iters).await;
    }
    if only.split(',').any(|s| s.trim() == "gatesplit") {
        gate_split(&page, tmp.path(), iters).await;
    }
    if only.split(',').any(|s| s.trim() == "repaint") {
        repaint_gap(page_addr, &format!("{page}count"), tmp.path(), iters).await;
    }
    if only.split(',').any(|s| s.trim() == "firstpage") {
        first_page_split(page_addr, &page, tmp.path(), iters).await;
    }
    if only.split(',').any(|s| s.trim() == "framesignal") {
        frame_signal(&page, tmp.path(), iters).await;
    }

    if only.split(',').any(|s| s.trim() == "tabs") {
        new_tabs(&page, tmp.path(), iters).await;
    }
    if only.split(',').any(|s| s.trim() == "busy") {
        busy(page_addr, &page, tmp.path()).await;
    }
    if capacity > 0 && run("capacity") {
        capacity_run(page_addr, &page, tmp.path(), capacity).await;
    }
    if only.split(',').any(|s| s.trim() == "memflags") {
        mem_split(page_addr, &page, tmp.path()).await;
        mem_flags(&page, tmp.path()).await;
    }
}

/// PSS and private dirty memory of a bare Chromium with Cordon's flags
/// and `extra`, on `page`, after `idle`: the browser and every process
/// below it, KiB.
async fn bare_mem(
    tmp: &std::path::Path,
    page: &str,
    extra: &[String],
    idle: Duration,
) -> (u64, u64) {
    let kinds = bare_mem_by_kind(tmp, page, extra, idle).await;
    if std::env::var_os("BENCH_MEM_KINDS").is_some() {
        let shown: Vec<String> = kinds
            .iter()
            .map(|(k, (_, u))| format!("{k} {:.1}", *u as f64 / 1024.0))
            .collect();
        println!(
            "  private dirty by process kind (MiB): {}",
            shown.join(", ")
        );
    }
    kinds.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1))
}

/// [`bare_mem`] by process kind ([`mem_by_kind`]).
async fn bare_mem_by_kind(
    tmp: &std::path::Path,
    page: &str,
    extra: &[String],
    idle: Duration,
) -> std::collections::BTreeMap<String, (u64, u64)> {
    let profile = tempfile::tempdir_in(tmp).unwrap();
    let (conn, child, _page) = common::raw_page_with(profile.path(), page, extra).await;
    tokio::time::sleep(idle).await;
    let pid = child.id();
    let mut pids = common::descendants(pid);
    pids.push(pid);
    let kinds = mem_by_kind(&pids);
    drop(conn);
    kill(child);
    kinds
}

/// Density: `n` idle sessions opened one after another, held
/// (`BENCH_HOLD_S`, default 60 s), memory per session from the PSS of
/// every process in its cgroup (or, without cgroups, of every browser
/// process below this one), each answering a `snapshot` at the end;
/// against a bare Chromium with Cordon's flags on the same page.
/// Cordon on a runtime of its own, shaped by `runtime_workers` as `cordon
/// serve` shapes it, driven from an OS thread named `cordon`: the bench's
/// client (on the bench's runtime) neither shares its threads nor counts in
/// its CPU. The sender stops it; the thread ends when it has.
async fn start_cordon_apart(
    data: &std::path::Path,
    page: std::net::SocketAddr,
    workers: u16,
) -> (
    Api,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
) {
    let env = cordon_env(
        data,
        page,
        0,
        &[("CORDON_RUNTIME_WORKERS", workers.to_string())],
    );
    let settings = Settings::load_from(None, env).unwrap();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("cordon".into())
        .spawn(move || {
            let rt = settings.server.runtime().unwrap();
            rt.block_on(async move {
                let app = Application::build(settings).await.unwrap();
                let key = bench_key(&app.state().store).await;
                let _ = ready_tx.send((format!("http://{}", app.local_addr()), key));
                app.run_until(async {
                    let _ = stop_rx.await;
                })
                .await
                .unwrap();
            });
        })
        .unwrap();
    let (base, key) = ready_rx.await.expect("Cordon started");
    let api = Api {
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
        base,
        key,
    };
    (api, stop, thread)
}

/// CPU time so far, in clock ticks (USER_HZ, 100 a second on Linux), user
/// and system: this whole process's, exited threads included, and the
/// bench's own threads' (the main thread and the runtime's, named
/// `bench`). The rest is Cordon's: its runtime, sqlx's worker, its
/// blocking pool.
fn cpu_ticks() -> ([u64; 2], [u64; 2]) {
    fn of(stat: &str) -> (&str, [u64; 2]) {
        let (head, rest) = stat.rsplit_once(')').unwrap();
        let f: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3; utime and stime are fields 14 and 15.
        let t = [f[11].parse().unwrap(), f[12].parse().unwrap()];
        (head.split_once('(').unwrap().1, t)
    }
    let all = of(&std::fs::read_to_string("/proc/self/stat").unwrap()).1;
    let pid = std::process::id().to_string();
    let mut bench = [0, 0];
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (comm, t) = of(&stat);
        if comm == "bench" || e.file_name().to_str() == Some(pid.as_str()) {
            bench[0] += t[0];
            bench[1] += t[1];
        }
    }
    (all, bench)
}

/// What the dialog follower (`cdp::Dialogs::follow`, which holds a new
/// tab until Cordon's connection has set it up) costs a new tab: two raw
/// browsers with Cordon's flags, one connected as Cordon connects (the
/// follower) and one as any CDP client (none), taking turns. Per round
/// and browser: a tab opened over CDP at the page (`Target.createTarget`
/// until loaded, chromiumoxide's `new_page`), and a popup the page opens
/// (`window.open` until the popup's `load`, timed in the page), 10 each.
async fn new_tabs(page: &str, tmp: &std::path::Path, iters: usize) {
    let (followed, child_f) = common::raw_chromium_followed(&tmp.join("tabs-followed")).await;
    let (plain, child_p) = common::raw_chromium(&tmp.join("tabs-plain"), 1280, 720).await;
    let mut times: [[Vec<Duration>; 2]; 2] = Default::default();
    let openers = [
        followed.first_page().await.unwrap(),
        plain.first_page().await.unwrap(),
    ];
    for p in &openers {
        common::load(p, page).await;
    }
    let popup = format!(
        "new Promise(r => {{ const t = performance.now(); const w = window.open({page:?}); \
         w.addEventListener('load', () => {{ const d = performance.now() - t; w.close(); r(d); }}); }})"
    );
    for round in 0..iters {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let conn = if k == 0 { &followed } else { &plain };
            for _ in 0..10 {
                let t = Instant::now();
                let tab = conn.new_page(page).await.unwrap();
                times[k][0].push(t.elapsed());
                tab.close().await.unwrap();
                let got = openers[k]
                    .execute(
                        EvaluateParams::builder()
                            .expression(popup.clone())
                            .await_promise(true)
                            .user_gesture(true)
                            .return_by_value(true)
                            .build()
                            .unwrap(),
                    )
                    .await
                    .unwrap();
                let ms = got.result.result.value.as_ref().and_then(Value::as_f64);
                let ms = ms.unwrap_or_else(|| panic!("no popup time: {:?}", got.result));
                times[k][1].push(Duration::from_secs_f64(ms / 1000.0));
            }
        }
    }
    println!("new tabs ({iters} rounds of 10; the follower holds a new tab until it is set up)");
    let [[tab_f, pop_f], [tab_p, pop_p]] = times;
    let (tab_f, pop_f, tab_p, pop_p) = (Stats(tab_f), Stats(pop_f), Stats(tab_p), Stats(pop_p));
    println!("tab over CDP, no follower      {}", tab_p.show());
    println!(
        "tab over CDP, the follower     {}   +{:.2} ms",
        tab_f.show(),
        ms(tab_f.median()) - ms(tab_p.median())
    );
    println!("popup until load, no follower  {}", pop_p.show());
    println!(
        "popup until load, the follower {}   +{:.2} ms",
        pop_f.show(),
        ms(pop_f.median()) - ms(pop_p.median())
    );
    drop((followed, plain, openers));
    kill(child_f);
    kill(child_p);
}

/// Many busy sessions at once, Cordon on one runtime thread
/// (`runtime_workers = 1`) against one worker per core (0, the default),
/// each shape in turn: for each count in `BENCH_BUSY` (default `8,64`),
/// that many sessions each press Tab in a loop as fast as their answers
/// come, for `BENCH_BUSY_S` seconds (default 20) after 3 s unmeasured,
/// while one more session takes full-page PNGs of `/noise` (about 15 MB
/// each) back to back (`BENCH_BUSY_HEAVY=0` leaves it out). Prints the
/// presses' p50 / p95 / p99, presses a second, the screenshots, and
/// Cordon's own CPU (its threads: not the bench's client, not Chromium).
async fn busy(page_addr: std::net::SocketAddr, page: &str, tmp: &std::path::Path) {
    let counts = common::env_counts("BENCH_BUSY", "8,64");
    let secs = env_usize("BENCH_BUSY_S", 20) as u64;
    let heavy = env_usize("BENCH_BUSY_HEAVY", 1) == 1;
    let (warm, window) = (Duration::from_secs(3), Duration::from_secs(secs));
    println!(
        "busy sessions: {secs} s a window, {} a heavy neighbour (full-page PNGs of /noise)",
        if heavy { "with" } else { "without" }
    );
    for (i, &n) in counts.iter().enumerate() {
        let shapes: [u16; 2] = if i % 2 == 0 { [1, 0] } else { [0, 1] };
        for workers in shapes {
            let shape = if workers == 1 {
                "one thread       "
            } else {
                "a worker per core"
            };
            let (api, stop, thread) =
                start_cordon_apart(&tmp.join(format!("busy-{n}-{workers}")), page_addr, workers)
                    .await;
            let api = std::sync::Arc::new(api);
            // Opened four at a time: each is a cold start (no pool).
            let mut sids = Vec::new();
            for chunk in (0..n + usize::from(heavy)).collect::<Vec<_>>().chunks(4) {
                let opened = futures::future::join_all(chunk.iter().map(|&k| {
                    let api = api.clone();
                    let url = if heavy && k == n {
                        format!("{page}noise")
                    } else {
                        page.to_owned()
                    };
                    async move {
                        let sid = api.open().await;
                        api.post(
                            &format!("/api/sessions/{sid}/navigate"),
                            json!({ "url": url }),
                        )
                        .await;
                        sid
                    }
                }))
                .await;
                sids.extend(opened);
            }
            let start = Instant::now();
            let (from, until) = (start + warm, start + warm + window);
            let mut presses = tokio::task::JoinSet::new();
            for sid in &sids[..n] {
                let (api, sid) = (api.clone(), sid.clone());
                presses.spawn(async move {
                    let mut got = Vec::new();
                    while Instant::now() < until {
                        let t = Instant::now();
                        api.post(
                            &format!("/api/sessions/{sid}/press"),
                            json!({ "key": "Tab" }),
                        )
                        .await;
                        if t >= from && Instant::now() <= until {
                            got.push(t.elapsed());
                        }
                    }
                    got
                });
            }
            let shots = heavy.then(|| {
                let (api, sid) = (api.clone(), sids[n].clone());
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while Instant::now() < until {
                        let t = Instant::now();
                        api.post(
                            &format!("/api/sessions/{sid}/screenshot"),
                            json!({ "full_page": true, "format": "png" }),
                        )
                        .await;
                        if t >= from && Instant::now() <= until {
                            got.push(t.elapsed());
                        }
                    }
                    got
                })
            });
            tokio::time::sleep_until(from.into()).await;
            let cpu0 = cpu_ticks();
            tokio::time::sleep_until(until.into()).await;
            let cpu1 = cpu_ticks();
            let mut pressed = Vec::new();
            while let Some(got) = presses.join_next().await {
                pressed.extend(got.unwrap());
            }
            let shot = match shots {
                Some(task) => Stats(task.await.unwrap()),
                None => Stats(Vec::new()),
            };
            let pressed = Stats(pressed);
            // Cordon's user and system seconds in the window.
            let [user, sys] = [0, 1].map(|k| {
                (cpu1.0[k] - cpu0.0[k]).saturating_sub(cpu1.1[k] - cpu0.1[k]) as f64 / 100.0
            });
            let cpu_s = user + sys;
            let calls = pressed.0.len() + shot.0.len();
            println!(
                "  {n:>3} sessions, {shape}: press p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  ({:.0} presses/s)",
                ms(pressed.median()),
                ms(pressed.pct(0.95)),
                ms(pressed.pct(0.99)),
                pressed.0.len() as f64 / window.as_secs_f64()
            );
            println!(
                "      screenshots {} ; Cordon CPU {:.0} % of a core ({:.0} % in the kernel), {:.0} µs a call",
                shot.show(),
                100.0 * cpu_s / window.as_secs_f64(),
                100.0 * sys / cpu_s.max(f64::MIN_POSITIVE),
                1e6 * cpu_s / calls.max(1) as f64
            );
            futures::future::join_all(sids.iter().map(|sid| api.close(sid))).await;
            let _ = stop.send(());
            tokio::task::spawn_blocking(move || thread.join().unwrap())
                .await
                .unwrap();
        }
    }
}

async fn capacity_run(
    page_addr: std::net::SocketAddr,
    page: &str,
    tmp: &std::path::Path,
    n: usize,
) {
    let hold = Duration::from_secs(env_usize("BENCH_HOLD_S", 60) as u64);
    let mut bare = Vec::new();
    for _ in 0..3 {
        bare.push(bare_mem(tmp, page, &[], Duration::from_secs(10)).await.0);
    }
    bare.sort_unstable();
    // No pool: a warm browser refilled after every open would be one more
    // browser than sessions at the memory's edge.
    let (api, stop, task, _) = start_cordon(&tmp.join("capacity"), page_addr, 0, &[]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let base = mem_available_kib();
    // The opens stop while this much memory is still free (MiB), so a run
    // that does not fit ends with a figure instead of swapping.
    let floor_kib = env_usize("BENCH_MIN_FREE_MIB", 1536) as u64 * 1024;
    let cp_before = common::pss_kib(std::process::id());
    let mut open = Vec::new();
    let mut failed = None;
    let mut opens = Vec::new();
    let t = Instant::now();
    for i in 0..n {
        let free = mem_available_kib();
        if free < floor_kib {
            failed = Some((
                i,
                reqwest::StatusCode::INSUFFICIENT_STORAGE,
                format!(
                    "not tried: MemAvailable {} MiB, below BENCH_MIN_FREE_MIB",
                    free / 1024
                ),
            ));
            break;
        }
        let o = Instant::now();
        let res = api
            .http
            .post(format!("{}/api/sessions", api.base))
            .bearer_auth(&api.key)
            .json(&json!({ "record": "off" }))
            .send()
            .await
            .unwrap();
        if !res.status().is_success() {
            failed = Some((i, res.status(), res.text().await.unwrap_or_default()));
            break;
        }
        opens.push(o.elapsed());
        let sid = res.json::<Value>().await.unwrap()["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        open.push(sid);
    }
    let took = t.elapsed();
    tokio::time::sleep(hold).await;
    let used = base.saturating_sub(mem_available_kib());
    let groups = common::session_cgroups();
    let mut per: Vec<u64> = groups
        .iter()
        .map(|(_, procs)| procs.iter().map(|&p| common::pss_kib(p)).sum::<u64>())
        .collect();
    let me = std::process::id();
    let cp = common::pss_kib(me);
    let all_browsers: u64 = common::descendants(me)
        .into_iter()
        .map(common::pss_kib)
        .sum();
    let how = if per.len() >= open.len() {
        "cgroups"
    } else {
        // No cgroup per sandbox here: every browser process below this
        // one, shared out (there is no pool).
        per = vec![all_browsers / (open.len() as u64).max(1); open.len()];
        "process tree"
    };
    per.sort_unstable();
    let mut answered = 0;
    let mut refused = Vec::new();
    for sid in &open {
        let res = api
            .http
            .post(format!("{}/api/sessions/{sid}/snapshot", api.base))
            .bearer_auth(&api.key)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        if res.status().is_success() {
            answered += 1;
        } else {
            refused.push(format!("{sid}: {}", res.status()));
        }
    }
    let mib = |k: u64| k as f64 / 1024.0;
    println!(
        "capacity: {} idle sessions on {page} opened one after another in {:.0} s (open {}){}",
        open.len(),
        took.as_secs_f64(),
        Stats(opens).show(),
        failed
            .map(|(i, s, b)| format!("; open #{i} answered {s}: {b}"))
            .unwrap_or_default()
    );
    println!(
        "  held {} s; PSS per session ({how}, {} measured): median {:.1} MiB  p95 {:.1}  max {:.1}; all browsers {:.0} MiB; the control plane {:.0} MiB ({:.0} before the opens); MemAvailable drop {:.0} MiB = {:.1} MiB per session",
        hold.as_secs(),
        per.len(),
        mib(per[per.len() / 2]),
        mib(per[(per.len() * 95 / 100).min(per.len() - 1)]),
        mib(*per.last().unwrap()),
        mib(all_browsers),
        mib(cp),
        mib(cp_before),
        mib(used),
        mib(used) / open.len().max(1) as f64
    );
    println!(
        "  bare Chromium with Cordon's flags on the same page, PSS (3 runs): {:.1} / {:.1} / {:.1} MiB",
        mib(bare[0]),
        mib(bare[1]),
        mib(bare[2])
    );
    println!(
        "  snapshots at the end: {answered} of {} answered{}",
        open.len(),
        if refused.is_empty() {
            String::new()
        } else {
            format!("; refused: {}", refused.join(", "))
        }
    );
    for sid in &open {
        api.close(sid).await;
    }
    let _ = stop.send(());
    task.await.unwrap();
}

/// PSS and private dirty memory ([`common::dirty_kib`]) by Chromium process kind (`browser`,
/// `renderer`, `utility:network` …, from each process's `--type=`; Chromium
/// rewrites its children's command lines into one space-separated string),
/// `other` for what is not Chromium (bwrap), KiB.
fn mem_by_kind(pids: &[u32]) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut out = std::collections::BTreeMap::new();
    for &pid in pids {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let flag = |name: &str| {
            cmd.split(' ')
                .find_map(|a| a.strip_prefix(name).map(str::to_owned))
        };
        let chromium = cmd.split(' ').next().is_some_and(|a| a.contains("chrom"));
        let kind = match (flag("--type="), flag("--utility-sub-type=")) {
            (Some(t), Some(sub)) => format!("{t}:{}", sub.rsplit('.').next().unwrap_or(&sub)),
            (Some(t), None) => t,
            (None, _) if chromium => "browser".into(),
            _ => "other".into(),
        };
        let e = out.entry(kind).or_insert((0, 0));
        e.0 += common::pss_kib(pid);
        e.1 += common::dirty_kib(pid);
    }
    out
}

/// Where a Cordon session's memory goes against a bare browser with the
/// same flags, process kind by process kind (PSS after 10 s idle on
/// `page`, one session of a Cordon with no pool, median of 3).
async fn mem_split(page_addr: std::net::SocketAddr, page: &str, tmp: &std::path::Path) {
    use std::collections::BTreeMap;
    let (api, stop, task, _) = start_cordon(&tmp.join("memsplit"), page_addr, 0, &[]).await;
    let mut cordon_runs: Vec<BTreeMap<String, (u64, u64)>> = Vec::new();
    let mut bare_runs: Vec<BTreeMap<String, (u64, u64)>> = Vec::new();
    for _ in 0..3 {
        let sid = api.post("/api/sessions", json!({ "record": "off" })).await["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        // Every process below this one: the session's sandbox (there is no
        // pool), and nothing another program on the machine runs.
        let pids = common::descendants(std::process::id());
        cordon_runs.push(mem_by_kind(&pids));
        api.close(&sid).await;

        bare_runs.push(bare_mem_by_kind(tmp, page, &[], Duration::from_secs(10)).await);
    }
    // Medians over the runs, MiB: (PSS, private dirty) of one kind, or of all.
    let median = |runs: &[BTreeMap<String, (u64, u64)>], kind: Option<&str>| {
        let pick = |r: &BTreeMap<String, (u64, u64)>| match kind {
            Some(k) => *r.get(k).unwrap_or(&(0, 0)),
            None => r.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1)),
        };
        let mut p: Vec<u64> = runs.iter().map(|r| pick(r).0).collect();
        let mut u: Vec<u64> = runs.iter().map(|r| pick(r).1).collect();
        p.sort_unstable();
        u.sort_unstable();
        (
            p[p.len() / 2] as f64 / 1024.0,
            u[u.len() / 2] as f64 / 1024.0,
        )
    };
    let mut kinds: Vec<String> = cordon_runs
        .iter()
        .chain(&bare_runs)
        .flat_map(|r| r.keys().cloned())
        .collect();
    kinds.sort();
    kinds.dedup();
    let rows = kinds
        .iter()
        .map(|k| (k.as_str(), Some(k.as_str())))
        .chain([("all", None)]);
    for (name, kind) in rows {
        let ((cp, cu), (bp, bu)) = (median(&cordon_runs, kind), median(&bare_runs, kind));
        println!(
            "memsplit: {name:<24} dirty Cordon {cu:6.1} bare {bu:6.1} ({:+.1})   PSS Cordon {cp:6.1} bare {bp:6.1} ({:+.1}) MiB",
            cu - bu,
            cp - bp
        );
    }
    let _ = stop.send(());
    task.await.unwrap();
}

/// What Chromium flags save of a bare browser's memory on `page` (private
/// dirty and PSS after 10 s idle, median of 3), each against Cordon's flags alone.
async fn mem_flags(page: &str, tmp: &std::path::Path) {
    let features = cordon::sandbox::chromium::BASE_FLAGS
        .iter()
        .find(|f| f.starts_with("--disable-features="))
        .unwrap()
        .to_string();
    let variants: Vec<(&str, Vec<String>)> = vec![
        ("Cordon's flags", vec![]),
        (
            "- --no-unsandboxed-zygote (what it saves)",
            vec!["!--no-unsandboxed-zygote".into()],
        ),
        (
            "+ --renderer-process-limit=1",
            vec!["--renderer-process-limit=1".into()],
        ),
        (
            "+ no spare renderer",
            vec![format!("{features},SpareRendererForSitePerProcess")],
        ),
        (
            "+ --disable-site-isolation-trials",
            vec!["--disable-site-isolation-trials".into()],
        ),
        (
            "+ V8 lite mode (--js-flags=--lite-mode)",
            vec!["--js-flags=--lite-mode".into()],
        ),
        (
            "+ V8 --max-lazy, no opt (--js-flags=--no-opt)",
            vec!["--js-flags=--no-opt".into()],
        ),
        ("+ --process-per-site", vec!["--process-per-site".into()]),
        (
            "+ --enable-low-end-device-mode",
            vec!["--enable-low-end-device-mode".into()],
        ),
        (
            "+ V8 young generation 1 MiB (--max-semi-space-size=1)",
            vec!["--js-flags=--max-semi-space-size=1".into()],
        ),
        (
            "+ --disable-dev-shm-usage",
            vec!["--disable-dev-shm-usage".into()],
        ),
        (
            "+ no spare renderer, renderer limit 1, lite mode",
            vec![
                format!("{features},SpareRendererForSitePerProcess"),
                "--renderer-process-limit=1".into(),
                "--js-flags=--lite-mode".into(),
            ],
        ),
    ];
    let mut base = (0.0, 0.0);
    for (name, extra) in variants {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(bare_mem(tmp, page, &extra, Duration::from_secs(10)).await);
        }
        let mid = |mut x: Vec<u64>| {
            x.sort_unstable();
            x[1] as f64 / 1024.0
        };
        let (p, u) = (
            mid(v.iter().map(|m| m.0).collect()),
            mid(v.iter().map(|m| m.1).collect()),
        );
        if base == (0.0, 0.0) {
            base = (p, u);
        }
        println!(
            "memflags: {name:<50} dirty {u:6.1} MiB ({:+.1})   PSS {p:6.1} MiB ({:+.1})",
            u - base.1,
            p - base.0,
        );
    }
}

/// How a step could tell that its action changed nothing: on a page whose
/// clicks repaint and on one whose clicks do not, a click, then one or two
/// `requestAnimationFrame`s awaited over CDP, against the arrival of the
/// first screencast frame after the click (raw Chromium, Cordon's flags).
async fn frame_signal(page_url: &str, tmp: &std::path::Path, iters: usize) {
    for (what, url) in [
        ("repaints", format!("{page_url}count")),
        ("changes nothing", page_url.to_owned()),
    ] {
        let (conn, child, page) =
            common::raw_page(&tmp.join(format!("signal-{}", what.len())), &url).await;
        let (mut rx, pump) = screencast_arrivals(&page).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        for rafs in [1, 2] {
            let expr = if rafs == 1 {
                "new Promise(r => requestAnimationFrame(() => r(1)))"
            } else {
                "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(2))))"
            };
            let (mut clicked, mut signal, mut frame, mut after) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut none = 0;
            for _ in 0..iters * 3 {
                while rx.try_recv().is_ok() {}
                let t = Instant::now();
                cordon::cdp::click(
                    &page,
                    &cordon::cdp::Locator::Point(60.0, 30.0),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
                clicked.push(t.elapsed());
                page.execute(
                    EvaluateParams::builder()
                        .expression(expr)
                        .await_promise(true)
                        .build()
                        .unwrap(),
                )
                .await
                .unwrap();
                let s = Instant::now();
                signal.push(s - t);
                match tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
                    Ok(Some(at)) => {
                        frame.push(at - t);
                        after.push(at.saturating_duration_since(s));
                    }
                    _ => none += 1,
                }
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            println!(
                "frame signal, a click that {what}, {rafs} rAF: click {}\n    signal {}\n    first frame {}\n    frame after the signal {}   no frame in 300 ms: {none}",
                Stats(clicked).show(),
                Stats(signal).show(),
                Stats(frame).show(),
                Stats(after).show()
            );
        }
        pump.abort();
        drop(page);
        drop(conn);
        kill(child);
    }
}

/// How a repaint probe clicks.
#[derive(Clone, Copy, PartialEq)]
enum Press {
    /// `cdp::click`: the pointer moved to the point, then pressed and
    /// released (what Cordon's click does after its checks).
    Click,
    /// Pressed and released only (the pointer is already there).
    ButtonOnly,
    /// Cordon's `click` tool over the HTTP API.
    Api,
}

/// What of Cordon's page set-up a raw repaint probe repeats.
#[derive(Clone, Copy)]
enum SetUp {
    None,
    /// `Emulation.setDeviceMetricsOverride` (1280×720, scale 1), as an open does.
    Metrics,
    /// `Target.setAutoAttach` without the pause (`cdp::release_new_targets`).
    Attach,
    Both,
    /// No override; a window tall enough for a 1280×720 viewport.
    TallWindow,
}

/// One page being clicked: its frames' arrivals, and what was measured.
struct Probe {
    name: String,
    page: chromiumoxide::Page,
    press: Press,
    /// For the API's click: the index of its Cordon, and the session.
    api: Option<(usize, String)>,
    rx: tokio::sync::mpsc::UnboundedReceiver<Instant>,
    pump: tokio::task::JoinHandle<()>,
    frame: Vec<Duration>,
    input: Vec<Duration>,
    missed: usize,
}

/// Issue 25 item 1: from a click's start to the first screencast frame of
/// its repaint, in Cordon's sessions and in raw Chromiums that each differ
/// from Cordon's flags (or screencast, or input, or page set-up) in one
/// thing: the bisection of the repaint gap. All browsers run at once and
/// the probes take turns, three clicks each a round, the order rotating,
/// so the machine's drift falls on all of them alike.
async fn repaint_gap(
    page_addr: std::net::SocketAddr,
    url: &str,
    tmp: &std::path::Path,
    iters: usize,
) {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    use chromiumoxide::cdp::browser_protocol::page::{
        StartScreencastFormat, StartScreencastParams,
    };
    let base: Vec<String> = cordon::sandbox::chromium::BASE_FLAGS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let without = |drop: &dyn Fn(&str) -> bool| -> Vec<String> {
        base.iter().filter(|f| !drop(f)).cloned().collect()
    };
    let jpeg = |quality: u8, w: u32, h: u32| {
        cordon::live::Encoding {
            quality,
            max_width: w,
            max_height: h,
        }
        .params()
    };
    let png = StartScreencastParams::builder()
        .format(StartScreencastFormat::Png)
        .max_width(1280)
        .max_height(720)
        .every_nth_frame(1)
        .build();
    // (name, flags, screencast, Cordon's page set-up, input): each differs
    // from the first in one thing.
    let with = |name, setup, press| (name, base.clone(), jpeg(80, 1280, 720), setup, press);
    let flags = |name, flags| (name, flags, jpeg(80, 1280, 720), SetUp::None, Press::Click);
    let cast = |name, params| (name, base.clone(), params, SetUp::None, Press::Click);
    let minimal = [
        "--headless",
        "--no-first-run",
        "--remote-debugging-address=127.0.0.1",
        "--remote-debugging-port=0",
    ];
    let raws: Vec<(&str, Vec<String>, StartScreencastParams, SetUp, Press)> = vec![
        with("raw, Cordon's flags", SetUp::None, Press::Click),
        with(
            "raw, + Cordon's page set-up (metrics override, auto-attach)",
            SetUp::Both,
            Press::Click,
        ),
        with(
            "raw, + the metrics override alone",
            SetUp::Metrics,
            Press::Click,
        ),
        with(
            "raw, no override, window 1280x807 (a 1280x720 viewport too)",
            SetUp::TallWindow,
            Press::Click,
        ),
        with("raw, + auto-attach alone", SetUp::Attach, Press::Click),
        with(
            "raw, press and release only",
            SetUp::None,
            Press::ButtonOnly,
        ),
        cast("raw, screencast PNG", png),
        cast("raw, screencast JPEG q30 640x360", jpeg(30, 640, 360)),
        flags(
            "raw, without --disable-gpu",
            without(&|f| f == "--disable-gpu"),
        ),
        flags(
            "raw, without --in-process-gpu",
            without(&|f| f == "--in-process-gpu"),
        ),
        flags(
            "raw, without NetworkServiceInProcess2",
            without(&|f| f.starts_with("--enable-features=")),
        ),
        flags(
            "raw, without the --disable-features list",
            without(&|f| f.starts_with("--disable-features=")),
        ),
        flags(
            "raw, without --hide-scrollbars",
            without(&|f| f == "--hide-scrollbars"),
        ),
        flags(
            "raw, a minimal set (headless, DevTools, no first run)",
            minimal.iter().map(|s| s.to_string()).collect(),
        ),
    ];
    // BENCH_REPAINT: comma-separated parts of the probes' names to run
    // (the first, the raw baseline, always runs); all when unset.
    let chosen = std::env::var("BENCH_REPAINT").unwrap_or_default();
    let wanted =
        |name: &str| chosen.is_empty() || chosen.split(',').any(|c| name.contains(c.trim()));
    let mut probes = Vec::new();
    let mut children = Vec::new();
    for (i, (name, flags, params, setup, press)) in raws.into_iter().enumerate() {
        if i > 0 && !wanted(name) {
            continue;
        }
        // Headless Chromium keeps 87 px of a window for the browser's
        // frame: a 1280x720 window shows a 1280x633 viewport unless the
        // metrics are overridden, as Cordon does.
        let height = if matches!(setup, SetUp::TallWindow) {
            807
        } else {
            720
        };
        let (conn, child) =
            common::raw_chromium_flags(&tmp.join(format!("repaint-{i}")), 1280, height, flags)
                .await;
        let page = conn.first_page().await.unwrap();
        if matches!(setup, SetUp::Both | SetUp::Attach) {
            cordon::cdp::release_new_targets(&page).await.unwrap();
        }
        if matches!(setup, SetUp::Both | SetUp::Metrics) {
            page.execute(SetDeviceMetricsOverrideParams::new(1280, 720, 1.0, false))
                .await
                .unwrap();
        }
        common::load(&page, url).await;
        let (rx, pump) = screencast_arrivals_with(&page, params).await;
        probes.push(Probe {
            name: name.to_owned(),
            page,
            press,
            api: None,
            rx,
            pump,
            frame: Vec::new(),
            input: Vec::new(),
            missed: 0,
        });
        children.push((conn, child));
    }
    // Cordon: its default driver, and the plain process driver without
    // the per-session limits (no namespaces, no cgroup, the host's /dev/shm).
    let mut cordons = Vec::new();
    for (driver, env) in [
        ("auto", vec![]),
        (
            "auto, no limits",
            vec![("CORDON_SESSION_LIMITS", "false".to_string())],
        ),
        (
            "process, no limits",
            vec![
                ("CORDON_SANDBOX_DRIVER", "process".to_string()),
                ("CORDON_SESSION_LIMITS", "false".to_string()),
            ],
        ),
    ] {
        if !wanted(&format!("Cordon ({driver})")) {
            continue;
        }
        let (api, stop, task, state) = start_cordon(
            &tmp.join(format!(
                "repaint-cordon-{}",
                driver.replace([' ', ','], "-")
            )),
            page_addr,
            0,
            &env,
        )
        .await;
        let sid = api.open().await;
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": url }),
        )
        .await;
        let live = state
            .sessions
            .find_live(&sid.parse().unwrap())
            .await
            .unwrap();
        let page = live.pages().await.unwrap().remove(0);
        let presses: &[Press] = if driver == "auto" {
            &[Press::Click, Press::Api]
        } else {
            &[Press::Click]
        };
        for &press in presses {
            // One screencast per tab: the second probe of a session listens
            // to the same frames (its start is refused as already active).
            let (rx, pump) = if press == Press::Click {
                screencast_arrivals(&page).await
            } else {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let mut frames = page
                    .event_listener::<chromiumoxide::cdp::browser_protocol::page::EventScreencastFrame>()
                    .await
                    .unwrap();
                let pump = tokio::spawn(async move {
                    use futures::StreamExt;
                    while frames.next().await.is_some() {
                        let _ = tx.send(Instant::now());
                    }
                });
                (rx, pump)
            };
            probes.push(Probe {
                name: format!(
                    "Cordon ({driver}), {}",
                    if press == Press::Api {
                        "the click tool over the API"
                    } else {
                        "cdp::click on its page"
                    }
                ),
                page: page.clone(),
                press,
                api: Some((cordons.len(), sid.clone())),
                rx,
                pump,
                frame: Vec::new(),
                input: Vec::new(),
                missed: 0,
            });
        }
        cordons.push((api, stop, task, sid));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = probes.len();
    let mut k = 0u64;
    for round in 0..iters {
        for j in 0..n {
            let p = &mut probes[(j + round) % n];
            let api = p.api.as_ref().map(|(i, sid)| (&cordons[*i].0, sid));
            for _ in 0..3 {
                while p.rx.try_recv().is_ok() {}
                let t = Instant::now();
                match p.press {
                    Press::Click => cordon::cdp::click(
                        &p.page,
                        &cordon::cdp::Locator::Point(60.0, 30.0),
                        Duration::from_secs(5),
                    )
                    .await
                    .unwrap(),
                    Press::ButtonOnly => {
                        for kind in [cordon::cdp::MouseKind::Down, cordon::cdp::MouseKind::Up] {
                            let left = cordon::cdp::Button::Left;
                            cordon::cdp::mouse_event(&p.page, kind, 60.0, 30.0, left, 1, 1, 0)
                                .await
                                .unwrap();
                        }
                    }
                    Press::Api => {
                        let (api, sid) = api.expect("an API probe has its session");
                        api.post(
                            &format!("/api/sessions/{sid}/click"),
                            json!({ "x": 60, "y": 30 }),
                        )
                        .await;
                    }
                }
                p.input.push(t.elapsed());
                match tokio::time::timeout(Duration::from_secs(2), p.rx.recv()).await {
                    Ok(Some(at)) => p.frame.push(at - t),
                    _ => p.missed += 1,
                }
                // 40–56 ms: the clicks start at every point of the frame alike.
                k += 1;
                tokio::time::sleep(Duration::from_millis(40 + (k * 7) % 17)).await;
            }
        }
    }
    let raw = Stats(probes[0].frame.clone()).median();
    println!(
        "repaint: click start → the first screencast frame after it ({} clicks a probe, 1280x720, the page's heading counts clicks)",
        iters * 3
    );
    for p in &probes {
        let f = Stats(p.frame.clone());
        println!(
            "  {:<62} frame p50 {:>6.1} ms  p95 {:>6.1} ms  ({:.2}x raw)  input p50 {:>5.1} ms  missed {}",
            p.name,
            ms(f.median()),
            ms(f.pct(0.95)),
            ms(f.median()) / ms(raw),
            ms(Stats(p.input.clone()).median()),
            p.missed
        );
    }
    for p in probes {
        p.pump.abort();
    }
    for (api, stop, task, sid) in cordons {
        api.close(&sid).await;
        let _ = stop.send(());
        task.await.unwrap();
    }
    for (conn, child) in children {
        drop(conn);
        kill(child);
    }
}

/// The warm first page, split: where a fresh session's first navigation
/// spends its time against a raw browser's. Each round, one after another
/// with a rest before each (the pool refills, the raw browser settles):
/// - raw, a fresh idle browser's first navigation, then the same URL again
///   (the engine section's "raw navigate", a warm renderer and cache);
/// - raw with a device-metrics override set first (what a session had
///   until the window was sized instead), and with its window sized for
///   the same 1280×720 viewport (what a session has now);
/// - Cordon from the pool, the session's page navigated over CDP directly
///   after a rest (the browser in its sandbox, behind the egress guard: no
///   control plane);
/// - the same over the API (the control plane's part of a navigation);
/// - Cordon from the pool, open and navigate over the API (the engine
///   section's "open → first page loaded (warm)").
async fn first_page_split(
    page_addr: std::net::SocketAddr,
    page: &str,
    tmp: &std::path::Path,
    iters: usize,
) {
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    let rest = Duration::from_millis(1500);
    let nav = |p: chromiumoxide::Page| async move {
        let t = Instant::now();
        common::load(&p, page).await;
        t.elapsed()
    };
    let (api, stop, task, state) = start_cordon(&tmp.join("firstpage"), page_addr, 1, &[]).await;
    let (mut raw_first, mut raw_again, mut raw_override) = (Vec::new(), Vec::new(), Vec::new());
    let mut raw_sized = Vec::new();
    let (mut cdp_nav, mut api_open, mut api_nav, mut api_total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut api_rested = Vec::new();
    for i in 0..iters {
        // 0: as started (a 1280×633 viewport in a 1280×720 window), 1:
        // Cordon's old viewport override, 2: the window sized for a
        // 1280×720 viewport, as Cordon's are now.
        for setup in 0..3 {
            let (conn, child) =
                common::raw_chromium(&tmp.join(format!("firstpage-raw-{i}-{setup}")), 1280, 720)
                    .await;
            let p = conn.first_page().await.unwrap();
            match setup {
                1 => {
                    p.execute(SetDeviceMetricsOverrideParams::new(1280, 720, 1.0, false))
                        .await
                        .unwrap();
                }
                2 => cordon::cdp::size_viewport(&p, 1280, 720).await.unwrap(),
                _ => {}
            }
            tokio::time::sleep(rest).await;
            let first = nav(p.clone()).await;
            match setup {
                0 => {
                    raw_first.push(first);
                    raw_again.push(nav(p).await);
                }
                1 => raw_override.push(first),
                _ => raw_sized.push(first),
            }
            drop(conn);
            kill(child);
        }
        tokio::time::sleep(rest).await;
        let sid = api.open().await;
        let live = state
            .sessions
            .find_live(&sid.parse().unwrap())
            .await
            .unwrap();
        let p = live.pages().await.unwrap().remove(0);
        drop(live);
        // Past the pool's refill (it starts `pool_refill_delay`, 1 s,
        // after the take, and a Chromium start takes both cores a while).
        tokio::time::sleep(rest * 2).await;
        cdp_nav.push(nav(p).await);
        api.close(&sid).await;
        tokio::time::sleep(rest).await;
        let sid = api.open().await;
        tokio::time::sleep(rest * 2).await;
        let t = Instant::now();
        api.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": page }),
        )
        .await;
        api_rested.push(t.elapsed());
        api.close(&sid).await;
        tokio::time::sleep(rest).await;
        let t = Instant::now();
        let sid = api.open().await;
        let opened = t.elapsed();
        let res = api
            .post(
                &format!("/api/sessions/{sid}/navigate"),
                json!({ "url": page }),
            )
            .await;
        assert!(res["status"] == 200, "{res}");
        let total = t.elapsed();
        api_open.push(opened);
        api_nav.push(total - opened);
        api_total.push(total);
        api.close(&sid).await;
    }
    let _ = stop.send(());
    task.await.unwrap();
    let (raw_first, raw_again, raw_override) =
        (Stats(raw_first), Stats(raw_again), Stats(raw_override));
    let (cdp_nav, api_open, api_nav, api_total) = (
        Stats(cdp_nav),
        Stats(api_open),
        Stats(api_nav),
        Stats(api_total),
    );
    let r = |s: &Stats| ms(s.median()) / ms(raw_first.median());
    println!("first page, split ({iters} rounds; ratios to raw's first navigation)");
    println!(
        "raw  first navigation, fresh idle browser   {}",
        raw_first.show()
    );
    println!(
        "raw  the same URL again (engine's baseline) {}   {:.2}×",
        raw_again.show(),
        r(&raw_again)
    );
    println!(
        "raw  first navigation, viewport override    {}   {:.2}×",
        raw_override.show(),
        r(&raw_override)
    );
    let raw_sized = Stats(raw_sized);
    println!(
        "raw  first navigation, window sized 1280×720 {}   {:.2}×",
        raw_sized.show(),
        r(&raw_sized)
    );
    println!(
        "cordon session's first navigation over CDP  {}   {:.2}×",
        cdp_nav.show(),
        r(&cdp_nav)
    );
    let api_rested = Stats(api_rested);
    println!(
        "cordon navigate (API), the session at rest  {}   {:.2}×",
        api_rested.show(),
        r(&api_rested)
    );
    println!(
        "cordon open (API, from the pool)            {}",
        api_open.show()
    );
    println!(
        "cordon navigate (API), after the open       {}   {:.2}×",
        api_nav.show(),
        r(&api_nav)
    );
    println!(
        "cordon open → first page loaded (API)       {}   {:.2}×   ({:.2}× the engine's baseline)",
        api_total.show(),
        r(&api_total),
        ms(api_total.median()) / ms(raw_again.median())
    );
}
