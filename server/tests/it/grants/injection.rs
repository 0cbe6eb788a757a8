//! Operator-mode sessions land logged in with the vault's cookies, and say what they could not inject.

use cordon::audit::Actor;
use cordon::vault::ImportOptions;
use reqwest::StatusCode;
use serde_json::json;

use super::*;
use crate::helpers::{Backend, domain, session_app, tenant};
use crate::site;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_session_with_a_grant_lands_logged_in_and_a_clean_one_does_not() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let globex = app.agent("globex").await;

    // An agent cannot log in by typing a password: the risk gate refuses
    // it (credentials come only from the vault), and nothing is typed.
    let sid = acme.open(json!({})).await;
    acme.tool(&sid, "navigate", json!({ "url": site.url("/login") }))
        .await;
    let (status, _) = acme
        .tool(
            &sid,
            "type",
            json!({ "selector": "#user", "text": "alice" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let refused = acme
        .tool(
            &sid,
            "type",
            json!({ "selector": "#pass", "text": "pw-not-a-canary" }),
        )
        .await;
    crate::helpers::assert_error(&refused, StatusCode::FORBIDDEN, "denied_by_policy");
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
