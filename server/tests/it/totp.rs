//! Second-factor codes typed by Cordon into a real Chromium: a loopback
//! site asks a logged-in user for a fresh code and checks it with its own
//! RFC 6238 computation (HMAC-SHA-256 from the `hmac`/`sha2` crates, not
//! Cordon's `totp-rs`). The agent hears how many digits were typed, never
//! which; the audit log, the snapshot, read_dom and the model's messages
//! hold no code. Refusals: clean sessions, grants without `totp` or with
//! `cdp`, fields that are not code inputs, pages off the seeds' domains.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::Html;
use axum::routing::get;
use cordon::audit::Actor;
use cordon::vault::ImportOptions;
use cordon::vault::totp::SeedSource;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, Backend, TestApp, assert_error, domain, session_app, tenant};
use crate::vault::totp::{random_secret, seed_bytes};

/// RFC 6238 with HMAC-SHA-256, written here from the RFC: the site's check.
pub(crate) fn independent_code(secret: &[u8], at_s: u64, digits: u32) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(&(at_s / 30).to_be_bytes());
    let h = mac.finalize().into_bytes();
    let o = usize::from(h[h.len() - 1] & 0xf);
    let bin = (u32::from(h[o]) & 0x7f) << 24
        | u32::from(h[o + 1]) << 16
        | u32::from(h[o + 2]) << 8
        | u32::from(h[o + 3]);
    format!(
        "{:0width$}",
        bin % 10u32.pow(digits),
        width = digits as usize
    )
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// What the site saw.
#[derive(Clone, Default)]
struct Seen {
    /// Every code submitted, with whether it was right.
    codes: Arc<Mutex<Vec<(String, bool)>>>,
    /// Every value the notes field reported (as typed or pasted).
    notes: Arc<Mutex<Vec<String>>>,
    /// The `Host` of every step-up page served.
    stepups: Arc<Mutex<Vec<String>>>,
}

struct Site {
    addr: SocketAddr,
    seen: Seen,
}

impl Site {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

const SESSION: &str = "stepup-session-cookie-value";

fn logged_in(headers: &HeaderMap) -> bool {
    headers
        .get("cookie")
        .and_then(|c| c.to_str().ok())
        .is_some_and(|c| c.contains(&format!("session={SESSION}")))
}

/// A step-up page on the logged-in session: a code field (focused), and
/// fields a code must not go into.
async fn start_site(secret: Vec<u8>) -> Site {
    let seen = Seen::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let port = addr.port();
    let app = Router::new()
        .route(
            "/stepup",
            get(|State((seen, _)): State<(Seen, Vec<u8>)>, headers: HeaderMap| async move {
                let host = headers.get("host").and_then(|h| h.to_str().ok());
                seen.stepups
                    .lock()
                    .unwrap()
                    .push(host.unwrap_or_default().to_owned());
                let who = if logged_in(&headers) { "user alice" } else { "anonymous" };
                // Fixed places, for `run_task`'s clicks; the notes field
                // reports what it holds to the site.
                Html(format!(
                    "<!doctype html><title>Step up</title><style>body{{margin:0}} \
                     #code,#mail,#notes,#pw,#locked,#go{{position:absolute;left:20px;width:300px;height:40px}}</style>\
                     <p id=who style='position:absolute;left:20px;top:0'>{who}</p>\
                     <form action=/verify method=get>\
                     <input id=code name=code autocomplete=one-time-code inputmode=numeric autofocus style='top:60px' \
                      oninput='this.dataset.maskAtInput = getComputedStyle(this).webkitTextSecurity'>\
                     <input id=mail type=email style='top:130px'>\
                     <textarea id=notes style='top:200px' oninput=\"fetch('/note?v='+encodeURIComponent(this.value))\"></textarea>\
                     <input id=pw type=password style='top:270px'>\
                     <input id=locked type=text readonly style='top:340px'>\
                     <button id=go style='top:410px'>Verify</button></form>"
                ))
            }),
        )
        .route(
            "/verify",
            get(
                |State((seen, secret)): State<(Seen, Vec<u8>)>,
                 headers: HeaderMap,
                 Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    let code = q.get("code").cloned().unwrap_or_default();
                    let now = now_s();
                    let ok = logged_in(&headers)
                        && [now - 30, now, now + 30]
                            .iter()
                            .any(|t| independent_code(&secret, *t, 6) == code);
                    seen.codes.lock().unwrap().push((code.clone(), ok));
                    // The title echoes the code, as some sites do.
                    Html(format!(
                        "<!doctype html><title>{} {code}</title>",
                        if ok { "verified" } else { "rejected" }
                    ))
                },
            ),
        )
        // The step-up page of another site (localhost), in a frame.
        .route(
            "/framed",
            get(move || async move {
                Html(format!(
                    "<!doctype html><title>Framed</title>\
                     <iframe id=frame src='http://localhost:{port}/stepup' style='width:400px;height:500px'></iframe>"
                ))
            }),
        )
        // A granted page's code field beside a frame of another site
        // that takes the focus back every millisecond and reports what
        // is typed into it.
        .route(
            "/stolen",
            get(move || async move {
                Html(format!(
                    "<!doctype html><title>Stolen</title>\
                     <input id=code autocomplete=one-time-code inputmode=numeric>\
                     <iframe id=thief src='http://localhost:{port}/thief' style='width:300px;height:80px'></iframe>"
                ))
            }),
        )
        .route(
            "/thief",
            get(|| async {
                Html(
                    "<!doctype html><title>Thief</title>\
                     <input id=t oninput=\"fetch('/note?v='+encodeURIComponent(this.value))\">\
                     <script>setInterval(() => document.getElementById('t').focus(), 1);\
                     fetch('/note?v=thief-ready')</script>",
                )
            }),
        )
        .route(
            "/note",
            get(
                |State((seen, _)): State<(Seen, Vec<u8>)>,
                 Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    seen.notes
                        .lock()
                        .unwrap()
                        .push(q.get("v").cloned().unwrap_or_default());
                    "ok"
                },
            ),
        )
        .with_state((seen.clone(), secret));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Site { addr, seen }
}

