//! The dashboard's auth and roles from the outside: enrollment links,
//! passkey ceremony endpoints, dashboard sessions, role checks on server
//! functions and streams, and ids that belong to nothing. (The passkey
//! ceremonies with a real authenticator run in the end-to-end tests.)

use app::api::auth::Role;
use cordon::audit::Actor;
use cordon::auth::FirstStart;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, both_backends};

impl TestApp {
    async fn auth_post(
        &self,
        path: &str,
        body: Value,
        cookie: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(self.url(path))
            .header("origin", format!("http://localhost:{}", self.addr.port()))
            .header("host", format!("localhost:{}", self.addr.port()))
            .json(&body);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn audit_actions(&self) -> Vec<(String, String, String)> {
        self.state
            .store
            .audit_recent(None, 200)
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.actor, e.action, e.outcome))
            .collect()
    }
}

fn secret_of(link: &str) -> String {
    link.split_once('#').expect("a fragment").1.to_owned()
}

both_backends!(enrollment_links_refuse_expired_used_tampered_and_foreign_tokens);

async fn enrollment_links_refuse_expired_used_tampered_and_foreign_tokens(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // A fresh install offers the first admin a link.
    let first = app.state.auth.list().await.unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        (first[0].name.as_str(), first[0].role),
        ("admin", Role::Admin)
    );

    let inv = app
        .state
        .auth
        .invite(&Actor::Cli, "erin", Role::Operator)
        .await
        .unwrap();
    assert!(inv.link.contains("/enroll#cen_"), "{}", inv.link);
    let secret = secret_of(&inv.link);
    let start = |token: String| {
        app.auth_post(
            "/ui/auth/enroll/start",
            json!({ "token": token, "passkey_name": "laptop" }),
            None,
        )
    };
    // Valid: the browser gets creation options for erin.
    let (status, body) = start(secret.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["publicKey"]["user"]["name"], "erin", "{body}");
    assert_eq!(body["publicKey"]["rp"]["id"], "localhost", "{body}");

    // Tampered, foreign and hostile tokens.
    let mut tampered = secret.clone();
    tampered.replace_range(8..12, "AAAA");
    for (token, says) in [
        (tampered, "not valid"),
        (
            "cgt_notanenrollmentlink".to_owned(),
            "not an enrollment link",
        ),
        (format!("cen_{}", "x".repeat(200)), "not an enrollment link"),
        ("".to_owned(), "not an enrollment link"),
        ("cen_'; DROP TABLE operators; --".to_owned(), "not valid"),
    ] {
        let (status, body) = start(token.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{token}: {body}");
        assert_eq!(body["kind"], "invalid", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(says),
            "{token}: {body}"
        );
    }
    // Expired.
    app.db
        .raw("UPDATE enrollments SET expires_at = 1 WHERE used_at IS NULL")
        .await
        .unwrap();
    let (status, body) = start(secret.clone()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("expired"),
        "{body}"
    );
    // A restart while no admin is enrolled and every link expired gives a
    // fresh link for the same admin.
    let again = match app.state.auth.first_start_link().await.unwrap() {
        FirstStart::Link(inv) => inv,
        other => panic!("admin still unenrolled, links expired: {other:?}"),
    };
    assert_ne!(secret_of(&again.link), secret);
    assert_eq!(again.operator.name, "admin");
    // Malformed bodies.
    let (status, body) = app
        .auth_post("/ui/auth/enroll/start", json!({ "token": 5 }), None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["field"], "body", "{body}");
    // Nothing was enrolled by any of it.
    for op in app.state.auth.list().await.unwrap() {
        assert_eq!(op.passkeys, 0, "{op:?}");
    }
    app.stop().await;
}

both_backends!(ceremony_answers_without_a_ceremony_or_forged_are_refused);

