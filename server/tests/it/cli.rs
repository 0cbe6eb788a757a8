//! The `cordon` binary as a user runs it: exit codes and one-line errors.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::helpers::{Backend, ServeProcess, TestDb};

use crate::helpers::cordon_cli as cordon;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_clean_failure(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    // One line; then, when Cordon knows what to do about it, one `fix:` line.
    let lines: Vec<&str> = err.trim_end().lines().collect();
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("fix: ")),
        "one line (and a fix) expected: {err:?}"
    );
}

#[test]
fn a_malformed_config_file_stops_startup_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cordon.toml"), "bind = [\n").unwrap();
    let out = cordon(dir.path(), &[], &["config", "show"]);
    assert_clean_failure(&out, "cordon.toml");
}

#[test]
fn a_wrong_type_in_the_config_file_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("custom.toml"), "log_format = \"xml\"\n").unwrap();
    let out = cordon(
        dir.path(),
        &[],
        &["--config", "custom.toml", "config", "show"],
    );
    assert_clean_failure(&out, "log_format");
}

#[test]
fn a_bad_environment_value_names_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[("CORDON_BIND", "localhost")], &["serve"]);
    assert_clean_failure(&out, "CORDON_BIND");
}

#[test]
fn an_unknown_database_scheme_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(
        dir.path(),
        &[("CORDON_DATABASE_URL", "mysql://localhost/x")],
        &["migrate"],
    );
    assert_clean_failure(&out, "unknown scheme \"mysql\"");
}

#[test]
fn an_unreachable_database_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    let url = "postgres://cordon:hunter2@127.0.0.1:1/cordon";
    let out = cordon(dir.path(), &[("CORDON_DATABASE_URL", url)], &["migrate"]);
    assert_clean_failure(
        &out,
        "cannot connect to database postgres://cordon:***@127.0.0.1:1/cordon",
    );
    assert!(!stderr(&out).contains("hunter2"));
}

#[test]
fn an_unusable_data_dir_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "").unwrap();
    let out = cordon(dir.path(), &[("CORDON_DATA_DIR", "file/data")], &["serve"]);
    assert_clean_failure(&out, "data_dir");
}

#[test]
fn serving_on_a_non_loopback_address_without_tls_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[("CORDON_BIND", "0.0.0.0:0")], &["serve"]);
    assert_clean_failure(&out, "bind: 0.0.0.0:0 is not a loopback address");
    assert!(stderr(&out).contains("tls_cert"), "{}", stderr(&out));
    let out = cordon(
        dir.path(),
        &[
            ("CORDON_BIND", "0.0.0.0:0"),
            ("CORDON_TRUSTED_PROXY", "true"),
            ("CORDON_PUBLIC_URL", "http://cordon.example.com"),
        ],
        &["serve"],
    );
    assert_clean_failure(&out, "public_url: must be");
    assert!(
        !dir.path().join("data").exists(),
        "refused before anything was made"
    );
}

#[test]
fn config_show_lists_the_tls_settings() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[], &["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "# tls_cert is unset",
        "# tls_key is unset",
        "trusted_proxy = false",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from:\n{text}"
        );
    }
    let env = [
        ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
        ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
        ("CORDON_PUBLIC_URL", "https://cordon.example.com"),
        ("CORDON_TRUSTED_PROXY", "true"),
    ];
    let out = cordon(dir.path(), &env, &["config", "show"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for line in [
        "tls_cert = \"/etc/cordon/cert.pem\"",
        "tls_key = \"/etc/cordon/key.pem\"",
        "trusted_proxy = true",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from:\n{text}"
        );
    }
}

#[test]
fn config_show_prints_settings_with_the_password_masked() {
    let dir = tempfile::tempdir().unwrap();
    let url = "postgres://cordon:hunter2@127.0.0.1:5432/cordon";
    let out = cordon(
        dir.path(),
        &[("CORDON_DATABASE_URL", url)],
        &["config", "show"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("database_url = \"postgres://cordon:***@127.0.0.1:5432/cordon\""),
        "{text}"
    );
    assert!(!text.contains("hunter2"));
    assert!(text.contains("bind = \"127.0.0.1:8080\""), "{text}");
}

#[test]
fn migrate_creates_the_data_dir_and_sqlite_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[], &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("data/cordon.db").is_file());
}

