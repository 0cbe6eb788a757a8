//! Building the application and running it until a shutdown signal.

use crate::fix::WithFix;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use app::api::DashboardHandle;
use app::{App, shell};
use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{any, get, post};
use axum::serve::ListenerExt;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, file_and_error_handler, generate_route_list};
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use crate::api;
use crate::auth::middleware::SessionSettings;
use crate::auth::{self, Auth, FirstStart, Invitation};
use crate::config::EgressResolver;
use crate::config::Settings;
use crate::crypto::{KeySource, Keyring};
use crate::dashboard::{self, LastVerification};
use crate::edge::{self, Origins};
use crate::egress::{AddressPolicy, EgressGuard, Limits, StaticResolver};
use crate::error::{ApiError, ErrorCause};
use crate::housekeeping::{self, Housekeeping};
use crate::sessions::SessionManager;
use crate::state::{AppState, Inner};
use crate::store::Store;
use crate::telemetry;
use crate::tls;
use crate::vault::Vault;

/// The largest request body any route accepts (the edge's limit; named
/// here too, as before).
pub use crate::edge::MAX_BODY_BYTES;

/// A bound, ready-to-serve Cordon.
pub struct Application {
    listener: TcpListener,
    /// Built-in HTTPS (`tls_cert`, `tls_key`); plain HTTP when `None`.
    tls: Option<Arc<rustls::ServerConfig>>,
    router: Router,
    state: AppState,
    enrollment: FirstStart,
    dashboard_url: url::Url,
    /// Ends the MCP endpoint's sessions and streams at shutdown.
    mcp_shutdown: tokio_util::sync::CancellationToken,
}

