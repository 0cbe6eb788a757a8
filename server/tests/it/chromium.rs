//! The Chromium fixture itself: it starts a real browser and leaves nothing behind.

use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::helpers::Chromium;

#[tokio::test]
async fn the_fixture_starts_a_real_chromium_and_kills_it_on_drop() {
    let browser = Chromium::start();
    let pid = browser.pid();
    let version = browser.version().await;
    assert!(
        version["Browser"].as_str().unwrap().contains("Chrome"),
        "{version}"
    );
    assert!(
        version["webSocketDebuggerUrl"]
            .as_str()
            .unwrap()
            .starts_with("ws://127.0.0.1:")
    );

    drop(browser);
    let deadline = Instant::now() + Duration::from_secs(5);
    // The group id is the browser's pid: no member may survive.
    while nix::sys::signal::killpg(Pid::from_raw(pid), None).is_ok() {
        assert!(
            Instant::now() < deadline,
            "chromium's process group survived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        kill(Pid::from_raw(pid), None).is_err(),
        "chromium still running"
    );
}

/// `cdp::size_viewport` gives the page exactly the viewport asked for, at
/// once (no override: the window itself), for sizes wider and taller than
/// the window the browser started with, and a screenshot has that size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_sized_for_a_viewport_shows_exactly_that_viewport_at_once() {
    let browser = Chromium::start_with(&["--window-size=1280,720".into()], "about:blank");
    let conn = browser.connect().await;
    let page = conn.first_page().await.unwrap();
    for (w, h) in [
        (1280, 720),
        (1920, 1080),
        (390, 844),
        (200, 200),
        (3840, 2160),
        (800, 600),
    ] {
        cordon::cdp::size_viewport(&page, w, h).await.unwrap();
        let want = serde_json::json!([w, h, 1]);
        if (w, h) == (1280, 720) {
            // The size the browser started with: on a loaded machine its
            // page may not have had its first resize yet (the window
            // settles after start), and asking for the same size changes
            // nothing. Every other size is checked at once.
            crate::helpers::wait_until("the start size", crate::helpers::PATIENCE, || async {
                let seen =
                    cordon::cdp::evaluate(&page, "[innerWidth, innerHeight, devicePixelRatio]")
                        .await
                        .unwrap();
                if seen == want {
                    Ok(())
                } else {
                    Err(seen.to_string())
                }
            })
            .await;
        } else {
            let seen = cordon::cdp::evaluate(&page, "[innerWidth, innerHeight, devicePixelRatio]")
                .await
                .unwrap();
            assert_eq!(seen, want, "asked for {w}×{h}");
        }
        let png = cordon::cdp::screenshot(
            &page,
            cordon::cdp::ImageFormat::Png,
            None,
            false,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
        let dims = image::ImageReader::new(std::io::Cursor::new(&png))
            .with_guessed_format()
            .unwrap()
            .into_dimensions()
            .unwrap();
        assert_eq!(dims, (w, h), "the screenshot of {w}×{h}");
    }
    // A hostile page cannot resize a window it did not open: the viewport
    // stays what the control plane made it.
    for page in [page.clone(), conn.new_page("about:blank").await.unwrap()] {
        cordon::cdp::size_viewport(&page, 800, 600).await.unwrap();
        cordon::cdp::evaluate(&page, "resizeTo(300, 300); resizeBy(-200, -200); 0")
            .await
            .unwrap();
        // An absence: a resize would show within a frame or two; this
        // waits far longer (a slow machine can only make it pass late,
        // never fail wrongly).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let seen = cordon::cdp::evaluate(&page, "[innerWidth, innerHeight]")
            .await
            .unwrap();
        assert_eq!(
            seen,
            serde_json::json!([800, 600]),
            "after the page's resizeTo"
        );
    }
}

/// A tab the browser opens by itself (not through `new_page`) has its
/// workers released once, by the dialog follower's hook as it attaches:
/// the connection knows it before any call lists the tabs, so listing
/// them does not release it again; a closed tab is forgotten at the next
/// listing (a page that opens tabs in a loop does not grow the set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_tab_is_released_once_as_it_attaches_and_forgotten_once_closed() {
    use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, CreateTargetParams};
    let browser = Chromium::start();
    let conn = browser.connect().await;
    let first = conn.first_page().await.unwrap();
    assert!(conn.released(first.target_id().inner()), "the first tab");
    let made = conn
        .browser()
        .execute(CreateTargetParams::new("about:blank"))
        .await
        .unwrap();
    let tab = made.result.target_id.clone();
    // Only the hook can note it: nothing here lists the tabs.
    crate::helpers::wait_until(
        "the hook releases the tab",
        crate::helpers::PATIENCE,
        || async {
            if conn.released(tab.inner()) {
                Ok(())
            } else {
                Err("not released yet".to_owned())
            }
        },
    )
    .await;
    conn.browser()
        .execute(CloseTargetParams::new(tab.clone()))
        .await
        .unwrap();
    crate::helpers::wait_until(
        "the closed tab is forgotten",
        crate::helpers::PATIENCE,
        || async {
            let pages = conn.pages().await.unwrap();
            let listed = pages.iter().any(|p| p.target_id() == &tab);
            if !listed && !conn.released(tab.inner()) {
                Ok(())
            } else {
                Err(format!(
                    "listed {listed}, released {}",
                    conn.released(tab.inner())
                ))
            }
        },
    )
    .await;
    assert!(
        conn.released(first.target_id().inner()),
        "the first tab is still open"
    );
}

