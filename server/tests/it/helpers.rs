//! `TestApp`, fresh databases of both backends, a Chromium fixture.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use app::api::auth::Role;
use cordon::config::Settings;
use cordon::domain::OperatorId;
use cordon::startup::Application;
use cordon::state::AppState;
use cordon::store::Store;
use cordon::store::operators::OperatorRow;
use secrecy::SecretString;
use tokio::sync::oneshot;

/// How long a test waits for a state before it gives up: generous, so a
/// slow or busy machine passes as long as the state is reached at all.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `check` until it answers `Ok`, and returns that value. `Err`
/// carries what was seen instead; after `within` the test fails naming
/// `what` and the last thing seen. The one way tests wait: never a sleep
/// followed by an assertion.
pub async fn wait_until<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "waited {within:?} for {what}; last seen: {seen}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Which storage backend a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Generates `sqlite` and `postgres` variants of an async test body
/// `async fn(Backend)`, so one suite runs against both backends.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    super::$name($crate::helpers::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    super::$name($crate::helpers::Backend::Postgres).await
                }
            }
        )*
    };
}
pub(crate) use both_backends;

/// A fresh, empty database; its files live as long as this value.
pub struct TestDb {
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl TestDb {
    pub async fn new(backend: Backend) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = match backend {
            Backend::Sqlite => format!("sqlite://{}/cordon.db", dir.path().display()),
            Backend::Postgres => {
                let admin = std::env::var("CORDON_TEST_POSTGRES_URL").expect(
                    "CORDON_TEST_POSTGRES_URL is not set: run the suite with \
                     infra/scripts/test.sh, or start infra/scripts/test-postgres.sh and export its URL",
                );
                let name = format!("cordon_test_{}", hex::encode(rand::random::<[u8; 8]>()));
                let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
                    .await
                    .expect("test PostgreSQL reachable");
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let base = admin.rsplit_once('/').expect("URL with a database").0;
                format!("{base}/{name}")
            }
        };
        Self { url, dir }
    }

    /// A migrated store on this database (a fresh pool each call).
    pub async fn store(&self) -> Store {
        let store = Store::connect(&SecretString::from(self.url.clone()))
            .await
            .expect("connect");
        store.migrate().await.expect("migrate");
        store
    }

    /// Runs raw SQL as the database owner, bypassing Cordon (a tamperer).
    pub async fn raw(&self, sql: &str) -> Result<(), sqlx::Error> {
        sqlx::any::install_default_drivers();
        let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&self.url).await?;
        sqlx::raw_sql(sql).execute(&mut conn).await?;
        Ok(())
    }
}

/// Where `infra/scripts/build-site.sh` puts the dashboard assets.
pub fn site_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/site")
}

/// Settings for a test: port 0, the test database, a temp data dir.
pub fn test_settings(db: &TestDb, extra: &[(&str, &str)]) -> Settings {
    let data_dir = db.dir.path().join("data");
    let mut env = vec![
        ("CORDON_BIND".to_string(), "127.0.0.1:0".to_string()),
        (
            "CORDON_DATA_DIR".to_string(),
            data_dir.display().to_string(),
        ),
        ("CORDON_DATABASE_URL".to_string(), db.url.clone()),
        (
            "CORDON_SITE_ROOT".to_string(),
            site_root().display().to_string(),
        ),
        ("CORDON_LOG_LEVEL".to_string(), "warn".to_string()),
        // No DNS query may leave the machine: only `localhost` resolves.
        (
            "CORDON_EGRESS_RESOLVER".to_string(),
            "loopback-only".to_string(),
        ),
        ("CORDON_POOL_SIZE".to_string(), "0".to_string()),
    ];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Settings::load_from(None, env).expect("test settings")
}

