//! Refused tokens each give their code; one single-use token opens one session however many race.

use std::time::{Duration, Instant};

use cordon::audit::Actor;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::*;
use crate::helpers::{Backend, TestApp, both_backends, session_app};
use crate::site;

both_backends!(
    refused_tokens_each_give_their_code_and_no_session,
    fifty_concurrent_opens_with_one_single_use_token_yield_one_session,
    revoking_or_expiring_a_grant_ends_the_sessions_opened_with_it,
);

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
        .grant_token_set_expiry(&jti.parse().unwrap(), now_ms() - 1000)
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
            let agent = acme.clone();
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
async fn one_single_use_token_raced_on_two_replicas_opens_one_session() {
    let site = site::start().await;
    let allow = site.allow();
    // Opens in flight count against the limit: room for all twenty.
    let (app, b) = crate::replicas::pair(&allow, &[("CORDON_MAX_SESSIONS_PER_TENANT", "50")]).await;
    let acme = app.agent("acme").await;
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let mut on_b = acme.clone();
    on_b.base = b.url("");
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let agent = if i % 2 == 0 {
                acme.clone()
            } else {
                on_b.clone()
            };
            let token = token.clone();
            tokio::spawn(async move { open_operator(&agent, &["127.0.0.1"], &token).await })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        let (status, v) = t.await.unwrap();
        if status == StatusCode::CREATED {
            won += 1;
        } else {
            assert_eq!(
                (status, v["error"]["code"].as_str()),
                (StatusCode::FORBIDDEN, Some("grant_consumed")),
                "{v}\n{}",
                b.warnings()
            );
        }
    }
    assert_eq!(won, 1, "exactly one session over both replicas");
}

/// The token goes to the key that asked for it: another key of the same
/// tenant that knows the request's id sees it approved, with no token,
/// and the requester still gets it.
#[tokio::test]
async fn an_approved_token_is_handed_to_the_requesting_key_only() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let asker = app.agent("acme").await;
    let other = app.agent("acme").await;
    let (status, req) = asker
        .post(
            "/api/grants/requests",
            json!({ "domains": ["127.0.0.1"], "reason": "test run" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{req}");
    let rid = req["request_id"].as_str().unwrap().to_owned();
    cordon::grants::approve(
        &app.state.store,
        &Actor::Cli,
        &rid.parse().unwrap(),
        15,
        true,
    )
    .await
    .unwrap();
    let path = format!("/api/grants/requests/{rid}");
    for _ in 0..2 {
        let (status, seen) = other.get(&path).await;
        assert_eq!(
            (status, seen["state"].as_str()),
            (StatusCode::OK, Some("approved")),
            "{seen}"
        );
        assert!(
            seen.get("grant_token").is_none(),
            "another key got the token: {seen}"
        );
    }
    let (status, mine) = asker.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert!(
        mine["grant_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("cgt_")),
        "the requester's poll carries the token"
    );
    app.stop().await;
}

/// Waits until session `sid` has ended, and answers its info.
async fn ended(agent: &crate::helpers::AgentClient, sid: &str) -> Value {
    crate::helpers::wait_until("the session to end", crate::helpers::PATIENCE, || async {
        let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
        if info["state"] == "closed" {
            Ok(info)
        } else {
            Err(info.to_string())
        }
    })
    .await
}

/// A grant bounds the sessions opened with it: revoked in the dashboard
/// (a used single-use token too: it shows "in use"), or expired, they end
/// with the reason; another grant's session and a clean one go on.
async fn revoking_or_expiring_a_grant_ends_the_sessions_opened_with_it(backend: Backend) {
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    let open = |token: String| {
        let acme = acme.clone();
        async move {
            let (status, v) = open_operator(&acme, &["127.0.0.1"], &token).await;
            assert_eq!(status, StatusCode::CREATED, "{v}");
            v["session_id"].as_str().unwrap().to_owned()
        }
    };
    let (_, multi, multi_jti) = granted(&app, &acme, &["127.0.0.1"], false).await;
    let (a, b) = (open(multi.clone()).await, open(multi).await);
    let (_, single, single_jti) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let c = open(single).await;
    let (_, other, other_jti) = granted(&app, &acme, &["127.0.0.1"], false).await;
    let d = open(other).await;
    let clean = acme.open(json!({})).await;

    // The used single-use token is listed as in use, and can be revoked.
    let (status, listed) = app.server_fn("list_grants", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let row = listed["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["jti"] == single_jti.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row["status"], "in use", "{row}");
    for jti in [&multi_jti, &single_jti] {
        let (status, v) = app
            .server_fn("revoke_grant", &format!("jti={jti}"), Some(&cookie))
            .await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
    for sid in [&a, &b, &c] {
        let info = ended(&acme, sid).await;
        assert_eq!(info["close_reason"], "grant_revoked", "{info}");
        let (status, v) = acme
            .post(&format!("/api/sessions/{sid}/read_dom"), json!({}))
            .await;
        assert_eq!(status, StatusCode::GONE, "{v}");
    }
    // The other grant's session and the clean one are untouched.
    for sid in [&d, &clean] {
        let (_, info) = acme.get(&format!("/api/sessions/{sid}")).await;
        assert_eq!(info["state"], "ready", "{info}");
    }
    // The other grant expires: its session ends.
    app.state
        .store
        .grant_token_set_expiry(&other_jti.parse().unwrap(), now_ms() - 1)
        .await
        .unwrap();
    let info = ended(&acme, &d).await;
    assert_eq!(info["close_reason"], "grant_expired", "{info}");
    let (_, info) = acme.get(&format!("/api/sessions/{clean}")).await;
    assert_eq!(info["state"], "ready", "{info}");
    app.stop().await;
}