/// Creates tenants acme, beta and gamma: three audited events.
fn three_tenants(db: &TestDb, env: &[(&str, &str)]) {
    for t in ["acme", "beta", "gamma"] {
        let out = cordon(db.dir.path(), env, &["tenant", "create", t]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

#[tokio::test]
async fn audit_verify_exits_0_when_intact_and_1_naming_the_tampered_seq() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let db = TestDb::new(backend).await;
        let env = [("CORDON_DATABASE_URL", db.url.as_str())];
        three_tenants(&db, &env);
        let out = cordon(db.dir.path(), &env, &["audit", "verify"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("intact: 3 events"));

        let drop_guard = match backend {
            Backend::Sqlite => "DROP TRIGGER audit_events_no_update",
            Backend::Postgres => "DROP TRIGGER audit_events_no_update ON audit_events",
        };
        db.raw(drop_guard).await.unwrap();
        db.raw("UPDATE audit_events SET actor = 'operator:mallory' WHERE seq = 2")
            .await
            .unwrap();
        let out = cordon(db.dir.path(), &env, &["audit", "verify"]);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("BROKEN at seq 2"),
            "{backend:?}"
        );
    }
}

#[test]
fn a_bad_tenant_id_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[], &["tenant", "create", "../Evil"]);
    assert_clean_failure(&out, "tenant id");
    let out = cordon(dir.path(), &[], &["audit", "verify"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("intact: 0 events"));
}

#[test]
fn tenant_and_key_mistakes_exit_2_with_one_line_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ok = |args: &[&str]| {
        let out = cordon(dir.path(), &[], args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    ok(&["tenant", "create", "acme"]);
    assert_clean_failure(
        &cordon(dir.path(), &[], &["tenant", "create", "acme"]),
        "tenant acme already exists",
    );
    assert_clean_failure(
        &cordon(dir.path(), &[], &["apikey", "create", "--tenant", "ghost"]),
        "tenant ghost does not exist",
    );
    assert_clean_failure(
        &cordon(
            dir.path(),
            &[],
            &[
                "apikey",
                "create",
                "--tenant",
                "acme",
                "--label",
                "bell\u{7}",
            ],
        ),
        "label: ",
    );
    let unknown = cordon::domain::ApiKeyId::generate();
    assert_clean_failure(
        &cordon(dir.path(), &[], &["apikey", "revoke", unknown.as_str()]),
        "no active API key",
    );
    let out = cordon(dir.path(), &[], &["apikey", "list"]);
    assert!(out.stdout.is_empty(), "no key was made");
}

#[test]
fn serve_shuts_down_gracefully_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServeProcess::start(dir.path(), &[("CORDON_POOL_SIZE", "1")]);
    assert!(
        std::net::TcpStream::connect(&server.addr).is_ok(),
        "server listens on {}",
        server.addr
    );
    let ServeProcess { mut child, log, .. } = server;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let rest: Vec<String> = log.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|l| l.contains("SIGTERM received")),
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|l| l.contains("cordon stopped")),
        "{rest:?}"
    );
}

#[test]
fn serve_refuses_a_master_key_file_readable_by_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[], &["migrate"]);
    assert!(out.status.success());
    let key = dir.path().join("data/master.key");
    std::fs::write(&key, "00".repeat(32)).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = cordon(dir.path(), &[], &["serve"]);
    assert_clean_failure(&out, "master.key");
}

#[test]
fn apikey_list_with_a_tenant_shows_only_that_tenants_keys() {
    let dir = tempfile::tempdir().unwrap();
    for t in ["acme", "globex"] {
        let out = cordon(dir.path(), &[], &["tenant", "create", t]);
        assert!(out.status.success(), "{}", stderr(&out));
        let label = format!("{t}-agent");
        let out = cordon(
            dir.path(),
            &[],
            &["apikey", "create", "--tenant", t, "--label", &label],
        );
        assert!(out.status.success(), "{}", stderr(&out));
    }

    let out = cordon(dir.path(), &[], &["apikey", "list", "--tenant", "acme"]);

    assert!(out.status.success(), "{}", stderr(&out));
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains("\tacme\tactive\tacme-agent"), "{listed}");
    let out = cordon(dir.path(), &[], &["apikey", "list"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 2);
    let out = cordon(dir.path(), &[], &["apikey", "list", "--tenant", "../Evil"]);
    assert_clean_failure(&out, "tenant id");
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    // The first use of the vault creates the master key and logs it (INFO).
    let out = cordon(
        dir.path(),
        &[("CORDON_LOG_LEVEL", "info"), ("CORDON_LOG_FORMAT", "text")],
        &["creds", "list"],
    );

    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("created a new master key"), "{err:?}");
    assert!(!err.contains("\x1b["), "{err:?}");
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_data_dir_and_the_database_files_are_private_to_their_owner() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let out = cordon(dir.path(), &[], &["migrate"]);

    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("cordon.db")), 0o600);
    // A running server has the WAL files open: SQLite gives them the
    // database file's mode.
    let server = ServeProcess::start(dir.path(), &[("CORDON_POOL_SIZE", "0")]);
    for name in ["cordon.db", "cordon.db-wal", "cordon.db-shm"] {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
    assert!(server.stop().success());
}

