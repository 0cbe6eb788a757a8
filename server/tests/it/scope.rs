//! Operators scoped to tenants: two tenants, `acme` and `globex`, each with
//! a running session, a pending approval, grant requests and a token, a
//! credential, a task and audit events; operator "sam" scoped to `acme`
//! sees only acme's on every surface and gets "not found" (audited) for
//! globex's; an unscoped operator and an admin see both; a change of scope
//! applies to the next request.

use app::api::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{
    Backend, PATIENCE, TestApp, both_backends, domain, session_app, tenant, wait_until,
};
use crate::site;
use cordon::audit::Actor;

/// One tenant's objects.
struct Objects {
    session: String,
    approval: String,
    request: String,
    token: String,
    task: String,
}

struct World {
    _site: site::Site,
    app: TestApp,
    acme: Objects,
    globex: Objects,
    /// The approvals' waiting calls (dropping one withdraws it).
    _waiting: Vec<cordon::policy::Waiting>,
    sam: (String, String),
    wide: (String, String),
    admin: (String, String),
}

async fn objects(app: &TestApp, t: &str) -> Objects {
    let agent = app.agent(t).await;
    let session = agent.open(json!({})).await;
    let ask = || async {
        let (status, req) = agent
            .post(
                "/api/grants/requests",
                json!({ "domains": [format!("{t}.test")], "reason": "scope test" }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{req}");
        req["request_id"].as_str().unwrap().to_owned()
    };
    let request = ask().await;
    let granted = ask().await;
    let token = cordon::grants::approve(
        &app.state.store,
        &Actor::Cli,
        &granted.parse().unwrap(),
        60,
        true,
    )
    .await
    .expect("approved")
    .jti;
    let state = serde_json::to_vec(&json!({
        "cookies": [{"name": "sid", "value": "x", "domain": format!("{t}.test"), "path": "/",
                     "expires": 4_102_444_800_i64, "httpOnly": true, "secure": true,
                     "sameSite": "Lax"}],
        "origins": []
    }))
    .unwrap();
    app.state
        .vault
        .import(
            &Actor::Cli,
            &tenant(t),
            &domain(&format!("{t}.test")),
            &state,
            cordon::vault::ImportOptions::default(),
        )
        .await
        .expect("imported");
    let task = cordon::domain::TaskId::generate().to_string();
    app.state
        .store
        .task_insert(&cordon::store::tasks::TaskRow {
            id: task.clone(),
            tenant_id: t.into(),
            api_key_id: None,
            session_id: Some(session.clone()),
            instruction: "scope test".into(),
            status: "finished".into(),
            summary: None,
            result_data: None,
            error: None,
            step_count: 0,
            max_steps: 5,
            final_screenshot_id: None,
            host: app.state.sessions.host().to_owned(),
            created_at: cordon::time::now_ms(),
            ended_at: Some(cordon::time::now_ms()),
        })
        .await
        .expect("task");
    Objects {
        session,
        approval: String::new(),
        request,
        token,
        task,
    }
}

/// A pending approval of `t`'s session, with a screenshot.
fn approval(app: &TestApp, t: &str, session: &str) -> (cordon::policy::Waiting, String) {
    let now = cordon::time::now_ms();
    let (waiting, p) = app.state.sessions.approvals().open(
        cordon::policy::Pending {
            id: String::new(),
            tenant: t.into(),
            session: session.into(),
            actor: "agent:k_test".into(),
            action: "tool.click".into(),
            params: json!({}),
            level: cordon::policy::Level::High,
            reasons: vec!["scope test".into()],
            created_at: now,
            expires_at: now + 600_000,
            has_screenshot: false,
        },
        Some(vec![0xff, 0xd8, 0xff, 0xd9]),
    );
    (waiting, p.id)
}

async fn world(backend: Backend) -> World {
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let mut acme = objects(&app, "acme").await;
    let mut globex = objects(&app, "globex").await;
    let (w1, a1) = approval(&app, "acme", &acme.session);
    let (w2, a2) = approval(&app, "globex", &globex.session);
    acme.approval = a1;
    globex.approval = a2;
    let sam = app.operator_session("sam", Role::Operator).await;
    let wide = app.operator_session("wanda", Role::Operator).await;
    let admin = app.operator_session("ada", Role::Admin).await;
    scope_to_acme(&app, &sam.0, &admin.1).await;
    World {
        _site: site,
        app,
        acme,
        globex,
        _waiting: vec![w1, w2],
        sam,
        wide,
        admin,
    }
}

/// Scopes operator `id` to tenant `acme`, as admin `admin_cookie`.
async fn scope_to_acme(app: &TestApp, id: &str, admin_cookie: &str) {
    let (status, v) = app
        .server_fn(
            "set_operator_tenants",
            &format!("id={id}&tenants=acme"),
            Some(admin_cookie),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "scoping {id}: {v}");
}

/// The distinct tenants named under `key` in each element of `list`.
fn tenants_of(list: &Value, key: &str) -> Vec<String> {
    let mut ts: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("a list: {list}"))
        .iter()
        .filter_map(|v| v[key].as_str().map(str::to_owned))
        .collect();
    ts.sort();
    ts.dedup();
    ts
}

/// What each list of the dashboard shows `cookie`, as tenant sets per
/// surface (with the answers, for failure messages).
async fn seen(app: &TestApp, cookie: &str) -> Vec<(&'static str, Vec<String>, Value)> {
    let call = |name: &'static str, body: &'static str| async move {
        let (status, v) = app.server_fn(name, body, Some(cookie)).await;
        assert_eq!(status, StatusCode::OK, "{name}: {v}");
        v
    };
    let sessions = call("list_sessions", "").await;
    let tasks = call("list_tasks", "").await;
    let grants = call("list_grants", "").await;
    let creds = call("list_credentials", "").await;
    let approvals = call("list_approvals", "").await;
    let audit = call("query_audit", "query[cursor]=newest&query[limit]=200").await;
    vec![
        ("sessions", tenants_of(&sessions, "tenant"), sessions),
        (
            "tasks",
            tenants_of(&tasks["tasks"], "tenant"),
            tasks.clone(),
        ),
        (
            "grant requests",
            tenants_of(&grants["pending"], "tenant"),
            grants.clone(),
        ),
        (
            "grant decisions",
            tenants_of(&grants["decided"], "tenant"),
            grants.clone(),
        ),
        (
            "grant tokens",
            tenants_of(&grants["tokens"], "tenant"),
            grants,
        ),
        ("credentials", tenants_of(&creds, "tenant"), creds),
        (
            "approvals",
            tenants_of(&approvals["pending"], "tenant"),
            approvals,
        ),
        ("audit", tenants_of(&audit["rows"], "tenant"), audit),
    ]
}

/// The `operator.refused` rows of `op` for scope, as `(what, tenant)`.
async fn scope_refusals(app: &TestApp, op: &str) -> Vec<(String, String)> {
    app.state
        .store
        .audit_recent(None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.action == "operator.refused"
                && e.actor == format!("operator:{op}")
                && e.outcome == "denied: scope"
        })
        .map(|e| {
            let p: Value = serde_json::from_str(&e.params).unwrap_or_default();
            (
                p["what"].as_str().unwrap_or_default().to_owned(),
                e.tenant.unwrap_or_default(),
            )
        })
        .collect()
}