fn seed_uri(secret: &str) -> String {
    format!("otpauth://totp/Site:alice?secret={secret}&issuer=Site&algorithm=SHA256&digits=6")
}

/// The app with the seed and the login stored for 127.0.0.1 in acme.
async fn app_with_seed(site: &Site, secret: &str, extra: &[(&str, &str)]) -> TestApp {
    app_with_seed_allowing(secret, &site.addr.to_string(), extra).await
}

/// [`app_with_seed`] whose browsers may reach `allow` (egress allowlist).
async fn app_with_seed_allowing(secret: &str, allow: &str, extra: &[(&str, &str)]) -> TestApp {
    let app = session_app(Backend::Sqlite, allow, extra).await;
    app.state
        .store
        .tenant_create(&tenant("acme"), "acme")
        .await
        .ok();
    let cookie = serde_json::to_vec(&json!([{
        "name": "session", "value": SESSION, "domain": "127.0.0.1", "path": "/",
        "expires": -1, "httpOnly": true, "secure": false, "sameSite": "Lax"
    }]))
    .unwrap();
    app.state
        .vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("127.0.0.1"),
            &cookie,
            ImportOptions::default(),
        )
        .await
        .unwrap();
    app.state
        .vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("127.0.0.1"),
            "alice",
            SeedSource::Uri(&seed_uri(secret)),
        )
        .await
        .unwrap();
    app
}

