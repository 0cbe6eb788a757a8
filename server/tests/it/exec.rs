//! The `exec` driver with a script standing in for an external engine.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, session_app};
use crate::site::{self, Canary};

fn script() -> String {
    format!(
        "{}/tests/fixtures/exec-chromium.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_sandbox_browses_through_the_guard_and_is_destroyed_at_close() {
    let site = site::start().await;
    let canary = Canary::start().await;
    let create = format!("{} create", script());
    let destroy = format!("{} destroy", script());
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SANDBOX_DRIVER", "exec"),
            ("CORDON_EXEC_CREATE", &create),
            ("CORDON_EXEC_DESTROY", &destroy),
        ],
    )
    .await;
    let ready = app
        .get("/readyz")
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(ready["checks"]["sandbox"]["driver"], "exec");
    // Its browsers run elsewhere: this host's inotify limit is not theirs.
    assert!(ready["checks"]["sandbox"]["inotify"].is_null(), "{ready}");
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let live = app.live("acme", &sid).await;
    let pid: i32 = std::fs::read_to_string(live.sandbox.runtime_dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let sandbox_id = live.sandbox.id.clone();
    let marker = live
        .sandbox
        .runtime_dir
        .join("profile")
        .display()
        .to_string();
    assert!(cordon::sandbox::is_alive(pid, &marker));
    drop(live);
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(
        (status, nav["title"].as_str()),
        (StatusCode::OK, Some("Login")),
        "{nav}"
    );
    let (_, res) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": format!("http://127.0.0.1:{}/", canary.addr.port()) }),
        )
        .await;
    assert_ne!(res["title"], "canary");
    assert_eq!(canary.hits(), 0);
    let log = app
        .state
        .store
        .egress_for_sandbox(&sandbox_id.parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert!(
        log.iter().any(|e| e.entry.port == site.addr.port()),
        "the page went through the guard"
    );
    agent.close(&sid).await;
    crate::helpers::wait_until(
        "the destroy command to stop the browser",
        crate::helpers::PATIENCE,
        || async {
            if cordon::sandbox::is_alive(pid, &marker) {
                Err(format!("pid {pid} still runs"))
            } else {
                Ok(())
            }
        },
    )
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_create_command_is_a_clean_503() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SANDBOX_DRIVER", "exec"),
            ("CORDON_EXEC_CREATE", "/bin/false"),
            ("CORDON_EXEC_DESTROY", "/bin/true"),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let (status, err) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{err}");
    let (_, list) = agent.get("/api/sessions").await;
    assert_eq!(list[0]["state"], "failed");
    assert_eq!(list[0]["close_reason"], "start_failed");
    assert_eq!(app.state.sessions.open_count(), 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_that_fails_to_start_once_is_started_again() {
    let site = site::start().await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("first-start-failed");
    let flaky = format!(
        "{}/tests/fixtures/exec-flaky.sh {}",
        env!("CARGO_MANIFEST_DIR"),
        marker.display()
    );
    let create = format!("{flaky} create");
    let destroy = format!("{flaky} destroy");
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SANDBOX_DRIVER", "exec"),
            ("CORDON_EXEC_CREATE", &create),
            ("CORDON_EXEC_DESTROY", &destroy),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let (status, info) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{info}");
    assert!(marker.exists(), "the first start did fail");
    let (status, nav) = agent
        .tool(
            info["session_id"].as_str().unwrap(),
            "navigate",
            json!({ "url": site.url("/form") }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    app.stop().await;
}
