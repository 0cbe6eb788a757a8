//! The failures a first start is most likely to meet, each triggered for
//! real with the `cordon` binary: the message names the cause and then, on
//! a `fix:` line (or in the warning), what to change. No Chromium, bwrap
//! refused by the kernel (a user namespace of the test's own with no room
//! for more), cgroups not delegated (a mount namespace of the test's own
//! with nothing writable at `/sys/fs/cgroup`), a port in use, a data dir that cannot
//! be made, a bad master key, PostgreSQL unreachable, TLS files missing,
//! an IP address as `public_url`, two replicas with one name, replicas
//! without `cluster_secret`, an inotify limit below the browsers (a user
//! namespace of the test's own with a limit of 8).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::{Backend, TestDb, site_root};

/// `cordon serve` (behind `wrap`, if any) in a fresh dir with `env`,
/// bounded to 60 s.
fn serve_cmd(dir: &Path, wrap: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("timeout");
    cmd.arg("60")
        .args(wrap)
        .args([env!("CARGO_BIN_EXE_cordon"), "serve"])
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env_remove("CORDON_MASTER_KEY")
        .env_remove("CORDON_MASTER_KEY_FILE")
        .env_remove("CORDON_DATA_DIR")
        .env_remove("CORDON_DATABASE_URL")
        .env("CORDON_LOG_LEVEL", "warn")
        .env("CORDON_BIND", "127.0.0.1:0")
        .env("CORDON_POOL_SIZE", "0")
        .env("CORDON_EGRESS_RESOLVER", "loopback-only")
        .env("CORDON_SITE_ROOT", site_root());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs a start that must fail: exit code 2, `cause` on the error line and
/// `fix` on the `fix:` line after it, nothing else.
fn refused(wrap: &[&str], env: &[(&str, &str)], cause: &str, fix: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    refused_in(dir.path(), wrap, env, cause, fix)
}

fn refused_in(dir: &Path, wrap: &[&str], env: &[(&str, &str)], cause: &str, fix: &str) -> String {
    let out: Output = serve_cmd(dir, wrap, env).output().expect("cordon runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    // Warnings of the start may come first; the error is the last two
    // lines: the cause, then the fix.
    let lines: Vec<&str> = err.trim_end().lines().collect();
    assert!(lines.len() >= 2, "an error line and a fix line: {err}");
    let (error, fix_line) = (lines[lines.len() - 2], lines[lines.len() - 1]);
    assert!(
        error.starts_with("error: ") && error.contains(cause),
        "wanted {cause:?} in {err}"
    );
    assert!(
        fix_line.starts_with("fix: ") && fix_line.contains(fix),
        "wanted the fix {fix:?} in {err}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{err}"
    );
    err
}

/// Starts `cordon serve` that must come up, and returns its log until it
/// listens (JSON lines), then stops it.
fn started_log(dir: &Path, wrap: &[&str], env: &[(&str, &str)]) -> String {
    let mut child = serve_cmd(dir, wrap, env)
        .env("CORDON_LOG_FORMAT", "json")
        .env("CORDON_LOG_LEVEL", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cordon serve starts");
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    for line in lines {
        let line = line.expect("utf-8 log");
        log.push_str(&line);
        log.push('\n');
        if line.contains("\"addr\"") {
            break;
        }
    }
    // `timeout` passes SIGTERM on to the server.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "no exit after SIGTERM: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.contains("\"addr\""), "it did not start: {log}");
    log
}

#[test]
fn no_chromium_names_the_path_and_the_package() {
    refused(
        &[],
        &[
            ("CORDON_SANDBOX_DRIVER", "bwrap"),
            ("CORDON_CHROMIUM_PATH", "/nonexistent/chromium"),
        ],
        "/nonexistent/chromium is not an executable file",
        "install Debian's chromium package",
    );
}

#[test]
fn bwrap_refused_by_the_kernel_says_to_allow_user_namespaces() {
    // Inside a user namespace of this test's own, no namespace may be
    // made: bwrap meets the kernel's refusal, as in a locked-down container.
    refused(
        &[
            "unshare",
            "--user",
            "--map-root-user",
            "sh",
            "-c",
            "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"",
            "sh",
        ],
        &[("CORDON_SANDBOX_DRIVER", "bwrap")],
        "bwrap cannot create the sandbox's namespaces here",
        "allow user namespaces where Cordon runs",
    );
}

#[test]
fn cgroups_that_cannot_be_made_are_warned_about_with_the_fix() {
    // A mount namespace of this test's own where /sys/fs/cgroup is an
    // empty read-only tmpfs: no cgroup can be made (v1 or v2), as without
    // delegation.
    let dir = tempfile::tempdir().unwrap();
    let log = started_log(
        dir.path(),
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs -o ro tmpfs /sys/fs/cgroup && exec \"$@\"",
            "sh",
        ],
        &[],
    );
    let warning = line_with(&log, "PER-SESSION LIMITS ARE NOT ENFORCED");
    assert!(
        warning.contains("Fix: run Cordon where it can create cgroups"),
        "{warning}"
    );
}

/// The log of a start ([`started_log`]) in a user namespace of the test's
/// own whose inotify limit is `limit`.
fn started_with_inotify_limit(limit: u32, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let script = format!("echo {limit} > /proc/sys/user/max_inotify_instances && exec \"$@\"");
    let wrap = [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        &script,
        "sh",
    ];
    started_log(dir.path(), &wrap, env)
}

/// The line of `log` that holds `needle`.
fn line_with<'l>(log: &'l str, needle: &str) -> &'l str {
    log.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in: {log}"))
}

