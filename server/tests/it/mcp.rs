//! `/mcp`: the agent tools over MCP (Streamable HTTP), spoken here as plain
//! JSON-RPC over HTTP, and by the stock Python client (`mcp_client.py`).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, Backend, TestApp, both_backends, session_app};
use crate::site::{self, Canary};

/// An MCP client over Streamable HTTP, as the protocol has it: POST
/// JSON-RPC, answers as JSON or an SSE stream, the session in
/// `mcp-session-id` after `initialize`.
pub struct Mcp {
    http: reqwest::Client,
    url: String,
    key: String,
    session: Option<String>,
    next_id: u64,
}

impl Mcp {
    /// Initializes an MCP session with API key `key`.
    pub async fn connect(app: &TestApp, key: &str) -> Self {
        let mut mcp = Self {
            http: app.http.clone(),
            url: app.url("/mcp"),
            key: key.to_owned(),
            session: None,
            next_id: 1,
        };
        let res = mcp
            .post(&json!({
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": { "name": "cordon-test", "version": "0" }
                }
            }))
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        mcp.session = res
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let init = answer(res, 0).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "cordon", "{init}");
        let res = mcp
            .post(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        assert_eq!(res.status(), StatusCode::ACCEPTED);
        mcp
    }

    /// The agent's key of `agent`.
    pub async fn of(app: &TestApp, agent: &AgentClient) -> Self {
        Self::connect(app, &agent.key).await
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut req = self
            .http
            .post(&self.url)
            .bearer_auth(&self.key)
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        req.send().await.expect("request")
    }

    /// One request; its JSON-RPC answer (`result` or `error`).
    pub async fn rpc(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let res = self
            .post(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
            .await;
        assert_eq!(res.status(), StatusCode::OK);
        answer(res, id).await
    }

    /// Calls tool `name`; its `CallToolResult`.
    pub async fn call(&mut self, name: &str, args: Value) -> Value {
        let a = self
            .rpc("tools/call", json!({ "name": name, "arguments": args }))
            .await;
        a["result"].clone()
    }

    /// Calls tool `name` and expects a success; its structured content.
    pub async fn ok(&mut self, name: &str, args: Value) -> Value {
        let r = self.call(name, args).await;
        assert_ne!(r["isError"], json!(true), "{name}: {r}");
        r["structuredContent"].clone()
    }

    /// Calls tool `name` and expects a tool error; its text.
    pub async fn err(&mut self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r["isError"], json!(true), "{name}: {r}");
        text(&r).to_owned()
    }
}

/// The JSON-RPC message with `id` of an answer, JSON or SSE.
async fn answer(res: reqwest::Response, id: u64) -> Value {
    let body = res.text().await.unwrap();
    let messages: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(&body).unwrap()]
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    };
    messages
        .into_iter()
        .find(|m| m["id"] == json!(id))
        .unwrap_or_else(|| panic!("no answer to {id} in {body}"))
}

/// The first text content of a tool result.
fn text(result: &Value) -> &str {
    result["content"]
        .as_array()
        .and_then(|c| c.iter().find_map(|b| b["text"].as_str()))
        .unwrap_or_else(|| panic!("no text in {result}"))
}

#[tokio::test]
async fn the_mcp_endpoint_refuses_a_missing_or_wrong_key() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let init = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": { "name": "t", "version": "0" } } });
    for key in [None, Some("cak_not-a-key"), Some("something-else")] {
        let mut req = app
            .http
            .post(app.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{key:?}");
        assert_eq!(res.headers()["www-authenticate"], "Bearer");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
}

#[tokio::test]
async fn tools_list_shows_every_browser_tool_with_its_input_schema() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agent = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &agent).await;

    let list = mcp.rpc("tools/list", json!({})).await;

    let tools = list["result"]["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in [
        "browser_open_session",
        "browser_navigate",
        "browser_snapshot",
        "browser_screenshot",
        "browser_click",
        "browser_type",
        "browser_type_totp",
        "browser_press",
        "browser_scroll",
        "browser_hover",
        "browser_select",
        "browser_upload",
        "browser_wait_for",
        "browser_read_dom",
        "browser_tabs",
        "browser_back",
        "browser_forward",
        "browser_close_session",
        "browser_request_grant",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let navigate = tools
        .iter()
        .find(|t| t["name"] == "browser_navigate")
        .unwrap();
    let schema = &navigate["inputSchema"];
    assert_eq!(schema["required"], json!(["session_id", "url"]), "{schema}");
    assert_eq!(schema["properties"]["url"]["type"], "string", "{schema}");
    let open = tools
        .iter()
        .find(|t| t["name"] == "browser_open_session")
        .unwrap();
    assert!(
        open["inputSchema"]["properties"]["credential_mode"].is_object(),
        "{open}"
    );
    assert!(
        open["inputSchema"]["properties"]["downloads"].is_object(),
        "{open}"
    );
    let upload = tools
        .iter()
        .find(|t| t["name"] == "browser_upload")
        .unwrap();
    assert_eq!(
        upload["inputSchema"]["required"],
        json!(["session_id", "files"]),
        "{upload}"
    );
}

