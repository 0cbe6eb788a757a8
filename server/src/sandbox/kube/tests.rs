//! The kube driver against recorded API exchanges: kube's mock service
//! (`tower_test::mock::pair`) stands in for the API server (none can run
//! here); each test asserts the requests the driver makes and answers
//! them as an API server does. The browser's `/json/version` is a real
//! HTTP server on 127.0.0.1.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::http::{self, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;
type Reply = tower_test::mock::SendResponse<Response<Body>>;

const NS: &str = "browsers";
const ID: &str = "b_testsandbox";
const POD: &str = "b-testsandbox";

/// One request the driver sent, read in full.
struct Seen {
    method: http::Method,
    path: String,
    query: BTreeMap<String, String>,
    body: Value,
    reply: Reply,
}

impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {:?} {}",
            self.method, self.path, self.query, self.body
        )
    }
}

impl Seen {
    fn answer(self, code: u16, body: Value) {
        let resp = Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap();
        self.reply.send_response(resp);
    }

    /// A watch answer: one JSON event per line, then the end of the watch.
    fn events(self, events: &[Value]) {
        let mut text = Vec::new();
        for e in events {
            text.extend(serde_json::to_vec(e).unwrap());
            text.push(b'\n');
        }
        self.reply.send_response(
            Response::builder()
                .status(200)
                .body(Body::from(text))
                .unwrap(),
        );
    }
}

/// The fake API server's side.
struct Api(Handle);

impl Api {
    /// The next request, which must be `method` on `path`.
    async fn expect(&mut self, method: &str, path: &str) -> Seen {
        let next = tokio::time::timeout(Duration::from_secs(5), self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("no request within 5 s; expected {method} {path}"))
            .unwrap_or_else(|| panic!("the driver dropped its client; expected {method} {path}"));
        let (req, reply) = next;
        let (parts, body) = req.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let seen = Seen {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            query: url::form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            reply,
        };
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            (method, path),
            "unexpected request: {seen:?}"
        );
        seen
    }

    /// No request arrives within a short while (the driver is done).
    async fn quiet(&mut self) {
        if let Ok(Some((req, _))) =
            tokio::time::timeout(Duration::from_millis(300), self.0.next_request()).await
        {
            panic!("unexpected request: {} {}", req.method(), req.uri());
        }
    }
}

fn pods() -> String {
    format!("/api/v1/namespaces/{NS}/pods")
}

fn one_pod() -> String {
    format!("{}/{POD}", pods())
}

fn driver(cdp_port: u16, ready_timeout: Duration) -> (Arc<KubeDriver>, Api) {
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(svc, "default");
    let template = PodTemplate::parse(super::template::tests::GOOD).unwrap();
    let opts = KubeOptions {
        deployment: "test-deploy".into(),
        cdp_port,
        egress_host: "10.1.2.3".parse().unwrap(),
        ready_timeout,
        attempts: 3,
        backoff: Duration::from_millis(5),
    };
    (
        Arc::new(KubeDriver::new(client, Some(NS), template, opts)),
        Api(handle),
    )
}

/// `d.start(spec(dir))` on its own task, so the test can answer the API
/// calls it makes.
fn start_in_background(
    d: &Arc<KubeDriver>,
    dir: &std::path::Path,
) -> tokio::task::JoinHandle<anyhow::Result<Sandbox>> {
    let d = d.clone();
    let spec = spec(dir);
    tokio::spawn(async move { d.start(spec).await })
}

fn spec(dir: &std::path::Path) -> SandboxSpec {
    SandboxSpec {
        id: ID.into(),
        proxy: "0.0.0.0:4321".parse().unwrap(),
        egress: None,
        runtime_dir: dir.join(ID),
        window: (1280, 720),
        limits: Some(Arc::new(
            crate::sandbox::limits::Enforcer::disabled(crate::sandbox::limits::Limits {
                memory_bytes: 512 << 20,
                pids: 256,
                open_files: 1024,
                tmpfs_bytes: 64 << 20,
                cpu_weight: 100,
            })
            .remote(),
        )),
    }
}

/// A pod as the API server shows it, at `version`, in `phase`.
fn pod(version: &str, phase: &str, ready: bool, ip: Option<&str>) -> Value {
    let mut status = json!({
        "phase": phase,
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
    });
    if let Some(ip) = ip {
        status["podIP"] = ip.into();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "namespace": NS,
            "resourceVersion": version,
            "labels": {MANAGED_BY: "cordon", DEPLOYMENT: "test-deploy", SANDBOX: ID},
        },
        "spec": {"containers": [{"name": "browser", "image": "x"}]},
        "status": status,
    })
}

fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

fn status(code: u16, reason: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": format!("recorded {code}"), "reason": reason, "code": code,
    })
}

/// A browser's DevTools endpoint on 127.0.0.1: answers `/json/version`
/// naming itself `ws://localhost/…`, as Chromium does; records each
/// request line.
async fn devtools() -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head);
            log.lock()
                .unwrap()
                .push(text.lines().next().unwrap_or_default().to_owned());
            let body = r#"{"Browser":"HeadlessChrome/156","webSocketDebuggerUrl":"ws://localhost/devtools/browser/abc-123"}"#;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(resp.as_bytes()).await;
        }
    });
    (port, seen)
}

/// Asserts the pod the driver created: name, labels, the browser's
/// environment, the template's security context kept.
fn check_created(body: &Value, cdp_port: u16) {
    assert_eq!(body["metadata"]["name"], POD, "{body}");
    let labels = &body["metadata"]["labels"];
    assert_eq!(labels[MANAGED_BY], "cordon", "{body}");
    assert_eq!(labels[DEPLOYMENT], "test-deploy", "{body}");
    assert_eq!(labels[SANDBOX], ID, "{body}");
    let c = &body["spec"]["containers"][0];
    let env: BTreeMap<&str, &str> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(env["CORDON_SANDBOX_ID"], ID, "{body}");
    assert_eq!(env["CORDON_PROXY"], "10.1.2.3:4321", "{body}");
    assert_eq!(env["CORDON_CDP_PORT"], cdp_port.to_string(), "{body}");
    assert_eq!(env["CORDON_WINDOW"], "1280,720", "{body}");
    assert_eq!(
        env["CORDON_LIMIT_MEMORY_BYTES"],
        (512u64 << 20).to_string(),
        "{body}"
    );
    assert_eq!(env["CORDON_LIMIT_PIDS"], "256", "{body}");
    assert_eq!(env["KEEP"], "me", "the template's own env stays: {body}");
    let args = env["CORDON_CHROMIUM_ARGS"];
    assert!(
        args.contains("--proxy-server=http://10.1.2.3:4321")
            && args.contains("--proxy-bypass-list=<-loopback>")
            && !args.contains("--remote-debugging"),
        "{args}"
    );
    assert_eq!(
        c["resources"]["limits"]["memory"],
        (512u64 << 20).to_string(),
        "{body}"
    );
    let sc = &c["securityContext"];
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{body}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{body}");
    assert_eq!(
        body["spec"]["automountServiceAccountToken"], false,
        "{body}"
    );
    assert_eq!(
        body["spec"]["securityContext"]["runAsNonRoot"], true,
        "{body}"
    );
    assert_eq!(body["spec"]["restartPolicy"], "Never", "{body}");
}

