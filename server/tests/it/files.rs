//! Downloads a session allows, and the `upload` tool (issue 9): files
//! land in the control plane's data dir, are audited by name, size and
//! SHA-256, and bad input changes nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{AgentClient, Backend, TestApp, assert_error, session_app, wait_until};
use crate::site;

const PATIENCE: Duration = Duration::from_secs(30);

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn audit(app: &TestApp) -> Vec<cordon::audit::Event> {
    app.state.store.audit_page(0, 10_000).await.unwrap()
}

/// Waits until the session lists a download `name` in `state`; returns it.
async fn wait_download(agent: &AgentClient, sid: &str, name: &str, state: &str) -> Value {
    wait_until(&format!("{name} {state}"), PATIENCE, || async {
        let (status, list) = agent.get(&format!("/api/sessions/{sid}/downloads")).await;
        if status != StatusCode::OK {
            return Err(format!("{status} {list}"));
        }
        list.as_array()
            .and_then(|l| l.iter().find(|d| d["name"] == name && d["state"] == state))
            .cloned()
            .ok_or_else(|| list.to_string())
    })
    .await
}

/// The raw answer of a download fetch.
async fn fetch(agent: &AgentClient, sid: &str, name: &str) -> reqwest::Response {
    agent
        .http
        .get(format!(
            "{}/api/sessions/{sid}/downloads/{name}",
            agent.base
        ))
        .bearer_auth(&agent.key)
        .send()
        .await
        .unwrap()
}