both_backends!(an_mcp_client_opens_navigates_snapshots_clicks_and_closes);

async fn an_mcp_client_opens_navigates_snapshots_clicks_and_closes(backend: Backend) {
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &agent).await;

    let opened = mcp.ok("browser_open_session", json!({})).await;
    let sid = opened["session_id"]
        .as_str()
        .expect("session id")
        .to_owned();
    // The answer carries the session's CDP URL, as the HTTP API's does.
    assert!(
        opened["cdp_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("ws") && u.ends_with(&format!("/cdp/{sid}"))),
        "{opened}"
    );
    let s = |extra: Value| {
        let mut args = json!({ "session_id": sid });
        args.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        args
    };
    let nav = mcp
        .ok("browser_navigate", s(json!({ "url": site.url("/form") })))
        .await;
    assert_eq!(
        (nav["status"].clone(), nav["title"].clone()),
        (json!(200), json!("Login"))
    );
    let snap = mcp.ok("browser_snapshot", s(json!({}))).await;
    let button = crate::helpers::find_ref(&snap["nodes"], "button", "Sign in")
        .expect("the button in the snapshot");
    let clicked = mcp.ok("browser_click", s(json!({ "ref": button }))).await;
    assert_eq!(clicked["success"], true);
    let waited = mcp
        .ok("browser_wait_for", s(json!({ "text": "hello" })))
        .await;
    assert!(waited["waited_ms"].is_u64(), "{waited}");
    let shot = mcp.call("browser_screenshot", s(json!({}))).await;
    assert_eq!(shot["content"][0]["type"], "image", "{shot}");
    assert_eq!(shot["content"][0]["mimeType"], "image/png");
    let tabs = mcp.ok("browser_tabs", s(json!({}))).await;
    assert_eq!(tabs["tabs"].as_array().map(Vec::len), Some(1), "{tabs}");

    // The session is an ordinary one: the HTTP API sees it, open.
    let (status, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(
        (status, info["state"].as_str()),
        (StatusCode::OK, Some("ready"))
    );
    let closed = mcp.ok("browser_close_session", s(json!({}))).await;
    assert_eq!(
        (closed["state"].as_str(), closed["close_reason"].as_str()),
        (Some("closed"), Some("client"))
    );
    let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(info["state"], "closed");

    // Audited like the HTTP API's calls, as the agent's key.
    let mut rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    rows.retain(|e| e.session.as_deref() == Some(sid.as_str()));
    let actions: Vec<&str> = rows.iter().map(|e| e.action.as_str()).collect();
    for want in [
        "session.open",
        "tool.navigate",
        "tool.snapshot",
        "tool.click",
        "tool.wait_for",
        "tool.screenshot",
        "tool.tabs.list",
        "session.close",
    ] {
        assert!(actions.contains(&want), "{want} not in {actions:?}");
    }
    let click = rows.iter().find(|e| e.action == "tool.click").unwrap();
    assert!(click.actor.starts_with("agent:"), "{}", click.actor);
    // The row names the surface, so an MCP client's click is told from a
    // CDP client's or an HTTP one's.
    let params: serde_json::Value = serde_json::from_str(&click.params).unwrap();
    assert_eq!(params["via"], "mcp", "{params}");
}

#[tokio::test]
async fn mcp_tool_errors_carry_the_http_apis_codes() {
    let site = site::start().await;
    let canary = Canary::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let acme = app.agent("acme").await;
    let other = app.agent("other").await;
    let mut mcp = Mcp::of(&app, &acme).await;
    let mut foreign = Mcp::of(&app, &other).await;
    let opened = mcp.ok("browser_open_session", json!({})).await;
    let sid = opened["session_id"].as_str().unwrap().to_owned();

    // Another tenant's session is as unknown as one that never was.
    let err = foreign
        .err("browser_snapshot", json!({ "session_id": sid }))
        .await;
    assert!(err.starts_with("not_found: "), "{err}");
    let err = foreign
        .err("browser_close_session", json!({ "session_id": sid }))
        .await;
    assert!(err.starts_with("not_found: "), "{err}");
    let err = mcp
        .err("browser_snapshot", json!({ "session_id": "ses_nope" }))
        .await;
    assert!(err.starts_with("not_found: "), "{err}");

    // A bad argument names its field.
    let err = mcp
        .err("browser_navigate", json!({ "session_id": sid, "url": 5 }))
        .await;
    assert!(
        err.starts_with("bad_request: ") && err.contains("url"),
        "{err}"
    );
    let err = mcp
        .err("browser_click", json!({ "session_id": sid, "bogus": 1 }))
        .await;
    assert!(
        err.starts_with("bad_request: ") && err.contains("bogus"),
        "{err}"
    );
    let err = mcp
        .err("browser_navigate", json!({ "url": "http://x.test/" }))
        .await;
    assert!(err.contains("session_id"), "{err}");
    let err = mcp
        .err(
            "browser_press",
            json!({ "session_id": sid, "key": "NotAKey" }),
        )
        .await;
    assert!(err.starts_with("unknown_key: "), "{err}");

    // A main frame the egress guard refused.
    let refused = mcp
        .call(
            "browser_navigate",
            json!({ "session_id": sid, "url": format!("http://127.0.0.1:{}/x", canary.addr.port()) }),
        )
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text(&refused).starts_with("egress_refused: "), "{refused}");
    assert_eq!(
        refused["structuredContent"]["egress_refused"]["reason"],
        "loopback"
    );
    assert_eq!(canary.hits(), 0);

    // An unknown tool is a protocol error, not a tool error.
    let unknown = mcp
        .rpc(
            "tools/call",
            json!({ "name": "browser_fly", "arguments": {} }),
        )
        .await;
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("browser_fly"),
        "{unknown}"
    );

    mcp.ok("browser_close_session", json!({ "session_id": sid }))
        .await;
    let err = mcp
        .err("browser_snapshot", json!({ "session_id": sid }))
        .await;
    assert!(err.starts_with("gone: "), "{err}");
}