/// The real server, on a free port, with a fresh database.
pub struct TestApp {
    pub addr: std::net::SocketAddr,
    pub state: AppState,
    pub db: TestDb,
    pub http: reqwest::Client,
    /// The certificate it serves HTTPS with (built-in TLS), which test
    /// clients trust; `None`: plain HTTP.
    pub tls: Option<rustls::pki_types::CertificateDer<'static>>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, &[]).await
    }

    /// With extra `CORDON_*` settings.
    pub async fn spawn_with(backend: Backend, extra: &[(&str, &str)]) -> Self {
        Self::spawn_on(TestDb::new(backend).await, extra).await
    }

    /// On a database of the caller's (one reached through a proxy).
    pub async fn spawn_on(db: TestDb, extra: &[(&str, &str)]) -> Self {
        let tls = tls_cert_in(extra);
        let app = Application::build(test_settings(&db, extra))
            .await
            .expect("app builds");
        let addr = app.local_addr();
        let state = app.state();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run_until(async {
            let _ = rx.await;
        }));
        Self {
            addr,
            state,
            db,
            // A fresh connection per request: a connection the server closes
            // after an early error answer (413 before the body was read) is
            // never picked up again by a later request of the same test.
            http: test_http(tls.as_ref()),
            tls,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port><path>`, or with built-in TLS
    /// `https://localhost:<port><path>` (the name its certificate holds).
    pub fn url(&self, path: &str) -> String {
        match self.tls {
            Some(_) => format!("https://localhost:{}{path}", self.addr.port()),
            None => format!("http://{}{path}", self.addr),
        }
    }

    /// The origin the dashboard's pages have.
    pub fn origin(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://localhost:{}", self.addr.port())
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.expect("request")
    }

    /// An operator with `role` and a dashboard session for them, as a
    /// passkey login leaves it (the ceremony itself is proven by the
    /// end-to-end tests in a real browser): answers the operator's id and
    /// the `Cookie` header value.
    pub async fn operator_session(&self, name: &str, role: Role) -> (String, String) {
        let store = &self.state.store;
        let op = OperatorRow {
            id: OperatorId::generate(),
            name: name.to_owned(),
            role,
            user_handle: uuid_like(),
            created_at: cordon::time::now_ms(),
            created_by: "test".into(),
            disabled_at: None,
            last_login_at: None,
            passkeys: 0,
        };
        store.operator_create(&op).await.expect("operator");
        let cookie = self
            .session_cookie(op.id.as_str(), cordon::time::now_ms())
            .await;
        (op.id.to_string(), cookie)
    }

    /// A dashboard session record for operator `id` logged in at `login_at`.
    pub async fn session_cookie(&self, id: &str, login_at: i64) -> String {
        let sid = tower_sessions::session::Id::default().to_string();
        let data = serde_json::json!({ "op": id, "login_at": login_at }).to_string();
        self.state
            .store
            .dashboard_session_save(
                &cordon::ids::token_hash(&sid),
                Some(&id.parse().expect("an operator id")),
                &data,
                cordon::time::now_ms() + 30 * 60_000,
            )
            .await
            .expect("session");
        // `__Host-cordon_session` when the dashboard is served over https.
        let secure = self.state.auth.public_url().scheme() == "https";
        format!("{}={sid}", cordon::auth::middleware::cookie_name(secure))
    }

    /// Marks the dashboard session of `cookie` as having just proved
    /// presence with a passkey (what `/ui/auth/reauth/finish` records).
    pub async fn fresh_check(&self, cookie: &str) {
        let sid = cookie.split_once('=').map_or(cookie, |(_, sid)| sid);
        let hash = cordon::ids::token_hash(sid);
        let store = &self.state.store;
        let (data, expires_at) = store
            .dashboard_session_load(&hash, cordon::time::now_ms())
            .await
            .expect("load")
            .expect("a live dashboard session");
        let mut data: serde_json::Value = serde_json::from_str(&data).expect("session data");
        data["fresh_at"] = serde_json::json!(cordon::time::now_ms());
        let op = data["op"]
            .as_str()
            .map(|o| o.parse().expect("an operator id"));
        store
            .dashboard_session_save(&hash, op.as_ref(), &data.to_string(), expires_at)
            .await
            .expect("save");
    }

    /// Calls server function `name` with form `body` as a page would
    /// (own Origin), with `cookie` if any: status and JSON answer.
    pub async fn server_fn(
        &self,
        name: &str,
        body: &str,
        cookie: Option<&str>,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let mut req = self
            .http
            .post(self.url(&format!("/ui/fn/{name}")))
            .header("origin", self.origin())
            .header("host", format!("localhost:{}", self.addr.port()))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned());
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.expect("body");
        let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        (status, json)
    }

    /// Stops the server gracefully and waits for it; the database outlives it.
    /// Stops the server and answers how its `run_until` ended.
    pub async fn stop_raw(&mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.expect("server task"),
            None => Ok(()),
        }
    }

    pub async fn stop(mut self) -> TestDb {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server ran");
        }
        let dir = tempfile::tempdir().expect("temp dir");
        std::mem::replace(
            &mut self.db,
            TestDb {
                url: String::new(),
                dir,
            },
        )
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
            // Not stopped gracefully (a failed test): the runtime may end
            // before the shutdown runs, so kill the browsers now.
            self.state.sessions.stop_accepting();
            for sb in self.state.sessions.sandboxes() {
                if let Some(pid) = sb.pid
                    && cordon::sandbox::is_alive(pid, &sb.marker)
                {
                    let _ = nix::sys::signal::killpg(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        }
    }
}

