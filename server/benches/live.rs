//! Live view benchmark: Cordon's `/live/{session}` WebSocket against a raw
//! CDP screencast (chromiumoxide, `Page.startScreencast`, every frame acked
//! at once) on a Chromium of its own, in the same run.
//!
//! `cargo bench -p cordon --bench live` (env: `BENCH_FPS_S` seconds per
//! frame-rate window, default 10; `BENCH_ROUNDS` input rounds, default 30;
//! `BENCH_IDLE_S` idle CPU window, default 5; `BENCH_VIEWERS` viewers at
//! once on separate sessions, default 3, below 2 skips it; `BENCH_SLOW_S`
//! slow-client window, default 20; `BENCH_SLOW_RATE` its bytes per second,
//! default 1000000; `BENCH_DRIVER`, default `auto`; `BENCH_LOAD` viewer
//! counts for the load section, default `1,4,8`; `BENCH_ONLY`: any of
//! `fps,input,multi,slow,load`; `BENCH_WORKERS`, the runtime's worker
//! threads, default 2, 0 for one thread). Prints medians and p95s; BENCHMARKS.md
//! keeps the figures. Everything runs on 127.0.0.1.
//!
//! The load section (issue 25 item 4) runs, for each viewer count N, N raw
//! Chromiums each with a CDP screencast, then N Cordon sessions each with
//! a live viewer, all on `BUSY` (animated every frame, with a square that
//! flips colour on a click): the frame rate every viewer gets over one
//! window, then click → frame on the first viewer while the others go on
//! watching.
//!
//! CPU figures are this process's own (getrusage: user + system): it hosts
//! Cordon *and* the bench's WebSocket client, which only counts bytes while
//! frames are counted. Chromium's processes are not in them.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use app::api::auth::Role;
use axum::response::Html;
use base64::Engine;
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventScreencastFrame, ScreencastFrameAckParams, StopScreencastParams,
};
use cordon::cdp::BrowserConn;
use cordon::config::Settings;
use cordon::startup::Application;
use futures::{SinkExt, StreamExt};
use image::GenericImageView;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

mod common;
use common::{Stats, env_usize, ms, rss_kib};

/// A full-viewport animation: background colour, a moving box and a
/// counter change on every animation frame, over some static text.
const ANIM: &str = r#"<!doctype html><html><head><title>anim</title><style>
html,body{margin:0;height:100%;overflow:hidden;font:16px sans-serif}
#b{position:absolute;width:240px;height:160px;background:#fff;color:#000;font-size:48px}
p{margin:4px 12px}</style></head><body><div id=b></div><script>
for(let i=0;i<30;i++){const p=document.createElement('p');p.textContent=i+' The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.';document.body.appendChild(p)}
let n=0,c=0,k=0,last=performance.now();const b=document.getElementById('b');
function f(now){n++;c++;if(now-last>=1000){document.title='raf '+Math.round(c*1000/(now-last))+' #'+(++k);c=0;last=now}document.body.style.background='hsl('+(n*3%360)+',60%,55%)';
b.style.left=(n*7%1040)+'px';b.style.top=(n*5%560)+'px';b.textContent=n;requestAnimationFrame(f)}
requestAnimationFrame(f)</script></body></html>"#;

/// A still page whose background flips between red and blue on every
/// `mousedown`.
const FLIP: &str = r#"<!doctype html><html><head><title>flip</title><style>
html,body{margin:0;height:100%}</style></head><body style="background:rgb(255,0,0)"><script>
let red=true;addEventListener('mousedown',()=>{red=!red;
document.body.style.background=red?'rgb(255,0,0)':'rgb(0,0,255)'})</script></body></html>"#;

/// The load section's page: a box and a counter moving along the top band
/// on every animation frame (the page's rate in its title, as `ANIM`'s),
/// and a square under the centre that flips red ↔ blue on every
/// `mousedown`.
const BUSY: &str = r#"<!doctype html><html><head><title>busy</title><style>
html,body{margin:0;height:100%;overflow:hidden;background:#eee;font:16px sans-serif}
#b{position:absolute;top:0;width:160px;height:120px;background:#333;color:#fff;font-size:40px}
#c{position:absolute;left:240px;top:200px;right:240px;bottom:60px;background:rgb(255,0,0)}
</style></head><body><div id=b></div><div id=c></div><script>
let n=0,c=0,k=0,last=performance.now(),red=true;
const b=document.getElementById('b'),q=document.getElementById('c');
addEventListener('mousedown',()=>{red=!red;q.style.background=red?'rgb(255,0,0)':'rgb(0,0,255)'});
function f(now){n++;c++;if(now-last>=1000){document.title='raf '+Math.round(c*1000/(now-last))+' #'+(++k);c=0;last=now}
b.style.left=(n*7%1120)+'px';b.textContent=n;requestAnimationFrame(f)}
requestAnimationFrame(f)</script></body></html>"#;

const BLANK: &str = "<!doctype html><html><head><title>blank</title></head><body></body></html>";

const QUALITY: u8 = 70;
const W: u32 = 1280;
const H: u32 = 720;

fn unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

/// A click's latency split at the frame's own timestamp (Chromium's clock
/// is this machine's): click sent → frame made, frame made → received.
#[derive(Default)]
struct Split {
    made: Vec<f64>,
    delivered: Vec<f64>,
}

impl Split {
    fn push(&mut self, sent_ms: f64, frame_ts_ms: f64, received_ms: f64) {
        self.made.push(frame_ts_ms - sent_ms);
        self.delivered.push(received_ms - frame_ts_ms);
    }
    fn show(&self) -> String {
        format!(
            "click → frame made p50 {:.2} ms; frame made → received p50 {:.2} ms",
            median_f(&self.made),
            median_f(&self.delivered)
        )
    }
}

/// This process's CPU time so far (user + system).
fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

/// The machine's 1-minute load average (it is shared).
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split(' ')
        .next()
        .unwrap_or("?")
        .to_owned()
}

