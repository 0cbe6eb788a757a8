//! The HTTP surface: operability routes, errors, the dashboard's server functions.

use reqwest::StatusCode;
use serde_json::Value;

use app::api::auth::Role;

use crate::helpers::{Backend, TestApp, both_backends};

both_backends!(readyz_reports_the_backend_and_chromium);

async fn readyz_reports_the_backend_and_chromium(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let res = app.get("/readyz").await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    let expected = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    assert_eq!(body["checks"]["database"]["backend"], expected);
    assert_eq!(body["checks"]["chromium"]["ok"], true);
    // What is enforced per session is shown (this host enforces it).
    let limits = &body["checks"]["limits"];
    assert_eq!(
        (limits["memory"].as_bool(), limits["pids"].as_bool()),
        (Some(true), Some(true)),
        "{body}"
    );
    assert_eq!(
        body["checks"]["sandbox"]["devtools_open_to_local_processes"], false,
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn readyz_says_whether_the_browsers_fit_the_inotify_limit() {
    // The limit that binds this test's user: in the host's namespace both
    // files show the same knob; in a container the lower one binds.
    let read = |path: &str| -> u64 {
        std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .trim()
            .parse()
            .unwrap()
    };
    let limit = read("/proc/sys/fs/inotify/max_user_instances")
        .min(read("/proc/sys/user/max_inotify_instances"));
    // More browsers than any limit holds …
    let app = TestApp::spawn_with(Backend::Sqlite, &[("CORDON_MAX_SESSIONS", "3000000000")]).await;
    let body: Value = app.get("/readyz").await.json().await.unwrap();
    assert_eq!(body["status"], "ready", "{body}");
    let sandbox = &body["checks"]["sandbox"];
    let pool = sandbox["pool_size"].as_u64().unwrap();
    assert_eq!(
        sandbox["inotify"],
        serde_json::json!({ "limit": limit, "browsers": 3_000_000_000 + pool, "enough": false }),
        "{body}"
    );
    app.stop().await;
    // … and two, which any host holds.
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        &[("CORDON_MAX_SESSIONS", "2"), ("CORDON_POOL_SIZE", "0")],
    )
    .await;
    let body: Value = app.get("/readyz").await.json().await.unwrap();
    assert_eq!(
        body["checks"]["sandbox"]["inotify"],
        serde_json::json!({ "limit": limit, "browsers": 2, "enough": true }),
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn healthz_answers_ok() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let res = app.get("/healthz").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.json::<Value>().await.unwrap()["status"], "ok");
}

#[tokio::test]
async fn readyz_is_503_when_chromium_is_missing() {
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        &[("CORDON_CHROMIUM_PATH", "/nonexistent/chromium")],
    )
    .await;
    let res = app.get("/readyz").await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["checks"]["chromium"]["ok"], false);
    assert_eq!(body["checks"]["database"]["ok"], true);
}

#[tokio::test]
async fn readyz_is_503_when_the_database_is_gone() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.state.store.close().await;
    let res = app.get("/readyz").await;
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        res.json::<Value>().await.unwrap()["checks"]["database"]["ok"],
        false
    );
}

#[tokio::test]
async fn metrics_count_requests_by_matched_route() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.get("/healthz").await;
    app.get("/api/sessions/abc/nothing").await;
    let text = app.get("/metrics").await.text().await.unwrap();
    assert!(
        text.contains(r#"cordon_http_requests_total{route="/healthz",method="GET",status="200"}"#),
        "{text}"
    );
    // The route template, not the raw path: ids never become label values.
    assert!(
        text.contains(r#"route="/api/{*rest}",method="GET",status="404""#),
        "{text}"
    );
    assert!(!text.contains("/api/sessions/abc"), "{text}");
}

#[tokio::test]
async fn unknown_api_routes_get_a_typed_json_404() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for path in [
        "/api",
        "/api/",
        "/api/does-not-exist",
        "/api/nothing/%00%ff",
    ] {
        let res = app
            .http
            .post(app.url(path))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        let text = res.text().await.unwrap();
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"));
        assert_eq!(body["error"]["code"], "not_found", "{path}");
    }
}

