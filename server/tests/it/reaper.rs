//! The orphan reaper against a real crash: the server is SIGKILLed with a
//! session open, its browsers survive it, and the next start cleans up.

use std::path::Path;

use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{PATIENCE, ServeProcess, wait_until};

fn cordon(dir: &Path, args: &[&str]) -> String {
    let out = crate::helpers::cordon_cli(dir, &[], args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

async fn store(dir: &Path) -> cordon::store::Store {
    let url = format!("sqlite://{}/data/cordon.db", dir.display());
    cordon::store::Store::connect(&secrecy::SecretString::from(url))
        .await
        .unwrap()
}

/// `(pid, marker, state)` of every sandbox row.
async fn sandboxes(dir: &Path) -> Vec<(i32, String, String)> {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}/data/cordon.db", dir.display()))
        .await
        .unwrap();
    let rows =
        sqlx::query_as::<_, (i64, String, String)>("SELECT pid, marker, state FROM sandboxes")
            .fetch_all(&pool)
            .await
            .unwrap();
    pool.close().await;
    rows.into_iter()
        .map(|(p, m, st)| (i32::try_from(p).unwrap(), m, st))
        .collect()
}

/// Waits until at least `n` sandbox rows are running with a live browser.
async fn running_sandboxes(dir: &Path, n: usize) {
    wait_until("the warm pool's browser to run", PATIENCE, || async {
        let rows = sandboxes(dir).await;
        let running = rows
            .iter()
            .filter(|(p, m, st)| st != "stopped" && cordon::sandbox::is_alive(*p, m))
            .count();
        if running >= n {
            Ok(())
        } else {
            Err(format!("{rows:?}"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_server_leaves_browsers_the_next_start_reaps_idempotently() {
    crash_and_restart("process").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bwrap_browsers_die_with_a_crashed_server_and_the_next_start_closes_their_sessions() {
    crash_and_restart("bwrap").await;
}

async fn crash_and_restart(driver: &str) {
    let dir = tempfile::tempdir().unwrap();
    cordon(dir.path(), &["tenant", "create", "acme"]);
    let key = cordon(dir.path(), &["apikey", "create", "--tenant", "acme"]);
    let env = [("CORDON_POOL_SIZE", "1"), ("CORDON_SANDBOX_DRIVER", driver)];

    let server = ServeProcess::start(dir.path(), &env);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let res = http
        .post(format!("http://{}/api/sessions", server.addr))
        .bearer_auth(&key)
        .json(&json!({ "downloads": "allow", "record": "off" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let sid = res.json::<serde_json::Value>().await.unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // It allows downloads: its folder of the data dir is made at open.
    let downloads = dir.path().join("data/downloads/acme").join(&sid);
    assert!(downloads.is_dir(), "{}", downloads.display());
    // Let the pool refill so a warm browser is orphaned too.
    running_sandboxes(dir.path(), 2).await;
    server.kill_hard();

    let before = sandboxes(dir.path()).await;
    assert!(before.len() >= 2, "{before:?}");
    let alive: Vec<_> = before
        .iter()
        .filter(|(p, m, _)| cordon::sandbox::is_alive(*p, m))
        .cloned()
        .collect();
    if driver == "process" {
        // Plain processes in their own groups outlive the server: the reaper's job.
        assert!(
            alive.len() >= 2,
            "the session's and the pool's browsers outlive a SIGKILLed server: {before:?}"
        );
    } else {
        // bwrap's --die-with-parent takes them down with the server.
        wait_until(
            "every bwrap sandbox to die with its server",
            PATIENCE,
            || async {
                let alive: Vec<_> = before
                    .iter()
                    .filter(|(p, m, _)| cordon::sandbox::is_alive(*p, m))
                    .collect();
                if alive.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{alive:?}"))
                }
            },
        )
        .await;
    }

    // Restart: the reaper runs before anything else.
    let server = ServeProcess::start(dir.path(), &env);
    for (pid, marker, _) in &alive {
        assert!(
            !cordon::sandbox::is_alive(*pid, marker),
            "orphaned browser {pid} still runs"
        );
    }
    let s = store(dir.path()).await;
    let row = s
        .session_get("acme", &sid.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (row.state.as_str(), row.close_reason.map(|r| r.as_str())),
        ("failed", Some("orphaned"))
    );
    assert!(
        !downloads.exists(),
        "the orphaned session's downloads are removed: {}",
        downloads.display()
    );
    let reaped = s
        .audit_page(0, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.action == "session.reap")
        .count();
    assert_eq!(reaped, 1);
    s.close().await;
    let res = http
        .get(format!("http://{}/api/sessions/{sid}", server.addr))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.json::<serde_json::Value>().await.unwrap()["state"],
        "failed"
    );

    // A second crash and start: the first run's rows stay as they are (nothing
    // reaped twice), and this run's warm browser is reaped.
    running_sandboxes(dir.path(), 1).await;
    server.kill_hard();
    let server = ServeProcess::start(dir.path(), &env);
    let s = store(dir.path()).await;
    let reaped = s
        .audit_page(0, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.action == "session.reap")
        .count();
    assert_eq!(reaped, 1, "the reaper is idempotent");
    s.close().await;
    let status = server.stop();
    assert!(status.success());

    // After a clean stop every browser is gone and every sandbox row is stopped.
    for (pid, marker, state) in sandboxes(dir.path()).await {
        assert!(
            !cordon::sandbox::is_alive(pid, &marker),
            "browser {pid} left running"
        );
        assert_eq!(state, "stopped");
    }
}

/// A request that finds its session's replica lost ends the session there
/// and then, as the leader's reap would: the row (`replica_lost`), the
/// files its close would have removed (a transient session's frames, its
/// downloads) and a `session.reap` row with its previous state. Twice is
/// once; another tenant's call for it changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_found_on_a_lost_replica_by_a_request_ends_as_the_leaders_reap_would() {
    use cordon::domain::{SessionId, SessionState};
    let app = crate::helpers::TestApp::spawn(crate::helpers::Backend::Sqlite).await;
    let store = &app.state.store;
    let acme = crate::helpers::tenant("acme");
    let other = crate::helpers::tenant("other");
    for t in [&acme, &other] {
        store.tenant_create(t, t.as_str()).await.unwrap();
    }
    let sid = SessionId::generate();
    let now = cordon::time::now_ms();
    let row = cordon::store::sessions::SessionRow {
        id: sid.to_string(),
        tenant_id: acme.to_string(),
        api_key_id: None,
        state: SessionState::Ready,
        close_reason: None,
        error: None,
        credential_mode: "clean".into(),
        domains: "[]".into(),
        record: "transient".into(),
        viewport_w: 1280,
        viewport_h: 720,
        sandbox_id: None,
        host: "ghost".into(),
        created_at: now,
        ready_at: Some(now),
        closed_at: None,
        deadline_at: now + 3_600_000,
        last_activity_at: now,
    };
    assert!(store.session_insert_limited(&row, 100).await.unwrap());
    // What the lost replica left in a shared data dir.
    let data = app.db.dir.path().join("data");
    let frames = data.join("sessions/acme").join(sid.as_str());
    let downloads = data.join("downloads/acme").join(sid.as_str());
    for dir in [&frames, &downloads] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("000001.jpg"), b"x").unwrap();
    }

    let sessions = &app.state.sessions;
    let cluster = &app.state.cluster;
    assert!(
        !cluster
            .end_lost_session(sessions, &other, sid.as_str(), "ghost")
            .await
            .unwrap(),
        "another tenant's call ended it"
    );
    assert_eq!(
        store.session_find(&sid).await.unwrap().unwrap().state,
        SessionState::Ready
    );
    assert!(frames.exists() && downloads.exists());

    assert!(
        cluster
            .end_lost_session(sessions, &acme, sid.as_str(), "ghost")
            .await
            .unwrap()
    );
    let ended = store.session_find(&sid).await.unwrap().unwrap();
    assert_eq!(
        ended.close_reason.map(|r| r.as_str().to_owned()),
        Some("replica_lost".to_owned()),
        "{ended:?}"
    );
    assert!(!frames.exists(), "the transient frames are still there");
    assert!(!downloads.exists(), "the downloads are still there");
    let reaps = |rows: Vec<cordon::domain::audit::Event>| -> Vec<serde_json::Value> {
        rows.into_iter()
            .filter(|e| e.action == "session.reap" && e.session.as_deref() == Some(sid.as_str()))
            .map(|e| serde_json::from_str(&e.params).unwrap())
            .collect()
    };
    let rows = reaps(store.audit_page(0, 10_000).await.unwrap());
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["reason"], "replica_lost", "{rows:?}");
    assert_eq!(rows[0]["replica"], "ghost", "{rows:?}");
    assert_eq!(rows[0]["previous_state"], "ready", "{rows:?}");

    assert!(
        !cluster
            .end_lost_session(sessions, &acme, sid.as_str(), "ghost")
            .await
            .unwrap(),
        "ended twice"
    );
    assert_eq!(reaps(store.audit_page(0, 10_000).await.unwrap()).len(), 1);
    app.stop().await;
}
