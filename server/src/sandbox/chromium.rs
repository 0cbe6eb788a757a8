//! How Cordon runs Chromium: flags, and waiting for its DevTools endpoint.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};

/// Flags every sandboxed Chromium gets. Background networking, sync,
/// updates and first-run UI are off so the browser only does what the
/// session asks.
pub const BASE_FLAGS: &[&str] = &[
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    // WebUIOmnibox*Popup: headless Chromium otherwise preloads the omnibox
    // popup's WebUI in a renderer of its own (~34 MiB per browser, and CPU
    // at every start) that a window-less browser never shows.
    // NetworkTimeServiceQuerying: a clock query to clients2.google.com at
    // start-up (the guard refuses it anyway: egress::is_browser_service).
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions,BackForwardCache,AudioServiceOutOfProcess,WebUIOmniboxPopup,WebUIOmniboxAimPopup,NetworkTimeServiceQuerying",
    // Fewer processes per browser: ~90 MiB instead of ~160 MiB per idle
    // session here (BENCHMARKS.md). The driver's sandbox contains them all.
    "--enable-features=NetworkServiceInProcess2",
    "--in-process-gpu",
    // Chromium starts a second zygote for processes that run without its
    // sandbox; with the network service and the GPU in process, nothing
    // here is launched from it, and it holds ~15 MiB of private memory per
    // browser (BENCHMARKS.md, 2026-11-27 20:45). Whatever would use it is
    // launched directly instead.
    "--no-unsandboxed-zygote",
    "--metrics-recording-only",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    "--hide-scrollbars",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    // Chromium's own start-up requests, which no switch or feature of this
    // build turns off (the reconcilor is already off without an OAuth
    // client; `signin.allowed`, `--allow-browser-signin=false` and the
    // on-device model features were tried): a fresh profile asks
    // accounts.google.com for `/ListAccounts` (and retries), which made
    // the guard resolve that name for every new browser, and the component
    // updater asks update.googleapis.com for the on-device model manifest
    // despite `--disable-component-update`. Both are pointed at port 1,
    // which Chromium refuses itself (`ERR_UNSAFE_PORT`) before any lookup
    // or connection, so nothing reaches even the proxy. Only Chromium's
    // own notion of the Google login origin changes: pages still reach
    // accounts.google.com like any site (the egress policy decides).
    "--gaia-url=https://gaia.invalid:1",
    "--component-updater=url-source=https://update.invalid:1/",
];

/// All arguments for one browser.
pub fn args(
    profile: &Path,
    proxy: SocketAddr,
    window: (u32, u32),
    no_sandbox: bool,
) -> Vec<String> {
    let mut args: Vec<String> = BASE_FLAGS.iter().map(|s| (*s).to_owned()).collect();
    if no_sandbox {
        // Chromium's own sandbox cannot start as root; the driver's sandbox
        // (process group, or bwrap namespaces) is what contains it then.
        args.push("--no-sandbox".into());
    }
    // Every request goes through the egress guard: no bypass, no QUIC,
    // no non-proxied WebRTC UDP.
    args.extend(crate::egress::chromium_proxy_args(proxy));
    args.push(format!("--window-size={},{}", window.0, window.1));
    args.push(format!("--user-data-dir={}", profile.display()));
    args.push("about:blank".into());
    args
}

/// Waits for Chromium to write `DevToolsActivePort` in `profile` and returns
/// the browser's CDP WebSocket URL on `host`. `alive` is polled to fail fast
/// when the process dies first.
pub async fn wait_for_devtools(
    profile: &Path,
    host: &str,
    timeout: Duration,
    mut alive: impl FnMut() -> bool,
) -> anyhow::Result<String> {
    let file = profile.join("DevToolsActivePort");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(text) = tokio::fs::read_to_string(&file).await {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                let port: u16 = port
                    .trim()
                    .parse()
                    .context("malformed DevToolsActivePort")?;
                return Ok(format!("ws://{host}:{port}{}", path.trim()));
            }
        }
        if !alive() {
            bail!("chromium exited before opening its DevTools port");
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("chromium did not open its DevTools port within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_browser_is_pointed_at_the_proxy_without_bypass() {
        let a = args(
            Path::new("/tmp/p"),
            "127.0.0.1:3128".parse().unwrap(),
            (1280, 720),
            false,
        );
        assert!(a.contains(&"--proxy-server=http://127.0.0.1:3128".to_string()));
        assert!(a.contains(&"--proxy-bypass-list=<-loopback>".to_string()));
        assert!(a.contains(&"--disable-quic".to_string()));
        assert!(a.contains(&"--user-data-dir=/tmp/p".to_string()));
        assert!(!a.contains(&"--no-sandbox".to_string()));
        assert!(a.iter().any(|f| f.contains("disable_non_proxied_udp")));
    }

    #[test]
    fn chromiums_own_google_endpoints_point_at_a_port_it_refuses() {
        let a = args(
            Path::new("/tmp/p"),
            "127.0.0.1:3128".parse().unwrap(),
            (1280, 720),
            false,
        );
        for flag in ["--gaia-url=", "--component-updater=url-source="] {
            let url = a
                .iter()
                .find_map(|f| f.strip_prefix(flag))
                .unwrap_or_else(|| panic!("{flag} missing: {a:?}"));
            let url = url::Url::parse(url).unwrap();
            // Port 1 is on Chromium's unsafe-port list; `.invalid` never resolves.
            assert_eq!(url.port(), Some(1), "{url}");
            assert!(url.host_str().unwrap().ends_with(".invalid"), "{url}");
        }
    }
}
