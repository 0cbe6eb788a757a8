//! Ids parsed at the edge: a malformed id (another kind's, an unknown
//! prefix, too long, non-ASCII, upper case, a prefix alone, empty where the
//! edge can carry one) gets the typed error a well-formed unknown id gets
//! (the agent API and MCP: the very same answer; the dashboard: the same
//! status and kind, its message naming the id as given), leaves no audit row an unknown id does not, and
//! changes nothing, at each edge that takes one.

use app::api::auth::Role;
use cordon::domain::{GrantRequestId, GrantTokenId, SessionId, TaskId, TotpId};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, both_backends};
use crate::mcp::Mcp;

/// Ids no kind draws, made around `good` (a well-formed id of the kind the
/// edge takes) and `other` (another kind's id); `empty`: with `""`.
fn malformed(good: &str, other: &str, empty: bool) -> Vec<String> {
    let cut = good.find('_').expect("a prefix") + 1;
    let (prefix, rest) = good.split_at(cut);
    let mut ids = vec![
        other.to_owned(),
        format!("x_{rest}"),
        format!("{good}a"),
        format!("{prefix}{}", "é".repeat(13)),
        format!("{prefix}{}é", &rest[..24]),
        good.to_uppercase(),
        prefix.to_owned(),
    ];
    if empty {
        ids.push(String::new());
    }
    ids
}

/// A dashboard answer's status and kind (its message names the id as given).
fn kind(answer: &(StatusCode, Value)) -> (StatusCode, Value) {
    (answer.0, answer.1["kind"].clone())
}

/// Fails unless every row of `more` is also one of `than` (as many times).
fn no_more_trace(more: &[(String, String)], than: &[(String, String)], what: &str) {
    let mut left = than.to_vec();
    for row in more {
        let Some(i) = left.iter().position(|r| r == row) else {
            panic!("{what}: {row:?} is audited, which an unknown id is not ({than:?})");
        };
        left.remove(i);
    }
}

/// The (action, outcome) of every audit row after `seq`, and the last seq.
async fn audited_since(app: &TestApp, seq: i64) -> (Vec<(String, String)>, i64) {
    let rows = app.state.store.audit_page(seq, 10_000).await.unwrap();
    let last = rows.last().map_or(seq, |e| e.seq);
    (
        rows.into_iter().map(|e| (e.action, e.outcome)).collect(),
        last,
    )
}

async fn last_seq(app: &TestApp) -> i64 {
    audited_since(app, 0).await.1
}

both_backends!(the_agent_api_answers_a_malformed_id_as_an_unknown_one);

async fn the_agent_api_answers_a_malformed_id_as_an_unknown_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let agent = app.agent("acme").await;
    let cdp = |path: String| {
        let http = app.http.clone();
        let url = app.url(&path);
        let key = agent.key.clone();
        async move {
            let res = http.get(url).bearer_auth(key).send().await.unwrap();
            let status = res.status();
            let body = res.text().await.unwrap();
            (
                status,
                serde_json::from_str(&body).unwrap_or(Value::String(body)),
            )
        }
    };
    let task = TaskId::generate().to_string();
    let session = SessionId::generate().to_string();
    let routes: [(Method, String, &str, &str); 6] = [
        (Method::GET, "/api/tasks/{}".into(), &task, &session),
        (Method::POST, "/api/tasks/{}/abort".into(), &task, &session),
        (Method::GET, "/api/sessions/{}".into(), &session, &task),
        (Method::DELETE, "/api/sessions/{}".into(), &session, &task),
        (
            Method::POST,
            "/api/sessions/{}/screenshot".into(),
            &session,
            &task,
        ),
        (Method::GET, "/cdp/{}/json/version".into(), &session, &task),
    ];
    for (method, path, good, other) in routes {
        let call = |id: String| {
            let path = path.replace("{}", &id);
            let method = method.clone();
            let agent = &agent;
            let cdp = &cdp;
            async move {
                if path.starts_with("/cdp/") {
                    cdp(path).await
                } else {
                    let body = (method != Method::GET).then(|| json!({}));
                    agent.call(method, &path, body).await
                }
            }
        };
        let seq = last_seq(&app).await;
        let unknown = call(good.to_owned()).await;
        assert_eq!(unknown.0, StatusCode::NOT_FOUND, "{path}: {}", unknown.1);
        let (trail, _) = audited_since(&app, seq).await;
        for bad in malformed(good, other, false) {
            let seq = last_seq(&app).await;
            let answer = call(bad.clone()).await;
            assert_eq!(answer, unknown, "{method} {path} with {bad:?}");
            let (rows, _) = audited_since(&app, seq).await;
            no_more_trace(&rows, &trail, &format!("{path} with {bad:?}"));
        }
    }
    app.stop().await;
}

