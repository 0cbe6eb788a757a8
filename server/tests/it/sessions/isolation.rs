//! What one session leaves to the next (nothing), what the guard lets out, what runs hidden.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, PATIENCE, session_app, wait_until};
use crate::site::{self, Canary};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookies_and_local_storage_never_carry_over_between_sessions() {
    isolation("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_driver_sessions_never_share_cookies_or_local_storage() {
    isolation("process").await;
}

async fn isolation(driver: &str) {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_POOL_SIZE", "1"), ("CORDON_SANDBOX_DRIVER", driver)],
    )
    .await;
    let agent = app.agent("acme").await;
    for round in 0..4 {
        let sid = agent.open(json!({ "record": "off" })).await;
        let (_, nav) = agent
            .tool(&sid, "navigate", json!({ "url": site.url("/show-state") }))
            .await;
        assert_eq!(nav["title"], "State", "{nav}");
        let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
        let html = dom["html"].as_str().unwrap();
        assert!(
            html.contains("cookie=[] ls=[]"),
            "round {round}: state leaked into a new session: {html}"
        );
        agent
            .tool(&sid, "navigate", json!({ "url": site.url("/set-state") }))
            .await;
        agent
            .tool(&sid, "navigate", json!({ "url": site.url("/show-state") }))
            .await;
        let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
        assert!(
            dom["html"]
                .as_str()
                .unwrap()
                .contains("cookie=[sid=session-canary-cookie] ls=[persisted-value]")
        );
        agent.close(&sid).await;
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_browser_cannot_reach_what_the_egress_guard_refuses() {
    let site = site::start().await;
    let canary = Canary::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let canary_url = format!("http://127.0.0.1:{}/", canary.addr.port());
    // Refused by the guard: shown as its 403 page (plain http) or a failed
    // navigation (tunnels), never the canary's answer.
    let (status, res) = agent
        .tool(&sid, "navigate", json!({ "url": canary_url }))
        .await;
    assert!(canary.refused(status, &res, "loopback"), "{status} {res}");
    let redirect = site.url(&format!(
        "/redirect?to=http://localhost:{}/",
        canary.addr.port()
    ));
    let (status, res) = agent
        .tool(&sid, "navigate", json!({ "url": redirect }))
        .await;
    assert!(canary.refused(status, &res, "loopback"), "{status} {res}");
    assert_eq!(canary.hits(), 0, "the canary was reached");
    let live = app.live("acme", &sid).await;
    let log = app
        .state
        .store
        .egress_for_sandbox(&live.sandbox_id, 10_000)
        .await
        .unwrap();
    drop(live);
    let denied = log
        .iter()
        .filter(|e| {
            e.entry.port == canary.addr.port()
                && e.entry.decision == cordon::egress::Decision::Denied
        })
        .count();
    assert!(
        denied >= 2,
        "both attempts are in the egress log as denied: {log:?}"
    );
    app.stop().await;
}

/// Every target of a browser, hidden ones included, as (type, url).
async fn all_targets(conn: &cordon::cdp::BrowserConn) -> Vec<(String, String)> {
    use chromiumoxide::cdp::browser_protocol::target::{GetTargetsParams, TargetFilter};
    // An empty filter entry matches every target type.
    let params = GetTargetsParams {
        filter: Some(TargetFilter::new(vec![Default::default()])),
    };
    let targets = conn.browser().execute(params).await.unwrap();
    targets
        .result
        .target_infos
        .iter()
        .map(|t| (t.r#type.clone(), t.url.clone()))
        .collect()
}

fn browser_ui(targets: &[(String, String)]) -> bool {
    targets
        .iter()
        .any(|(ty, url)| ty == "browser_ui" || url.starts_with("chrome://"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_browser_runs_no_hidden_browser_ui_pages() {
    // Control: a Chromium without Cordon's flags preloads the omnibox
    // popup's WebUI (a renderer of ~34 MiB), and the check sees it.
    let started = Instant::now();
    let control = crate::helpers::Chromium::start();
    let conn = control.connect().await;
    wait_until(
        "the control browser's hidden WebUI page",
        PATIENCE,
        || async {
            let listed = all_targets(&conn).await;
            if browser_ui(&listed) {
                Ok(())
            } else {
                Err(format!("{listed:?}"))
            }
        },
    )
    .await;
    let shows_up_within = started.elapsed();
    drop(conn);
    drop(control);

    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let live = app.live("acme", &sid).await;
    let conn = cordon::cdp::BrowserConn::connect(&live.sandbox.cdp_url, live.sandbox.cdp_reach())
        .await
        .unwrap();
    // Watched for twice as long as the control needed to show it.
    let watch = (shows_up_within * 2).max(Duration::from_secs(2));
    let since = Instant::now();
    while since.elapsed() < watch {
        let listed = all_targets(&conn).await;
        assert!(
            listed.iter().any(|(ty, _)| ty == "page"),
            "the filter lists the session's page: {listed:?}"
        );
        assert!(!browser_ui(&listed), "{listed:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(conn);
    drop(live);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pages_service_worker_registers_in_every_session() {
    // Sites that need a service worker must get one: each registration
    // settles, in every fresh session (it once hung in about a third).
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[("CORDON_POOL_SIZE", "1")]).await;
    let agent = app.agent("acme").await;
    let mut titles = Vec::new();
    for _ in 0..12 {
        let sid = agent.open(json!({ "record": "off" })).await;
        let (status, nav) = agent
            .tool(&sid, "navigate", json!({ "url": site.url("/sw-page") }))
            .await;
        assert_eq!(status, StatusCode::OK, "{nav}");
        let title = wait_until("the registration to settle", PATIENCE, || async {
            let t = crate::gate::title(&agent, &sid).await;
            if t.starts_with("sw ") && t != "sw pending" {
                Ok(t)
            } else {
                Err(t)
            }
        })
        .await;
        titles.push(title);
        agent.close(&sid).await;
    }
    assert!(titles.iter().all(|t| t == "sw ready"), "{titles:?}");
    // And in tabs the page opens itself (popups), seen by nobody yet.
    let mut popups = Vec::new();
    for _ in 0..6 {
        let sid = agent.open(json!({ "record": "off" })).await;
        agent
            .tool(&sid, "navigate", json!({ "url": site.url("/sw-opener") }))
            .await;
        let (status, v) = agent
            .tool(&sid, "click", json!({ "selector": "#open" }))
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
        let title = wait_until("the popup's registration to settle", PATIENCE, || async {
            let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
            let titles: Vec<String> = tabs
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["title"].as_str().map(str::to_owned))
                .collect();
            match titles
                .iter()
                .find(|t| t.starts_with("sw ") && *t != "sw pending")
            {
                Some(t) => Ok(t.clone()),
                None => Err(format!("{titles:?}")),
            }
        })
        .await;
        popups.push(title);
        agent.close(&sid).await;
    }
    assert!(popups.iter().all(|t| t == "sw ready"), "{popups:?}");
    app.stop().await;
}
