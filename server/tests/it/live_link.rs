//! Live links against a real Chromium: an agent's capability URL to a
//! session's live view, its page and socket, the tenant's opt-in and
//! framing origins, input as the agent through the risk gate, take-over,
//! revocation and expiry, and the hostile cases (another tenant, another
//! session, forged and worn-out tokens, a view link that tries to drive).

use app::api::auth::Role;
use cordon::domain::{LiveLinkId, SessionId};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::gate::{decide, one_pending, wait_title};
use crate::helpers::{
    AgentClient, Backend, PATIENCE, TestApp, assert_error, session_app, wait_until,
};
use crate::live::{View, connect, open_view, reason};
use crate::site;

/// acme may make control links framed by its app; initech only view links;
/// globex none.
const POLICIES: &str = r#"{"acme":{"frame_ancestors":["https://app.acme.example","https://*.acme.test"],"control":true,"max_ttl_s":900},"initech":{}}"#;

struct Setup {
    site: site::Site,
    app: TestApp,
    agent: AgentClient,
    sid: String,
}

async fn setup(page: &str) -> Setup {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_TENANT_LIVE_LINKS", POLICIES)],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url(page)).await;
    Setup {
        site,
        app,
        agent,
        sid,
    }
}

/// Makes a link; answers (id, path and query of its URL).
async fn make_link(agent: &AgentClient, sid: &str, mode: &str) -> (String, String) {
    let (status, v) = agent
        .post(
            &format!("/api/sessions/{sid}/live_link"),
            json!({ "mode": mode }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(v["mode"], mode);
    assert_eq!(v["state"], "active");
    let url = v["url"].as_str().expect("a url");
    let parsed = url::Url::parse(url).unwrap();
    assert_eq!(parsed.path(), format!("/embed/{sid}"), "{url}");
    let token = parsed
        .query_pairs()
        .find(|(k, _)| k == "link")
        .map(|(_, v)| v.into_owned())
        .expect("a link token");
    assert!(token.starts_with("llk_") && token.len() > 40, "{url}");
    (
        v["id"].as_str().unwrap().to_owned(),
        format!("/embed/{sid}?link={token}"),
    )
}

/// A new link of `mode` and a view of it showing the page ("ready"):
/// (id, page path, view).
async fn watching(
    app: &TestApp,
    agent: &AgentClient,
    sid: &str,
    mode: &str,
) -> (String, String, View) {
    let (id, page) = make_link(agent, sid, mode).await;
    let mut view = connect(app, &ws_path(&page), None).await.expect("upgrade");
    view.wait_title("ready").await;
    (id, page, view)
}

/// Revokes link `id` of `sid` through the agent API (204).
async fn revoke(agent: &AgentClient, sid: &str, id: &str) {
    let answer = agent
        .call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}/live_link/{id}"),
            None,
        )
        .await;
    assert_eq!(answer.0, StatusCode::NO_CONTENT, "{answer:?}");
}

/// The link's socket path for its page path.
fn ws_path(page: &str) -> String {
    page.replacen("?link=", "/ws?link=", 1)
}

async fn rows(app: &TestApp, sid: &str) -> Vec<cordon::audit::Event> {
    let all = app.state.store.audit_page(0, 10_000).await.unwrap();
    all.into_iter()
        .filter(|e| e.session.as_deref() == Some(sid))
        .collect()
}