impl Application {
    /// Prepares the data dir, opens and migrates the database, builds the
    /// router and binds the listener (port 0 picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        // Who may listen where was settled when the settings loaded: a
        // non-loopback bind has TLS (built in or from a trusted proxy) and
        // an https public_url. The certificate is checked now, before
        // anything binds or starts.
        let tls = match (&settings.server.tls_cert, &settings.server.tls_key) {
            (Some(cert), Some(key)) => Some(tls::server_config(cert, key)?),
            _ => None,
        };
        prepare_data_dir(&settings.server.data_dir)?;
        if let Some(shared) = &settings.cluster.shared_dir {
            prepare_shared_dir(shared)?;
        }
        // Bound before anything starts browsers: a port in use must not
        // leave the warm pool's browsers behind.
        let listener = TcpListener::bind(settings.server.bind)
            .await
            .with_context(|| format!("bind: cannot listen on {}", settings.server.bind))
            .fix(format!(
                "another process holds the port (`ss -ltnp 'sport = :{}'` names it, an earlier \
                 Cordon?): stop it, or set bind (CORDON_BIND) to another address; port 0 takes any \
                 free one",
                settings.server.bind.port()
            ))?;
        let bound = listener
            .local_addr()
            .context("bind: the listener has no address")?;
        let store = Store::connect(&settings.database_url()).await?;
        // The vault's key is checked at start: a key file readable by others
        // or a key that did not seal the stored credentials stops startup.
        let keyring = Keyring::load(&settings.key_settings()).map_err(key_fix)?;
        // Joining the replicas on this database (one, on SQLite) checks the
        // name, schema and key against the running ones, then migrates.
        let cluster = crate::cluster::Cluster::join(
            &settings.cluster_settings(bound),
            &store,
            keyring.key().id().as_str(),
        )
        .await?;
        if let KeySource::File(path) = keyring.source()
            && lies_inside(path, &settings.server.data_dir)
        {
            tracing::warn!(
                key_file = %path.display(),
                data_dir = %settings.server.data_dir.display(),
                "the master key file is inside the data dir, so a backup or copy of the data dir \
                 can decrypt the vault: keep the key elsewhere (master_key_file setting)"
            );
        }
        for (name, meant) in crate::config::misspelled_env(std::env::vars()) {
            tracing::warn!(
                variable = %name,
                meant = %meant,
                "{name} is not a setting and is ignored: did you mean {meant}?"
            );
        }
        let vault = Vault::new(store.clone(), keyring.key().clone());
        vault.check_keys().await?;
        let dashboard_url = settings.dashboard_url(bound.port());
        let decoy_key = keyring.key().derive("cordon dashboard login decoys v1");
        let auth = Auth::new(store.clone(), &dashboard_url, Some(&decoy_key))?;
        // With no admin able to log in, a one-time link enrolls one (once
        // the store and the key are known good); `serve` prints it before
        // it listens. A restart while one is still outstanding makes none.
        let enrollment = auth
            .first_start_link()
            .await
            .context("cannot prepare the first enrollment link")?;
        match &enrollment {
            FirstStart::AdminExists => {}
            // The link itself (a token) goes to standard output only.
            FirstStart::Link(inv) => tracing::warn!(
                operator = %inv.operator.name,
                "no admin can log in yet: open the one-time link printed on standard output \
                 within an hour to enroll a passkey"
            ),
            FirstStart::Outstanding {
                operator,
                expires_at,
            } => tracing::warn!(
                operator = %operator.name,
                expires_at = %crate::time::rfc3339_ms(*expires_at),
                "no admin can log in yet: the enrollment link printed at an earlier start (or by \
                 another replica) is still valid; `cordon operator enroll-link` prints a fresh \
                 one (and retires it)"
            ),
        }
        let policy = AddressPolicy::with_entries(&settings.egress.egress_allow);
        let egress = match settings.egress.egress_resolver {
            EgressResolver::System => EgressGuard::new(policy, store.clone()),
            EgressResolver::LoopbackOnly => {
                let loopback = [
                    IpAddr::from([127, 0, 0, 1]),
                    IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                ];
                let resolver = StaticResolver::new().with("localhost", loopback);
                EgressGuard::with_resolver(
                    policy,
                    store.clone(),
                    Arc::new(resolver),
                    Limits::default(),
                )
            }
        }
        .bind_on(settings.egress_bind_host());
        let sessions = SessionManager::start(
            &settings.engine_settings(),
            store.clone(),
            egress.clone(),
            vault.clone(),
        )
        .await?;
        cluster.start(sessions.clone());
        let tasks =
            crate::tasks::Tasks::start(&settings.task_settings(), store.clone(), sessions.clone())
                .await?;
        let assets = dashboard::assets::Assets::new(&settings.server.site_root);
        let leptos = LeptosOptions::builder()
            .output_name("cordon")
            .site_root(settings.server.site_root.display().to_string())
            .site_pkg_dir(assets.pkg_dir())
            .site_addr(settings.server.bind)
            .build();
        let days = |d: u64| std::time::Duration::from_secs(d * 24 * 3600);
        let housekeeping = Housekeeping::start(housekeeping::Parts {
            sessions: sessions.clone(),
            store: store.clone(),
            recording_retention: days(settings.recording.recording_retention_days),
            egress_log_retention: days(settings.egress.egress_log_retention_days),
            leader: cluster.leadership(),
            shared_files: settings.cluster.shared_dir.is_some(),
        });
        let state = AppState::new(Inner {
            settings,
            store,
            leptos,
            assets,
            metrics: telemetry::metrics_handle(),
            egress,
            sessions,
            cluster,
            vault,
            housekeeping,
            auth,
            last_verification: LastVerification::default(),
            live: crate::live::Live::default(),
            tasks,
        });
        let origins = Origins::new(bound, tls.is_some(), Some(&dashboard_url));
        let sessions = SessionSettings {
            secure: dashboard_url.scheme() == "https",
            idle_minutes: state.settings.auth.dashboard_idle_minutes,
            absolute_hours: state.settings.auth.dashboard_session_hours,
        };
        let mcp_shutdown = tokio_util::sync::CancellationToken::new();
        let mcp = api::mcp_router(state.clone(), &dashboard_url, mcp_shutdown.clone());
        let router = router(state.clone(), origins, sessions, mcp);
        Ok(Self {
            listener,
            tls,
            router,
            state,
            enrollment,
            dashboard_url,
            mcp_shutdown,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The one-time link that enrolls the first admin, when no admin can
    /// log in yet and none was outstanding (made at build; `serve` prints it).
    pub fn enrollment(&self) -> Option<&Invitation> {
        match &self.enrollment {
            FirstStart::Link(inv) => Some(inv),
            _ => None,
        }
    }

    /// What the first-start check found (an admin, a new link, or one
    /// still outstanding).
    pub fn first_start(&self) -> &FirstStart {
        &self.enrollment
    }

    /// The shared state (tests reach the store through it).
    pub fn state(&self) -> AppState {
        self.state.clone()
    }

    /// Serves until `shutdown` resolves, then stops within [`STOP_BUDGET`]:
    /// every browser first (at once, whatever the database does), in-flight
    /// requests meanwhile (cut after [`DRAIN`]), then the database's
    /// bookkeeping for the time that is left. An orchestrator's grace (30 s
    /// by Kubernetes' default) is never what ends it.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let addr = self.local_addr();
        let https = self.tls.is_some();
        // Long-lived streams (the dashboard's change notices, MCP sessions'
        // event streams) end when the shutdown starts, or an open tab or MCP
        // client would hold it forever.
        let changes = self.state.store.changes().clone();
        let mcp = self.mcp_shutdown.clone();
        let sessions = self.state.sessions.clone();
        let Self {
            listener,
            tls: tls_config,
            router,
            state,
            dashboard_url,
            ..
        } = self;
        let (began_tx, mut began) = tokio::sync::watch::channel(None::<tokio::time::Instant>);
        let shutdown = async move {
            shutdown.await;
            let t0 = tokio::time::Instant::now();
            let _ = began_tx.send(Some(t0));
            changes.stop();
            mcp.cancel();
        };
        tracing::info!(%addr, https, dashboard = %dashboard_url, "cordon listening; dashboard at {dashboard_url}");
        let serve = async {
            match tls_config {
                Some(config) => {
                    tls::serve(listener, config, router, shutdown).await;
                    Ok(())
                }
                None => axum::serve(
                    listener.tap_io(no_delay),
                    router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
                )
                .with_graceful_shutdown(shutdown)
                .await
                .context("server failed"),
            }
        };
        let mut cut_rx = began.clone();
        let cut = async move {
            let began = cut_rx.wait_for(Option::is_some).await.ok().and_then(|t| *t);
            // None: the server ended on its own (an error), nothing to cut.
            let Some(t0) = began else {
                return std::future::pending().await;
            };
            tokio::time::sleep_until(t0 + DRAIN).await;
        };
        let served = async {
            tokio::select! {
                r = serve => r,
                () = cut => {
                    tracing::warn!(drain_s = DRAIN.as_secs(), "shutdown: in-flight requests cut");
                    Ok(())
                }
            }
        };
        // The browsers go first, at the signal, while requests drain.
        let browsers = async {
            let t0 = began
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|t| *t)
                .unwrap_or_else(tokio::time::Instant::now);
            sessions.shutdown(t0 + SESSIONS_BUDGET).await;
            t0
        };
        let (served, t0) = tokio::join!(served, browsers);
        state.housekeeping.stop();
        if tokio::time::timeout_at(t0 + LEAVE_BUDGET, state.cluster.leave())
            .await
            .is_err()
        {
            tracing::warn!("shutdown: could not mark this replica stopped in time");
        }
        let close_by =
            (t0 + STOP_BUDGET).max(tokio::time::Instant::now() + Duration::from_millis(100));
        if tokio::time::timeout_at(close_by, state.store.close())
            .await
            .is_err()
        {
            tracing::warn!("shutdown: the database did not close in time");
        }
        tracing::info!(took_ms = t0.elapsed().as_millis(), "cordon stopped");
        served
    }
}

