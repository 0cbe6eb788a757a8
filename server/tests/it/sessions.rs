//! The session engine end to end: agent API → audit → real Chromium through
//! the egress guard → database state, on pages served on 127.0.0.1.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Backend, PATIENCE, both_backends, session_app, wait_until};
use crate::site::{self, Canary};

async fn audit_actions(app: &crate::helpers::TestApp, sid: &str) -> Vec<(String, String)> {
    let mut rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    rows.retain(|e| e.session.as_deref() == Some(sid));
    rows.into_iter().map(|e| (e.action, e.params)).collect()
}

both_backends!(a_session_opens_navigates_screenshots_and_closes);

async fn a_session_opens_navigates_screenshots_and_closes(backend: Backend) {
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;

    let sid = agent.open(json!({})).await;
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert_eq!(nav["status"], 200);
    assert_eq!(nav["title"], "Login");
    assert_eq!(nav["final_url"], site.url("/form"));

    let (status, shot) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1280), Some(720))
    );
    let path = shot["persisted_path"]
        .as_str()
        .expect("transient recording keeps it")
        .to_owned();
    assert!(std::path::Path::new(&path).is_file());
    assert!(path.contains(&format!("/sessions/acme/{sid}/")), "{path}");

    let (status, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(
        (status, info["state"].as_str()),
        (StatusCode::OK, Some("ready"))
    );

    let (status, closed) = agent.close(&sid).await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert_eq!(closed["state"], "closed");
    assert_eq!(closed["close_reason"], "client");
    assert!(
        !std::path::Path::new(&path).exists(),
        "transient screenshots are removed at close"
    );

    // Audit before action: each call left a `requested` row, in order.
    let actions: Vec<String> = audit_actions(&app, &sid)
        .await
        .into_iter()
        .map(|a| a.0)
        .collect();
    assert_eq!(
        actions,
        [
            "session.open",
            "tool.navigate",
            "tool.screenshot",
            "session.close"
        ]
    );

    // Closed is gone, not missing.
    let (status, err) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::GONE, "{err}");
    assert_eq!(err["error"]["code"], "gone");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn element_tools_fill_and_submit_a_form_without_leaking_the_typed_text() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "audit" })).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;

    let (status, snap) = agent.tool(&sid, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{snap}");
    let text = snap.to_string();
    let find_ref = |name: &str| -> String {
        fn walk(nodes: &Value, name: &str) -> Option<String> {
            for n in nodes.as_array()? {
                if n["role"] == "textbox" && n["name"] == name {
                    return n["ref"].as_str().map(str::to_owned);
                }
                if let Some(r) = walk(&n["children"], name) {
                    return Some(r);
                }
            }
            None
        }
        walk(&snap["nodes"], name).unwrap_or_else(|| panic!("no textbox {name} in {text}"))
    };
    let user = find_ref("User");
    let pass = find_ref("Password");

    let secret = "pw-canary-7f3a9";
    assert_eq!(
        agent
            .tool(&sid, "type", json!({ "ref": user, "text": "alice" }))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        agent
            .tool(&sid, "type", json!({ "ref": pass, "text": secret }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, sel) = agent
        .tool(
            &sid,
            "select",
            json!({ "selector": "#color", "values": ["Green"] }),
        )
        .await;
    assert_eq!(
        (status, sel["selected"].clone()),
        (StatusCode::OK, json!(["g"]))
    );
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "selector": "#go" }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, waited) = agent
        .tool(&sid, "wait_for", json!({ "text": "hello alice (15)" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{waited}");

    // The password's value never appears in a snapshot, the audit log or a response.
    let (_, snap2) = agent.tool(&sid, "snapshot", json!({})).await;
    assert!(!snap2.to_string().contains(secret));
    let audit = app.state.store.audit_page(0, 10_000).await.unwrap();
    let audit_text = format!("{audit:?}");
    assert!(
        !audit_text.contains(secret) && !audit_text.contains("alice"),
        "typed text leaked into the audit log"
    );
    assert!(audit_text.contains("[typed 15 chars]"));

    let (status, dom) = agent
        .tool(&sid, "read_dom", json!({ "max_chars": 50 }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(dom["truncated_to"], 50);
    assert_eq!(dom["html"].as_str().unwrap().chars().count(), 50);

    // Follow a link, go back and forward, reload.
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "selector": "#next" }))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        agent
            .tool(&sid, "wait_for", json!({ "selector": "#back" }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, back) = agent.tool(&sid, "back", json!({})).await;
    assert_eq!(
        (status, back["final_url"].as_str(), &back["moved"]),
        (
            StatusCode::OK,
            Some(site.url("/form").as_str()),
            &json!(true)
        ),
        "{back}"
    );
    let (_, fwd) = agent.tool(&sid, "forward", json!({})).await;
    assert_eq!(
        fwd["final_url"].as_str(),
        Some(site.url("/links").as_str()),
        "{fwd}"
    );
    assert_eq!(
        agent.tool(&sid, "reload", json!({})).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent.tool(&sid, "press", json!({ "key": "Tab" })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent.tool(&sid, "scroll", json!({ "dy": 200 })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent
            .tool(&sid, "hover", json!({ "x": 10, "y": 10 }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, pdf) = agent.tool(&sid, "pdf", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(pdf["pdf_base64"].as_str().unwrap().starts_with("JVBERi0")); // "%PDF-"

    // Audit recording keeps screenshots after close.
    let (_, shot) = agent
        .tool(
            &sid,
            "screenshot",
            json!({ "format": "jpeg", "quality": 50 }),
        )
        .await;
    let path = shot["persisted_path"].as_str().unwrap().to_owned();
    assert!(path.ends_with(".jpg"));
    agent.close(&sid).await;
    assert!(
        std::path::Path::new(&path).is_file(),
        "audit screenshots outlive the session"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_follow_popups_and_can_be_focused_and_closed() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/popup") }))
        .await;
    agent
        .tool(&sid, "click", json!({ "selector": "#open" }))
        .await;
    let tabs = wait_until("the popup to appear as a tab", PATIENCE, || async {
        let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
        if tabs.as_array().is_some_and(|t| t.len() == 2) {
            Ok(tabs)
        } else {
            Err(tabs.to_string())
        }
    })
    .await;
    let popup = tabs
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["active"] == false)
        .unwrap_or_else(|| panic!("{tabs}"))["tab_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, focused) = agent
        .tool(&sid, &format!("tabs/{popup}/focus"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{focused}");
    let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert!(
        dom["html"].as_str().unwrap().contains("id=\"back\""),
        "tools act on the focused tab"
    );
    let (status, _) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/{popup}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs.as_array().map(Vec::len), Some(1), "{tabs}");
    let last = tabs[0]["tab_id"].as_str().unwrap().to_owned();
    let (status, err) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/{last}"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("last_tab")),
        "{err}"
    );
    // An id that is no tab of this session: named as such, not as the last tab.
    let (status, err) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/0123456789ABCDEF"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("tab_not_found")),
        "{err}"
    );
    let (status, tab) = agent
        .post(
            &format!("/api/sessions/{sid}/tabs"),
            json!({ "url": site.url("/links") }),
        )
        .await;
    assert_eq!(
        (status, tab["active"].clone()),
        (StatusCode::OK, json!(true))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_typed_errors_and_changes_nothing() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;

    for url in [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "chrome://settings",
        "data:text/html,hi",
        "about:blank",
        "not a url",
        "http://u:p@example.com/",
    ] {
        let (status, err) = agent.tool(&sid, "navigate", json!({ "url": url })).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {err}");
    }
    let long = format!("http://example.com/{}", "a".repeat(9000));
    assert_eq!(
        agent.tool(&sid, "navigate", json!({ "url": long })).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let (status, _) = agent
        .tool(&sid, "type", json!({ "text": "x".repeat(70_000) }))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let huge = json!({ "text": "x".repeat(1_100_000) });
    assert_eq!(
        agent.tool(&sid, "type", huge).await.0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    for body in [
        json!({ "url": 5 }),
        json!({ "url": site.url("/form"), "wait": "forever" }),
        json!({ "url": site.url("/form"), "extra": 1 }),
    ] {
        let (status, err) = agent.tool(&sid, "navigate", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
        assert_eq!(err["error"]["code"], "bad_request");
    }
    // Elements that do not exist: a typed error within the bound.
    let start = Instant::now();
    let (status, err) = agent
        .tool(
            &sid,
            "click",
            json!({ "selector": "#nope", "timeout_ms": 2000 }),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("element_not_found")),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(4));
    let (status, err) = agent.tool(&sid, "click", json!({ "ref": "e999" })).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("element_not_found"))
    );
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "selector": "#go", "x": 1, "y": 2 }))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "x": -5, "y": 2 }))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    for (tool, body) in [
        ("click", json!({ "selector": "!!!" })),
        ("wait_for", json!({ "selector": "a[", "timeout_ms": 3000 })),
    ] {
        let (status, err) = agent.tool(&sid, tool, body).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_selector")),
            "{tool}: {err}"
        );
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("invalid CSS selector"), "{err}");
    }
    let (status, err) = agent
        .tool(&sid, "press", json!({ "key": "NoSuchKey" }))
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_key")),
        "{err}"
    );
    assert_eq!(
        agent
            .tool(
                &sid,
                "wait_for",
                json!({ "text": "never there", "timeout_ms": 300 })
            )
            .await
            .0,
        StatusCode::GATEWAY_TIMEOUT
    );
    assert_eq!(
        agent
            .tool(
                &sid,
                "navigate",
                json!({ "url": site.url("/slow"), "timeout_ms": 500 })
            )
            .await
            .0,
        StatusCode::GATEWAY_TIMEOUT
    );
    // A 404 page is still a navigation, reported with its status.
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/missing") }))
        .await;
    assert_eq!(
        (status, nav["status"].clone()),
        (StatusCode::OK, json!(404)),
        "{nav}"
    );

    // Unknown sessions, malformed ids: 404.
    for bad in ["s_aaaaaaaaaaaaaaaaaaaaaaaaaa", "nope", "..%2f..%2fetc"] {
        let (status, _) = agent.tool(bad, "screenshot", json!({})).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{bad}");
    }
    // Bad open requests.
    for body in [
        json!({ "viewport": { "width": 10, "height": 10 } }),
        json!({ "deadline_s": 0 }),
        json!({ "record": "forever" }),
        json!({ "domains": ["a b"] }),
    ] {
        assert_eq!(
            agent.post("/api/sessions", body.clone()).await.0,
            StatusCode::BAD_REQUEST,
            "{body}"
        );
    }
    let (status, err) = agent
        .post(
            "/api/sessions",
            json!({ "credential_mode": "operator", "domains": ["example.com"] }),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("grant_required"))
    );
    // Refusals before the grant check are audited like later ones.
    let outcomes: Vec<String> = app
        .state
        .store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "session.open" && e.outcome.starts_with("refused"))
        .map(|e| e.outcome)
        .collect();
    assert!(
        outcomes.iter().any(|o| o == "refused: grant_required")
            && outcomes
                .iter()
                .filter(|o| *o == "refused: invalid request")
                .count()
                >= 3,
        "{outcomes:?}"
    );

    // The session survived all of it.
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/links") }))
        .await;
    assert_eq!(
        (status, nav["title"].as_str()),
        (StatusCode::OK, Some("Links"))
    );
    assert_eq!(app.state.sessions.open_count(), 1);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_missing_wrong_and_foreign_credentials() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let owner = app.agent("acme").await;
    let other = app.agent("globex").await;
    let sid = owner.open(json!({})).await;
    let audit_before = app.state.store.audit_head().await.unwrap().0;

    // Every route the API documents, so none is forgotten here.
    let doc: Value = app
        .http
        .get(format!("{}/api/openapi.json", owner.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut routes: Vec<(reqwest::Method, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let m: reqwest::Method = method.to_uppercase().parse().unwrap();
            routes.push((m, path.replace("{id}", &sid).replace("{tab}", "ABC")));
        }
    }
    assert!(routes.len() >= 23, "{routes:?}");
    let body = json!({ "url": site.url("/form") });
    for (method, path) in &routes {
        let url = format!("{}{path}", owner.base);
        let none = app
            .http
            .request(method.clone(), &url)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            none.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path} without a key"
        );
        for bad in ["cordon_wrong", "Basic abc", "", &"x".repeat(5000)] {
            let res = app
                .http
                .request(method.clone(), &url)
                .bearer_auth(bad)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(
                res.status(),
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {:.20}",
                bad
            );
        }
        if path.contains(&sid) {
            let (status, _) = other.call(method.clone(), path, Some(body.clone())).await;
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{method} {path} by another tenant"
            );
        }
    }
    // A revoked key stops working.
    let keys = app.state.store.api_key_list(None).await.unwrap();
    let globex_key = keys.iter().find(|k| k.tenant.as_str() == "globex").unwrap();
    app.state
        .store
        .api_key_revoke(&globex_key.id)
        .await
        .unwrap();
    assert_eq!(other.get("/api/sessions").await.0, StatusCode::UNAUTHORIZED);

    // Nothing changed: the session is alive, nothing was audited, the other tenant sees no sessions.
    assert_eq!(app.state.store.audit_head().await.unwrap().0, audit_before);
    let (status, info) = owner.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(
        (status, info["state"].as_str()),
        (StatusCode::OK, Some("ready"))
    );
    app.stop().await;
}

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
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid)
        .await
        .unwrap();
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
            first["session_id"].as_str().unwrap(),
        )
        .await
        .unwrap();
    let b = app
        .state
        .sessions
        .get(
            &"acme".parse().unwrap(),
            second["session_id"].as_str().unwrap(),
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
    let refused = |status: StatusCode, v: &Value| {
        status == StatusCode::UNPROCESSABLE_ENTITY
            || (status == StatusCode::OK && v["status"] == 403)
    };
    let (status, res) = agent
        .tool(&sid, "navigate", json!({ "url": canary_url }))
        .await;
    assert!(refused(status, &res), "{status} {res}");
    let redirect = site.url(&format!(
        "/redirect?to=http://localhost:{}/",
        canary.addr.port()
    ));
    let (status, res) = agent
        .tool(&sid, "navigate", json!({ "url": redirect }))
        .await;
    assert!(refused(status, &res), "{status} {res}");
    assert_eq!(canary.hits(), 0, "the canary was reached");
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid)
        .await
        .unwrap();
    let log = app
        .state
        .store
        .egress_for_sandbox(&live.sandbox.id)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_browser() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[("CORDON_POOL_SIZE", "1")]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid)
        .await
        .unwrap();
    let (pid, marker) = (live.sandbox.pid.unwrap(), live.sandbox.marker.clone());
    drop(live);
    let db = app.stop().await;
    let store = db.store().await;
    assert!(!cordon::sandbox::is_alive(pid, &marker));
    let row = store.session_get("acme", &sid).await.unwrap().unwrap();
    assert_eq!(
        (row.state.as_str(), row.close_reason.map(|r| r.as_str())),
        ("closed", Some("shutdown"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_with_iframes_load_and_every_frame_request_passes_the_guard() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let (status, nav) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/iframe"), "wait": "networkidle" }),
        )
        .await;
    assert_eq!(
        (status, nav["title"].as_str()),
        (StatusCode::OK, Some("Frames")),
        "{nav}"
    );
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid)
        .await
        .unwrap();
    let sandbox = live.sandbox.id.clone();
    drop(live);
    let allowed = app
        .state
        .store
        .egress_for_sandbox(&sandbox)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.entry.port == site.addr.port()
                && e.entry.decision == cordon::egress::Decision::Allowed
        })
        .count();
    assert!(
        allowed >= 2,
        "the page and its frame each went through the guard ({allowed})"
    );
    let (status, _) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/form"), "wait": "domcontentloaded" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
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
    let version: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!(
            "http://127.0.0.1:{}/json/version",
            control.devtools_port
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let conn = cordon::cdp::BrowserConn::connect(version["webSocketDebuggerUrl"].as_str().unwrap())
        .await
        .unwrap();
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
    let live = app
        .state
        .sessions
        .get(&"acme".parse().unwrap(), &sid)
        .await
        .unwrap();
    let conn = cordon::cdp::BrowserConn::connect(&live.sandbox.cdp_url)
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
