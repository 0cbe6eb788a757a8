//! Built-in HTTPS: the real server on `127.0.0.1:0` with a self-signed
//! certificate made by the test, reached by a rustls client that trusts
//! exactly that certificate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use app::api::auth::Role;
use axum::Router;
use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::routing::get;
use cordon::startup::Application;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::helpers::{Backend, LocalCert, PATIENCE, TestApp, TestDb, test_settings, wait_until};

/// The app with built-in HTTPS from `cert`.
async fn https_app(cert: &LocalCert) -> TestApp {
    let extra = cert.settings();
    let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    TestApp::spawn_with(Backend::Sqlite, &extra).await
}

/// A TLS connection to `addr` for the name `localhost`.
async fn connect(addr: SocketAddr, client: &TlsConnector) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(PATIENCE, client.connect(name, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake")
}

/// Everything the peer sends until it closes (a TLS stream cut without
/// close_notify ends it too), bounded by [`PATIENCE`].
async fn read_all(mut io: impl AsyncRead + Unpin) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, io.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return out,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the peer kept the connection open for {PATIENCE:?}"),
        }
    }
}

/// Sends one HTTP/1.1 `request` (its head without the final blank line;
/// `Connection: close` is added) over TLS and returns the status and body.
async fn https(
    addr: SocketAddr,
    client: &TlsConnector,
    request: &str,
    body: &str,
) -> (u16, String) {
    let (status, _, body) = https_with_head(addr, client, request, body).await;
    (status, body)
}

/// [`https`], with the answer's head too.
async fn https_with_head(
    addr: SocketAddr,
    client: &TlsConnector,
    request: &str,
    body: &str,
) -> (u16, String, String) {
    let mut tls = connect(addr, client).await;
    let wire = format!(
        "{request}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(wire.as_bytes()).await.unwrap();
    let answer = String::from_utf8(read_all(tls).await).expect("utf-8 answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a response head");
    let status = head
        .strip_prefix("HTTP/1.1 ")
        .and_then(|s| s.get(..3))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP/1.1 answer: {head}"));
    (status, head.to_owned(), body.to_owned())
}

/// Over https the dashboard's session cookie carries the `__Host-` prefix
/// (the browser then keeps it only `Secure`, for this host alone, path
/// `/`): a sibling subdomain or a plain-http answer cannot plant one. The
/// plain name is not taken over https.
#[tokio::test]
async fn over_https_the_session_cookie_is_a_host_cookie_and_the_plain_name_is_not_taken() {
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let client = cert.client();
    let port = app.addr.port();
    let start = format!(
        "POST /ui/auth/login/start HTTP/1.1\r\nHost: localhost:{port}\r\n\
         Origin: https://localhost:{port}\r\nContent-Type: application/json"
    );
    let (status, head, body) =
        https_with_head(app.addr, &client, &start, r#"{"name":"vic"}"#).await;
    assert_eq!(status, 200, "{body}");
    let set = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no cookie set: {head}"));
    assert!(set.contains("__Host-cordon_session="), "{set}");
    for attr in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attr), "{attr} missing: {set}");
    }
    assert!(!set.to_ascii_lowercase().contains("domain="), "{set}");
    // A logged-in session under the plain name is not this dashboard's.
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    assert!(cookie.starts_with("__Host-cordon_session="), "{cookie}");
    let sid = cookie.split_once('=').unwrap().1;
    let get = |cookie: String| {
        format!("GET /audit HTTP/1.1\r\nHost: localhost:{port}\r\nCookie: {cookie}")
    };
    let (own, _) = https(app.addr, &client, &get(cookie.clone()), "").await;
    assert_eq!(own, 200, "the host cookie logs in");
    let (plain, plain_head, _) =
        https_with_head(app.addr, &client, &get(format!("cordon_session={sid}")), "").await;
    assert_ne!(plain, 200, "the plain name logged in: {plain_head}");
    app.stop().await;
}

fn healthz(addr: SocketAddr) -> String {
    format!("GET /healthz HTTP/1.1\r\nHost: localhost:{}", addr.port())
}