#[test]
fn an_inotify_limit_below_the_browsers_is_warned_about_with_the_fix() {
    // A limit of 8: fewer than the default max_sessions' browsers (150),
    // as in a container given too few, or on a host left at Linux's
    // default of 128.
    let log = started_with_inotify_limit(8, &[]);
    let warning = line_with(&log, "this user may hold 8 inotify instances");
    // The namespace's own limit is the one to raise (the host's too,
    // where it is below 166).
    assert!(
        warning.contains("allow 150 browsers")
            && warning
                .contains("user.max_inotify_instances=256 in this container's user namespace"),
        "{warning}"
    );
    // With just room for them (2 browsers and the margin of 16), nothing is said.
    let log = started_with_inotify_limit(18, &[("CORDON_MAX_SESSIONS", "2")]);
    assert!(!log.contains("inotify"), "{log}");
}

#[test]
fn a_port_in_use_says_how_to_find_the_other_process() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let err = refused(
        &[],
        &[("CORDON_BIND", &addr)],
        &format!("bind: cannot listen on {addr}"),
        "another process holds the port",
    );
    assert!(err.contains(&format!("sport = :{port}")), "{err}");
}

#[test]
fn a_data_dir_that_cannot_be_made_says_who_must_own_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("file"), "").unwrap();
    refused_in(
        dir.path(),
        &[],
        &[("CORDON_DATA_DIR", "file/data")],
        "data_dir: cannot create file/data",
        "or set data_dir (CORDON_DATA_DIR)",
    );
}

#[test]
fn a_malformed_master_key_says_what_a_key_is() {
    let err = refused(
        &[],
        &[("CORDON_MASTER_KEY", "not-a-key-0123")],
        "master_key (CORDON_MASTER_KEY): not 32 bytes",
        "openssl rand -hex 32",
    );
    assert!(
        !err.contains("not-a-key-0123"),
        "the setting's value is shown"
    );
}

#[test]
fn an_unreachable_postgresql_says_what_to_check() {
    let err = refused(
        &[],
        &[(
            "CORDON_DATABASE_URL",
            "postgres://cordon:hunter2@127.0.0.1:1/cordon",
        )],
        "cannot connect to database postgres://cordon:***@127.0.0.1:1/cordon",
        "check that PostgreSQL runs and listens where database_url says",
    );
    assert!(!err.contains("hunter2"));
}

#[test]
fn missing_tls_files_say_which_setting_to_point_where() {
    refused(
        &[],
        &[
            ("CORDON_TLS_CERT", "/nonexistent/fullchain.pem"),
            ("CORDON_TLS_KEY", "/nonexistent/privkey.pem"),
        ],
        "tls_cert: /nonexistent/fullchain.pem does not exist",
        "set tls_cert (CORDON_TLS_CERT)",
    );
}

#[test]
fn an_ip_address_as_public_url_says_passkeys_need_a_host_name() {
    refused(
        &[],
        &[("CORDON_PUBLIC_URL", "http://127.0.0.1:8080")],
        "public_url: http://127.0.0.1:8080/ names an IP address",
        "http://localhost:8080",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_with_one_name_or_without_a_cluster_secret_are_told_the_fix() {
    let db = TestDb::new(Backend::Postgres).await;
    let key = "ab".repeat(32);
    let env = |name: &'static str| {
        vec![
            ("CORDON_DATABASE_URL", db.url.clone()),
            ("CORDON_MASTER_KEY", key.clone()),
            ("CORDON_REPLICA_NAME", name.to_owned()),
        ]
    };
    let a_dir = tempfile::tempdir().unwrap();
    let a_env = env("a");
    let a_env: Vec<(&str, &str)> = a_env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut a = serve_cmd(a_dir.path(), &[], &a_env)
        .env("CORDON_LOG_FORMAT", "json")
        .env("CORDON_LOG_LEVEL", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut a_log = BufReader::new(a.stderr.take().unwrap()).lines();
    loop {
        let line = a_log.next().expect("a log line").unwrap();
        if line.contains("\"addr\"") {
            break;
        }
    }
    // Keep reading, so a full pipe never stalls the replica.
    std::thread::spawn(move || a_log.for_each(drop));

    // The same name: refused, with the fix.
    let same = env("a");
    let same: Vec<(&str, &str)> = same.iter().map(|(k, v)| (*k, v.as_str())).collect();
    refused(
        &[],
        &same,
        "replica_name: \"a\" is in use by a running replica",
        "give each replica a name of its own: set replica_name (CORDON_REPLICA_NAME",
    );

    // Another name, no cluster_secret: it starts, and says what will fail
    // and the fix.
    let b_dir = tempfile::tempdir().unwrap();
    let b = env("b");
    let b: Vec<(&str, &str)> = b.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let log = started_log(b_dir.path(), &[], &b);
    let warning = line_with(&log, "no cluster_secret");
    assert!(
        warning.contains("Fix: set the same cluster_secret")
            && warning.contains("\"replica\":\"a\""),
        "{warning}"
    );

    let pid = nix::unistd::Pid::from_raw(i32::try_from(a.id()).unwrap());
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "replica a did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}
