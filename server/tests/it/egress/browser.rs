//! A real Chromium behind the guard: the allowed page loads, the canary is never reached.

use cordon::egress::{Decision, Limits, chromium_proxy_args};

use super::{fixture, on_port, rows_when};
use crate::helpers::Chromium;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_reaches_the_allowed_page_and_never_the_canary() {
    // Arrange: a browser whose every request goes through the guard.
    let f = fixture("b_chromiumaaaaaaaaaaaaaaaaaa", Limits::default()).await;
    let (p, c) = (f.pages.addr.port(), f.canary.addr.port());
    let mut args = chromium_proxy_args(f.proxy.addr);
    // Belt and braces: Chromium itself resolves nothing (names go to the proxy);
    // the proxy's own address must stay out of the rule or Chromium cannot reach it.
    args.push("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1".into());
    let browser = Chromium::start_with(&args, &f.pages.url("/"));

    // (a) the page loads through the proxy; (d), (e) its WebSocket, fetches
    // and image to the canary are refused.
    let rows = rows_when(&f.store, "b_chromiumaaaaaaaaaaaaaaaaaa", |rows| {
        f.pages.saw("/done")
            && on_port(rows, p, Decision::Allowed)
                .iter()
                .any(|e| e.bytes_down > 0)
            && on_port(rows, c, Decision::Denied).len() >= 4
    })
    .await;
    let allowed = on_port(&rows, p, Decision::Allowed);
    assert!(
        allowed
            .iter()
            .all(|e| e.host == "127.0.0.1" && e.bytes_up > 0)
    );
    let denied = on_port(&rows, c, Decision::Denied);
    assert!(denied.iter().any(|e| e.host == "localhost"), "{denied:#?}");
    assert!(denied.iter().filter(|e| e.host == "127.0.0.1").count() >= 3);
    assert!(
        denied
            .iter()
            .all(|e| e.reason.as_deref() == Some("loopback"))
    );

    // (b) a direct navigation to the canary, (c) a redirect to it.
    let devtools = reqwest::Client::builder().no_proxy().build().unwrap();
    let open = |url: String| {
        let req = devtools.put(format!(
            "http://127.0.0.1:{}/json/new?{url}",
            browser.devtools_port
        ));
        async move {
            req.send()
                .await
                .expect("DevTools answers")
                .error_for_status()
                .unwrap()
        }
    };
    let before = denied.len();
    open(format!("http://127.0.0.1:{c}/direct")).await;
    let rows = rows_when(&f.store, "b_chromiumaaaaaaaaaaaaaaaaaa", |rows| {
        on_port(rows, c, Decision::Denied).len() > before
    })
    .await;
    let before = on_port(&rows, c, Decision::Denied).len();
    open(f.pages.url("/redirect")).await;
    f.pages.wait_for("/redirect").await;
    let rows = rows_when(&f.store, "b_chromiumaaaaaaaaaaaaaaaaaa", |rows| {
        on_port(rows, c, Decision::Denied).len() > before
    })
    .await;

    // Assert: the canary never saw a connection, and nothing to it was allowed.
    assert_eq!(f.canary.hits(), 0);
    assert!(on_port(&rows, c, Decision::Allowed).is_empty());
    drop(browser);
    f.proxy.close().await;
    assert_eq!(f.canary.hits(), 0);
}
