//! The main flow: open, drive with every tool, tabs and frames, close.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::audit_actions;
use crate::helpers::{Backend, PATIENCE, both_backends, session_app, wait_until};
use crate::site::{self};

both_backends!(a_session_opens_navigates_screenshots_and_closes);

/// The file a `screenshot` answer says was kept, named without the host's
/// own paths (relative to the data folder, and by its id in the archive).
fn kept_file(
    app: &crate::helpers::TestApp,
    sid: &str,
    shot: &Value,
    ext: &str,
) -> std::path::PathBuf {
    let kept = shot["persisted_path"]
        .as_str()
        .unwrap_or_else(|| panic!("not kept: {shot}"));
    let file = kept
        .strip_prefix(&format!("sessions/acme/{sid}/"))
        .unwrap_or_else(|| panic!("{shot}"));
    let seq: u64 = file
        .strip_suffix(&format!(".{ext}"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{shot}"));
    assert_eq!(shot["screenshot_id"], format!("acme:{sid}:{seq}"), "{shot}");
    app.state
        .sessions
        .recorder()
        .session_dir("acme", sid)
        .join(file)
}

async fn a_session_opens_navigates_screenshots_and_closes(backend: Backend) {
    let site = site::start().await;
    let app = session_app(backend, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;

    let sid = agent.open(json!({})).await;
    let (status, nav) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert_eq!(nav["status"], 200);
    assert_eq!(nav["title"], "Login");
    assert_eq!(nav["final_url"], site.url("/form"));

    let (status, shot) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (shot["width"].as_u64(), shot["height"].as_u64()),
        (Some(1280), Some(720))
    );
    let path = kept_file(&app, &sid, &shot, "png");
    assert!(path.is_file(), "{}", path.display());

    let (status, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(
        (status, info["state"].as_str()),
        (StatusCode::OK, Some("ready"))
    );

    let (status, closed) = agent.close(&sid).await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    assert_eq!(closed["state"], "closed");
    assert_eq!(closed["close_reason"], "client");
    assert!(!path.exists(), "transient screenshots are removed at close");

    // Audit before action: each call left a `requested` row, in order.
    let actions: Vec<String> = audit_actions(&app, &sid)
        .await
        .into_iter()
        .map(|a| a.0)
        .collect();
    assert_eq!(
        actions,
        [
            "session.open",
            "tool.navigate",
            "tool.screenshot",
            "session.close"
        ]
    );

    // Closed is gone, not missing.
    let (status, err) = agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;
    assert_eq!(status, StatusCode::GONE, "{err}");
    assert_eq!(err["error"]["code"], "gone");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn element_tools_fill_and_submit_a_form_without_leaking_the_typed_text() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "audit" })).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/form") }))
        .await;

    let (status, snap) = agent.tool(&sid, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{snap}");
    let text = snap.to_string();
    let find_ref = |name: &str| -> String {
        fn walk(nodes: &Value, name: &str) -> Option<String> {
            for n in nodes.as_array()? {
                if n["role"] == "textbox" && n["name"] == name {
                    return n["ref"].as_str().map(str::to_owned);
                }
                if let Some(r) = walk(&n["children"], name) {
                    return Some(r);
                }
            }
            None
        }
        walk(&snap["nodes"], name).unwrap_or_else(|| panic!("no textbox {name} in {text}"))
    };
    let user = find_ref("User");
    let pass = find_ref("Password");

    let secret = "pw-canary-7f3a9";
    assert_eq!(
        agent
            .tool(&sid, "type", json!({ "ref": user, "text": "alice" }))
            .await
            .0,
        StatusCode::OK
    );
    // Credentials come only from the vault: the risk gate refuses typing
    // into a password field outright.
    let refused = agent
        .tool(&sid, "type", json!({ "ref": pass, "text": secret }))
        .await;
    crate::helpers::assert_error(&refused, StatusCode::FORBIDDEN, "denied_by_policy");
    let (status, sel) = agent
        .tool(
            &sid,
            "select",
            json!({ "selector": "#color", "values": ["Green"] }),
        )
        .await;
    assert_eq!(
        (status, sel["selected"].clone()),
        (StatusCode::OK, json!(["g"]))
    );
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "selector": "#go" }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, waited) = agent
        .tool(&sid, "wait_for", json!({ "text": "hello alice (0)" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{waited}");

    // The password's value never appears in a snapshot, the audit log or a response.
    let (_, snap2) = agent.tool(&sid, "snapshot", json!({})).await;
    assert!(!snap2.to_string().contains(secret));
    let audit = app.state.store.audit_page(0, 10_000).await.unwrap();
    let audit_text = format!("{audit:?}");
    assert!(
        !audit_text.contains(secret) && !audit_text.contains("alice"),
        "typed text leaked into the audit log"
    );
    assert!(audit_text.contains("[typed 15 chars]"));

    let (status, dom) = agent
        .tool(&sid, "read_dom", json!({ "max_chars": 50 }))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(dom["truncated_to"], 50);
    assert_eq!(dom["html"].as_str().unwrap().chars().count(), 50);

    // Follow a link, go back and forward, reload.
    assert_eq!(
        agent
            .tool(&sid, "click", json!({ "selector": "#next" }))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        agent
            .tool(&sid, "wait_for", json!({ "selector": "#back" }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, back) = agent.tool(&sid, "back", json!({})).await;
    assert_eq!(
        (status, back["final_url"].as_str(), &back["moved"]),
        (
            StatusCode::OK,
            Some(site.url("/form").as_str()),
            &json!(true)
        ),
        "{back}"
    );
    let (_, fwd) = agent.tool(&sid, "forward", json!({})).await;
    assert_eq!(
        fwd["final_url"].as_str(),
        Some(site.url("/links").as_str()),
        "{fwd}"
    );
    assert_eq!(
        agent.tool(&sid, "reload", json!({})).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent.tool(&sid, "press", json!({ "key": "Tab" })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent.tool(&sid, "scroll", json!({ "dy": 200 })).await.0,
        StatusCode::OK
    );
    assert_eq!(
        agent
            .tool(&sid, "hover", json!({ "x": 10, "y": 10 }))
            .await
            .0,
        StatusCode::OK
    );
    let (status, pdf) = agent.tool(&sid, "pdf", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(pdf["pdf_base64"].as_str().unwrap().starts_with("JVBERi0")); // "%PDF-"

    // Audit recording keeps screenshots after close.
    let (_, shot) = agent
        .tool(
            &sid,
            "screenshot",
            json!({ "format": "jpeg", "quality": 50 }),
        )
        .await;
    let path = kept_file(&app, &sid, &shot, "jpg");
    agent.close(&sid).await;
    assert!(path.is_file(), "audit screenshots outlive the session");
    app.stop().await;
}

/// A tab whose page asks "Leave site?" on the way out closes when the
/// agent closes it: its `beforeunload` handler does not run, so no dialog
/// keeps it open or stops the session's other tabs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_that_asks_before_it_unloads_still_closes() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/leave") }))
        .await;
    // The page has had a gesture: Chromium would ask now.
    let (status, clicked) = agent.tool(&sid, "click", json!({ "selector": "#b" })).await;
    assert_eq!(status, StatusCode::OK, "{clicked}");
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    let asking = tabs[0]["tab_id"].as_str().unwrap().to_owned();
    let (status, tab) = agent
        .post(
            &format!("/api/sessions/{sid}/tabs"),
            json!({ "url": site.url("/links") }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{tab}");
    let (status, closed) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/{asking}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{closed}");
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs.as_array().map(Vec::len), Some(1), "{tabs}");
    assert_ne!(tabs[0]["tab_id"].as_str(), Some(asking.as_str()), "{tabs}");
    assert!(tabs[0]["dialog"].is_null(), "{tabs}");
    let (status, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the other tab is not stopped: {dom}"
    );
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_follow_popups_and_can_be_focused_and_closed() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    agent
        .tool(&sid, "navigate", json!({ "url": site.url("/popup") }))
        .await;
    agent
        .tool(&sid, "click", json!({ "selector": "#open" }))
        .await;
    let tabs = wait_until("the popup to appear as a tab", PATIENCE, || async {
        let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
        if tabs.as_array().is_some_and(|t| t.len() == 2) {
            Ok(tabs)
        } else {
            Err(tabs.to_string())
        }
    })
    .await;
    let popup = tabs
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["active"] == false)
        .unwrap_or_else(|| panic!("{tabs}"))["tab_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, focused) = agent
        .tool(&sid, &format!("tabs/{popup}/focus"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{focused}");
    let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert!(
        dom["html"].as_str().unwrap().contains("id=\"back\""),
        "tools act on the focused tab"
    );
    let (status, _) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/{popup}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs.as_array().map(Vec::len), Some(1), "{tabs}");
    let last = tabs[0]["tab_id"].as_str().unwrap().to_owned();
    let (status, err) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/{last}"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("last_tab")),
        "{err}"
    );
    // An id that is no tab of this session: named as such, not as the last tab.
    let (status, err) = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/tabs/0123456789ABCDEF"),
            None,
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("tab_not_found")),
        "{err}"
    );
    let (status, tab) = agent
        .post(
            &format!("/api/sessions/{sid}/tabs"),
            json!({ "url": site.url("/links") }),
        )
        .await;
    assert_eq!(
        (status, tab["active"].clone()),
        (StatusCode::OK, json!(true))
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_with_iframes_load_and_every_frame_request_passes_the_guard() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let (status, nav) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/iframe"), "wait": "networkidle" }),
        )
        .await;
    assert_eq!(
        (status, nav["title"].as_str()),
        (StatusCode::OK, Some("Frames")),
        "{nav}"
    );
    let live = app.live("acme", &sid).await;
    let sandbox = live.sandbox.id.clone();
    drop(live);
    let allowed = app
        .state
        .store
        .egress_for_sandbox(&sandbox.parse().unwrap(), 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| {
            e.entry.port == site.addr.port()
                && e.entry.decision == cordon::egress::Decision::Allowed
        })
        .count();
    assert!(
        allowed >= 2,
        "the page and its frame each went through the guard ({allowed})"
    );
    let (status, _) = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/form"), "wait": "domcontentloaded" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    app.stop().await;
}
