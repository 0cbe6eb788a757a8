//! A login made in a live session is read back into the vault ("harvest"):
//! the preview lists names, flags and keys only; a save stores cookies and
//! localStorage with a diff against the previous credential; a save with
//! nothing to store keeps the previous credential; operator-mode sessions
//! then land with both the cookies and the localStorage, in every tab.
//! Values are random canaries, compared and never printed.

use cordon::audit::Actor;
use cordon::sessions::HarvestError;
use cordon::vault::ImportOptions;
use reqwest::StatusCode;
use serde_json::json;

use super::canary;
use crate::grants::{granted, open_operator, read_dom};
use crate::helpers::{Backend, both_backends, domain, session_app, tenant};
use crate::site;

both_backends!(
    a_sessions_login_is_previewed_saved_and_diffed_without_showing_a_value,
    operator_sessions_restore_stored_local_storage_in_every_tab,
);

fn operator() -> Actor {
    Actor::Operator("op-harvest".into())
}

async fn a_sessions_login_is_previewed_saved_and_diffed_without_showing_a_value(backend: Backend) {
    // Arrange: a clean session logged in to the site (httpOnly cookie by
    // Set-Cookie, localStorage by script).
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let (sid_value, token) = (canary(), canary());
    let sid = acme.open(json!({})).await;
    acme.navigate_ok(
        &sid,
        &site.url(&format!("/set-login?sid={sid_value}&token={token}")),
    )
    .await;
    let live = app.live("acme", &sid).await;
    let sessions = &app.state.sessions;
    let here = [domain("127.0.0.1")];
    let origin = format!("http://{}", site.addr);

    // Act + assert: the preview lists names, flags and keys, no value.
    let preview = sessions.harvest_preview(&live, &here).await.unwrap();
    let shown = format!("{} {preview:?}", serde_json::to_string(&preview).unwrap());
    assert!(!shown.contains(&sid_value) && !shown.contains(&token));
    assert_eq!(preview.domains.len(), 1);
    let d = &preview.domains[0];
    assert_eq!(d.domain, "127.0.0.1");
    let mut names: Vec<&str> = d.cookies.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["pref", "sid"]);
    let sid_meta = d.cookies.iter().find(|c| c.name == "sid").unwrap();
    assert!(sid_meta.http_only && !sid_meta.secure && sid_meta.expires.is_none());
    assert_eq!(sid_meta.same_site.as_deref(), Some("Lax"));
    let pref = d.cookies.iter().find(|c| c.name == "pref").unwrap();
    assert!(!pref.http_only && pref.expires.is_some());
    assert_eq!(d.origins.len(), 1, "{shown}");
    assert_eq!(d.origins[0].origin, origin);
    assert_eq!(d.origins[0].keys, ["token"]);

    // A first save adds every cookie and stores the localStorage.
    let report = sessions
        .harvest_save(&live, &operator(), &here)
        .await
        .unwrap();
    let saved = &report.domains[0];
    assert!(saved.stored && !saved.diff.replaced);
    assert_eq!((saved.cookies, saved.storage), (2, 1));
    assert_eq!(saved.diff.added, ["pref", "sid"]);
    let stored = |app: &crate::helpers::TestApp| {
        let vault = app.state.vault.clone();
        async move {
            vault
                .list(Some(&tenant("acme")))
                .await
                .unwrap()
                .into_iter()
                .find(|c| c.domain == "127.0.0.1")
                .expect("a credential for 127.0.0.1")
        }
    };
    let first = stored(&app).await;
    assert_eq!(
        (
            first.cookie_count,
            first.storage_count,
            first.source.as_str()
        ),
        (2, 1, "refresh")
    );
    let exported = app
        .state
        .vault
        .export(&Actor::Cli, &tenant("acme"), &here[0])
        .await
        .unwrap();
    assert!(
        exported
            .cookies
            .iter()
            .any(|c| c.name == "sid" && c.value == sid_value)
    );
    assert!(
        exported.origins.iter().any(|o| o.origin == origin
            && o.local_storage
                .iter()
                .any(|i| i.name == "token" && i.value == token)),
        "the export lacks the stored localStorage"
    );

    // The site changes the login: a new sid, pref gone, theme new.
    let newer = canary();
    acme.navigate_ok(&sid, &site.url(&format!("/relogin?sid={newer}")))
        .await;
    let report = sessions
        .harvest_save(&live, &operator(), &here)
        .await
        .unwrap();
    let diff = &report.domains[0].diff;
    assert!(diff.replaced);
    assert_eq!(diff.added, ["theme"]);
    assert_eq!(diff.removed, ["pref"]);
    assert_eq!(diff.changed, ["sid"]);
    assert!(diff.expiry_changed.is_empty(), "{diff:?}");
    let second = stored(&app).await;
    assert_eq!(second.id, first.id, "replaced in the same row");
    assert_eq!(second.cookie_count, 2);

    // Logged out: no cookie for the domain, so nothing is stored and the
    // previous credential stays as it was.
    acme.navigate_ok(&sid, &site.url("/logout")).await;
    let err = sessions
        .harvest_save(&live, &operator(), &here)
        .await
        .unwrap_err();
    assert!(matches!(err, HarvestError::NothingToSave { .. }), "{err}");
    assert_eq!(err.code(), "nothing_to_save");
    let kept = stored(&app).await;
    assert_eq!(kept, second, "the previous credential is kept unchanged");
    // A domain without cookies beside one with: only the latter is stored.
    acme.navigate_ok(
        &sid,
        &site.url(&format!("/set-login?sid={newer}&token={token}")),
    )
    .await;
    let both = [domain("127.0.0.1"), domain("example.com")];
    let report = sessions
        .harvest_save(&live, &operator(), &both)
        .await
        .unwrap();
    let other = &report.domains[1];
    assert_eq!(other.domain, "example.com");
    assert!(!other.stored && other.cookies == 0);
    assert!(report.domains[0].stored);
    let creds = app.state.vault.list(Some(&tenant("acme"))).await.unwrap();
    assert!(creds.iter().all(|c| c.domain != "example.com"));

    // Audit: one session.save per attempt, by the operator, counts only.
    let events = app.state.store.audit_page(0, 10_000).await.unwrap();
    let saves: Vec<_> = events
        .iter()
        .filter(|e| e.action == "session.save")
        .collect();
    assert_eq!(saves.len(), 4, "{saves:?}");
    assert!(
        saves.iter().all(|e| e.actor == "operator:op-harvest"),
        "{saves:?}"
    );
    assert_eq!(
        saves
            .iter()
            .filter(|e| e.outcome == "denied: nothing_to_save")
            .count(),
        1
    );
    for e in &events {
        let row = format!("{} {} {}", e.action, e.params, e.outcome);
        for s in [&sid_value, &newer, &token] {
            assert!(!row.contains(s.as_str()), "a secret in audit row {}", e.seq);
        }
    }
    app.stop().await;
}