both_backends!(mcp_answers_a_malformed_session_id_as_an_unknown_one);

async fn mcp_answers_a_malformed_session_id_as_an_unknown_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let agent = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &agent).await;
    let good = SessionId::generate().to_string();
    let other = TaskId::generate().to_string();
    for tool in ["browser_close_session", "browser_snapshot"] {
        let seq = last_seq(&app).await;
        let unknown = mcp.err(tool, json!({ "session_id": good })).await;
        assert!(unknown.starts_with("not_found: "), "{tool}: {unknown}");
        let (trail, _) = audited_since(&app, seq).await;
        for bad in malformed(&good, &other, true) {
            let seq = last_seq(&app).await;
            let answer = mcp.err(tool, json!({ "session_id": bad })).await;
            assert_eq!(answer, unknown, "{tool} with {bad:?}");
            let (rows, _) = audited_since(&app, seq).await;
            no_more_trace(&rows, &trail, &format!("{tool} with {bad:?}"));
        }
    }
    app.stop().await;
}

both_backends!(the_dashboard_answers_a_malformed_id_as_an_unknown_one);

async fn the_dashboard_answers_a_malformed_id_as_an_unknown_one(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let agent = app.agent("acme").await;
    let (_, admin) = app.operator_session("ada", Role::Admin).await;
    // A pending request and an approved one's token, which no malformed id
    // may decide or revoke.
    let (status, pending) = agent
        .post(
            "/api/grants/requests",
            json!({ "domains": ["example.com"], "reason": "stays pending" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{pending}");
    let (status, approved) = agent
        .post(
            "/api/grants/requests",
            json!({ "domains": ["example.org"], "reason": "approved" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{approved}");
    let approved_id = approved["request_id"].as_str().unwrap().to_owned();
    let (status, jti) = app
        .server_fn(
            "approve_grant",
            &format!("id={approved_id}&expires_min=30&multi_use=false"),
            Some(&admin),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{jti}");
    let grants_before = app
        .state
        .store
        .grant_request_list(None, cordon::store::grants::RequestsWhich::All, 500)
        .await
        .unwrap();
    let tokens_before = app.state.store.grant_token_list(None, 100).await.unwrap();

    let task = TaskId::generate().to_string();
    let session = SessionId::generate().to_string();
    let request = GrantRequestId::generate().to_string();
    let token = GrantTokenId::generate().to_string();
    let totp = TotpId::generate().to_string();
    // (server function, its form with `{}` for the id, a well-formed
    // unknown id, another kind's id)
    let calls: [(&str, &str, &str, &str); 11] = [
        ("get_task", "id={}", &task, &session),
        ("get_session", "id={}", &session, &task),
        ("end_session", "id={}", &session, &task),
        ("live_ticket", "session={}", &session, &task),
        ("release_control", "session={}", &session, &task),
        ("session_totp", "session={}", &session, &task),
        ("type_totp", "session={}&label=admin", &session, &task),
        (
            "approve_grant",
            "id={}&expires_min=30&multi_use=false",
            &request,
            &token,
        ),
        ("deny_grant", "id={}", &request, &token),
        ("revoke_grant", "jti={}", &token, &request),
        ("delete_totp", "tenant=acme&id={}", &totp, &session),
    ];
    let form = |template: &str, id: &str| {
        let value: String = url::form_urlencoded::byte_serialize(id.as_bytes()).collect();
        template.replace("{}", &value)
    };
    for (name, template, good, other) in calls {
        let seq = last_seq(&app).await;
        let unknown = app
            .server_fn(name, &form(template, good), Some(&admin))
            .await;
        assert_eq!(unknown.0, StatusCode::NOT_FOUND, "{name}: {}", unknown.1);
        let (trail, _) = audited_since(&app, seq).await;
        for bad in malformed(good, other, true) {
            let seq = last_seq(&app).await;
            let answer = app
                .server_fn(name, &form(template, &bad), Some(&admin))
                .await;
            assert_eq!(
                kind(&answer),
                kind(&unknown),
                "{name} with {bad:?}: {}",
                answer.1
            );
            let (rows, _) = audited_since(&app, seq).await;
            no_more_trace(&rows, &trail, &format!("{name} with {bad:?}"));
        }
    }
    // Nothing was decided, revoked or deleted.
    assert_eq!(
        app.state
            .store
            .grant_request_list(None, cordon::store::grants::RequestsWhich::All, 500)
            .await
            .unwrap(),
        grants_before
    );
    assert_eq!(
        app.state.store.grant_token_list(None, 100).await.unwrap(),
        tokens_before
    );
    app.stop().await;
}