#[tokio::test]
async fn an_mcp_client_uploads_a_file_the_page_reads_and_gets_the_http_apis_codes() {
    use base64::Engine;
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &agent).await;
    let opened = mcp.ok("browser_open_session", json!({})).await;
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    mcp.ok(
        "browser_navigate",
        json!({ "session_id": sid, "url": site.url("/upload") }),
    )
    .await;
    let file = json!([{
        "name": "mcp.txt",
        "content_base64": base64::engine::general_purpose::STANDARD.encode("over mcp"),
    }]);

    let uploaded = mcp
        .ok(
            "browser_upload",
            json!({ "session_id": sid, "selector": "#f", "files": file }),
        )
        .await;

    assert_eq!(uploaded["files"][0]["size"], 8, "{uploaded}");
    mcp.ok(
        "browser_wait_for",
        json!({ "session_id": sid, "text": "got mcp.txt:8:over mcp" }),
    )
    .await;
    let err = mcp
        .err(
            "browser_upload",
            json!({ "session_id": sid, "selector": "#t", "files": file }),
        )
        .await;
    assert!(err.starts_with("not_a_file_input: "), "{err}");
    let err = mcp
        .err(
            "browser_upload",
            json!({ "session_id": sid, "selector": "#f",
                    "files": [{ "name": "../x", "content_base64": "" }] }),
        )
        .await;
    assert!(err.starts_with("invalid_file_name: "), "{err}");
    app.stop().await;
}

#[tokio::test]
async fn a_grant_is_requested_and_polled_over_mcp() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agent = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &agent).await;

    let asked = mcp
        .ok(
            "browser_request_grant",
            json!({ "domains": ["app.example.com"], "reason": "read the invoices" }),
        )
        .await;
    let id = asked["request_id"].as_str().expect("request id").to_owned();
    assert_eq!(asked["state"], "pending");
    let polled = mcp
        .ok("browser_grant_status", json!({ "request_id": id }))
        .await;
    assert_eq!(polled["state"], "pending");
    let err = mcp
        .err(
            "browser_request_grant",
            json!({ "domains": [], "reason": "x" }),
        )
        .await;
    assert!(err.starts_with("bad_request: "), "{err}");
    let err = mcp
        .err("browser_grant_status", json!({ "request_id": "gr_nope" }))
        .await;
    assert!(err.starts_with("not_found: "), "{err}");
}

/// The stock Python MCP client (PyPI `mcp`), no Cordon code in it.
#[tokio::test]
async fn the_official_python_client_drives_a_session() {
    let python = std::env::var("CORDON_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_mcp = std::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_mcp,
        "the Python package `mcp` is missing: run infra/scripts/setup.sh (or pip install mcp==2.3.0)"
    );
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");

    let out = tokio::process::Command::new(&python)
        .arg(script)
        .arg(app.url("/mcp"))
        .arg(&agent.key)
        .arg(site.url("/form"))
        .output()
        .await
        .expect("python runs");

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert!(report["tools"].as_array().unwrap().len() >= 17, "{report}");
    assert_eq!(report["title"], "Login", "{report}");
    assert_eq!(report["clicked"], true, "{report}");
    assert_eq!(report["closed"], "closed", "{report}");
    let sid = report["session_id"].as_str().unwrap();
    let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(info["close_reason"], "client");
}