async fn ceremony_answers_without_a_ceremony_or_forged_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let forged = json!({
        "id": "AAAA", "rawId": "AAAA", "type": "public-key",
        "response": { "authenticatorData": "AAAA", "clientDataJSON": "AAAA", "signature": "AAAA", "userHandle": null },
        "extensions": {}
    });
    // No ceremony in this browser: refused, whatever the answer says.
    let (status, body) = app
        .auth_post("/ui/auth/login/finish", forged.clone(), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("no passkey ceremony"),
        "{body}"
    );
    // A name that cannot log in (nobody, or an operator without a
    // passkey) answers as one that can: options with a fresh challenge and
    // the same "passkeys" each time; the finish fails as a wrong passkey.
    let start = |name: &'static str| {
        let app = &app;
        async move {
            let res = app
                .http
                .post(app.url("/ui/auth/login/start"))
                .header("origin", format!("http://localhost:{}", app.addr.port()))
                .header("host", format!("localhost:{}", app.addr.port()))
                .json(&json!({ "name": name }))
                .send()
                .await
                .unwrap();
            let status = res.status();
            let cookie = res
                .headers()
                .get("set-cookie")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .map(str::to_owned);
            let body: Value = res.json().await.unwrap();
            (status, body, cookie)
        }
    };
    let shape = |v: &Value| {
        let pk = &v["publicKey"];
        let mut keys: Vec<&String> = pk
            .as_object()
            .map(|o| o.keys().collect())
            .unwrap_or_default();
        keys.sort();
        (
            keys.into_iter().cloned().collect::<Vec<_>>(),
            pk["rpId"].clone(),
            pk["timeout"].clone(),
            pk["userVerification"].clone(),
            pk["allowCredentials"][0].as_object().map(|o| o.len()),
        )
    };
    let (s1, nobody, cookie) = start("nobody").await;
    let (s2, again, _) = start("nobody").await;
    let (s3, admin, _) = start("admin").await;
    assert_eq!(
        (s1, s2, s3),
        (StatusCode::OK, StatusCode::OK, StatusCode::OK),
        "{nobody} {admin}"
    );
    assert_eq!(shape(&nobody), shape(&admin), "{nobody} / {admin}");
    assert!(
        !nobody["publicKey"]["allowCredentials"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        nobody["publicKey"]["allowCredentials"], again["publicKey"]["allowCredentials"],
        "the same name shows the same passkeys"
    );
    assert_ne!(
        nobody["publicKey"]["challenge"],
        again["publicKey"]["challenge"]
    );
    assert_ne!(
        nobody["publicKey"]["allowCredentials"], admin["publicKey"]["allowCredentials"],
        "names differ"
    );
    let (status, body) = app
        .auth_post("/ui/auth/login/finish", forged.clone(), cookie.as_deref())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not a passkey of this operator"),
        "{body}"
    );
    // A registration answer with a forged enrollment ceremony in flight.
    let inv = app
        .state
        .auth
        .invite(&Actor::Cli, "fred", Role::Viewer)
        .await
        .unwrap();
    let res = app
        .http
        .post(app.url("/ui/auth/enroll/start"))
        .header("origin", format!("http://localhost:{}", app.addr.port()))
        .header("host", format!("localhost:{}", app.addr.port()))
        .json(&json!({ "token": secret_of(&inv.link), "passkey_name": "k" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let cookie = res
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    // The cookie's id is not what the database keys the session by.
    let id = cookie.split_once('=').unwrap().1;
    assert!(!app.state.store.dashboard_session_exists(id).await.unwrap());
    assert!(
        app.state
            .store
            .dashboard_session_exists(&cordon::ids::token_hash(id))
            .await
            .unwrap()
    );
    let forged_reg = json!({
        "id": "AAAA", "rawId": "AAAA", "type": "public-key",
        "response": { "attestationObject": "AAAA", "clientDataJSON": "AAAA" },
        "extensions": {}
    });
    let (status, body) = app
        .auth_post("/ui/auth/enroll/finish", forged_reg.clone(), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("did not verify"),
        "{body}"
    );
    // The failed answer used up the ceremony: replaying it finds none.
    let (status, _) = app
        .auth_post("/ui/auth/enroll/finish", forged_reg, Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let fred = app.state.auth.by_name("fred").await.unwrap();
    assert_eq!(fred.passkeys, 0);
    app.stop().await;
}

both_backends!(dashboard_sessions_end_on_absolute_expiry_disable_and_unknown_ids);

async fn dashboard_sessions_end_on_absolute_expiry_disable_and_unknown_ids(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (id, cookie) = app.operator_session("olga", Role::Operator).await;
    let (status, body) = app.server_fn("whoami", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "olga");
    // Logged in 13 hours ago: past the 12-hour absolute expiry.
    let old = app
        .session_cookie(&id, cordon::time::now_ms() - 13 * 3_600_000)
        .await;
    let (status, body) = app.server_fn("whoami", "", Some(&old)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["kind"], "unauthorized");
    // A made-up or mangled cookie.
    for bogus in [
        "cordon_session=AAAAAAAAAAAAAAAAAAAAAA",
        "cordon_session=%%%",
        "cordon_session=",
    ] {
        let (status, _) = app.server_fn("whoami", "", Some(bogus)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{bogus}");
        let res = app
            .http
            .get(app.url("/grants"))
            .header("cookie", bogus)
            .header("host", format!("localhost:{}", app.addr.port()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.url().path(), "/login", "{bogus}");
    }
    // Disabling ends the session at once.
    let olga = app.state.auth.by_name("olga").await.unwrap();
    app.state
        .auth
        .set_disabled(&Actor::Cli, &olga.id, true)
        .await
        .unwrap();
    let (status, _) = app.server_fn("whoami", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Enabling again does not bring old sessions back.
    app.state
        .auth
        .set_disabled(&Actor::Cli, &olga.id, false)
        .await
        .unwrap();
    let (status, _) = app.server_fn("whoami", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The change stream needs a login too.
    let res = app
        .http
        .get(app.url("/ui/events"))
        .header("host", format!("localhost:{}", app.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

both_backends!(roles_are_checked_on_the_server_and_refusals_are_audited);

async fn roles_are_checked_on_the_server_and_refusals_are_audited(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (viewer, vcookie) = app.operator_session("vic", Role::Viewer).await;
    let (oz, ocookie) = app.operator_session("oz", Role::Operator).await;
    let (_, acookie) = app.operator_session("ada", Role::Admin).await;
    let cases: [(&str, &str, Role); 8] = [
        (
            "approve_grant",
            "id=gr_aaaaaaaaaaaaaaaaaaaaaaaaaa&expires_min=60&multi_use=false",
            Role::Operator,
        ),
        (
            "deny_grant",
            "id=gr_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            Role::Operator,
        ),
        (
            "revoke_grant",
            "jti=gt_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            Role::Operator,
        ),
        (
            "end_session",
            "id=s_aaaaaaaaaaaaaaaaaaaaaaaaaa",
            Role::Operator,
        ),
        (
            "delete_credential",
            "tenant=acme&domain=a.test",
            Role::Operator,
        ),
        ("create_tenant", "id=evil&name=Evil", Role::Admin),
        ("invite_operator", "name=mallory&role=admin", Role::Admin),
        ("list_tenants", "", Role::Admin),
    ];
    for (name, body, needs) in cases {
        let (status, answer) = app.server_fn(name, body, Some(&vcookie)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {answer}");
        assert_eq!(answer["kind"], "forbidden", "{name}: {answer}");
        if needs == Role::Admin {
            let (status, answer) = app.server_fn(name, body, Some(&ocookie)).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{name} as operator: {answer}"
            );
        }
    }
    let refused = app
        .audit_actions()
        .await
        .into_iter()
        .filter(|(actor, action, _)| {
            action == "operator.refused" && actor == &format!("operator:{viewer}")
        })
        .count();
    assert_eq!(
        refused,
        cases.len(),
        "each refusal of the viewer is audited"
    );
    assert!(app.state.auth.by_name("mallory").await.is_err());
    assert!(
        !cordon::tenants::list(&app.state.store)
            .await
            .unwrap()
            .iter()
            .any(|t| t.id.as_str() == "evil")
    );

    // Allowed roles reach the domain, which says the ids belong to nothing.
    for (name, body) in [
        (
            "approve_grant",
            "id=gr_aaaaaaaaaaaaaaaaaaaaaaaaaa&expires_min=60&multi_use=false",
        ),
        ("deny_grant", "id=gr_aaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("deny_grant", "id=not-an-id"),
        ("revoke_grant", "jti=gt_aaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("end_session", "id=s_aaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("get_session", "id=../../etc/passwd"),
        ("remove_passkey", "id=pk_aaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ] {
        if name == "remove_passkey" {
            app.fresh_check(&ocookie).await;
        }
        let (status, answer) = app.server_fn(name, body, Some(&ocookie)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{name} {body}: {answer}");
        assert_eq!(answer["kind"], "not_found", "{name}: {answer}");
    }
    // Each refused change of a logged-in operator is in the audit log: the
    // six changes above (`get_session` only reads), besides the three
    // admin-only attempts refused for the role earlier.
    let refused: Vec<String> = app
        .audit_actions()
        .await
        .into_iter()
        .filter(|(actor, action, _)| {
            action == "operator.refused" && actor == &format!("operator:{oz}")
        })
        .map(|(_, _, outcome)| outcome)
        .collect();
    let count = |o: &str| refused.iter().filter(|r| *r == o).count();
    assert_eq!(
        (count("denied: not_found"), count("denied: role")),
        (6, 3),
        "{refused:?}"
    );
    let (status, answer) = app
        .server_fn(
            "approve_grant",
            "id=gr_aaaaaaaaaaaaaaaaaaaaaaaaaa&expires_min=0&multi_use=false",
            Some(&ocookie),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert_eq!(answer["field"], "expires_min", "{answer}");
    let (status, answer) = app
        .server_fn("create_tenant", "id=Not%20Valid&name=x", Some(&acookie))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    let (status, answer) = app
        .server_fn("create_tenant", "id=globex&name=Globex", Some(&acookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, answer) = app
        .server_fn("create_tenant", "id=globex&name=Globex", Some(&acookie))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    // The admin's actions carry the admin's id.
    let created = app
        .audit_actions()
        .await
        .into_iter()
        .find(|(_, action, _)| action == "tenant.create")
        .unwrap();
    assert!(created.0.starts_with("operator:op_"), "{created:?}");
    app.stop().await;
}

both_backends!(an_operator_cannot_remove_their_last_passkey_nor_anothers);

async fn an_operator_cannot_remove_their_last_passkey_nor_anothers(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (me, cookie) = app.operator_session("pia", Role::Viewer).await;
    let (other, _) = app.operator_session("quinn", Role::Viewer).await;
    let insert = |op: String, n: u8| {
        let store = app.state.store.clone();
        async move {
            let row = cordon::store::operators::PasskeyRow {
                id: cordon::domain::PasskeyId::generate(),
                operator_id: op.parse().unwrap(),
                cred_id: format!("cred-{op}-{n}"),
                name: format!("key {n}"),
                passkey: "{}".into(),
                created_at: cordon::time::now_ms(),
                last_used_at: None,
            };
            assert!(store.passkey_insert(&row).await.unwrap());
            row.id.to_string()
        }
    };
    let mine_a = insert(me.clone(), 1).await;
    let mine_b = insert(me.clone(), 2).await;
    let theirs = insert(other.clone(), 1).await;
    let _theirs_b = insert(other, 2).await;
    let remove = |id: String| {
        let cookie = cookie.clone();
        let app = &app;
        async move {
            app.server_fn("remove_passkey", &format!("id={id}"), Some(&cookie))
                .await
        }
    };
    // Without a fresh passkey check nothing is removed (a stolen
    // dashboard session cannot swap the operator's passkeys).
    let (status, body) = remove(mine_a.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("fresh passkey check"),
        "{body}"
    );
    let (_, listed) = app.server_fn("my_passkeys", "", Some(&cookie)).await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    app.fresh_check(&cookie).await;
    let (status, body) = remove(theirs).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another's passkey: {body}");
    app.fresh_check(&cookie).await;
    let (status, body) = remove(mine_a).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // One check allows one change.
    let (status, body) = remove(mine_b.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // Adding one needs a fresh check too (the ceremony itself is the
    // end-to-end suite's: it needs a browser's authenticator).
    let res = app
        .http
        .post(app.url("/ui/auth/passkeys/start"))
        .header("origin", app.origin())
        .header("host", format!("localhost:{}", app.addr.port()))
        .header("cookie", &cookie)
        .json(&serde_json::json!({ "passkey_name": "spare" }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("fresh passkey check"), "{text}");
    app.fresh_check(&cookie).await;
    let (status, body) = remove(mine_b).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("last passkey"),
        "{body}"
    );
    let (status, body) = app.server_fn("my_passkeys", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.as_array().unwrap().len(), 1, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_page_asked_for_logged_out_is_kept_as_next_only_when_it_is_a_path_of_the_dashboard() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let no_redirects = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let port = app.addr.port();
    for (path, want) in [
        ("/grants?x=1", "/login?next=%2Fgrants%3Fx%3D1"),
        // The browser would read `//evil.example` as another site.
        ("//evil.example", "/login"),
        ("//evil.example/x", "/login"),
    ] {
        let res = no_redirects
            .get(format!("http://localhost:{port}{path}"))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let location = res
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned());
        assert_eq!(
            (status, location.as_deref()),
            (StatusCode::SEE_OTHER, Some(want)),
            "{path}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn login_pages_reached_by_an_ip_send_the_browser_to_the_public_url() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let no_redirects = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let port = app.addr.port();
    for path in ["/login", "/enroll", "/login?next=%2Fgrants"] {
        let res = no_redirects
            .get(format!("http://127.0.0.1:{port}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::SEE_OTHER, "{path}");
        assert_eq!(
            res.headers()["location"].to_str().unwrap(),
            format!("http://localhost:{port}{path}"),
            "{path}"
        );
        // At the public URL itself the page is served.
        let res = no_redirects
            .get(format!("http://127.0.0.1:{port}{path}"))
            .header("host", format!("localhost:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
    }
    app.stop().await;
}

/// `/ui/events` opened with `cookie` (asserted 200).
async fn change_stream(app: &TestApp, cookie: &str) -> reqwest::Response {
    let res = app
        .http
        .get(app.url("/ui/events"))
        .header("cookie", cookie)
        .header("host", format!("localhost:{}", app.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res
}

#[tokio::test]
async fn an_open_change_stream_hears_changes_and_does_not_hold_the_shutdown() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, cookie) = app.operator_session("sam", Role::Viewer).await;
    let mut res = change_stream(&app, &cookie).await;
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    let mut seen = String::new();
    let mut read_until = async |needle: &str, seen: &mut String| {
        while !seen.contains(needle) {
            let chunk = tokio::time::timeout(crate::helpers::PATIENCE, res.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {seen:?}"))
                .unwrap()
                .unwrap_or_else(|| panic!("stream ended before {needle:?}: {seen:?}"));
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    read_until("event: ready", &mut seen).await;
    cordon::tenants::create(
        &app.state.store,
        &Actor::Cli,
        &"acme".parse().unwrap(),
        None,
    )
    .await
    .unwrap();
    read_until("event: tenants", &mut seen).await;
    read_until("event: audit", &mut seen).await;
    // The stream is still open: the server must still stop promptly.
    tokio::time::timeout(std::time::Duration::from_secs(20), app.stop())
        .await
        .expect("shutdown held by an open change stream");
}

/// A change stream opened before a logout ends with it: nothing more is
/// told to a browser whose dashboard session is gone.
#[tokio::test]
async fn a_change_stream_ends_when_its_dashboard_session_does() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, cookie) = app.operator_session("sam", Role::Viewer).await;
    let mut res = change_stream(&app, &cookie).await;
    let mut seen = String::new();
    let next = async |res: &mut reqwest::Response, seen: &String| {
        tokio::time::timeout(crate::helpers::PATIENCE, res.chunk())
            .await
            .unwrap_or_else(|_| panic!("the stream neither spoke nor ended; so far {seen:?}"))
            .unwrap()
    };
    while !seen.contains("event: ready") {
        let chunk = next(&mut res, &seen).await.expect("the stream ended early");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let out = app
        .http
        .post(app.url("/ui/auth/logout"))
        .header("origin", app.origin())
        .header("host", format!("localhost:{}", app.addr.port()))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert!(
        out.status().is_success() || out.status().is_redirection(),
        "{}",
        out.status()
    );
    // Changes after the logout are not told; the stream says it ended,
    // then ends.
    while let Some(chunk) = next(&mut res, &seen).await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: ended"), "{seen:?}");
    app.stop().await;
}

both_backends!(first_start_links_of_replicas_starting_together_all_work_until_one_is_used);

/// Replicas starting together on a fresh database each print a first-start
/// link, or say one is outstanding when another replica's came first: all
/// the links work (one does not silently retire another's), they make one
/// `admin` between them, a later start makes none, and once one link is
/// used the others stop.
async fn first_start_links_of_replicas_starting_together_all_work_until_one_is_used(
    backend: Backend,
) {
    let app = TestApp::spawn(backend).await;
    // As on a fresh database: no operator yet.
    app.db
        .raw("DELETE FROM enrollments; DELETE FROM operators;")
        .await
        .unwrap();
    let auth = &app.state.auth;
    let (one, two) = tokio::join!(auth.first_start_link(), auth.first_start_link());
    let (one, two) = (one.unwrap(), two.unwrap());
    let later = auth.first_start_link().await.unwrap();
    let admins: Vec<_> = auth.list().await.unwrap();
    assert_eq!(admins.len(), 1, "one admin between them: {admins:?}");
    let mut links = Vec::new();
    for started in [&one, &two, &later] {
        match started {
            FirstStart::Link(inv) => {
                assert_eq!(inv.operator.id, admins[0].id);
                links.push(inv.clone());
            }
            FirstStart::Outstanding { operator, .. } => assert_eq!(operator.id, admins[0].id),
            FirstStart::AdminExists => panic!("no admin can log in yet: {started:?}"),
        }
    }
    assert!(
        matches!(later, FirstStart::Outstanding { .. }),
        "a later start prints no new link: {later:?}"
    );
    assert!(
        !links.is_empty() && links.len() <= 2,
        "replicas starting together print one or two links: {one:?} {two:?}"
    );
    let start = |link: &str| {
        app.auth_post(
            "/ui/auth/enroll/start",
            json!({ "token": secret_of(link), "passkey_name": "laptop" }),
            None,
        )
    };
    for inv in &links {
        let (status, body) = start(&inv.link).await;
        assert_eq!(status, StatusCode::OK, "every replica's link works: {body}");
    }
    // One is used (the passkey ceremony itself is the WebAuthn tests' job).
    let used = app
        .state
        .store
        .enrollment_by_hash(&cordon::ids::token_hash(&secret_of(&links[0].link)))
        .await
        .unwrap()
        .unwrap();
    let passkey = cordon::store::operators::PasskeyRow {
        id: cordon::domain::PasskeyId::generate(),
        operator_id: admins[0].id.clone(),
        cred_id: "Y3JlZA".into(),
        name: "laptop".into(),
        passkey: "{}".into(),
        created_at: 1,
        last_used_at: None,
    };
    assert!(
        app.state
            .store
            .enrollment_complete(&used.id, &passkey, cordon::time::now_ms())
            .await
            .unwrap()
    );
    for inv in &links {
        let (status, body) = start(&inv.link).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("used already"),
            "{body}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn anonymous_passkey_calls_are_throttled_per_client_and_store_nothing_when_refused() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    for _ in 0..70 {
        let res = app
            .http
            .post(app.url("/ui/auth/login/start"))
            .header("origin", format!("http://localhost:{}", app.addr.port()))
            .header("host", format!("localhost:{}", app.addr.port()))
            .json(&json!({ "name": "nobody" }))
            .send()
            .await
            .unwrap();
        let refused = res.status() == StatusCode::TOO_MANY_REQUESTS;
        if refused {
            retry_after = res
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            assert!(
                res.headers().get("set-cookie").is_none(),
                "a refused call starts no session"
            );
        }
        statuses.push(res.status().as_u16());
    }
    let ok = statuses.iter().filter(|s| **s == 200).count();
    // 60 at once, then one a second: a quick loop may earn one more.
    assert!((60..=62).contains(&ok), "{statuses:?}");
    assert!(statuses[62..].iter().all(|s| *s == 429), "{statuses:?}");
    assert_eq!(retry_after, Some(1), "{retry_after:?}");
    app.stop().await;
}

/// `bytes` through `tool -dc` (the Debian `gzip` and `brotli` commands).
fn decompressed(tool: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut child = std::process::Command::new(tool)
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{tool}: {e} (infra/scripts/setup.sh installs it)"));
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{tool} -dc failed");
    out.stdout
}

#[tokio::test]
async fn the_dashboards_assets_are_served_compressed_and_cached_under_the_builds_version() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let pkg = crate::helpers::site_root().join("pkg");
    let version = std::fs::read_to_string(pkg.join("version"))
        .expect("infra/scripts/build-site.sh writes pkg/version")
        .trim()
        .to_owned();
    // Pages link the build's assets under its version.
    let page = app.get("/login").await.text().await.unwrap();
    for asset in ["cordon.css", "cordon.js", "cordon_bg.wasm"] {
        assert!(
            page.contains(&format!("/pkg/{version}/{asset}")),
            "/login does not link {asset} under {version}"
        );
    }
    let wasm = std::fs::read(pkg.join("cordon_bg.wasm")).unwrap();
    let path = format!("/pkg/{version}/cordon_bg.wasm");
    for (accept, encoding) in [
        ("gzip, deflate, br", Some("br")),
        ("gzip", Some("gzip")),
        ("identity", None),
    ] {
        let res = app
            .http
            .get(app.url(&path))
            .header("accept-encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{accept}");
        let h = res.headers().clone();
        assert_eq!(
            h["cache-control"], "public, max-age=31536000, immutable",
            "{accept}"
        );
        assert_eq!(h["content-type"], "application/wasm", "{accept}");
        assert_eq!(
            h.get("content-encoding").map(|v| v.to_str().unwrap()),
            encoding,
            "{accept}"
        );
        let body = res.bytes().await.unwrap();
        let plain = match encoding {
            Some("br") => decompressed("brotli", &body),
            Some(_) => decompressed("gzip", &body),
            None => body.to_vec(),
        };
        assert!(plain == wasm, "{accept}: the body is not the built file");
        if encoding.is_some() {
            assert!(
                body.len() * 2 < wasm.len(),
                "{accept}: {} bytes for {}",
                body.len(),
                wasm.len()
            );
        }
    }
    // Without the version, or under another build's: revalidated, never
    // cached as this build's.
    for path in ["/pkg/cordon.css", "/pkg/0123456789abcdef/cordon.css"] {
        let res = app.get(path).await;
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        assert_eq!(res.headers()["cache-control"], "no-cache", "{path}");
    }
    // Not assets: the version file, the precompressed files by name, paths
    // that climb out (encoded, so no client resolves them first).
    for path in [
        "/pkg/version".to_owned(),
        "/pkg/cordon.css.br".to_owned(),
        format!("/pkg/{version}/cordon.js.gz"),
        format!("/pkg/{version}/%2e%2e%2f..%2fCargo.toml"),
        "/pkg/..%2f..%2fCargo.toml".to_owned(),
        "/pkg/".to_owned(),
    ] {
        let res = app.get(&path).await;
        let status = res.status();
        let body = res.text().await.unwrap();
        assert!(
            status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST,
            "{path}: {status}"
        );
        assert!(
            !body.contains("[package]"),
            "{path} served a file outside pkg/"
        );
    }
    app.stop().await;
}

/// Every dashboard page carries a Content Security Policy whose script
/// nonce is the one on the page's inline scripts (and a new one each
/// response), so text of a page shown in the dashboard cannot run.
#[tokio::test]
async fn dashboard_pages_carry_a_script_policy_with_their_own_nonce() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (_, cookie) = app.operator_session("sam", Role::Viewer).await;
    let mut nonces = Vec::new();
    for path in ["/", "/sessions", "/audit", "/login"] {
        let res = app
            .http
            .get(app.url(path))
            .header("cookie", &cookie)
            .header("host", format!("localhost:{}", app.addr.port()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let csp = res
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let html = res.text().await.unwrap();
        let nonce = csp
            .split("'nonce-")
            .nth(1)
            .and_then(|r| r.split('\'').next())
            .unwrap_or_else(|| panic!("{path}: no nonce in {csp:?}"))
            .to_owned();
        assert!(
            csp.contains("frame-ancestors 'none'") && csp.contains("object-src 'none'"),
            "{csp}"
        );
        // Every inline script carries it; none runs without.
        let scripts: Vec<&str> = html.split("<script").skip(1).collect();
        assert!(!scripts.is_empty(), "{path}: no scripts");
        for s in scripts {
            let tag = s.split('>').next().unwrap_or_default();
            assert!(
                tag.contains("src=") || tag.contains(&format!("nonce=\"{nonce}\"")),
                "{path}: an inline script without the nonce: <script{tag}>"
            );
        }
        nonces.push(nonce);
    }
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 4, "a nonce is used once: {nonces:?}");
    app.stop().await;
}
