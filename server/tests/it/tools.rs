//! How tools fail: one code per cause, a crashed tab answered at once, the
//! egress guard's refusals as typed fields of a navigation.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{Backend, PATIENCE, assert_error, session_app, wait_until};
use crate::site;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_navigation_that_never_finishes_is_a_504_timeout_whichever_bound_ends_it() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_TOOL_TIMEOUT_S", "3")],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    for body in [
        json!({ "url": site.url("/hang") }),
        json!({ "url": site.url("/hang"), "timeout_ms": 1500 }),
    ] {
        let answer = agent.tool(&sid, "navigate", body).await;
        assert_error(&answer, StatusCode::GATEWAY_TIMEOUT, "timeout");
    }
    // The tab is usable again at once.
    let nav = agent.navigate_ok(&sid, &site.url("/form")).await;
    assert_eq!(nav["title"], "Login", "{nav}");
    app.stop().await;
}

/// Every process below `root`, with its command line.
fn descendants(root: i32) -> Vec<(i32, String)> {
    let mut parent = std::collections::HashMap::new();
    let mut cmdline = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            parent.insert(pid, ppid);
        }
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        cmdline.insert(pid, String::from_utf8_lossy(&cmd).replace('\0', " "));
    }
    let below = |mut pid: i32| {
        while let Some(&p) = parent.get(&pid) {
            if p == root {
                return true;
            }
            if p <= 1 {
                return false;
            }
            pid = p;
        }
        false
    };
    cmdline
        .iter()
        .filter(|(pid, _)| below(**pid))
        .map(|(pid, cmd)| (*pid, cmd.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_renderer_is_answered_at_once_and_the_session_stays_usable() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let pid = app
        .live("acme", &sid)
        .await
        .sandbox
        .pid
        .expect("a local sandbox has a pid");
    // A navigation that would hang for the whole tool bound (30 s) …
    let url = site.url("/hang");
    let pending = {
        let agent = agent.clone();
        let sid = sid.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let res = agent.tool(&sid, "navigate", json!({ "url": url })).await;
            (res, start.elapsed())
        })
    };
    wait_until("the navigation to reach the site", PATIENCE, || async {
        match site.hangs.load(Ordering::SeqCst) {
            0 => Err("no request of /hang yet".into()),
            _ => Ok(()),
        }
    })
    .await;
    // … while only the tab's renderer is killed, not the browser.
    let renderers: Vec<(i32, String)> = descendants(pid)
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("--type=renderer"))
        .collect();
    assert!(!renderers.is_empty(), "{:?}", descendants(pid));
    let killed_at = Instant::now();
    for (r, _) in &renderers {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*r),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let (answer, _) = pending.await.unwrap();
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "tab_crashed");
    let answered_after = killed_at.elapsed();
    assert!(
        answered_after < Duration::from_secs(10),
        "answered {answered_after:?} after the crash, not at once"
    );
    // The session lives on: another tool call until navigation says so,
    // then a navigation brings the tab back.
    let answer = agent.tool(&sid, "read_dom", json!({})).await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "tab_crashed");
    let nav = agent.navigate_ok(&sid, &site.url("/form")).await;
    assert_eq!(nav["title"], "Login", "{nav}");
    let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(info["state"], "ready", "{info}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guards_refusals_are_typed_fields_of_a_navigation() {
    let site = site::start().await;
    let canary = site::Canary::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let port = canary.addr.port();
    let navigate = |url: String, wait: &'static str| {
        let agent = &agent;
        let sid = &sid;
        async move {
            let (status, nav) = agent
                .tool(sid, "navigate", json!({ "url": url, "wait": wait }))
                .await;
            assert_eq!(status, StatusCode::OK, "{url}: {nav}");
            nav
        }
    };
    // Plain http to a loopback address that is not allowed (the canary's):
    // the guard's page, named as the guard's.
    let nav = navigate(format!("http://127.0.0.1:{port}/x"), "load").await;
    assert_eq!(nav["status"], 403, "{nav}");
    assert_eq!(
        nav["egress_refused"],
        json!({ "host": "127.0.0.1", "port": port, "reason": "loopback" }),
        "{nav}"
    );
    // A redirect hop to it.
    let hop = format!("http://127.0.0.1:{port}/hop");
    let nav = navigate(site.url(&format!("/redirect?to={hop}")), "load").await;
    assert_eq!(nav["egress_refused"]["port"], port, "{nav}");
    // A refresh hop (Refresh header) within the call.
    let nav = navigate(site.url(&format!("/refresh-to?to={hop}")), "networkidle").await;
    assert_eq!(nav["egress_refused"]["port"], port, "{nav}");
    // https: a refused CONNECT leaves no page of the guard's, only the field.
    let nav = navigate(format!("https://127.0.0.1:{port}/"), "load").await;
    assert_eq!(nav["egress_refused"]["reason"], "loopback", "{nav}");
    assert_eq!(nav["status"], json!(null), "{nav}");
    // A page that loaded: only its refused images are counted.
    let nav = navigate(site.url("/with-refused-images"), "load").await;
    assert_eq!(
        (nav["status"].clone(), nav["egress_refused"].clone()),
        (json!(200), json!(null)),
        "{nav}"
    );
    assert_eq!(nav["egress_refused_subresources"], 2, "{nav}");
    assert_eq!(
        canary.hits.load(Ordering::SeqCst),
        0,
        "nothing reached the canary"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_are_refused_and_write_no_file_anywhere() {
    let site = site::start().await;
    // The process driver would otherwise save into the host user's
    // Downloads folder (seen before this was refused).
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[("CORDON_SANDBOX_DRIVER", "process")],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    let name = format!("cordon-download-{}.bin", rand::random::<u32>());
    let url = site.url(&format!("/download?name={name}"));
    // A download is no page: the agent is told so at once.
    let asked = Instant::now();
    let answer = agent.tool(&sid, "navigate", json!({ "url": url })).await;
    assert_error(
        &answer,
        StatusCode::UNPROCESSABLE_ENTITY,
        "download_refused",
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "answered after {:?}",
        asked.elapsed()
    );
    // The browser asked for it (the guard let the request through) …
    let live = app.live("acme", &sid).await;
    let sandbox = live.sandbox.id.clone();
    drop(live);
    wait_until(
        "the download request in the egress log",
        PATIENCE,
        || async {
            let log = app
                .state
                .store
                .egress_for_sandbox(&sandbox.parse().unwrap(), 10_000)
                .await
                .unwrap();
            if log.iter().any(|e| e.entry.port == site.addr.port()) {
                Ok(())
            } else {
                Err(format!("{log:?}"))
            }
        },
    )
    .await;
    // … and no file appears, in the user's Downloads or the session's dir,
    // for as long as a 4 KiB download would take many times over.
    let places = [
        std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join("Downloads")
            .join(&name),
        app.state.settings.server.data_dir.join("run"),
    ];
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(3) {
        assert!(!places[0].exists(), "{} was written", places[0].display());
        let found = crate::helpers::walk(&places[1])
            .into_iter()
            .find(|p| p.ends_with(&name));
        assert!(found.is_none(), "{found:?} was written ({answer:?})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The session goes on.
    agent.navigate_ok(&sid, &site.url("/form")).await;
    app.stop().await;
}

/// The page sees the viewport its session asked for, from the pool's
/// browser (sized ahead for the default) and for another size, in a tab
/// the agent opens too; a screenshot has that size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_sees_the_viewport_asked_for_in_every_tab() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[("CORDON_POOL_SIZE", "1")]).await;
    let agent = app.agent("acme").await;
    for (asked, w, h) in [
        (json!({}), 1280, 720),
        (
            json!({ "viewport": { "width": 390, "height": 844 } }),
            390,
            844,
        ),
        (
            json!({ "viewport": { "width": 1920, "height": 1080 } }),
            1920,
            1080,
        ),
    ] {
        let want = format!("{w}x{h}x1");
        let sid = agent.open(asked.clone()).await;
        let nav = agent.navigate_ok(&sid, &site.url("/size")).await;
        assert_eq!(nav["title"], want.as_str(), "{asked}: {nav}");
        let (status, shot) = agent.tool(&sid, "screenshot", json!({})).await;
        assert_eq!(status, StatusCode::OK, "{shot:.200}");
        assert_eq!(
            (shot["width"].as_u64(), shot["height"].as_u64()),
            (Some(w), Some(h)),
            "{asked}"
        );
        let (status, tab) = agent
            .post(&format!("/api/sessions/{sid}/tabs"), json!({}))
            .await;
        assert_eq!(status, StatusCode::OK, "{tab}");
        let nav = agent.navigate_ok(&sid, &site.url("/size")).await;
        assert_eq!(nav["title"], want.as_str(), "{asked}, a new tab: {nav}");
        agent.close(&sid).await;
    }
    app.stop().await;
}