/// Waits for the view to end and answers the reason.
async fn ended(view: &mut View) -> String {
    let end = view.wait_for("the end", |v| v["type"] == "ended").await;
    reason(&end).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_link_shows_the_session_and_drives_it_as_the_agent_through_the_gate() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (link_id, page) = make_link(&agent, &sid, "control").await;

    // The page: framable only by the tenant's origins, no referrer, no
    // cookie of the dashboard's.
    let res = app.get(&page).await;
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers().clone();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("frame-ancestors https://app.acme.example https://*.acme.test"),
        "{csp}"
    );
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(!h.contains_key("x-frame-options"), "{h:?}");
    assert!(!h.contains_key("set-cookie"), "{h:?}");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-store");
    let body = res.text().await.unwrap();
    assert!(
        body.contains("data-mode=\"control\"") && body.contains("/embed/assets/embed.js"),
        "{body}"
    );
    let js = app.get("/embed/assets/embed.js").await;
    assert_eq!(js.status(), StatusCode::OK);
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("javascript")
    );

    // The socket: frames of the session's tab.
    let mut view = connect(&app, &ws_path(&page), None).await.expect("upgrade");
    let hello = view.wait_for("hello", |v| v["type"] == "hello").await;
    assert_eq!(hello["session"], sid.as_str());
    let control = view.wait_for("control", |v| v["type"] == "control").await;
    assert_eq!(
        control,
        json!({ "type": "control", "holder": null, "yours": false, "may_control": false })
    );
    view.wait_title("ready").await;

    // A harmless click lands.
    view.click(100.0, 400.0).await;
    wait_title(&agent, &sid, "next 1").await;

    // A destructive one waits for an operator, who denies it: it never lands.
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    view.click(100.0, 100.0).await;
    let approval = one_pending(&app, &cookie, &sid).await;
    assert!(
        approval["actor"]
            .as_str()
            .unwrap_or_default()
            .starts_with("agent:"),
        "{approval}"
    );
    let (status, v) = decide(&app, &cookie, approval["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let denied = view
        .wait_for("the denial", |v| {
            v["type"] == "error" && v["code"].as_str().is_some_and(|c| c.contains("denied"))
        })
        .await;
    assert!(!denied["message"].as_str().unwrap().is_empty(), "{denied}");
    view.click(100.0, 400.0).await;
    wait_title(&agent, &sid, "next 2").await;
    view.wait_for("the new title", |v| {
        v["type"] == "page" && v["title"] == "next 2"
    })
    .await;
    assert!(view.frames > 0, "the page's frames arrive");

    // Audited as the agent, through the live link.
    let all = rows(&app, &sid).await;
    let watch = all
        .iter()
        .find(|e| e.action == "session.watch")
        .expect("the view is audited");
    assert!(watch.actor.starts_with("agent:"), "{watch:?}");
    assert!(
        watch.params.contains("live_link") && watch.params.contains(&link_id),
        "{watch:?}"
    );
    let input = all
        .iter()
        .filter(|e| e.action.starts_with("input.") && e.params.contains("\"via\":\"live_link\""))
        .collect::<Vec<_>>();
    assert!(!input.is_empty(), "{all:#?}");
    assert!(
        input.iter().all(|e| e.actor.starts_with("agent:")),
        "{input:#?}"
    );
    assert!(
        all.iter().any(|e| e.action == "live_link.create"),
        "{all:#?}"
    );
    let text = format!("{all:?}");
    let token = page.split_once("link=").unwrap().1;
    assert!(!text.contains(token), "no token in the audit");

    agent.close(&sid).await;
    assert!(ended(&mut view).await.contains("closed"), "{:?}", view.seen);
    let res = app.get(&page).await;
    assert_eq!(res.status(), StatusCode::GONE);
    assert!(res.text().await.unwrap().contains("has ended"));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_link_watches_but_never_drives_navigates_or_takes_control() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (link_id, _, mut view) = watching(&app, &agent, &sid, "view").await;
    view.click(100.0, 400.0).await;
    view.wait_error("view_only").await;
    for msg in [
        json!({ "type": "take_control" }),
        json!({ "type": "navigate", "url": "https://example.com/" }),
        json!({ "type": "key", "action": "down", "key": "Enter", "code": "Enter" }),
        json!({ "type": "text", "text": "hello" }),
    ] {
        view.send(msg).await;
        view.wait_error("view_only").await;
    }
    // Hostile frames are dropped; the view stays.
    view.send_raw(tokio_tungstenite::tungstenite::Message::Text(
        "{not json".into(),
    ))
    .await;
    view.wait_error("bad_message").await;
    view.send_raw(tokio_tungstenite::tungstenite::Message::Text(
        "x".repeat(20_000).into(),
    ))
    .await;
    view.wait_error("too_large").await;
    assert_eq!(crate::gate::title(&agent, &sid).await, "ready");
    let refused: Vec<_> = rows(&app, &sid)
        .await
        .into_iter()
        .filter(|e| e.action == "live_link.refused")
        .collect();
    assert_eq!(refused.len(), 1, "refused once per view: {refused:#?}");
    assert!(refused[0].params.contains(&link_id));

    // A control link drives with pointer and keys only.
    let (_, _, mut driver) = watching(&app, &agent, &sid, "control").await;
    for msg in [
        json!({ "type": "take_control" }),
        json!({ "type": "navigate", "url": "https://example.com/" }),
        json!({ "type": "tab_open" }),
        json!({ "type": "resize", "width": 500, "height": 500 }),
    ] {
        driver.send(msg).await;
        driver.wait_error("forbidden").await;
    }
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(tabs.as_array().map(Vec::len), Some(1), "{tabs}");
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_are_off_unless_the_tenant_allows_them_and_stay_within_their_tenant_and_session() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let path = format!("/api/sessions/{sid}/live_link");

    // A tenant without settings, one with view links only.
    for (tenant, mode, code) in [
        ("globex", "view", "live_links_disabled"),
        ("initech", "control", "live_link_control_disabled"),
    ] {
        let other = app.agent(tenant).await;
        let their = other.open(json!({})).await;
        let answer = other
            .post(
                &format!("/api/sessions/{their}/live_link"),
                json!({ "mode": mode }),
            )
            .await;
        assert_error(&answer, StatusCode::FORBIDDEN, code);
        other.close(&their).await;
    }
    // Bad input.
    for body in [
        json!({ "mode": "view", "ttl_s": 10 }),
        json!({ "mode": "view", "ttl_s": 901 }),
        json!({ "mode": "drive" }),
        json!({ "mode": "view", "extra": 1 }),
        json!({}),
    ] {
        let answer = agent.post(&path, body.clone()).await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
    }
    // Another tenant's key cannot make, list or revoke acme's links.
    let (link_id, page) = make_link(&agent, &sid, "view").await;
    let globex = app.agent("globex").await;
    assert_error(
        &globex.post(&path, json!({ "mode": "view" })).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(&globex.get(&path).await, StatusCode::NOT_FOUND, "not_found");
    let answer = globex
        .call(reqwest::Method::DELETE, &format!("{path}/{link_id}"), None)
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    // A link of one session opens nothing of another.
    let other_sid = agent.open(json!({})).await;
    let token = page.split_once("link=").unwrap().1.to_owned();
    let res = app.get(&format!("/embed/{other_sid}?link={token}")).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let refused = connect(&app, &format!("/embed/{other_sid}/ws?link={token}"), None).await;
    assert_eq!(refused.err().map(|e| e.0), Some(404));
    // Forged, empty, foreign-prefixed and oversized tokens.
    for bad in [
        String::new(),
        "llk_AAAA".to_owned(),
        format!("lvt_{}", &token[4..]),
        format!("llk_{}", "A".repeat(500)),
        format!("{token}x"),
    ] {
        let res = app.get(&format!("/embed/{sid}?link={bad}")).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{bad}");
        let h = res.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(h.contains("frame-ancestors 'none'"), "{h}");
        let refused = connect(&app, &format!("/embed/{sid}/ws?link={bad}"), None).await;
        assert_eq!(refused.err().map(|e| e.0), Some(404), "{bad}");
    }
    // The dashboard's cookie opens no link socket, and the socket takes
    // no dashboard session for the link.
    let (_, cookie) = app.operator_session("olive", Role::Admin).await;
    let refused = connect(&app, &format!("/embed/{sid}/ws"), Some(&cookie)).await;
    assert_eq!(refused.err().map(|e| e.0), Some(404));
    // The listing shows the link, never its token.
    let (status, list) = agent.get(&path).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list[0]["id"], link_id.as_str());
    assert!(list[0].get("url").is_none(), "{list}");
    assert!(!list.to_string().contains(&token));
    agent.close(&other_sid).await;
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_expired_or_keyless_link_ends_its_open_views_and_its_page_says_why() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    // Revoked by the agent.
    let (id, page, mut view) = watching(&app, &agent, &sid, "control").await;
    revoke(&agent, &sid, &id).await;
    assert!(
        ended(&mut view).await.contains("revoked"),
        "{:?}",
        view.seen
    );
    let res = app.get(&page).await;
    assert_eq!(res.status(), StatusCode::GONE);
    let csp = res.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("https://app.acme.example"),
        "the refusal shows in the tenant's frame: {csp}"
    );
    assert!(res.text().await.unwrap().contains("revoked"));
    assert_eq!(
        connect(&app, &ws_path(&page), None)
            .await
            .err()
            .map(|e| e.0),
        Some(410)
    );
    assert!(
        rows(&app, &sid)
            .await
            .iter()
            .any(|e| e.action == "live_link.revoke"),
        "revocation is audited"
    );
    // Expired while watching.
    let (_, page, mut view) = watching(&app, &agent, &sid, "view").await;
    app.db
        .raw("UPDATE live_links SET expires_at = 1")
        .await
        .unwrap();
    assert!(
        ended(&mut view).await.contains("expired"),
        "{:?}",
        view.seen
    );
    assert_eq!(app.get(&page).await.status(), StatusCode::GONE);
    // The key that made it revoked: its links stop too.
    let (_, page, mut view) = watching(&app, &agent, &sid, "view").await;
    let key_id: String = {
        let (_, list) = agent.get(&format!("/api/sessions/{sid}/live_link")).await;
        list[0]["key_id"].as_str().unwrap().to_owned()
    };
    assert!(
        app.state
            .store
            .api_key_revoke(&key_id.parse().unwrap())
            .await
            .unwrap()
    );
    assert!(
        ended(&mut view).await.contains("revoked"),
        "{:?}",
        view.seen
    );
    assert_eq!(app.get(&page).await.status(), StatusCode::GONE);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_who_takes_over_stops_a_control_links_input_without_being_named() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (_, _, mut link) = watching(&app, &agent, &sid, "control").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let mut op = open_view(&app, &sid, &cookie).await;
    op.wait_for("control", |v| v["type"] == "control").await;
    op.send(json!({ "type": "take_control" })).await;
    op.wait_for("control taken", |v| {
        v["type"] == "control" && v["yours"] == true
    })
    .await;
    let told = link
        .wait_for("the take-over", |v| {
            v["type"] == "control" && !v["holder"].is_null()
        })
        .await;
    assert_eq!(told["holder"], "An operator", "{told}");
    link.click(100.0, 400.0).await;
    let refused = link.wait_error("operator_has_control").await;
    assert!(!refused.to_string().contains("olive"), "{refused}");
    // Handed back: the link drives again (and the refused click never
    // landed: this one is the first).
    op.send(json!({ "type": "release_control" })).await;
    link.wait_for("control back", |v| {
        v["type"] == "control" && v["holder"].is_null()
    })
    .await;
    link.click(100.0, 400.0).await;
    wait_title(&agent, &sid, "next 1").await;
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_takes_three_views_at_once_and_the_dashboard_is_never_framed() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (_, page) = make_link(&agent, &sid, "view").await;
    let mut views = Vec::new();
    for _ in 0..3 {
        let mut v = connect(&app, &ws_path(&page), None).await.expect("upgrade");
        v.wait_for("hello", |m| m["type"] == "hello").await;
        views.push(v);
    }
    assert_eq!(
        connect(&app, &ws_path(&page), None)
            .await
            .err()
            .map(|e| e.0),
        Some(429)
    );
    drop(views.pop());
    wait_until("a view slot to free up", PATIENCE, || async {
        connect(&app, &ws_path(&page), None)
            .await
            .map_err(|e| format!("{e:?}"))
    })
    .await;
    // Every dashboard answer refuses to be framed.
    for path in ["/", "/login", "/approvals"] {
        let res = app.get(path).await;
        let h = res.headers();
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert!(
            h["content-security-policy"]
                .to_str()
                .unwrap()
                .contains("frame-ancestors 'none'"),
            "{path}: {h:?}"
        );
    }
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_opened_at_another_replica_is_carried_to_the_sessions_one() {
    let site = site::start().await;
    let (a, b) =
        crate::replicas::pair(&site.allow(), &[("CORDON_TENANT_LIVE_LINKS", POLICIES)]).await;
    let mut agent = a.agent("acme").await;
    // The session runs on `b`; the link's user reaches `a`.
    agent.base = b.url("");
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url("/two-buttons")).await;
    let (id, page) = make_link(&agent, &sid, "control").await;
    assert_eq!(a.get(&page).await.status(), StatusCode::OK);
    let mut view = connect(&a, &ws_path(&page), None)
        .await
        .expect("carried to b");
    view.wait_title("ready").await;
    view.click(100.0, 400.0).await;
    wait_title(&agent, &sid, "next 1").await;
    // Revoked through `b`: the view carried from `a` ends.
    revoke(&agent, &sid, &id).await;
    assert!(
        ended(&mut view).await.contains("revoked"),
        "{:?}",
        view.seen
    );
    assert_eq!(
        connect(&a, &ws_path(&page), None).await.err().map(|e| e.0),
        Some(410)
    );
    agent.close(&sid).await;
    drop(b);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_a_sessions_links_and_revoke_one_from_the_dashboard() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (id, _, mut view) = watching(&app, &agent, &sid, "control").await;
    let (_, viewer) = app.operator_session("vera", Role::Viewer).await;
    let (status, detail) = app
        .server_fn("get_session", &format!("id={sid}"), Some(&viewer))
        .await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let links = detail["live_links"].as_array().expect("links");
    assert_eq!(links.len(), 1, "{detail}");
    assert_eq!(links[0]["id"], id.as_str());
    assert_eq!(links[0]["state"], "active");
    assert!(
        !detail.to_string().contains("llk_"),
        "no token reaches the dashboard"
    );
    // A viewer may look, not revoke.
    let (status, v) = app
        .server_fn(
            "revoke_live_link",
            &format!("session={sid}&id={id}"),
            Some(&viewer),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{v}");
    let (_, op) = app.operator_session("olive", Role::Operator).await;
    let (status, v) = app
        .server_fn(
            "revoke_live_link",
            &format!("session={sid}&id=ll_nope"),
            Some(&op),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    // A malformed link id is refused as an unknown one, by the dashboard
    // and by the API, and revokes nothing (the link is revoked below).
    let unknown = LiveLinkId::generate().to_string();
    let dash_unknown = app
        .server_fn(
            "revoke_live_link",
            &format!("session={sid}&id={unknown}"),
            Some(&op),
        )
        .await;
    let api_unknown = agent
        .call(
            Method::DELETE,
            &format!("/api/sessions/{sid}/live_link/{unknown}"),
            None,
        )
        .await;
    assert_eq!(dash_unknown.0, StatusCode::NOT_FOUND, "{}", dash_unknown.1);
    assert_eq!(api_unknown.0, StatusCode::NOT_FOUND, "{}", api_unknown.1);
    for bad in [
        SessionId::generate().to_string(),
        format!("x_{}", &unknown[3..]),
        format!("{unknown}a"),
        format!("ll_{}", "é".repeat(13)),
        unknown.to_uppercase(),
        "ll_".to_owned(),
        String::new(),
    ] {
        let form: String = url::form_urlencoded::byte_serialize(bad.as_bytes()).collect();
        let (status, v) = app
            .server_fn(
                "revoke_live_link",
                &format!("session={sid}&id={form}"),
                Some(&op),
            )
            .await;
        assert_eq!(
            (status, &v["kind"]),
            (dash_unknown.0, &dash_unknown.1["kind"]),
            "{bad:?}: {v}"
        );
        if !bad.is_empty() {
            let answer = agent
                .call(
                    Method::DELETE,
                    &format!("/api/sessions/{sid}/live_link/{bad}"),
                    None,
                )
                .await;
            assert_eq!(answer, api_unknown, "{bad:?}");
        }
    }
    let (status, v) = app
        .server_fn(
            "revoke_live_link",
            &format!("session={sid}&id={id}"),
            Some(&op),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(
        ended(&mut view).await.contains("revoked"),
        "{:?}",
        view.seen
    );
    let revoke = rows(&app, &sid)
        .await
        .into_iter()
        .find(|e| e.action == "live_link.revoke")
        .expect("audited");
    assert!(revoke.actor.starts_with("operator:"), "{revoke:?}");
    agent.close(&sid).await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_has_a_bounded_number_of_working_links_and_a_revoked_one_frees_a_place() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let cap = cordon::live::link::MAX_ACTIVE_PER_SESSION;
    let mut ids = Vec::new();
    for _ in 0..cap {
        ids.push(make_link(&agent, &sid, "view").await.0);
    }
    let path = format!("/api/sessions/{sid}/live_link");
    let over = agent.post(&path, json!({ "mode": "view" })).await;
    assert_error(&over, StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    assert!(
        over.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("revoke one"),
        "{over:?}"
    );
    // A revoked link no longer counts; the cap holds again after.
    revoke(&agent, &sid, &ids[0]).await;
    make_link(&agent, &sid, "control").await;
    let over = agent.post(&path, json!({ "mode": "view" })).await;
    assert_error(&over, StatusCode::TOO_MANY_REQUESTS, "too_many_requests");
    let (_, list) = agent.get(&path).await;
    let listed = list["links"].as_array().or(list.as_array()).unwrap().len();
    assert_eq!(i64::try_from(listed).unwrap(), cap + 1, "{list}");
    agent.close(&sid).await;
    app.stop().await;
}

/// A page's dialog shows through a link too: a view link sees it and may
/// not answer it; a control link answers it as the link's agent, so OK on
/// "Delete repository …?" waits for an operator and Cancel runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_link_answers_a_pages_dialog_through_the_gate_and_a_view_link_only_sees_it() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/hostile/confirm-dialog.html").await;
    let (status, v) = agent
        .tool(&sid, "click", json!({ "selector": "#next" }))
        .await;
    assert_eq!(v["dialog_opened"]["type"], "confirm", "{status} {v}");
    let (_, page) = make_link(&agent, &sid, "view").await;
    let mut viewer = connect(&app, &ws_path(&page), None).await.expect("upgrade");
    let shown = viewer
        .wait_for("the dialog", |v| {
            v["type"] == "page" && v["dialog"].is_object()
        })
        .await;
    assert_eq!(shown["dialog"]["kind"], "confirm", "{shown}");
    viewer
        .send(json!({ "type": "dialog", "accept": true }))
        .await;
    viewer.wait_error("view_only").await;

    let (_, page) = make_link(&agent, &sid, "control").await;
    let mut driver = connect(&app, &ws_path(&page), None).await.expect("upgrade");
    driver
        .wait_for("the dialog", |v| {
            v["type"] == "page" && v["dialog"].is_object()
        })
        .await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    driver
        .send(json!({ "type": "dialog", "accept": true }))
        .await;
    let approval = crate::gate::one_pending(&app, &cookie, &sid).await;
    assert!(
        approval["reasons"]
            .to_string()
            .contains("Delete repository"),
        "{approval}"
    );
    let (status, _) =
        crate::gate::decide(&app, &cookie, approval["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK);
    driver.wait_error("denied_by_operator").await;
    driver
        .send(json!({ "type": "dialog", "accept": false }))
        .await;
    driver
        .wait_for("the dialog gone", |v| {
            v["type"] == "page" && v["title"] == "KEPT" && v.get("dialog").is_none()
        })
        .await;
    agent.close(&sid).await;
    app.stop().await;
}

/// A control link's Enter going down (a raw key, the agent's) on a page
/// whose keydown handler moves the focus from "Next" onto "Delete
/// repository": judged again where the key acts, it waits for an
/// operator; denied, nothing was pressed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_links_enter_is_judged_where_the_page_moves_the_focus() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/hostile/keydown-moves-focus.html").await;
    let (_, page) = make_link(&agent, &sid, "control").await;
    let mut view = connect(&app, &ws_path(&page), None).await.expect("upgrade");
    view.wait_title("Repository").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    view.send(json!({ "type": "key", "action": "down", "key": "Enter", "code": "Enter" }))
        .await;
    let approval = one_pending(&app, &cookie, &sid).await;
    let reasons = approval["reasons"].to_string();
    assert!(
        reasons.contains("destructive_click") && reasons.contains("Delete repository"),
        "{approval}"
    );
    let (status, v) = decide(&app, &cookie, approval["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    view.wait_for("the denial", |v| {
        v["type"] == "error" && v["code"].as_str().is_some_and(|c| c.contains("denied"))
    })
    .await;
    view.send(json!({ "type": "key", "action": "up", "key": "Enter", "code": "Enter" }))
        .await;
    assert_eq!(crate::gate::title(&agent, &sid).await, "Repository");
    agent.close(&sid).await;
    app.stop().await;
}

/// A link's user who stops reading (and floods the socket with messages
/// that each earn an error back) is cut off: the view ends and frees its
/// place, instead of wedging with its queue full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_that_stops_reading_is_cut_off_and_frees_its_place() {
    use futures::SinkExt;
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (_, page) = make_link(&agent, &sid, "view").await;
    let mut views = Vec::new();
    for _ in 0..3 {
        let mut v = connect(&app, &ws_path(&page), None).await.expect("upgrade");
        v.wait_for("hello", |m| m["type"] == "hello").await;
        views.push(v);
    }
    assert_eq!(
        connect(&app, &ws_path(&page), None)
            .await
            .err()
            .map(|e| e.0),
        Some(429),
        "the link's views are all taken"
    );
    // The last one never reads again and sends junk until it is cut off.
    let mut stalled = views.pop().unwrap();
    let flood = tokio::spawn(async move {
        let junk = tokio_tungstenite::tungstenite::Message::Text("x".into());
        for _ in 0..2_000_000 {
            if stalled.ws.send(junk.clone()).await.is_err() {
                return true;
            }
        }
        false
    });
    wait_until(
        "the stalled view's place to free up",
        PATIENCE * 2,
        || async {
            connect(&app, &ws_path(&page), None)
                .await
                .map_err(|e| format!("{e:?}"))
        },
    )
    .await;
    flood.abort();
    // The other views still answer.
    for v in &mut views {
        v.send_raw(tokio_tungstenite::tungstenite::Message::Text(
            "{not json".into(),
        ))
        .await;
        v.wait_error("bad_message").await;
    }
    agent.close(&sid).await;
    app.stop().await;
}

/// A link's user sees the tab shown and nothing of the session's other
/// tabs, and is told that an operator denied, never who.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_sees_neither_other_tabs_nor_who_decided() {
    let Setup {
        site,
        app,
        agent,
        sid,
    } = setup("/two-buttons").await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let (status, tab) = agent
        .post(
            &format!("/api/sessions/{sid}/tabs"),
            json!({ "url": site.url("/links") }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{tab}");
    // The first tab (two buttons) shown again.
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    let first = tabs
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "ready")
        .unwrap_or_else(|| panic!("{tabs}"))["tab_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = agent
        .tool(&sid, &format!("tabs/{first}/focus"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, mut view) = watching(&app, &agent, &sid, "control").await;
    let page = view
        .seen
        .iter()
        .rev()
        .find(|m| m["type"] == "page")
        .cloned()
        .expect("a page state");
    assert_eq!(page["tabs"].as_array().map(Vec::len), Some(1), "{page}");
    assert!(!page.to_string().contains("/links"), "{page}");
    // "Delete repository" (0..600 × 0..200), denied.
    view.click(300.0, 100.0).await;
    let waiting = one_pending(&app, &cookie, &sid).await;
    decide(&app, &cookie, waiting["id"].as_str().unwrap(), false).await;
    let e = view.wait_error("denied_by_operator").await;
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        !message.contains("op_") && !message.contains("olive"),
        "{e}"
    );
    agent.close(&sid).await;
    app.stop().await;
}

/// Alt with a character fires the page's access key (a button the focus
/// is not on): a control link's raw key of it is refused, as over CDP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_links_alt_key_cannot_fire_an_access_key() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/hostile/accesskey.html").await;
    let (_, _, mut view) = watching(&app, &agent, &sid, "control").await;
    view.send(
        json!({ "type": "key", "action": "down", "key": "d", "code": "KeyD", "modifiers": 1 }),
    )
    .await;
    let e = view.wait_error("denied_by_policy").await;
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("access key"),
        "{e}"
    );
    view.send(json!({ "type": "key", "action": "up", "key": "d", "code": "KeyD", "modifiers": 1 }))
        .await;
    // AltGr (Ctrl+Alt) still types.
    view.send(
        json!({ "type": "key", "action": "down", "key": "@", "code": "KeyQ", "modifiers": 3 }),
    )
    .await;
    view.send(json!({ "type": "key", "action": "up", "key": "@", "code": "KeyQ", "modifiers": 3 }))
        .await;
    assert_eq!(crate::gate::title(&agent, &sid).await, "ready");
    agent.close(&sid).await;
    app.stop().await;
}

/// A control link's user who floods the view is held to its rate: what
/// is over is dropped (the page types at most the burst and the rate
/// since), every row written is an input that ran, wheel turns are
/// audited one a second, the view is told at most once a second and the
/// flood is audited once; after it the view drives again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_view_that_floods_input_is_held_to_its_rate_and_so_is_the_audit() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/pad").await;
    let (_, _, mut view) = watching(&app, &agent, &sid, "control").await;
    view.click(20.0, 20.0).await;
    let started = std::time::Instant::now();
    for _ in 0..1000 {
        view.send(json!({ "type": "text", "text": "x" })).await;
    }
    for _ in 0..600 {
        view.send(json!({ "type": "wheel", "x": 100, "y": 200, "dx": 0, "dy": 5 }))
            .await;
    }
    let flooded = started.elapsed().as_secs_f64();
    view.wait_error("rate_limited").await;
    // Enter, until it passes (the buckets refill in well under a second).
    let deadline = std::time::Instant::now() + PATIENCE;
    let typed = loop {
        view.key("Enter", "Enter").await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let t = crate::gate::title(&agent, &sid).await;
        if t.starts_with("typed ") {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Enter never passed after the flood: title {t:?}"
        );
    };
    let n = typed.len() - "typed ".len();
    // The burst (less the click) and at most the rate for as long as
    // the flood took to send, and a second more.
    let most = 100.0 + 50.0 * (flooded + 1.0);
    assert!(
        (90..=most as usize).contains(&n),
        "typed {n} of 1000 (flood sent in {flooded:.2} s, at most {most})"
    );
    let all = rows(&app, &sid).await;
    let count = |action: &str| all.iter().filter(|e| e.action == action).count();
    assert_eq!(count("input.text"), n, "one row per character that ran");
    assert_eq!(count("live.rate_limited"), 1, "the flood audited once");
    // One a second while they ran (sent, then worked through).
    let wheels = count("input.wheel");
    let most = 2 + started.elapsed().as_secs() as usize;
    assert!(
        (1..=most).contains(&wheels),
        "{wheels} wheel rows for 600 turns (at most {most})"
    );
    let told = view
        .seen
        .iter()
        .filter(|m| m["type"] == "error" && m["code"] == "rate_limited")
        .count();
    assert!(
        told <= 2 + started.elapsed().as_secs() as usize,
        "told {told} times"
    );
    agent.close(&sid).await;
    app.stop().await;
}

/// A control link's user cannot paste into a password field what it
/// copied from a plain one (Shift+Insert, Ctrl+V): a paste is judged as
/// typing where it lands. Into a plain field it pastes (the clipboard
/// held the text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_link_cannot_paste_into_a_password_field() {
    let Setup {
        site: _site,
        app,
        agent,
        sid,
    } = setup("/hostile/paste.html").await;
    let (_, page) = make_link(&agent, &sid, "control").await;
    let mut view = connect(&app, &ws_path(&page), None).await.expect("upgrade");
    view.wait_title("Paste").await;
    let key = |action: &str, key: &str, code: &str, modifiers: u8| json!({ "type": "key", "action": action, "key": key, "code": code, "modifiers": modifiers });
    let chord = |k: &'static str, code: &'static str, modifiers: u8| {
        [
            key("down", k, code, modifiers),
            key("up", k, code, modifiers),
        ]
    };
    view.click(170.0, 40.0).await;
    for m in chord("a", "KeyA", 2)
        .into_iter()
        .chain(chord("c", "KeyC", 2))
    {
        view.send(m).await;
    }
    view.click(170.0, 120.0).await;
    for (k, code, modifiers) in [("Insert", "Insert", 8), ("v", "KeyV", 2)] {
        view.send(key("down", k, code, modifiers)).await;
        let e = view.wait_error("denied_by_policy").await;
        assert!(
            e["message"]
                .as_str()
                .unwrap_or_default()
                .contains("password"),
            "{k}: {e}"
        );
        view.send(key("up", k, code, modifiers)).await;
    }
    view.click(170.0, 200.0).await;
    for m in chord("Insert", "Insert", 8) {
        view.send(m).await;
    }
    crate::gate::wait_title(&agent, &sid, "other 7").await;
    agent.close(&sid).await;
    app.stop().await;
}
