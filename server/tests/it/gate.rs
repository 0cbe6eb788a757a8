//! The risk gate end to end, against a real Chromium and a loopback site:
//! risky agent actions wait for an operator's decision in the dashboard
//! (server functions, as the Approvals page calls them), time out to a
//! denial, or are refused outright (a password field); harmless ones are
//! not held; dry-run only records.

use std::time::Duration;

use app::api::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, Backend, PATIENCE, TestApp, assert_error, session_app};
use crate::site;

/// The app with three tenants' rules: `acme` waits 30 s, `slow` 1 s,
/// `dry` only records.
pub(crate) async fn app(site: &site::Site) -> TestApp {
    session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_APPROVAL_TIMEOUT_S", "30"),
            (
                "CORDON_TENANT_RISK",
                r#"{"slow": {"approval_timeout_s": 1}, "dry": {"dry_run": true}}"#,
            ),
        ],
    )
    .await
}

/// `tenant`'s agent with a session on the danger page.
pub(crate) async fn on_danger_page(
    app: &TestApp,
    site: &site::Site,
    tenant: &str,
) -> (AgentClient, String) {
    let agent = app.agent(tenant).await;
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url("/danger")).await;
    (agent, sid)
}

/// The pending approvals as the Approvals page reads them.
pub(crate) async fn pending(app: &TestApp, cookie: &str) -> Vec<Value> {
    let (status, v) = app.server_fn("list_approvals", "", Some(cookie)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    v["pending"].as_array().cloned().unwrap_or_default()
}

/// Waits until exactly one approval is pending for `sid` and returns it.
pub(crate) async fn one_pending(app: &TestApp, cookie: &str, sid: &str) -> Value {
    crate::helpers::wait_until("an approval to wait", PATIENCE, || async {
        let all = pending(app, cookie).await;
        let mine: Vec<&Value> = all.iter().filter(|a| a["session"] == sid).collect();
        match mine.as_slice() {
            [one] => Ok((*one).clone()),
            _ => Err(format!("{all:?}")),
        }
    })
    .await
}

pub(crate) async fn decide(
    app: &TestApp,
    cookie: &str,
    id: &str,
    approve: bool,
) -> (StatusCode, Value) {
    app.server_fn(
        "decide_approval",
        &format!("id={id}&approve={approve}"),
        Some(cookie),
    )
    .await
}

pub(crate) async fn title(agent: &AgentClient, sid: &str) -> String {
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    tabs[0]["title"].as_str().unwrap_or_default().to_owned()
}

/// Waits for the page's title to become `want` (set by the page's click
/// handlers).
pub(crate) async fn wait_title(agent: &AgentClient, sid: &str, want: &str) {
    crate::helpers::wait_until(&format!("the title {want:?}"), PATIENCE, || async {
        let got = title(agent, sid).await;
        if got == want { Ok(()) } else { Err(got) }
    })
    .await;
}

/// The centre of `selector`'s box on the session's active tab, read
/// straight from the browser (agents have no script tool).
pub(crate) async fn centre_of(app: &TestApp, sid: &str, selector: &str) -> (f64, f64) {
    let live = app.live("acme", sid).await;
    let mut tabs = live.tabs.lock().await;
    let page = live.page(&mut tabs).await.unwrap();
    let v = cordon::cdp::evaluate(
        &page,
        &format!(
            "(() => {{ const r = document.querySelector({selector:?}).getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        ),
    )
    .await
    .unwrap();
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

pub(crate) async fn audit(app: &TestApp) -> Vec<cordon::audit::Event> {
    app.state.store.audit_page(0, 10_000).await.unwrap()
}

/// An approval that lands after the agent's key was revoked runs
/// nothing: the key is asked after again once the operator has decided.
#[tokio::test]
async fn an_approval_for_a_key_revoked_while_it_waited_runs_nothing() {
    let site = site::start().await;
    let app = app(&site).await;
    let (agent, sid) = on_danger_page(&app, &site, "acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let click = {
        let agent = agent.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            agent
                .tool(&sid, "click", json!({ "selector": "#delete" }))
                .await
        })
    };
    let waiting = one_pending(&app, &cookie, &sid).await;
    let id = crate::helpers::key_id(&app, "acme").await.parse().unwrap();
    assert!(app.state.store.api_key_revoke(&id).await.unwrap());
    let (status, _) = decide(&app, &cookie, waiting["id"].as_str().unwrap(), true).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = click.await.unwrap();
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "denied_by_policy", "{body}");
    // Nothing was pressed (read straight from the browser: the key is gone).
    let live = app.live("acme", &sid).await;
    let mut tabs = live.tabs.lock().await;
    let page = live.page(&mut tabs).await.unwrap();
    let title = cordon::cdp::evaluate(&page, "document.title")
        .await
        .unwrap();
    assert_eq!(title, "Danger", "the click ran for a revoked key");
    drop(tabs);
    let rows = audit(&app).await;
    assert!(
        rows.iter()
            .any(|e| e.action == "tool.click" && e.outcome == "refused: key_revoked"),
        "no refusal audited"
    );
}

