//! Operators decide grants from the host; nothing secret reaches the logs.

use serde_json::{Value, json};

use super::*;
use crate::helpers::{Backend, tenant};
use crate::site;

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
        cdp: reason == "first",
        totp: false,
    };
    let first = cordon::grants::request(&store, &owner, &ask("first", &["127.0.0.1", "localhost"]))
        .await
        .unwrap();
    let second = cordon::grants::request(&store, &owner, &ask("second", &["127.0.0.1"]))
        .await
        .unwrap();
    let data = db.dir.path().join("data");
    let data = data.display().to_string();
    let run = |args: &[&str]| {
        crate::helpers::cordon_cli(
            db.dir.path(),
            &[("CORDON_DATABASE_URL", &db.url), ("CORDON_DATA_DIR", &data)],
            args,
        )
    };
    let out = run(&["grants", "list", "--pending"]);
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(listed.contains(&first.request_id) && listed.contains(&second.request_id));
    // A request asking for CDP says so.
    let line_of = |id: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or("")
            .to_owned()
    };
    assert!(line_of(&first.request_id).contains("\tcdp"), "{listed}");
    assert!(!line_of(&second.request_id).contains("\tcdp"), "{listed}");

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
        .grant_token_of_request(&first.request_id.parse().unwrap())
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
                cdp: false,
                totp: false,
            };
            cordon::grants::request(&store, &owner, &req)
                .await
                .unwrap()
                .request_id
        }
    };
    let (acme_req, globex_req) = (ask("acme").await, ask("globex").await);
    let data = db.dir.path().join("data").display().to_string();
    let approve = |id: &str| {
        let out = crate::helpers::cordon_cli(
            db.dir.path(),
            &[
                ("CORDON_DATABASE_URL", &db.url),
                ("CORDON_DATA_DIR", &data),
                ("CORDON_GRANT_EXPIRY_MIN", r#"{"acme": 60}"#),
            ],
            &["grants", "approve", id],
        );
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
        let out = crate::helpers::cordon_cli(dir.path(), &[("CORDON_LOG_LEVEL", "debug")], args);
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
