//! The live view's WebSocket against a real Chromium: tickets, frames,
//! operator input through the tool pipeline, take-over and hand-back, and
//! hostile input that is dropped while the connection stays.

use app::api::auth::Role;
use futures::{SinkExt, StreamExt};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::helpers::{Backend, PATIENCE, TestApp, assert_error, session_app};
use crate::site;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One live view, as the dashboard's page holds it.
pub(crate) struct View {
    pub(crate) ws: Ws,
    /// Frames received (binary messages).
    pub(crate) frames: usize,
    /// Every text message received, in order (printed when a wait fails).
    pub(crate) seen: Vec<Value>,
}

/// A ticket for `sid` from the server function, as a page gets it.
async fn ticket(app: &TestApp, sid: &str, cookie: &str) -> String {
    let (status, v) = app
        .server_fn("live_ticket", &format!("session={sid}"), Some(cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["path"].as_str().expect("a path").to_owned()
}

/// Opens the socket at `path` with the dashboard cookie and Cordon's own
/// Origin; the refusal's status and body if it is refused.
pub(crate) async fn connect(
    app: &TestApp,
    path: &str,
    cookie: Option<&str>,
) -> Result<View, (u16, String)> {
    let url = app.url(path).replacen("http", "ws", 1);
    let mut req = url.into_client_request().expect("request");
    let h = req.headers_mut();
    h.insert("origin", app.origin().parse().unwrap());
    if let Some(c) = cookie {
        h.insert("cookie", c.parse().unwrap());
    }
    // Over built-in HTTPS: TLS trusting exactly the app's certificate.
    let tls = app.tls.as_ref().map(|der| {
        tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(crate::helpers::trusting(der)))
    });
    match tokio_tungstenite::connect_async_tls_with_config(req, None, false, tls).await {
        Ok((ws, _)) => Ok(View {
            ws,
            frames: 0,
            seen: Vec::new(),
        }),
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => {
            let body = res
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            Err((res.status().as_u16(), body))
        }
        Err(e) => panic!("connect failed: {e}"),
    }
}

/// A loopback site, the app, an agent's session showing `page` of the site,
/// and operator "olive"'s dashboard cookie.
struct Setup {
    site: site::Site,
    app: TestApp,
    agent: crate::helpers::AgentClient,
    sid: String,
    cookie: String,
}

async fn setup(page: &str) -> Setup {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url(page)).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    Setup {
        site,
        app,
        agent,
        sid,
        cookie,
    }
}

/// A new view of `sid` with a fresh ticket.
pub(crate) async fn open_view(app: &TestApp, sid: &str, cookie: &str) -> View {
    let path = ticket(app, sid, cookie).await;
    connect(app, &path, Some(cookie)).await.expect("upgrade")
}

/// The end message's reason.
pub(crate) fn reason(ended: &Value) -> &str {
    ended["reason"].as_str().unwrap_or_default()
}

impl View {
    pub(crate) async fn send(&mut self, v: Value) {
        self.ws
            .send(Message::Text(v.to_string().into()))
            .await
            .expect("send");
    }

    pub(crate) async fn send_raw(&mut self, m: Message) {
        self.ws.send(m).await.expect("send");
    }

