//! Per-session limits end to end: a hostile page that allocates without
//! end, starts threads without end, or writes without end is stopped by its
//! own session's limits; its session ends as `failed` / `resource_limit`,
//! and the other sessions on the host go on.

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, PATIENCE, session_app, wait_until};
use crate::site;

/// Waits until `sid` has failed with `resource_limit` and returns its info.
async fn failed_for_limits(agent: &crate::helpers::AgentClient, sid: &str) -> serde_json::Value {
    wait_until("the session to fail on its limits", PATIENCE, || async {
        let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
        if info["state"] == "failed" {
            Ok(info)
        } else {
            Err(info.to_string())
        }
    })
    .await
}

/// Loads `url` (a hostile page) in `sid`, waits until the session has
/// failed on its limits, checks its error names `limit`, and returns the
/// navigation's answer.
async fn ends_on_its_limit(
    agent: &crate::helpers::AgentClient,
    sid: &str,
    url: &str,
    limit: &str,
) -> (StatusCode, serde_json::Value) {
    let answer = agent
        .tool(
            sid,
            "navigate",
            json!({ "url": url, "wait": "domcontentloaded" }),
        )
        .await;
    let info = failed_for_limits(agent, sid).await;
    assert_eq!(info["close_reason"], "resource_limit", "{info}");
    assert!(
        info["error"].as_str().is_some_and(|e| e.contains(limit)),
        "expected {limit:?}: {info}"
    );
    answer
}

fn enforced(app: &crate::helpers::TestApp) {
    let status = app.state.sessions.limits_status();
    assert!(
        status.memory && status.pids,
        "this host must enforce per-session limits for these tests: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_allocates_without_end_ends_its_own_session_and_no_other() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SESSION_MEMORY_MB", "256")],
    )
    .await;
    enforced(&app);
    let agent = app.agent("acme").await;
    let hog = agent.open(json!({})).await;
    let calm = agent.open(json!({})).await;
    let (status, nav) =
        ends_on_its_limit(&agent, &hog, &site.url("/hog"), "memory limit (256 MiB)").await;
    assert!(
        status == StatusCode::OK || status == StatusCode::GONE,
        "{status}: {nav}"
    );
    // The agent's next call is told the session is gone, and why.
    let (status, err) = agent.tool(&hog, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::GONE, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("resource_limit")),
        "{err}"
    );
    // The other session never noticed.
    let nav = agent.navigate_ok(&calm, &site.url("/form")).await;
    assert_eq!(nav["title"], "Login", "{nav}");
    let closes: Vec<String> = app
        .state
        .store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "session.close" && e.session.as_deref() == Some(hog.as_str()))
        .map(|e| e.params)
        .collect();
    assert!(
        closes.iter().any(|p| p.contains("resource_limit")),
        "{closes:?}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_starts_threads_without_end_hits_the_task_limit() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SESSION_PIDS_MAX", "300"),
            ("CORDON_SESSION_MEMORY_MB", "4096"),
        ],
    )
    .await;
    enforced(&app);
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    ends_on_its_limit(
        &agent,
        &sid,
        &site.url("/workers"),
        "process and thread limit (300)",
    )
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cannot_write_past_its_sandboxs_tmpfs() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_SANDBOX_DRIVER", "bwrap"),
            ("CORDON_SESSION_TMPFS_MB", "64"),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/bigfile") }))
        .await;
    let wrote: u64 = wait_until("the page to stop writing", PATIENCE, || async {
        let (_, dom) = agent
            .tool(&sid, "read_dom", json!({ "max_chars": 2000 }))
            .await;
        let html = dom["html"].as_str().unwrap_or_default();
        html.split("<title>wrote ")
            .nth(1)
            .and_then(|t| t.split('<').next())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| html.chars().take(200).collect())
    })
    .await;
    assert!(wrote < 64, "wrote {wrote} MiB into a 64 MiB tmpfs");
    // Bounded, not fatal: the session goes on.
    agent.navigate_ok(&sid, &site.url("/form")).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_own_memory_limit_applies_to_the_warm_browser_it_gets() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_POOL_SIZE", "1"),
            ("CORDON_SESSION_MEMORY_MB", "2048"),
            ("CORDON_TENANT_LIMITS", r#"{"acme": {"memory_mb": 256}}"#),
        ],
    )
    .await;
    enforced(&app);
    wait_until("the warm pool to fill", PATIENCE, || async {
        match app.state.sessions.pool_ready() {
            0 => Err("empty".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    let agent = app.agent("acme").await;
    let (status, info) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(
        (status, &info["from_pool"]),
        (StatusCode::CREATED, &json!(true)),
        "{info}"
    );
    let sid = info["session_id"].as_str().unwrap().to_owned();
    // The tenant's 256 MiB, not the default 2048.
    ends_on_its_limit(&agent, &sid, &site.url("/hog"), "memory limit (256 MiB)").await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_recordings_stop_at_its_disk_quota() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_RECORDING_QUOTA_MB", "4")],
    )
    .await;
    let agent = app.agent("acme").await;
    let audit = agent.open(json!({ "record": "audit" })).await;
    agent.navigate_ok(&audit, &site.url("/noise")).await;
    // One incompressible viewport (~2.7 MiB as PNG) fits in 4 MiB …
    let (status, shot) = agent.tool(&audit, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{}", shot["error"]);
    assert!(
        shot["persisted_path"].is_string(),
        "kept: {}",
        shot["persisted_path"]
    );
    // … a second does not: audit recording refuses rather than drops.
    let answer = agent.tool(&audit, "screenshot", json!({})).await;
    crate::helpers::assert_error(
        &answer,
        StatusCode::INSUFFICIENT_STORAGE,
        "recording_quota_full",
    );
    let refused = app
        .state
        .store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "recording.refused")
        .count();
    assert_eq!(refused, 1);
    // A transient session of the tenant still gets its image; it is just
    // not kept while audit recordings fill the quota.
    let transient = agent.open(json!({ "record": "transient" })).await;
    agent.navigate_ok(&transient, &site.url("/noise")).await;
    let (status, shot) = agent.tool(&transient, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        shot["image_base64"]
            .as_str()
            .is_some_and(|s| s.len() > 1000)
    );
    assert_eq!(shot["persisted_path"], serde_json::Value::Null);
    let used = app.state.sessions.recorder().usage("acme");
    assert!(used <= 4 << 20, "{used} bytes kept against a 4 MiB quota");
    app.stop().await;
}