#[tokio::test]
async fn https_serves_the_app_to_a_client_that_trusts_its_certificate() {
    // Arrange
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let client = cert.client();

    // Act
    let tls = connect(app.addr, &client).await;
    let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
    drop(tls);
    let (status, body) = https(app.addr, &client, &healthz(app.addr), "").await;

    // Assert
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(status, 200, "{body}");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], "ok");
    app.stop().await;
}

#[tokio::test]
async fn over_https_the_dashboard_takes_its_https_origin_and_refuses_the_http_one() {
    // Arrange
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let client = cert.client();
    let (_, cookie) = app.operator_session("vic", Role::Viewer).await;
    let port = app.addr.port();
    let post = |origin: String| {
        format!(
            "POST /ui/fn/query_audit HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: {origin}\r\n\
             Cookie: {cookie}\r\nContent-Type: application/x-www-form-urlencoded"
        )
    };
    let form = "query[cursor]=newest&query[limit]=5";

    // Act
    let own = https(
        app.addr,
        &client,
        &post(format!("https://localhost:{port}")),
        form,
    )
    .await;
    let plain = https(
        app.addr,
        &client,
        &post(format!("http://localhost:{port}")),
        form,
    )
    .await;

    // Assert
    assert_eq!(own.0, 200, "{}", own.1);
    assert!(own.1.contains("\"rows\""), "{}", own.1);
    assert_eq!(plain.0, 403, "{}", plain.1);
    app.stop().await;
}

