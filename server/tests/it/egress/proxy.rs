//! The proxy spoken to with a raw TCP client: parsing, bounds, refusals, tunnels, logs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cordon::egress::{AddressPolicy, Decision, EgressGuard, Limits, Resolve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Canary, Pages, fixture, rows_when};
use crate::helpers::{Backend, TestDb};

/// Sends `request` and reads one response: its head and `content-length` body.
async fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(request).await.unwrap();
    let head = read_head(&mut s).await;
    let len = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.trim().parse().unwrap());
    let mut body = vec![0; len];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut body))
        .await
        .expect("a response body")
        .unwrap();
    head + &String::from_utf8_lossy(&body)
}

async fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads a response head (up to the blank line).
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut byte))
            .await
            .expect("a response head")
            .unwrap();
        assert!(
            n == 1,
            "closed mid-head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_400_and_nothing_is_logged() {
    let f = fixture("b_malformedaaaaaaaaaaaaaaaaa", Limits::default()).await;
    for request in [
        &b"NOT HTTP AT ALL\r\n\r\n"[..],
        b"GET /relative HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET https://example.com/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET http://a b/ HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    ] {
        let reply = exchange(f.proxy.addr, request).await;
        assert!(reply.starts_with("HTTP/1.1 400"), "{request:?} → {reply:?}");
    }
    // A host that is not one: 400, logged as refused, never resolved.
    let reply = exchange(
        f.proxy.addr,
        b"GET http://1.2.3.4.5/ HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply:?}");
    f.proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&"b_malformedaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0].entry.reason.as_deref(), Some("invalid_host"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_headers_are_refused_with_431() {
    let f = fixture("b_oversizedaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let request = format!(
        "GET {} HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        f.pages.url("/hello"),
        "a".repeat(20 * 1024)
    );
    let reply = exchange(f.proxy.addr, request.as_bytes()).await;
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply:?}");
    assert!(!f.pages.saw("/hello"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_blocked_addresses_gets_403_and_denied_rows() {
    let f = fixture("b_blockedaaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let (c, p) = (f.canary.addr.port(), f.pages.addr.port());
    let cases = [
        (format!("127.0.0.1:{c}"), "loopback"),
        (format!("2130706433:{c}"), "loopback"),
        (format!("0x7f.1:{c}"), "loopback"),
        (format!("[::ffff:127.0.0.1]:{c}"), "loopback"),
        (format!("[::1]:{c}"), "loopback"),
        (format!("localhost:{c}"), "loopback"),
        // The page server's address on another port, or another loopback address.
        (format!("127.0.0.2:{p}"), "loopback"),
        // One bad address refuses the whole name, even next to an allowed one.
        (format!("mixed.test:{p}"), "cloud_metadata"),
        // Refused before any connect: these send no packet.
        ("169.254.169.254:80".to_owned(), "cloud_metadata"),
        ("10.0.0.1:443".to_owned(), "private"),
        ("[fd00:ec2::254]:80".to_owned(), "cloud_metadata"),
        ("nowhere.test:443".to_owned(), "unresolved"),
    ];
    for (target, reason) in &cases {
        let reply = exchange(
            f.proxy.addr,
            format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await;
        let status = if *reason == "unresolved" {
            "502"
        } else {
            "403"
        };
        assert!(
            reply.starts_with(&format!("HTTP/1.1 {status}")),
            "{target} → {reply:?}"
        );
        assert!(!reply.contains("127.0.0.1"), "no addresses in the reply");
        assert!(
            reply.contains(&format!("x-cordon-egress: {reason}\r\n")),
            "{reply:?}"
        );
    }
    // The plain-http form of a WebSocket to the canary is refused the same way.
    let reply = exchange(
        f.proxy.addr,
        format!(
            "GET http://127.0.0.1:{c}/ HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply:?}");

    f.proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&"b_blockedaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    let reasons: Vec<_> = rows
        .iter()
        .map(|r| r.entry.reason.as_deref().unwrap())
        .collect();
    let mut want: Vec<_> = cases.iter().map(|(_, r)| *r).collect();
    want.push("loopback");
    assert_eq!(reasons, want);
    assert!(rows.iter().all(|r| r.entry.decision == Decision::Denied));
    assert_eq!(
        rows[1].entry.host, "127.0.0.1",
        "odd spellings are logged normalised"
    );
    assert_eq!(f.canary.hits(), 0);
    assert!(f.pages.seen.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_the_allowed_page_server_tunnels_and_counts_bytes() {
    let f = fixture("b_tunnelaaaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let target = f.pages.addr;
    let mut s = TcpStream::connect(f.proxy.addr).await.unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");

    s.write_all(b"GET /hello HTTP/1.1\r\nHost: pages\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let reply = read_all(&mut s).await;
    drop(s);

    assert!(reply.ends_with("hello through the guard"), "{reply:?}");
    let rows = rows_when(&f.store, "b_tunnelaaaaaaaaaaaaaaaaaaaa", |rows| {
        !rows.is_empty()
    })
    .await;
    let e = &rows[0].entry;
    assert_eq!((e.host.as_str(), e.port), ("127.0.0.1", target.port()));
    assert_eq!((e.decision, e.reason.as_deref()), (Decision::Allowed, None));
    assert!(
        e.bytes_up > 40 && e.bytes_down as usize >= reply.len(),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_forwarded_and_logged_without_the_url() {
    let f = fixture("b_plainaaaaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let p = f.pages.addr.port();
    // Keep-alive towards the proxy: two requests, one client connection.
    let mut s = TcpStream::connect(f.proxy.addr).await.unwrap();
    s.write_all(
        format!(
            "GET http://127.0.0.1:{p}/hello?token=s3cret HTTP/1.1\r\nHost: elsewhere\r\n\r\n\
             GET http://pages.test:{p}/redirect HTTP/1.1\r\nHost: pages.test\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let reply = read_all(&mut s).await;

    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    assert!(reply.contains("hello through the guard"));
    // The proxy hands the redirect back; the browser's next hop is a new request.
    assert!(reply.contains("HTTP/1.1 302"), "{reply:?}");
    let c = f.canary.addr.port();
    assert!(
        reply.contains(&format!("location: http://127.0.0.1:{c}/")),
        "{reply:?}"
    );
    let rows = rows_when(&f.store, "b_plainaaaaaaaaaaaaaaaaaaaaa", |rows| {
        rows.len() == 2
    })
    .await;
    let hosts: Vec<_> = rows.iter().map(|r| r.entry.host.as_str()).collect();
    assert_eq!(hosts, ["127.0.0.1", "pages.test"]);
    assert!(
        rows.iter()
            .all(|r| r.entry.decision == Decision::Allowed && r.entry.bytes_down > 0)
    );
    assert!(!format!("{rows:?}").contains("s3cret"));
    assert_eq!(f.canary.hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_websocket_upgrade_is_tunnelled() {
    let f = fixture("b_wsaaaaaaaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let mut s = TcpStream::connect(f.proxy.addr).await.unwrap();
    s.write_all(
        format!(
            "GET {} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
            f.pages.url("/ws")
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head:?}");

    // A masked text frame "hi"; the echo comes back unmasked.
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x82];
    frame.extend_from_slice(&mask);
    frame.extend(b"hi".iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    s.write_all(&frame).await.unwrap();
    let mut echo = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut echo))
        .await
        .expect("echo")
        .unwrap();
    assert_eq!(echo, [0x81, 0x02, b'h', b'i']);

    drop(s);
    let rows = rows_when(&f.store, "b_wsaaaaaaaaaaaaaaaaaaaaaaaa", |rows| {
        !rows.is_empty()
    })
    .await;
    assert_eq!(rows[0].entry.decision, Decision::Allowed);
    assert!(rows[0].entry.bytes_up > 0 && rows[0].entry.bytes_down > 4);
}

/// Answers a name's first lookup with the page server, later ones with the
/// metadata address: a rebinding attacker's resolver.
struct Rebinding(AtomicUsize);

#[async_trait::async_trait]
impl Resolve for Rebinding {
    async fn resolve(&self, _name: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(vec![if self.0.fetch_add(1, Ordering::SeqCst) == 0 {
            Ipv4Addr::LOCALHOST.into()
        } else {
            "169.254.169.254".parse().unwrap()
        }])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_resolved_once_per_request_and_the_checked_address_is_used() {
    let db = TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let canary = Canary::start().await;
    let pages = Pages::start(canary.addr).await;
    let p = pages.addr.port();
    let resolver = Arc::new(Rebinding(AtomicUsize::new(0)));
    let policy = AddressPolicy::with_allowlist([pages.addr.to_string()]).unwrap();
    let guard =
        EgressGuard::with_resolver(policy, store.clone(), resolver.clone(), Limits::default());
    let proxy = guard
        .listen("b_rebindaaaaaaaaaaaaaaaaaaaa".into())
        .await
        .unwrap();

    let first = exchange(
        proxy.addr,
        format!("GET http://rebind.test:{p}/hello HTTP/1.1\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;
    let second = exchange(
        proxy.addr,
        format!("GET http://rebind.test:{p}/hello HTTP/1.1\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;

    assert!(first.starts_with("HTTP/1.1 200"), "{first:?}");
    assert!(second.starts_with("HTTP/1.1 403"), "{second:?}");
    assert_eq!(
        resolver.0.load(Ordering::SeqCst),
        2,
        "one lookup per request"
    );
    proxy.close().await;
    let rows = store
        .egress_for_sandbox(&"b_rebindaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    let reasons: Vec<_> = rows.iter().map(|r| r.entry.reason.as_deref()).collect();
    assert_eq!(reasons, [None, Some("cloud_metadata")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnels_are_cut_and_close_flushes_the_log() {
    let limits = Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let f = fixture("b_idleaaaaaaaaaaaaaaaaaaaaaa", limits).await;
    let target = f.pages.addr;
    let open_tunnel = || async {
        let mut s = TcpStream::connect(f.proxy.addr).await.unwrap();
        s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        assert!(read_head(&mut s).await.starts_with("HTTP/1.1 200"));
        s
    };

    // Idle: cut after the limit.
    let mut idle = open_tunnel().await;
    let started = Instant::now();
    let rest = read_all(&mut idle).await;
    assert!(rest.is_empty() && started.elapsed() < Duration::from_secs(5));

    // Busy when the listener closes: cut, and its row is written by the time close returns.
    let mut busy = open_tunnel().await;
    f.proxy.close().await;
    assert!(read_all(&mut busy).await.is_empty());
    let rows = f
        .store
        .egress_for_sandbox(&"b_idleaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "{rows:#?}");
    assert!(
        TcpStream::connect(target).await.is_ok(),
        "the page server is unaffected"
    );
}

/// Counts lookups and answers every name with the page server's address.
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl Resolve for Counting {
    async fn resolve(&self, _name: &str) -> std::io::Result<Vec<IpAddr>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(vec![Ipv4Addr::LOCALHOST.into()])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromiums_own_service_endpoints_are_refused_before_any_lookup_even_if_allowlisted() {
    let db = TestDb::new(Backend::Sqlite).await;
    let store = db.store().await;
    let canary = Canary::start().await;
    let pages = Pages::start(canary.addr).await;
    let p = pages.addr.port();
    let resolver = Arc::new(Counting(AtomicUsize::new(0)));
    // Even a name on the allowlist, resolving to the allowed page server.
    let policy = AddressPolicy::with_allowlist([
        pages.addr.to_string(),
        format!("update.googleapis.com:{p}"),
    ])
    .unwrap();
    let guard =
        EgressGuard::with_resolver(policy, store.clone(), resolver.clone(), Limits::default());
    let proxy = guard
        .listen("b_servicesaaaaaaaaaaaaaaaaaa".into())
        .await
        .unwrap();
    let requests = [
        format!("CONNECT update.googleapis.com:{p} HTTP/1.1\r\nConnection: close\r\n\r\n"),
        "CONNECT UPDATE.googleapis.com.:443 HTTP/1.1\r\nConnection: close\r\n\r\n".to_owned(),
        format!(
            "POST http://update.googleapis.com:{p}/service/update2/json HTTP/1.1\r\n\
             Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        ),
        format!(
            "GET http://clients2.google.com:{p}/time/1/current HTTP/1.1\r\nConnection: close\r\n\r\n"
        ),
    ];
    for req in &requests {
        let reply = exchange(proxy.addr, req.as_bytes()).await;
        assert!(reply.starts_with("HTTP/1.1 403"), "{req} → {reply:?}");
        assert!(
            reply.contains("x-cordon-egress: browser_service\r\n"),
            "{reply:?}"
        );
    }
    // A look-alike name is not refused by name: it is resolved and allowed.
    let reply = exchange(
        proxy.addr,
        format!("GET http://pages.test:{p}/hello HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
    assert_eq!(
        resolver.0.load(Ordering::SeqCst),
        1,
        "only the ordinary name was looked up"
    );
    proxy.close().await;
    let rows = store
        .egress_for_sandbox(&"b_servicesaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.entry.host.as_str(), r.entry.reason.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("update.googleapis.com", Some("browser_service")),
            ("update.googleapis.com", Some("browser_service")),
            ("update.googleapis.com", Some("browser_service")),
            ("clients2.google.com", Some("browser_service")),
            ("pages.test", None),
        ]
    );
    assert_eq!(canary.hits(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_listener_serves_only_this_process() {
    let f = fixture("b_privateunusedaaaaaaaaaaaaa", Limits::default()).await;
    let proxy = super::guard(f.store.clone(), f.pages.addr, Limits::default())
        .listen_private("b_privateaaaaaaaaaaaaaaaaaaa".into())
        .await
        .unwrap();
    let p = f.pages.addr.port();
    let request = format!("GET http://127.0.0.1:{p}/hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    let mine = exchange(proxy.addr, request.as_bytes()).await;
    assert!(mine.starts_with("HTTP/1.1 200"), "{mine:?}");
    // The same request from another process gets no answer at all.
    let theirs = crate::helpers::send_from_another_process(proxy.addr.port(), &request);
    assert!(theirs.is_empty(), "{theirs:?}");
    proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&"b_privateaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        1,
        "only this process's request was forwarded and logged"
    );
    assert_eq!(f.pages.seen.lock().unwrap().len(), 1);
}

/// Sends `request` to `proxy` from a socket bound to `from` (another
/// loopback address stands in for another pod); answers what came back.
async fn exchange_from(
    from: std::net::IpAddr,
    proxy: std::net::SocketAddr,
    request: &str,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::new(from, 0)).unwrap();
    let mut s = socket.connect(proxy).await.unwrap();
    let _ = s.write_all(request.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_listener_serves_no_one_until_its_pod_is_known_then_only_that_pod() {
    let f = fixture("b_podunusedaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let proxy = super::guard(f.store.clone(), f.pages.addr, Limits::default())
        .listen_for_pod("b_podaaaaaaaaaaaaaaaaaaaaaaa".into())
        .await
        .unwrap();
    let p = f.pages.addr.port();
    let request = format!("GET http://127.0.0.1:{p}/hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    let (pod, other) = (
        std::net::IpAddr::from([127, 0, 0, 2]),
        std::net::IpAddr::from([127, 0, 0, 1]),
    );
    // Before the pod's address is known: nobody, not even the pod.
    let early = exchange_from(pod, proxy.addr, &request).await;
    assert!(early.is_empty(), "{early:?}");
    assert!(proxy.admit_only(pod));
    assert!(!proxy.admit_only(other), "set once");
    // Another pod (another address) gets no answer at all; the pod does.
    let theirs = exchange_from(other, proxy.addr, &request).await;
    assert!(theirs.is_empty(), "{theirs:?}");
    let mine = exchange_from(pod, proxy.addr, &request).await;
    assert!(mine.starts_with("HTTP/1.1 200"), "{mine:?}");
    proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&"b_podaaaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    assert_eq!(
        rows.len(),
        1,
        "only the pod's request was forwarded: {rows:?}"
    );
}

/// A page refused in a loop writes a bounded number of rows: twice the
/// rate at once, then the rate; the rest are counted, and the next row
/// written after a pause says how many were not. Nothing reaches the
/// canary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refusals_writes_a_bounded_number_of_rows() {
    let sandbox = "b_refloodaaaaaaaaaaaaaaaaaaa";
    let f = fixture(sandbox, Limits::default()).await;
    let c = f.canary.addr.port();
    let started = Instant::now();
    let mut clients = Vec::new();
    for _ in 0..4 {
        let proxy = f.proxy.addr;
        clients.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(proxy).await.unwrap();
            let one = format!("GET http://127.0.0.1:{c}/ HTTP/1.1\r\nHost: x\r\n\r\n");
            s.write_all(one.repeat(500).as_bytes()).await.unwrap();
            // Every answer read: each is a 403.
            let mut seen = 0;
            let mut buf = vec![0u8; 1 << 16];
            let mut text = String::new();
            while seen < 500 {
                let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
                    .await
                    .expect("answers")
                    .unwrap();
                assert!(n > 0, "closed after {seen} answers");
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                seen = text.matches("HTTP/1.1 403").count();
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let flooded = started.elapsed().as_secs_f64();
    // After a pause one more, whose row follows the count of the rest.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let reply = exchange(
        f.proxy.addr,
        format!("GET http://127.0.0.1:{c}/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply:?}");
    f.proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&sandbox.parse().unwrap(), 10_000)
        .await
        .unwrap();
    // Refusals logged, and rows counting those that were not (one before
    // each logged refusal that follows unlogged ones).
    let (counts, logged): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r.entry.host == "*");
    let unlogged: usize = counts
        .iter()
        .map(|r| {
            r.entry
                .reason
                .as_deref()
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("not a count: {:?}", r.entry))
        })
        .sum();
    let most = 40.0 + 20.0 * (started.elapsed().as_secs_f64() + 1.0);
    assert!(
        (logged.len() as f64) <= most && logged.len() >= 40 && counts.len() <= logged.len(),
        "{} refusals logged and {} counts for 2001 (the flood took {flooded:.2} s, at most {most})",
        logged.len(),
        counts.len()
    );
    assert_eq!(
        logged.len() + unlogged,
        2001,
        "every refusal logged or counted: {} logged, {unlogged} counted",
        logged.len()
    );
    // The last refusal (after the pause) is logged.
    let last = rows.iter().rev().find(|r| r.entry.host != "*").unwrap();
    assert_eq!(last.entry.reason.as_deref(), Some("loopback"));
    assert_eq!(f.canary.hits(), 0);
}

/// Open tunnels keep their connection's place (they outlive hyper's
/// serving of it): with three places, three tunnels are open and a
/// fourth CONNECT waits until one of them closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_tunnels_keep_their_places_and_a_connect_past_them_waits() {
    let limits = Limits {
        max_connections: 3,
        ..Limits::default()
    };
    let f = fixture("b_tunnelsaaaaaaaaaaaaaaaaaaa", limits).await;
    let target = f.pages.addr;
    let ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(f.proxy.addr).await.unwrap();
        s.write_all(ask.as_bytes()).await.unwrap();
        let head = read_head(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
        open.push(s);
    }
    let mut fourth = TcpStream::connect(f.proxy.addr).await.unwrap();
    fourth.write_all(ask.as_bytes()).await.unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(700), fourth.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "a fourth tunnel was served at once: {early:?}"
    );
    // One tunnel is used and closes: the fourth is served.
    let mut first = open.remove(0);
    first
        .write_all(b"GET /hello HTTP/1.1\r\nHost: pages\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert!(
        read_all(&mut first)
            .await
            .ends_with("hello through the guard")
    );
    drop(first);
    let head = read_head(&mut fourth).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head:?}");
    drop(open);
    drop(fourth);
    f.proxy.close().await;
}

/// A browser that hands over connections without end while every place
/// is held: 64 wait (for 10 s at most), the rest are closed at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handed_over_connections_past_the_waiting_bound_are_closed_at_once() {
    // Two places: the TCP accept loop keeps one for its next connection.
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let f = fixture("b_waitersaaaaaaaaaaaaaaaaaaa", limits).await;
    let port = f.proxy.port().expect("an in-process port");
    // The other place, held by a client kept alive once answered (so it
    // is served, its place taken and its wait over).
    let (held, theirs) = tokio::io::duplex(1 << 16);
    port.serve(theirs);
    let mut held = held;
    let c = f.canary.addr.port();
    held.write_all(format!("GET http://127.0.0.1:{c}/ HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), held.read_exact(&mut answer))
        .await
        .expect("the held connection is served")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 403");
    let mut ours = Vec::new();
    for _ in 0..100 {
        let (mine, theirs) = tokio::io::duplex(1024);
        port.serve(theirs);
        ours.push(mine);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut closed = 0;
    for mine in &mut ours {
        let mut byte = [0u8; 1];
        match futures::FutureExt::now_or_never(mine.read(&mut byte)) {
            Some(Ok(0)) => closed += 1,
            None => {}
            Some(other) => panic!("a waiting connection was answered: {other:?}"),
        }
    }
    assert_eq!(closed, 36, "closed at once (64 may wait)");
    drop(held);
    f.proxy.close().await;
}

/// A port browsers never use for the web (SMTP, SSH, IRC) is refused
/// before any lookup, CONNECT or plain: only a compromised browser asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_browsers_refuse_are_refused_before_any_lookup() {
    let f = fixture("b_portsaaaaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    for request in [
        "CONNECT mail.example.test:25 HTTP/1.1\r\nHost: mail.example.test:25\r\nConnection: close\r\n\r\n",
        "CONNECT 8.8.8.8:22 HTTP/1.1\r\nHost: 8.8.8.8:22\r\nConnection: close\r\n\r\n",
        "GET http://irc.example.test:6667/ HTTP/1.1\r\nHost: irc.example.test\r\nConnection: close\r\n\r\n",
    ] {
        let reply = exchange(f.proxy.addr, request.as_bytes()).await;
        assert!(reply.starts_with("HTTP/1.1 403"), "{request:?} → {reply:?}");
        assert!(
            reply.contains("x-cordon-egress: unsafe_port\r\n"),
            "{reply:?}"
        );
    }
    f.proxy.close().await;
    let rows = f
        .store
        .egress_for_sandbox(&"b_portsaaaaaaaaaaaaaaaaaaaaa".parse().unwrap(), 10_000)
        .await
        .unwrap();
    let reasons: Vec<_> = rows.iter().map(|r| r.entry.reason.as_deref()).collect();
    assert_eq!(reasons, [Some("unsafe_port"); 3]);
}