/// This process's resident set, KiB.
/// CPU used per wall second (1.0 = one core) between two points.
struct CpuWindow {
    cpu: Duration,
    wall: Instant,
}

impl CpuWindow {
    fn start() -> Self {
        Self {
            cpu: cpu_time(),
            wall: Instant::now(),
        }
    }
    fn share(&self) -> f64 {
        (cpu_time() - self.cpu).as_secs_f64() / self.wall.elapsed().as_secs_f64()
    }
}

async fn page_server() -> std::net::SocketAddr {
    let app = axum::Router::new()
        .route("/anim", axum::routing::get(|| async { Html(ANIM) }))
        .route("/flip", axum::routing::get(|| async { Html(FLIP) }))
        .route("/busy", axum::routing::get(|| async { Html(BUSY) }))
        .route("/blank", axum::routing::get(|| async { Html(BLANK) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// Cordon in-process, an agent key and an operator's dashboard cookie.
struct Cordon {
    http: reqwest::Client,
    addr: std::net::SocketAddr,
    key: String,
    cookie: String,
    state: cordon::state::AppState,
    op: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Cordon {
    async fn start(data: &std::path::Path, page: std::net::SocketAddr) -> Self {
        let env = vec![
            ("CORDON_BIND".to_string(), "127.0.0.1:0".to_string()),
            ("CORDON_DATA_DIR".to_string(), data.display().to_string()),
            ("CORDON_POOL_SIZE".to_string(), "0".to_string()),
            ("CORDON_EGRESS_ALLOW".to_string(), page.to_string()),
            (
                "CORDON_EGRESS_RESOLVER".to_string(),
                "loopback-only".to_string(),
            ),
            ("CORDON_LOG_LEVEL".to_string(), "warn".to_string()),
            ("CORDON_SESSION_IDLE_S".to_string(), "3600".to_string()),
            (
                "CORDON_SANDBOX_DRIVER".to_string(),
                std::env::var("BENCH_DRIVER").unwrap_or_else(|_| "auto".into()),
            ),
        ];
        let app = Application::build(Settings::load_from(None, env).unwrap())
            .await
            .unwrap();
        let addr = app.local_addr();
        let state = app.state();
        let kept = state.clone();
        let tenant: cordon::domain::TenantId = "bench".parse().unwrap();
        let _ = state.store.tenant_create(&tenant, "bench").await;
        let (_, key) = state.store.api_key_create(&tenant, "bench").await.unwrap();
        // An operator and a dashboard session, as a passkey login leaves them.
        let b: [u8; 16] = rand::random();
        let h = hex::encode(b);
        let op = cordon::store::operators::OperatorRow {
            id: cordon::domain::OperatorId::generate(),
            name: "bench".into(),
            role: Role::Operator,
            user_handle: format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            ),
            created_at: cordon::time::now_ms(),
            created_by: "bench".into(),
            disabled_at: None,
            last_login_at: None,
            passkeys: 0,
        };
        state.store.operator_create(&op).await.unwrap();
        let sid = tower_sessions::session::Id::default().to_string();
        let data = json!({ "op": op.id.as_str(), "login_at": cordon::time::now_ms() }).to_string();
        state
            .store
            .dashboard_session_save(
                &cordon::ids::token_hash(&sid),
                Some(&op.id),
                &data,
                cordon::time::now_ms() + 3 * 3_600_000,
            )
            .await
            .unwrap();
        let (stop, task) = common::serve(app);
        Self {
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            addr,
            key,
            cookie: format!("cordon_session={sid}"),
            state: kept,
            op: op.id.to_string(),
            stop,
            task,
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let res = self
            .http
            .post(format!("http://{}{path}", self.addr))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = res.status();
        let v: Value = res.json().await.unwrap();
        assert!(status.is_success(), "{path}: {status} {v}");
        v
    }

    /// A session showing `url`.
    async fn open(&self, url: &str) -> String {
        let sid = self.post("/api/sessions", json!({ "record": "off" })).await["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.post(
            &format!("/api/sessions/{sid}/navigate"),
            json!({ "url": url }),
        )
        .await;
        sid
    }

    async fn close(&self, sid: &str) {
        self.http
            .delete(format!("http://{}/api/sessions/{sid}", self.addr))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap();
    }

    /// `/live/…?ticket=…` from the server function, as the dashboard gets it.
    async fn ticket(&self, sid: &str) -> String {
        let port = self.addr.port();
        let res = self
            .http
            .post(format!("http://{}/ui/fn/live_ticket", self.addr))
            .header("origin", format!("http://localhost:{port}"))
            .header("host", format!("localhost:{port}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", &self.cookie)
            .body(format!("session={sid}"))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let v: Value = res.json().await.unwrap();
        assert!(status.is_success(), "live_ticket: {status} {v}");
        v["path"].as_str().unwrap().to_owned()
    }

    async fn request(
        &self,
        sid: &str,
    ) -> tokio_tungstenite::tungstenite::handshake::client::Request {
        let path = self.ticket(sid).await;
        let mut req = format!("ws://{}{path}", self.addr)
            .into_client_request()
            .unwrap();
        let h = req.headers_mut();
        h.insert(
            "origin",
            format!("http://localhost:{}", self.addr.port())
                .parse()
                .unwrap(),
        );
        h.insert("cookie", self.cookie.parse().unwrap());
        req
    }

    /// A live view of `sid` at full speed.
    async fn view(
        &self,
        sid: &str,
    ) -> WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
        let req = self.request(sid).await;
        tokio_tungstenite::connect_async(req).await.unwrap().0
    }

    /// A live view of `sid` read through a token bucket of `rate` bytes/s,
    /// on a socket with a small receive buffer.
    async fn slow_view(&self, sid: &str, rate: f64) -> WebSocketStream<Throttled> {
        let req = self.request(sid).await;
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(32 * 1024).unwrap();
        let tcp = sock.connect(self.addr).await.unwrap();
        let stream = Throttled {
            inner: tcp,
            rate,
            tokens: 0.0,
            last: tokio::time::Instant::now(),
            sleep: None,
        };
        tokio_tungstenite::client_async(req, stream)
            .await
            .unwrap()
            .0
    }

    /// (frames sent, frames dropped, bytes sent) from `/metrics`.
    async fn live_counters(&self) -> (u64, u64, u64) {
        let text = self
            .http
            .get(format!("http://{}/metrics", self.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let get = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0) as u64
        };
        (
            get("cordon_live_frames_sent_total"),
            get("cordon_live_frames_dropped_total"),
            get("cordon_live_bytes_sent_total"),
        )
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// A TCP stream read at most `rate` bytes per second (token bucket).
struct Throttled {
    inner: tokio::net::TcpStream,
    rate: f64,
    tokens: f64,
    last: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Bytes read at once, and the bucket's depth.
const CHUNK: usize = 16 * 1024;

impl AsyncRead for Throttled {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(s) = this.sleep.as_mut() {
                ready!(s.as_mut().poll(cx));
                this.sleep = None;
            }
            let now = tokio::time::Instant::now();
            this.tokens =
                (this.tokens + (now - this.last).as_secs_f64() * this.rate).min(CHUNK as f64);
            this.last = now;
            if this.tokens < 1024.0 {
                let wait = (CHUNK as f64 - this.tokens) / this.rate;
                this.sleep = Some(Box::pin(tokio::time::sleep(Duration::from_secs_f64(wait))));
                continue;
            }
            let allow = (this.tokens as usize).min(buf.remaining()).min(CHUNK);
            let mut tmp = [0u8; CHUNK];
            let mut rb = ReadBuf::new(&mut tmp[..allow]);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            buf.put_slice(&tmp[..n]);
            this.tokens -= n as f64;
            return Poll::Ready(Ok(()));
        }
    }
}

impl AsyncWrite for Throttled {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Waits for the first frame (the view is up and streaming).
async fn first_frame<S>(ws: &mut WebSocketStream<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Binary(_)))) => return,
            Ok(Some(Ok(_))) => {}
            other => panic!("no first frame: {other:?}"),
        }
    }
}

/// Counts binary messages (frames) and their bytes for `window`; the
/// page's own animation rates (its title, `raf N`, once a second) are
/// collected from the page messages.
async fn count_frames<S>(ws: &mut WebSocketStream<S>, window: Duration) -> (u64, u64, Vec<f64>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let end = tokio::time::Instant::now() + window;
    let (mut frames, mut bytes, mut raf) = (0u64, 0u64, Vec::new());
    while let Ok(msg) = tokio::time::timeout_at(end, ws.next()).await {
        match msg {
            Some(Ok(Message::Binary(b))) => {
                frames += 1;
                bytes += b.len() as u64;
            }
            Some(Ok(Message::Text(t))) if t.as_str().starts_with("{\"type\":\"page\"") => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if let Some(r) = v["title"]
                    .as_str()
                    .and_then(|t| t.strip_prefix("raf "))
                    .and_then(|r| r.split(' ').next()?.parse().ok())
                {
                    raf.push(r);
                }
            }
            Some(Ok(_)) => {}
            other => panic!("the view ended: {other:?}"),
        }
    }
    (frames, bytes, raf)
}

fn median_f(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Whether the JPEG's centre pixel is red (`Some(true)`), blue
/// (`Some(false)`) or neither.
fn centre_is_red(jpeg: &[u8]) -> Option<bool> {
    let img = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg).ok()?;
    let [r, _, b, _] = img.get_pixel(img.width() / 2, img.height() / 2).0;
    match (r > 160 && b < 96, b > 160 && r < 96) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// Raw: a Chromium of our own with the same flags (no proxy, no sandbox
/// driver), its tab at 1280×720 like Cordon's sessions.
async fn raw_browser(dir: &std::path::Path) -> (BrowserConn, Page, std::process::Child) {
    let (conn, child) = common::raw_chromium(&dir.join("raw"), W, H).await;
    let page = conn.first_page().await.unwrap();
    page.execute(SetDeviceMetricsOverrideParams::new(
        i64::from(W),
        i64::from(H),
        1.0,
        false,
    ))
    .await
    .unwrap();
    (conn, page, child)
}

async fn raw_goto(page: &Page, url: &str) {
    cordon::cdp::navigate(
        page,
        url,
        cordon::cdp::WaitUntil::Load,
        Duration::from_secs(20),
    )
    .await
    .unwrap();
}

/// A raw screencast: every frame acked as it arrives, then handed on with
/// the instant it arrived.
struct RawCast {
    rx: tokio::sync::mpsc::UnboundedReceiver<(Instant, Arc<EventScreencastFrame>)>,
    task: tokio::task::JoinHandle<()>,
    page: Page,
}

impl RawCast {
    async fn start(page: &Page) -> Self {
        let mut frames = page.event_listener::<EventScreencastFrame>().await.unwrap();
        page.execute(
            cordon::live::Encoding {
                quality: QUALITY,
                max_width: 1920,
                max_height: 1080,
            }
            .params(),
        )
        .await
        .unwrap();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let p = page.clone();
        let task = tokio::spawn(async move {
            while let Some(ev) = frames.next().await {
                let at = Instant::now();
                let _ = p
                    .execute(ScreencastFrameAckParams::new(ev.session_id))
                    .await;
                if tx.send((at, ev)).is_err() {
                    break;
                }
            }
        });
        Self {
            rx,
            task,
            page: page.clone(),
        }
    }

    async fn stop(self) {
        self.task.abort();
        let _ = self.page.execute(StopScreencastParams::default()).await;
    }
}

fn b64(ev: &EventScreencastFrame) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(ev.data.as_ref() as &str)
        .unwrap()
}

/// Frame rate, bytes and this process's CPU share over one window.
struct Fps {
    frames: u64,
    bytes: u64,
    secs: f64,
    cpu: f64,
    /// The page's own requestAnimationFrame rate meanwhile.
    raf: f64,
}

impl Fps {
    fn fps(&self) -> f64 {
        self.frames as f64 / self.secs
    }
    fn mb_s(&self) -> f64 {
        self.bytes as f64 / self.secs / 1e6
    }
    fn kb_frame(&self) -> f64 {
        self.bytes as f64 / self.frames.max(1) as f64 / 1e3
    }
}

async fn raw_fps(page: &Page, page_base: &str, window: Duration) -> Fps {
    raw_goto(page, &format!("{page_base}/anim")).await;
    let mut cast = RawCast::start(page).await;
    // Warm up: a second of frames.
    let warm = Instant::now() + Duration::from_secs(1);
    while Instant::now() < warm {
        let _ = tokio::time::timeout(Duration::from_millis(100), cast.rx.recv()).await;
    }
    while cast.rx.try_recv().is_ok() {}
    let n0 = cordon::cdp::evaluate(page, "n")
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    let t0 = Instant::now();
    let cpu = CpuWindow::start();
    let end = tokio::time::Instant::now() + window;
    let (mut frames, mut bytes) = (0u64, 0u64);
    while let Ok(Some((_, ev))) = tokio::time::timeout_at(end, cast.rx.recv()).await {
        frames += 1;
        bytes += b64(&ev).len() as u64;
    }
    let cpu = cpu.share();
    let n1 = cordon::cdp::evaluate(page, "n")
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    let out = Fps {
        frames,
        bytes,
        secs: window.as_secs_f64(),
        cpu,
        raf: (n1 - n0) / t0.elapsed().as_secs_f64(),
    };
    cast.stop().await;
    raw_goto(page, &format!("{page_base}/blank")).await;
    out
}

/// A left click at the centre, pressed and released, straight over CDP.
async fn raw_click(page: &Page) {
    for kind in [
        DispatchMouseEventType::MousePressed,
        DispatchMouseEventType::MouseReleased,
    ] {
        let pressed = i64::from(kind == DispatchMouseEventType::MousePressed);
        let ev = DispatchMouseEventParams::builder()
            .r#type(kind)
            .x(f64::from(W) / 2.0)
            .y(f64::from(H) / 2.0)
            .button(MouseButton::Left)
            .buttons(pressed)
            .click_count(1)
            .build()
            .unwrap();
        page.execute(ev).await.unwrap();
    }
}

async fn raw_input(page: &Page, page_base: &str, rounds: usize) -> (Stats, usize, Split) {
    raw_goto(page, &format!("{page_base}/flip")).await;
    let mut cast = RawCast::start(page).await;
    let mut red = true;
    let mut out = Vec::new();
    let mut split = Split::default();
    let mut missed = 0;
    // The first frame: red.
    loop {
        let (_, ev) = cast.rx.recv().await.unwrap();
        if centre_is_red(&b64(&ev)) == Some(true) {
            break;
        }
    }
    for _ in 0..rounds {
        // Quiet: nothing more comes for 300 ms.
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(300), cast.rx.recv()).await
        {}
        let want = !red;
        let t = Instant::now();
        let sent_ms = unix_ms();
        raw_click(page).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            match tokio::time::timeout_at(deadline, cast.rx.recv()).await {
                Ok(Some((at, ev))) => {
                    if centre_is_red(&b64(&ev)) == Some(want) {
                        out.push(at - t);
                        let received_ms = sent_ms + ms(at - t);
                        if let Some(ts) = &ev.metadata.timestamp {
                            split.push(sent_ms, *ts.inner() * 1000.0, received_ms);
                        }
                        break;
                    }
                }
                _ => {
                    missed += 1;
                    break;
                }
            }
        }
        red = want;
    }
    cast.stop().await;
    raw_goto(page, &format!("{page_base}/blank")).await;
    (Stats(out), missed, split)
}