/// The whole stop, from the signal to the end of [`Application::run_until`]
/// (an orchestrator's grace is 30 s by default; systemd's 90 s).
pub const STOP_BUDGET: Duration = Duration::from_secs(9);
/// In-flight requests get this long once a stop begins.
const DRAIN: Duration = Duration::from_secs(3);
/// Browsers stopped and sessions' rows written by then.
const SESSIONS_BUDGET: Duration = Duration::from_secs(6);
/// This replica marked stopped by then.
const LEAVE_BUDGET: Duration = Duration::from_millis(7500);

/// Sends each write at once. An answer written in several pieces (an MCP
/// result on its SSE stream: an event, then the end of the stream) would
/// otherwise wait for the client's delayed ACK of the first piece, 40 ms
/// on Linux, on every call (BENCHMARKS.md, 2026-11-23).
///
/// It also sets `TCP_NOTSENT_LOWAT`: the kernel then takes no more than
/// [`NOTSENT_LOWAT`] bytes beyond what it has sent, so a write to a slow
/// client waits instead of filling a send buffer that grows to 4 MiB. The
/// live view relies on it: it counts a frame as taken when its write
/// completes, and without the limit a viewer on a slow link got frames five
/// seconds old (BENCHMARKS.md, 2026-11-23, the slow viewer).
pub(crate) fn no_delay(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    if let Err(e) = notsent_lowat(tcp, NOTSENT_LOWAT) {
        tracing::debug!(error = %e, "cannot set TCP_NOTSENT_LOWAT");
    }
}