/// Asserts a watch of the one pod from `version`.
fn check_watch(seen: &Seen, version: &str) {
    assert_eq!(
        seen.query.get("watch").map(String::as_str),
        Some("true"),
        "{seen:?}"
    );
    assert_eq!(
        seen.query.get("fieldSelector").map(String::as_str),
        Some(format!("metadata.name={POD}").as_str()),
        "{seen:?}"
    );
    assert_eq!(
        seen.query.get("resourceVersion").map(String::as_str),
        Some(version),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_pod_that_becomes_ready_gives_its_browsers_url_on_the_pod_ip() {
    let dir = tempfile::tempdir().unwrap();
    let (port, requests) = devtools().await;
    let (d, mut api) = driver(port, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());

    let create = api.expect("POST", &pods()).await;
    check_created(&create.body, port);
    create.answer(201, pod("100", "Pending", false, None));
    let watch = api.expect("GET", &pods()).await;
    check_watch(&watch, "100");
    watch.events(&[
        event("ADDED", pod("100", "Pending", false, None)),
        event("MODIFIED", pod("101", "Running", true, Some("127.0.0.1"))),
    ]);

    let sb = start.await.unwrap().unwrap();
    assert_eq!(
        sb.cdp_url,
        format!("ws://127.0.0.1:{port}/devtools/browser/abc-123")
    );
    assert_eq!(
        (sb.pid, sb.marker.as_str(), sb.driver),
        (None, POD, DriverKind::Kube)
    );
    assert_eq!(
        requests.lock().unwrap().as_slice(),
        ["GET /json/version HTTP/1.1"]
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_name_that_already_exists_is_an_error_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (d, mut api) = driver(1, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(409, status(409, "AlreadyExists"));
    let err = format!("{:#}", start.await.unwrap().unwrap_err());
    assert!(err.contains("already exists"), "{err}");
    api.quiet().await;
}

#[tokio::test]
async fn a_server_error_on_create_is_retried() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _) = devtools().await;
    let (d, mut api) = driver(port, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(500, status(500, "InternalError"));
    let create = api.expect("POST", &pods()).await;
    check_created(&create.body, port);
    create.answer(201, pod("7", "Pending", false, None));
    let watch = api.expect("GET", &pods()).await;
    check_watch(&watch, "7");
    watch.events(&[event(
        "MODIFIED",
        pod("8", "Running", true, Some("127.0.0.1")),
    )]);
    let sb = start.await.unwrap().unwrap();
    assert!(sb.cdp_url.starts_with("ws://127.0.0.1:"), "{}", sb.cdp_url);
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_an_error_after_bounded_tries() {
    let dir = tempfile::tempdir().unwrap();
    let (d, mut api) = driver(1, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    for _ in 0..3 {
        api.expect("POST", &pods())
            .await
            .answer(503, status(503, "ServiceUnavailable"));
    }
    let err = format!("{:#}", start.await.unwrap().unwrap_err());
    assert!(
        err.contains("cannot create pod") && err.contains("503"),
        "{err}"
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_watch_that_expires_resumes_from_a_fresh_list() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _) = devtools().await;
    let (d, mut api) = driver(port, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(201, pod("5", "Pending", false, None));
    let watch = api.expect("GET", &pods()).await;
    check_watch(&watch, "5");
    watch.events(&[
        event("ADDED", pod("5", "Pending", false, None)),
        event("ERROR", status(410, "Expired")),
    ]);
    let list = api.expect("GET", &pods()).await;
    assert_eq!(
        list.query.get("watch"),
        None,
        "a list, not a watch: {list:?}"
    );
    assert_eq!(
        list.query.get("fieldSelector").map(String::as_str),
        Some(format!("metadata.name={POD}").as_str()),
        "{list:?}"
    );
    list.answer(
        200,
        json!({
            "apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "900"},
            "items": [pod("850", "Pending", false, None)],
        }),
    );
    let watch = api.expect("GET", &pods()).await;
    check_watch(&watch, "900");
    watch.events(&[event(
        "MODIFIED",
        pod("901", "Running", true, Some("127.0.0.1")),
    )]);
    let sb = start.await.unwrap().unwrap();
    assert_eq!(
        sb.cdp_url,
        format!("ws://127.0.0.1:{port}/devtools/browser/abc-123")
    );
}

#[tokio::test]
async fn a_watch_answered_410_resumes_from_a_fresh_list() {
    let dir = tempfile::tempdir().unwrap();
    let (port, _) = devtools().await;
    let (d, mut api) = driver(port, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(201, pod("5", "Pending", false, None));
    api.expect("GET", &pods())
        .await
        .answer(410, status(410, "Expired"));
    // The pod became ready while nobody watched: the list shows it.
    api.expect("GET", &pods()).await.answer(
        200,
        json!({
            "apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "60"},
            "items": [pod("59", "Running", true, Some("127.0.0.1"))],
        }),
    );
    let sb = start.await.unwrap().unwrap();
    assert!(
        sb.cdp_url.ends_with("/devtools/browser/abc-123"),
        "{}",
        sb.cdp_url
    );
    api.quiet().await;
}

#[tokio::test]
async fn a_pod_that_never_becomes_ready_is_deleted_and_the_start_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (d, mut api) = driver(1, Duration::from_millis(400));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(201, pod("1", "Pending", false, None));
    api.expect("GET", &pods())
        .await
        .events(&[event("ADDED", pod("1", "Pending", false, None))]);
    // The watch ended (as the server's timeout ends one); the next one
    // hears nothing until the driver gives up.
    let silent = api.expect("GET", &pods()).await;
    check_watch(&silent, "1");
    let delete = api.expect("DELETE", &one_pod()).await;
    assert_eq!(delete.body["gracePeriodSeconds"], 1, "{delete:?}");
    delete.answer(200, pod("2", "Pending", false, None));
    drop(silent);
    let err = format!("{:#}", start.await.unwrap().unwrap_err());
    assert!(err.contains("was not ready within"), "{err}");
    assert!(!dir.path().join(ID).exists(), "its runtime dir is removed");
}

#[tokio::test]
async fn a_pod_that_fails_is_deleted_and_the_start_fails_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let (d, mut api) = driver(1, Duration::from_secs(10));
    let start = start_in_background(&d, dir.path());
    api.expect("POST", &pods())
        .await
        .answer(201, pod("1", "Pending", false, None));
    let mut failed = pod("2", "Failed", false, None);
    failed["status"]["reason"] = "Evicted".into();
    failed["status"]["message"] = "The node was low on resource: memory.".into();
    api.expect("GET", &pods())
        .await
        .events(&[event("MODIFIED", failed)]);
    api.expect("DELETE", &one_pod())
        .await
        .answer(404, status(404, "NotFound"));
    let err = format!("{:#}", start.await.unwrap().unwrap_err());
    assert!(
        err.contains("failed to start")
            && err.contains("Evicted")
            && err.contains("low on resource"),
        "{err}"
    );
}

#[tokio::test]
async fn stopping_a_pod_that_is_gone_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let (d, mut api) = driver(1, Duration::from_secs(10));
    let sb = Sandbox {
        id: ID.into(),
        driver: DriverKind::Kube,
        cdp_url: "ws://10.0.0.9:9222/devtools/browser/x".into(),
        pid: None,
        marker: POD.into(),
        runtime_dir: dir.path().join(ID),
        limits: None,
    };
    let stop = tokio::spawn({
        let d = d.clone();
        let sb = sb.clone();
        async move { d.stop(&sb).await }
    });
    api.expect("DELETE", &one_pod())
        .await
        .answer(404, status(404, "NotFound"));
    stop.await.unwrap().unwrap();

    // A server error on delete is retried, and one that persists is an error.
    let stop = tokio::spawn({
        let d = d.clone();
        async move { d.stop(&sb).await }
    });
    for _ in 0..3 {
        api.expect("DELETE", &one_pod())
            .await
            .answer(500, status(500, "InternalError"));
    }
    let err = format!("{:#}", stop.await.unwrap().unwrap_err());
    assert!(err.contains("cannot delete pod"), "{err}");
}

#[tokio::test]
async fn sweep_deletes_only_pods_of_unknown_sandboxes() {
    let (d, mut api) = driver(1, Duration::from_secs(10));
    let keep: HashSet<String> = ["b_known".to_owned()].into();
    let sweep = tokio::spawn({
        let d = d.clone();
        async move { d.sweep(&keep).await }
    });
    let list = api.expect("GET", &pods()).await;
    assert_eq!(
        list.query.get("labelSelector").map(String::as_str),
        Some("app.kubernetes.io/managed-by=cordon,cordon.dev/deployment=test-deploy"),
        "{list:?}"
    );
    // Made an hour ago, or just now (still starting: its row comes once
    // its browser answers, so it is no orphan yet).
    let old = "2000-01-01T00:00:00Z";
    let young = k8s_openapi::jiff::Timestamp::now().to_string();
    let named = |id: &str, created: &str| {
        let mut p = pod("1", "Running", true, Some("10.0.0.1"));
        p["metadata"]["name"] = super::pod_name(id).into();
        p["metadata"]["labels"][SANDBOX] = id.into();
        p["metadata"]["creationTimestamp"] = created.into();
        p
    };
    list.answer(
        200,
        json!({
            "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "1"},
            "items": [
                named("b_known", old),
                named("b_orphan", old),
                named("b_gone", old),
                named("b_starting", &young),
            ],
        }),
    );
    api.expect("DELETE", &format!("{}/b-orphan", pods()))
        .await
        .answer(200, named("b_orphan", old));
    api.expect("DELETE", &format!("{}/b-gone", pods()))
        .await
        .answer(404, status(404, "NotFound"));
    assert_eq!(sweep.await.unwrap().unwrap(), 2);
    api.quiet().await;
}

#[test]
fn pod_names_are_dns_safe() {
    assert_eq!(pod_name("b_AbC2"), "b-abc2");
}

#[test]
fn the_devtools_url_is_pointed_at_the_pod() {
    let cdp: SocketAddr = "10.0.0.7:9222".parse().unwrap();
    assert_eq!(
        rewrite("ws://127.0.0.1:9222/devtools/browser/x-1", cdp).unwrap(),
        "ws://10.0.0.7:9222/devtools/browser/x-1"
    );
    let v6: SocketAddr = "[fd00::7]:9222".parse().unwrap();
    assert_eq!(
        rewrite("ws://localhost/devtools/browser/x", v6).unwrap(),
        "ws://[fd00::7]:9222/devtools/browser/x"
    );
    assert!(rewrite("http://x/json", cdp).is_err());
    assert!(rewrite("ws://x/other", cdp).is_err());
}