/// CPU share of this process over `window` with nothing watched.
async fn idle_cpu(window: Duration) -> f64 {
    let cpu = CpuWindow::start();
    tokio::time::sleep(window).await;
    cpu.share()
}

async fn cordon_fps(
    cordon: &Cordon,
    page_base: &str,
    window: Duration,
    idle: Duration,
) -> (Fps, f64) {
    let sid = cordon.open(&format!("{page_base}/anim")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_share = idle_cpu(idle).await;
    let mut ws = cordon.view(&sid).await;
    first_frame(&mut ws).await;
    let _ = count_frames(&mut ws, Duration::from_secs(1)).await;
    let cpu = CpuWindow::start();
    let (frames, bytes, raf) = count_frames(&mut ws, window).await;
    let out = Fps {
        frames,
        bytes,
        secs: window.as_secs_f64(),
        cpu: cpu.share(),
        raf: median_f(&raf),
    };
    drop(ws);
    cordon.close(&sid).await;
    (out, idle_share)
}

/// `n` viewers at once, each of its own session on the animated page.
async fn cordon_multi(
    cordon: &Cordon,
    page_base: &str,
    n: usize,
    window: Duration,
    idle: Duration,
) -> (Vec<Fps>, f64, f64) {
    let mut sids = Vec::new();
    for _ in 0..n {
        sids.push(cordon.open(&format!("{page_base}/anim")).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_share = idle_cpu(idle).await;
    let mut views = Vec::new();
    for sid in &sids {
        let mut ws = cordon.view(sid).await;
        first_frame(&mut ws).await;
        views.push(ws);
    }
    let cpu = CpuWindow::start();
    let tasks: Vec<_> = views
        .into_iter()
        .map(|mut ws| {
            tokio::spawn(async move {
                let r = count_frames(&mut ws, window).await;
                drop(ws);
                r
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        let (frames, bytes, raf) = t.await.unwrap();
        out.push(Fps {
            frames,
            bytes,
            secs: window.as_secs_f64(),
            cpu: 0.0,
            raf: median_f(&raf),
        });
    }
    let share = cpu.share();
    for sid in &sids {
        cordon.close(sid).await;
    }
    (out, share, idle_share)
}

/// How a click round starts.
enum Pause {
    /// Once nothing has come for this many ms (a still page).
    Quiet(u64),
    /// After this many ms, whatever came meanwhile drained (an animated
    /// page never goes quiet).
    Fixed(u64),
}

/// `rounds` clicks at the centre through the live view `ws` (its viewer in
/// control; the page's centre red at first, flipping on every press), each
/// timed to the first frame made after it (by the frame's own time, which
/// its text message gives before it) whose centre has the new colour:
/// click → frame, rounds missed, and the split at the frame's time.
async fn live_clicks<S>(
    ws: &mut WebSocketStream<S>,
    rounds: usize,
    pause: Pause,
) -> (Stats, usize, Split)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let click = json!({ "type": "mouse", "action": "click", "x": f64::from(W) / 2.0,
                        "y": f64::from(H) / 2.0, "button": "left" })
    .to_string();
    let (mut red, mut out, mut split, mut missed) = (true, Vec::new(), Split::default(), 0);
    for _ in 0..rounds {
        let until = tokio::time::Instant::now()
            + Duration::from_millis(match pause {
                Pause::Fixed(ms) => ms,
                Pause::Quiet(_) => 0,
            });
        loop {
            let next = match pause {
                Pause::Quiet(ms) => {
                    tokio::time::timeout(Duration::from_millis(ms), ws.next()).await
                }
                Pause::Fixed(_) => tokio::time::timeout_at(until, ws.next()).await,
            };
            match next {
                Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("\"error\"") => {
                    panic!("live view error: {t}")
                }
                Ok(Some(Ok(_))) => {}
                _ => break,
            }
        }
        let want = !red;
        let t = Instant::now();
        let sent_ms = unix_ms();
        ws.send(Message::Text(click.clone().into())).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        // Only frames made after the click are decoded (a JPEG decode per
        // frame of an animation would load the bench).
        let mut made = 0.0;
        loop {
            match tokio::time::timeout_at(deadline, ws.next()).await {
                Ok(Some(Ok(Message::Binary(b)))) => {
                    // Arrived now; the decode below is the bench's, not
                    // the view's.
                    let took = t.elapsed();
                    if made >= sent_ms && centre_is_red(&b) == Some(want) {
                        out.push(took);
                        split.push(sent_ms, made, sent_ms + ms(took));
                        break;
                    }
                }
                Ok(Some(Ok(Message::Text(t)))) if t.as_str().contains("\"error\"") => {
                    panic!("live view error: {t}")
                }
                Ok(Some(Ok(Message::Text(t)))) if t.as_str().starts_with("{\"type\":\"frame\"") => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    made = v["ts"].as_f64().unwrap_or_default();
                }
                Ok(Some(Ok(_))) => {}
                _ => {
                    missed += 1;
                    break;
                }
            }
        }
        red = want;
    }
    (Stats(out), missed, split)
}

/// Cordon's click rounds: (click → frame, missed, split, audit append
/// alone, run_tool(down) + run_tool(up) called in-process).
async fn cordon_input(
    cordon: &Cordon,
    page_base: &str,
    rounds: usize,
) -> (Stats, usize, Split, Stats, Stats) {
    let sid = cordon.open(&format!("{page_base}/flip")).await;
    let mut ws = cordon.view(&sid).await;
    ws.send(Message::Text(
        json!({ "type": "take_control" }).to_string().into(),
    ))
    .await
    .unwrap();
    // In control, and a red first frame.
    let (mut control, mut red_seen) = (false, false);
    while !(control && red_seen) {
        match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) => {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                if v["type"] == "control" && v["yours"] == true {
                    control = true;
                }
            }
            Ok(Some(Ok(Message::Binary(b)))) => {
                red_seen |= centre_is_red(&b) == Some(true);
            }
            Ok(Some(Ok(_))) => {}
            other => panic!("no control or first frame: {other:?}"),
        }
    }
    let (clicks, missed, split) = live_clicks(&mut ws, rounds, Pause::Quiet(300)).await;
    // The pipeline's parts, in-process: one audit append, and the click's
    // two tool calls as the socket's worker runs them.
    let state = &cordon.state;
    let live = state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .unwrap();
    let actor = cordon::audit::Actor::Operator(cordon.op.clone());
    let (mut audit, mut tools) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        state
            .store
            .audit_append(cordon::audit::NewEvent::new(actor.clone(), "bench.probe").outcome("ok"))
            .await
            .unwrap();
        audit.push(t.elapsed());
        let t = Instant::now();
        for (kind, buttons) in [
            (cordon::cdp::MouseKind::Down, 1),
            (cordon::cdp::MouseKind::Up, 0),
        ] {
            let call = cordon::sessions::ToolCall::new(cordon::sessions::Tool::Input(
                cordon::sessions::LiveInput::Mouse {
                    kind,
                    x: f64::from(W) / 2.0,
                    y: f64::from(H) / 2.0,
                    button: cordon::cdp::Button::Left,
                    buttons,
                    click_count: 1,
                    modifiers: 0,
                },
            ));
            state
                .sessions
                .run_tool(&live, actor.clone(), cordon::audit::Surface::Live, call)
                .await
                .unwrap();
        }
        tools.push(t.elapsed());
    }
    drop(ws);
    cordon.close(&sid).await;
    (clicks, missed, split, Stats(audit), Stats(tools))
}

async fn cordon_slow(cordon: &Cordon, page_base: &str, window: Duration, rate: f64) {
    let sid = cordon.open(&format!("{page_base}/anim")).await;
    let mut ws = cordon.slow_view(&sid, rate).await;
    first_frame(&mut ws).await;
    let before = cordon.live_counters().await;
    let mut rss = vec![rss_kib()];
    let t = Instant::now();
    let end = tokio::time::Instant::now() + window;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let (mut frames, mut bytes) = (0u64, 0u64);
    // How old each frame is when it arrives (its Chromium timestamp).
    let (mut last_ts, mut age) = (0.0, Vec::new());
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(end) => break,
            _ = tick.tick() => rss.push(rss_kib()),
            msg = ws.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    frames += 1;
                    bytes += b.len() as u64;
                    age.push(unix_ms() - last_ts);
                }
                Some(Ok(Message::Text(t))) if t.as_str().starts_with("{\"type\":\"frame\"") => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    last_ts = v["ts"].as_f64().unwrap_or_default();
                }
                Some(Ok(_)) => {}
                other => panic!("the slow view ended: {other:?}"),
            },
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let after = cordon.live_counters().await;
    rss.push(rss_kib());
    let (sent, dropped, sent_bytes) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    println!(
        "slow client ({:.1} MB/s, {:.0} s): delivered {:.1} fps, {:.2} MB/s read; server sent {sent} frames ({:.2} MB), dropped {dropped} ({:.0}% of {} made)",
        rate / 1e6,
        secs,
        frames as f64 / secs,
        bytes as f64 / secs / 1e6,
        sent_bytes as f64 / 1e6,
        100.0 * dropped as f64 / (sent + dropped).max(1) as f64,
        sent + dropped
    );
    let late = &age[age.len() / 2..];
    println!(
        "  frame age on arrival (now − its Chromium timestamp): p50 {:.0} ms, max {:.0} ms; second half of the window p50 {:.0} ms",
        median_f(&age),
        age.iter().copied().fold(0.0, f64::max),
        median_f(late)
    );
    let max = rss.iter().max().unwrap();
    println!(
        "  bench RSS first {} MiB, last {} MiB, max {} MiB (every second: {:?} MiB); dropped grew: {}",
        rss[0] / 1024,
        rss.last().unwrap() / 1024,
        max / 1024,
        rss.iter().map(|k| k / 1024).collect::<Vec<_>>(),
        dropped > 0
    );
    drop(ws);
    cordon.close(&sid).await;
}

