//! Several `cordon serve` processes on one PostgreSQL act as one service:
//! any replica answers any call (forwarded over the signed internal hop),
//! tenant limits count over all of them, exactly one holds the
//! housekeeping lock, and a replica killed with SIGKILL has its sessions
//! ended (`replica_lost`) and its browsers stopped by a survivor. Also the
//! start refusals (name in use, another key, another schema) and forged
//! hops.

use std::io::BufRead;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{Backend, PATIENCE, ServeProcess, TestDb, cordon_cli, wait_until};

pub(crate) const SECRET: &str = "a-test-cluster-secret-of-forty-characters";

/// A replica and its log lines (drained, so the pipe never fills; printed
/// when a test fails).
pub(crate) struct Replica {
    name: String,
    /// Whether it serves built-in HTTPS (for `localhost`).
    https: bool,
    proc: Option<ServeProcess>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    pub(crate) fn start(
        dir: &Path,
        db: &str,
        key: &str,
        name: &str,
        extra: &[(&str, &str)],
    ) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let mut env = vec![
            ("CORDON_DATABASE_URL", db),
            ("CORDON_MASTER_KEY", key),
            ("CORDON_REPLICA_NAME", name),
            ("CORDON_CLUSTER_SECRET", SECRET),
            ("CORDON_REPLICA_LOST_AFTER_S", "3"),
            ("CORDON_POOL_SIZE", "0"),
            ("CORDON_MAX_SESSIONS_PER_TENANT", "3"),
        ];
        env.extend_from_slice(extra);
        let mut proc = ServeProcess::start(dir, &env);
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let lines = std::mem::replace(
            &mut proc.log,
            std::io::BufReader::new(empty_stderr()).lines(),
        );
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            name: name.to_owned(),
            https: extra.iter().any(|(k, _)| *k == "CORDON_TLS_CERT"),
            proc: Some(proc),
            log,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        let addr = &self.proc.as_ref().expect("running").addr;
        match self.https {
            true => {
                let port = addr.rsplit_once(':').expect("host:port").1;
                format!("https://localhost:{port}{path}")
            }
            false => format!("http://{addr}{path}"),
        }
    }

    /// SIGKILL, as a crash would.
    fn kill_hard(&mut self) {
        if let Some(p) = self.proc.take() {
            p.kill_hard();
        }
    }

    pub(crate) fn warnings(&self) -> String {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\""))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(p) = self.proc.take() {
            p.stop();
        }
    }
}

/// The browsers replica `host` runs (pid, marker), as the sandboxes table
/// records them.
async fn browsers_of(db: &str, host: &str) -> Vec<(i32, String)> {
    sqlx::query_as::<_, (i64, String)>(
        "SELECT pid, marker FROM sandboxes WHERE host = $1 AND state <> 'stopped'",
    )
    .bind(host)
    .fetch_all(&sqlx::PgPool::connect(db).await.unwrap())
    .await
    .unwrap()
    .into_iter()
    .map(|(p, m)| (i32::try_from(p).unwrap(), m))
    .collect()
}

/// Waits until a lost replica's `browsers` are stopped (by a survivor):
/// a test that kills a replica leaves no Chromium behind.
async fn wait_stopped(browsers: &[(i32, String)]) {
    wait_until(
        "the lost replica's browsers to be stopped",
        PATIENCE,
        || async {
            let alive: Vec<i32> = browsers
                .iter()
                .filter(|(pid, marker)| cordon::sandbox::is_alive(*pid, marker))
                .map(|(pid, _)| *pid)
                .collect();
            if alive.is_empty() {
                Ok(())
            } else {
                Err(format!("still running: {alive:?}"))
            }
        },
    )
    .await;
}

/// A stderr handle that is never read from (stands in for the one moved
/// to the draining thread).
fn empty_stderr() -> std::process::ChildStderr {
    let mut child = std::process::Command::new("true")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let _ = child.wait();
    err
}

/// Replica `a` in this process (a [`crate::helpers::TestApp`] on a fresh
/// PostgreSQL database: its dashboard and store are the test's) and
/// replica `b`, a `cordon serve` on the same database with `a`'s master
/// key and the process driver; both let `allow` through the egress guard
/// and get `extra`.
pub(crate) async fn pair(
    allow: &str,
    extra: &[(&str, &str)],
) -> (crate::helpers::TestApp, Replica) {
    let mut on_a = vec![
        ("CORDON_REPLICA_NAME", "a"),
        ("CORDON_CLUSTER_SECRET", SECRET),
    ];
    on_a.extend_from_slice(extra);
    let a = crate::helpers::session_app(Backend::Postgres, allow, &on_a).await;
    let key = std::fs::read_to_string(a.db.dir.path().join("data/master.key")).unwrap();
    let mut on_b = vec![
        ("CORDON_EGRESS_ALLOW", allow),
        ("CORDON_SANDBOX_DRIVER", "process"),
    ];
    on_b.extend_from_slice(extra);
    let b = Replica::start(
        &a.db.dir.path().join("b"),
        &a.db.url,
        key.trim(),
        "b",
        &on_b,
    );
    (a, b)
}