#[tokio::test]
async fn a_destructive_click_waits_for_the_operator_who_approves_one_and_denies_another() {
    let site = site::start().await;
    let app = app(&site).await;
    let (agent, sid) = on_danger_page(&app, &site, "acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let (_, viewer) = app.operator_session("vic", Role::Viewer).await;

    // Act: the agent clicks "Delete account" (through the button's inner span).
    let click = {
        let agent = agent.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            agent
                .tool(&sid, "click", json!({ "selector": "#delete span" }))
                .await
        })
    };
    let waiting = one_pending(&app, &cookie, &sid).await;

    // Assert: it waits, described for the operator, with the page outlined.
    assert_eq!(waiting["action"], "tool.click");
    assert_eq!(waiting["level"], "high");
    assert_eq!(waiting["tenant"], "acme");
    let reasons = waiting["reasons"].to_string();
    assert!(
        reasons.contains("destructive_click") && reasons.contains("Delete account"),
        "{reasons}"
    );
    assert_eq!(title(&agent, &sid).await, "Danger", "not clicked yet");
    let id = waiting["id"].as_str().unwrap().to_owned();
    assert_eq!(waiting["has_screenshot"], true);
    let shot = app
        .http
        .get(app.url(&format!("/ui/approvals/{id}/screenshot")))
        .header("cookie", &cookie)
        .header("host", format!("localhost:{}", app.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), StatusCode::OK);
    assert_eq!(shot.headers()["content-type"], "image/jpeg");
    let img = image::load_from_memory(&shot.bytes().await.unwrap()).unwrap();
    assert!(img.width() > 100);
    let (status, count) = app.server_fn("pending_approvals", "", Some(&cookie)).await;
    assert_eq!((status, count), (StatusCode::OK, json!(1)));
    // A viewer may look but not decide.
    let (status, _) = decide(&app, &viewer, &id, true).await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    let (status, v) = decide(&app, &cookie, &id, true).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let answer = click.await.unwrap();
    assert_eq!(answer.0, StatusCode::OK, "{}", answer.1);
    wait_title(&agent, &sid, "deleted 1").await;
    // Decided once: a second decision finds nothing waiting.
    let (status, _) = decide(&app, &cookie, &id, false).await;
    assert_eq!(status, StatusCode::CONFLICT);

    // Act again, at the button's point this time (as a model clicks):
    // the operator denies.
    let (x, y) = centre_of(&app, &sid, "#delete").await;
    let click = {
        let agent = agent.clone();
        let sid = sid.clone();
        tokio::spawn(async move { agent.tool(&sid, "click", json!({ "x": x, "y": y })).await })
    };
    let waiting = one_pending(&app, &cookie, &sid).await;
    let denied_id = waiting["id"].as_str().unwrap().to_owned();
    let (status, v) = decide(&app, &cookie, &denied_id, false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let answer = click.await.unwrap();
    assert_error(&answer, StatusCode::FORBIDDEN, "denied_by_operator");
    assert_eq!(
        title(&agent, &sid).await,
        "deleted 1",
        "the denied click never ran"
    );
    assert!(pending(&app, &cookie).await.is_empty());

    // Every step is audited, with the operator.
    let events = audit(&app).await;
    let decided: Vec<_> = events
        .iter()
        .filter(|e| e.action == "approval.decided")
        .collect();
    assert_eq!(decided.len(), 2, "{decided:?}");
    assert_eq!(decided[0].outcome, "approved");
    assert_eq!(decided[1].outcome, "denied");
    assert!(decided.iter().all(|e| e.actor.starts_with("operator:op_")));
    assert_eq!(
        events
            .iter()
            .filter(|e| e.action == "approval.requested")
            .count(),
        2
    );
    assert!(
        events
            .iter()
            .any(|e| e.action == "tool.click" && e.outcome == "refused: denied_by_operator")
    );
}