/// One side's figures for N viewers at once.
struct Load {
    /// Frames per second each viewer got over the window.
    fps: Vec<f64>,
    /// Each page's own animation rate meanwhile.
    raf: Vec<f64>,
    /// Click → frame with the new colour, on the first viewer.
    click: Stats,
    missed: usize,
}

impl Load {
    fn show(&self) -> String {
        let fps: Vec<f64> = self.fps.clone();
        let min = fps.iter().copied().fold(f64::INFINITY, f64::min);
        format!(
            "fps median {:.1} (min {:.1}), page rAF median {:.1}; click → frame {} missed {}",
            median_f(&fps),
            min,
            median_f(&self.raf),
            self.click.show(),
            self.missed
        )
    }
}

/// Set while the first viewer clicks; the others watch until it clears.
type Watching = Arc<std::sync::atomic::AtomicBool>;

/// Raw: `n` Chromiums of our own on `BUSY`, each with a screencast.
async fn raw_load(
    dir: &std::path::Path,
    page_base: &str,
    n: usize,
    window: Duration,
    rounds: usize,
) -> Load {
    let mut views = Vec::new();
    for i in 0..n {
        let (conn, page, child) = raw_browser(&dir.join(format!("load-{n}-{i}"))).await;
        raw_goto(&page, &format!("{page_base}/busy")).await;
        let cast = RawCast::start(&page).await;
        views.push((conn, page, child, cast));
    }
    // Warm up: a second of frames on every view.
    futures::future::join_all(views.iter_mut().map(|(_, _, _, cast)| async move {
        let warm = tokio::time::Instant::now() + Duration::from_secs(1);
        while tokio::time::timeout_at(warm, cast.rx.recv()).await.is_ok() {}
    }))
    .await;
    let counted =
        futures::future::join_all(views.iter_mut().map(|(_, page, _, cast)| async move {
            let n0 = cordon::cdp::evaluate(page, "n")
                .await
                .unwrap()
                .as_f64()
                .unwrap();
            let t0 = Instant::now();
            let end = tokio::time::Instant::now() + window;
            let mut frames = 0u64;
            while let Ok(Some(_)) = tokio::time::timeout_at(end, cast.rx.recv()).await {
                frames += 1;
            }
            let n1 = cordon::cdp::evaluate(page, "n")
                .await
                .unwrap()
                .as_f64()
                .unwrap();
            (
                frames as f64 / window.as_secs_f64(),
                (n1 - n0) / t0.elapsed().as_secs_f64(),
            )
        }))
        .await;
    let watching: Watching = Arc::new(true.into());
    let (first, rest) = views.split_first_mut().unwrap();
    let clicks = async {
        let (_, page, _, cast) = first;
        let (mut red, mut out, mut missed) = (true, Vec::new(), 0);
        for _ in 0..rounds {
            // A pause, the frames meanwhile only drained.
            let until = tokio::time::Instant::now() + Duration::from_millis(150);
            while tokio::time::timeout_at(until, cast.rx.recv()).await.is_ok() {}
            let want = !red;
            let t = Instant::now();
            let sent_ms = unix_ms();
            raw_click(page).await;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            loop {
                match tokio::time::timeout_at(deadline, cast.rx.recv()).await {
                    // Only frames made after the click are decoded (a JPEG
                    // decode per frame of an animation would load the bench).
                    Ok(Some((at, ev)))
                        if at >= t
                            && ev
                                .metadata
                                .timestamp
                                .as_ref()
                                .is_none_or(|ts| *ts.inner() * 1000.0 >= sent_ms) =>
                    {
                        if centre_is_red(&b64(&ev)) == Some(want) {
                            out.push(at - t);
                            break;
                        }
                    }
                    Ok(Some(_)) => {}
                    _ => {
                        missed += 1;
                        break;
                    }
                }
            }
            red = want;
        }
        watching.store(false, std::sync::atomic::Ordering::SeqCst);
        (Stats(out), missed)
    };
    let watch = futures::future::join_all(rest.iter_mut().map(|(_, _, _, cast)| {
        let watching = watching.clone();
        async move {
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(100), cast.rx.recv()).await;
            }
        }
    }));
    let ((click, missed), _) = tokio::join!(clicks, watch);
    for (conn, page, child, cast) in views {
        cast.stop().await;
        drop(page);
        drop(conn);
        let mut child = child;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }
    Load {
        fps: counted.iter().map(|c| c.0).collect(),
        raf: counted.iter().map(|c| c.1).collect(),
        click,
        missed,
    }
}