#[test]
fn a_database_file_left_readable_by_others_is_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/cordon.db");
    assert!(cordon(dir.path(), &[], &["migrate"]).status.success());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = cordon(dir.path(), &[], &["tenant", "list"]);

    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&db), 0o600);
}

/// Starts `cordon serve` in `dir` and returns it with its log lines up to
/// the one that reports the address it listens on.
fn serve_logging(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::process::Child, Vec<String>) {
    use std::io::{BufRead, BufReader};
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
    cmd.current_dir(dir)
        .arg("serve")
        .env("CORDON_BIND", "127.0.0.1:0")
        .env("CORDON_POOL_SIZE", "0")
        .env("CORDON_LOG_FORMAT", "json")
        .env("CORDON_LOG_LEVEL", "info")
        .env("CORDON_EGRESS_RESOLVER", "loopback-only")
        .env_remove("CORDON_MASTER_KEY")
        .env_remove("CORDON_DATA_DIR")
        // stdout carries the enrollment link (a token): not for the test output.
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("cordon serve starts");
    let mut lines = Vec::new();
    for line in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        let line = line.expect("utf-8 log");
        let listening = line.contains("\"addr\"");
        lines.push(line);
        if listening {
            return (child, lines);
        }
    }
    let status = child.wait().expect("wait");
    panic!("serve exited ({status}) before listening: {lines:?}");
}

fn stop(mut child: std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    child.wait().unwrap();
}

#[test]
fn serve_warns_when_the_master_key_file_is_inside_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();

    let (child, log) = serve_logging(dir.path(), &[]);
    stop(child);

    let warning: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("WARN") && l.contains("master key file is inside the data dir"))
        .collect();
    assert_eq!(warning.len(), 1, "{log:#?}");
    assert!(warning[0].contains("master_key_file"), "{}", warning[0]);
}

#[test]
fn a_master_key_file_outside_the_data_dir_is_created_there_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("secrets/cordon.key");
    let key_arg = key.display().to_string();
    let env = [("CORDON_MASTER_KEY_FILE", key_arg.as_str())];

    let out = cordon(dir.path(), &env, &["creds", "list"]);

    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&key), 0o600);
    assert!(dir.path().join("data").is_dir());
    assert!(!dir.path().join("data/master.key").exists());
    let shown = cordon(dir.path(), &env, &["config", "show"]);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains(&format!("master_key_file = {key_arg:?}")),
        "{shown}"
    );
    // The server uses that key and sees no reason to warn.
    let (child, log) = serve_logging(dir.path(), &env);
    stop(child);
    assert!(
        !log.iter().any(|l| l.contains("master key file is inside")),
        "{log:#?}"
    );
    assert!(!dir.path().join("data/master.key").exists());
}

/// `cordon serve` in `dir` with its standard output collected line by line
/// (the enrollment link is printed there, before it listens); the port it
/// listens on.
fn serve_printing(
    dir: &std::path::Path,
) -> (
    std::process::Child,
    u16,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    use std::io::{BufRead, BufReader};
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cordon"));
    cmd.current_dir(dir)
        .arg("serve")
        .env("CORDON_BIND", "127.0.0.1:0")
        .env("CORDON_POOL_SIZE", "0")
        .env("CORDON_LOG_FORMAT", "json")
        .env("CORDON_LOG_LEVEL", "info")
        .env("CORDON_EGRESS_RESOLVER", "loopback-only")
        .env_remove("CORDON_MASTER_KEY")
        .env_remove("CORDON_DATA_DIR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("cordon serve starts");
    let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let sink = printed.clone();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let mut seen = Vec::new();
    for line in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        let line = line.expect("utf-8 log");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if let Some(port) = v["addr"]
            .as_str()
            .and_then(|a| a.rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok())
        {
            return (child, port, printed);
        }
        seen.push(line);
    }
    let status = child.wait().expect("wait");
    panic!("serve exited ({status}) before listening: {seen:?}");
}