#[tokio::test]
async fn an_open_mcp_event_stream_does_not_hold_the_shutdown() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let agent = app.agent("acme").await;
    let mcp = Mcp::of(&app, &agent).await;
    // The stream a client keeps open for the server's own messages.
    let stream = app
        .http
        .get(app.url("/mcp"))
        .bearer_auth(&agent.key)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", mcp.session.clone().expect("a session id"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);

    let stopped = tokio::time::timeout(std::time::Duration::from_secs(20), app.stop()).await;

    assert!(
        stopped.is_ok(),
        "the server did not stop with an MCP stream open"
    );
    drop(stream);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_is_served_by_its_replica_whichever_replica_a_request_reaches() {
    let site = site::start().await;
    let allow = site.allow();
    let (app, b) = crate::replicas::pair(&allow, &[]).await;
    let agent = app.agent("acme").await;
    // `initialize` on `a`: the session's id names it.
    let mut mcp = Mcp::of(&app, &agent).await;
    let session = mcp.session.clone().expect("an MCP session id");
    assert!(session.starts_with("a~"), "{session}");
    // Every later request goes to `b`, which sends it on to `a`.
    mcp.url = b.url("/mcp");
    let opened = mcp.ok("browser_open_session", json!({})).await;
    let sid = opened["session_id"]
        .as_str()
        .expect("session id")
        .to_owned();
    let nav = mcp
        .ok(
            "browser_navigate",
            json!({ "session_id": sid, "url": site.url("/pad") }),
        )
        .await;
    assert_eq!(nav["title"], "ready", "{nav}\n{}", b.warnings());
    // The browser session runs on `a`, where the MCP session is.
    let row = app.session_row(&sid).await;
    assert_eq!(row.host, "a");
    mcp.ok("browser_close_session", json!({ "session_id": sid }))
        .await;

    // An id naming a replica that does not exist is an unknown MCP session.
    mcp.session = Some("ghost~0000".into());
    let res = mcp
        .post(&json!({ "jsonrpc": "2.0", "id": 99, "method": "tools/list" }))
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    // A request without the key is refused before anything is forwarded.
    let res = app
        .http
        .post(b.url("/mcp"))
        .header("mcp-session-id", &session)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn an_mcp_session_answers_only_the_key_that_opened_it_and_is_unknown_to_any_other() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let acme = app.agent("acme").await;
    let mut mcp = Mcp::of(&app, &acme).await;
    let session = mcp.session.clone().expect("an MCP session id");
    // Another tenant's key, and another key of the same tenant.
    let globex = app.agent("globex").await;
    let acme_other = app.agent("acme").await;
    let list = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/list" });
    for (who, key) in [
        ("globex", &globex.key),
        ("acme's other key", &acme_other.key),
    ] {
        let post = app
            .http
            .post(app.url("/mcp"))
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .json(&list);
        let stream = app
            .http
            .get(app.url("/mcp"))
            .bearer_auth(key)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session);
        let delete = app
            .http
            .delete(app.url("/mcp"))
            .bearer_auth(key)
            .header("mcp-session-id", &session);
        for (method, req) in [("POST", post), ("GET", stream), ("DELETE", delete)] {
            let res = req.send().await.unwrap();
            let status = res.status();
            let body = res.text().await.unwrap();
            let start: String = body.chars().take(300).collect();
            assert_eq!(
                status,
                StatusCode::NOT_FOUND,
                "{method} by {who}: {status} {start}"
            );
            assert!(!body.contains("browser_"), "{method} by {who}: {start}");
        }
    }

    // The owner's session is still there and works, even after a method
    // rmcp does not know (which it may answer with an HTTP 404).
    let res = mcp
        .post(&json!({ "jsonrpc": "2.0", "id": 8, "method": "no/such_method" }))
        .await;
    let status = res.status();
    assert!(
        status == StatusCode::OK || status == StatusCode::NOT_FOUND,
        "{status}"
    );
    let tools = mcp.rpc("tools/list", json!({})).await;
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{tools}"
    );
    // Its owner ends it; then it is unknown to its owner too.
    let res = app
        .http
        .delete(app.url("/mcp"))
        .bearer_auth(&acme.key)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED, "{:?}", res.text().await);
    let res = mcp.post(&list).await;
    assert_eq!(
        res.status(),
        StatusCode::NOT_FOUND,
        "{:?}",
        res.text().await
    );
    app.stop().await;
}