/// A page can make its browser send Cordon's own connection events as
/// large and as many as it likes: a string it logs or throws comes back
/// whole (chromiumoxide enables `Runtime` on every tab). Cordon never
/// listens to them, and its connection's meter (`cdp::meter`) drops them
/// unread: a plain connection to the same browser hears the page's log,
/// Cordon's hears neither it nor a 250 MiB one, and goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_page_logs_or_throws_never_reaches_cordons_own_connection() {
    use chromiumoxide::cdp::js_protocol::runtime::{EventConsoleApiCalled, EventExceptionThrown};
    use futures::StreamExt;
    let browser = Chromium::start();
    let ws = browser.version().await["webSocketDebuggerUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let plain = cordon::cdp::BrowserConn::connect_unfollowed(&ws)
        .await
        .unwrap();
    let cordons = browser.connect().await;
    let (plain_page, page) = (
        plain.first_page().await.unwrap(),
        cordons.first_page().await.unwrap(),
    );
    let mut plain_logged = plain_page
        .event_listener::<EventConsoleApiCalled>()
        .await
        .unwrap();
    let mut logged = page
        .event_listener::<EventConsoleApiCalled>()
        .await
        .unwrap();
    let mut thrown = page.event_listener::<EventExceptionThrown>().await.unwrap();
    // Chromium sends a log before the answer to the evaluation that made
    // it: once the answer is in, a log that passed is in the listener.
    let answer = page
        .evaluate("console.log('x'.repeat(8 << 20)); setTimeout(() => { throw new Error('y'.repeat(8 << 20)) }, 0); 2")
        .await
        .unwrap();
    assert_eq!(answer.into_value::<i64>().unwrap(), 2);
    let heard = tokio::time::timeout(Duration::from_secs(60), plain_logged.next())
        .await
        .expect("a plain connection hears the page's log")
        .unwrap();
    let len = heard.args[0]
        .value
        .as_ref()
        .and_then(|v| v.as_str())
        .map(str::len);
    assert_eq!(
        len,
        Some(8 << 20),
        "the log's length, as a plain connection heard it"
    );
    let big = page
        .evaluate("console.log('z'.repeat(250 << 20)); 3")
        .await
        .unwrap();
    assert_eq!(big.into_value::<i64>().unwrap(), 3);
    let after = page.evaluate("document.readyState").await.unwrap();
    assert_eq!(after.into_value::<String>().unwrap(), "complete");
    assert!(!cordons.is_closed(), "Cordon's connection ended");
    let log = tokio::time::timeout(Duration::from_secs(2), logged.next()).await;
    // Only the size, if one came: the log is 8 or 250 MiB.
    let size = log.ok().flatten().map(|e| format!("{:?}", e.args).len());
    assert!(
        size.is_none(),
        "Cordon's connection heard a log of ~{size:?} bytes"
    );
    let throw = tokio::time::timeout(Duration::from_secs(2), thrown.next()).await;
    assert!(throw.is_err(), "Cordon's connection heard an exception");
}
