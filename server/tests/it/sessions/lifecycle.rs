//! Limits, deadlines, idle timeouts, crashed browsers, the warm pool, shutdown.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, PATIENCE, session_app, wait_until};
use crate::site::{self};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_answer_429_with_retry_after() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_MAX_SESSIONS_PER_TENANT", "1"),
            ("CORDON_MAX_SESSIONS", "2"),
        ],
    )
    .await;
    let a = app.agent("acme").await;
    let b = app.agent("globex").await;
    let c = app.agent("initech").await;
    let sid = a.open(json!({})).await;
    let res = app
        .http
        .post(format!("{}/api/sessions", a.base))
        .bearer_auth(&a.key)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(res.headers().contains_key("retry-after"));
    b.open(json!({})).await;
    let (status, err) = c.post("/api/sessions", json!({})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "host limit: {err}");
    a.close(&sid).await;
    a.open(json!({})).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_and_idle_timeouts_close_sessions() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SESSION_IDLE_S", "2")],
    )
    .await;
    let agent = app.agent("acme").await;
    let short = agent.open(json!({ "deadline_s": 1 })).await;
    let idle = agent.open(json!({})).await;
    let busy = agent.open(json!({})).await;
    let (s, i) = wait_until("the deadline and the idle timeout", PATIENCE, || async {
        agent
            .tool(&busy, "read_dom", json!({ "max_chars": 10 }))
            .await;
        let (_, s) = agent.get(&format!("/api/sessions/{short}")).await;
        let (_, i) = agent.get(&format!("/api/sessions/{idle}")).await;
        if s["state"] == "closed" && i["state"] == "closed" {
            Ok((s, i))
        } else {
            Err(format!("{s} {i}"))
        }
    })
    .await;
    assert_eq!(s["close_reason"], "deadline", "{s}");
    assert_eq!(i["close_reason"], "idle", "{i}");
    let (_, b) = agent.get(&format!("/api/sessions/{busy}")).await;
    assert_eq!(b["state"], "ready", "activity keeps a session open");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_browser_fails_its_session_instead_of_hanging() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let live = app.live("acme", &sid).await;
    let pid = live.sandbox.pid.unwrap();
    drop(live);
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let start = Instant::now();
    let (status, err) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert!(start.elapsed() < Duration::from_secs(10), "no hang");
    assert!(
        status == StatusCode::BAD_GATEWAY || status == StatusCode::GONE,
        "{status}: {err}"
    );
    let info = wait_until("the session to be failed", PATIENCE, || async {
        let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
        if info["state"] == "failed" {
            Ok(info)
        } else {
            Err(info.to_string())
        }
    })
    .await;
    assert_eq!(info["close_reason"], "browser_exited", "{info}");
    assert_eq!(
        agent.tool(&sid, "screenshot", json!({})).await.0,
        StatusCode::GONE
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_warm_pool_hands_out_each_browser_once_and_refills_after_its_delay() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_POOL_SIZE", "1"),
            ("CORDON_POOL_REFILL_DELAY_MS", "8000"),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let pool = || {
        (
            app.state.sessions.pool_ready(),
            app.state.sessions.pool_starting(),
        )
    };
    let filled = || async {
        match pool() {
            (1, _) => Ok(()),
            other => Err(format!("(ready, starting) = {other:?}")),
        }
    };
    wait_until("the warm pool to fill", PATIENCE, filled).await;
    let (status, first) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(
        (status, &first["from_pool"]),
        (StatusCode::CREATED, &json!(true)),
        "{first}"
    );
    // The replacement waits out the refill delay (8 s) instead of starting
    // while the new session loads its first pages: nothing starts during
    // the first second after the take, however slow the machine.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(1) {
        assert_eq!(
            pool(),
            (0, 0),
            "the replacement started before the refill delay"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, second) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(
        (status, &second["from_pool"]),
        (StatusCode::CREATED, &json!(false)),
        "the pool was still empty, so a cold start: {second}"
    );
    let a = app
        .state
        .sessions
        .get(
            &"acme".parse().unwrap(),
            &first["session_id"].as_str().unwrap().parse().unwrap(),
        )
        .await
        .unwrap();
    let b = app
        .state
        .sessions
        .get(
            &"acme".parse().unwrap(),
            &second["session_id"].as_str().unwrap().parse().unwrap(),
        )
        .await
        .unwrap();
    assert_ne!(a.sandbox.id, b.sandbox.id, "never shared");
    assert_ne!(a.sandbox.pid, b.sandbox.pid);
    drop((a, b));
    wait_until("the pool to refill after its delay", PATIENCE, filled).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_browser() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[("CORDON_POOL_SIZE", "1")]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let live = app.live("acme", &sid).await;
    let (pid, marker) = (live.sandbox.pid.unwrap(), live.sandbox.marker.clone());
    drop(live);
    let db = app.stop().await;
    let store = db.store().await;
    assert!(!cordon::sandbox::is_alive(pid, &marker));
    let row = store
        .session_get("acme", &sid.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.state.as_str(), row.close_reason.map(|r| r.as_str())),
        ("closed", Some("shutdown"))
    );
}
