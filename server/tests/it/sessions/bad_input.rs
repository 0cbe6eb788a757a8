//! Hostile and malformed input: typed errors, nothing changed.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Backend, session_app};
use crate::site::{self};

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
        .api_key_revoke(&globex_key.id.parse().unwrap())
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