#[tokio::test]
async fn the_dashboard_is_served_with_its_assets() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    // Logged out, `/` sends to the login page, which loads the same assets.
    let page = app.get("/").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.url().path(), "/login");
    let html = page.text().await.unwrap();
    assert!(html.contains("Log in with a passkey"), "{html}");
    // Under the build's version (see dashboard::the_dashboards_assets_…).
    assert!(
        html.contains("/pkg/") && html.contains("/cordon.js") && html.contains("cordon_bg"),
        "{html}"
    );
    for asset in [
        "/pkg/cordon.js",
        "/pkg/cordon_bg.wasm",
        "/pkg/cordon.css",
        "/favicon.svg",
        "/passkey.js",
    ] {
        assert_eq!(
            app.get(asset).await.status(),
            StatusCode::OK,
            "{asset} (run infra/scripts/build-site.sh)"
        );
    }
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let res = app
        .http
        .get(app.url("/no-such-page"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn static_files_cannot_escape_the_site_root() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    for path in [
        "/pkg/../../Cargo.toml",
        "/..%2f..%2fCargo.toml",
        "/pkg/%2e%2e/%2e%2e/Cargo.toml",
    ] {
        let res = app.get(path).await;
        let body = res.text().await.unwrap();
        assert!(
            !body.contains("[workspace]"),
            "{path} leaked a file outside the site root"
        );
    }
}

#[tokio::test]
async fn server_functions_refuse_out_of_range_and_malformed_input() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let call = |body: &'static str| app.server_fn("query_audit", body, Some(&cookie));
    let (status, body) = call("query[cursor]=newest&query[limit]=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["kind"], "invalid", "{body}");
    assert_eq!(body["field"], "limit", "{body}");
    let (status, body) = call("query[cursor]=newest&query[limit]=not-a-number").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["kind"], "invalid", "{body}");
    let (status, _) = call("nothing=here").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = call("query[cursor]=newest&query[limit]=5").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["rows"].is_array(), "{body}");
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_413() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let send = |body: String| {
        app.http
            .post(app.url("/ui/fn/query_audit"))
            .header("origin", app.url(""))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let big = format!(
        "query[cursor]=newest&query[limit]=5&pad={}",
        "x".repeat(cordon::startup::MAX_BODY_BYTES)
    );
    let res = send(big).await.unwrap();
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        res.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "clients are told not to reuse a connection whose body went unread"
    );
    // A successful request with a body keeps its connection.
    let res = send("query[cursor]=newest&query[limit]=5".into())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get("connection").is_none());
}

#[tokio::test]
async fn the_dashboard_lists_audit_events_through_its_server_function() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.state
        .store
        .audit_append(cordon::audit::NewEvent::new(
            cordon::audit::Actor::System,
            "test.visible",
        ))
        .await
        .unwrap();
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let (status, body) = app
        .server_fn(
            "query_audit",
            "query[cursor]=newest&query[limit]=10&query[action]=test.",
            Some(&cookie),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let rows = body["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{body}");
    assert_eq!(rows[0]["action"], "test.visible");
}