async fn a_scoped_operator_sees_only_their_tenant_on_every_list_and_others_see_both(
    backend: Backend,
) {
    let w = world(backend).await;
    let app = &w.app;
    for (surface, tenants, answer) in seen(app, &w.sam.1).await {
        assert_eq!(tenants, ["acme"], "sam's {surface}: {answer}");
    }
    for (who, cookie) in [("wanda", &w.wide.1), ("ada", &w.admin.1)] {
        for (surface, tenants, answer) in seen(app, cookie).await {
            // The audit log also holds tenant-less events (logins, scopes).
            assert_eq!(tenants, ["acme", "globex"], "{who}'s {surface}: {answer}");
        }
    }
    // Counts: the approvals badge, the overview, the chain's events.
    let count = |cookie: String| async move {
        let (_, pending) = app.server_fn("pending_approvals", "", Some(&cookie)).await;
        let (_, status) = app.server_fn("get_status", "", Some(&cookie)).await;
        let (_, verified) = app.server_fn("verify_audit", "", Some(&cookie)).await;
        (pending, status, verified)
    };
    let (pending, status, verified) = count(w.sam.1.clone()).await;
    assert_eq!(pending, json!(1), "sam's pending approvals");
    assert_eq!(status["pending_grants"], json!(1), "{status}");
    let acme_events = app
        .state
        .store
        .audit_count_in(&["acme".to_owned()])
        .await
        .unwrap();
    assert!(acme_events > 0);
    assert_eq!(verified["events"], json!(acme_events), "{verified}");
    assert_eq!(verified["intact"], json!(true), "{verified}");
    assert_eq!(status["audit_events"], json!(acme_events), "{status}");
    let running: i64 = status["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == "ready")
        .map(|s| s[1].as_i64().unwrap())
        .sum();
    assert_eq!(running, 1, "sam's overview counts acme's session: {status}");
    let (pending, status, _) = count(w.wide.1.clone()).await;
    assert_eq!(pending, json!(2));
    assert_eq!(status["pending_grants"], json!(2), "{status}");
    // Asking for globex's sessions or audit events by name shows nothing.
    let (_, v) = app
        .server_fn("list_sessions", "tenant=globex", Some(&w.sam.1))
        .await;
    assert_eq!(v, json!([]), "{v}");
    let (_, v) = app
        .server_fn(
            "query_audit",
            "query[cursor]=newest&query[limit]=50&query[tenant]=globex",
            Some(&w.sam.1),
        )
        .await;
    assert_eq!(v["rows"], json!([]), "{v}");
    w.app.stop().await;
}

async fn another_tenants_objects_answer_not_found_to_a_scoped_operator_and_are_audited(
    backend: Backend,
) {
    let w = world(backend).await;
    let app = &w.app;
    let g = &w.globex;
    let calls: Vec<(&str, String)> = vec![
        ("get_session", format!("id={}", g.session)),
        ("screenshot_timeline", format!("session={}", g.session)),
        ("live_ticket", format!("session={}", g.session)),
        ("release_control", format!("session={}", g.session)),
        (
            "refresh_preview",
            format!("session={}&domains=globex.test", g.session),
        ),
        (
            "save_refresh",
            format!("session={}&domains=globex.test", g.session),
        ),
        ("end_session", format!("id={}", g.session)),
        ("decide_approval", format!("id={}&approve=true", g.approval)),
        (
            "approve_grant",
            format!("id={}&expires_min=60&multi_use=false", g.request),
        ),
        ("deny_grant", format!("id={}", g.request)),
        ("revoke_grant", format!("jti={}", g.token)),
        (
            "delete_credential",
            "tenant=globex&domain=globex.test".into(),
        ),
        ("get_task", format!("id={}", g.task)),
    ];
    for (name, body) in &calls {
        let (status, v) = app.server_fn(name, body, Some(&w.sam.1)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name} {body}: {v}");
        assert_eq!(v["kind"], "not_found", "{name}: {v}");
    }
    // Starting a refresh for globex: the same answer as for no such tenant.
    let (status, v) = app
        .server_fn(
            "start_refresh",
            "tenant=globex&domains=globex.test",
            Some(&w.sam.1),
        )
        .await;
    let (_, unknown) = app
        .server_fn(
            "start_refresh",
            "tenant=initech&domains=initech.test",
            Some(&w.sam.1),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(
        v["message"].as_str().map(|m| m.replace("globex", "X")),
        unknown["message"]
            .as_str()
            .map(|m| m.replace("initech", "X")),
        "{v} vs {unknown}"
    );
    // Routes outside server functions.
    let sam = &w.sam.1;
    let get = |path: String| async move {
        let res = app
            .http
            .get(app.url(&path))
            .header("cookie", sam)
            .header("host", format!("localhost:{}", app.addr.port()))
            .send()
            .await
            .expect("request");
        (res.status(), res.text().await.unwrap_or_default())
    };
    for path in [
        format!("/ui/approvals/{}/screenshot", g.approval),
        format!("/ui/screenshots/globex:{}:1", g.session),
        format!("/ui/screenshots/globex:{}:1/thumb", g.session),
        "/ui/credentials/export?tenant=globex&domain=globex.test".to_owned(),
    ] {
        let (status, body) = get(path.clone()).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
    }
    // The live view's socket, with a ticket issued by hand (the server
    // function refuses one): not found.
    let ticket = app
        .state
        .live
        .tickets
        .issue(&app.state.store, &w.sam.0, &g.session.parse().unwrap())
        .await
        .unwrap();
    let (status, body) = ws_status(
        app,
        &format!("/live/{}?ticket={ticket}", g.session),
        &w.sam.1,
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // Each attempt is audited as a refusal naming what and the tenant.
    let refusals = wait_until("every refusal audited", PATIENCE, || async {
        let r = scope_refusals(app, &w.sam.0).await;
        if r.len() >= calls.len() + 6 {
            Ok(r)
        } else {
            Err(format!("{r:?}"))
        }
    })
    .await;
    assert!(refusals.iter().all(|(_, t)| t == "globex"), "{refusals:?}");
    assert_eq!(refusals.len(), calls.len() + 6, "{refusals:?}");
    // Nothing of globex's changed.
    let (_, v) = app
        .server_fn("get_session", &format!("id={}", g.session), Some(&w.wide.1))
        .await;
    assert_eq!(v["session"]["state"], "ready", "{v}");
    let (_, v) = app.server_fn("list_approvals", "", Some(&w.wide.1)).await;
    assert_eq!(
        tenants_of(&v["pending"], "tenant"),
        ["acme", "globex"],
        "{v}"
    );
    let (_, v) = app.server_fn("list_grants", "", Some(&w.wide.1)).await;
    assert_eq!(
        tenants_of(&v["pending"], "tenant"),
        ["acme", "globex"],
        "{v}"
    );
    let (_, v) = app.server_fn("list_credentials", "", Some(&w.wide.1)).await;
    assert_eq!(tenants_of(&v, "tenant"), ["acme", "globex"], "{v}");

    // Acme's objects work for sam.
    let a = &w.acme;
    for (name, body) in [
        ("get_session", format!("id={}", a.session)),
        ("get_task", format!("id={}", a.task)),
        ("live_ticket", format!("session={}", a.session)),
        (
            "decide_approval",
            format!("id={}&approve=false", a.approval),
        ),
        ("deny_grant", format!("id={}", a.request)),
        ("revoke_grant", format!("jti={}", a.token)),
        ("end_session", format!("id={}", a.session)),
    ] {
        let (status, v) = app.server_fn(name, &body, Some(&w.sam.1)).await;
        assert_eq!(status, StatusCode::OK, "{name} {body}: {v}");
    }
    w.app.stop().await;
}

/// The status (and body) a WebSocket upgrade at `path` gets.
async fn ws_status(app: &TestApp, path: &str, cookie: &str) -> (u16, String) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = format!("ws://{}{path}", app.addr)
        .into_client_request()
        .expect("request");
    let h = req.headers_mut();
    h.insert(
        "origin",
        format!("http://localhost:{}", app.addr.port())
            .parse()
            .unwrap(),
    );
    h.insert("cookie", cookie.parse().unwrap());
    match tokio_tungstenite::connect_async(req).await {
        Ok(_) => (101, "upgraded".into()),
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => (
            res.status().as_u16(),
            res.body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default(),
        ),
        Err(e) => panic!("connect failed: {e}"),
    }
}

async fn a_scope_change_applies_on_the_next_request_and_admins_stay_global(backend: Backend) {
    let w = world(backend).await;
    let app = &w.app;
    let sessions = |cookie: String| async move {
        let (_, v) = app.server_fn("list_sessions", "", Some(&cookie)).await;
        tenants_of(&v, "tenant")
    };
    let admin = &w.admin.1;
    let scope = |id: String, tenants: &'static str| async move {
        app.server_fn(
            "set_operator_tenants",
            &format!("id={id}&tenants={tenants}"),
            Some(admin),
        )
        .await
    };
    assert_eq!(sessions(w.sam.1.clone()).await, ["acme"]);
    let (status, v) = scope(w.sam.0.clone(), "globex").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        sessions(w.sam.1.clone()).await,
        ["globex"],
        "same cookie, new scope"
    );
    let (status, v) = scope(w.sam.0.clone(), "acme%2C+globex").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, ops) = app.server_fn("list_operators", "", Some(&w.admin.1)).await;
    let sam = ops
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "sam")
        .cloned()
        .unwrap();
    assert_eq!(sam["tenants"], json!(["acme", "globex"]), "{ops}");
    // With two tenants, the audit log pages through exactly their events,
    // from either end, three at a time.
    let theirs: Vec<i64> = app
        .state
        .store
        .audit_recent(None, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.tenant.as_deref(), Some("acme" | "globex")))
        .map(|e| e.seq)
        .collect();
    assert!(theirs.len() > 6, "{theirs:?}");
    let sam = &w.sam.1;
    let page = |body: String| async move {
        let (status, v) = app.server_fn("query_audit", &body, Some(sam)).await;
        assert_eq!(status, StatusCode::OK, "{body}: {v}");
        let seqs: Vec<i64> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["seq"].as_i64().unwrap())
            .collect();
        (seqs, v["has_older"] == true, v["has_newer"] == true)
    };
    let mut down: Vec<i64> = Vec::new();
    let mut body = "query[cursor]=newest&query[limit]=3".to_owned();
    loop {
        let (seqs, older, _) = page(body).await;
        down.extend(&seqs);
        if !older {
            break;
        }
        body = format!(
            "query[cursor][before]={}&query[limit]=3",
            seqs.last().unwrap()
        );
    }
    assert_eq!(down, theirs, "paging down");
    let mut up: Vec<i64> = Vec::new();
    let mut body = "query[cursor]=oldest&query[limit]=3".to_owned();
    loop {
        let (seqs, _, newer) = page(body).await;
        up.splice(0..0, seqs.iter().copied());
        if !newer {
            break;
        }
        body = format!(
            "query[cursor][after]={}&query[limit]=3",
            seqs.first().unwrap()
        );
    }
    assert_eq!(up, theirs, "paging up");

    let (status, v) = scope(w.sam.0.clone(), "").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (_, ops) = app.server_fn("list_operators", "", Some(&w.admin.1)).await;
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .all(|o| o["tenants"].is_null()),
        "nobody scoped now: {ops}"
    );
    assert_eq!(sessions(w.sam.1.clone()).await, ["acme", "globex"]);

    // Refused: an admin, an unknown tenant, a malformed one, a non-admin.
    let (status, v) = scope(w.admin.0.clone(), "acme").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["field"], "tenants", "{v}");
    assert!(v["message"].as_str().unwrap().contains("admin"), "{v}");
    let (status, v) = scope(w.sam.0.clone(), "initech").await;
    assert_eq!(
        (status, v["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("tenants")),
        "{v}"
    );
    let (status, v) = scope(w.sam.0.clone(), "Not%2FA%2FTenant").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    let (status, v) = app
        .server_fn(
            "set_operator_tenants",
            &format!("id={}&tenants=acme", w.wide.0),
            Some(&w.sam.1),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(sessions(w.sam.1.clone()).await, ["acme", "globex"]);

    // Every change is audited.
    let scopes: Vec<Value> = app
        .state
        .store
        .audit_recent(None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "operator.scope")
        .map(|e| serde_json::from_str(&e.params).unwrap())
        .collect();
    let mut tenants: Vec<Value> = scopes.iter().map(|p| p["tenants"].clone()).collect();
    tenants.reverse();
    assert_eq!(
        tenants,
        [
            json!(["acme"]),
            json!(["globex"]),
            json!(["acme", "globex"]),
            json!("all")
        ],
        "{scopes:?}"
    );
    w.app.stop().await;
}

async fn a_live_view_ends_when_its_tenant_leaves_the_operators_scope(backend: Backend) {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let w = world(backend).await;
    let app = &w.app;
    let (status, v) = app
        .server_fn(
            "live_ticket",
            &format!("session={}", w.acme.session),
            Some(&w.sam.1),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let mut req = format!("ws://{}{}", app.addr, v["path"].as_str().unwrap())
        .into_client_request()
        .unwrap();
    req.headers_mut().insert(
        "origin",
        format!("http://localhost:{}", app.addr.port())
            .parse()
            .unwrap(),
    );
    req.headers_mut().insert("cookie", w.sam.1.parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req)
        .await
        .expect("sam watches acme's session");
    let (status, v) = app
        .server_fn(
            "set_operator_tenants",
            &format!("id={}&tenants=globex", w.sam.0),
            Some(&w.admin.1),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let mut seen = Vec::new();
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).unwrap_or_default();
                if v["type"] == "ended" {
                    return Some(v);
                }
                seen.push(v["type"].clone());
            }
        }
        None
    })
    .await;
    let ended = ended
        .unwrap_or_else(|_| panic!("no end within {PATIENCE:?}; seen {seen:?}"))
        .unwrap_or_else(|| panic!("closed without an end message; seen {seen:?}"));
    assert!(
        ended["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("scope"),
        "{ended}"
    );
    w.app.stop().await;
}