/// Unsent bytes the kernel may hold per connection.
pub(crate) const NOTSENT_LOWAT: u32 = 64 * 1024;

fn notsent_lowat(tcp: &tokio::net::TcpStream, bytes: u32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = nix::libc::c_int::try_from(bytes).unwrap_or(nix::libc::c_int::MAX);
    // SAFETY: a valid socket fd and a c_int option value of the right size.
    let rc = unsafe {
        nix::libc::setsockopt(
            tcp.as_raw_fd(),
            nix::libc::IPPROTO_TCP,
            nix::libc::TCP_NOTSENT_LOWAT,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<nix::libc::c_int>() as nix::libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Registers SIGINT and SIGTERM handlers now, so a signal that arrives while
/// the server is still starting is not lost, and returns a future that
/// resolves on the first of them.
pub fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
        }
    })
}

/// Creates the data dir (mode 0700: it holds the database and, by default,
/// the master key) and checks it is writable. An existing dir is left as
/// it is, with a warning if others may look inside.
pub(crate) fn prepare_data_dir(dir: &Path) -> anyhow::Result<()> {
    prepare_dir("data_dir", "the database", dir)
}

/// The same for `shared_dir` (screenshots and kept downloads).
pub(crate) fn prepare_shared_dir(dir: &Path) -> anyhow::Result<()> {
    prepare_dir("shared_dir", "screenshots and downloads", dir)
}

/// A master key that cannot be used, with what to do about it.
fn key_fix(e: crate::crypto::KeyError) -> anyhow::Error {
    use crate::crypto::KeyError;
    let fix = match &e {
        KeyError::MalformedSetting | KeyError::MalformedFile(_) => Some(
            "a key is 32 random bytes as 64 hex digits or base64 (`openssl rand -hex 32`); \
             give the key that sealed the stored logins, or, on a first start, remove the \
             setting or the file and Cordon makes one",
        ),
        KeyError::Permissions { .. } => Some("chmod 600 the file (it must be the owner's alone)"),
        KeyError::Io { .. } => Some(
            "let the user Cordon runs as read (and on a first start, create) the key file, \
             or set master_key_file (CORDON_MASTER_KEY_FILE) elsewhere",
        ),
        KeyError::SameKey(_) => None,
    };
    match fix {
        Some(f) => crate::fix::Fixed::error(e, f),
        None => e.into(),
    }
}