async fn operator_sessions_restore_stored_local_storage_in_every_tab(backend: Backend) {
    // Arrange: a stored login of the site with a cookie the site accepts and
    // localStorage for its origin (and one of another site, not imported).
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let (value, token) = (canary(), canary());
    site.accept(&value, "acme-user");
    let origin = format!("http://{}", site.addr);
    let file = serde_json::to_vec(&json!({
        "cookies": [{"name": "session", "value": value, "domain": "127.0.0.1", "path": "/",
                     "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}],
        "origins": [
            {"origin": origin, "localStorage": [{"name": "token", "value": token}]},
            {"origin": "https://other.example", "localStorage": [{"name": "x", "value": "y"}]}
        ]
    }))
    .unwrap();
    let report = app
        .state
        .vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("127.0.0.1"),
            &file,
            ImportOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(report.ignored_origins, 1);
    assert_eq!(report.credential.storage_count, 1);

    // Act: an operator-mode session for the domain.
    let (_, grant, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &grant).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    assert_eq!(opened["injected_storage"], json!({ "127.0.0.1": 1 }));
    assert!(!opened.to_string().contains(&token));
    let op = opened["session_id"].as_str().unwrap().to_owned();

    // Assert: a tab opened before any page of the site sees both.
    let (status, tab) = acme
        .tool(&op, "tabs", json!({ "url": site.url("/show-login") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{tab}");
    let dom = read_dom(&acme, &op).await;
    assert!(
        dom.contains(&format!("token=[{token}]")),
        "new tab: localStorage"
    );
    assert!(dom.contains(&format!("session={value}")), "new tab: cookie");
    // The cookie logs the tab in; the localStorage is still there.
    acme.navigate_ok(&op, &site.url("/account")).await;
    assert!(
        read_dom(&acme, &op)
            .await
            .contains("logged in as acme-user")
    );
    acme.navigate_ok(&op, &site.url("/show-login")).await;
    assert!(
        read_dom(&acme, &op)
            .await
            .contains(&format!("token=[{token}]"))
    );

    // A clean session has neither.
    let clean = acme.open(json!({})).await;
    acme.navigate_ok(&clean, &site.url("/show-login")).await;
    let dom = read_dom(&acme, &clean).await;
    assert!(
        dom.contains("cookies=[]") && dom.contains("token=[]"),
        "clean session"
    );

    // Audit: counts only.
    let events = app.state.store.audit_page(0, 10_000).await.unwrap();
    let inject = events
        .iter()
        .find(|e| e.action == "session.inject")
        .expect("injection audited");
    assert!(
        inject
            .params
            .contains("\"local_storage\":{\"127.0.0.1\":1}"),
        "{}",
        inject.params
    );
    for e in &events {
        let row = format!("{} {} {}", e.action, e.params, e.outcome);
        assert!(
            !row.contains(&token) && !row.contains(&value),
            "a secret in audit row {}",
            e.seq
        );
    }
    app.stop().await;
}
