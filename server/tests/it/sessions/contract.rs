//! Every operation of the agent API's OpenAPI document, called with a
//! valid body, an invalid one, on an ended session and without a key:
//! each answer's status (and, for an error, its code) must be one its
//! route documents. `AgentClient::call` checks every answer it gets, in
//! every integration test; here every route gets the four kinds of call.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{Backend, documented, session_app};
use crate::site;

/// A body the route's schema accepts (what the page does with it may
/// still be refused: 422, 504 and the like are documented too).
fn valid_body(path: &str, page: &str) -> Value {
    let tool = path.rsplit('/').next().unwrap_or_default();
    match tool {
        "navigate" => json!({ "url": page }),
        "click" | "hover" => json!({ "selector": "body", "timeout_ms": 500 }),
        "type" => json!({ "text": "x" }),
        "type_totp" => json!({ "selector": "body" }),
        "press" => json!({ "key": "Enter" }),
        "scroll" => json!({ "dy": 10 }),
        "select" => json!({ "selector": "body", "values": ["a"], "timeout_ms": 500 }),
        "wait_for" => json!({ "text": "never on this page", "timeout_ms": 200 }),
        "upload" => {
            json!({ "selector": "body", "files": [{ "name": "a.txt", "content_base64": "YQ==" }] })
        }
        "requests" => json!({ "domains": ["127.0.0.1"], "reason": "contract test" }),
        "tasks" => json!({ "instruction": "look", "start_url": page }),
        _ => json!({}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_only_statuses_and_codes_it_documents() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let page = site.url("/form");
    let live = agent.open(json!({})).await;
    agent.navigate_ok(&live, &page).await;
    let ended = agent.open(json!({})).await;
    assert_eq!(agent.close(&ended).await.0, StatusCode::OK);

    let doc = cordon::api::openapi_document();
    let mut ops: Vec<(Method, String, bool)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let m: Method = method.to_uppercase().parse().unwrap();
            ops.push((m, path.clone(), op["requestBody"].is_object()));
        }
    }
    // Closing comes last, so the other routes meet a live session.
    ops.sort_by_key(|(m, p, _)| (*m == Method::DELETE && p == "/api/sessions/{id}", p.clone()));
    assert!(ops.len() >= 30, "{ops:?}");

    for (method, template, has_body) in &ops {
        for sid in [&live, &ended] {
            let path = template
                .replace("{id}", sid)
                .replace("{tab}", "ABC123")
                .replace("{link}", "ll_nosuchlink")
                .replace("{name}", "nothing.txt");
            let path = if *method == Method::GET && !template.contains('{') {
                // The lists take ?limit: one in range, one not.
                agent
                    .call(method.clone(), &format!("{path}?limit=0"), None)
                    .await;
                format!("{path}?limit=5")
            } else {
                path
            };
            // Valid, then invalid (an unknown field, a wrong type).
            let body = has_body.then(|| valid_body(template, &page));
            agent.call(method.clone(), &path, body).await;
            if *has_body {
                agent
                    .call(method.clone(), &path, Some(json!({ "no_such_field": 1 })))
                    .await;
                agent.call(method.clone(), &path, Some(json!([1, 2]))).await;
            }
            // Without a key.
            let res = app
                .http
                .request(method.clone(), format!("{}{path}", agent.base))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            let status = res.status();
            let text = res.text().await.unwrap();
            let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}: {value}");
            documented(method, &path, status, &value);
        }
    }
    app.stop().await;
}