#[tokio::test]
async fn plain_http_to_the_https_port_gets_no_http_answer_and_the_server_goes_on() {
    // Arrange
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let client = cert.client();

    // Act
    let mut tcp = TcpStream::connect(app.addr).await.unwrap();
    let request = format!("{}\r\nConnection: close\r\n\r\n", healthz(app.addr));
    tcp.write_all(request.as_bytes()).await.unwrap();
    let reply = read_all(tcp).await;

    // Assert: at most a TLS alert record (content type 21), never HTTP.
    assert!(
        reply.is_empty() || reply[0] == 21,
        "plain HTTP got: {:?}",
        String::from_utf8_lossy(&reply)
    );
    let (status, body) = https(app.addr, &client, &healthz(app.addr), "").await;
    assert_eq!(status, 200, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_says_nothing_neither_blocks_others_nor_stays_forever() {
    // Arrange
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let client = cert.client();
    let silent = TcpStream::connect(app.addr).await.unwrap();
    let since = Instant::now();

    // Act
    let (status, body) = https(app.addr, &client, &healthz(app.addr), "").await;
    let reply = read_all(silent).await;

    // Assert
    assert_eq!(status, 200, "{body}");
    assert!(reply.is_empty() || reply[0] == 21, "{reply:?}");
    let waited = since.elapsed();
    assert!(
        waited >= cordon::tls::HANDSHAKE_TIMEOUT - Duration::from_secs(1),
        "closed after {waited:?}, before the handshake timeout"
    );
    app.stop().await;
}

#[tokio::test]
async fn shutdown_is_not_held_up_by_silent_or_idle_clients() {
    // Arrange: one client that never starts its handshake, one that did
    // and then sends no request.
    let cert = LocalCert::new();
    let app = https_app(&cert).await;
    let _silent = TcpStream::connect(app.addr).await.unwrap();
    let _idle = connect(app.addr, &cert.client()).await;

    // Act
    let since = Instant::now();
    app.stop().await;

    // Assert: well before either timeout would have let them go.
    assert!(
        since.elapsed() < cordon::tls::HANDSHAKE_TIMEOUT / 2,
        "stopping took {:?}",
        since.elapsed()
    );
}

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_a_request_in_flight_finish() {
    // Arrange: a route that answers only when the test says so.
    let cert = LocalCert::new();
    let config = cordon::tls::server_config(&cert.cert, &cert.key).unwrap();
    let entered = Arc::new(tokio::sync::Notify::new());
    let release = Arc::new(tokio::sync::Notify::new());
    let router = Router::new().route(
        "/slow",
        get({
            let (entered, release) = (entered.clone(), release.clone());
            move || async move {
                entered.notify_one();
                release.notified().await;
                "done"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(cordon::tls::serve(listener, config, router, async {
        let _ = stopped.await;
    }));
    let client = cert.client();
    let request = format!("GET /slow HTTP/1.1\r\nHost: localhost:{}", addr.port());
    let in_flight = tokio::spawn({
        let client = client.clone();
        async move { https(addr, &client, &request, "").await }
    });
    tokio::time::timeout(PATIENCE, entered.notified())
        .await
        .expect("the request reached its handler");

    // Act
    stop.send(()).unwrap();

    // Assert
    wait_until("the listener to close", PATIENCE, || async {
        match TcpStream::connect(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        !server.is_finished(),
        "serve returned with a request in flight"
    );
    release.notify_one();
    let (status, body) = in_flight.await.unwrap();
    assert_eq!((status, body.as_str()), (200, "done"));
    tokio::time::timeout(PATIENCE, server)
        .await
        .expect("serve returns once the connection closed")
        .unwrap();
}

#[tokio::test]
async fn websocket_upgrades_work_over_https() {
    // Arrange: an echo route (the dashboard has no WebSocket route yet,
    // so the accept loop is tested with one of its own).
    let cert = LocalCert::new();
    let config = cordon::tls::server_config(&cert.cert, &cert.key).unwrap();
    let router = Router::new().route(
        "/echo",
        get(|ws: WebSocketUpgrade| async move {
            ws.on_upgrade(|mut socket| async move {
                while let Some(Ok(Message::Text(text))) = socket.recv().await {
                    if socket.send(Message::Text(text)).await.is_err() {
                        return;
                    }
                }
            })
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(cordon::tls::serve(listener, config, router, async {
        let _ = stopped.await;
    }));
    let mut tls = connect(addr, &cert.client()).await;

    // Act: the RFC 6455 handshake, then one masked text frame "hi".
    let handshake = format!(
        "GET /echo HTTP/1.1\r\nHost: localhost:{}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        addr.port()
    );
    tls.write_all(handshake.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = tokio::time::timeout(PATIENCE, tls.read_u8())
            .await
            .expect("an answer in time")
            .expect("the response head");
        head.push(byte);
    }
    let mask = [1u8, 2, 3, 4];
    tls.write_all(&[
        0x81,
        0x82,
        mask[0],
        mask[1],
        mask[2],
        mask[3],
        b'h' ^ mask[0],
        b'i' ^ mask[1],
    ])
    .await
    .unwrap();
    let mut echo = [0u8; 4];
    tokio::time::timeout(PATIENCE, tls.read_exact(&mut echo))
        .await
        .expect("an echo in time")
        .expect("the echo frame");

    // Assert
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    assert_eq!(echo, [0x81, 0x02, b'h', b'i']);
    drop(tls);
    stop.send(()).unwrap();
    tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_certificate_file_that_does_not_exist_stops_the_build_naming_it() {
    let cert = LocalCert::new();
    let db = TestDb::new(Backend::Sqlite).await;
    let gone = cert.dir.path().join("missing.pem");
    let gone = gone.display().to_string();
    let key = cert.key.display().to_string();
    let settings = test_settings(&db, &[("CORDON_TLS_CERT", &gone), ("CORDON_TLS_KEY", &key)]);

    let err = Application::build(settings).await.err().expect("refused");

    let err = format!("{err:#}");
    assert!(err.starts_with("tls_cert:"), "{err}");
    assert!(
        err.contains(&gone) && err.contains("does not exist"),
        "{err}"
    );
}

#[tokio::test]
async fn a_key_that_does_not_match_the_certificate_stops_the_build() {
    let cert = LocalCert::new();
    let other = LocalCert::new();
    let db = TestDb::new(Backend::Sqlite).await;
    let (c, k) = (
        cert.cert.display().to_string(),
        other.key.display().to_string(),
    );
    let settings = test_settings(&db, &[("CORDON_TLS_CERT", &c), ("CORDON_TLS_KEY", &k)]);

    let err = Application::build(settings).await.err().expect("refused");

    let err = format!("{err:#}");
    assert!(err.starts_with("tls_key:"), "{err}");
    assert!(err.contains(&k) && err.contains("does not match"), "{err}");
}