fn cli(dir: &Path, db: &str, key: &str, args: &[&str]) -> String {
    let out = cordon_cli(
        dir,
        &[("CORDON_DATABASE_URL", db), ("CORDON_MASTER_KEY", key)],
        args,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cordon {args:?}: {stderr}");
    // PostgreSQL's notices (a migration's `already exists, skipping`) are
    // not the operator's business.
    assert!(
        !stderr.contains("skipping") && !stderr.contains("notice"),
        "cordon {args:?} printed a database notice: {stderr}"
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Tenant `acme` and an API key of it (the key's text), made with the CLI.
fn tenant_and_key(dir: &Path, db: &str, key: &str) -> String {
    cli(dir, db, key, &["tenant", "create", "acme"]);
    cli(dir, db, key, &["apikey", "create", "--tenant", "acme"])
}

fn key_text() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

async fn readyz(http: &reqwest::Client, r: &Replica) -> Value {
    http.get(r.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Opens a session on `r` as `agent` (201, or the test fails with `r`'s
/// warnings); its id.
async fn open_on(http: &reqwest::Client, agent: &str, r: &Replica) -> String {
    let (st, body) = call(
        http,
        agent,
        reqwest::Method::POST,
        r.url("/api/sessions"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        st,
        StatusCode::CREATED,
        "open on {}: {body}\n{}",
        r.name,
        r.warnings()
    );
    body["session_id"].as_str().unwrap().to_owned()
}

async fn leaders(http: &reqwest::Client, replicas: &[&Replica]) -> Vec<String> {
    let mut out = Vec::new();
    for r in replicas {
        if readyz(http, r).await["checks"]["replica"]["leader"] == true {
            out.push(r.name.clone());
        }
    }
    out
}

async fn call(
    http: &reqwest::Client,
    key: &str,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = http.request(method, url).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_answer_for_each_other_and_a_killed_one_is_declared_lost() {
    let db = TestDb::new(Backend::Postgres).await;
    let root = db.dir.path();
    let key = key_text();
    let agent = tenant_and_key(root, &db.url, &key);
    let site = crate::site::start().await;
    let allow = site.allow();
    let extra = [
        ("CORDON_EGRESS_ALLOW", allow.as_str()),
        // The process driver's browsers outlive a killed control plane,
        // so a survivor has something to stop.
        ("CORDON_SANDBOX_DRIVER", "process"),
    ];
    let a = Replica::start(&root.join("a"), &db.url, &key, "a", &extra);
    let b = Replica::start(&root.join("b"), &db.url, &key, "b", &extra);
    let c = Replica::start(&root.join("c"), &db.url, &key, "c", &extra);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // Exactly one holds the housekeeping lock.
    let first = wait_until("one leader among a, b, c", PATIENCE, || async {
        let l = leaders(&http, &[&a, &b, &c]).await;
        if l.len() == 1 {
            Ok(l[0].clone())
        } else {
            Err(format!("{l:?}"))
        }
    })
    .await;

    // One session opened on each replica.
    let mut sessions = Vec::new();
    for r in [&a, &b, &c] {
        sessions.push(open_on(&http, &agent, r).await);
    }
    // The tenant's limit (3) counts all three replicas' sessions.
    for r in [&a, &b, &c] {
        let (st, body) = call(
            &http,
            &agent,
            reqwest::Method::POST,
            r.url("/api/sessions"),
            Some(json!({})),
        )
        .await;
        assert_eq!(
            st,
            StatusCode::TOO_MANY_REQUESTS,
            "a fourth on {}: {body}",
            r.name
        );
    }

    // Every replica drives every session: the pad counts the clicks, so
    // each call really reached the one browser.
    let replicas = [&a, &b, &c];
    for (i, sid) in sessions.iter().enumerate() {
        let via = replicas[(i + 1) % 3];
        let (st, nav) = call(
            &http,
            &agent,
            reqwest::Method::POST,
            via.url(&format!("/api/sessions/{sid}/navigate")),
            Some(json!({ "url": site.url("/pad") })),
        )
        .await;
        assert_eq!(
            st,
            StatusCode::OK,
            "navigate {sid} via {}: {nav}\n{}",
            via.name,
            via.warnings()
        );
        assert_eq!(nav["title"], "ready", "{nav}");
        for (n, r) in replicas.iter().enumerate() {
            let (st, done) = call(
                &http,
                &agent,
                reqwest::Method::POST,
                r.url(&format!("/api/sessions/{sid}/click")),
                Some(json!({ "x": 300, "y": 300 })),
            )
            .await;
            assert_eq!(st, StatusCode::OK, "click {sid} via {}: {done}", r.name);
            let (_, info) = call(
                &http,
                &agent,
                reqwest::Method::POST,
                r.url(&format!("/api/sessions/{sid}/read_dom")),
                Some(json!({})),
            )
            .await;
            assert!(
                info.to_string().contains(&format!("clicked {}", n + 1)),
                "after click {} via {} on {sid}: {info}",
                n + 1,
                r.name
            );
        }
        // Another tenant's key gets 404 on every replica, as on one.
    }

    // A forged hop is refused whatever it claims.
    let sid0 = &sessions[0];
    for forged in [
        "v1 ts=1 nonce=x tenant=acme key=k to=a sig=00".to_owned(),
        cordon::cluster::hop::sign(
            b"not the deployment's secret, 32+ chars",
            "dep_whatever",
            "POST",
            &format!("/api/sessions/{sid0}/click"),
            b"{}",
            &cordon::cluster::hop::Claims {
                ts: cordon::time::now_ms(),
                nonce: "0".repeat(32),
                tenant: "acme".into(),
                key_id: "k".into(),
                to: "a".into(),
            },
        ),
    ] {
        let res = http
            .post(a.url(&format!("/api/sessions/{sid0}/click")))
            .header("x-cordon-hop", forged)
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = res.status();
        let body: Value = res.json().await.unwrap();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(body["error"]["code"], "hop_refused", "{body}");
    }
    // A real hop (signed with the deployment's secret) is taken once; the
    // same header again is a replay.
    let store = db.store().await;
    let deployment = store.deployment().await.unwrap().unwrap().id;
    let path = format!("/api/sessions/{sid0}/read_dom");
    let body = br#"{}"#;
    let signed = cordon::cluster::hop::sign(
        SECRET.as_bytes(),
        &deployment,
        "POST",
        &path,
        body,
        &cordon::cluster::hop::Claims {
            ts: cordon::time::now_ms(),
            nonce: hex::encode(rand::random::<[u8; 16]>()),
            tenant: "acme".into(),
            key_id: "key_replayed".into(),
            to: "a".into(),
        },
    );
    let mut seen = Vec::new();
    for _ in 0..2 {
        let res = http
            .post(a.url(&path))
            .header("x-cordon-hop", &signed)
            .header("content-type", "application/json")
            .body(&body[..])
            .send()
            .await
            .unwrap();
        seen.push(res.status());
    }
    assert_eq!(
        seen,
        [StatusCode::OK, StatusCode::UNAUTHORIZED],
        "a replayed hop"
    );
    let logs = a.log.lock().unwrap().join("\n");
    assert!(logs.contains("internal hop refused"), "refusals are logged");
    assert!(
        !logs.contains(SECRET) && !logs.contains(&signed),
        "no secret or signature in logs"
    );

    // Kill the leader hard, with its session and browser.
    let mut all = [a, b, c];
    let v = all
        .iter()
        .position(|r| r.name == first)
        .expect("the leader is one of them");
    let victim_session = sessions[v].clone();
    let browsers = browsers_of(&db.url, &first).await;
    assert_eq!(
        browsers.len(),
        1,
        "the victim runs one browser: {browsers:?}"
    );
    assert!(cordon::sandbox::is_alive(browsers[0].0, &browsers[0].1));
    let killed_at = std::time::Instant::now();
    all[v].kill_hard();
    let rest: Vec<&Replica> = all.iter().filter(|r| r.proc.is_some()).collect();

    // A survivor takes the lock and ends the victim's session within 30 s.
    wait_until("a survivor to lead", PATIENCE, || async {
        let l = leaders(&http, &rest[..]).await;
        if l.len() == 1 {
            Ok(())
        } else {
            Err(format!("{l:?}"))
        }
    })
    .await;
    let ended = wait_until(
        "the victim's session to end as replica_lost",
        PATIENCE,
        || async {
            let row = store
                .session_find(&victim_session.parse().unwrap())
                .await
                .unwrap()
                .unwrap();
            match row.close_reason {
                Some(r) => Ok((row.state, r)),
                None => Err(format!("{:?}", row.state)),
            }
        },
    )
    .await;
    let took = killed_at.elapsed();
    assert_eq!(ended.1.as_str(), "replica_lost", "{ended:?}");
    assert!(took < Duration::from_secs(30), "ended after {took:?}");
    wait_stopped(&browsers).await;

    // Through a survivor: the victim's session is gone (410 naming the
    // reason); the others still work.
    let (st, body) = call(
        &http,
        &agent,
        reqwest::Method::POST,
        rest[0].url(&format!("/api/sessions/{victim_session}/click")),
        Some(json!({ "x": 1, "y": 1 })),
    )
    .await;
    assert_eq!(st, StatusCode::GONE, "{body}");
    assert!(body.to_string().contains("replica_lost"), "{body}");
    for sid in sessions.iter().filter(|s| **s != victim_session) {
        for r in &rest {
            let (st, body) = call(
                &http,
                &agent,
                reqwest::Method::POST,
                r.url(&format!("/api/sessions/{sid}/click")),
                Some(json!({ "x": 300, "y": 300 })),
            )
            .await;
            assert_eq!(
                st,
                StatusCode::OK,
                "{sid} via {} after the kill: {body}",
                r.name
            );
        }
    }

    // One audit chain, written by all, unbroken; the loss is in it.
    let out = cli(root, &db.url, &key, &["audit", "verify"]);
    assert!(out.starts_with("audit chain intact"), "{out}");
    let lost: Vec<(String,)> =
        sqlx::query_as("SELECT params FROM audit_events WHERE action = 'replica.lost'")
            .fetch_all(&sqlx::PgPool::connect(&db.url).await.unwrap())
            .await
            .unwrap();
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert!(
        lost[0].0.contains(&format!("\"replica\":\"{first}\"")),
        "{lost:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_a_taken_name_another_key_or_another_schema_is_refused() {
    let db = TestDb::new(Backend::Postgres).await;
    let root = db.dir.path();
    let key = key_text();
    let a = Replica::start(&root.join("a"), &db.url, &key, "a", &[]);
    let serve = |name: &str, key: &str| {
        let dir = root.join(format!("x-{name}-{}", &key[..6]));
        std::fs::create_dir_all(&dir).unwrap();
        // Bounded: a replica that wrongly starts is stopped after 60 s
        // (and the test fails) instead of hanging.
        std::process::Command::new("timeout")
            .args(["60", env!("CARGO_BIN_EXE_cordon"), "serve"])
            .current_dir(&dir)
            .env_remove("RUST_LOG")
            .env("CORDON_LOG_LEVEL", "warn")
            .env("CORDON_DATABASE_URL", &db.url)
            .env("CORDON_MASTER_KEY", key)
            .env("CORDON_REPLICA_NAME", name)
            .env("CORDON_BIND", "127.0.0.1:0")
            .env("CORDON_POOL_SIZE", "0")
            .env("CORDON_SITE_ROOT", crate::helpers::site_root())
            .output()
            .expect("cordon runs")
    };
    let refused = |out: std::process::Output, starts: &str| {
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "started: {err}");
        assert!(err.contains(starts), "wanted {starts:?}: {err}");
        assert!(!err.contains(SECRET), "{err}");
    };
    refused(serve("a", &key), "replica_name: \"a\" is in use");
    refused(serve("b", &key_text()), "master key: this replica's key id");
    // A running replica with another schema (as an older binary records it).
    let store = db.store().await;
    let mut row = store.replica_get("a").await.unwrap().unwrap();
    row.name = "old".into();
    row.instance = "inst_old".into();
    row.schema_version = 9;
    row.heartbeat_at = cordon::time::now_ms() + 60_000;
    store.replica_register(&row).await.unwrap();
    refused(
        serve("c", &key),
        "schema version: running replica \"old\" has schema 9",
    );
    drop(a);
}

/// A rolling upgrade's middle: a newer release has migrated the database
/// (expand only) while a replica of this one runs. That replica keeps
/// serving sessions, and another replica of this release starts on the
/// newer schema (as a restarted pod of the old ReplicaSet does); across a
/// contract migration one is refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_replica_runs_on_a_newer_expand_only_schema_and_not_across_a_contract() {
    let db = TestDb::new(Backend::Postgres).await;
    let root = db.dir.path();
    let key = key_text();
    let agent = tenant_and_key(root, &db.url, &key);
    let extra = [("CORDON_SANDBOX_DRIVER", "process")];
    let a = Replica::start(&root.join("a"), &db.url, &key, "a", &extra);
    // The newer release's migration: a column on a table this one writes,
    // and a table of its own.
    db.raw(
        "ALTER TABLE sessions ADD COLUMN rolling_note TEXT; \
         ALTER TABLE grant_requests ADD COLUMN rolling_flag BIGINT NOT NULL DEFAULT 0; \
         CREATE TABLE rolling_probe (id TEXT PRIMARY KEY); \
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9001, 'rolling probe', TRUE, '\\x00'::bytea, 0)",
    )
    .await
    .unwrap();
    let b = Replica::start(&root.join("b"), &db.url, &key, "b", &extra);
    // Both serve: a session opens and closes on each (rows written across
    // the newer columns).
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for r in [&a, &b] {
        let ready = http.get(r.url("/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), StatusCode::OK, "{} not ready", r.name);
        let sid = open_on(&http, &agent, r).await;
        let (st, body) = call(
            &http,
            &agent,
            reqwest::Method::DELETE,
            r.url(&format!("/api/sessions/{sid}")),
            None,
        )
        .await;
        assert!(st.is_success(), "close on {}: {st} {body}", r.name);
    }
    // A contract migration in the gap: refused at start, naming it.
    db.raw(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9002, 'contract drop probe', TRUE, '\\x00'::bytea, 0)",
    )
    .await
    .unwrap();
    let out = std::process::Command::new("timeout")
        .args(["60", env!("CARGO_BIN_EXE_cordon"), "serve"])
        .current_dir(root)
        .env_remove("RUST_LOG")
        .env("CORDON_LOG_LEVEL", "warn")
        .env("CORDON_DATABASE_URL", &db.url)
        .env("CORDON_MASTER_KEY", &key)
        .env("CORDON_REPLICA_NAME", "c")
        .env("CORDON_CLUSTER_SECRET", SECRET)
        .env("CORDON_BIND", "127.0.0.1:0")
        .env("CORDON_POOL_SIZE", "0")
        .env("CORDON_SITE_ROOT", crate::helpers::site_root())
        .output()
        .expect("cordon runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {err}");
    assert!(
        err.contains("migration 9002 (contract drop probe) is not expand-only"),
        "{err}"
    );
    drop((a, b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_one_replica_reaches_the_others_dashboard_streams_once() {
    use cordon::events::{Changes, Topic};
    let db = TestDb::new(Backend::Postgres).await;
    let (a, b) = (Changes::default(), Changes::default());
    cordon::cluster::notify::start(a.clone(), &db.url, "a")
        .await
        .unwrap();
    cordon::cluster::notify::start(b.clone(), &db.url, "b")
        .await
        .unwrap();
    let (mut on_a, mut on_b) = (a.subscribe(), b.subscribe());
    a.publish(Topic::Grants);
    let got = tokio::time::timeout(PATIENCE, on_b.recv()).await;
    assert!(matches!(got, Ok(Ok(Topic::Grants))), "b heard {got:?}");
    // `a` hears its own once (locally), never its echo from the database.
    assert!(matches!(on_a.try_recv(), Ok(Topic::Grants)));
    b.publish(Topic::Sessions);
    let got = tokio::time::timeout(PATIENCE, on_a.recv()).await;
    assert!(matches!(got, Ok(Ok(Topic::Sessions))), "a heard {got:?}");
    assert!(on_a.try_recv().is_err(), "nothing more on a");
    a.stop();
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_aborted_through_any_replica_and_its_loop_stops() {
    let db = TestDb::new(Backend::Postgres).await;
    let root = db.dir.path();
    let key = key_text();
    let agent = tenant_and_key(root, &db.url, &key);
    // A model that thinks for two minutes: the task is running while it
    // is aborted.
    let (model, _fake) =
        crate::tasks::fake_model(vec![crate::tasks::Reply::Hang(Duration::from_secs(120))]).await;
    let base = format!("http://{model}/v1");
    let site = crate::site::start().await;
    let (allow, start_url) = (site.allow(), site.url("/pad"));
    let extra = [
        ("CORDON_EGRESS_ALLOW", allow.as_str()),
        ("CORDON_MODEL_BASE_URL", base.as_str()),
        ("CORDON_MODEL_TIMEOUT_S", "300"),
        ("CORDON_SANDBOX_DRIVER", "process"),
    ];
    let a = Replica::start(&root.join("a"), &db.url, &key, "a", &extra);
    let b = Replica::start(&root.join("b"), &db.url, &key, "b", &extra);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let outcome = Arc::new(Mutex::new(None));
    let run = tokio::spawn({
        let (http, agent, url) = (http.clone(), agent.clone(), a.url("/api/tasks"));
        let outcome = outcome.clone();
        let start_url = start_url.clone();
        async move {
            let got = call(
                &http,
                &agent,
                reqwest::Method::POST,
                url,
                Some(json!({ "instruction": "wait for ever", "start_url": start_url })),
            )
            .await;
            *outcome.lock().unwrap() = Some(got.clone());
            got
        }
    });
    let task = wait_until("the task to run on a", PATIENCE, || async {
        let (_, list) = call(
            &http,
            &agent,
            reqwest::Method::GET,
            b.url("/api/tasks"),
            None,
        )
        .await;
        match list.as_array().and_then(|l| l.first()) {
            Some(t) if t["status"] == "running" => {
                Ok(t["task_id"].as_str().unwrap_or_default().to_owned())
            }
            _ => Err(format!(
                "{list} (run ended: {:?}) {}",
                outcome.lock().unwrap(),
                a.warnings()
            )),
        }
    })
    .await;
    assert!(task.starts_with("t"), "{task}");
    let (st, body) = call(
        &http,
        &agent,
        reqwest::Method::POST,
        b.url(&format!("/api/tasks/{task}/abort")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "abort via b: {body}\n{}", b.warnings());
    assert_eq!(body["status"], "aborted", "{body}");
    // The loop on `a` stopped: the run call there returns aborted at once,
    // not after the model's two minutes.
    let (st, ran) = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the run call ended with the abort")
        .unwrap();
    assert_eq!(ran["status"], "aborted", "{st}: {ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_waiting_on_one_replica_is_listed_shown_and_decided_on_another() {
    use app::api::auth::Role;
    let site = crate::site::start().await;
    let allow = site.allow();
    // `a`: in this process, where the operator's dashboard is.
    let (a, b) = crate::replicas::pair(&allow, &[("CORDON_APPROVAL_TIMEOUT_S", "60")]).await;
    let mut agent = a.agent("acme").await;
    agent.base = b.url("");
    let sid = agent.open(json!({})).await;
    agent.navigate_ok(&sid, &site.url("/danger")).await;
    let (_, cookie) = a.operator_session("olive", Role::Operator).await;

    let click = {
        let (agent, sid) = (agent.clone(), sid.clone());
        tokio::spawn(async move {
            agent
                .tool(&sid, "click", json!({ "selector": "#delete span" }))
                .await
        })
    };
    let waiting = wait_until("b's approval listed on a", PATIENCE, || async {
        let (status, v) = a.server_fn("list_approvals", "", Some(&cookie)).await;
        let all = v["pending"].as_array().cloned().unwrap_or_default();
        match all.as_slice() {
            [one] if one["session"] == sid.as_str() => Ok(one.clone()),
            _ => Err(format!("{status}: {v}\n{}", b.warnings())),
        }
    })
    .await;
    assert_eq!(waiting["action"], "tool.click", "{waiting}");
    let id = waiting["id"].as_str().unwrap().to_owned();
    let (status, count) = a.server_fn("pending_approvals", "", Some(&cookie)).await;
    assert_eq!((status, count), (StatusCode::OK, json!(1)));
    let shot = a
        .http
        .get(a.url(&format!("/ui/approvals/{id}/screenshot")))
        .header("cookie", &cookie)
        .header("host", format!("localhost:{}", a.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(shot.status(), StatusCode::OK);
    assert_eq!(shot.headers()["content-type"], "image/jpeg");
    assert!(image::load_from_memory(&shot.bytes().await.unwrap()).is_ok());

    // Decided on `a`: the call waiting on `b` runs.
    let (status, v) = a
        .server_fn(
            "decide_approval",
            &format!("id={id}&approve=true"),
            Some(&cookie),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let answer = click.await.unwrap();
    assert_eq!(answer.0, StatusCode::OK, "{}", answer.1);
    // Once: a second decision finds nothing waiting anywhere.
    let (status, _) = a
        .server_fn(
            "decide_approval",
            &format!("id={id}&approve=false"),
            Some(&cookie),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let events = a.state.store.audit_page(0, 10_000).await.unwrap();
    let decided: Vec<_> = events
        .iter()
        .filter(|e| e.action == "approval.decided")
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert!(
        decided[0].actor.starts_with("operator:op_"),
        "{:?}",
        decided[0]
    );

    // The internal routes take only a hop signed for an operator.
    let res = a
        .http
        .get(a.url("/api/internal/approvals"))
        .bearer_auth(&agent.key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waiting_for_a_person_on_one_replica_is_flagged_on_anothers_dashboard() {
    use app::api::auth::Role;
    let site = crate::site::start().await;
    let allow = site.allow();
    let (model, _fake) = crate::tasks::fake_model(vec![
        crate::tasks::Reply::Text("Thought: A captcha; I need a person.\nAction: call_user()"),
        crate::tasks::Reply::Hang(Duration::from_secs(120)),
    ])
    .await;
    let base = format!("http://{model}/v1");
    let (a, b) = crate::replicas::pair(&allow, &[("CORDON_MODEL_BASE_URL", base.as_str())]).await;
    let agent = a.agent("acme").await;
    let (_, cookie) = a.operator_session("olive", Role::Operator).await;
    let run = tokio::spawn({
        let (http, key, url, start) = (
            reqwest::Client::builder().no_proxy().build().unwrap(),
            agent.key.clone(),
            b.url("/api/tasks"),
            site.url("/pad"),
        );
        async move {
            call(
                &http,
                &key,
                reqwest::Method::POST,
                url,
                Some(json!({ "instruction": "solve it", "start_url": start })),
            )
            .await
        }
    });
    wait_until("b's waiting task counted on a", PATIENCE, || async {
        let (status, v) = a.server_fn("waiting_tasks", "", Some(&cookie)).await;
        if v == json!(1) {
            Ok(())
        } else {
            Err(format!("{status}: {v}\n{}", b.warnings()))
        }
    })
    .await;
    let (_, list) = a.server_fn("list_tasks", "", Some(&cookie)).await;
    let waiting: Vec<&Value> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["waiting"] == true)
        .collect();
    assert_eq!(waiting.len(), 1, "{list}");
    run.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotation_is_refused_while_a_replica_runs_and_moves_the_deployments_key() {
    use cordon::crypto::{Keyring, MasterKey};
    let site = crate::site::start().await;
    let (a, b) = pair(&site.allow(), &[]).await;
    let key = std::fs::read_to_string(a.db.dir.path().join("data/master.key")).unwrap();
    let old = MasterKey::from_text(key.trim()).expect("the replicas' key");
    let keyring = Keyring::in_memory(old.clone());
    let actor = cordon::audit::Actor::Cli;
    let store = a.db.store().await;
    let err = cordon::vault::rotate(&store, &keyring, MasterKey::generate(), &actor)
        .await
        .expect_err("replicas run");
    let text = err.to_string();
    assert!(
        text.contains("replicas running") && text.contains('a') && text.contains('b'),
        "{text}"
    );
    let before = store.deployment().await.unwrap().unwrap();
    assert_eq!(before.key_id.as_deref(), Some(old.id().as_str()));
    // Every replica stopped (each marks itself so at shutdown): it runs,
    // and the deployment records the new key.
    drop(b);
    let _db = a.stop().await;
    let new = MasterKey::generate();
    cordon::vault::rotate(&store, &keyring, new.clone(), &actor)
        .await
        .expect("no replica runs");
    let after = store.deployment().await.unwrap().unwrap();
    assert_eq!(after.key_id.as_deref(), Some(new.id().as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_recorded_on_one_replica_are_shown_by_anothers_dashboard() {
    use app::api::auth::Role;
    let site = crate::site::start().await;
    let (a, b) = pair(&site.allow(), &[]).await;
    let mut agent = a.agent("acme").await;
    agent.base = b.url("");
    let sid = agent.open(json!({ "record": "audit" })).await;
    agent.navigate_ok(&sid, &site.url("/pad")).await;
    let (status, shot) = agent.tool(&sid, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{shot}");
    let (_, cookie) = a.operator_session("vic", Role::Viewer).await;
    shown_with_images(&a, &cookie, &sid, &b.warnings()).await;
    // An id that names no screenshot is 404 on both, not a hang or a 500.
    let res = a
        .http
        .get(a.url(&format!("/ui/screenshots/acme:{sid}:9999")))
        .header("cookie", &cookie)
        .header("host", format!("localhost:{}", a.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
}

/// Under `shared_dir` (one directory every replica mounts), what a replica
/// recorded outlives it: after it is SIGKILLed, the other one's dashboard
/// still shows the session's timeline and images from the shared folder,
/// the session's kept download is still there, and a transient session's
/// frames are removed by the survivor as a close would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_shared_dir_screenshots_and_downloads_outlive_their_replica() {
    use app::api::auth::Role;
    let site = crate::site::start().await;
    let shared = tempfile::tempdir().unwrap();
    let shared_dir = shared.path().join("files");
    let (a, mut b) = pair(
        &site.allow(),
        &[("CORDON_SHARED_DIR", shared_dir.to_str().unwrap())],
    )
    .await;
    let mut agent = a.agent("acme").await;
    agent.base = b.url("");

    // On b: an audit session with a screenshot and a kept download, and a
    // transient one with a frame.
    let kept = agent
        .open(json!({ "record": "audit", "downloads": "allow" }))
        .await;
    agent.navigate_ok(&kept, &site.url("/pad")).await;
    let (status, shot) = agent.tool(&kept, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{shot}");
    agent
        .navigate_ok(&kept, &site.url("/download?name=kept.bin"))
        .await;
    wait_until("kept.bin downloaded on b", PATIENCE, || async {
        let (status, list) = agent.get(&format!("/api/sessions/{kept}/downloads")).await;
        let done = list.as_array().is_some_and(|l| {
            l.iter()
                .any(|d| d["name"] == "kept.bin" && d["state"] == "completed")
        });
        if status == StatusCode::OK && done {
            Ok(())
        } else {
            Err(format!("{status} {list}"))
        }
    })
    .await;
    let passing = agent.open(json!({ "record": "transient" })).await;
    agent.navigate_ok(&passing, &site.url("/pad")).await;
    let (status, shot) = agent.tool(&passing, "screenshot", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{shot}");

    // b wrote into the shared directory, not its own data dir.
    let frames = |sid: &str| shared_dir.join("sessions/acme").join(sid);
    let download = shared_dir
        .join("downloads/acme")
        .join(&kept)
        .join("kept.bin");
    assert!(frames(&kept).is_dir(), "{}", b.warnings());
    assert!(frames(&passing).is_dir(), "{}", b.warnings());
    assert_eq!(std::fs::read(&download).unwrap(), vec![7u8; 4096]);
    let b_data = a.db.dir.path().join("b/data");
    assert!(
        !b_data.join("sessions").exists() && !b_data.join("downloads").exists(),
        "nothing in b's own data dir"
    );

    let browsers = browsers_of(&a.db.url, "b").await;
    assert_eq!(browsers.len(), 2, "{browsers:?}");
    b.kill_hard();
    for sid in [&kept, &passing] {
        wait_until("a ends b's session as replica_lost", PATIENCE, || async {
            let row = a
                .state
                .store
                .session_find(&sid.parse().unwrap())
                .await
                .unwrap()
                .unwrap();
            match row.close_reason {
                Some(r) if r.as_str() == "replica_lost" => Ok(()),
                other => Err(format!("{:?} {other:?}", row.state)),
            }
        })
        .await;
    }

    wait_stopped(&browsers).await;

    // a's dashboard shows what b recorded, from the shared folder.
    let (_, cookie) = a.operator_session("vic", Role::Viewer).await;
    shown_with_images(&a, &cookie, &kept, "the dead replica's").await;
    // The audit session's download is kept; the transient frames go.
    assert_eq!(std::fs::read(&download).unwrap(), vec![7u8; 4096]);
    wait_until("the transient frames removed", PATIENCE, || async {
        if frames(&passing).exists() {
            Err(format!(
                "{:?}",
                std::fs::read_dir(frames(&passing)).map(|d| d.count())
            ))
        } else {
            Ok(())
        }
    })
    .await;
    assert!(frames(&kept).is_dir());
}

/// The Overview lists the replicas: which one answers the page, which runs
/// the housekeeping, what each runs; a killed one shows as lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_lists_the_replicas_their_sessions_and_the_housekeeping_one() {
    use app::api::auth::Role;
    let site = crate::site::start().await;
    let (a, mut b) = pair(&site.allow(), &[]).await;
    let mut agent = a.agent("acme").await;
    agent.base = b.url("");
    agent.open(json!({})).await;
    let (_, cookie) = a.operator_session("vic", Role::Viewer).await;
    let replicas = || async {
        let (status, s) = a.server_fn("get_status", "", Some(&cookie)).await;
        assert_eq!(status, StatusCode::OK, "{s}");
        let rows = s["replicas"].as_array().cloned().unwrap_or_default();
        let by = |name: &str| rows.iter().find(|r| r["name"] == name).cloned();
        (by("a"), by("b"), s["replicas"].clone())
    };
    let (ra, rb, all) = replicas().await;
    let (ra, rb) = (ra.expect("a listed"), rb.expect("b listed"));
    assert_eq!(
        (&ra["state"], &ra["this"], &ra["leader"], &ra["running"]),
        (&json!("up"), &json!(true), &json!(true), &json!(0)),
        "{all}"
    );
    assert_eq!(
        (&rb["state"], &rb["this"], &rb["leader"], &rb["running"]),
        (&json!("up"), &json!(false), &json!(false), &json!(1)),
        "{all}"
    );

    let browsers = browsers_of(&a.db.url, "b").await;
    assert_eq!(browsers.len(), 1, "{browsers:?}");
    b.kill_hard();
    wait_until("b shown as lost", PATIENCE, || async {
        let (ra, rb, all) = replicas().await;
        let lost =
            rb.is_some_and(|b| b["state"] == "lost" && b["leader"] == false && b["running"] == 0);
        let leads = ra.is_some_and(|a| a["leader"] == true);
        if lost && leads {
            Ok(())
        } else {
            Err(all.to_string())
        }
    })
    .await;
    wait_stopped(&browsers).await;
}

/// `a`'s dashboard shows session `sid`'s timeline, and its first
/// screenshot and thumbnail (a JPEG) load as images.
async fn shown_with_images(a: &crate::helpers::TestApp, cookie: &str, sid: &str, what: &str) {
    let (status, view) = a
        .server_fn(
            "screenshot_timeline",
            &format!("session={sid}"),
            Some(cookie),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{view}\n{what}");
    let shots = view["shots"].as_array().cloned().unwrap_or_default();
    assert!(!shots.is_empty(), "{what} timeline shown: {view}");
    let id = shots[0]["id"].as_str().unwrap().to_owned();
    for (path, kind) in [
        (format!("/ui/screenshots/{id}"), None),
        (format!("/ui/screenshots/{id}/thumb"), Some("image/jpeg")),
    ] {
        let res = a
            .http
            .get(a.url(&path))
            .header("cookie", cookie)
            .header("host", format!("localhost:{}", a.addr.port()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let got = res.headers()["content-type"].to_str().unwrap().to_owned();
        if let Some(k) = kind {
            assert_eq!(got, k, "{path}");
        }
        assert!(
            image::load_from_memory(&res.bytes().await.unwrap()).is_ok(),
            "{path}"
        );
    }
}

/// libfaketime's preload library (Debian `faketime`, which `setup.sh` installs).
fn libfaketime() -> String {
    let found = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.is_file());
    found
        .expect("libfaketime: install Debian's faketime (infra/scripts/setup.sh does)")
        .display()
        .to_string()
}

/// Replicas whose clocks disagree still act as one: b runs 40 s behind
/// (libfaketime), past both the loss window (3 s) and the hop's ±30 s, yet
/// heartbeats and hop times are in the database's time, so a never declares
/// b lost, b's calls cross the hop to a, and b's /readyz shows the offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_clock_is_behind_is_neither_lost_nor_refused() {
    let site = crate::site::start().await;
    let allow = site.allow();
    let a = crate::helpers::session_app(
        Backend::Postgres,
        &allow,
        &[
            ("CORDON_REPLICA_NAME", "a"),
            ("CORDON_CLUSTER_SECRET", SECRET),
            ("CORDON_REPLICA_LOST_AFTER_S", "3"),
        ],
    )
    .await;
    let key = std::fs::read_to_string(a.db.dir.path().join("data/master.key")).unwrap();
    let preload = libfaketime();
    let b = Replica::start(
        &a.db.dir.path().join("b"),
        &a.db.url,
        key.trim(),
        "b",
        &[
            ("CORDON_EGRESS_ALLOW", &allow),
            ("LD_PRELOAD", &preload),
            ("FAKETIME", "-40s"),
            ("DONT_FAKE_MONOTONIC", "1"),
        ],
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let ready: Value = http
        .get(b.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let offset = ready["checks"]["replica"]["clock_offset_ms"]
        .as_i64()
        .unwrap_or(0);
    assert!(
        (37_000..=43_000).contains(&offset),
        "b's clock is 40 s behind the database's: {ready}"
    );

    // A session on a, driven through b: the hop's time is the database's.
    let mut agent = a.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent.base = b.url("");
    let nav = agent.navigate_ok(&sid, &site.url("/pad")).await;
    assert_eq!(nav["title"], "ready", "{nav}\n{}", b.warnings());

    // Over three loss windows, b stays up in a's eyes.
    let until = std::time::Instant::now() + Duration::from_secs(9);
    while std::time::Instant::now() < until {
        assert!(
            matches!(
                a.state.cluster.peer("b").await.unwrap(),
                cordon::cluster::Peer::Up(_)
            ),
            "b was judged lost or unreachable\n{}",
            b.warnings()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let row = a.state.store.replica_get("b").await.unwrap().unwrap();
    assert_eq!(row.state, "up", "{row:?}");
    let (status, body) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", b.warnings());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_a_replica_presenting_another_certificate_is_not_trusted_with_the_hop() {
    // Arrange: `a` and `b` serve the deployment's certificate; `c` joins
    // the same database with the same key and cluster secret but serves a
    // certificate of its own (a look-alike, or a host that took a pod's IP).
    let site = crate::site::start().await;
    let ours = crate::helpers::LocalCert::new();
    let theirs = crate::helpers::LocalCert::new();
    let (ours_env, theirs_env) = (ours.settings(), theirs.settings());
    let as_env = |v: &[(&'static str, String); 2]| -> Vec<(&'static str, String)> { v.to_vec() };
    let ours_env = as_env(&ours_env);
    let ours_ref: Vec<(&str, &str)> = ours_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (app, b) = pair(&site.allow(), &ours_ref).await;
    let key = std::fs::read_to_string(app.db.dir.path().join("data/master.key")).unwrap();
    let allow = site.allow();
    let mut on_c: Vec<(&str, &str)> = vec![
        ("CORDON_EGRESS_ALLOW", allow.as_str()),
        ("CORDON_SANDBOX_DRIVER", "process"),
    ];
    on_c.extend(theirs_env.iter().map(|(k, v)| (*k, v.as_str())));
    let c = Replica::start(
        &app.db.dir.path().join("c"),
        &app.db.url,
        key.trim(),
        "c",
        &on_c,
    );
    let agent = app.agent("acme").await;
    let on_c = crate::helpers::AgentClient {
        http: crate::helpers::test_http(Some(&theirs.der)),
        base: c.url(""),
        key: agent.key.clone(),
    };
    let on_b = crate::helpers::AgentClient {
        base: b.url(""),
        ..agent.clone()
    };
    let sid_c = on_c.open(json!({})).await;
    let sid_b = on_b.open(json!({})).await;

    // Act: calls for c's session made on `a` and on `b`; for b's made on `a`.
    let via_a = agent.tool(&sid_c, "read_dom", json!({})).await;
    let via_b = on_b.tool(&sid_c, "read_dom", json!({})).await;
    let trusted = agent.tool(&sid_b, "read_dom", json!({})).await;

    // Assert: the handshake with c failed, so nothing was sent to it; b,
    // with the deployment's certificate, answers through `a`.
    crate::helpers::assert_error(
        &via_a,
        StatusCode::SERVICE_UNAVAILABLE,
        "replica_unreachable",
    );
    crate::helpers::assert_error(
        &via_b,
        StatusCode::SERVICE_UNAVAILABLE,
        "replica_unreachable",
    );
    assert_eq!(trusted.0, StatusCode::OK, "{}\n{}", trusted.1, b.warnings());
    // c's own answer for its session is unaffected.
    let direct = on_c.tool(&sid_c, "read_dom", json!({})).await;
    assert_eq!(direct.0, StatusCode::OK, "{}", direct.1);
    // b logged why: the certificate (nothing reached c to refuse).
    let logged = b.warnings();
    assert!(logged.contains("TLS: invalid peer certificate"), "{logged}");
    assert!(
        !c.warnings().contains("internal hop refused"),
        "{}",
        c.warnings()
    );
    for (client, sid) in [(&on_c, &sid_c), (&on_b, &sid_b)] {
        let (status, v) = client
            .call(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{sid}"),
                None,
            )
            .await;
        assert_eq!(
            (status, &v["state"]),
            (StatusCode::OK, &json!("closed")),
            "{v}"
        );
    }
}

/// A connect token of a session on `b`, redeemed through `a`, is taken
/// only while its key is live (as on `b` itself), and never in place of a
/// key that was sent and refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_token_through_another_replica_needs_its_key_live() {
    let site = crate::site::start().await;
    let (a, b) = crate::replicas::pair(&site.allow(), &[]).await;
    let mut agent = a.agent("acme").await;
    agent.base = b.url("");
    let sid = agent.open(json!({})).await;
    let token = |agent: crate::helpers::AgentClient, sid: String| async move {
        let (status, tok) = agent
            .post(&format!("/api/sessions/{sid}/cdp_token"), json!({}))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{tok}");
        let url = tok["cdp_url"].as_str().unwrap().to_owned();
        url.split_once('?').unwrap().1.to_owned()
    };
    let path = format!("/cdp/{sid}");
    // Live: through `a`, the token connects to b's session.
    let query = token(agent.clone(), sid.clone()).await;
    let mut cdp = crate::cdp::connect(&a, &format!("{path}?{query}"), None)
        .await
        .unwrap_or_else(|e| panic!("through a: {e}\n{}", b.warnings()));
    cdp.ok("Browser.getVersion", json!({}), None).await;
    drop(cdp);
    // A refused key is not made good by a valid token.
    let query = token(agent.clone(), sid.clone()).await;
    assert_eq!(
        crate::cdp::connect(&a, &format!("{path}?{query}"), Some("not-a-key"))
            .await
            .err(),
        Some(StatusCode::UNAUTHORIZED)
    );
    // Revoked after the token was made: refused.
    let query = token(agent.clone(), sid.clone()).await;
    let key = crate::helpers::key_id(&a, "acme").await.parse().unwrap();
    assert!(a.state.store.api_key_revoke(&key).await.unwrap());
    assert_eq!(
        crate::cdp::connect(&a, &format!("{path}?{query}"), None)
            .await
            .err(),
        Some(StatusCode::UNAUTHORIZED),
        "a revoked key's token connected through another replica"
    );
    a.stop().await;
}