/// What serve printed, once it printed a line containing `needle` (the
/// secret of a link hidden, for the test's output).
async fn printed_with(printed: &std::sync::Mutex<Vec<String>>, needle: &str) -> Vec<String> {
    crate::helpers::wait_until(needle, crate::helpers::PATIENCE, || async {
        let lines = printed.lock().unwrap().clone();
        if lines.iter().any(|l| l.contains(needle)) {
            Ok(lines)
        } else {
            Err(hide_secrets(&lines))
        }
    })
    .await
}

fn hide_secrets(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| match l.split_once("#cen_") {
            Some((before, _)) => format!("{before}#cen_<hidden>"),
            None => l.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `cen_` secret of the one link in `lines`.
fn secret_in(lines: &[String]) -> String {
    let links: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_once("/enroll#").map(|(_, s)| s.trim()))
        .collect();
    assert_eq!(links.len(), 1, "one link: {}", hide_secrets(lines));
    links[0].to_owned()
}

/// `POST /ui/auth/enroll/start` with `secret`: its status and message.
async fn enroll_start(port: u16, secret: &str) -> (reqwest::StatusCode, String) {
    let res = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("http://127.0.0.1:{port}/ui/auth/enroll/start"))
        .header("origin", format!("http://localhost:{port}"))
        .header("host", format!("localhost:{port}"))
        .json(&serde_json::json!({ "token": secret, "passkey_name": "laptop" }))
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: serde_json::Value = res.json().await.unwrap_or_default();
    (
        status,
        body["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn a_restart_keeps_the_outstanding_first_admin_link_and_enroll_link_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first, _, printed) = serve_printing(dir.path());
    let first_lines = printed_with(&printed, "/enroll#cen_").await;
    let old = secret_in(&first_lines);
    stop(first);

    // A restart while the link is unused and valid prints no new one …
    let (second, port, printed) = serve_printing(dir.path());
    let lines = printed_with(&printed, "cordon operator enroll-link").await;
    assert!(
        !lines.iter().any(|l| l.contains("#cen_")),
        "a second link was printed: {}",
        hide_secrets(&lines)
    );
    // … and the first one still works.
    let (status, message) = enroll_start(port, &old).await;
    assert_eq!(status, reqwest::StatusCode::OK, "the first link: {message}");

    // The CLI prints a fresh link that works; the old one no longer does.
    let out = cordon(dir.path(), &[], &["operator", "enroll-link"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cli_lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let fresh = secret_in(&cli_lines);
    assert_ne!(fresh, old);
    let (status, message) = enroll_start(port, &fresh).await;
    assert_eq!(status, reqwest::StatusCode::OK, "the fresh link: {message}");
    let (status, message) = enroll_start(port, &old).await;
    assert_eq!(
        status,
        reqwest::StatusCode::BAD_REQUEST,
        "the old link: {message}"
    );
    assert!(message.contains("expired"), "{message}");
    // Still one admin.
    let out = cordon(dir.path(), &[], &["operator", "list"]);
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    stop(second);
    // Naming an operator that does not exist is a one-line error.
    let out = cordon(dir.path(), &[], &["operator", "enroll-link", "nobody"]);
    assert_clean_failure(&out, "nobody");
    assert!(out.stdout.is_empty(), "no link printed");
}

#[test]
fn operator_scope_limits_an_operator_to_tenants_refuses_admins_and_unknown_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let ok = |args: &[&str]| {
        let out = cordon(dir.path(), &[], args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(&["tenant", "create", "acme"]);
    ok(&["tenant", "create", "globex"]);
    ok(&["operator", "invite", "sam", "--role", "viewer"]);
    ok(&["operator", "invite", "ada", "--role", "admin"]);
    let line_of = |name: &str| {
        ok(&["operator", "list"])
            .lines()
            .find(|l| l.split('\t').nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{name} listed"))
            .to_owned()
    };
    assert!(
        line_of("sam").ends_with("\tall tenants"),
        "{}",
        line_of("sam")
    );

    let said = ok(&["operator", "scope", "sam", "--tenants", "globex,acme"]);
    assert!(said.contains("acme, globex"), "{said}");
    assert!(
        line_of("sam").ends_with("\tacme,globex"),
        "{}",
        line_of("sam")
    );
    ok(&["operator", "scope", "sam", "--all"]);
    assert!(
        line_of("sam").ends_with("\tall tenants"),
        "{}",
        line_of("sam")
    );

    assert_clean_failure(
        &cordon(
            dir.path(),
            &[],
            &["operator", "scope", "ada", "--tenants", "acme"],
        ),
        "admins see every tenant",
    );
    assert_clean_failure(
        &cordon(
            dir.path(),
            &[],
            &["operator", "scope", "sam", "--tenants", "ghost"],
        ),
        "no tenant ghost",
    );
    for bad in [
        vec!["operator", "scope", "sam"],
        vec!["operator", "scope", "sam", "--tenants", "../Evil"],
        vec!["operator", "scope", "sam", "--tenants", "acme", "--all"],
    ] {
        let out = cordon(dir.path(), &[], &bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", stderr(&out));
    }
    assert!(
        line_of("sam").ends_with("\tall tenants"),
        "{}",
        line_of("sam")
    );
    let help = cordon(dir.path(), &[], &["operator", "--help"]);
    assert!(
        String::from_utf8_lossy(&help.stdout).contains("scope"),
        "{}",
        String::from_utf8_lossy(&help.stdout)
    );
}

#[tokio::test]
async fn audit_export_writes_json_lines_that_verify_offline_and_a_tampered_file_is_named() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let db = TestDb::new(backend).await;
        let env = [("CORDON_DATABASE_URL", db.url.as_str())];
        three_tenants(&db, &env);
        // To standard output: every event, oldest first, with its hashes.
        let out = cordon(db.dir.path(), &env, &["audit", "export"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["seq"], 1);
        assert_eq!(lines[1]["tenant"], "beta");
        assert_eq!(lines[1]["prev_hash"], lines[0]["hash"]);
        assert!(lines[2]["time"].as_str().is_some_and(|t| t.ends_with('Z')));
        // To a new 0600 file, one tenant, by seq: verifies offline.
        let file = db.dir.path().join("beta.jsonl");
        let path = file.to_str().unwrap();
        let out = cordon(
            db.dir.path(),
            &env,
            &[
                "audit", "export", "--tenant", "beta", "--since", "1", "--output", path,
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let out = cordon(db.dir.path(), &env, &["audit", "verify", "--file", path]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("intact: 1 events (seq 2..2)"), "{said}");
        // An existing file is never overwritten.
        let out = cordon(db.dir.path(), &env, &["audit", "export", "--output", path]);
        assert_clean_failure(&out, "beta.jsonl");
        // The export itself is audited (after the rows it wrote).
        let out = cordon(db.dir.path(), &env, &["audit", "export", "--since", "4"]);
        let later = String::from_utf8(out.stdout).unwrap();
        assert!(later.contains("\"action\":\"audit.export\""), "{later}");
        // The whole log, then one changed field: named by seq, exit 1.
        let whole = db.dir.path().join("all.jsonl");
        let whole_path = whole.to_str().unwrap();
        let out = cordon(
            db.dir.path(),
            &env,
            &["audit", "export", "--output", whole_path],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let out = cordon(
            db.dir.path(),
            &env,
            &["audit", "verify", "--file", whole_path],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let original = std::fs::read_to_string(&whole).unwrap();
        std::fs::write(&whole, original.replacen("\"beta\"", "\"evil\"", 1)).unwrap();
        let out = cordon(
            db.dir.path(),
            &env,
            &["audit", "verify", "--file", whole_path],
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("BROKEN at seq 2"),
            "{backend:?}"
        );
        // Not an export, a bad bound: one line, exit 2.
        std::fs::write(&whole, "{\"seq\": \"x\"}\n").unwrap();
        let out = cordon(
            db.dir.path(),
            &env,
            &["audit", "verify", "--file", whole_path],
        );
        assert_clean_failure(&out, "line 1");
        let out = cordon(
            db.dir.path(),
            &env,
            &["audit", "export", "--since", "yesterday"],
        );
        assert_clean_failure(&out, "RFC 3339");
    }
}

/// docs/configuration.md's reference is `cordon config docs`' output: a
/// setting added, removed or re-documented in the code fails here until
/// the page is regenerated.
#[test]
fn the_configuration_page_holds_the_generated_reference() {
    let dir = tempfile::tempdir().unwrap();
    let out = cordon(dir.path(), &[], &["config", "docs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let generated = String::from_utf8(out.stdout).unwrap();
    assert!(generated.lines().count() > 50, "{generated}");
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md"),
    )
    .unwrap();
    let begin = "<!-- settings:begin -->\n";
    let start = page.find(begin).expect("the begin marker") + begin.len();
    let end = page.find("<!-- settings:end -->").expect("the end marker");
    assert!(
        page[start..end] == generated,
        "docs/configuration.md's reference differs from the code: regenerate it with \
         `cargo run -p cordon -- config docs` and paste it between the markers"
    );
}
