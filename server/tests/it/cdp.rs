//! The CDP endpoint (`/cdp/{id}`) against a real Chromium: a raw CDP
//! client (tokio-tungstenite) drives a session through Cordon; refused
//! methods answer CDP errors naming their rule; an operator-mode session
//! keeps the vault sealed (cookie reads refused, cookie headers redacted
//! from events); the risk gate holds a CDP press on a destructive button;
//! an operator's control refuses CDP input; hostile frames are answered
//! with CDP errors or close codes while the tool API keeps working; keys
//! and tokens of others get nothing. The real clients (Playwright,
//! Puppeteer) are in end2end/tests/cdp.test.js.

use std::time::Duration;

use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::helpers::{AgentClient, Backend, PATIENCE, TestApp, session_app, wait_until};
use crate::site;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A raw CDP client through Cordon.
pub(crate) struct Cdp {
    ws: Ws,
    next: u64,
    /// Every event seen so far, as text.
    events: Vec<String>,
}

fn ws_url(app: &TestApp, path: &str) -> String {
    app.url(path).replacen("http", "ws", 1)
}

/// Connects with `key` as Bearer (or none), answering the HTTP status of
/// a refused upgrade.
pub(crate) async fn connect(
    app: &TestApp,
    path: &str,
    key: Option<&str>,
) -> Result<Cdp, StatusCode> {
    let mut req = ws_url(app, path).into_client_request().unwrap();
    if let Some(key) = key {
        req.headers_mut()
            .insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, _)) => Ok(Cdp {
            ws,
            next: 1,
            events: Vec::new(),
        }),
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            Err(StatusCode::from_u16(res.status().as_u16()).unwrap())
        }
        Err(e) => panic!("connect {path}: {e}"),
    }
}

impl Cdp {
    /// Sends a raw text frame.
    async fn send_raw(&mut self, text: String) {
        self.ws.send(Message::text(text)).await.unwrap();
    }