#[tokio::test]
async fn the_dashboard_refuses_foreign_hosts_and_origins_and_runs_nothing() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    app.state
        .store
        .audit_append(cordon::audit::NewEvent::new(
            cordon::audit::Actor::System,
            "test.secret-ish",
        ))
        .await
        .unwrap();
    let fn_url = app.url("/ui/fn/query_audit");
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let post = |origin: Option<&'static str>, host: Option<&'static str>| {
        let mut req = app
            .http
            .post(&fn_url)
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("query[cursor]=newest&query[limit]=10");
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(h) = host {
            req = req.header("host", h);
        }
        req.send()
    };
    // DNS rebinding: a page of another site whose name now points here.
    let port = app.addr.port();
    let rebound: &'static str = Box::leak(format!("attacker.test:{port}").into_boxed_str());
    let rebound_origin: &'static str =
        Box::leak(format!("http://attacker.test:{port}").into_boxed_str());
    for (origin, host) in [
        (Some(rebound_origin), Some(rebound)),
        (Some("http://attacker.test"), None),
        (None, None),
        (Some("null"), None),
    ] {
        let res = post(origin, host).await.unwrap();
        let status = res.status();
        let body = res.text().await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin:?} {host:?}: {body}");
        assert!(!body.contains("test.secret-ish"), "{body}");
    }
    // Pages too are refused under a foreign Host.
    let res = app
        .http
        .get(app.url("/audit"))
        .header("host", rebound)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // Cordon's own names work, for pages and server functions alike.
    for host in ["localhost", "127.0.0.1"] {
        let own: &'static str = Box::leak(format!("{host}:{port}").into_boxed_str());
        let origin: &'static str = Box::leak(format!("http://{host}:{port}").into_boxed_str());
        let res = post(Some(origin), Some(own)).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{host}");
    }
    // The agent API is reached by any name (it authenticates by key).
    let res = app
        .http
        .get(app.url("/api/sessions"))
        .header("host", rebound)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

#[tokio::test]
async fn every_agent_api_error_is_json_whoever_produced_it() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agent = app.agent("acme").await;
    let check = |status: StatusCode, code: &str, res: (StatusCode, Value)| {
        assert_eq!(
            (res.0, res.1["error"]["code"].as_str()),
            (status, Some(code)),
            "{}",
            res.1
        );
        assert!(res.1["error"]["message"].is_string(), "{}", res.1);
    };
    // A body over 1 MiB announced by Content-Length.
    let big = "x".repeat(cordon::startup::MAX_BODY_BYTES + 10);
    let res = app
        .http
        .post(app.url("/api/sessions"))
        .bearer_auth(&agent.key)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    let status = res.status();
    check(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        (status, res.json().await.unwrap()),
    );
    // A query string that does not parse.
    check(
        StatusCode::BAD_REQUEST,
        "bad_request",
        agent.get("/api/sessions?limit=abc").await,
    );
    // A method the route does not have.
    let res = app
        .http
        .put(app.url("/api/sessions"))
        .bearer_auth(&agent.key)
        .send()
        .await
        .unwrap();
    let status = res.status();
    check(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        (status, res.json().await.unwrap()),
    );
    // No such route.
    check(
        StatusCode::NOT_FOUND,
        "not_found",
        agent.get("/api/nothing/here").await,
    );
    app.stop().await;
}

#[tokio::test]
async fn the_probes_refuse_a_foreign_host_and_answer_ip_literals_and_cordons_names() {
    // A public name that is not loopback, as a deployment behind a proxy has.
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        &[("CORDON_PUBLIC_URL", "https://cordon.example.com")],
    )
    .await;
    let port = app.addr.port();
    let probe = |path: &'static str, host: String| {
        let req = app.http.get(app.url(path)).header("host", host.clone());
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            let body = res.text().await.unwrap();
            (
                status,
                format!("{path} under Host {host:?}: {status} {body}"),
            )
        }
    };
    for path in ["/healthz", "/readyz", "/metrics"] {
        // DNS rebinding: a page whose own name now points here.
        for foreign in [
            "evil.example".to_owned(),
            format!("evil.example:{port}"),
            format!("127.0.0.1.evil.example:{port}"),
        ] {
            let (status, seen) = probe(path, foreign).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{seen}");
            assert!(!seen.contains("cordon_http_requests_total"), "{seen}");
        }
        // A kubelet asks by IP; operators by Cordon's names.
        for own in [
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
            "10.1.2.3:8080".to_owned(),
            format!("localhost:{port}"),
            "cordon.example.com".to_owned(),
        ] {
            let (status, seen) = probe(path, own).await;
            assert_eq!(status, StatusCode::OK, "{seen}");
        }
    }
    app.stop().await;
}