/// Asks for a grant (with `extra` fields), approves it, opens an
/// operator-mode session with it: the session id.
async fn granted_session(
    app: &TestApp,
    agent: &AgentClient,
    domains: &[&str],
    extra: Value,
) -> String {
    let token = granted_token(app, agent, domains, extra).await;
    let (status, opened) = agent
        .post(
            "/api/sessions",
            json!({ "credential_mode": "operator", "domains": domains, "grant_token": token }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    opened["session_id"].as_str().unwrap().to_owned()
}

/// Asks for a grant of `domains` (with `extra` fields) and approves it:
/// the token.
async fn granted_token(
    app: &TestApp,
    agent: &AgentClient,
    domains: &[&str],
    extra: Value,
) -> String {
    let mut body = json!({ "domains": domains, "reason": "log in with the second factor" });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, req) = agent.post("/api/grants/requests", body).await;
    assert_eq!(status, StatusCode::CREATED, "{req}");
    let rid = req["request_id"].as_str().unwrap();
    cordon::grants::approve(
        &app.state.store,
        &Actor::Cli,
        &rid.parse().unwrap(),
        15,
        false,
    )
    .await
    .unwrap();
    let (_, polled) = agent.get(&format!("/api/grants/requests/{rid}")).await;
    polled["grant_token"].as_str().expect("a token").to_owned()
}

/// The app with the seed, the login and `run_task`'s model at `model`.
async fn task_app(site: &Site, secret: &str, model: SocketAddr) -> TestApp {
    let base = format!("http://{model}/v1");
    app_with_seed(
        site,
        secret,
        &[
            ("CORDON_MODEL_BASE_URL", &base),
            ("CORDON_MODEL_API_KEY", "sk-test-model"),
            ("CORDON_MODEL_TIMEOUT_S", "5"),
        ],
    )
    .await
}

/// Every audit row's action and params, as one text.
async fn audit_text(app: &TestApp) -> String {
    app.state
        .store
        .audit_page(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {} {:?}\n", e.action, e.params, e.outcome))
        .collect()
}

/// Asserts that a `tool.type_totp` row says how many digits were typed.
async fn assert_typed_digits_audited(app: &TestApp, digits: usize) {
    let rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    let typed: Vec<_> = rows
        .iter()
        .filter(|e| e.action == "tool.type_totp" && e.outcome == "typed")
        .collect();
    assert_eq!(typed.len(), 1, "one row for the typed code");
    let params: Value = serde_json::from_str(&typed[0].params).unwrap();
    assert_eq!(params["typed_digits"], json!(digits), "{params}");
}

/// Whether any code of the last minutes around now appears in `text`,
/// standing alone as a leaked code does (`code=123456`, `"123456"`): six
/// digits inside a longer run of digits or hex (a timestamp, a hash) are
/// not one, and would make the check fail at random.
fn holds_a_code(text: &str, secret: &[u8]) -> bool {
    let now = now_s();
    let alone = |code: &str| {
        text.match_indices(code).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + code.len()..].chars().next();
            !before.is_some_and(|c| c.is_ascii_alphanumeric())
                && !after.is_some_and(|c| c.is_ascii_alphanumeric())
        })
    };
    (0..8).any(|i| alone(&independent_code(secret, now + 30 - i * 30, 6)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_has_a_fresh_code_typed_that_it_never_sees_and_the_site_accepts_it() {
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let app = app_with_seed(&site, &secret, &[]).await;
    let agent = app.agent("acme").await;
    let sid = granted_session(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    let page = agent.navigate_ok(&sid, &site.url("/stepup")).await;
    assert_eq!(page["title"], "Step up", "{page}");

    let (status, typed) = agent
        .tool(&sid, "type_totp", json!({ "selector": "#code" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{typed}");
    assert_eq!(
        typed,
        json!({ "ok": true, "typed_digits": 6, "label": "alice", "domain": "127.0.0.1" })
    );

    // Nothing the agent can read shows the code: the snapshot withholds
    // the field's value, read_dom blanks the code out (and shows the mask).
    let (status, snap) = agent.tool(&sid, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !holds_a_code(&snap.to_string(), &bytes),
        "the snapshot shows the code"
    );
    let (status, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let html = dom["html"].as_str().unwrap();
    assert!(!holds_a_code(html, &bytes), "read_dom shows the code");
    assert!(
        html.contains("-webkit-text-security: disc"),
        "the field is drawn masked"
    );
    // Masked before the first digit went in: no picture taken between
    // typing and masking can show one.
    assert!(
        html.contains(r#"data-mask-at-input="disc""#),
        "the field was not masked yet when the code was typed"
    );

    // The site checks it on the logged-in session and accepts it.
    let (status, v) = agent
        .tool(&sid, "click", json!({ "selector": "#go" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    crate::helpers::wait_until(
        "the site's verdict",
        std::time::Duration::from_secs(20),
        || async {
            let codes = site.seen.codes.lock().unwrap().clone();
            if codes.is_empty() {
                Err("no code submitted yet".to_owned())
            } else {
                Ok(())
            }
        },
    )
    .await;
    let codes = site.seen.codes.lock().unwrap().clone();
    assert_eq!(codes.len(), 1);
    assert!(codes[0].1, "the site rejected the typed code");
    assert_eq!(codes[0].0.len(), 6);

    // The site took the code by GET (and echoes it in its title): the tab's
    // address holds it, but no answer shows it.
    crate::helpers::wait_until(
        "the verdict page",
        std::time::Duration::from_secs(20),
        || async {
            let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
            if tabs.to_string().contains("/verify?code=") {
                Ok(())
            } else {
                Err(format!("the tabs: {tabs}"))
            }
        },
    )
    .await;
    let (status, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert_eq!(status, StatusCode::OK, "{tabs}");
    assert!(tabs.to_string().contains("verified"), "{tabs}");
    assert!(
        !holds_a_code(&tabs.to_string(), &bytes),
        "tabs shows the code"
    );
    // read_dom cut anywhere across the echoed code shows none of its
    // digits (the code is blanked before the cut, not after).
    let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    let html = dom["html"].as_str().unwrap().to_owned();
    let at = html
        .find("••••••")
        .unwrap_or_else(|| panic!("no blank: {html}"));
    let at = html[..at].chars().count();
    let code = codes[0].0.clone();
    for cut in at..=at + 6 {
        let (status, dom) = agent
            .tool(&sid, "read_dom", json!({ "max_chars": cut }))
            .await;
        assert_eq!(status, StatusCode::OK, "{dom}");
        let part = dom["html"].as_str().unwrap();
        assert_eq!(part.chars().count(), cut, "{dom}");
        let tail = part.split("verified").nth(1).unwrap_or_default();
        assert!(
            !tail.chars().any(|c| c.is_ascii_digit()),
            "cut at {cut}: digits of the code shown"
        );
        assert!(!code.is_empty());
    }
    let (status, nav) = agent.tool(&sid, "reload", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert!(nav["final_url"].as_str().unwrap().contains("/verify?code="));
    assert!(
        !holds_a_code(&nav.to_string(), &bytes),
        "reload shows the code"
    );
    // The control: a number that was never typed is left as it is.
    let control = (271_828..)
        .map(|n: u32| n.to_string())
        .find(|n| !holds_a_code(n, &bytes))
        .unwrap();
    let nav = agent
        .navigate_ok(&sid, &site.url(&format!("/stepup?n={control}")))
        .await;
    assert!(
        nav["final_url"].as_str().unwrap().ends_with(&control),
        "{nav}"
    );
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert!(tabs.to_string().contains(&control), "{tabs}");
    let (status, nav) = agent.tool(&sid, "back", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{nav}");
    assert!(nav["final_url"].as_str().unwrap().contains("/verify?code="));
    assert!(
        !holds_a_code(&nav.to_string(), &bytes),
        "back shows the code"
    );

    // The audit log holds the call (with its label), how many digits were
    // typed, and no code; the seed was marked used.
    let audit = audit_text(&app).await;
    assert!(audit.contains("tool.type_totp"), "{audit}");
    assert!(!holds_a_code(&audit, &bytes), "the audit log holds a code");
    assert_typed_digits_audited(&app, 6).await;
    let seeds = app.state.store.totp_list(None).await.unwrap();
    assert!(seeds[0].last_used_at.is_some());

    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_totp_is_refused_where_it_is_not_granted_or_a_code_could_leak() {
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let app = app_with_seed(&site, &secret, &[]).await;
    // A seed of another site only, for the wrong-domain case.
    app.state
        .vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "elsewhere",
            SeedSource::Uri(&seed_uri(&random_secret())),
        )
        .await
        .unwrap();
    let agent = app.agent("acme").await;
    let stepup = site.url("/stepup");
    let typed = |sid: String, body: Value| {
        let agent = &agent;
        async move { agent.tool(&sid, "type_totp", body).await }
    };

    // A clean session.
    let (status, opened) = agent.post("/api/sessions", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let clean = opened["session_id"].as_str().unwrap().to_owned();
    agent.navigate_ok(&clean, &stepup).await;
    let (status, v) = typed(clean.clone(), json!({ "selector": "#code" })).await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "denied_by_policy",
    );

    // A grant that did not ask for codes.
    let plain = granted_session(&app, &agent, &["127.0.0.1"], json!({})).await;
    agent.navigate_ok(&plain, &stepup).await;
    let (status, v) = typed(plain.clone(), json!({ "selector": "#code" })).await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "totp_not_granted",
    );

    // A grant with codes and CDP: its scripts could read the field.
    let both = granted_session(
        &app,
        &agent,
        &["127.0.0.1"],
        json!({ "totp": true, "cdp": true }),
    )
    .await;
    agent.navigate_ok(&both, &stepup).await;
    let (status, v) = typed(both.clone(), json!({ "selector": "#code" })).await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "denied_by_policy",
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("CDP"),
        "{v}"
    );

    // Granted, but the fields are not code inputs, or the label is unknown,
    // or the target is missing.
    let sid = granted_session(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    agent.navigate_ok(&sid, &stepup).await;
    for field in ["#pw", "#mail", "#notes", "#locked", "#go", "#who"] {
        let (status, v) = typed(sid.clone(), json!({ "selector": field })).await;
        assert_error(
            &(status, v.clone()),
            StatusCode::FORBIDDEN,
            "denied_by_policy",
        );
    }
    let (status, v) = typed(
        sid.clone(),
        json!({ "selector": "#code", "label": "billing" }),
    )
    .await;
    assert_error(&(status, v.clone()), StatusCode::BAD_REQUEST, "bad_request");
    for bad in [
        json!({}),
        json!({ "x": 1, "y": 2 }),
        json!({ "selector": "#code", "ref": "e1" }),
        json!({ "selector": "#code", "label": "x".repeat(101) }),
        json!({ "selector": "#code", "code": "123456" }),
    ] {
        let (status, v) = typed(sid.clone(), bad.clone()).await;
        assert_error(&(status, v.clone()), StatusCode::BAD_REQUEST, "bad_request");
    }
    let (status, v) = typed(
        sid.clone(),
        json!({ "selector": "#nothing-here", "timeout_ms": 1500 }),
    )
    .await;
    assert_error(
        &(status, v.clone()),
        StatusCode::UNPROCESSABLE_ENTITY,
        "element_not_found",
    );

    // A session whose grant covers example.com too, on a page of
    // 127.0.0.1: only example.com has a seed there, so nothing is typed.
    let off = granted_session(
        &app,
        &agent,
        &["127.0.0.1", "example.com"],
        json!({ "totp": true }),
    )
    .await;
    app.state
        .vault
        .totp_delete(
            &Actor::Cli,
            &tenant("acme"),
            &app.state
                .store
                .totp_list(None)
                .await
                .unwrap()
                .iter()
                .find(|t| t.label == "alice")
                .unwrap()
                .id
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    agent.navigate_ok(&off, &stepup).await;
    let (status, v) = typed(off.clone(), json!({ "selector": "#code" })).await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "denied_by_policy",
    );

    // Another tenant's key: the session does not exist for it.
    let beta = app.agent("beta").await;
    let (status, v) = beta
        .tool(&sid, "type_totp", json!({ "selector": "#code" }))
        .await;
    assert_error(&(status, v.clone()), StatusCode::NOT_FOUND, "not_found");

    // Nothing was typed anywhere: every field is still empty.
    for s in [&clean, &plain, &both, &sid, &off] {
        let (_, dom) = agent.tool(s, "read_dom", json!({})).await;
        assert!(
            !holds_a_code(&dom.to_string(), &bytes),
            "{s}: a code was typed"
        );
        assert!(
            !dom.to_string().contains("text-security"),
            "{s}: a field was masked"
        );
    }
    assert!(site.seen.codes.lock().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_task_types_the_code_for_its_placeholder_and_the_model_never_sees_it() {
    use crate::tasks::{Reply, fake_model};
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let (model, fake) = fake_model(vec![
        // The code field has the focus: the placeholder, then Enter.
        Reply::Text(
            "Thought: the site asks for a code.\nAction: type(content='{{totp:alice}}\\n')",
        ),
        Reply::Text("Thought: verified.\nAction: finished(content='logged in')"),
    ])
    .await;
    let app = task_app(&site, &secret, model).await;
    let agent = app.agent("acme").await;
    let token = granted_token(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    let (status, result) = agent
        .post(
            "/api/tasks",
            json!({
                "instruction": "log in",
                "start_url": site.url("/stepup"),
                "credential_mode": "operator",
                "domains": ["127.0.0.1"],
                "grant_token": token,
                "record": "audit",
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    let codes = site.seen.codes.lock().unwrap().clone();
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert!(codes[0].1, "the site rejected the code");
    // The prompt told the model how; no message to it holds a code; the
    // trace shows the placeholder.
    let texts = fake.texts().join("\n");
    assert!(
        texts.contains("{{totp}}"),
        "the prompt names the placeholder"
    );
    assert!(!holds_a_code(&texts, &bytes), "the model was sent a code");
    let id = result["task_id"].as_str().unwrap();
    let (_, detail) = agent.get(&format!("/api/tasks/{id}")).await;
    let trace = detail.to_string();
    assert!(trace.contains("{{totp:alice}}"), "{trace}");
    assert!(!holds_a_code(&trace, &bytes), "the trace holds a code");
    assert!(!holds_a_code(&audit_text(&app).await, &bytes));
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_types_a_code_into_a_refresh_session_from_the_live_page() {
    use app::api::auth::Role;
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let app = app_with_seed(&site, &secret, &[]).await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let (_, viewer) = app.operator_session("vera", Role::Viewer).await;
    let body = format!(
        "tenant=acme&domains=127.0.0.1&start_url={}",
        url::form_urlencoded::byte_serialize(site.url("/stepup").as_bytes()).collect::<String>()
    );
    let (status, v) = app.server_fn("start_refresh", &body, Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let sid = v.as_str().unwrap().to_owned();

    // The page lists the domain's seed: labels and parameters only.
    let (status, seeds) = app
        .server_fn("session_totp", &format!("session={sid}"), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{seeds}");
    assert_eq!(seeds[0]["label"], "alice", "{seeds}");
    assert!(!seeds.to_string().contains(&secret));

    // A viewer may not type; the operator may, into the focused field.
    let (status, _) = app
        .server_fn(
            "type_totp",
            &format!("session={sid}&label=alice"),
            Some(&viewer),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let live = app
        .state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .unwrap();
    crate::helpers::wait_until(
        "the step-up page",
        std::time::Duration::from_secs(20),
        || async {
            let pages = live.pages().await.map_err(|e| e.to_string())?;
            let url = match pages.first() {
                Some(p) => p.url().await.map_err(|e| e.to_string())?,
                None => None,
            };
            match url {
                Some(u) if u.contains("/stepup") => Ok(()),
                other => Err(format!("the tab shows {other:?}")),
            }
        },
    )
    .await;
    let (status, n) = app
        .server_fn(
            "type_totp",
            &format!("session={sid}&label=alice"),
            Some(&cookie),
        )
        .await;
    assert_eq!((status, n), (StatusCode::OK, json!(6)));
    let audit = audit_text(&app).await;
    assert!(audit.contains("tool.type_totp"), "{audit}");
    assert!(!holds_a_code(&audit, &bytes), "the audit log holds a code");
    assert_typed_digits_audited(&app, 6).await;

    // The site takes the code by GET: the live view's address and title
    // (which a live link's viewers see too) show it blanked.
    let page = live.pages().await.unwrap().remove(0);
    page.evaluate("document.querySelector('form').submit()")
        .await
        .unwrap();
    let mut view = crate::live::open_view(&app, &sid, &cookie).await;
    let shown = view
        .wait_for("the verify page in the live view", |v| {
            v["type"] == "page"
                && v["url"]
                    .as_str()
                    .is_some_and(|u| u.contains("/verify?code="))
        })
        .await;
    assert!(
        !holds_a_code(&shown.to_string(), &bytes),
        "the live view shows the typed code in the page's address or title"
    );
    app.stop().await;
}

/// An agent that tries to copy the typed code out of its field into one
/// that is not masked (select all, copy, paste into the notes), through
/// `run_task`'s raw keys: the same gestures copy a plain field's text (the
/// control), but never the code's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_code_cannot_be_copied_into_another_field() {
    use crate::tasks::{Reply, fake_model};
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let at = |x: f64, y: f64| {
        let (mx, my) = (x * 1288.0 / 1280.0, y * 728.0 / 720.0);
        format!("Action: click(start_box='({mx:.0},{my:.0})')")
    };
    let answers = vec![
        // The control: a plain field's text can be copied into the notes.
        at(170.0, 150.0),
        "Action: type(content='hello')".to_owned(),
        "Action: hotkey(key='ctrl a')".to_owned(),
        "Action: hotkey(key='ctrl c')".to_owned(),
        at(170.0, 220.0),
        "Action: hotkey(key='ctrl v')".to_owned(),
        // The attack: the code typed, selected, copied, pasted over the notes.
        at(170.0, 80.0),
        "Action: type(content='{{totp}}')".to_owned(),
        "Action: hotkey(key='ctrl a')".to_owned(),
        "Action: hotkey(key='ctrl c')".to_owned(),
        "Action: hotkey(key='ctrl x')".to_owned(),
        at(170.0, 220.0),
        "Action: hotkey(key='ctrl a')".to_owned(),
        "Action: hotkey(key='ctrl v')".to_owned(),
        "Action: finished(content='done')".to_owned(),
    ];
    let (model, _fake) = fake_model(
        answers
            .into_iter()
            .map(|a| Reply::Text(Box::leak(a.into_boxed_str())))
            .collect(),
    )
    .await;
    let app = task_app(&site, &secret, model).await;
    let agent = app.agent("acme").await;
    let token = granted_token(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    let (status, result) = agent
        .post(
            "/api/tasks",
            json!({
                "instruction": "copy the code",
                "start_url": site.url("/stepup"),
                "credential_mode": "operator",
                "domains": ["127.0.0.1"],
                "grant_token": token,
            }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    crate::helpers::wait_until(
        "the control's paste",
        std::time::Duration::from_secs(20),
        || async {
            let notes = site.seen.notes.lock().unwrap().clone();
            if notes.iter().any(|n| n.contains("hello")) {
                Ok(())
            } else {
                Err(format!(
                    "{} notes, none with the control's text",
                    notes.len()
                ))
            }
        },
    )
    .await;
    let notes = site.seen.notes.lock().unwrap().clone();
    assert!(
        !notes.iter().any(|n| holds_a_code(n, &bytes)),
        "the code was copied into the notes ({} notes)",
        notes.len()
    );
    app.stop().await;
}

/// `POST /ui/credentials/totp` as the Credentials page's script sends it.
async fn add_seed(
    app: &TestApp,
    cookie: &str,
    origin: Option<&str>,
    body: String,
) -> (StatusCode, Value) {
    let mut req = app
        .http
        .post(app.url("/ui/credentials/totp"))
        .header("host", format!("localhost:{}", app.addr.port()))
        .header("content-type", "application/json")
        .header("cookie", cookie)
        .body(body);
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    // A body over the route's limit is refused from its declared length;
    // the server may close before the client has sent it all.
    let res = match req.send().await {
        Ok(res) => res,
        Err(e) if e.is_request() => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({ "cut": e.to_string() }),
            );
        }
        Err(e) => panic!("{e}"),
    };
    let status = res.status();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The dashboard's add route: a QR code image in base64 is read and
/// stored; viewers, foreign origins, other tenants' operators, bad and
/// oversized bodies are refused with a field and store nothing; export
/// needs a fresh passkey check; the list never holds the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_adds_seeds_from_a_qr_image_and_refuses_what_it_must() {
    use app::api::auth::Role;
    use base64::Engine;
    let app = session_app(Backend::Sqlite, "127.0.0.1:9", &[]).await;
    for t in ["acme", "globex"] {
        app.state.store.tenant_create(&tenant(t), t).await.unwrap();
    }
    let origin = app.origin();
    let (_, olive) = app.operator_session("olive", Role::Operator).await;
    let (_, vera) = app.operator_session("vera", Role::Viewer).await;
    let (sam, sam_cookie) = app.operator_session("sam", Role::Operator).await;
    let (_, admin) = app.operator_session("ada", Role::Admin).await;
    let (status, v) = app
        .server_fn(
            "set_operator_tenants",
            &format!("id={sam}&tenants=globex"),
            Some(&admin),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");

    let secret = random_secret();
    let uri = format!("otpauth://totp/Acme:ops?secret={secret}&issuer=Acme");
    let png = qr_png(&uri);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let body = |tenant: &str, label: &str, extra: Value| {
        let mut b = json!({ "tenant": tenant, "domain": "app.example.com", "label": label });
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b.to_string()
    };

    let (status, v) = add_seed(
        &app,
        &olive,
        Some(&origin),
        body(
            "acme",
            "ops",
            json!({ "image_base64": format!("data:image/png;base64,{b64}") }),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{v}");
    assert_eq!(
        (
            v["label"].as_str(),
            v["algorithm"].as_str(),
            v["digits"].as_i64()
        ),
        (Some("ops"), Some("SHA1"), Some(6))
    );
    let stored = app.state.store.totp_list(None).await.unwrap();
    assert_eq!(stored.len(), 1);
    let picked = app
        .state
        .vault
        .totp_pick(
            &tenant("acme"),
            &["app.example.com".into()],
            "app.example.com",
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        picked.seed.secret(),
        seed_bytes(&secret).as_slice(),
        "the QR code's secret"
    );

    // Refusals, each storing nothing.
    let too_big = "A".repeat(8 * 1024 * 1024);
    let big_ok = base64::engine::general_purpose::STANDARD.encode(vec![0u8; 2 * 1024 * 1024]);
    // (what, Origin, body, status, field at fault)
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        String,
        StatusCode,
        Option<&'a str>,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "viewer",
            Some(&origin),
            body("acme", "v", json!({ "uri": uri })),
            StatusCode::FORBIDDEN,
            None,
        ),
        (
            "foreign origin",
            Some("http://evil.example"),
            body("acme", "o", json!({ "uri": uri })),
            StatusCode::FORBIDDEN,
            None,
        ),
        (
            "no origin",
            None,
            body("acme", "o", json!({ "uri": uri })),
            StatusCode::FORBIDDEN,
            None,
        ),
        (
            "other tenant",
            Some(&origin),
            body("acme", "s", json!({ "uri": uri })),
            StatusCode::NOT_FOUND,
            None,
        ),
        (
            "not json",
            Some(&origin),
            "{\"tenant\":".to_owned(),
            StatusCode::BAD_REQUEST,
            Some("body"),
        ),
        (
            "unknown field",
            Some(&origin),
            body("acme", "u", json!({ "uri": uri, "code": "123456" })),
            StatusCode::BAD_REQUEST,
            Some("body"),
        ),
        (
            "nothing given",
            Some(&origin),
            body("acme", "n", json!({})),
            StatusCode::BAD_REQUEST,
            Some("uri"),
        ),
        (
            "two given",
            Some(&origin),
            body("acme", "t", json!({ "uri": uri, "secret": secret })),
            StatusCode::BAD_REQUEST,
            Some("uri"),
        ),
        (
            "not base64",
            Some(&origin),
            body("acme", "b", json!({ "image_base64": "%%%" })),
            StatusCode::BAD_REQUEST,
            Some("image"),
        ),
        (
            "not a qr",
            Some(&origin),
            body(
                "acme",
                "q",
                json!({ "image_base64": base64::engine::general_purpose::STANDARD.encode(b"GIF89a") }),
            ),
            StatusCode::BAD_REQUEST,
            Some("image"),
        ),
        (
            "oversized",
            Some(&origin),
            body("acme", "x", json!({ "image_base64": too_big })),
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
        ),
        (
            // Over the server's usual 1 MiB, within the route's: read, and
            // refused as an image.
            "2 MiB of zeros",
            Some(&origin),
            body("acme", "z", json!({ "image_base64": big_ok })),
            StatusCode::BAD_REQUEST,
            Some("image"),
        ),
        (
            "bad digits",
            Some(&origin),
            body("acme", "d", json!({ "secret": secret, "digits": "20" })),
            StatusCode::BAD_REQUEST,
            Some("digits"),
        ),
        (
            "bad period",
            Some(&origin),
            body("acme", "p", json!({ "secret": secret, "period": "0" })),
            StatusCode::BAD_REQUEST,
            Some("period"),
        ),
        (
            "long label",
            Some(&origin),
            body("acme", &"l".repeat(10 * 1024), json!({ "uri": uri })),
            StatusCode::BAD_REQUEST,
            Some("label"),
        ),
        (
            "label taken",
            Some(&origin),
            body("acme", "ops", json!({ "uri": uri })),
            StatusCode::CONFLICT,
            None,
        ),
        (
            "bad domain",
            Some(&origin),
            json!({ "tenant": "acme", "domain": "not a domain", "label": "z", "uri": uri })
                .to_string(),
            StatusCode::BAD_REQUEST,
            Some("domain"),
        ),
    ];
    for (what, o, b, want, field) in cases {
        let cookie = match what {
            "viewer" => &vera,
            "other tenant" => &sam_cookie,
            _ => &olive,
        };
        let (status, v) = add_seed(&app, cookie, o, b).await;
        assert_eq!(status, want, "{what}: {v}");
        if let Some(f) = field {
            assert_eq!(v["error"]["field"], f, "{what}: {v}");
        }
        assert!(
            !v.to_string().contains(&secret),
            "{what}: the answer echoes the secret"
        );
    }
    assert_eq!(
        app.state.store.totp_list(None).await.unwrap().len(),
        1,
        "nothing else stored"
    );

    // Export: a fresh passkey check first.
    let id = &stored[0].id;
    let res = app
        .http
        .get(app.url(&format!("/ui/credentials/totp/export?tenant=acme&id={id}")))
        .header("host", format!("localhost:{}", app.addr.port()))
        .header("cookie", &olive)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(!res.text().await.unwrap().contains(&secret));

    // The list: metadata only; a scoped operator sees none of acme's.
    let (status, list) = app.server_fn("list_totp", "", Some(&olive)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert!(!list.to_string().contains(&secret));
    let (_, scoped) = app.server_fn("list_totp", "", Some(&sam_cookie)).await;
    assert_eq!(scoped, json!([]));
    let (status, _) = app
        .server_fn(
            "delete_totp",
            &format!("tenant=acme&id={id}"),
            Some(&sam_cookie),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app
        .server_fn("delete_totp", &format!("tenant=acme&id={id}"), Some(&vera))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, v) = app
        .server_fn("delete_totp", &format!("tenant=acme&id={id}"), Some(&olive))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(app.state.store.totp_list(None).await.unwrap().is_empty());
    let audit = audit_text(&app).await;
    assert!(!audit.contains(&secret), "the audit log holds the secret");
    app.stop().await;
}

/// A PNG of a QR code holding `text`.
fn qr_png(text: &str) -> Vec<u8> {
    let code = qrcode::QrCode::new(text.as_bytes()).unwrap();
    let width = code.width() as u32;
    let colors = code.to_colors();
    let scale = 6;
    let side = (width + 8) * scale;
    let img = image::GrayImage::from_fn(side, side, |x, y| {
        let (mx, my) = (x / scale, y / scale);
        let dark = mx >= 4
            && my >= 4
            && mx < width + 4
            && my < width + 4
            && colors[((my - 4) * width + (mx - 4)) as usize] == qrcode::Color::Dark;
        image::Luma([if dark { 0 } else { 255 }])
    });
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// The host checks: a tab whose own address is off the grant gets no code
/// (whatever its page holds), and neither does a code field in a
/// cross-site frame (localhost) of a granted page (127.0.0.1): whatever
/// the agent names there (the frame, any ref of the page's snapshot),
/// nothing is typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn type_totp_is_refused_on_a_tab_off_the_grant_and_in_a_cross_site_frame() {
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let port = site.addr.port();
    // localhost is reachable, and the agent's own navigation off the grant
    // does not wait for an operator: only the type_totp checks stand.
    let app = app_with_seed_allowing(
        &secret,
        &format!("{},localhost:{port}", site.addr),
        &[("CORDON_RISK_LEVELS", r#"{"off_list_navigation": "low"}"#)],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = granted_session(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;

    // The tab is on localhost, which the grant does not cover.
    let page = agent
        .navigate_ok(&sid, &format!("http://localhost:{port}/stepup"))
        .await;
    assert_eq!(page["title"], "Step up", "{page}");
    let (status, v) = agent
        .tool(&sid, "type_totp", json!({ "selector": "#code" }))
        .await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "denied_by_policy",
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the tab is on \"localhost\""),
        "{v}"
    );

    // A granted page with the step-up page of localhost in a frame.
    agent.navigate_ok(&sid, &site.url("/framed")).await;
    let framed = format!("localhost:{port}");
    crate::helpers::wait_until(
        "the frame's page",
        std::time::Duration::from_secs(20),
        || async {
            let served = site.seen.stepups.lock().unwrap().clone();
            if served.iter().filter(|h| **h == framed).count() >= 2 {
                Ok(())
            } else {
                Err(format!("step-up pages served: {served:?}"))
            }
        },
    )
    .await;
    let (status, v) = agent
        .tool(&sid, "type_totp", json!({ "selector": "#frame" }))
        .await;
    assert_error(
        &(status, v.clone()),
        StatusCode::FORBIDDEN,
        "denied_by_policy",
    );
    let (status, snap) = agent.tool(&sid, "snapshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{snap}");
    let text = snap.to_string();
    let refs: Vec<&str> = text
        .split("\"ref\":\"")
        .skip(1)
        .filter_map(|r| r.split('"').next())
        .collect();
    for r in refs {
        let (status, v) = agent
            .tool(&sid, "type_totp", json!({ "ref": r, "timeout_ms": 3000 }))
            .await;
        assert_ne!(status, StatusCode::OK, "{r}: a code was typed: {v}");
        assert!(
            ["denied_by_policy", "element_not_found"]
                .contains(&v["error"]["code"].as_str().unwrap_or_default()),
            "{r}: {v}"
        );
    }
    let rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    assert!(
        !rows
            .iter()
            .any(|e| e.action == "tool.type_totp" && e.outcome == "typed"),
        "a code was typed"
    );
    let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert!(!dom.to_string().contains("text-security"), "{dom}");
    app.stop().await;
}

/// `browser_type_totp` over MCP: the code is typed and the answer says
/// only how many digits; a field that takes no code is a typed refusal;
/// after the site took the code by GET, `browser_tabs` does not show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_type_totp_over_mcp_types_a_code_the_agent_never_sees() {
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let app = app_with_seed(&site, &secret, &[]).await;
    let agent = app.agent("acme").await;
    let sid = granted_session(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    agent.navigate_ok(&sid, &site.url("/stepup")).await;
    let mut mcp = crate::mcp::Mcp::of(&app, &agent).await;

    let err = mcp
        .err(
            "browser_type_totp",
            json!({ "session_id": sid, "selector": "#pw" }),
        )
        .await;
    assert!(err.starts_with("denied_by_policy: "), "{err}");
    let result = mcp
        .call(
            "browser_type_totp",
            json!({ "session_id": sid, "selector": "#code" }),
        )
        .await;
    assert_ne!(result["isError"], json!(true), "{result}");
    assert_eq!(
        result["structuredContent"],
        json!({ "ok": true, "typed_digits": 6, "label": "alice", "domain": "127.0.0.1" })
    );
    assert!(
        !holds_a_code(&result.to_string(), &bytes),
        "the answer holds the code"
    );

    mcp.ok(
        "browser_click",
        json!({ "session_id": sid, "selector": "#go" }),
    )
    .await;
    crate::helpers::wait_until(
        "the site's verdict",
        std::time::Duration::from_secs(20),
        || async {
            match site.seen.codes.lock().unwrap().first() {
                Some((_, true)) => Ok(()),
                other => Err(format!("verdict: {:?}", other.map(|c| c.1))),
            }
        },
    )
    .await;
    // The site seeing the request comes before the browser commits the
    // navigation to its answer: poll the tab list until it has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let tabs = loop {
        let tabs = mcp.ok("browser_tabs", json!({ "session_id": sid })).await;
        if tabs.to_string().contains("/verify?code=") {
            break tabs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited 20 s for the tab to show /verify; last seen: {tabs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(
        !holds_a_code(&tabs.to_string(), &bytes),
        "browser_tabs shows the code"
    );
    assert!(!holds_a_code(&audit_text(&app).await, &bytes));
    assert_typed_digits_audited(&app, 6).await;
    app.stop().await;
}

/// A 50 MB QR image to the dashboard's seed form is refused from its
/// declared length, before a byte of it is read: 413, naming the field
/// `image` for the page to mark; nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifty_megabyte_qr_image_is_refused_with_413_naming_the_image_field() {
    use app::api::auth::Role;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = session_app(Backend::Sqlite, "127.0.0.1:9", &[]).await;
    app.state
        .store
        .tenant_create(&tenant("acme"), "acme")
        .await
        .unwrap();
    let (_, olive) = app.operator_session("olive", Role::Operator).await;
    let length = 50 * 1024 * 1024;
    let head = format!(
        "POST /ui/credentials/totp HTTP/1.1\r\nhost: localhost:{}\r\norigin: {}\r\n\
         cookie: {olive}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n",
        app.addr.port(),
        app.origin(),
    );
    // Only the head is sent: the answer comes from the declared length.
    let mut conn = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let body = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&answer).into_owned();
            if let Some((_, body)) = text.split_once("\r\n\r\n")
                && let Ok(v) = serde_json::from_str::<Value>(body)
            {
                return (text, v);
            }
            let n = conn.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without a whole answer: {text}");
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("an answer before the body is sent");
    let (answer, body) = body;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(body["error"]["field"], "image", "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large", "{body}");
    assert!(app.state.store.totp_list(None).await.unwrap().is_empty());
    app.stop().await;
}

/// A frame of another site on a granted page that takes the focus back
/// every millisecond never receives the code: the code goes into the
/// field checked, or nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_that_steals_the_focus_never_receives_the_code() {
    let secret = random_secret();
    let bytes = seed_bytes(&secret);
    let site = start_site(bytes.clone()).await;
    let port = site.addr.port();
    let app =
        app_with_seed_allowing(&secret, &format!("{},localhost:{port}", site.addr), &[]).await;
    let agent = app.agent("acme").await;
    let sid = granted_session(&app, &agent, &["127.0.0.1"], json!({ "totp": true })).await;
    agent.navigate_ok(&sid, &site.url("/stolen")).await;
    crate::helpers::wait_until(
        "the thief's frame",
        std::time::Duration::from_secs(20),
        || async {
            let notes = site.seen.notes.lock().unwrap().clone();
            if notes.iter().any(|n| n == "thief-ready") {
                Ok(())
            } else {
                Err(format!("{notes:?}"))
            }
        },
    )
    .await;
    let mut typed = 0;
    for _ in 0..5 {
        let (status, v) = agent
            .tool(&sid, "type_totp", json!({ "selector": "#code" }))
            .await;
        // Typed into the field, or refused: never anywhere else.
        assert!(
            status == StatusCode::OK || status.is_client_error(),
            "{status}: {v}"
        );
        typed += usize::from(status == StatusCode::OK);
    }
    // The code does go in, focus thief or not.
    assert!(typed >= 1, "no code was typed in 5 tries");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let notes = site.seen.notes.lock().unwrap().clone();
    assert!(
        notes.iter().all(|n| n == "thief-ready"),
        "the thief's frame received typed text: {} notes",
        notes.len()
    );
    assert!(
        !notes.iter().any(|n| holds_a_code(n, &bytes)),
        "the thief got a code"
    );
    app.stop().await;
}