/// The host directory the session's sandbox shares as `name` (`uploads`,
/// `downloads`).
async fn sandbox_dir(app: &TestApp, sid: &str, name: &str) -> PathBuf {
    app.live("acme", sid).await.sandbox.runtime_dir.join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_download_is_kept_in_the_data_dir_fetched_byte_identical_audited_and_removed_at_close()
 {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let (status, opened) = agent
        .post(
            "/api/sessions",
            json!({ "downloads": "allow", "record": "off" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    assert_eq!(opened["downloads"], "allow", "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    let (_, shown) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(shown["downloads"], "allow", "{shown}");
    let content = vec![7u8; 4096];

    // A navigation that turns into a download is no error here …
    let nav = agent
        .navigate_ok(&sid, &site.url("/download?name=direct.bin"))
        .await;
    assert_eq!(nav["download_started"], true, "{nav}");
    // … and a link the page offers downloads too.
    agent.navigate_ok(&sid, &site.url("/files")).await;
    let (status, clicked) = agent
        .tool(&sid, "click", json!({ "selector": "#dl" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{clicked}");

    let direct = wait_download(&agent, &sid, "direct.bin", "completed").await;
    let report = wait_download(&agent, &sid, "report one.bin", "completed").await;
    for d in [&direct, &report] {
        assert_eq!(d["size"], 4096, "{d}");
        assert_eq!(d["sha256"], sha(&content), "{d}");
        assert!(
            d["created_at"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{d}"
        );
    }
    let res = fetch(&agent, &sid, "report%20one.bin").await;
    assert_eq!(res.status(), StatusCode::OK);
    let h = res.headers().clone();
    assert_eq!(h["content-type"], "application/octet-stream");
    assert!(
        h["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"report one.bin\""),
        "{h:?}"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(res.bytes().await.unwrap().as_ref(), content.as_slice());

    // On disk: in the session's folder of the data dir; nothing left in
    // the sandbox's download directory.
    let folder = app
        .state
        .settings
        .server
        .data_dir
        .join("downloads/acme")
        .join(&sid);
    assert_eq!(
        std::fs::read(folder.join("report one.bin")).unwrap(),
        content
    );
    assert!(folder.join("direct.bin").is_file());
    let incoming = sandbox_dir(&app, &sid, "downloads").await;
    assert_eq!(crate::helpers::walk(&incoming), Vec::<PathBuf>::new());

    // Audited by name, size and hash; the fetch too.
    let events = audit(&app).await;
    let completed: Vec<Value> = events
        .iter()
        .filter(|e| e.action == "download.completed" && e.session.as_deref() == Some(&sid))
        .map(|e| serde_json::from_str(&e.params).unwrap())
        .collect();
    assert!(
        completed.iter().any(|p| p["name"] == "report one.bin"
            && p["size"] == 4096
            && p["sha256"] == sha(&content)),
        "{completed:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.action == "download.fetch" && e.params.contains("report one.bin")),
        "the fetch is audited"
    );

    // Bad names, unknown files, another tenant: typed errors.
    for bad in ["a%2Fb", "a%5Cb", "x%0Ay", "%00", &"a".repeat(256)] {
        let answer = agent
            .get(&format!("/api/sessions/{sid}/downloads/{bad}"))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_file_name");
    }
    let answer = agent
        .get(&format!("/api/sessions/{sid}/downloads/nope.bin"))
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "download_not_found");
    let other = app.agent("globex").await;
    for path in [
        format!("/api/sessions/{sid}/downloads"),
        format!("/api/sessions/{sid}/downloads/direct.bin"),
    ] {
        assert_error(&other.get(&path).await, StatusCode::NOT_FOUND, "not_found");
    }

    // A session that does not record for audit takes its downloads along.
    agent.close(&sid).await;
    assert!(
        !folder.exists(),
        "{} outlived the session",
        folder.display()
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_over_the_caps_are_cancelled_and_removed_and_audit_sessions_keep_theirs() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_DOWNLOAD_MAX_MB", "1"),
            ("CORDON_DOWNLOAD_SESSION_MAX_MB", "1"),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent
        .open(json!({ "downloads": "allow", "record": "audit" }))
        .await;
    agent.navigate_ok(&sid, &site.url("/files")).await;

    // 3 MiB against a 1 MiB cap.
    let (status, v) = agent
        .tool(&sid, "click", json!({ "selector": "#big" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let big = wait_download(&agent, &sid, "big.bin", "refused").await;
    assert_eq!(big["reason"], "too_large", "{big}");
    assert_error(
        &agent
            .get(&format!("/api/sessions/{sid}/downloads/big.bin"))
            .await,
        StatusCode::NOT_FOUND,
        "download_not_found",
    );
    let folder = app
        .state
        .settings
        .server
        .data_dir
        .join("downloads/acme")
        .join(&sid);
    let incoming = sandbox_dir(&app, &sid, "downloads").await;
    wait_until("no trace of the big file", PATIENCE, || async {
        let left: Vec<PathBuf> = crate::helpers::walk(&incoming)
            .into_iter()
            .chain(crate::helpers::walk(&folder))
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    // The file goes first, the audit row right after: wait for it too.
    let refused = wait_until("the refusal to be audited", PATIENCE, || async {
        let events = audit(&app).await;
        match events.iter().find(|e| e.action == "download.refused") {
            Some(e) => Ok(e.clone()),
            None => Err(format!(
                "{:?}",
                events
                    .iter()
                    .map(|e| &e.action)
                    .rev()
                    .take(8)
                    .collect::<Vec<_>>()
            )),
        }
    })
    .await;
    assert_eq!(refused.outcome, "refused: too_large");
    assert!(refused.params.contains("big.bin"), "{}", refused.params);

    // Each within the file cap, but together past the session's.
    agent
        .navigate_ok(&sid, &site.url("/mid-download?name=a.bin"))
        .await;
    wait_download(&agent, &sid, "a.bin", "completed").await;
    agent
        .navigate_ok(&sid, &site.url("/mid-download?name=b.bin"))
        .await;
    let b = wait_download(&agent, &sid, "b.bin", "refused").await;
    assert_eq!(b["reason"], "session_full", "{b}");
    assert!(!folder.join("b.bin").exists());
    // A small one still fits, and outlives the session that records for
    // audit.
    agent.navigate_ok(&sid, &site.url("/files")).await;
    agent
        .tool(&sid, "click", json!({ "selector": "#dl" }))
        .await;
    wait_download(&agent, &sid, "report one.bin", "completed").await;
    agent.close(&sid).await;
    assert!(folder.join("a.bin").is_file());
    assert_eq!(
        std::fs::read(folder.join("report one.bin")).unwrap(),
        vec![7u8; 4096]
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_sets_files_the_page_reads_and_is_audited_by_name_size_and_hash_only() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    agent.navigate_ok(&sid, &site.url("/upload")).await;
    let (first, second) = (b"hello upload".as_slice(), "a;b;ü".as_bytes());

    let (status, out) = agent
        .tool(
            &sid,
            "upload",
            json!({ "selector": "#f", "files": [
                { "name": "hello.txt", "content_base64": b64(first) },
                { "name": "Ünïcode name.csv", "content_base64": b64(second) },
            ] }),
        )
        .await;

    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["files"],
        json!([
            { "name": "hello.txt", "size": first.len(), "sha256": sha(first) },
            { "name": "Ünïcode name.csv", "size": second.len(), "sha256": sha(second) },
        ])
    );
    let want = format!(
        "got hello.txt:{}:hello upload|Ünïcode name.csv:{}:a;b;ü",
        first.len(),
        second.len()
    );
    let (status, waited) = agent.tool(&sid, "wait_for", json!({ "text": want })).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the page did not read the files: {waited}"
    );
    let (row, params) = audited_upload(&app).await;
    assert_eq!(params["files"][0]["sha256"], sha(first), "{params}");
    assert_eq!(params["files"][1]["size"], second.len(), "{params}");
    assert!(
        !row.params.contains("hello upload") && !row.params.contains(&b64(first)),
        "content in the audit: {}",
        row.params
    );
    // This session refuses downloads (the default): a download is refused,
    // nothing lands in its sandbox's download directory or the data dir,
    // and it has none to list.
    let refused = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url("/download?name=denied.bin") }),
        )
        .await;
    assert_error(
        &refused,
        StatusCode::UNPROCESSABLE_ENTITY,
        "download_refused",
    );
    let incoming = sandbox_dir(&app, &sid, "downloads").await;
    let since = std::time::Instant::now();
    while since.elapsed() < Duration::from_secs(1) {
        assert_eq!(crate::helpers::walk(&incoming), Vec::<PathBuf>::new());
        assert!(
            !app.state
                .settings
                .server
                .data_dir
                .join("downloads")
                .exists()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_error(
        &agent.get(&format!("/api/sessions/{sid}/downloads")).await,
        StatusCode::CONFLICT,
        "downloads_denied",
    );
    app.stop().await;
}

/// The first `tool.upload` audit row and its parsed params.
async fn audited_upload(app: &TestApp) -> (cordon::audit::Event, Value) {
    let row = audit(app)
        .await
        .into_iter()
        .find(|e| e.action == "tool.upload")
        .expect("the upload is audited");
    let params = serde_json::from_str(&row.params).unwrap();
    (row, params)
}

/// A session of tenant `acme` on the upload page, Cordon started with `env`.
async fn on_upload_page(env: &[(&str, &str)]) -> (site::Site, TestApp, AgentClient, String) {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), env).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({ "record": "off" })).await;
    agent.navigate_ok(&sid, &site.url("/upload")).await;
    (site, app, agent, sid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_are_typed_errors_and_write_nothing() {
    let (_site, app, agent, sid) = on_upload_page(&[("CORDON_UPLOAD_MAX_MB", "1")]).await;
    let file = |name: &str, bytes: &[u8]| json!({ "name": name, "content_base64": b64(bytes) });
    let upload = |target: &str, files: Vec<Value>| json!({ "selector": target, "files": files });

    let not_input = agent
        .tool(&sid, "upload", upload("#t", vec![file("a.txt", b"x")]))
        .await;
    assert_error(
        &not_input,
        StatusCode::UNPROCESSABLE_ENTITY,
        "not_a_file_input",
    );
    let two_on_one = agent
        .tool(
            &sid,
            "upload",
            upload("#one", vec![file("a.txt", b"x"), file("b.txt", b"y")]),
        )
        .await;
    assert_error(
        &two_on_one,
        StatusCode::UNPROCESSABLE_ENTITY,
        "action_failed",
    );
    for name in ["a/b.txt", "..\\x", "bell\u{7}.txt", "line\nbreak", "", ".."] {
        let answer = agent
            .tool(&sid, "upload", upload("#f", vec![file(name, b"x")]))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_file_name");
    }
    // One byte over the cap (the body itself is within its limit) …
    let over = vec![1u8; (1 << 20) + 1];
    let answer = agent
        .tool(&sid, "upload", upload("#f", vec![file("big.bin", &over)]))
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // … and a body far over the route's own limit.
    let huge = vec![1u8; 2 << 20];
    let answer = agent
        .tool(&sid, "upload", upload("#f", vec![file("huge.bin", &huge)]))
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // Another tenant's session is not found.
    let other = app.agent("globex").await;
    let answer = other
        .tool(&sid, "upload", upload("#f", vec![file("a.txt", b"x")]))
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");

    // Refused input was not even audited as requested: only the two calls
    // that reached the page were.
    let requested = audit(&app)
        .await
        .iter()
        .filter(|e| e.action == "tool.upload")
        .count();
    assert_eq!(requested, 2);
    let written = crate::helpers::walk(&sandbox_dir(&app, &sid, "uploads").await);
    assert_eq!(written, Vec::<PathBuf>::new(), "bad uploads wrote files");
    let (_, dom) = agent.tool(&sid, "read_dom", json!({})).await;
    assert!(
        dom["html"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"<p id="out"></p>"#),
        "the page saw files: {dom}"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_and_uploads_work_with_the_process_and_exec_drivers_too() {
    let site = site::start().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exec-chromium.sh");
    let (create, destroy) = (
        format!("{} create", script.display()),
        format!("{} destroy", script.display()),
    );
    let drivers: [&[(&str, &str)]; 2] = [
        &[("CORDON_SANDBOX_DRIVER", "process")],
        &[
            ("CORDON_SANDBOX_DRIVER", "exec"),
            ("CORDON_EXEC_CREATE", &create),
            ("CORDON_EXEC_DESTROY", &destroy),
        ],
    ];
    for env in drivers {
        let app = session_app(Backend::Sqlite, &site.allow(), env).await;
        let agent = app.agent("acme").await;
        let sid = agent
            .open(json!({ "downloads": "allow", "record": "off" }))
            .await;
        agent.navigate_ok(&sid, &site.url("/files")).await;
        agent
            .tool(&sid, "click", json!({ "selector": "#dl" }))
            .await;
        let d = wait_download(&agent, &sid, "report one.bin", "completed").await;
        assert_eq!(d["sha256"], sha(&[7u8; 4096]), "{env:?}: {d}");
        let res = fetch(&agent, &sid, "report%20one.bin").await;
        assert_eq!(res.bytes().await.unwrap().as_ref(), [7u8; 4096].as_slice());

        agent.navigate_ok(&sid, &site.url("/upload")).await;
        let (status, out) = agent
            .tool(
                &sid,
                "upload",
                json!({ "selector": "#f", "files": [{ "name": "x.txt", "content_base64": b64(b"xyz") }] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{env:?}: {out}");
        let (status, waited) = agent
            .tool(&sid, "wait_for", json!({ "text": "got x.txt:3:xyz" }))
            .await;
        assert_eq!(status, StatusCode::OK, "{env:?}: {waited}");
        agent.close(&sid).await;
        app.stop().await;
    }
}

/// `download_transfer = "cdp"` (what the `kube` driver uses: a pod shares
/// no directory with Cordon): the same downloads arrive over CDP, with the
/// same listing, bytes, hashes, caps and audit; the page's own name for an
/// `<a download>` is kept; a hostile name stays in the session's folder; a
/// `blob:` download (which never reaches the network) is listed as refused;
/// nothing is written to the sandbox's download directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_taken_over_cdp_are_kept_capped_named_and_audited_like_saved_ones() {
    let site = site::start().await;
    let app = session_app(
        Backend::Sqlite,
        &site.allow(),
        &[
            ("CORDON_DOWNLOAD_TRANSFER", "cdp"),
            ("CORDON_DOWNLOAD_MAX_MB", "1"),
            ("CORDON_DOWNLOAD_SESSION_MAX_MB", "1"),
            // An `<a download>` link waits for an operator by default;
            // the gate is not what this test is about.
            ("CORDON_RISK_LEVELS", r#"{"download": "medium"}"#),
        ],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent
        .open(json!({ "downloads": "allow", "record": "off" }))
        .await;
    let content = vec![7u8; 4096];

    // A navigation that turns into a download answers as one.
    let nav = agent
        .navigate_ok(&sid, &site.url("/download?name=direct.bin"))
        .await;
    assert_eq!(nav["download_started"], true, "{nav}");
    let direct = wait_download(&agent, &sid, "direct.bin", "completed").await;
    assert_eq!(direct["size"], 4096, "{direct}");
    assert_eq!(direct["sha256"], sha(&content), "{direct}");
    let res = fetch(&agent, &sid, "direct.bin").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.bytes().await.unwrap().as_ref(), content.as_slice());

    // Links: an attachment, an `<a download="…">` of a text the browser
    // would show, and a `blob:` one.
    agent.navigate_ok(&sid, &site.url("/files")).await;
    for id in ["#dl", "#named", "#blob"] {
        let (status, clicked) = agent.tool(&sid, "click", json!({ "selector": id })).await;
        assert_eq!(status, StatusCode::OK, "{id}: {clicked}");
    }
    wait_download(&agent, &sid, "report one.bin", "completed").await;
    let named = wait_download(&agent, &sid, "page name.txt", "completed").await;
    assert_eq!(named["sha256"], sha(b"plain words"), "{named}");
    let blob = wait_download(&agent, &sid, "made.txt", "refused").await;
    assert_eq!(blob["reason"], "not_taken", "{blob}");
    // The page is still the page: a download does not navigate.
    let (_, tabs) = agent.get(&format!("/api/sessions/{sid}/tabs")).await;
    assert!(tabs.to_string().contains("/files"), "{tabs}");

    // Past the file cap: refused, nothing kept.
    agent
        .tool(&sid, "click", json!({ "selector": "#big" }))
        .await;
    let big = wait_download(&agent, &sid, "big.bin", "refused").await;
    assert_eq!(big["reason"], "too_large", "{big}");
    // Each within the file cap, but together past the session's.
    agent
        .navigate_ok(&sid, &site.url("/mid-download?name=a.bin"))
        .await;
    wait_download(&agent, &sid, "a.bin", "completed").await;
    agent
        .navigate_ok(&sid, &site.url("/mid-download?name=b.bin"))
        .await;
    let b = wait_download(&agent, &sid, "b.bin", "refused").await;
    assert_eq!(b["reason"], "session_full", "{b}");

    // A name that climbs out is made safe: every file stays in the
    // session's own folder, and none in the sandbox's.
    agent
        .navigate_ok(&sid, &site.url("/download?name=..%2F..%2Fescape.bin"))
        .await;
    wait_until(
        "the climbing name to be kept, made safe",
        PATIENCE,
        || async {
            let (_, list) = agent.get(&format!("/api/sessions/{sid}/downloads")).await;
            let kept = list.as_array().map_or(0, |l| {
                l.iter()
                    .filter(|d| {
                        d["state"] == "completed"
                            && d["name"].as_str().is_some_and(|n| n.contains("escape"))
                    })
                    .count()
            });
            if kept == 1 {
                Ok(())
            } else {
                Err(list.to_string())
            }
        },
    )
    .await;
    let root = app.state.settings.server.data_dir.join("downloads");
    let folder = root.join("acme").join(&sid);
    let files = crate::helpers::walk(&root);
    assert!(
        files.iter().all(|f| f.parent() == Some(folder.as_path())),
        "{files:?}"
    );
    let mut names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "no half-taken file is left: {names:?}");
    assert!(
        crate::helpers::walk(&sandbox_dir(&app, &sid, "downloads").await).is_empty(),
        "the browser saved nothing itself"
    );
    let events = audit(&app).await;
    let completed = events
        .iter()
        .filter(|e| e.action == "download.completed" && e.session.as_deref() == Some(&sid))
        .count();
    assert_eq!(completed, 5);
    for outcome in [
        "refused: too_large",
        "refused: session_full",
        "refused: not_taken",
    ] {
        assert!(
            events
                .iter()
                .any(|e| e.action == "download.refused" && e.outcome == outcome),
            "{outcome}"
        );
    }
    agent.close(&sid).await;
    assert!(
        !folder.exists(),
        "a session that does not record takes its downloads along"
    );
    app.stop().await;
}

/// `upload_transfer = "page"` (what the `kube` driver uses: a pod shares no
/// directory with Cordon): the bytes go over CDP and the page gets the same
/// files (names, sizes, types, identical bytes), nothing is written to the
/// sandbox's upload directory, the audit row is the same, and a single-file
/// input still refuses two files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_through_the_page_gives_the_page_the_same_files_and_writes_nothing() {
    let (_site, app, agent, sid) = on_upload_page(&[("CORDON_UPLOAD_TRANSFER", "page")]).await;
    let text = "a;b;ü".as_bytes();
    let binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let (status, out) = agent
        .tool(
            &sid,
            "upload",
            json!({ "selector": "#f", "files": [
                { "name": "Ünïcode name.csv", "content_base64": b64(text) },
                { "name": "all bytes.png", "content_base64": b64(&binary) },
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["files"],
        json!([
            { "name": "Ünïcode name.csv", "size": text.len(), "sha256": sha(text) },
            { "name": "all bytes.png", "size": binary.len(), "sha256": sha(&binary) },
        ])
    );
    let want = format!(
        "meta Ünïcode name.csv text/csv {} | all bytes.png image/png {}",
        sha(text),
        sha(&binary)
    );
    let (status, waited) = agent.tool(&sid, "wait_for", json!({ "text": want })).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the page did not get the same files: {waited}"
    );
    let uploads = sandbox_dir(&app, &sid, "uploads").await;
    assert_eq!(
        crate::helpers::walk(&uploads),
        Vec::<PathBuf>::new(),
        "nothing written for the browser"
    );
    let (row, params) = audited_upload(&app).await;
    assert_eq!(params["files"][1]["sha256"], sha(&binary), "{params}");
    assert!(!row.params.contains(&b64(text)), "{}", row.params);

    // The single-file input takes one file, as with the other transfer.
    let two = agent
        .tool(
            &sid,
            "upload",
            json!({ "selector": "#one", "files": [
                { "name": "a.txt", "content_base64": b64(b"a") },
                { "name": "b.txt", "content_base64": b64(b"b") },
            ] }),
        )
        .await;
    assert_error(&two, StatusCode::UNPROCESSABLE_ENTITY, "action_failed");
    app.stop().await;
}

/// Two downloads under one name too long for a file name (the page's
/// own): both are kept, under two names within the limit, the second
/// numbered; on the shared folder and taken over CDP alike (the naming
/// once spun forever on such a name: its number was cut off again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_downloads_under_one_overlong_name_are_both_kept_under_two_names() {
    let long = format!("{}.bin", "a".repeat(300));
    for transfer in ["auto", "cdp"] {
        let site = site::start().await;
        let app = session_app(
            Backend::Sqlite,
            &site.allow(),
            &[("CORDON_DOWNLOAD_TRANSFER", transfer)],
        )
        .await;
        let agent = app.agent("acme").await;
        let sid = agent
            .open(json!({ "downloads": "allow", "record": "off" }))
            .await;
        for _ in 0..2 {
            agent
                .navigate_ok(&sid, &site.url(&format!("/download?name={long}")))
                .await;
        }
        let kept = wait_until("two downloads kept", PATIENCE, || async {
            let (_, list) = agent.get(&format!("/api/sessions/{sid}/downloads")).await;
            let done: Vec<String> = list
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["state"] == "completed")
                .filter_map(|d| d["name"].as_str().map(str::to_owned))
                .collect();
            if done.len() == 2 {
                Ok(done)
            } else {
                Err(list.to_string())
            }
        })
        .await;
        assert_ne!(kept[0], kept[1], "{transfer}: {kept:?}");
        for name in &kept {
            assert!(name.len() <= 255, "{transfer}: {}", name.len());
            assert!(
                name.ends_with(".bin") && name.starts_with("aaaa"),
                "{transfer}: {name}"
            );
        }
        assert!(
            kept.iter().any(|n| n.contains("(2)")),
            "{transfer}: {kept:?}"
        );
        // Both at the limit: the case where a number once did not fit.
        assert!(
            kept.iter().all(|n| n.len() == 255),
            "{transfer}: {:?}",
            kept.iter().map(String::len).collect::<Vec<_>>()
        );
        app.stop().await;
    }
}