/// Cordon: `n` sessions on `BUSY`, each with a live viewer; the first
/// viewer takes control and clicks.
async fn cordon_load(
    cordon: &Cordon,
    page_base: &str,
    n: usize,
    window: Duration,
    rounds: usize,
) -> Load {
    let mut sids = Vec::new();
    let mut views = Vec::new();
    for _ in 0..n {
        let sid = cordon.open(&format!("{page_base}/busy")).await;
        let mut ws = cordon.view(&sid).await;
        first_frame(&mut ws).await;
        sids.push(sid);
        views.push(ws);
    }
    futures::future::join_all(views.iter_mut().map(|ws| async move {
        let _ = count_frames(ws, Duration::from_secs(1)).await;
    }))
    .await;
    let counted = futures::future::join_all(
        views
            .iter_mut()
            .map(|ws| async move { count_frames(ws, window).await }),
    )
    .await;
    let watching: Watching = Arc::new(true.into());
    let (first, rest) = views.split_first_mut().unwrap();
    let clicks = async {
        let ws = first;
        ws.send(Message::Text(
            json!({ "type": "take_control" }).to_string().into(),
        ))
        .await
        .unwrap();
        loop {
            match tokio::time::timeout(Duration::from_secs(20), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    if v["type"] == "control" && v["yours"] == true {
                        break;
                    }
                }
                Ok(Some(Ok(_))) => {}
                other => panic!("no control: {other:?}"),
            }
        }
        let (click, missed, _) = live_clicks(ws, rounds, Pause::Fixed(150)).await;
        watching.store(false, std::sync::atomic::Ordering::SeqCst);
        (click, missed)
    };
    let watch = futures::future::join_all(rest.iter_mut().map(|ws| {
        let watching = watching.clone();
        async move {
            while watching.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(100), ws.next()).await;
            }
        }
    }));
    let ((click, missed), _) = tokio::join!(clicks, watch);
    drop(views);
    for sid in &sids {
        cordon.close(sid).await;
    }
    Load {
        fps: counted
            .iter()
            .map(|(frames, _, _)| *frames as f64 / window.as_secs_f64())
            .collect(),
        raf: counted.iter().map(|(_, _, raf)| median_f(raf)).collect(),
        click,
        missed,
    }
}