    /// The next message that is not an event (a response or an error
    /// without id), keeping events.
    async fn answer(&mut self) -> Value {
        tokio::time::timeout(PATIENCE, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Text(t))) => {
                        let v: Value = serde_json::from_str(t.as_str()).unwrap();
                        if v.get("method").is_some() {
                            self.events.push(t.as_str().to_owned());
                        } else {
                            return v;
                        }
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the connection ended while waiting: {other:?}"),
                }
            }
        })
        .await
        .expect("an answer within the patience")
    }

    /// Sends one command and waits for its answer (`result` or `error`).
    async fn call(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let id = self.next;
        self.next += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.send_raw(msg.to_string()).await;
        self.answer_to(id).await
    }

    /// The answer to command `id` (earlier answers to others are skipped).
    async fn answer_to(&mut self, id: u64) -> Value {
        loop {
            let v = self.answer().await;
            if v["id"] == id {
                return v;
            }
        }
    }

    /// The result of a command that must succeed.
    pub(crate) async fn ok(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let v = self.call(method, params, session).await;
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// The message of a command that must fail.
    async fn err(&mut self, method: &str, params: Value, session: Option<&str>) -> String {
        let v = self.call(method, params, session).await;
        v["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} should fail: {v}"))
            .to_owned()
    }

    /// Attaches to the first tab (flattened) and answers its CDP session.
    async fn attach_first_tab(&mut self) -> String {
        let targets = self.ok("Target.getTargets", json!({}), None).await;
        let tab = targets["targetInfos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .unwrap_or_else(|| panic!("no tab: {targets}"))["targetId"]
            .as_str()
            .unwrap()
            .to_owned();
        let attached = self
            .ok(
                "Target.attachToTarget",
                json!({ "targetId": tab, "flatten": true }),
                None,
            )
            .await;
        attached["sessionId"].as_str().unwrap().to_owned()
    }

    /// Evaluates `expr` in the tab and answers its value.
    async fn eval(&mut self, session: &str, expr: &str) -> Value {
        let r = self
            .ok(
                "Runtime.evaluate",
                json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
                Some(session),
            )
            .await;
        r["result"]["value"].clone()
    }

    /// Evaluates `expr` until `done` says yes (the test fails after the
    /// patience, naming the last value).
    async fn until(&mut self, session: &str, expr: &str, done: impl Fn(&Value) -> bool) {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let v = self.eval(session, expr).await;
            if done(&v) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited for {expr}; last: {v}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for an event `method` (one seen already counts) and answers it.
    async fn event(&mut self, method: &str) -> Value {
        let seen = |t: &str| {
            let v: Value = serde_json::from_str(t).unwrap();
            (v["method"] == method).then_some(v)
        };
        if let Some(v) = self.events.iter().find_map(|t| seen(t)) {
            return v;
        }
        tokio::time::timeout(PATIENCE, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Text(t))) => {
                        self.events.push(t.as_str().to_owned());
                        if let Some(v) = seen(t.as_str()) {
                            return v;
                        }
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the connection ended while waiting for {method}: {other:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {method} within the patience"))
    }

    /// Waits for the close frame and answers its code.
    async fn closed_with(&mut self) -> u16 {
        tokio::time::timeout(PATIENCE, async {
            loop {
                match self.ws.next().await {
                    Some(Ok(Message::Close(Some(f)))) => return u16::from(f.code),
                    Some(Ok(Message::Close(None))) | None => return 1005,
                    Some(Err(e)) => panic!("the connection failed instead of closing: {e}"),
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
        .expect("a close within the patience")
    }
}

async fn app(site: &site::Site) -> TestApp {
    session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_APPROVAL_TIMEOUT_S", "30")],
    )
    .await
}

/// The app, acme's agent, a session of it, and a CDP client on it.
async fn driven(site: &site::Site) -> (TestApp, AgentClient, String, Cdp) {
    let app = app(site).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let cdp = connect(&app, &format!("/cdp/{sid}"), Some(&agent.key))
        .await
        .unwrap();
    (app, agent, sid, cdp)
}

async fn rows(app: &TestApp, sid: &str) -> Vec<cordon::audit::Event> {
    let all = app.state.store.audit_page(0, 10_000).await.unwrap();
    all.into_iter()
        .filter(|e| e.session.as_deref() == Some(sid))
        .collect()
}

async fn title(cdp: &mut Cdp, tab: &str) -> String {
    cdp.eval(tab, "document.title")
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdp_client_drives_a_session_through_cordon_and_is_audited_as_the_agent() {
    let site = site::start().await;
    let app = app(&site).await;
    let agent = app.agent("acme").await;
    let (status, opened) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    let cdp_url = opened["cdp_url"].as_str().expect("cdp_url on open");
    assert_eq!(cdp_url, ws_url(&app, &format!("/cdp/{sid}")));
    let (_, shown) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(shown["cdp_url"], cdp_url);

    // Discovery, as Chromium answers it, pointing at Cordon.
    let version: Value = app
        .http
        .get(app.url(&format!("/cdp/{sid}/json/version")))
        .bearer_auth(&agent.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(version["webSocketDebuggerUrl"], cdp_url, "{version}");
    assert!(
        version["Browser"].as_str().unwrap_or("").contains("Chrome"),
        "{version}"
    );
    let list = app
        .http
        .get(app.url(&format!("/cdp/{sid}/json/list")))
        .bearer_auth(&agent.key)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), StatusCode::OK);
    let list: Value = list.json().await.unwrap();
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");

    let mut cdp = connect(&app, &format!("/cdp/{sid}"), Some(&agent.key))
        .await
        .unwrap();
    let tab = cdp.attach_first_tab().await;
    assert_eq!(cdp.eval(&tab, "1+1").await, json!(2));
    cdp.ok("Page.enable", json!({}), Some(&tab)).await;
    let url = site.url("/danger?token=NAVSECRET");
    cdp.ok("Page.navigate", json!({ "url": url }), Some(&tab))
        .await;
    cdp.until(&tab, "document.title", |v| v == "Danger").await;
    // The tool API sees what the CDP client did (its row says http).
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs[0]["title"], "Danger", "{tabs}");
    let listed = rows(&app, &sid).await;
    let list_row = listed
        .iter()
        .find(|e| e.action == "tool.tabs.list")
        .expect("the tool call is audited");
    assert!(
        list_row.params.contains(r#""via":"http""#),
        "{}",
        list_row.params
    );

    // A second connection of the same session works alongside.
    let mut second = connect(&app, &format!("/cdp/{sid}"), Some(&agent.key))
        .await
        .unwrap();
    let tab2 = second.attach_first_tab().await;
    assert_eq!(second.eval(&tab2, "document.title").await, "Danger");
    drop(second);

    drop(cdp);
    let audit = wait_until("the disconnect row", PATIENCE, || async {
        let rows = rows(&app, &sid).await;
        if rows.iter().any(|e| e.action == "cdp.disconnected") {
            Ok(rows)
        } else {
            Err(format!(
                "{:?}",
                rows.iter().map(|e| &e.action).collect::<Vec<_>>()
            ))
        }
    })
    .await;
    let nav = audit
        .iter()
        .find(|e| e.action == "cdp.Page.navigate")
        .expect("the navigation is audited");
    let params: Value = serde_json::from_str(&nav.params).unwrap();
    assert_eq!(params["via"], "cdp");
    assert_eq!(params["host"], "127.0.0.1");
    assert!(nav.actor.starts_with("agent:"), "{}", nav.actor);
    let text = format!("{audit:?}");
    assert!(!text.contains("NAVSECRET"), "no URL in the audit");
    let script = audit
        .iter()
        .find(|e| e.action == "cdp.Runtime.evaluate")
        .expect("script evaluation is audited");
    assert!(script.params.contains("script_sha256"), "{}", script.params);
    assert!(
        !script.params.contains("document.title"),
        "{}",
        script.params
    );
    // Each distinct script once per connection, however often it ran.
    let per_conn = audit
        .iter()
        .filter(|e| e.action == "cdp.Runtime.evaluate")
        .count();
    assert!(per_conn <= 4, "{per_conn} evaluate rows");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_would_break_the_sandbox_is_refused_with_a_cdp_error_naming_the_rule() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let tab = cdp.attach_first_tab().await;
    for (method, params, session, rule) in [
        ("SystemInfo.getProcessInfo", json!({}), None, "host_probe"),
        (
            "Tethering.bind",
            json!({ "port": 2222 }),
            None,
            "host_probe",
        ),
        (
            "Target.sendMessageToTarget",
            json!({ "message": "{\"id\":1,\"method\":\"Network.getAllCookies\"}" }),
            None,
            "flatten_only",
        ),
        (
            "Security.setIgnoreCertificateErrors",
            json!({ "ignore": true }),
            None,
            "certificate_errors",
        ),
        (
            "Page.navigate",
            json!({ "url": "file:///etc/passwd" }),
            Some(tab.as_str()),
            "url_scheme",
        ),
        (
            "DOM.setFileInputFiles",
            json!({ "files": ["/etc/passwd"], "nodeId": 1 }),
            Some(tab.as_str()),
            "file_paths",
        ),
        (
            "Input.dispatchDragEvent",
            json!({ "type": "drop", "x": 10, "y": 10,
                    "data": { "items": [], "files": ["/etc/hostname"], "dragOperationsMask": 1 } }),
            Some(tab.as_str()),
            "file_paths",
        ),
        (
            "Input.dispatchKeyEvent",
            json!({ "type": "rawKeyDown", "key": "d", "modifiers": 1, "unmodifiedText": "d" }),
            Some(tab.as_str()),
            "access_key",
        ),
        (
            "Input.dispatchTouchEvent",
            json!({ "type": "touchStart",
                    "touchPoints": [{ "x": 10, "y": 10 }, { "x": 200, "y": 100 }] }),
            Some(tab.as_str()),
            "multi_touch",
        ),
        (
            "Target.createBrowserContext",
            json!({ "proxyServer": "http://127.0.0.1:1" }),
            None,
            "egress",
        ),
        ("Browser.crash", json!({}), None, "browser_control"),
    ] {
        let message = cdp.err(method, params, session).await;
        assert!(
            message.contains(rule) && message.starts_with("Cordon refused"),
            "{method}: {message}"
        );
    }
    // Nothing happened: the tab is where it was, the browser alive.
    assert_eq!(cdp.eval(&tab, "location.href").await, "about:blank");
    // Downloads are the session's: a client's "allow" is rewritten to deny.
    cdp.ok(
        "Browser.setDownloadBehavior",
        json!({ "behavior": "allow", "downloadPath": "/tmp" }),
        None,
    )
    .await;
    let (status, _) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/download?name=report.bin") }),
        )
        .await;
    assert_ne!(status, StatusCode::OK, "the download is still refused");
    let refused = rows(&app, &sid).await;
    assert!(
        refused
            .iter()
            .any(|e| e.action == "cdp.SystemInfo.getProcessInfo"
                && e.outcome == "refused: host_probe"),
        "refusals are audited"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_get_errors_or_close_codes_and_the_session_keeps_working() {
    let site = site::start().await;
    let app = app(&site).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let path = format!("/cdp/{sid}");

    let mut cdp = connect(&app, &path, Some(&agent.key)).await.unwrap();
    cdp.send_raw("{not json".into()).await;
    let v = cdp.answer().await;
    assert_eq!(v["error"]["code"], -32700, "{v}");
    cdp.send_raw(json!({ "method": "Browser.getVersion" }).to_string())
        .await;
    let v = cdp.answer().await;
    assert_eq!(v["error"]["code"], -32600, "{v}");
    cdp.send_raw(json!({ "id": "x", "method": "Browser.getVersion" }).to_string())
        .await;
    let v = cdp.answer().await;
    assert_eq!(v["error"]["code"], -32600, "{v}");
    // Still usable.
    cdp.ok("Browser.getVersion", json!({}), None).await;
    // A binary frame is not CDP.
    cdp.ws
        .send(Message::binary(b"\x00\x01".to_vec()))
        .await
        .unwrap();
    assert_eq!(cdp.closed_with().await, u16::from(CloseCode::Unsupported));

    // A message over 16 MiB.
    let mut cdp = connect(&app, &path, Some(&agent.key)).await.unwrap();
    let big = format!(
        "{{\"id\":1,\"method\":\"Runtime.evaluate\",\"params\":{{\"expression\":\"{}\"}}}}",
        "a".repeat(17 << 20)
    );
    let _ = cdp.ws.send(Message::text(big)).await;
    assert_eq!(cdp.closed_with().await, u16::from(CloseCode::Size));

    // A burst of 5,000 commands, never read: cut, not queued.
    let mut cdp = connect(&app, &path, Some(&agent.key)).await.unwrap();
    for i in 0..5_000u64 {
        let msg = json!({ "id": i + 1, "method": "Browser.getVersion" }).to_string();
        if cdp.ws.send(Message::text(msg)).await.is_err() {
            break;
        }
    }
    assert_eq!(cdp.closed_with().await, u16::from(CloseCode::Policy));

    // The tool API kept working throughout.
    let (status, _) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK);

    // A command for a tab of another session: that browser has no such
    // CDP session (Chromium's error), and input for it has no tab here.
    let other = agent.open(json!({})).await;
    let mut theirs = connect(&app, &format!("/cdp/{other}"), Some(&agent.key))
        .await
        .unwrap();
    let foreign = theirs.attach_first_tab().await;
    let mut cdp = connect(&app, &path, Some(&agent.key)).await.unwrap();
    let v = cdp
        .call(
            "Runtime.evaluate",
            json!({ "expression": "1" }),
            Some(&foreign),
        )
        .await;
    assert!(v["error"].is_object(), "{v}");
    let message = cdp
        .err(
            "Input.dispatchMouseEvent",
            json!({ "type": "mousePressed", "x": 5, "y": 5, "button": "left", "clickCount": 1 }),
            Some(&foreign),
        )
        .await;
    assert!(message.contains("no_tab"), "{message}");
    drop((theirs, cdp));

    // A client that asks for screenshots and never reads them: cut off,
    // while the tool API keeps answering.
    let disconnects = |rows: &[cordon::audit::Event]| {
        rows.iter()
            .filter(|e| e.action == "cdp.disconnected")
            .count()
    };
    let mut lazy = connect(&app, &path, Some(&agent.key)).await.unwrap();
    let tab = lazy.attach_first_tab().await;
    lazy.eval(
        &tab,
        "document.body.style.height = '8000px'; document.body.style.background = 'linear-gradient(red, blue)'; 1",
    )
    .await;
    let before = disconnects(&rows(&app, &sid).await);
    for i in 0..200u64 {
        let shot = json!({ "id": 10_000 + i, "sessionId": tab, "method": "Page.captureScreenshot",
            "params": { "format": "png", "captureBeyondViewport": true,
                        "clip": { "x": 0, "y": 0, "width": 1280, "height": 8000, "scale": 1 } } });
        lazy.ws.send(Message::text(shot.to_string())).await.unwrap();
    }
    let (status, _) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "the tool API answers meanwhile");
    wait_until("the unread connection to be cut", PATIENCE, || async {
        let n = disconnects(&rows(&app, &sid).await);
        if n > before {
            Ok(())
        } else {
            Err(format!("{n} disconnects"))
        }
    })
    .await;
    drop(lazy);

    // At most four connections at once.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            wait_until("a connection slot", PATIENCE, || async {
                connect(&app, &path, Some(&agent.key))
                    .await
                    .map_err(|s| s.to_string())
            })
            .await,
        );
    }
    assert_eq!(
        connect(&app, &path, Some(&agent.key)).await.err(),
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
    drop(held);
    wait_until("a slot again", PATIENCE, || async {
        connect(&app, &path, Some(&agent.key))
            .await
            .map(|_| ())
            .map_err(|s| s.to_string())
    })
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_keys_and_used_or_foreign_tokens_get_nothing() {
    let site = site::start().await;
    let app = app(&site).await;
    let acme = app.agent("acme").await;
    let globex = app.agent("globex").await;
    let sid = acme.open(json!({})).await;
    let other = acme.open(json!({})).await;
    let path = format!("/cdp/{sid}");

    assert_eq!(
        connect(&app, &path, None).await.err(),
        Some(StatusCode::UNAUTHORIZED)
    );
    assert_eq!(
        connect(&app, &path, Some(&globex.key)).await.err(),
        Some(StatusCode::NOT_FOUND),
        "another tenant's key"
    );
    let discovery = app
        .http
        .get(app.url(&format!("{path}/json/version")))
        .bearer_auth(&globex.key)
        .send()
        .await
        .unwrap();
    assert_eq!(discovery.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        connect(&app, "/cdp/s_doesnotexist", Some(&acme.key))
            .await
            .err(),
        Some(StatusCode::NOT_FOUND)
    );

    // A connect token: once, for its session.
    let (status, tok) = acme
        .post(&format!("/api/sessions/{sid}/cdp_token"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{tok}");
    let url = tok["cdp_url"].as_str().unwrap();
    let query = url.split_once('?').unwrap().1;
    let mut cdp = connect(&app, &format!("{path}?{query}"), None)
        .await
        .expect("the token connects once");
    cdp.ok("Browser.getVersion", json!({}), None).await;
    assert_eq!(
        connect(&app, &format!("{path}?{query}"), None).await.err(),
        Some(StatusCode::UNAUTHORIZED),
        "used up"
    );
    let (_, tok) = acme
        .post(&format!("/api/sessions/{sid}/cdp_token"), json!({}))
        .await;
    let query = tok["cdp_url"]
        .as_str()
        .unwrap()
        .split_once('?')
        .unwrap()
        .1
        .to_owned();
    assert_eq!(
        connect(&app, &format!("/cdp/{other}?{query}"), None)
            .await
            .err(),
        Some(StatusCode::UNAUTHORIZED),
        "another session"
    );
    let (status, _) = globex
        .post(&format!("/api/sessions/{sid}/cdp_token"), json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // A closed session's endpoint is gone.
    drop(cdp);
    acme.close(&sid).await;
    assert_eq!(
        connect(&app, &path, Some(&acme.key)).await.err(),
        Some(StatusCode::GONE)
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_mode_session_keeps_the_vault_sealed_over_cdp() {
    use crate::grants::{granted, open_operator, secret, session_cookie};
    use cordon::audit::Actor;
    use cordon::vault::ImportOptions;

    let site = site::start().await;
    let app = app(&site).await;
    let acme = app.agent("acme").await;
    let value = secret();
    site.accept(&value, "acme-user");
    app.state
        .vault
        .import(
            &Actor::Cli,
            &crate::helpers::tenant("acme"),
            &crate::helpers::domain("127.0.0.1"),
            &session_cookie("127.0.0.1", &value),
            ImportOptions::default(),
        )
        .await
        .unwrap();
    // A grant that did not ask for CDP: the endpoint refuses the session.
    let (_, token, _) = granted(&app, &acme, &["127.0.0.1"], true).await;
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let plain = opened["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        connect(&app, &format!("/cdp/{plain}"), Some(&acme.key))
            .await
            .err(),
        Some(StatusCode::FORBIDDEN),
        "cdp_not_granted"
    );
    // Its discovery routes too: a tab's address and title are its pages'.
    for route in ["json/list", "json/version", "json/protocol"] {
        let (status, v) = acme.get(&format!("/cdp/{plain}/{route}")).await;
        crate::helpers::assert_error(&(status, v), StatusCode::FORBIDDEN, "cdp_not_granted");
    }

    // One that asked (`cdp: true`), approved.
    let (status, req) = acme
        .post(
            "/api/grants/requests",
            json!({ "domains": ["127.0.0.1"], "reason": "drive it with Playwright", "cdp": true }),
        )
        .await;
    assert_eq!(
        (status, &req["cdp"]),
        (StatusCode::CREATED, &json!(true)),
        "{req}"
    );
    let rid = req["request_id"].as_str().unwrap();
    cordon::grants::approve(
        &app.state.store,
        &Actor::Cli,
        &rid.parse().unwrap(),
        15,
        true,
    )
    .await
    .unwrap();
    let (_, polled) = acme.get(&format!("/api/grants/requests/{rid}")).await;
    let token = polled["grant_token"].as_str().unwrap().to_owned();
    let (status, opened) = open_operator(&acme, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_owned();

    let mut cdp = connect(&app, &format!("/cdp/{sid}"), Some(&acme.key))
        .await
        .unwrap();
    let tab = cdp.attach_first_tab().await;
    for (method, session) in [
        ("Network.getAllCookies", None),
        ("Storage.getCookies", None),
        ("Network.getCookies", Some(tab.as_str())),
    ] {
        let message = cdp.err(method, json!({}), session).await;
        assert!(message.contains("vault_sealed"), "{method}: {message}");
    }
    // The page loads logged in, and the client's network events never
    // carry the cookie.
    cdp.ok("Network.enable", json!({}), Some(&tab)).await;
    cdp.ok(
        "Page.navigate",
        json!({ "url": site.url("/account") }),
        Some(&tab),
    )
    .await;
    cdp.until(&tab, "document.body ? document.body.innerText : ''", |v| {
        v.as_str()
            .is_some_and(|b| b.contains("logged in as acme-user"))
    })
    .await;
    // Let the extra-info events arrive.
    let _ = cdp.eval(&tab, "1").await;
    assert!(
        cdp.events
            .iter()
            .any(|e| e.contains("Network.requestWillBeSentExtraInfo")),
        "the client saw the request's extra info ({} events)",
        cdp.events.len()
    );
    let leaked = cdp.events.iter().filter(|e| e.contains(&value)).count();
    assert_eq!(leaked, 0, "no event carries the injected cookie's value");
    assert!(
        cdp.events
            .iter()
            .any(|e| e.contains(cordon::sessions::cdp::REDACTED)),
        "the cookie header is there, redacted"
    );
    app.stop().await;
}

/// The centre of `selector` in the tab, CSS pixels.
async fn centre(cdp: &mut Cdp, tab: &str, selector: &str) -> (f64, f64) {
    let v = cdp
        .eval(
            tab,
            &format!(
                "(() => {{ const r = document.querySelector({selector:?}).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"
            ),
        )
        .await;
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_risk_gate_holds_a_cdp_press_and_keys_and_control_refuses_cdp_input() {
    let site = site::start().await;
    let app = app(&site).await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    let agent: AgentClient = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url("/danger")).await;
    let mut cdp = connect(&app, &format!("/cdp/{sid}"), Some(&agent.key))
        .await
        .unwrap();
    let tab = cdp.attach_first_tab().await;

    // A harmless press passes at once.
    let (x, y) = centre(&mut cdp, &tab, "#next").await;
    for kind in ["mousePressed", "mouseReleased"] {
        cdp.ok(
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            Some(&tab),
        )
        .await;
    }
    assert_eq!(title(&mut cdp, &tab).await, "next");

    // A press on "Delete account" waits; the operator denies it: a CDP
    // error, and the button was never pressed.
    let (x, y) = centre(&mut cdp, &tab, "#delete").await;
    let id = press_async(&mut cdp, &tab, (x, y)).await;
    let approval = deny_pending(&mut cdp, &app, &cookie, &sid, id).await;
    assert_eq!(approval["level"], "high", "{approval}");
    // Its release there, with no press let through before it, is judged
    // too (a page may act on `mouseup`): denied as well.
    let id = cdp.next;
    cdp.next += 1;
    cdp.send_raw(
        json!({ "id": id, "sessionId": tab, "method": "Input.dispatchMouseEvent",
                "params": { "type": "mouseReleased", "x": x, "y": y, "button": "left", "clickCount": 1 } })
        .to_string(),
    )
    .await;
    deny_pending(&mut cdp, &app, &cookie, &sid, id).await;
    assert_eq!(title(&mut cdp, &tab).await, "next", "never pressed");

    // Typing into the password field is refused outright.
    cdp.eval(&tab, "document.querySelector('#pw').focus()")
        .await;
    let message = cdp
        .err("Input.insertText", json!({ "text": "hunter2" }), Some(&tab))
        .await;
    assert!(message.contains("denied_by_policy"), "{message}");
    assert_eq!(
        cdp.eval(&tab, "document.querySelector('#pw').value").await,
        ""
    );
    // Nor pasted: text copied from a plain field (the copy is harmless),
    // then each way of pasting, is refused at the password field. Into a
    // plain field the same paste types (so the clipboard held the text).
    cdp.eval(
        &tab,
        "document.body.insertAdjacentHTML('beforeend', '<input id=plain value=hunter2><input id=other>'); document.querySelector('#plain').select()",
    )
    .await;
    let key = |key: &str, code: &str, vk: i64, modifiers: i64, commands: Value| json!({ "type": "rawKeyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk, "modifiers": modifiers, "commands": commands });
    cdp.ok(
        "Input.dispatchKeyEvent",
        key("c", "KeyC", 67, 2, json!([])),
        Some(&tab),
    )
    .await;
    let pastes = [
        key("v", "KeyV", 86, 2, json!([])),
        key("Insert", "Insert", 45, 8, json!([])),
        key("x", "KeyX", 88, 0, json!(["paste"])),
    ];
    for paste in &pastes {
        cdp.eval(&tab, "document.querySelector('#pw').focus()")
            .await;
        let message = cdp
            .err("Input.dispatchKeyEvent", paste.clone(), Some(&tab))
            .await;
        assert!(message.contains("denied_by_policy"), "{paste}: {message}");
        assert_eq!(
            cdp.eval(&tab, "document.querySelector('#pw').value").await,
            "",
            "{paste} pasted into the password field"
        );
    }
    cdp.eval(&tab, "document.querySelector('#other').focus()")
        .await;
    cdp.ok("Input.dispatchKeyEvent", pastes[2].clone(), Some(&tab))
        .await;
    assert_eq!(
        cdp.eval(&tab, "document.querySelector('#other').value")
            .await,
        "hunter2",
        "the paste did not type into a plain field"
    );
    // Nor dropped: a drop of text goes into a plain field where it lands,
    // and is refused at the password field (as typing there is).
    let drop = |(x, y): (f64, f64), kind: &str| {
        json!({ "type": kind, "x": x, "y": y, "data": { "items": [
            { "mimeType": "text/plain", "data": "hunter2" }
        ], "dragOperationsMask": 1 } })
    };
    cdp.eval(&tab, "document.querySelector('#other').value = ''")
        .await;
    let at = centre(&mut cdp, &tab, "#other").await;
    for kind in ["dragEnter", "dragOver", "drop"] {
        cdp.ok("Input.dispatchDragEvent", drop(at, kind), Some(&tab))
            .await;
    }
    assert_eq!(
        cdp.eval(&tab, "document.querySelector('#other').value")
            .await,
        "hunter2",
        "the drop did not type into a plain field"
    );
    let at = centre(&mut cdp, &tab, "#pw").await;
    for kind in ["dragEnter", "dragOver"] {
        cdp.ok("Input.dispatchDragEvent", drop(at, kind), Some(&tab))
            .await;
    }
    let message = cdp
        .err("Input.dispatchDragEvent", drop(at, "drop"), Some(&tab))
        .await;
    assert!(message.contains("denied_by_policy"), "drop: {message}");
    assert_eq!(
        cdp.eval(&tab, "document.querySelector('#pw').value").await,
        "",
        "the drop typed into the password field"
    );
    cdp.ok(
        "Input.dispatchDragEvent",
        drop(at, "dragCancel"),
        Some(&tab),
    )
    .await;
    // Nor by a middle click (the paste of the selection on Linux
    // desktops): headless Chromium has no selection clipboard, so the
    // click is judged as a click and nothing reaches the field. Should a
    // Chromium paste there, this fails and the gate must judge it as
    // typing.
    cdp.eval(
        &tab,
        "window.aux = 0; document.querySelector('#pw').addEventListener('auxclick', () => window.aux++); document.querySelector('#plain').select()",
    )
    .await;
    let at = centre(&mut cdp, &tab, "#pw").await;
    for kind in ["mousePressed", "mouseReleased"] {
        cdp.ok(
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": at.0, "y": at.1, "button": "middle", "clickCount": 1 }),
            Some(&tab),
        )
        .await;
    }
    assert_eq!(
        cdp.eval(&tab, "document.querySelector('#pw').value").await,
        "",
        "a middle click pasted into the password field"
    );
    assert_eq!(cdp.eval(&tab, "window.aux").await, 1, "the middle click");
    // A drop of text on "Delete account" is judged as a press there too:
    // it waits, and denied, it is never sent.
    let at = centre(&mut cdp, &tab, "#delete").await;
    let id = cdp.next;
    cdp.next += 1;
    cdp.send_raw(
        json!({ "id": id, "sessionId": tab, "method": "Input.dispatchDragEvent",
                "params": drop(at, "drop") })
        .to_string(),
    )
    .await;
    let approval = deny_pending(&mut cdp, &app, &cookie, &sid, id).await;
    assert!(
        approval["reasons"].to_string().contains("Delete account"),
        "{approval}"
    );
    assert_eq!(title(&mut cdp, &tab).await, "next", "never pressed");

    // Enter under other names (a `char` of a carriage return, a key named
    // otherwise whose text is one) on the focused "Delete account" waits
    // as Enter does; denied, the button was never pressed.
    for params in [
        json!({ "type": "char", "text": "\r" }),
        json!({ "type": "keyDown", "key": "a", "text": "\r" }),
    ] {
        cdp.eval(&tab, "document.querySelector('#delete').focus()")
            .await;
        let id = cdp.next;
        cdp.next += 1;
        cdp.send_raw(
            json!({ "id": id, "sessionId": tab, "method": "Input.dispatchKeyEvent", "params": params })
                .to_string(),
        )
        .await;
        let approval = crate::gate::one_pending(&app, &cookie, &sid).await;
        assert!(
            approval["reasons"].to_string().contains("Delete account"),
            "{params}: {approval}"
        );
        let (status, _) =
            crate::gate::decide(&app, &cookie, approval["id"].as_str().unwrap(), false).await;
        assert_eq!(status, StatusCode::OK);
        let answer = cdp.answer_to(id).await;
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("denied_by_operator"), "{params}: {answer}");
        assert_eq!(title(&mut cdp, &tab).await, "next", "{params}: pressed");
    }

    // While an operator holds control, CDP input is refused.
    let live = app.live("acme", &sid).await;
    app.state
        .sessions
        .take_control(&live, "op_x", "olive")
        .await
        .unwrap();
    let message = cdp
        .err(
            "Input.dispatchKeyEvent",
            json!({ "type": "keyDown", "key": "a", "text": "a" }),
            Some(&tab),
        )
        .await;
    assert!(message.contains("operator_has_control"), "{message}");
    // So is what would mislead the operator or stop the page under them:
    // restyling it, drawing over it, pausing or freezing its script,
    // answering its requests.
    for (method, params) in [
        (
            "CSS.setStyleSheetText",
            json!({ "styleSheetId": "1", "text": "#delete::after { content: 'Cancel' }" }),
        ),
        (
            "Overlay.highlightRect",
            json!({ "x": 0, "y": 0, "width": 10, "height": 10 }),
        ),
        ("Debugger.pause", json!({})),
        ("Page.setWebLifecycleState", json!({ "state": "frozen" })),
        ("Fetch.enable", json!({})),
    ] {
        let message = cdp.err(method, params, Some(&tab)).await;
        assert!(
            message.contains("operator_has_control"),
            "{method}: {message}"
        );
    }
    // Reads still pass.
    cdp.ok(
        "Page.captureScreenshot",
        json!({ "format": "jpeg", "quality": 30 }),
        Some(&tab),
    )
    .await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_close_ends_the_session_through_cordon() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    cdp.ok("Browser.close", json!({}), None).await;
    assert_eq!(cdp.closed_with().await, 1000);
    let (status, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(info["state"], "closed", "{info}");
    assert!(info.get("cdp_url").is_none(), "{info}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdp_client_reaching_another_replica_is_carried_to_the_sessions_one() {
    let site = site::start().await;
    let (a, b) = crate::replicas::pair(&site.allow(), &[]).await;
    let mut agent = a.agent("acme").await;
    // The session runs on `b`; the client connects to `a`.
    agent.base = b.url("");
    let sid = agent.open(json!({})).await;
    let mut cdp = connect(&a, &format!("/cdp/{sid}"), Some(&agent.key))
        .await
        .expect("carried to b");
    let tab = cdp.attach_first_tab().await;
    assert_eq!(cdp.eval(&tab, "1+1").await, json!(2));
    cdp.ok(
        "Page.navigate",
        json!({ "url": site.url("/danger") }),
        Some(&tab),
    )
    .await;
    cdp.until(&tab, "document.title", |v| v == "Danger").await;
    // The rules hold on the far side too.
    let message = cdp.err("SystemInfo.getInfo", json!({}), None).await;
    assert!(message.contains("host_probe"), "{message}");
    drop(cdp);

    // A connect token issued through `b`, used at `a`: once.
    let query = token_query(&agent, &sid).await;
    let mut cdp = connect(&a, &format!("/cdp/{sid}?{query}"), None)
        .await
        .expect("the token works at any replica");
    cdp.ok("Browser.getVersion", json!({}), None).await;
    assert_eq!(
        connect(&a, &format!("/cdp/{sid}?{query}"), None)
            .await
            .err(),
        Some(StatusCode::UNAUTHORIZED)
    );
    // Another tenant's key at `a` learns nothing.
    let other = a.agent("globex").await;
    assert_eq!(
        connect(&a, &format!("/cdp/{sid}"), Some(&other.key))
            .await
            .err(),
        Some(StatusCode::NOT_FOUND)
    );
    drop(cdp);
    agent.close(&sid).await;
    drop(b);
    a.stop().await;
}

/// A single-use connect token for `sid` from `agent`: the query of its
/// `cdp_url` (`token=cdpt_…`).
async fn token_query(agent: &AgentClient, sid: &str) -> String {
    let (status, tok) = agent
        .post(&format!("/api/sessions/{sid}/cdp_token"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{tok}");
    tok["cdp_url"]
        .as_str()
        .unwrap()
        .split_once('?')
        .unwrap()
        .1
        .to_owned()
}

/// Waits for the one approval command `id` waits for on `sid`, denies it,
/// and asserts the client hears `denied_by_operator`; answers the approval.
async fn deny_pending(cdp: &mut Cdp, app: &TestApp, cookie: &str, sid: &str, id: u64) -> Value {
    let approval = crate::gate::one_pending(app, cookie, sid).await;
    let (status, _) =
        crate::gate::decide(app, cookie, approval["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK);
    let answer = cdp.answer_to(id).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("denied_by_operator"), "{answer}");
    approval
}

/// Sends a mouse press at `(x, y)` of `tab` without waiting for its answer;
/// answers its id.
async fn press_async(cdp: &mut Cdp, tab: &str, (x, y): (f64, f64)) -> u64 {
    let id = cdp.next;
    cdp.next += 1;
    cdp.send_raw(
        json!({ "id": id, "sessionId": tab, "method": "Input.dispatchMouseEvent",
                "params": { "type": "mousePressed", "x": x, "y": y, "button": "left", "clickCount": 1 } })
        .to_string(),
    )
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdp_press_on_a_button_that_swaps_on_hover_waits_whether_or_not_the_client_moved_first() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    let tab = cdp.attach_first_tab().await;
    // "Next" until the pointer arrives, then "Delete repository".
    for moved_first in [true, false] {
        agent
            .navigate_ok(&sid, &site.url("/hostile/hover-handler-swap.html"))
            .await;
        let (x, y) = (250.0, 140.0);
        if moved_first {
            // As Playwright does: move, wait for the answer, then press.
            cdp.ok(
                "Input.dispatchMouseEvent",
                json!({ "type": "mouseMoved", "x": x, "y": y }),
                Some(&tab),
            )
            .await;
        }
        let id = press_async(&mut cdp, &tab, (x, y)).await;
        let waiting = crate::gate::one_pending(&app, &cookie, &sid).await;
        let reasons = waiting["reasons"].to_string();
        assert!(
            reasons.contains("Delete repository"),
            "moved first: {moved_first}: {waiting}"
        );
        let (status, _) =
            crate::gate::decide(&app, &cookie, waiting["id"].as_str().unwrap(), false).await;
        assert_eq!(status, StatusCode::OK);
        let answer = cdp.answer_to(id).await;
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("denied_by_operator")),
            "{answer}"
        );
        assert_ne!(title(&mut cdp, &tab).await, "DELETED");
    }
    app.stop().await;
}

/// A key revoked while its CDP client is connected: the connection ends
/// within a second or so (policy violation, 1008), and a connect token
/// issued with it before connects nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_keys_connections_end_and_its_tokens_connect_nothing() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    cdp.ok("Browser.getVersion", json!({}), None).await;
    let query = token_query(&agent, &sid).await;
    let id = crate::helpers::key_id(&app, "acme").await.parse().unwrap();
    assert!(app.state.store.api_key_revoke(&id).await.unwrap());
    assert_eq!(
        cdp.closed_with().await,
        1008,
        "the connection outlived its key"
    );
    assert_eq!(
        connect(&app, &format!("/cdp/{sid}?{query}"), None)
            .await
            .err(),
        Some(StatusCode::UNAUTHORIZED),
        "a token of a revoked key"
    );
    app.stop().await;
}

/// OK on a page's `confirm("Delete repository …?")` over CDP is judged by
/// the dialog's message, as the tool API's `dialog` is: it waits for an
/// operator; denied, the dialog stays open, Cancel answers it at once, and
/// the page never deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_on_a_confirm_dialog_over_cdp_waits_for_an_operator() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    agent
        .navigate_ok(&sid, &site.url("/hostile/confirm-dialog.html"))
        .await;
    let tab = cdp.attach_first_tab().await;
    cdp.ok("Page.enable", json!({}), Some(&tab)).await;
    // Clicked by script after the evaluate answers: the dialog stops the page.
    cdp.eval(
        &tab,
        "setTimeout(() => document.querySelector('#next').click()); 1",
    )
    .await;
    let opened = cdp.event("Page.javascriptDialogOpening").await;
    assert_eq!(opened["params"]["type"], "confirm", "{opened}");
    let id = cdp.next;
    cdp.next += 1;
    cdp.send_raw(
        json!({ "id": id, "sessionId": tab, "method": "Page.handleJavaScriptDialog",
                "params": { "accept": true } })
        .to_string(),
    )
    .await;
    let approval = deny_pending(&mut cdp, &app, &cookie, &sid, id).await;
    assert!(
        approval["reasons"]
            .to_string()
            .contains("Delete repository acme/site?"),
        "{approval}"
    );
    // Cancel acts on nothing: it runs at once, and the page goes on.
    cdp.ok(
        "Page.handleJavaScriptDialog",
        json!({ "accept": false }),
        Some(&tab),
    )
    .await;
    assert_eq!(title(&mut cdp, &tab).await, "KEPT");
    assert!(crate::gate::pending(&app, &cookie).await.is_empty());
    app.stop().await;
}

/// A client's Enter (or Space) going down with its character, as
/// Puppeteer and Playwright send it (`keyDown` with `text`), on a page
/// whose keydown handler moves the focus from "Next" onto "Delete
/// repository": the keypress would press the destructive one. Cordon sends
/// the key in two steps and judges it again where it acts: it waits, and
/// denied, nothing was pressed. Where the focus stays, the key acts at
/// once, answered as the browser would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cdp_key_whose_keydown_moves_the_focus_is_judged_where_it_lands() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    agent
        .navigate_ok(&sid, &site.url("/hostile/keydown-moves-focus.html"))
        .await;
    let tab = cdp.attach_first_tab().await;
    let enter = json!({ "type": "keyDown", "key": "Enter", "code": "Enter",
                        "windowsVirtualKeyCode": 13, "text": "\r", "unmodifiedText": "\r" });
    let space = json!({ "type": "keyDown", "key": " ", "code": "Space",
                        "windowsVirtualKeyCode": 32, "text": " ", "unmodifiedText": " " });
    for params in [&enter, &space] {
        cdp.eval(&tab, "document.querySelector('#next').focus()")
            .await;
        let id = cdp.next;
        cdp.next += 1;
        cdp.send_raw(
            json!({ "id": id, "sessionId": tab, "method": "Input.dispatchKeyEvent", "params": params })
                .to_string(),
        )
        .await;
        let approval = deny_pending(&mut cdp, &app, &cookie, &sid, id).await;
        let reasons = approval["reasons"].to_string();
        assert!(
            reasons.contains("destructive_click") && reasons.contains("Delete repository"),
            "{params}: {approval}"
        );
        let up = json!({ "type": "keyUp", "key": params["key"], "code": params["code"],
                         "windowsVirtualKeyCode": params["windowsVirtualKeyCode"] });
        cdp.ok("Input.dispatchKeyEvent", up, Some(&tab)).await;
        assert_eq!(
            title(&mut cdp, &tab).await,
            "Repository",
            "{params}: pressed"
        );
    }
    // The page without the trick: Enter on "Next" presses it, at once.
    agent
        .navigate_ok(&sid, &site.url("/hostile/keydown-moves-focus.html?prevent"))
        .await;
    cdp.eval(&tab, "document.querySelector('#field').focus()")
        .await;
    cdp.ok(
        "Input.dispatchKeyEvent",
        json!({ "type": "keyDown", "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9 }),
        Some(&tab),
    )
    .await;
    cdp.ok(
        "Input.dispatchKeyEvent",
        json!({ "type": "keyUp", "key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9 }),
        Some(&tab),
    )
    .await;
    // `?prevent` cancels Enter's keydown on "Next": its keypress is dropped.
    cdp.ok("Input.dispatchKeyEvent", enter.clone(), Some(&tab))
        .await;
    assert_eq!(title(&mut cdp, &tab).await, "Repository");
    // A harmless button that does not cancel is pressed by it (the
    // keypress Cordon sends in the second step).
    cdp.eval(
        &tab,
        "document.querySelector('#danger').textContent = 'Continue'; \
         document.querySelector('#danger').focus()",
    )
    .await;
    cdp.ok("Input.dispatchKeyEvent", enter.clone(), Some(&tab))
        .await;
    assert_eq!(
        title(&mut cdp, &tab).await,
        "DELETED",
        "Enter pressed the focused button"
    );
    app.stop().await;
}

/// Sends `method` with `params` to `tab` without waiting; answers its id.
async fn send_async(cdp: &mut Cdp, tab: &str, method: &str, params: Value) -> u64 {
    let id = cdp.next;
    cdp.next += 1;
    cdp.send_raw(
        json!({ "id": id, "sessionId": tab, "method": method, "params": params }).to_string(),
    )
    .await;
    id
}

/// The one approval `sid` waits for, which must name `name`, decided;
/// answers the client's answer to command `id`.
async fn decide_one(
    cdp: &mut Cdp,
    app: &TestApp,
    cookie: &str,
    (sid, id): (&str, u64),
    name: &str,
    approve: bool,
) -> Value {
    let approval = crate::gate::one_pending(app, cookie, sid).await;
    assert!(approval["reasons"].to_string().contains(name), "{approval}");
    let (status, _) =
        crate::gate::decide(app, cookie, approval["id"].as_str().unwrap(), approve).await;
    assert_eq!(status, StatusCode::OK);
    cdp.answer_to(id).await
}

/// What the operator's decision did: approved, the command answered
/// and the page deleted; denied, an error naming the denial and the
/// page's title still `unchanged` (so nothing acted).
async fn expect_decided(cdp: &mut Cdp, tab: &str, answer: &Value, approve: bool, unchanged: &str) {
    if approve {
        assert!(answer.get("error").is_none(), "{answer}");
        cdp.until(tab, "document.title", |t| t == "DELETED").await;
    } else {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("denied_by_operator"), "{answer}");
        assert_eq!(
            title(cdp, tab).await,
            unchanged,
            "acted though denied: {answer}"
        );
    }
}

/// A button going up away from where it went down (a drag's drop onto a
/// bin that deletes on `mouseup`), a second finger put down through a
/// `touchMove`, and Enter sent as an editing command (`insertNewline`,
/// whatever the key) are judged where they act: they wait for an
/// operator; denied, nothing happened; approved, they act (so the gate
/// had something to judge).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_a_second_finger_and_an_editing_newline_are_judged_where_they_act() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    let tab = cdp.attach_first_tab().await;
    let board = site.url("/hostile/drop-zone.html");
    let (card, bin) = ((120.0, 60.0), (170.0, 350.0));
    let mouse = |kind: &str, (x, y): (f64, f64)| json!({ "type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1 });
    for approve in [false, true] {
        agent.navigate_ok(&sid, &board).await;
        // The card is harmless: its press passes at once.
        cdp.ok(
            "Input.dispatchMouseEvent",
            mouse("mouseMoved", card),
            Some(&tab),
        )
        .await;
        cdp.ok(
            "Input.dispatchMouseEvent",
            mouse("mousePressed", card),
            Some(&tab),
        )
        .await;
        cdp.ok(
            "Input.dispatchMouseEvent",
            mouse("mouseMoved", bin),
            Some(&tab),
        )
        .await;
        let id = send_async(
            &mut cdp,
            &tab,
            "Input.dispatchMouseEvent",
            mouse("mouseReleased", bin),
        )
        .await;
        let answer = decide_one(
            &mut cdp,
            &app,
            &cookie,
            (&sid, id),
            "Delete repository",
            approve,
        )
        .await;
        expect_decided(&mut cdp, &tab, &answer, approve, "Board").await;
    }
    // A plain click on the card is judged once (its release in place is
    // motion): nothing waits.
    agent.navigate_ok(&sid, &board).await;
    for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
        cdp.ok("Input.dispatchMouseEvent", mouse(kind, card), Some(&tab))
            .await;
    }
    let pending = crate::gate::pending(&app, &cookie).await;
    assert!(
        pending.iter().all(|a| a["session"] != sid.as_str()),
        "{pending:?}"
    );

    // A second finger through a touch move.
    let touch = |kind: &str, points: Value| json!({ "type": kind, "touchPoints": points });
    for approve in [false, true] {
        agent.navigate_ok(&sid, &board).await;
        cdp.ok(
            "Input.dispatchTouchEvent",
            touch("touchStart", json!([{ "id": 0, "x": card.0, "y": card.1 }])),
            Some(&tab),
        )
        .await;
        let id = send_async(
            &mut cdp,
            &tab,
            "Input.dispatchTouchEvent",
            touch("touchMove", json!([{ "id": 1, "x": bin.0, "y": bin.1 }])),
        )
        .await;
        let answer = decide_one(
            &mut cdp,
            &app,
            &cookie,
            (&sid, id),
            "Delete repository",
            approve,
        )
        .await;
        cdp.ok(
            "Input.dispatchTouchEvent",
            touch("touchEnd", json!([])),
            Some(&tab),
        )
        .await;
        expect_decided(&mut cdp, &tab, &answer, approve, "Board").await;
    }

    // Enter as an editing command in a field whose form deletes.
    for approve in [false, true] {
        agent
            .navigate_ok(&sid, &site.url("/hostile/keyboard-submit.html"))
            .await;
        cdp.eval(&tab, "document.querySelector('#confirm').focus()")
            .await;
        let id = send_async(
            &mut cdp,
            &tab,
            "Input.dispatchKeyEvent",
            json!({ "type": "rawKeyDown", "key": "x", "code": "KeyX", "windowsVirtualKeyCode": 88, "commands": ["insertNewline"] }),
        )
        .await;
        let answer = decide_one(
            &mut cdp,
            &app,
            &cookie,
            (&sid, id),
            "Delete repository",
            approve,
        )
        .await;
        expect_decided(&mut cdp, &tab, &answer, approve, "Repository").await;
    }
    app.stop().await;
}

/// Malformed ways around the filter get typed errors and change nothing:
/// an address the gate cannot read (credentials in it) is refused, not
/// sent on unjudged; an id Chromium cannot take back; a heavy command
/// sent twice under one id; a command of more values than are read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses_ids_and_bulk_the_filter_cannot_read_are_refused() {
    let site = site::start().await;
    let (app, agent, sid, mut cdp) = driven(&site).await;
    let tab = cdp.attach_first_tab().await;
    agent.navigate_ok(&sid, &site.url("/links")).await;
    let before = cdp.eval(&tab, "location.href").await;
    for url in [
        format!("http://user:pw@{}/danger", site.addr),
        format!("{}?{}", site.url("/danger"), "a".repeat(9000)),
    ] {
        let message = cdp
            .err("Page.navigate", json!({ "url": url }), Some(&tab))
            .await;
        assert!(message.contains("url_invalid"), "{message}");
        let message = cdp
            .err("Target.createTarget", json!({ "url": url }), None)
            .await;
        assert!(message.contains("url_invalid"), "{message}");
    }
    assert_eq!(cdp.eval(&tab, "location.href").await, before);
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs.as_array().map(Vec::len), Some(1), "{tabs}");

    // An id past Chromium's 32 bits.
    cdp.send_raw(
        json!({ "id": 3_000_000_000u64, "sessionId": tab, "method": "Page.captureScreenshot" })
            .to_string(),
    )
    .await;
    let answer = cdp.answer().await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer.get("id").is_none(), "{answer}");

    // Two heavy commands under one id: the second is refused while the
    // first waits for its answer (on a loaded machine the first may be
    // answered before the second is read: then both are, and the pair is
    // sent again).
    let mut seen_refused = false;
    for _ in 0..20 {
        let id = cdp.next;
        cdp.next += 1;
        for _ in 0..2 {
            cdp.send_raw(
                json!({ "id": id, "sessionId": tab, "method": "Page.captureScreenshot", "params": { "format": "png" } })
                    .to_string(),
            )
            .await;
        }
        let (mut refused, mut answered) = (0, 0);
        while refused + answered < 2 {
            let a = cdp.answer_to(id).await;
            if a["error"]["code"] == -32600 {
                refused += 1;
            } else {
                assert!(a["result"]["data"].is_string(), "{a}");
                answered += 1;
            }
        }
        assert!(answered >= 1, "the first was answered");
        if refused == 1 {
            seen_refused = true;
            break;
        }
    }
    assert!(
        seen_refused,
        "a second heavy command under a waiting id was never refused"
    );
    // Nine more screenshots with ids of their own are all answered: no
    // heavy slot was lost.
    for _ in 0..9 {
        cdp.ok(
            "Page.captureScreenshot",
            json!({ "format": "jpeg", "quality": 10 }),
            Some(&tab),
        )
        .await;
    }

    // Bulk that would be built value by value, with the deciding field
    // after it: not read, not sent on.
    let mut text = format!(
        r#"{{"id":{},"sessionId":"{tab}","method":"Page.navigate","params":{{"junk":["#,
        cdp.next
    );
    cdp.next += 1;
    text.push_str(&vec!["0"; 200_000].join(","));
    text.push_str(&format!(r#"],"url":"{}"}}}}"#, site.url("/danger")));
    cdp.send_raw(text).await;
    let answer = cdp.answer().await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("JSON values"),
        "{answer}"
    );
    assert_eq!(cdp.eval(&tab, "location.href").await, before);
    app.stop().await;
}