/// Another tenant's flood of grant requests hides nothing from a scoped
/// operator and is capped: each key has at most 20 waiting, each tenant
/// 100 (then 429 `too_many_requests`, nothing stored or audited); and
/// however many rows another tenant has (600 here, put straight in the
/// database, past any list's limit), a scoped operator's list and count
/// still show their own tenant's request.
async fn another_tenants_flood_of_grant_requests_hides_nothing_and_is_capped(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let ask = |agent: crate::helpers::AgentClient| async move {
        agent
            .post(
                "/api/grants/requests",
                json!({ "domains": ["a.test"], "reason": "flood" }),
            )
            .await
    };
    let acme = app.agent("acme").await;
    let (status, mine) = ask(acme).await;
    assert_eq!(status, StatusCode::CREATED, "{mine}");
    for k in 0..5 {
        let key = app.agent("globex").await;
        for i in 0..20 {
            let (status, v) = ask(key.clone()).await;
            assert_eq!(status, StatusCode::CREATED, "key {k}, request {i}: {v}");
        }
        let refused = ask(key).await;
        crate::helpers::assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    }
    let sixth = app.agent("globex").await;
    let refused = ask(sixth).await;
    crate::helpers::assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    let store = &app.state.store;
    let globex_rows = store
        .grant_request_list(
            Some(&["globex".to_owned()]),
            cordon::store::grants::RequestsWhich::All,
            1000,
        )
        .await
        .unwrap();
    assert_eq!(globex_rows.len(), 100, "refused requests were stored");
    let requested = store
        .audit_recent(None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "grant.request")
        .count();
    assert_eq!(requested, 101, "refused requests were audited");
    // Rows of an older Cordon, or many decided ones: newer than acme's.
    let now = cordon::time::now_ms();
    for i in 0..600 {
        let state = if i % 2 == 0 { "pending" } else { "denied" };
        store
            .grant_request_insert(&cordon::store::grants::GrantRequestRow {
                id: format!("gr_flood{i:04}"),
                tenant_id: "globex".into(),
                api_key_id: None,
                domains: "[\"a.test\"]".into(),
                reason: "flood".into(),
                state: state.parse().unwrap(),
                created_at: now + 1000 + i,
                decided_at: None,
                decided_by: None,
                cdp: false,
                totp: false,
            })
            .await
            .unwrap();
    }
    let sam = app.operator_session("sam", Role::Operator).await;
    let admin = app.operator_session("ada", Role::Admin).await;
    scope_to_acme(&app, &sam.0, &admin.1).await;
    let (status, grants) = app.server_fn("list_grants", "", Some(&sam.1)).await;
    assert_eq!(status, StatusCode::OK, "{grants}");
    let pending: Vec<&str> = grants["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(pending, [mine["request_id"].as_str().unwrap()], "{grants}");
    let (_, status_now) = app.server_fn("get_status", "", Some(&sam.1)).await;
    assert_eq!(status_now["pending_grants"], 1, "{status_now}");
    app.stop().await;
}

/// Requests racing at a key's cap cannot pass it together: with 19
/// waiting, twelve asked at once store one more and are refused past it
/// (429), and every ask audited but not stored is audited as refused.
async fn grant_requests_racing_at_the_cap_cannot_pass_it_together(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let key = app.agent("acme").await;
    let ask = |agent: crate::helpers::AgentClient| async move {
        agent
            .post(
                "/api/grants/requests",
                json!({ "domains": ["a.test"], "reason": "race" }),
            )
            .await
    };
    for i in 0..19 {
        let (status, v) = ask(key.clone()).await;
        assert_eq!(status, StatusCode::CREATED, "request {i}: {v}");
    }
    let answers = futures::future::join_all((0..12).map(|_| tokio::spawn(ask(key.clone())))).await;
    let mut created = 0;
    for answer in answers {
        let (status, v) = answer.unwrap();
        match status {
            StatusCode::CREATED => created += 1,
            _ => crate::helpers::assert_error(
                &(status, v),
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_requests",
            ),
        }
    }
    assert_eq!(created, 1, "racing requests passed the cap together");
    let store = &app.state.store;
    let stored: std::collections::HashSet<String> = store
        .grant_request_list(
            Some(&["acme".to_owned()]),
            cordon::store::grants::RequestsWhich::Pending,
            1000,
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(stored.len(), 20, "{stored:?}");
    let rows: Vec<_> = store
        .audit_recent(None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "grant.request")
        .collect();
    let request_of = |e: &cordon::audit::Event| -> String {
        let p: serde_json::Value = serde_json::from_str(&e.params).unwrap();
        p["request"].as_str().unwrap_or_default().to_owned()
    };
    let refused: std::collections::HashSet<String> = rows
        .iter()
        .filter(|e| e.outcome == "refused: too_many_requests")
        .map(request_of)
        .collect();
    for e in rows.iter().filter(|e| e.outcome == "requested") {
        let id = request_of(e);
        assert!(
            stored.contains(&id) != refused.contains(&id),
            "{id} is stored: {}, audited as refused: {}",
            stored.contains(&id),
            refused.contains(&id)
        );
    }
    app.stop().await;
}

both_backends!(
    grant_requests_racing_at_the_cap_cannot_pass_it_together,
    another_tenants_flood_of_grant_requests_hides_nothing_and_is_capped,
    a_live_view_ends_when_its_tenant_leaves_the_operators_scope,
    a_scoped_operator_sees_only_their_tenant_on_every_list_and_others_see_both,
    another_tenants_objects_answer_not_found_to_a_scoped_operator_and_are_audited,
    a_scope_change_applies_on_the_next_request_and_admins_stay_global,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_exports_the_audit_log_as_json_lines_that_verify_and_others_cannot() {
    let w = world(Backend::Sqlite).await;
    let app = &w.app;
    let get = |path: String, cookie: String| async move {
        let res = app
            .http
            .get(app.url(&path))
            .header("cookie", cookie)
            .header("host", format!("localhost:{}", app.addr.port()))
            .send()
            .await
            .expect("request");
        let status = res.status();
        let kind = res
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        (status, kind, res.bytes().await.unwrap_or_default().to_vec())
    };
    // The whole log: every event, verifiable offline.
    let (status, kind, body) = get("/ui/audit/export".into(), w.admin.1.clone()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(kind, "application/x-ndjson");
    let verified = cordon::audit::verify_file(&body[..]).expect("JSON lines");
    let events = match verified {
        cordon::audit::FileVerification::Intact {
            events, gaps: 0, ..
        } => events,
        other => panic!("{other:?}"),
    };
    let stored = app.state.store.audit_page(0, 100_000).await.unwrap();
    // The export's own row is written before it reads.
    assert_eq!(events as usize, stored.len(), "every event");
    assert!(stored.iter().any(|e| e.action == "audit.export"));
    // One tenant, from a seq on.
    let (status, _, body) = get(
        "/ui/audit/export?tenant=globex&since=2".into(),
        w.admin.1.clone(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(!text.is_empty());
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["tenant"], "globex", "{line}");
    }
    // Operators (scoped or not) may not; a bad bound is a clear 400.
    for cookie in [&w.sam.1, &w.wide.1] {
        let (status, _, _) = get("/ui/audit/export".into(), cookie.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
    let (status, _, body) = get("/ui/audit/export?since=yesterday".into(), w.admin.1.clone()).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "{}",
        String::from_utf8_lossy(&body)
    );
    w.app.stop().await;
}
