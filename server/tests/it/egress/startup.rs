//! Chromium's own start-up requests: a fresh browser, left alone, asks the
//! guard (the logging proxy every browser is pointed at) for nothing.

use std::time::Duration;

use cordon::egress::Decision;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, PATIENCE, session_app, wait_until};
use crate::site;

/// How long the fresh browser is left alone. Its own requests came within
/// half a second of start, `ListAccounts`' retries at about 1 s and 4 s.
const LEFT_ALONE: Duration = Duration::from_secs(6);

/// Opens a session on a cold browser of `driver`, leaves it alone, then
/// browses once; the egress log must hold that one visit and nothing else.
async fn a_fresh_browser_sends_nothing_on_its_own(driver: &str) {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SANDBOX_DRIVER", driver)],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    let sandbox = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid.parse().unwrap())
        .await
        .unwrap()
        .sandbox
        .clone();
    // A window in which nothing may happen: no state to poll for.
    tokio::time::sleep(LEFT_ALONE).await;

    // One request of ours. Rows reach the log through one queue per
    // listener, in order: once this one is in, every earlier one is too.
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    let port = site.addr.port();
    let rows = wait_until("the site's request in the egress log", PATIENCE, || async {
        let rows = app
            .state
            .store
            .egress_for_sandbox(&sandbox.id.parse().unwrap(), 10_000)
            .await
            .unwrap();
        if rows
            .iter()
            .any(|e| e.entry.port == port && e.entry.decision == Decision::Allowed)
        {
            Ok(rows)
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
    let own: Vec<String> = rows
        .iter()
        .filter(|e| !(e.entry.host == "127.0.0.1" && e.entry.port == port))
        .map(|e| format!("{}:{} {:?}", e.entry.host, e.entry.port, e.entry.reason))
        .collect();
    assert!(
        own.is_empty(),
        "{driver}: the browser asked on its own for {own:?}"
    );
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_bwrap_browser_sends_nothing_on_its_own() {
    a_fresh_browser_sends_nothing_on_its_own("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_process_browser_sends_nothing_on_its_own() {
    a_fresh_browser_sends_nothing_on_its_own("process").await;
}