/// A headless Chromium with a fresh profile and its own DevTools port,
/// started in its own process group and killed (group and all) on drop.
pub struct Chromium {
    child: Child,
    pub devtools_port: u16,
    _profile: tempfile::TempDir,
}

pub const CHROMIUM: &str = "/usr/lib/chromium/chromium";

impl Chromium {
    pub fn start() -> Self {
        Self::start_with(&[], "about:blank")
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits")
    }

    /// What `/json/version` says.
    pub async fn version(&self) -> serde_json::Value {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!(
                "http://127.0.0.1:{}/json/version",
                self.devtools_port
            ))
            .send()
            .await
            .expect("DevTools answers")
            .json()
            .await
            .unwrap()
    }

    /// A CDP connection to the browser, as Cordon connects to a session's
    /// (through a meter of its own).
    pub async fn connect(&self) -> cordon::cdp::BrowserConn {
        let version = self.version().await;
        cordon::cdp::BrowserConn::connect(
            version["webSocketDebuggerUrl"].as_str().unwrap(),
            cordon::cdp::meter::Reach::Tcp,
        )
        .await
        .unwrap()
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        // The group we created at spawn: the browser and its helpers, nothing else.
        let _ = killpg(Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Chromium {
    /// Like [`Chromium::start`], with `extra_args` added and `url` opened
    /// instead of `about:blank`.
    pub fn start_with(extra_args: &[String], url: &str) -> Self {
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().expect("profile dir");
        let child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .args(extra_args)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromium starts (apt-get install chromium)");
        let port_file = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(20);
        let devtools_port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some(port) = text.lines().next().and_then(|l| l.parse().ok())
            {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "chromium did not open its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            child,
            devtools_port,
            _profile: profile,
        }
    }
}

/// An agent of one tenant, with its own API key, talking to a [`TestApp`].
#[derive(Clone)]
pub struct AgentClient {
    pub http: reqwest::Client,
    pub base: String,
    pub key: String,
}

impl TestApp {
    /// The running session `sid` of `tenant`, as the engine holds it.
    pub async fn live(
        &self,
        tenant: &str,
        sid: &str,
    ) -> std::sync::Arc<cordon::sessions::RunningSession> {
        self.state
            .sessions
            .get(
                &tenant.parse().expect("tenant id"),
                &sid.parse().expect("session id"),
            )
            .await
            .expect("a live session")
    }

    /// The stored row of session `sid`, which must exist.
    pub async fn session_row(&self, sid: &str) -> cordon::store::sessions::SessionRow {
        self.state
            .store
            .session_find(&sid.parse().expect("session id"))
            .await
            .expect("the store answers")
            .expect("the session's row")
    }

    /// Creates `tenant` (if needed) and an API key for it.
    pub async fn agent(&self, tenant: &str) -> AgentClient {
        let id: cordon::domain::TenantId = tenant.parse().unwrap();
        let _ = self.state.store.tenant_create(&id, tenant).await;
        let (_, key) = self.state.store.api_key_create(&id, "test").await.unwrap();
        AgentClient {
            http: self.http.clone(),
            base: self.url(""),
            key,
        }
    }
}

impl AgentClient {
    /// One request; the answer must be one its route documents (status, and
    /// for an error its code), or the test fails.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        let text = res.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        documented(&method, path, status, &value);
        (status, value)
    }

    pub async fn post(
        &self,
        path: &str,
        body: serde_json::Value,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (reqwest::StatusCode, serde_json::Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Opens a session and returns its id (panics unless 201).
    pub async fn open(&self, body: serde_json::Value) -> String {
        let (status, v) = self.post("/api/sessions", body).await;
        assert_eq!(status, reqwest::StatusCode::CREATED, "{v}");
        v["session_id"].as_str().unwrap().to_owned()
    }

    /// Calls tool `tool` of session `sid`.
    pub async fn tool(
        &self,
        sid: &str,
        tool: &str,
        body: serde_json::Value,
    ) -> (reqwest::StatusCode, serde_json::Value) {
        self.post(&format!("/api/sessions/{sid}/{tool}"), body)
            .await
    }

    /// Navigates `sid` to `url` (load), asserts 200, and returns the result.
    pub async fn navigate_ok(&self, sid: &str, url: &str) -> serde_json::Value {
        let (status, nav) = self
            .tool(sid, "navigate", serde_json::json!({ "url": url }))
            .await;
        assert_eq!(status, reqwest::StatusCode::OK, "{url}: {nav}");
        nav
    }

    pub async fn close(&self, sid: &str) -> (reqwest::StatusCode, serde_json::Value) {
        self.call(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{sid}"),
            None,
        )
        .await
    }
}

/// Asserts that an answer is the error `status` with `code`, printing it if not.
pub fn assert_error(
    answer: &(reqwest::StatusCode, serde_json::Value),
    status: reqwest::StatusCode,
    code: &str,
) {
    assert_eq!(
        (answer.0, answer.1["error"]["code"].as_str()),
        (status, Some(code)),
        "{}",
        answer.1
    );
}

/// The agent API's OpenAPI document, as the server serves it.
static OPENAPI: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(cordon::api::openapi_document);

/// Fails the test unless `status` (and, for an error, its code) is
/// documented for the route `path` matches. Paths no route documents
/// (a typo'd route, say) are not checked here.
pub fn documented(
    method: &reqwest::Method,
    path: &str,
    status: reqwest::StatusCode,
    body: &serde_json::Value,
) {
    let path = path.split('?').next().unwrap_or(path);
    let method = method.as_str().to_ascii_lowercase();
    let Some(paths) = OPENAPI["paths"].as_object() else {
        panic!("no paths in the OpenAPI document");
    };
    let matches = |template: &str| {
        let (t, p): (Vec<&str>, Vec<&str>) =
            (template.split('/').collect(), path.split('/').collect());
        t.len() == p.len() && t.iter().zip(&p).all(|(t, p)| t.starts_with('{') || t == p)
    };
    let Some(op) = paths
        .iter()
        .filter(|(t, _)| matches(t))
        // A literal segment beats a parameter (`/tabs` before `/{tab}`).
        .min_by_key(|(t, _)| t.matches('{').count())
        .map(|(_, item)| &item[&method])
        .filter(|op| op.is_object())
    else {
        return;
    };
    let answer = &op["responses"][status.as_str()];
    assert!(
        answer.is_object(),
        "{method} {path} answered {status}, which its route does not document: {body}"
    );
    if !status.is_success() {
        let code = &body["error"]["code"];
        let codes = &answer["content"]["application/json"]["schema"]["properties"]["error"]["properties"]
            ["code"]["enum"];
        assert!(
            codes.as_array().is_some_and(|c| c.contains(code)),
            "{method} {path} answered {status} with code {code}, not among its documented {codes}: {body}"
        );
    }
}

/// Test settings for a session engine: no warm pool unless asked, the
/// site allowed through the egress guard.
pub async fn session_app(backend: Backend, allow: &str, extra: &[(&str, &str)]) -> TestApp {
    let mut env: Vec<(&str, &str)> =
        vec![("CORDON_POOL_SIZE", "0"), ("CORDON_EGRESS_ALLOW", allow)];
    env.extend_from_slice(extra);
    TestApp::spawn_with(backend, &env).await
}

/// Runs the real `cordon` binary in `dir`: the one way tests run it for a
/// command. The test process's own settings (`RUST_LOG`, the key, data dir
/// and database) do not leak in; `env` comes on top, and
/// `CORDON_LOG_LEVEL` is `warn` unless `env` says otherwise.
pub fn cordon_cli(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
    cmd.current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("CORDON_MASTER_KEY")
        .env_remove("CORDON_MASTER_KEY_FILE")
        .env_remove("CORDON_DATA_DIR")
        .env_remove("CORDON_DATABASE_URL")
        .env("CORDON_LOG_LEVEL", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("cordon runs")
}

/// A tenant id the test knows to be valid.
pub fn tenant(id: &str) -> cordon::domain::TenantId {
    id.parse().expect("a valid tenant id")
}

/// The id of `tenant`'s one API key (tests that act as the key, or
/// revoke it).
pub async fn key_id(app: &TestApp, tenant_id: &str) -> String {
    let keys = app
        .state
        .store
        .api_key_list(Some(&tenant(tenant_id)))
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys[0].id.clone()
}

/// A vault domain the test knows to be valid.
pub fn domain(d: &str) -> cordon::vault::Domain {
    d.parse().expect("a valid domain")
}

/// A `cordon serve` child process on a free loopback port.
pub struct ServeProcess {
    pub child: std::process::Child,
    pub addr: String,
    pub log: std::io::Lines<std::io::BufReader<std::process::ChildStderr>>,
}

impl ServeProcess {
    /// Starts the real binary in `dir` (its `./data`) and waits until it listens.
    pub fn start(dir: &Path, env: &[(&str, &str)]) -> Self {
        use std::io::{BufRead, BufReader};
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
        cmd.current_dir(dir)
            .arg("serve")
            .env("CORDON_BIND", "127.0.0.1:0")
            .env("CORDON_LOG_FORMAT", "json")
            .env("CORDON_LOG_LEVEL", "info")
            .env("CORDON_EGRESS_RESOLVER", "loopback-only")
            .env("CORDON_SITE_ROOT", site_root())
            // stdout carries the first admin's enrollment link: a token,
            // kept out of the test output.
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("cordon serve starts");
        let mut log = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let addr = loop {
            let line = log
                .next()
                .expect("a log line before exit")
                .expect("utf-8 log");
            let v: serde_json::Value = serde_json::from_str(&line).expect("json log line");
            if let Some(addr) = v["addr"].as_str() {
                break addr.to_string();
            }
        };
        Self { child, addr, log }
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }

    /// SIGKILL, as a crash would.
    pub fn kill_hard(mut self) {
        let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (bounded) for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sends `request` (raw HTTP, `\r\n` line ends) to `127.0.0.1:port` from a
/// child process (bash's `/dev/tcp`), as another local program would, and
/// returns all it got back (empty when the connection was refused or cut).
pub fn send_from_another_process(port: u16, request: &str) -> String {
    let out = std::process::Command::new("timeout")
        .args(["10", "bash", "-c"])
        .arg(format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} || exit 0; printf '%s' \"$1\" >&3; cat <&3"
        ))
        .arg("send")
        .arg(request)
        .output()
        .expect("bash runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A random UUID-shaped string (a WebAuthn user handle).
pub fn uuid_like() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The ref of the first snapshot node with `role` and `name`.
pub fn find_ref(nodes: &serde_json::Value, role: &str, name: &str) -> Option<String> {
    nodes.as_array()?.iter().find_map(|n| {
        if n["role"] == role && n["name"] == name {
            n["ref"].as_str().map(str::to_owned)
        } else {
            find_ref(&n["children"], role, name)
        }
    })
}

/// Every file below `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A self-signed certificate for `localhost` and its key, as PEM files in
/// a temp dir.
pub struct LocalCert {
    pub dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub der: rustls::pki_types::CertificateDer<'static>,
}

impl LocalCert {
    pub fn new() -> Self {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        Self {
            dir,
            cert,
            key,
            der: made.cert.der().clone(),
        }
    }

    pub fn settings(&self) -> [(&'static str, String); 2] {
        [
            ("CORDON_TLS_CERT", self.cert.display().to_string()),
            ("CORDON_TLS_KEY", self.key.display().to_string()),
        ]
    }

    /// A rustls client configuration that trusts this certificate and nothing else.
    pub fn config(&self) -> rustls::ClientConfig {
        trusting(&self.der)
    }

    /// A TLS client that trusts this certificate and nothing else.
    pub fn client(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(std::sync::Arc::new(self.config()))
    }
}

/// A rustls client configuration that trusts `der` and nothing else.
pub fn trusting(der: &rustls::pki_types::CertificateDer<'static>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}

/// The certificate named by `CORDON_TLS_CERT` in `env`, if any: a server
/// started with it serves HTTPS, and test clients trust exactly it.
pub fn tls_cert_in(env: &[(&str, &str)]) -> Option<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    let (_, path) = env.iter().find(|(k, _)| *k == "CORDON_TLS_CERT")?;
    Some(rustls::pki_types::CertificateDer::from_pem_file(path).expect("the test's certificate"))
}

/// A reqwest client for a test (no proxy, a fresh connection per request),
/// trusting `cert` when the server serves HTTPS.
pub fn test_http(cert: Option<&rustls::pki_types::CertificateDer<'static>>) -> reqwest::Client {
    let mut http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0);
    if let Some(der) = cert {
        http = http.use_preconfigured_tls(trusting(der));
    }
    http.build().expect("client")
}
