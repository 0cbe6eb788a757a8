//! Operator grants end to end: request → approve → collect the token once
//! → an operator-mode session lands logged in on the loopback test site
//! with cookies from the vault. Every refused token gives its own code and
//! no session; one single-use token opens exactly one session however many
//! race for it. Cookie values and tokens are compared, never printed.

use std::time::{Duration, Instant};

use cordon::audit::Actor;
use cordon::domain::TenantId;
use cordon::vault::{Domain, ImportOptions};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, Backend, TestApp, both_backends, session_app};
use crate::site;

both_backends!(
    refused_tokens_each_give_their_code_and_no_session,
    fifty_concurrent_opens_with_one_single_use_token_yield_one_session,
);

fn tenant(id: &str) -> TenantId {
    id.parse().unwrap()
}

fn domain(d: &str) -> Domain {
    d.parse().unwrap()
}

/// A CDP cookie array with one httpOnly `session` cookie of `host`.
fn session_cookie(host: &str, value: &str) -> Vec<u8> {
    serde_json::to_vec(&json!([
        {"name": "session", "value": value, "domain": host, "path": "/",
         "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}
    ]))
    .unwrap()
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn secret() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Asks for `domains`, approves, collects the token: (request id, token, jti).
async fn granted(
    app: &TestApp,
    agent: &AgentClient,
    domains: &[&str],
    single_use: bool,
) -> (String, String, String) {
    let (status, req) = agent
        .post(
            "/api/grants/requests",
            json!({ "domains": domains, "reason": "test run" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{req}");
    assert_eq!(req["state"], "pending");
    let rid = req["request_id"].as_str().unwrap().to_owned();
    let (status, polled) = agent.get(&format!("/api/grants/requests/{rid}")).await;
    assert_eq!(
        (status, polled["state"].as_str()),
        (StatusCode::OK, Some("pending"))
    );
    assert!(polled.get("grant_token").is_none());
    let tok = cordon::grants::approve(
        &app.state.store,
        &Actor::Cli,
        &rid.parse().unwrap(),
        15,
        single_use,
    )
    .await
    .unwrap();
    let (status, first) = agent.get(&format!("/api/grants/requests/{rid}")).await;
    assert_eq!(
        (status, first["state"].as_str()),
        (StatusCode::OK, Some("approved"))
    );
    let token = first["grant_token"]
        .as_str()
        .expect("the first poll after approval carries the token")
        .to_owned();
    assert!(token.starts_with("cgt_") && token.len() >= 4 + 22);
    let (_, second) = agent.get(&format!("/api/grants/requests/{rid}")).await;
    assert!(
        second.get("grant_token").is_none(),
        "the token is handed out once"
    );
    assert_eq!(second["jti"].as_str(), Some(tok.jti.as_str()));
    (rid, token, tok.jti)
}

async fn open_operator(agent: &AgentClient, domains: &[&str], token: &str) -> (StatusCode, Value) {
    agent
        .post(
            "/api/sessions",
            json!({ "credential_mode": "operator", "domains": domains, "grant_token": token }),
        )
        .await
}

async fn read_dom(agent: &AgentClient, sid: &str) -> String {
    let (status, dom) = agent.tool(sid, "read_dom", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    dom.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_session_with_a_grant_lands_logged_in_and_a_clean_one_does_not() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let globex = app.agent("globex").await;

    // The site's login form works through the tools.
    let sid = acme.open(json!({})).await;
    acme.tool(&sid, "navigate", json!({ "url": site.url("/login") }))
        .await;
    for (sel, text) in [("#user", "alice"), ("#pass", "pw-not-a-canary")] {
        let (status, _) = acme
            .tool(&sid, "type", json!({ "selector": sel, "text": text }))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = acme.tool(&sid, "click", json!({ "selector": "#go" })).await;
    assert_eq!(status, StatusCode::OK);
    crate::helpers::wait_until(
        "the login form to log in",
        crate::helpers::PATIENCE,
        || async {
            let dom = read_dom(&acme, &sid).await;
            if dom.contains("logged in as alice") {
                Ok(())
            } else {
                Err(dom.chars().take(300).collect())
            }
        },
    )
    .await;
    acme.close(&sid).await;

    // Stored logins: acme's and globex's for the site, acme's for another domain.
    let acme_value = secret();
    let globex_value = secret();
    let other_value = secret();
    site.accept(&acme_value, "acme-user");
    site.accept(&globex_value, "globex-user");
    let vault = &app.state.vault;
    for (t, d, v) in [
        ("acme", "127.0.0.1", &acme_value),
        ("globex", "127.0.0.1", &globex_value),
        ("acme", "example.com", &other_value),
    ] {
        vault
            .import(
                &Actor::Cli,
                &tenant(t),
                &domain(d),
                &session_cookie(d, v),
                ImportOptions::default(),
            )
            .await
            .unwrap();
    }

    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{}", opened["error"]);
    assert_eq!(opened["credential_mode"], "operator");
    assert_eq!(opened["injected"], json!({ "127.0.0.1": 1 }));
    let text = opened.to_string();
    assert!(!text.contains(&acme_value) && !text.contains(&token));
    let op = opened["session_id"].as_str().unwrap().to_owned();
    acme.tool(&op, "navigate", json!({ "url": site.url("/account") }))
        .await;
    let dom = read_dom(&acme, &op).await;
    assert!(dom.contains("logged in as acme-user"), "operator session");
    assert!(!dom.contains("globex"), "tenant B's cookie never reaches A");

    // A clean session of the same tenant is not logged in.
    let clean = acme.open(json!({})).await;
    acme.tool(&clean, "navigate", json!({ "url": site.url("/account") }))
        .await;
    assert!(read_dom(&acme, &clean).await.contains("not logged in"));

    // Only the requested domain was injected and marked.
    let creds = vault.list(Some(&tenant("acme"))).await.unwrap();
    let marked = |d: &str| {
        creds
            .iter()
            .find(|c| c.domain == d)
            .unwrap()
            .last_injected_at
            .is_some()
    };
    assert!(marked("127.0.0.1"));
    assert!(!marked("example.com"), "other domains are not injected");
    let globex_creds = vault.list(Some(&tenant("globex"))).await.unwrap();
    assert!(globex_creds[0].last_injected_at.is_none());

    // Audit: injection counted, token redeemed; no value, no token anywhere.
    let events = app.state.store.audit_page(0, 10_000).await.unwrap();
    let inject = events
        .iter()
        .find(|e| e.action == "session.inject")
        .expect("injection audited");
    assert!(inject.params.contains("127.0.0.1") && !inject.params.contains("example.com"));
    assert!(
        events
            .iter()
            .any(|e| e.action == "grant.redeem" && e.outcome == "consumed")
    );
    for e in &events {
        let row = format!("{} {} {}", e.action, e.params, e.outcome);
        for s in [&acme_value, &globex_value, &other_value, &token] {
            assert!(!row.contains(s.as_str()), "a secret in audit row {}", e.seq);
        }
    }

    // The token was single-use.
    let (status, err) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("grant_consumed"))
    );
    let _ = globex;
    // After the server stops, no secret is anywhere in plaintext: not in the
    // database (WAL included), screenshots, key files or leftover profiles.
    let db = app.stop().await;
    let mut files = vec![db.dir.path().to_path_buf()];
    let mut scanned = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            scanned += 1;
            for s in [&acme_value, &globex_value, &other_value, &token] {
                let found = bytes.windows(s.len()).any(|w| w == s.as_bytes());
                assert!(!found, "a secret in plaintext in {}", path.display());
            }
        }
    }
    assert!(scanned >= 2, "the database files were scanned");
}

async fn refused_tokens_each_give_their_code_and_no_session(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let acme = app.agent("acme").await;
    let globex = app.agent("globex").await;
    let store = &app.state.store;
    let expect = |code: &'static str| {
        move |(status, v): (StatusCode, Value)| {
            assert_eq!(
                (status, v["error"]["code"].as_str()),
                (StatusCode::FORBIDDEN, Some(code)),
                "{}",
                v["error"]
            );
        }
    };

    expect("grant_required")(
        acme.post(
            "/api/sessions",
            json!({ "credential_mode": "operator", "domains": ["127.0.0.1"] }),
        )
        .await,
    );
    expect("grant_unknown")(open_operator(&acme, &["127.0.0.1"], "cgt_nope").await);

    let (_, expired, jti) = granted(&app, &acme, &["127.0.0.1"], true).await;
    store
        .grant_token_set_expiry(&jti, now_ms() - 1000)
        .await
        .unwrap();
    expect("grant_expired")(open_operator(&acme, &["127.0.0.1"], &expired).await);

    let (_, revoked, jti) = granted(&app, &acme, &["127.0.0.1"], false).await;
    cordon::grants::revoke(store, &Actor::Cli, &jti.parse().unwrap())
        .await
        .unwrap();
    expect("grant_revoked")(open_operator(&acme, &["127.0.0.1"], &revoked).await);

    let (_, live, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    expect("grant_wrong_tenant")(open_operator(&globex, &["127.0.0.1"], &live).await);
    expect("grant_too_narrow")(open_operator(&acme, &["127.0.0.1", "example.com"], &live).await);
    expect("grant_too_narrow")(open_operator(&acme, &["example.com"], &live).await);
    store
        .grant_token_consume(&cordon::ids::token_hash(&live), now_ms())
        .await
        .unwrap();
    expect("grant_consumed")(open_operator(&acme, &["127.0.0.1"], &live).await);

    // A denied request never yields a token; another tenant cannot see it.
    let (_, req) = acme
        .post(
            "/api/grants/requests",
            json!({ "domains": ["127.0.0.1"], "reason": "x" }),
        )
        .await;
    let rid = req["request_id"].as_str().unwrap();
    cordon::grants::deny(store, &Actor::Cli, &rid.parse().unwrap())
        .await
        .unwrap();
    let (_, polled) = acme.get(&format!("/api/grants/requests/{rid}")).await;
    assert_eq!(polled["state"], "denied");
    assert!(polled.get("grant_token").is_none());
    assert_eq!(
        globex.get(&format!("/api/grants/requests/{rid}")).await.0,
        StatusCode::NOT_FOUND
    );
    for bad in [
        json!({ "domains": [], "reason": "x" }),
        json!({ "domains": ["https://a.com"], "reason": "x" }),
        json!({ "domains": ["a.com"], "reason": "" }),
    ] {
        assert_eq!(
            acme.post("/api/grants/requests", bad).await.0,
            StatusCode::BAD_REQUEST
        );
    }

    // Nothing started, nothing stored; every refusal audited with its reason.
    assert_eq!(app.state.sessions.open_count(), 0);
    assert!(store.session_list("acme", 100).await.unwrap().is_empty());
    assert!(store.session_list("globex", 100).await.unwrap().is_empty());
    let outcomes: Vec<String> = store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "grant.redeem")
        .map(|e| e.outcome)
        .collect();
    for code in [
        "grant_unknown",
        "grant_expired",
        "grant_revoked",
        "grant_wrong_tenant",
        "grant_too_narrow",
        "grant_consumed",
    ] {
        assert!(
            outcomes.contains(&format!("denied: {code}")),
            "{code} in {outcomes:?}"
        );
    }

    // GC removes expired tokens (and only those).
    let (tokens, _) = store.grant_gc(now_ms() + 1, 0).await.unwrap();
    assert_eq!(tokens, 1, "only the expired token goes");
    expect("grant_unknown")(open_operator(&acme, &["127.0.0.1"], &expired).await);
    app.stop().await;
}

async fn fifty_concurrent_opens_with_one_single_use_token_yield_one_session(backend: Backend) {
    let site = site::start().await;
    let app = session_app(
        backend,
        &site.allow(),
        &[
            ("CORDON_MAX_SESSIONS", "200"),
            ("CORDON_MAX_SESSIONS_PER_TENANT", "200"),
        ],
    )
    .await;
    let acme = app.agent("acme").await;
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let started = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let agent = AgentClient {
                http: acme.http.clone(),
                base: acme.base.clone(),
                key: acme.key.clone(),
            };
            let token = token.clone();
            tokio::spawn(async move {
                let res = open_operator(&agent, &["127.0.0.1"], &token).await;
                (res, started.elapsed())
            })
        })
        .collect();
    let mut won = Vec::new();
    let mut lost = Vec::new();
    for t in tasks {
        let ((status, v), took) = t.await.unwrap();
        if status == StatusCode::CREATED {
            won.push(v);
        } else {
            assert_eq!(
                (status, v["error"]["code"].as_str()),
                (StatusCode::FORBIDDEN, Some("grant_consumed")),
                "{}",
                v["error"]
            );
            lost.push(took);
        }
    }
    assert_eq!(won.len(), 1, "exactly one session");
    assert_eq!(lost.len(), 49);
    assert_eq!(app.state.sessions.open_count(), 1);
    assert_eq!(
        app.state
            .store
            .session_list("acme", 100)
            .await
            .unwrap()
            .len(),
        1,
        "no session row for a loser"
    );
    let slowest = lost.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_secs(10),
        "losers are refused without starting a browser ({slowest:?})"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_open_names_the_domains_without_a_stored_credential() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    app.state
        .vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("127.0.0.1"),
            &session_cookie("127.0.0.1", &secret()),
            ImportOptions::default(),
        )
        .await
        .unwrap();
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1", "localhost"], false).await;

    let (status, opened) = open_operator(&acme, &["127.0.0.1", "localhost"], &token).await;

    assert_eq!(status, StatusCode::CREATED, "{opened}");
    assert_eq!(
        opened["injected"],
        json!({ "127.0.0.1": 1, "localhost": 0 }),
        "{opened}"
    );
    assert_eq!(
        opened["missing_credentials"],
        json!(["localhost"]),
        "{opened}"
    );
    acme.close(opened["session_id"].as_str().unwrap()).await;
    // Every domain has a credential: the field is left out.
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    assert!(opened.get("missing_credentials").is_none(), "{opened}");
    acme.close(opened["session_id"].as_str().unwrap()).await;
    let events = app.state.store.audit_page(0, 10_000).await.unwrap();
    let inject = events
        .iter()
        .find(|e| e.action == "session.inject")
        .expect("injection audited");
    assert!(
        inject
            .params
            .contains("\"missing_credentials\":[\"localhost\"]"),
        "{}",
        inject.params
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_approves_denies_and_revokes() {
    let db = crate::helpers::TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let acme = tenant("acme");
    store.tenant_create(&acme, "acme").await.unwrap();
    let owner = cordon::store::api_keys::ApiKeyOwner {
        key_id: "k_test".into(),
        tenant: acme,
    };
    let ask = |reason: &str, domains: &[&str]| cordon::grants::NewGrantRequest {
        domains: domains.iter().map(|d| (*d).to_owned()).collect(),
        reason: reason.into(),
    };
    let first = cordon::grants::request(&store, &owner, &ask("first", &["127.0.0.1", "localhost"]))
        .await
        .unwrap();
    let second = cordon::grants::request(&store, &owner, &ask("second", &["127.0.0.1"]))
        .await
        .unwrap();
    let data = db.dir.path().join("data");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_cordon"))
            .current_dir(db.dir.path())
            .args(args)
            .env("CORDON_LOG_LEVEL", "warn")
            .env("CORDON_DATABASE_URL", &db.url)
            .env("CORDON_DATA_DIR", &data)
            .output()
            .expect("cordon runs")
    };
    let out = run(&["grants", "list", "--pending"]);
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listed.contains(&first.request_id) && listed.contains(&second.request_id));

    // A credential is stored for one of the two domains asked for.
    let cookies = db.dir.path().join("cookies.json");
    std::fs::write(&cookies, session_cookie("127.0.0.1", &secret())).unwrap();
    let file = cookies.display().to_string();
    let out = run(&[
        "creds",
        "import",
        "--tenant",
        "acme",
        "--domain",
        "127.0.0.1",
        &file,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[
        "grants",
        "approve",
        &first.request_id,
        "--expires-min",
        "5",
        "--multi-use",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The operator hears which domains the grant lets no cookies in for.
    let warned = String::from_utf8_lossy(&out.stderr).into_owned();
    let warning: Vec<&str> = warned
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warning.len(), 1, "{warned}");
    assert!(
        warning[0].contains("no stored credential for localhost:"),
        "{warned}"
    );
    assert!(!warning[0].contains("127.0.0.1"), "{warned}");
    let tok = store
        .grant_token_of_request(&first.request_id)
        .await
        .unwrap()
        .unwrap();
    assert!(!tok.single_use);
    let minutes = (tok.expires_at - tok.issued_at) / 60_000;
    assert_eq!(minutes, 5);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&tok.jti));

    assert!(
        run(&["grants", "deny", &second.request_id])
            .status
            .success()
    );
    // A decided request stays decided: like every CLI error, one line on
    // stderr and exit code 2.
    let one_line_error = |out: &std::process::Output, needle: &str| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "expected {needle:?} in {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    };
    one_line_error(
        &run(&["grants", "deny", &second.request_id]),
        "grant request is denied, not pending",
    );
    one_line_error(
        &run(&["grants", "approve", &second.request_id]),
        "grant request is denied, not pending",
    );
    one_line_error(
        &run(&["grants", "approve", &first.request_id]),
        "grant request is approved, not pending",
    );
    assert!(run(&["grants", "revoke", &tok.jti]).status.success());
    let unknown = cordon::domain::GrantTokenId::generate();
    one_line_error(
        &run(&["grants", "revoke", unknown.as_str()]),
        "grant token not found",
    );
    // An id of the wrong shape is refused before anything is looked up.
    let out = run(&["grants", "revoke", "gr_not-a-token-id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("malformed grant token id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["grants", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        listed.contains("denied") && listed.contains("revoked"),
        "{listed}"
    );
    let actions: Vec<String> = store
        .audit_page(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    for a in [
        "grant.request",
        "grant.approve",
        "grant.deny",
        "grant.revoke",
    ] {
        assert!(actions.iter().any(|x| x == a), "{a} in {actions:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_probes_tell_fresh_credentials_from_stale_ones() {
    let site = site::start().await;
    let probes = json!({ "127.0.0.1": {
        "url": site.url("/account"), "expect_status": 200, "expect_text": "logged in as"
    } })
    .to_string();
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SMOKE_PROBES", &probes)],
    )
    .await;
    let acme = app.agent("acme").await;
    let import = |value: String| {
        let vault = app.state.vault.clone();
        async move {
            vault
                .import(
                    &Actor::Cli,
                    &tenant("acme"),
                    &domain("127.0.0.1"),
                    &session_cookie("127.0.0.1", &value),
                    ImportOptions::default(),
                )
                .await
                .unwrap();
        }
    };
    let fresh = secret();
    site.accept(&fresh, "acme-user");
    import(fresh.clone()).await;
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{}", opened["error"]);
    assert_eq!(opened["smoke"], json!({ "127.0.0.1": "ok" }));
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    assert!(
        !read_dom(&acme, &sid).await.contains("logged in"),
        "the agent starts from a blank page"
    );

    // Cookies the site no longer accepts: the probe says so.
    import(secret()).await;
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED);
    let verdict = opened["smoke"]["127.0.0.1"].as_str().unwrap_or_default();
    assert!(verdict.starts_with("failed"), "{opened}");
    assert!(!opened.to_string().contains(&fresh));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_without_an_expiry_uses_the_tenants_setting() {
    let db = crate::helpers::TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    for t in ["acme", "globex"] {
        store.tenant_create(&tenant(t), t).await.unwrap();
    }
    let ask = |t: &str| {
        let owner = cordon::store::api_keys::ApiKeyOwner {
            key_id: "k_test".into(),
            tenant: tenant(t),
        };
        let store = store.clone();
        async move {
            let req = cordon::grants::NewGrantRequest {
                domains: vec!["127.0.0.1".into()],
                reason: "r".into(),
            };
            cordon::grants::request(&store, &owner, &req)
                .await
                .unwrap()
                .request_id
        }
    };
    let (acme_req, globex_req) = (ask("acme").await, ask("globex").await);
    let approve = |id: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cordon"))
            .current_dir(db.dir.path())
            .args(["grants", "approve", id])
            .env("CORDON_LOG_LEVEL", "warn")
            .env("CORDON_DATABASE_URL", &db.url)
            .env("CORDON_DATA_DIR", db.dir.path().join("data"))
            .env("CORDON_GRANT_EXPIRY_MIN", r#"{"acme": 60}"#)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(approve(&acme_req).contains("expires in 60 min"));
    assert!(approve(&globex_req).contains("expires in 15 min"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_logs_of_a_whole_operator_flow_never_hold_a_cookie_value_or_token() {
    let site = site::start().await;
    let value = secret();
    site.accept(&value, "acme-user");
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cordon"))
            .current_dir(dir.path())
            .args(args)
            .env("CORDON_LOG_LEVEL", "debug")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    cli(&["tenant", "create", "acme"]);
    let (key, _) = cli(&["apikey", "create", "--tenant", "acme"]);
    let key = key.trim().to_owned();
    let file = dir.path().join("cookies.json");
    std::fs::write(&file, session_cookie("127.0.0.1", &value)).unwrap();
    let (_, import_log) = cli(&[
        "creds",
        "import",
        "--tenant",
        "acme",
        "--domain",
        "127.0.0.1",
        file.to_str().unwrap(),
    ]);
    std::fs::remove_file(&file).unwrap();

    let allow = site.allow();
    let server = crate::helpers::ServeProcess::start(
        dir.path(),
        &[
            ("CORDON_LOG_LEVEL", "debug"),
            ("CORDON_POOL_SIZE", "0"),
            ("CORDON_EGRESS_ALLOW", &allow),
        ],
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let base = format!("http://{}", server.addr);
    let req: Value = http
        .post(format!("{base}/api/grants/requests"))
        .bearer_auth(&key)
        .json(&json!({ "domains": ["127.0.0.1"], "reason": "log test" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rid = req["request_id"].as_str().unwrap().to_owned();
    cli(&["grants", "approve", &rid]);
    let polled: Value = http
        .get(format!("{base}/api/grants/requests/{rid}"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = polled["grant_token"].as_str().unwrap().to_owned();
    let opened: Value = http
        .post(format!("{base}/api/sessions"))
        .bearer_auth(&key)
        .json(&json!({ "credential_mode": "operator", "domains": ["127.0.0.1"], "grant_token": token }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(opened["injected"], json!({ "127.0.0.1": 1 }), "{opened}");
    let sid = opened["session_id"].as_str().unwrap();
    let nav: Value = http
        .post(format!("{base}/api/sessions/{sid}/navigate"))
        .bearer_auth(&key)
        .json(&json!({ "url": site.url("/account") }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(nav["status"], 200, "{nav}");
    let crate::helpers::ServeProcess { mut child, log, .. } = server;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let lines: Vec<String> = log.map_while(Result::ok).collect();
    child.wait().unwrap();
    assert!(lines.len() > 10, "debug logging ran");
    let all = format!("{import_log}\n{}", lines.join("\n"));
    let leaks: Vec<String> = all
        .lines()
        .filter(|l| l.contains(&value))
        .map(|l| l.replace(&value, "<VALUE>").chars().take(300).collect())
        .collect();
    assert!(
        leaks.is_empty(),
        "a cookie value reached the logs: {leaks:?}"
    );
    assert!(!all.contains(&token), "a grant token reached the logs");
    assert!(!all.contains(&key), "an API key reached the logs");
}