#[tokio::test]
async fn typing_a_password_is_refused_even_when_the_page_asks_for_it_and_harmless_clicks_are_not_held()
 {
    let site = site::start().await;
    let app = app(&site).await;
    let (agent, sid) = on_danger_page(&app, &site, "acme").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let secret = "pw-canary-51c0";

    // The page text asks for the password; an obedient agent tries, by
    // selector, by focusing first, and key by key.
    let by_selector = agent
        .tool(
            &sid,
            "type",
            json!({ "selector": "#pw", "text": secret, "submit": true }),
        )
        .await;
    assert_error(&by_selector, StatusCode::FORBIDDEN, "denied_by_policy");
    let (status, _) = agent
        .tool(&sid, "click", json!({ "selector": "#pw" }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let at_focus = agent.tool(&sid, "type", json!({ "text": secret })).await;
    assert_error(&at_focus, StatusCode::FORBIDDEN, "denied_by_policy");
    let key = agent.tool(&sid, "press", json!({ "key": "p" })).await;
    assert_error(&key, StatusCode::FORBIDDEN, "denied_by_policy");
    assert_eq!(title(&agent, &sid).await, "Danger", "nothing was submitted");

    // A harmless click runs at once and creates no approval.
    let started = std::time::Instant::now();
    let (status, v) = agent
        .tool(&sid, "click", json!({ "selector": "#next" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(started.elapsed() < Duration::from_secs(10));
    wait_title(&agent, &sid, "next").await;

    let events = audit(&app).await;
    assert!(
        !events.iter().any(|e| e.action.starts_with("approval.")),
        "nothing waited: {events:?}"
    );
    assert!(pending(&app, &cookie).await.is_empty());
    let refused = events
        .iter()
        .filter(|e| e.outcome == "refused: denied_by_policy")
        .count();
    assert_eq!(refused, 3);
    let text = format!("{events:?}");
    assert!(!text.contains(secret), "typed text reached the audit log");
    assert!(text.contains("[typed 14 chars]"));
}

#[tokio::test]
async fn an_undecided_action_times_out_and_dry_run_only_records() {
    let site = site::start().await;
    let app = app(&site).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;

    // `slow` waits one second, then is denied.
    // (By a snapshot's ref.)
    let (slow, sid) = on_danger_page(&app, &site, "slow").await;
    let (status, snap) = slow.tool(&sid, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{snap}");
    let r = crate::helpers::find_ref(&snap["nodes"], "button", "Delete account")
        .unwrap_or_else(|| panic!("no Delete account button in {snap}"));
    let answer = slow.tool(&sid, "click", json!({ "ref": r })).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "approval_timed_out");
    assert_eq!(title(&slow, &sid).await, "Danger");
    assert!(pending(&app, &cookie).await.is_empty());
    let events = audit(&app).await;
    assert!(
        events
            .iter()
            .any(|e| e.action == "approval.timed_out" && e.actor == "system"),
        "{events:?}"
    );

    // `dry` records what would have waited, and runs it at once.
    let (dry, sid) = on_danger_page(&app, &site, "dry").await;
    let (status, v) = dry
        .tool(&sid, "click", json!({ "selector": "#delete" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    wait_title(&dry, &sid, "deleted 1").await;
    let events = audit(&app).await;
    let would: Vec<_> = events
        .iter()
        .filter(|e| e.action == "approval.would_wait")
        .collect();
    assert_eq!(would.len(), 1, "{events:?}");
    assert_eq!(would[0].session.as_deref(), Some(sid.as_str()));
    assert!(!events.iter().any(|e| e.action == "approval.requested"
        && e.session.as_deref() == Some(sid.as_str())));
}

#[tokio::test]
async fn navigation_outside_an_operator_sessions_domains_waits_for_a_decision() {
    let site = site::start().await;
    let app = app(&site).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let agent = app.agent("acme").await;
    let (_, token, _) = crate::grants::granted(&app, &agent, &["127.0.0.1"], true).await;
    let (status, opened) = crate::grants::open_operator(&agent, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_owned();

    // Inside its domains: at once.
    agent.navigate_ok(&sid, &site.url("/danger")).await;
    assert!(pending(&app, &cookie).await.is_empty());

    // Outside: it waits; the operator denies.
    let away = format!("http://localhost:{}/form", site.addr.port());
    let nav = {
        let agent = agent.clone();
        let sid = sid.clone();
        tokio::spawn(async move { agent.tool(&sid, "navigate", json!({ "url": away })).await })
    };
    let waiting = one_pending(&app, &cookie, &sid).await;
    assert_eq!(waiting["action"], "tool.navigate");
    assert!(
        waiting["reasons"]
            .to_string()
            .contains("off_list_navigation"),
        "{waiting}"
    );
    let (status, _) = decide(&app, &cookie, waiting["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK);
    assert_error(
        &nav.await.unwrap(),
        StatusCode::FORBIDDEN,
        "denied_by_operator",
    );
    assert_eq!(title(&agent, &sid).await, "Danger");

    // A link that leads outside waits too; denied, the page stays.
    agent.navigate_ok(&sid, &site.url("/away-link")).await;
    let (status, v) = waits_then(
        &app,
        &cookie,
        &agent,
        &sid,
        "click",
        json!({ "selector": "#away" }),
        "a link to localhost",
        false,
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("denied_by_operator")),
        "{v}"
    );
    assert_eq!(title(&agent, &sid).await, "Away");

    // So does going back to a page outside: approved there once, then
    // back inside, `back` would leave again.
    let away = format!("http://localhost:{}/form", site.addr.port());
    let (status, v) = waits_then(
        &app,
        &cookie,
        &agent,
        &sid,
        "navigate",
        json!({ "url": away }),
        "localhost",
        true,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    agent.navigate_ok(&sid, &site.url("/danger")).await;
    let (status, v) = waits_then(
        &app,
        &cookie,
        &agent,
        &sid,
        "back",
        json!({}),
        "history entry on localhost",
        false,
    )
    .await;
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("denied_by_operator")),
        "{v}"
    );
    assert_eq!(title(&agent, &sid).await, "Danger");
    assert!(pending(&app, &cookie).await.is_empty());
}

/// Runs `tool` in the background, waits until it waits for a decision
/// whose reasons mention `reason`, decides, and returns the tool's answer.
#[expect(clippy::too_many_arguments)]
async fn waits_then(
    app: &TestApp,
    cookie: &str,
    agent: &AgentClient,
    sid: &str,
    tool: &'static str,
    body: Value,
    reason: &str,
    approve: bool,
) -> (StatusCode, Value) {
    let call = {
        let agent = agent.clone();
        let sid = sid.to_owned();
        tokio::spawn(async move { agent.tool(&sid, tool, body).await })
    };
    let waiting = one_pending(app, cookie, sid).await;
    assert!(
        waiting["reasons"].to_string().contains(reason),
        "{reason}: {waiting}"
    );
    let (status, v) = decide(app, cookie, waiting["id"].as_str().unwrap(), approve).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    call.await.unwrap()
}