fn main() {
    common::runtime().block_on(bench());
}

async fn bench() {
    cordon::telemetry::init_tracing(cordon::config::LogFormat::Text, "warn");
    let window = Duration::from_secs(env_usize("BENCH_FPS_S", 10) as u64);
    let rounds = env_usize("BENCH_ROUNDS", 30);
    let idle = Duration::from_secs(env_usize("BENCH_IDLE_S", 5) as u64);
    let viewers = env_usize("BENCH_VIEWERS", 3);
    let slow_s = Duration::from_secs(env_usize("BENCH_SLOW_S", 20) as u64);
    let slow_rate = env_usize("BENCH_SLOW_RATE", 1_000_000) as f64;
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|s| s.trim() == name);
    let loads = common::env_counts("BENCH_LOAD", "1,4,8");
    let page_addr = page_server().await;
    let base = format!("http://{page_addr}");
    let tmp = tempfile::tempdir().unwrap();
    println!(
        "cordon live view benchmark: {W}×{H}, JPEG q{QUALITY}, {} s windows, {rounds} input rounds, {} cores",
        window.as_secs(),
        std::thread::available_parallelism().unwrap()
    );

    println!("load average at the start: {}", load());

    // --- raw CDP ---------------------------------------------------------
    let (conn, page, child) = raw_browser(tmp.path()).await;
    let raw = if run("fps") {
        Some(raw_fps(&page, &base, window).await)
    } else {
        None
    };
    let raw_in = if run("input") {
        Some(raw_input(&page, &base, rounds).await)
    } else {
        None
    };
    drop(page);
    drop(conn);
    {
        let mut child = child;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }

    println!("load average after the raw side: {}", load());

    // --- Cordon ------------------------------------------------------------
    let cordon = Cordon::start(&tmp.path().join("cordon"), page_addr).await;
    println!();
    println!("figure                         cordon (WebSocket)        raw CDP screencast");
    if let Some(raw) = raw {
        let (c, idle_share) = cordon_fps(&cordon, &base, window, idle).await;
        println!(
            "fps, animated page             {:>8.1}                  {:>8.1}        (target ≥ 55)",
            c.fps(),
            raw.fps()
        );
        println!(
            "page's own rAF rate meanwhile  {:>8.1}                  {:>8.1}",
            c.raf, raw.raf
        );
        println!(
            "MB/s                           {:>8.2}                  {:>8.2}",
            c.mb_s(),
            raw.mb_s()
        );
        println!(
            "mean frame size, KB            {:>8.1}                  {:>8.1}",
            c.kb_frame(),
            raw.kb_frame()
        );
        println!(
            "bench process CPU, % of a core {:>8.1} (idle {:>4.1})      {:>8.1}",
            100.0 * c.cpu,
            100.0 * idle_share,
            100.0 * raw.cpu
        );
        println!(
            "  → per viewer: {:.1}% of a core (viewing minus idle; includes the bench's client, which only counts bytes)",
            100.0 * (c.cpu - idle_share)
        );
    }
    if let Some((raw_s, raw_missed, raw_split)) = raw_in {
        let (c, missed, split, audit, tools) = cordon_input(&cordon, &base, rounds).await;
        println!(
            "click → frame with new colour  cordon {}  missed {missed}",
            c.show()
        );
        println!(
            "                               raw    {}  missed {raw_missed}   (target p50 ≤ 30, p95 ≤ 50 ms)",
            raw_s.show()
        );
        println!(
            "  cordon − raw: p50 +{:.2} ms, p95 +{:.2} ms",
            ms(c.median()) - ms(raw_s.median()),
            ms(c.pct(0.95)) - ms(raw_s.pct(0.95))
        );
        println!("  cordon: {}", split.show());
        println!("  raw:    {}", raw_split.show());
        println!("  in-process: one audit append {}", audit.show());
        println!(
            "              run_tool(down) + run_tool(up) {}",
            tools.show()
        );
    }
    if viewers >= 2 && run("multi") {
        let (views, share, idle_share) = cordon_multi(&cordon, &base, viewers, window, idle).await;
        let fps: Vec<String> = views
            .iter()
            .map(|v| format!("{:.1} (page rAF {:.0})", v.fps(), v.raf))
            .collect();
        println!(
            "{viewers} viewers on {viewers} sessions: fps {} ; CPU {:.1}% (idle {:.1}%) → {:.1}% of a core per viewer",
            fps.join(" / "),
            100.0 * share,
            100.0 * idle_share,
            100.0 * (share - idle_share) / viewers as f64
        );
    }
    if run("slow") {
        cordon_slow(&cordon, &base, slow_s, slow_rate).await;
    }
    if run("load") {
        // Raw first, then Cordon, for each count: the two sides of one
        // count are a minute apart at most.
        for &n in &loads {
            let raw = raw_load(tmp.path(), &base, n, window, rounds).await;
            let c = cordon_load(&cordon, &base, n, window, rounds).await;
            println!(
                "load, {n} viewer(s) on {n} session(s) at once (load average {}):",
                load()
            );
            println!("  cordon  {}", c.show());
            println!("  raw     {}", raw.show());
            println!(
                "  cordon / raw: fps {:.2}, click → frame p50 {:.2}",
                median_f(&c.fps) / median_f(&raw.fps),
                ms(c.click.median()) / ms(raw.click.median())
            );
        }
    }
    println!("load average at the end: {}", load());
    cordon.stop().await;
}