fn dir_fix(setting: &str) -> String {
    format!(
        "make the directory (and its parents) belong to the user Cordon runs as \
         (`chown -R <user>: <dir>`), or set {setting} (CORDON_{}) to a directory it may write",
        setting.to_ascii_uppercase()
    )
}

fn prepare_dir(setting: &str, holds: &str, dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("{setting}: cannot create {}", dir.display()))
        .fix(dir_fix(setting))?;
    let mode = std::fs::metadata(dir)
        .with_context(|| format!("{setting}: cannot read {}", dir.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            dir = %dir.display(),
            mode = format!("{:04o}", mode & 0o7777),
            "the {setting} is open to other users; it holds {holds}: chmod 700 it"
        );
    }
    // Named per process: replicas sharing the directory probe at once.
    let probe = dir.join(format!(".cordon-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .with_context(|| format!("{setting}: {} is not writable", dir.display()))
        .fix(dir_fix(setting))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Whether `path` lies inside `dir`, symbolic links and `..` resolved
/// (both exist once the data dir is prepared and the key loaded).
fn lies_inside(path: &Path, dir: &Path) -> bool {
    match (path.canonicalize(), dir.canonicalize()) {
        (Ok(path), Ok(dir)) => path.starts_with(dir),
        _ => path.starts_with(dir),
    }
}

/// The whole HTTP surface.
fn router(
    state: AppState,
    origins: Origins,
    sessions: SessionSettings,
    mcp: Router<AppState>,
) -> Router {
    let routes = generate_route_list(App);
    let dashboard: DashboardHandle = Arc::new(state.clone());
    let leptos = state.leptos.clone();
    let assets = state.assets.clone();
    // The dashboard: its sessions and the operator check wrap only these
    // routes (and the fallback), so agent API and MCP requests never pay
    // for a dashboard session.
    let ui = Router::new()
        .merge(auth::routes::router())
        .route("/ui/events", get(dashboard::events))
        .route(
            "/live/{session}",
            get(crate::live::socket::handler).route_layer(middleware::from_fn_with_state(
                state.clone(),
                crate::cluster::live::route,
            )),
        )
        .route("/ui/credentials/export", get(dashboard::export))
        .route(
            dashboard::TOTP_ADD_PATH,
            post(dashboard::totp_add).layer(axum::extract::DefaultBodyLimit::max(
                dashboard::TOTP_ADD_BODY_LIMIT,
            )),
        )
        .route("/ui/credentials/totp/export", get(dashboard::totp_export))
        .route("/ui/audit/export", get(dashboard::audit_export))
        .route(
            "/pkg/{*path}",
            get(move |req: Request| dashboard::assets::serve(assets.clone(), req)),
        )
        .route("/ui/screenshots/{id}", get(dashboard::screenshot))
        .route(
            "/ui/screenshots/{id}/thumb",
            get(dashboard::screenshot_thumb),
        )
        .route(
            "/ui/approvals/{id}/screenshot",
            get(dashboard::approval_screenshot),
        )
        .leptos_routes_with_context(
            &state,
            routes,
            move || provide_context(dashboard.clone()),
            move || {
                dashboard::csp::set_on_page();
                shell(leptos.clone())
            },
        )
        .fallback(file_and_error_handler::<AppState, _>(shell))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::cluster::dashboard::forward_fn,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::middleware::authenticate,
        ))
        .layer(auth::middleware::session_layer(
            state.store.clone(),
            sessions,
        ))
        .layer(middleware::from_fn(edge::no_framing));
    Router::new()
        .merge(api::ops_router())
        .merge(api::sessions_router(&state))
        .merge(api::cdp_router(&state))
        .merge(api::embed_router(&state))
        .merge(crate::cluster::internal::router(&state))
        .merge(mcp)
        .route("/api", any(api_not_found))
        .route("/api/", any(api_not_found))
        .route("/api/{*rest}", any(api_not_found))
        .merge(ui)
        .layer(middleware::from_fn_with_state(
            upload_body_limit(state.settings.sessions.upload_max_mb),
            limit_bodies,
        ))
        .layer(middleware::from_fn(edge::server_fn_status))
        .layer(middleware::from_fn(edge::json_errors))
        .layer(middleware::from_fn_with_state(
            origins,
            edge::check_host_and_origin,
        ))
        .layer(middleware::from_fn(close_after_error_with_body))
        .layer(middleware::from_fn(log_errors))
        .layer(middleware::from_fn(track_metrics))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request| {
            let route = req
                .extensions()
                .get::<MatchedPath>()
                .map_or("unmatched", MatchedPath::as_str);
            tracing::info_span!("request", http.method = %req.method(), http.route = route)
        }))
        .with_state(state)
}

