//! The Chromium fixture itself: it starts a real browser and leaves nothing behind.

use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

use crate::helpers::Chromium;

#[tokio::test]
async fn the_fixture_starts_a_real_chromium_and_kills_it_on_drop() {
    let browser = Chromium::start();
    let pid = browser.pid();
    let version: serde_json::Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!(
            "http://127.0.0.1:{}/json/version",
            browser.devtools_port
        ))
        .send()
        .await
        .expect("DevTools answers")
        .json()
        .await
        .unwrap();
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
