//! The egress guard with real sockets and a real Chromium, on loopback only.
//!
//! Nothing here sends a packet off 127.0.0.1 / ::1: names resolve from a
//! static table, blocked addresses are refused before any connect, and the
//! only servers are a page server (allowlisted by its exact port) and a
//! "canary" on another loopback port that must never see a connection.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use cordon::egress::{
    AddressPolicy, Decision, EgressEntry, EgressGuard, EgressListener, Limits, NewEgressEntry,
    StaticResolver,
};
use cordon::store::Store;
use tokio::net::TcpListener;

use crate::helpers::{Backend, PATIENCE, TestDb, both_backends, wait_until};

mod browser;
mod proxy;
mod startup;

both_backends!(the_egress_log_keeps_each_sandboxs_rows_in_order);
both_backends!(pruning_removes_only_rows_older_than_the_cutoff);

async fn pruning_removes_only_rows_older_than_the_cutoff(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let cutoff = 1_700_000_000_000_i64;
    for i in 0..10 {
        for ts in [cutoff - 1000 + i, cutoff + i] {
            store
                .egress_record(&NewEgressEntry {
                    sandbox_id: "b_oldaaaaaaaaaaaaaaaaaaaaaaa".into(),
                    ts,
                    host: "example.com".into(),
                    port: 443,
                    decision: Decision::Allowed,
                    reason: None,
                    bytes_up: 1,
                    bytes_down: 2,
                })
                .await
                .unwrap();
        }
    }
    // Batches of 3: four rounds for ten rows, none of them past the cutoff.
    assert_eq!(store.egress_prune_in_batches(cutoff, 3).await.unwrap(), 10);
    let left = store
        .egress_for_sandbox(&"b_oldaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert_eq!(left.len(), 10);
    assert!(left.iter().all(|r| r.entry.ts >= cutoff), "{left:?}");
    assert_eq!(
        store.egress_prune(cutoff).await.unwrap(),
        0,
        "nothing left to prune"
    );
}

async fn the_egress_log_keeps_each_sandboxs_rows_in_order(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let row =
        |sandbox: &str, host: &str, decision, reason: Option<&str>, up, down| NewEgressEntry {
            sandbox_id: sandbox.into(),
            ts: 1_700_000_000_000,
            host: host.into(),
            port: 443,
            decision,
            reason: reason.map(Into::into),
            bytes_up: up,
            bytes_down: down,
        };
    let a1 = row(
        "b_aaaaaaaaaaaaaaaaaaaaaaaaaa",
        "example.com",
        Decision::Allowed,
        None,
        517,
        5_000_000_000,
    );
    let b1 = row(
        "b_baaaaaaaaaaaaaaaaaaaaaaaaa",
        "127.0.0.1",
        Decision::Denied,
        Some("loopback"),
        0,
        0,
    );
    let a2 = row(
        "b_aaaaaaaaaaaaaaaaaaaaaaaaaa",
        "169.254.169.254",
        Decision::Denied,
        Some("cloud_metadata"),
        0,
        0,
    );
    for r in [&a1, &b1, &a2] {
        store.egress_record(r).await.expect("row written");
    }

    let a = store
        .egress_for_sandbox(&"b_aaaaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    let b = store
        .egress_for_sandbox(&"b_baaaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();

    assert_eq!(a.iter().map(|e| &e.entry).collect::<Vec<_>>(), [&a1, &a2]);
    assert!(a[0].id < a[1].id);
    assert_eq!(b.iter().map(|e| &e.entry).collect::<Vec<_>>(), [&b1]);
    assert!(
        store
            .egress_for_sandbox(&"b_caaaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
            .await
            .unwrap()
            .is_empty()
    );
    // A bounded read is the newest rows, still oldest first.
    let newest = store
        .egress_for_sandbox(&"b_aaaaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 1)
        .await
        .unwrap();
    assert_eq!(newest.iter().map(|e| &e.entry).collect::<Vec<_>>(), [&a2]);
}

/// A loopback server that counts every connection made to it.
struct Canary {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl Canary {
    async fn start() -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
        });
        Self { addr, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The allowlisted page server: records the paths it serves.
struct Pages {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Pages {
    async fn start(canary: SocketAddr) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let port = canary.port();
        let app = axum::Router::new()
            .route("/", get(move || async move { Html(page(port)) }))
            .route("/hello", get(|| async { "hello through the guard" }))
            .route(
                "/redirect",
                get(move || async move {
                    let to = format!("http://127.0.0.1:{port}/");
                    (StatusCode::FOUND, [(header::LOCATION, to)])
                }),
            )
            .route("/done", get(|| async { "ok" }))
            .route(
                "/ws",
                get(|ws: WebSocketUpgrade| async {
                    ws.on_upgrade(|mut socket| async move {
                        while let Some(Ok(msg)) = socket.recv().await {
                            if let Message::Text(t) = msg {
                                let _ = socket.send(Message::Text(t)).await;
                            }
                        }
                    })
                    .into_response()
                }),
            )
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    log.lock().unwrap().push(req.uri().path().to_owned());
                    next.run(req)
                },
            ));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn saw(&self, path: &str) -> bool {
        self.seen.lock().unwrap().iter().any(|p| p == path)
    }

    async fn wait_for(&self, path: &str) {
        wait_until(
            &format!("the page server to see {path}"),
            PATIENCE,
            || async {
                if self.saw(path) {
                    Ok(())
                } else {
                    Err(format!("{:?}", self.seen.lock().unwrap()))
                }
            },
        )
        .await;
    }
}

/// The test page: every way out to the canary it can try, then `/done`.
fn page(canary: u16) -> String {
    format!(
        r#"<!doctype html><title>egress</title><script>
const C = {canary};
const ws = url => new Promise(done => {{
  try {{
    const s = new WebSocket(url);
    s.onopen = () => {{ s.close(); done('open'); }};
    s.onerror = () => done('error');
    s.onclose = () => done('close');
  }} catch (e) {{ done('throw'); }}
}});
const img = url => new Promise(done => {{
  const i = new Image();
  i.onload = () => done('load');
  i.onerror = () => done('error');
  i.src = url;
}});
const get = url => fetch(url, {{ mode: 'no-cors', cache: 'no-store' }}).then(() => 'ok', () => 'error');
(async () => {{
  await ws('ws://127.0.0.1:' + C + '/');
  await get('http://localhost:' + C + '/');
  await img('http://2130706433:' + C + '/pixel.png');
  await get('http://2130706433:' + C + '/fetch');
  await fetch('/done');
}})();
</script>"#
    )
}

/// A sandbox's rows once `pred` holds for them.
async fn rows_when(
    store: &Store,
    sandbox: &str,
    pred: impl Fn(&[EgressEntry]) -> bool,
) -> Vec<EgressEntry> {
    wait_until("the egress log to match", PATIENCE, || async {
        let rows = store
            .egress_for_sandbox(&sandbox.parse().expect("a sandbox id"), 10_000)
            .await
            .unwrap();
        if pred(&rows) {
            Ok(rows)
        } else {
            Err(format!("{rows:#?}"))
        }
    })
    .await
}

fn on_port(rows: &[EgressEntry], port: u16, decision: Decision) -> Vec<&NewEgressEntry> {
    rows.iter()
        .map(|r| &r.entry)
        .filter(|e| e.port == port && e.decision == decision)
        .collect()
}

/// A guard allowing only the page server, resolving `localhost` and nothing
/// else (from a table: no DNS packet ever leaves).
fn guard(store: Store, pages: SocketAddr, limits: Limits) -> EgressGuard {
    let resolver = StaticResolver::new()
        .with(
            "localhost",
            [Ipv4Addr::LOCALHOST.into(), "::1".parse().unwrap()],
        )
        .with("pages.test", [Ipv4Addr::LOCALHOST.into()])
        .with(
            "mixed.test",
            [
                Ipv4Addr::LOCALHOST.into(),
                "169.254.169.254".parse().unwrap(),
            ],
        );
    let policy = AddressPolicy::with_allowlist([pages.to_string()]).unwrap();
    EgressGuard::with_resolver(policy, store, Arc::new(resolver), limits)
}

struct Fixture {
    _db: TestDb,
    store: Store,
    canary: Canary,
    pages: Pages,
    proxy: EgressListener,
}

async fn fixture(sandbox: &str, limits: Limits) -> Fixture {
    let db = TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let canary = Canary::start().await;
    let pages = Pages::start(canary.addr).await;
    let proxy = guard(store.clone(), pages.addr, limits)
        .listen(sandbox.into())
        .await
        .expect("proxy listens");
    Fixture {
        _db: db,
        store,
        canary,
        pages,
        proxy,
    }
}