/// The body limit of the upload route: `upload_max_mb` in base64, with
/// room for the JSON around it.
fn upload_body_limit(upload_max_mb: u64) -> usize {
    let bytes = usize::try_from(upload_max_mb << 20).unwrap_or(usize::MAX);
    bytes
        .div_ceil(3)
        .saturating_mul(4)
        .saturating_add(64 * 1024)
}

/// Bounds every request body: [`MAX_BODY_BYTES`], except the upload
/// route's own (`upload`, which carries files) and the TOTP seed form's
/// (a QR code image). A declared length over it is
/// refused before the body is read; a longer stream fails when read.
async fn limit_bodies(
    axum::extract::State(upload_limit): axum::extract::State<usize>,
    req: Request,
    next: Next,
) -> Response {
    use axum::response::IntoResponse;
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let seed_form = path == Some(dashboard::TOTP_ADD_PATH);
    let max = match path {
        Some(p) if p == api::UPLOAD_PATH => upload_limit,
        // A QR code image of a second-factor seed, in base64.
        _ if seed_form => dashboard::TOTP_ADD_BODY_LIMIT,
        _ => MAX_BODY_BYTES,
    };
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        // The seed form names its field, for the page to mark it.
        if seed_form {
            return dashboard::totp_image_too_large();
        }
        return ApiError::PayloadTooLarge(format!("request body is larger than {max} bytes"))
            .into_response();
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::Body::new(http_body_util::Limited::new(body, max));
    next.run(Request::from_parts(parts, body)).await
}

async fn api_not_found() -> ApiError {
    ApiError::NotFound("route")
}

/// An error answer to a request with a body (a 413 above all) may leave
/// that body unread, and the server then closes the connection; a client
/// that reused the connection at that moment sees it reset. Saying
/// `Connection: close` on such answers tells clients not to reuse it.
async fn close_after_error_with_body(req: Request, next: Next) -> Response {
    use axum::http::{HeaderValue, header};
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .is_some_and(|n| n > 0);
    let mut res = next.run(req).await;
    if has_body && (res.status().is_client_error() || res.status().is_server_error()) {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

/// Logs the cause of every 5xx once, inside the request's span.
async fn log_errors(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    if let Some(ErrorCause(cause)) = res.extensions().get::<ErrorCause>() {
        tracing::error!(status = res.status().as_u16(), error = %format!("{cause:#}"), "request failed");
    }
    res
}

/// Counts requests and their latency by matched route.
async fn track_metrics(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let method = req.method().to_string();
    let start = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    let labels = [("route", route), ("method", method), ("status", status)];
    metrics::counter!("cordon_http_requests_total", &labels).increment(1);
    metrics::histogram!("cordon_http_request_duration_seconds", &labels[..2])
        .record(start.elapsed().as_secs_f64());
    res
}
