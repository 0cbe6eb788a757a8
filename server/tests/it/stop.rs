//! Stopping within an orchestrator's grace: a replica whose PostgreSQL has
//! gone away (a partition: connections open, nothing answers) stops every
//! browser and exits within `STOP_BUDGET`, with a request still waiting on
//! the database.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::helpers::{Backend, TestApp, TestDb, wait_until};

/// A loopback proxy in front of the test PostgreSQL. Once cut, it forwards
/// nothing more but keeps every connection open, and accepts new ones that
/// are never answered: what a replica sees when its database's network goes.
async fn partitionable(target: SocketAddr) -> (SocketAddr, watch::Sender<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy address");
    let (cut, cut_rx) = watch::channel(false);
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut client, _)) = listener.accept().await {
            if *cut_rx.borrow() {
                held.push(client);
                continue;
            }
            let mut cut_rx = cut_rx.clone();
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(target).await else {
                    return;
                };
                let cut_now = async move {
                    let _ = cut_rx.wait_for(|c| *c).await;
                };
                let was_cut = tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
                    () = cut_now => true,
                };
                if was_cut {
                    // Silent from now on, and never closed.
                    std::future::pending::<()>().await;
                }
            });
        }
    });
    (addr, cut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_database_is_gone_stops_its_browsers_and_exits_within_the_budget() {
    let db = TestDb::new(Backend::Postgres).await;
    let (host_port, rest) = db
        .url
        .rsplit_once('@')
        .and_then(|(_, r)| r.split_once('/'))
        .map(|(hp, r)| (hp.to_owned(), r.to_owned()))
        .expect("a postgres:// URL with a host and a database");
    let target: SocketAddr = host_port
        .parse()
        .expect("the test database on an IP address");
    let (proxy, cut) = partitionable(target).await;
    let url = format!("{}@{proxy}/{rest}", db.url.rsplit_once('@').unwrap().0);
    let proxied = TestDb { url, dir: db.dir };
    let app = TestApp::spawn_on(proxied, &[("CORDON_POOL_SIZE", "1")]).await;
    let agent = app.agent("acme").await;
    let sid = agent.open(serde_json::json!({})).await;
    // The session's browser and the warm one that replaced it.
    let sandboxes = wait_until(
        "a session and a full warm pool",
        Duration::from_secs(60),
        || {
            let s = app.state.sessions.sandboxes();
            async move {
                if s.len() == 2 && s.iter().all(|b| b.pid.is_some()) {
                    Ok(s)
                } else {
                    Err(format!("{} sandboxes", s.len()))
                }
            }
        },
    )
    .await;

    cut.send_replace(true);
    // A request that waits on the database when the stop begins.
    let waiting = {
        let request = agent
            .http
            .get(format!("{}/api/sessions/{sid}", agent.base))
            .bearer_auth(&agent.key);
        tokio::spawn(request.send())
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let started = Instant::now();
    let mut app = app;
    let stopped = app.stop_raw().await;
    let took = started.elapsed();
    let alive: Vec<i32> = sandboxes
        .iter()
        .filter(|b| cordon::sandbox::is_alive(b.pid.unwrap(), &b.marker))
        .map(|b| b.pid.unwrap())
        .collect();
    // Clean up before asserting: kill what is left.
    for pid in &alive {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    waiting.abort();
    assert!(stopped.is_ok(), "the stop failed: {stopped:?}");
    assert!(
        alive.is_empty(),
        "browsers left running after the stop: {alive:?}"
    );
    assert!(
        took <= cordon::startup::STOP_BUDGET + Duration::from_secs(1),
        "the stop took {took:?} (budget {:?})",
        cordon::startup::STOP_BUDGET
    );
}
