//! Operator grants end to end: request → approve → collect the token once
//! → an operator-mode session lands logged in on the loopback test site
//! with cookies from the vault. Every refused token gives its own code and
//! no session; one single-use token opens exactly one session however many
//! race for it. Cookie values and tokens are compared, never printed.

mod cli;
mod injection;
mod tokens;

use cordon::audit::Actor;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, TestApp};

/// A CDP cookie array with one httpOnly `session` cookie of `host`.
pub(super) fn session_cookie(host: &str, value: &str) -> Vec<u8> {
    serde_json::to_vec(&json!([
        {"name": "session", "value": value, "domain": host, "path": "/",
         "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"}
    ]))
    .unwrap()
}

pub(super) fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

pub(super) fn secret() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// Asks for `domains`, approves, collects the token: (request id, token, jti).
pub(super) async fn granted(
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

pub(super) async fn open_operator(
    agent: &AgentClient,
    domains: &[&str],
    token: &str,
) -> (StatusCode, Value) {
    agent
        .post(
            "/api/sessions",
            json!({ "credential_mode": "operator", "domains": domains, "grant_token": token }),
        )
        .await
}

pub(super) async fn read_dom(agent: &AgentClient, sid: &str) -> String {
    let (status, dom) = agent.tool(sid, "read_dom", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    dom.to_string()
}