    /// Reads until a text message satisfies `want`; frames are counted and
    /// their JPEG checked on the way.
    pub(crate) async fn wait_for(
        &mut self,
        what: &str,
        mut want: impl FnMut(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let msg = match tokio::time::timeout(left, self.ws.next()).await {
                Ok(Some(Ok(m))) => m,
                other => panic!(
                    "waiting for {what}: socket gave {other:?}; text messages so far: {:#?}",
                    self.seen.iter().rev().take(12).collect::<Vec<_>>()
                ),
            };
            match msg {
                Message::Binary(b) => {
                    assert!(b.starts_with(&[0xFF, 0xD8]), "a frame is a JPEG");
                    self.frames += 1;
                }
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str()).expect("JSON text");
                    self.seen.push(v.clone());
                    if want(&v) {
                        return v;
                    }
                }
                Message::Close(_) => panic!(
                    "waiting for {what}: the socket closed; last messages: {:#?}",
                    self.seen.iter().rev().take(12).collect::<Vec<_>>()
                ),
                _ => {}
            }
        }
    }

    /// Waits until the page state's title is `title` (it may be already).
    pub(crate) async fn wait_title(&mut self, title: &str) {
        let last_page = self.seen.iter().rev().find(|v| v["type"] == "page");
        if last_page.is_some_and(|p| p["title"] == title) {
            return;
        }
        self.wait_for(&format!("title {title:?}"), |v| {
            v["type"] == "page" && v["title"] == title
        })
        .await;
    }

    pub(crate) async fn wait_error(&mut self, code: &str) -> Value {
        self.wait_for(&format!("error {code}"), |v| {
            v["type"] == "error" && v["code"] == code
        })
        .await
    }

    pub(crate) async fn click(&mut self, x: f64, y: f64) {
        self.send(json!({ "type": "mouse", "action": "click", "x": x, "y": y, "button": "left" }))
            .await;
    }

    pub(crate) async fn key(&mut self, key: &str, code: &str) {
        for action in ["down", "up"] {
            self.send(json!({ "type": "key", "action": action, "key": key, "code": code }))
                .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_watches_takes_control_drives_the_page_and_hands_back() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
        cookie,
    } = setup("/pad").await;
    let mut view = open_view(&app, &sid, &cookie).await;
    let hello = view.wait_for("hello", |v| v["type"] == "hello").await;
    assert_eq!(hello["session"], sid.as_str());
    assert_eq!(hello["mode"], "clean");
    assert_eq!(
        (hello["width"].as_u64(), hello["height"].as_u64()),
        (Some(1280), Some(720))
    );
    let control = view.wait_for("control", |v| v["type"] == "control").await;
    assert_eq!(control["holder"], Value::Null, "{control}");
    assert_eq!(control["may_control"], true);
    let frame = view.wait_for("a frame", |v| v["type"] == "frame").await;
    assert_eq!(frame["width"].as_f64(), Some(1280.0), "{frame}");
    view.wait_title("ready").await;

    // Driving without control is refused; nothing reaches the page.
    view.click(200.0, 300.0).await;
    view.wait_error("not_in_control").await;

    // Take-over: the agent is refused with the operator's name.
    view.send(json!({ "type": "take_control" })).await;
    let control = view
        .wait_for("control taken", |v| {
            v["type"] == "control" && v["yours"] == true
        })
        .await;
    assert_eq!(control["holder"], "olive");
    let refused = agent.tool(&sid, "click", json!({ "x": 10, "y": 10 })).await;
    assert_error(&refused, StatusCode::CONFLICT, "operator_has_control");
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("olive"),
        "{}",
        refused.1
    );

    // The operator's click and keys reach the page.
    view.click(200.0, 300.0).await;
    view.wait_title("clicked 1").await;
    view.click(50.0, 20.0).await;
    view.key("h", "KeyH").await;
    view.key("i", "KeyI").await;
    view.send(json!({ "type": "text", "text": "!" })).await;
    view.key("Enter", "Enter").await;
    view.wait_title("typed hi!").await;

    // Hostile or broken messages are dropped with an error; the socket stays.
    view.send_raw(Message::Text("not json".into())).await;
    view.wait_error("bad_message").await;
    view.send(json!({ "type": "format_disk" })).await;
    view.wait_error("bad_message").await;
    view.send(json!({ "type": "mouse", "action": "click", "x": "left", "y": 1 }))
        .await;
    view.wait_error("bad_message").await;
    view.send(json!({ "type": "navigate", "url": "javascript:alert(1)" }))
        .await;
    view.wait_error("bad_message").await;
    view.send(json!({ "type": "key", "action": "down", "key": "NoSuchKeyAnywhere" }))
        .await;
    view.wait_error("unknown_key").await;
    view.send_raw(Message::Text("x".repeat(20_000).into()))
        .await;
    view.wait_error("too_large").await;
    view.send_raw(Message::Binary(vec![1, 2, 3].into())).await;
    view.wait_error("bad_message").await;
    // A click far outside the page is clamped onto its edge, not refused
    // and not forwarded as it came; the connection still works.
    view.click(1.0e9, 300.0).await;
    view.click(200.0, 300.0).await;
    view.wait_title("clicked 2").await;
    assert!(view.frames > 0, "frames were streamed");

    // Hand back: the agent's next call works.
    view.send(json!({ "type": "release_control" })).await;
    view.wait_for("control released", |v| {
        v["type"] == "control" && v["holder"].is_null()
    })
    .await;
    let (status, body) = agent
        .tool(&sid, "click", json!({ "x": 200, "y": 300 }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    view.wait_title("clicked 3").await;

    // The audit says who did what, never what was typed.
    let rows = app.state.store.audit_page(0, 10_000).await.expect("audit");
    let of = |action: &str| -> Vec<&cordon::audit::Event> {
        rows.iter().filter(|r| r.action == action).collect()
    };
    let control: Vec<_> = of("session.control")
        .iter()
        .map(|r| r.outcome.clone())
        .collect();
    assert_eq!(control, ["taken", "released"], "{control:?}");
    assert!(
        of("tool.click")
            .iter()
            .any(|r| r.outcome == "refused: operator_has_control")
    );
    let keys = of("input.key");
    assert!(keys.len() >= 6, "every key is audited: {}", keys.len());
    for r in keys.iter().chain(of("input.text").iter()) {
        assert!(r.actor.starts_with("operator:"), "{}", r.actor);
        let p = &r.params;
        assert!(
            !p.contains("\"h\"") && !p.contains("\"i\"") && !p.contains('!'),
            "{p}"
        );
    }
    assert_eq!(of("session.watch").len(), 1);

    // A view that goes away leaves the session running; a new ticket
    // resumes it.
    drop(view);
    let mut view = open_view(&app, &sid, &cookie).await;
    view.wait_for("hello again", |v| v["type"] == "hello").await;
    view.wait_title("clicked 3").await;

    // The session's end reaches the view, which then closes.
    agent.close(&sid).await;
    let ended = view.wait_for("the end", |v| v["type"] == "ended").await;
    assert!(reason(&ended).contains("closed"), "{ended}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_cookies_and_roles_are_checked_before_and_after_the_upgrade() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let other = agent.open(json!({})).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let (_, viewer) = app.operator_session("vera", Role::Viewer).await;

    // No ticket, a made-up one, another session's, a used one: 403.
    for path in [
        format!("/live/{sid}"),
        format!("/live/{sid}?ticket=lvt_madeup"),
        format!("/live/{sid}?ticket={}", "x".repeat(5000)),
    ] {
        let err = connect(&app, &path, Some(&cookie))
            .await
            .err()
            .expect("refused");
        assert_eq!(err.0, 403, "{path}: {err:?}");
    }
    let for_other = ticket(&app, &other, &cookie).await;
    let stolen = for_other.replace(&other, &sid);
    assert_eq!(
        connect(&app, &stolen, Some(&cookie))
            .await
            .err()
            .map(|e| e.0),
        Some(403)
    );
    let path = ticket(&app, &sid, &cookie).await;
    let first = connect(&app, &path, Some(&cookie))
        .await
        .expect("first use");
    assert_eq!(
        connect(&app, &path, Some(&cookie)).await.err().map(|e| e.0),
        Some(403)
    );
    drop(first);
    // Another operator's ticket, and no dashboard cookie at all.
    let olive_ticket = ticket(&app, &sid, &cookie).await;
    assert_eq!(
        connect(&app, &olive_ticket, Some(&viewer))
            .await
            .err()
            .map(|e| e.0),
        Some(403)
    );
    let path = ticket(&app, &sid, &cookie).await;
    assert_eq!(
        connect(&app, &path, None).await.err().map(|e| e.0),
        Some(401)
    );
    // A ticket for an unknown session is not even issued.
    let (status, v) = app
        .server_fn(
            "live_ticket",
            "session=s_unknownunknownunknown00",
            Some(&cookie),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    let denied = app
        .state
        .store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.action == "session.watch" && r.outcome.starts_with("denied"))
        .count();
    assert!(denied >= 6, "refusals are audited: {denied}");

    // A viewer watches but cannot drive or take control.
    let path = ticket(&app, &sid, &viewer).await;
    let mut view = connect(&app, &path, Some(&viewer))
        .await
        .expect("a viewer may watch");
    let control = view.wait_for("control", |v| v["type"] == "control").await;
    assert_eq!(control["may_control"], false);
    view.send(json!({ "type": "take_control" })).await;
    view.wait_error("forbidden").await;
    view.click(10.0, 10.0).await;
    view.wait_error("forbidden").await;
    assert!(app.live("acme", &sid).await.control().is_none());
    let (status, _) = agent.tool(&sid, "click", json!({ "x": 10, "y": 10 })).await;
    assert_eq!(status, StatusCode::OK);

    // Disabling the operator ends their dashboard session and their view.
    let (op_id, cookie) = app.operator_session("otto", Role::Operator).await;
    let path = ticket(&app, &sid, &cookie).await;
    let mut view = connect(&app, &path, Some(&cookie)).await.expect("upgrade");
    view.wait_for("hello", |v| v["type"] == "hello").await;
    app.state
        .auth
        .set_disabled(&cordon::audit::Actor::Cli, &op_id.parse().unwrap(), true)
        .await
        .expect("disable");
    let ended = view.wait_for("the end", |v| v["type"] == "ended").await;
    assert!(reason(&ended).contains("dashboard"), "{ended}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_crash_mid_stream_ends_the_view_with_the_reason() {
    let Setup {
        site: _site,
        app,
        sid,
        cookie,
        ..
    } = setup("/pad").await;
    let mut view = open_view(&app, &sid, &cookie).await;
    view.wait_for("a frame", |v| v["type"] == "frame").await;
    let pid = app
        .live("acme", &sid)
        .await
        .sandbox
        .pid
        .expect("a process group");
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the browser");
    let ended = view.wait_for("the end", |v| v["type"] == "ended").await;
    let why = reason(&ended);
    assert!(
        why.contains("failed") && why.contains("browser_exited"),
        "{ended}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_sessions_refuse_bad_input_and_a_save_of_nothing_keeps_the_old_login() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let (_, viewer) = app.operator_session("vera", Role::Viewer).await;
    let start = |body: String, c: String| {
        let app = &app;
        async move { app.server_fn("start_refresh", &body, Some(&c)).await }
    };
    let form = |tenant: &str, domains: &str, url: &str| {
        format!(
            "tenant={tenant}&domains={}&start_url={}",
            urlencode(domains),
            urlencode(url)
        )
    };
    // Refused, and nothing starts.
    for (body, status) in [
        (form("nosuch", "127.0.0.1", ""), StatusCode::BAD_REQUEST),
        (form("acme", "", ""), StatusCode::BAD_REQUEST),
        (form("acme", "not a host!", ""), StatusCode::BAD_REQUEST),
        (
            form("acme", "127.0.0.1", "javascript:alert(1)"),
            StatusCode::BAD_REQUEST,
        ),
        (form("ACME/../x", "127.0.0.1", ""), StatusCode::BAD_REQUEST),
    ] {
        let (got, v) = start(body.clone(), cookie.clone()).await;
        assert_eq!(got, status, "{body}: {v}");
    }
    let (got, v) = start(form("acme", "127.0.0.1", &site.url("/pad")), viewer.clone()).await;
    assert_eq!(got, StatusCode::FORBIDDEN, "{v}");
    assert_eq!(
        app.state.sessions.open_count(),
        0,
        "no refused start opened a session"
    );

    // A stored login that a save of nothing must keep.
    let old = app
        .state
        .vault
        .import(
            &cordon::audit::Actor::Cli,
            &"acme".parse().unwrap(),
            &"127.0.0.1".parse().unwrap(),
            json!([{ "name": "sid", "value": "old-login", "domain": "127.0.0.1", "path": "/" }])
                .to_string()
                .as_bytes(),
            Default::default(),
        )
        .await
        .expect("import");

    let (got, v) = start(form("acme", "127.0.0.1", &site.url("/pad")), cookie.clone()).await;
    assert_eq!(got, StatusCode::OK, "{v}");
    let sid = v.as_str().expect("the session id").to_owned();
    let info = app
        .state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .expect("running");
    assert_eq!(info.mode.as_str(), "refresh");
    let fields = format!("session={sid}&domains=127.0.0.1");
    // Nothing logged in yet: a clear refusal, the old login kept.
    let (got, v) = app.server_fn("save_refresh", &fields, Some(&cookie)).await;
    assert_eq!(got, StatusCode::CONFLICT, "{v}");
    assert!(v.to_string().contains("no cookie"), "{v}");
    let now = app.state.vault.list(None).await.unwrap();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].last_refreshed_at, old.credential.last_refreshed_at);
    // A domain the session was not started for, none at all, a viewer.
    for (body, status) in [
        (
            format!("session={sid}&domains=example.com"),
            StatusCode::BAD_REQUEST,
        ),
        (format!("session={sid}&domains="), StatusCode::BAD_REQUEST),
        (
            "session=s_nosuchsessionnosuchsession&domains=127.0.0.1".to_owned(),
            StatusCode::NOT_FOUND,
        ),
    ] {
        let (got, v) = app.server_fn("refresh_preview", &body, Some(&cookie)).await;
        assert_eq!(got, status, "{body}: {v}");
    }
    let (got, _) = app.server_fn("save_refresh", &fields, Some(&viewer)).await;
    assert_eq!(got, StatusCode::FORBIDDEN);
    // An agent's session is not a refresh session.
    let agent_sid = agent.open(json!({})).await;
    let (got, v) = app
        .server_fn(
            "refresh_preview",
            &format!("session={agent_sid}&domains=127.0.0.1"),
            Some(&cookie),
        )
        .await;
    assert_eq!(got, StatusCode::CONFLICT, "{v}");
    // Agents never open one.
    let (status, v) = agent
        .post(
            "/api/sessions",
            json!({ "credential_mode": "refresh", "domains": ["127.0.0.1"] }),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    // The refresh session has its own deadline and was audited as the operator's.
    let row = app.session_row(&sid).await;
    let life = row.deadline_at - row.created_at;
    assert!((899_000..=901_000).contains(&life), "{life}");
    assert_eq!(row.api_key_id, None);
    let rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    assert!(rows.iter().any(|r| r.action == "session.open"
        && r.session.as_deref() == Some(sid.as_str())
        && r.actor.starts_with("operator:")));
    app.stop().await;
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_popup_is_followed_as_a_tab_and_tabs_and_addresses_are_driven_from_the_view() {
    let Setup {
        site,
        app,
        sid,
        cookie,
        ..
    } = setup("/popup").await;
    let mut view = open_view(&app, &sid, &cookie).await;
    view.wait_title("Popup opener").await;
    view.send(json!({ "type": "take_control" })).await;
    view.wait_for("control", |v| v["type"] == "control" && v["yours"] == true)
        .await;

    // The page opens a window: it shows as a second tab, and is shown.
    view.click(20.0, 15.0).await;
    let page = view
        .wait_for("the popup shown", |v| {
            v["type"] == "page"
                && v["tabs"].as_array().is_some_and(|t| t.len() == 2)
                && v["url"].as_str().is_some_and(|u| u.ends_with("/links"))
        })
        .await;
    let tabs = page["tabs"].as_array().unwrap();
    let opener = tabs
        .iter()
        .find(|t| t["active"] == false)
        .expect("the opener tab")["id"]
        .clone();
    let popup = tabs.iter().find(|t| t["active"] == true).unwrap()["id"].clone();

    // Switch back, address bar, close the popup.
    view.send(json!({ "type": "tab_switch", "id": opener }))
        .await;
    view.wait_title("Popup opener").await;
    view.send(json!({ "type": "navigate", "url": site.url("/pad") }))
        .await;
    view.wait_title("ready").await;
    view.send(json!({ "type": "tab_close", "id": popup })).await;
    view.wait_for("one tab left", |v| {
        v["type"] == "page" && v["tabs"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    view.send(json!({ "type": "tab_switch", "id": "no-such-tab" }))
        .await;
    view.wait_error("tab_not_found").await;
    // A new size: frames follow it (a click repaints the page, so a frame
    // comes whether or not Chromium sends one for the resize alone).
    view.send(json!({ "type": "resize", "width": 800, "height": 600 }))
        .await;
    view.click(200.0, 300.0).await;
    view.wait_title("clicked 1").await;
    let resized = |v: &Value| v["type"] == "frame" && v["width"].as_f64() == Some(800.0);
    if !view.seen.iter().any(resized) {
        view.wait_for("a frame of the new size", resized).await;
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_of_a_session_on_another_replica_is_carried_there_and_driven() {
    carried_and_driven(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_builtin_https_the_hop_and_the_carried_view_go_over_tls() {
    // Both replicas serve the deployment's certificate; neither has a
    // plain-HTTP port, so every forwarded call and the carried view in
    // `carried_and_driven` can only have gone over TLS.
    let cert = crate::helpers::LocalCert::new();
    let tls = cert.settings();
    let tls: Vec<(&str, &str)> = tls.iter().map(|(k, v)| (*k, v.as_str())).collect();
    carried_and_driven(&tls).await;
}

/// The operator's dashboard is on `a` (this process); the session runs on
/// `b` (a `cordon serve` on the same PostgreSQL), both with `extra`.
async fn carried_and_driven(extra: &[(&str, &str)]) {
    let site = site::start().await;
    let allow = site.allow();
    let (app, b) = crate::replicas::pair(&allow, extra).await;
    let mut agent = app.agent("acme").await;
    agent.base = b.url("");
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url("/pad")).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;

    let path = ticket(&app, &sid, &cookie).await;
    let mut view = connect(&app, &path, Some(&cookie))
        .await
        .unwrap_or_else(|e| panic!("upgrade on a: {e:?}\n{}", b.warnings()));
    view.wait_title("ready").await;
    // Frames come through the carried connection.
    view.wait_for("a frame's metadata", |v| v["type"] == "frame")
        .await;
    // And input goes the other way: take control, click the pad.
    view.send(json!({ "type": "take_control" })).await;
    let control = view
        .wait_for("control taken", |v| {
            v["type"] == "control" && v["yours"] == true
        })
        .await;
    assert_eq!(control["holder"], "olive");
    view.click(300.0, 300.0).await;
    view.wait_title("clicked 1").await;
    // The agent on `b` is refused while the operator holds it.
    let refused = agent.tool(&sid, "click", json!({ "x": 10, "y": 10 })).await;
    assert_error(&refused, StatusCode::CONFLICT, "operator_has_control");
    // The ticket was taken on `a`: used again, it is refused.
    assert_eq!(
        connect(&app, &path, Some(&cookie)).await.err().map(|e| e.0),
        Some(403)
    );

    // The dashboard's calls on the session, made on `a`, act on `b`: hand
    // back (the agent drives again), then end it.
    let (status, v) = app
        .server_fn("release_control", &format!("session={sid}"), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}\n{}", b.warnings());
    let clicked = agent
        .tool(&sid, "click", json!({ "x": 300, "y": 300 }))
        .await;
    assert_eq!(clicked.0, StatusCode::OK, "{}", clicked.1);
    view.wait_title("clicked 2").await;
    let (status, v) = app
        .server_fn("end_session", &format!("id={sid}"), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let gone = agent.tool(&sid, "click", json!({ "x": 1, "y": 1 })).await;
    assert_error(&gone, StatusCode::GONE, "gone");
    let row = app.session_row(&sid).await;
    assert_eq!(row.close_reason.map(|r| r.as_str()), Some("operator"));
    // A forged hop on a session function is refused, whatever it names.
    let forged = app
        .http
        .post(app.url("/ui/fn/end_session"))
        .header("origin", app.origin())
        .header("host", format!("localhost:{}", app.addr.port()))
        .header("content-type", "application/x-www-form-urlencoded")
        .header(
            "x-cordon-hop",
            "v1 ts=1 nonce=x tenant=_operator key=op_x to=a sig=00",
        )
        .body(format!("id={sid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
}

/// Every way a tenant's API key could reach a session, with what it got.
async fn agent_reaches(agent: &crate::helpers::AgentClient, sid: &str) -> Vec<(String, u16)> {
    let mut got = Vec::new();
    let (status, list) = agent.get("/api/sessions").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let listed = list
        .as_array()
        .is_some_and(|l| l.iter().any(|s| s["session_id"] == sid));
    got.push(("listed".to_owned(), u16::from(listed)));
    let (status, _) = agent.get(&format!("/api/sessions/{sid}")).await;
    got.push(("show".into(), status.as_u16()));
    for (tool, body) in [
        ("read_dom", json!({})),
        ("screenshot", json!({})),
        (
            "navigate",
            json!({ "url": "http://127.0.0.1:9/look-alike" }),
        ),
        ("type", json!({ "text": "x" })),
    ] {
        let (status, _) = agent.tool(sid, tool, body).await;
        got.push((tool.into(), status.as_u16()));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_browser_is_the_operators_alone_before_during_and_after_the_live_view() {
    // Arrange: olive starts a refresh session of acme; acme's agent key.
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let body = format!(
        "tenant=acme&domains=127.0.0.1&start_url={}",
        urlencode(&site.url("/pad"))
    );
    let (status, v) = app.server_fn("start_refresh", &body, Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let sid = v.as_str().expect("the session id").to_owned();
    let live = app
        .state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .expect("running");
    // Control is the operator's from the start, before any view connects.
    assert_eq!(
        live.control().map(|h| h.name),
        Some("olive".to_owned()),
        "control at open"
    );
    let hidden = |got: &[(String, u16)]| {
        got.iter()
            .all(|(what, s)| if what == "listed" { *s == 0 } else { *s == 404 })
    };

    // Before the live view connects.
    let got = agent_reaches(&agent, &sid).await;
    assert!(hidden(&got), "before the view: {got:?}");
    let (status, v) = agent.close(&sid).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");

    // While it is open.
    let mut view = open_view(&app, &sid, &cookie).await;
    view.wait_for("a frame", |v| v["type"] == "frame").await;
    let got = agent_reaches(&agent, &sid).await;
    assert!(hidden(&got), "while watched: {got:?}");

    // Another operator of the same scope, even an admin, finds no such
    // session: no ticket, no socket (with a ticket issued by hand), no
    // preview, save or code, no control.
    let (oscar, other) = app.operator_session("oscar", Role::Admin).await;
    let (status, v) = app
        .server_fn("live_ticket", &format!("session={sid}"), Some(&other))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "live_ticket: {v}");
    let ticket = app
        .state
        .live
        .tickets
        .issue(&app.state.store, &oscar, &sid.parse().unwrap())
        .await
        .unwrap();
    let refused = connect(&app, &format!("/live/{sid}?ticket={ticket}"), Some(&other)).await;
    assert_eq!(
        refused.as_ref().err().map(|(s, _)| *s),
        Some(404),
        "another operator's socket: {:?}",
        refused.as_ref().err()
    );
    for (f, body) in [
        (
            "refresh_preview",
            format!("session={sid}&domains=127.0.0.1"),
        ),
        ("save_refresh", format!("session={sid}&domains=127.0.0.1")),
        ("type_totp", format!("session={sid}&label=admin")),
    ] {
        let (status, v) = app.server_fn(f, &body, Some(&other)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{f}: {v}");
    }
    let taken = app
        .state
        .sessions
        .take_control(&live, &oscar, "oscar")
        .await;
    assert!(taken.is_err(), "control passed: {taken:?}");
    assert_eq!(live.control().map(|h| h.name), Some("olive".to_owned()));

    // After it closes; control is not handed back (there is no agent).
    drop(view);
    let (status, v) = app
        .server_fn("release_control", &format!("session={sid}"), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{v}");
    let got = agent_reaches(&agent, &sid).await;
    assert!(hidden(&got), "after the view: {got:?}");
    assert!(live.control().is_some(), "control kept by the operator");
    // Nothing the agent sent reached the browser: still on the start page.
    crate::helpers::wait_until("the start page, not the look-alike", PATIENCE, || async {
        let page = live.page(&mut *live.tabs.lock().await).await.unwrap();
        let url = cordon::cdp::current(&page).await.unwrap().final_url;
        if url.ends_with("/pad") {
            Ok(())
        } else {
            Err(url)
        }
    })
    .await;

    // Ended, it stays hidden (not 410: it never was the agent's).
    app.state
        .sessions
        .end_by_operator(&sid.parse().unwrap(), "olive")
        .await
        .unwrap();
    let (status, v) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_form_posted_before_the_page_hydrated_lands_on_the_live_page() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let _tenant = app.agent("acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // As a browser posts a form: it asks for HTML and comes from /credentials.
    let res = plain
        .post(app.url("/ui/fn/start_refresh"))
        .header("origin", format!("http://localhost:{}", app.addr.port()))
        .header("host", format!("localhost:{}", app.addr.port()))
        .header(
            "referer",
            format!("http://localhost:{}/credentials", app.addr.port()),
        )
        .header("accept", "text/html,application/xhtml+xml")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", &cookie)
        .body(format!(
            "tenant=acme&domains=127.0.0.1&start_url={}",
            urlencode(&site.url("/pad"))
        ))
        .send()
        .await
        .expect("request");
    let status = res.status();
    let location = res
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(status.is_redirection(), "{status} {location}");
    let sid = location
        .strip_prefix("/sessions/")
        .and_then(|r| r.strip_suffix("/live"))
        .unwrap_or_else(|| panic!("not the live page: {location}"));
    let live = app
        .state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .expect("running");
    assert_eq!(live.mode.as_str(), "refresh");
    app.stop().await;
}

/// A page's dialog stops it: the view shows the dialog (its kind and
/// message) with the page state, the operator's other input is refused
/// while it is open, and the operator answers it from the view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sees_and_answers_a_pages_dialog_in_the_view() {
    let Setup {
        app, sid, cookie, ..
    } = setup("/hostile/confirm-dialog.html").await;
    let mut view = open_view(&app, &sid, &cookie).await;
    view.wait_title("Repository").await;
    view.send(json!({ "type": "take_control" })).await;
    view.wait_for("control", |v| v["type"] == "control" && v["yours"] == true)
        .await;
    // "Next" asks to confirm a deletion.
    view.click(200.0, 100.0).await;
    let page = view
        .wait_for("the dialog shown", |v| {
            v["type"] == "page" && v["dialog"].is_object()
        })
        .await;
    assert_eq!(page["dialog"]["kind"], "confirm", "{page}");
    assert!(
        page["dialog"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Delete repository acme/site?")),
        "{page}"
    );
    // The page is stopped: a click is refused, and says why.
    view.click(200.0, 400.0).await;
    let refused = view.wait_error("dialog_open").await;
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("confirm"),
        "{refused}"
    );
    // Bad answers are refused and change nothing.
    view.send(json!({ "type": "dialog", "accept": "yes" }))
        .await;
    view.wait_error("bad_message").await;
    view.send(json!({ "type": "dialog", "accept": true, "text": "x".repeat(5000) }))
        .await;
    view.wait_error("bad_message").await;
    // Cancel: the dialog goes, the page goes on.
    view.send(json!({ "type": "dialog", "accept": false }))
        .await;
    view.wait_for("the dialog gone", |v| {
        v["type"] == "page" && v["title"] == "KEPT" && v.get("dialog").is_none()
    })
    .await;
    app.stop().await;
}

/// Chromium has one screencast per tab: a second view of it closing
/// (which stops that screencast) leaves the first view's picture live,
/// as the first view starts it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_one_view_leaves_the_others_picture_live() {
    let Setup {
        site: _site,
        app,
        agent: _agent,
        sid,
        cookie,
    } = setup("/pad").await;
    let live = app.live("acme", &sid).await;
    let mut a = open_view(&app, &sid, &cookie).await;
    a.wait_for("a frame", |v| v["type"] == "frame").await;
    a.send(json!({ "type": "take_control" })).await;
    a.wait_for("control taken", |v| {
        v["type"] == "control" && v["yours"] == true
    })
    .await;
    let mut b = open_view(&app, &sid, &cookie).await;
    b.wait_for("a frame", |v| v["type"] == "frame").await;
    let stops = live.screencast_stops();
    drop(b);
    crate::helpers::wait_until("the second view's stop", PATIENCE, || async {
        if live.screencast_stops() > stops {
            Ok(())
        } else {
            Err("not stopped yet".to_owned())
        }
    })
    .await;
    // A click that repaints: the first view sees a frame made after it.
    let clicked_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    a.click(200.0, 300.0).await;
    a.wait_title("clicked 1").await;
    a.wait_for("a frame made after the click", |v| {
        v["type"] == "frame" && v["ts"].as_f64().is_some_and(|t| t > clicked_ms)
    })
    .await;
    app.stop().await;
}
