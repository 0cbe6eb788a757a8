//! The settings as they load: defaults, the file, the environment, the
//! errors that name a key, and every key of today still loading.

use super::keys::edits;
use super::*;
use std::io::Write;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The one-line error of settings that must not load.
fn load_err(pairs: &[(&str, &str)]) -> String {
    Settings::load_from(None, env(pairs))
        .unwrap_err()
        .to_string()
}

#[test]
fn defaults_apply_when_nothing_is_set() {
    let s = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(s.server.bind.to_string(), "127.0.0.1:8080");
    assert_eq!(s.server.data_dir, PathBuf::from("data"));
    assert_eq!(s.database_url().expose_secret(), "sqlite://data/cordon.db");
    assert_eq!(s.server.log_format, LogFormat::Text);
}

#[test]
fn environment_overrides_the_file() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "bind = \"127.0.0.1:9000\"\nlog_format = \"json\"").unwrap();
    let s = Settings::load_from(
        Some(file.path()),
        env(&[("CORDON_BIND", "127.0.0.1:9100"), ("CORDON_UNRELATED", "x")]),
    )
    .unwrap();
    assert_eq!(s.server.bind.to_string(), "127.0.0.1:9100");
    assert_eq!(s.server.log_format, LogFormat::Json);
}

#[test]
fn a_bad_environment_value_names_the_key() {
    let err = Settings::load_from(None, env(&[("CORDON_BIND", "not-an-address")]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("bind:"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn a_malformed_file_is_reported_on_one_line() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "bind = [").unwrap();
    let err = Settings::load_from(Some(file.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(!err.contains('\n'), "{err}");
    assert!(err.contains(&file.path().display().to_string()), "{err}");
}

#[test]
fn an_unknown_key_in_the_file_is_refused() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "bnd = \"127.0.0.1:1\"").unwrap();
    let err = Settings::load_from(Some(file.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bnd"), "{err}");
}

#[test]
fn the_egress_allowlist_reads_a_comma_list_from_the_environment() {
    let s = Settings::load_from(
        None,
        env(&[("CORDON_EGRESS_ALLOW", "127.0.0.1:8000, [::1]:9000")]),
    )
    .unwrap();
    assert_eq!(
        s.egress
            .egress_allow
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["127.0.0.1:8000", "[::1]:9000"]
    );
}

#[test]
fn new_settings_refuse_nonsense_naming_the_key() {
    for (key, value, starts) in [
        ("CORDON_PUBLIC_URL", "not a url", "public_url:"),
        (
            "CORDON_PUBLIC_URL",
            "ftp://cordon.example.com",
            "public_url:",
        ),
        ("CORDON_TOOL_TIMEOUT_S", "301", "tool_timeout_s:"),
        ("CORDON_TOOL_TIMEOUT_S", "soon", "tool_timeout_s:"),
        ("CORDON_TASK_FRAME_WAIT_MS", "0", "task_frame_wait_ms:"),
        ("CORDON_TASK_FRAME_SETTLE_MS", "0", "task_frame_settle_ms:"),
        (
            "CORDON_TASK_FRAME_SETTLE_MS",
            "10001",
            "task_frame_settle_ms:",
        ),
        ("CORDON_REPLICA_NAME", "a/b", "replica_name:"),
        ("CORDON_REPLICA_NAME", "has space", "replica_name:"),
        (
            "CORDON_REPLICA_NAME",
            "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "replica_name:",
        ),
        ("CORDON_CLUSTER_SECRET", "short", "cluster_secret:"),
        ("CORDON_ADVERTISE_URL", "ftp://peer:1", "advertise_url:"),
        (
            "CORDON_ADVERTISE_URL",
            "http://peer:1/api",
            "advertise_url:",
        ),
        ("CORDON_REPLICA_LOST_AFTER_S", "1", "replica_lost_after_s:"),
        ("CORDON_TASK_FRAME_WAIT_MS", "-5", "task_frame_wait_ms:"),
        ("CORDON_TASK_FRAME_WAIT_MS", "60000", "task_frame_wait_ms:"),
        ("CORDON_DOWNLOAD_MAX_MB", "0", "download_max_mb:"),
        ("CORDON_UPLOAD_MAX_MB", "100000", "upload_max_mb:"),
        (
            "CORDON_DOWNLOAD_SESSION_MAX_MB",
            "10",
            "download_session_max_mb:",
        ),
    ] {
        let err = load_err(&[(key, value)]);
        assert!(err.starts_with(starts), "{key}={value}: {err}");
        assert!(!err.contains('\n'), "{err}");
    }
    let ok = Settings::load_from(
        None,
        env(&[("CORDON_PUBLIC_URL", "https://cordon.example.com")]),
    )
    .unwrap();
    assert_eq!(
        ok.public_url().unwrap().host_str(),
        Some("cordon.example.com")
    );
}

#[test]
fn tenant_limits_override_the_defaults_and_refuse_nonsense() {
    let s = Settings::load_from(
        None,
        env(&[(
            "CORDON_TENANT_LIMITS",
            r#"{"acme": {"memory_mb": 256, "cpu_weight": 50}}"#,
        )]),
    )
    .unwrap();
    let base = s.session_limits();
    let acme = s.sandbox.tenant_limits["acme"].over(base);
    assert_eq!(
        (acme.memory_bytes, acme.pids, acme.cpu_weight),
        (256 << 20, base.pids, 50)
    );
    for (value, starts) in [
        (
            r#"{"acme": {"memory_mb": 1}}"#,
            "tenant_limits.acme.memory_mb:",
        ),
        (
            r#"{"acme": {"pids_max": 0}}"#,
            "tenant_limits.acme.pids_max:",
        ),
        (r#"{"../x": {"cpu_weight": 5}}"#, "tenant_limits:"),
        (r#"{"acme": {"swap": 5}}"#, "tenant_limits"),
    ] {
        let err = load_err(&[("CORDON_TENANT_LIMITS", value)]);
        assert!(err.starts_with(starts), "{value}: {err}");
    }
}

#[test]
fn booleans_are_read_from_the_environment() {
    let s = Settings::load_from(None, env(&[("CORDON_SESSION_LIMITS", "false")])).unwrap();
    assert!(!s.sandbox.session_limits);
    assert!(
        Settings::load_from(None, env(&[]))
            .unwrap()
            .sandbox
            .session_limits
    );
    let err = load_err(&[("CORDON_SESSION_LIMITS", "maybe")]);
    assert!(err.starts_with("session_limits:"), "{err}");
}

#[test]
fn the_process_driver_is_refused_on_a_non_loopback_bind() {
    let err = load_err(&[
        ("CORDON_SANDBOX_DRIVER", "process"),
        ("CORDON_BIND", "0.0.0.0:8080"),
    ]);
    assert!(err.starts_with("sandbox_driver:"), "{err}");
    assert!(
        Settings::load_from(None, env(&[("CORDON_SANDBOX_DRIVER", "process")])).is_ok(),
        "on loopback it runs"
    );
}

#[test]
fn the_shared_dir_is_an_absolute_path_and_holds_the_files_when_set() {
    let s = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(s.files_dir(), s.server.data_dir.as_path());
    let s = Settings::load_from(None, env(&[("CORDON_SHARED_DIR", "/mnt/cordon")])).unwrap();
    assert_eq!(s.files_dir(), Path::new("/mnt/cordon"));
    for bad in ["relative/dir", ""] {
        let err = Settings::load_from(None, env(&[("CORDON_SHARED_DIR", bad)]))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(
            err.starts_with("shared_dir: must be an absolute path"),
            "{bad:?}: {err}"
        );
    }
}

#[test]
fn uploads_go_through_the_page_with_kube_unless_told_otherwise() {
    let in_page = |vars: &[(&str, &str)]| {
        let s = Settings::load_from(None, env(vars)).unwrap();
        s.session_config().upload_in_page
    };
    let kube = [
        ("CORDON_SANDBOX_DRIVER", "kube"),
        ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
        ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
    ];
    assert!(!in_page(&[]), "a local browser reads the upload directory");
    assert!(in_page(&kube), "a pod shares no directory");
    assert!(in_page(&[("CORDON_UPLOAD_TRANSFER", "page")]));
    let mut files = kube.to_vec();
    files.push(("CORDON_UPLOAD_TRANSFER", "files"));
    assert!(!in_page(&files), "the operator's word wins");
    let err = Settings::load_from(None, env(&[("CORDON_UPLOAD_TRANSFER", "fax")]))
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
    assert!(err.starts_with("upload_transfer"), "{err}");
}

#[test]
fn a_misspelled_variable_is_named_with_the_setting_it_meant() {
    let vars =
        |names: &[&str]| misspelled_env(names.iter().map(|n| ((*n).to_owned(), "x".to_owned())));
    assert_eq!(
        vars(&[
            "CORDON_DOWNLOAD_MAXMB",
            "CORDON_SANDBOX_DRIVERS",
            "CORDON_BIND",
            "CORDON_PG_DIR",
            "CORDON_BIN",
            "CORDON_SOMETHING_ELSE_ENTIRELY",
            "PATH",
        ]),
        vec![
            (
                "CORDON_DOWNLOAD_MAXMB".to_owned(),
                "CORDON_DOWNLOAD_MAX_MB".to_owned()
            ),
            (
                "CORDON_SANDBOX_DRIVERS".to_owned(),
                "CORDON_SANDBOX_DRIVER".to_owned()
            ),
        ]
    );
    assert_eq!(edits("kitten", "sitting"), 3);
    assert_eq!(edits("", "abc"), 3);
    assert_eq!(edits("same", "same"), 0);
}

#[test]
fn downloads_are_taken_over_cdp_with_kube_unless_told_otherwise() {
    let over_cdp = |vars: &[(&str, &str)]| {
        let s = Settings::load_from(None, env(vars)).unwrap();
        s.session_config().download_over_cdp
    };
    let kube = [
        ("CORDON_SANDBOX_DRIVER", "kube"),
        ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
        ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
    ];
    assert!(!over_cdp(&[]), "a local browser saves into the folder");
    assert!(over_cdp(&kube), "a pod shares no directory");
    assert!(over_cdp(&[("CORDON_DOWNLOAD_TRANSFER", "cdp")]));
    let mut files = kube.to_vec();
    files.push(("CORDON_DOWNLOAD_TRANSFER", "files"));
    assert!(!over_cdp(&files), "the operator's word wins");
    let err = Settings::load_from(None, env(&[("CORDON_DOWNLOAD_TRANSFER", "ftp")]))
        .err()
        .map(|e| format!("{e:#}"))
        .unwrap_or_default();
    assert!(err.starts_with("download_transfer"), "{err}");
}

#[test]
fn the_kube_driver_needs_its_template_and_egress_host() {
    let kube = [
        ("CORDON_SANDBOX_DRIVER", "kube"),
        ("CORDON_KUBE_POD_TEMPLATE", "/etc/cordon/browser-pod.yaml"),
        ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
    ];
    let s = Settings::load_from(None, env(&kube)).unwrap();
    assert_eq!(s.kube.deployment, "cordon");
    assert_eq!((s.kube.cdp_port, s.kube.ready_timeout_s), (9222, 60));
    assert_eq!(
        s.egress_bind_host(),
        "10.1.2.3".parse::<std::net::IpAddr>().unwrap(),
        "the guard listens where the pods are told to connect"
    );
    for (drop, starts) in [(1, "kube_pod_template:"), (2, "kube_egress_host:")] {
        let mut pairs = kube.to_vec();
        pairs.remove(drop);
        let err = load_err(&pairs);
        assert!(err.starts_with(starts), "{err}");
    }
    for (key, value, starts) in [
        ("CORDON_KUBE_EGRESS_HOST", "127.0.0.1", "kube_egress_host:"),
        ("CORDON_KUBE_EGRESS_HOST", "pod", "kube_egress_host:"),
        ("CORDON_EGRESS_BIND_HOST", "127.0.0.1", "egress_bind_host:"),
        ("CORDON_KUBE_READY_TIMEOUT_S", "0", "kube_ready_timeout_s:"),
        ("CORDON_KUBE_CDP_PORT", "0", "kube_cdp_port:"),
        ("CORDON_KUBE_CDP_PORT", "70000", "kube_cdp_port:"),
        ("CORDON_KUBE_DEPLOYMENT", "no spaces", "kube_deployment:"),
        ("CORDON_KUBE_NAMESPACE", "Upper", "kube_namespace:"),
    ] {
        let mut pairs = kube.to_vec();
        pairs.push((key, value));
        let err = load_err(&pairs);
        assert!(err.starts_with(starts), "{key}={value}: {err}");
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn the_egress_guard_leaves_loopback_only_for_the_kube_driver() {
    let s = Settings::load_from(None, env(&[])).unwrap();
    assert!(s.egress_bind_host().is_loopback());
    let err = load_err(&[("CORDON_EGRESS_BIND_HOST", "0.0.0.0")]);
    assert!(err.starts_with("egress_bind_host:"), "{err}");
    let err = load_err(&[
        ("CORDON_SANDBOX_DRIVER", "exec"),
        ("CORDON_EXEC_CREATE", "/bin/true"),
        ("CORDON_EXEC_DESTROY", "/bin/true"),
        ("CORDON_EGRESS_BIND_HOST", "10.0.0.1"),
    ]);
    assert!(err.starts_with("egress_bind_host:"), "{err}");
    let s = Settings::load_from(
        None,
        env(&[
            ("CORDON_SANDBOX_DRIVER", "kube"),
            ("CORDON_KUBE_POD_TEMPLATE", "/t.yaml"),
            ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
            ("CORDON_EGRESS_BIND_HOST", "0.0.0.0"),
        ]),
    )
    .unwrap();
    assert!(s.egress_bind_host().is_unspecified());
    assert!(
        Settings::load_from(None, env(&[("CORDON_EGRESS_BIND_HOST", "::1")])).is_ok(),
        "loopback is always allowed"
    );
}

#[test]
fn a_non_loopback_bind_needs_tls_or_a_trusted_proxy() {
    let err = load_err(&[("CORDON_BIND", "0.0.0.0:8443")]);
    assert!(err.starts_with("bind:"), "{err}");
    assert!(
        err.contains("tls_cert") && err.contains("trusted_proxy"),
        "names both ways out: {err}"
    );
    assert!(!err.contains('\n'), "{err}");
    let err = load_err(&[
        ("CORDON_BIND", "192.0.2.10:8443"),
        ("CORDON_PUBLIC_URL", "https://cordon.example.com:8443"),
    ]);
    assert!(
        err.starts_with("bind:"),
        "an https URL alone is not TLS: {err}"
    );
}

#[test]
fn a_non_loopback_bind_needs_an_https_public_url() {
    let tls = [
        ("CORDON_BIND", "0.0.0.0:8443"),
        ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
        ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
    ];
    let proxy = [
        ("CORDON_BIND", "0.0.0.0:8080"),
        ("CORDON_TRUSTED_PROXY", "true"),
    ];
    for base in [&tls[..], &proxy[..]] {
        let err = load_err(base);
        assert!(err.starts_with("public_url:"), "unset: {err}");
        let mut http = base.to_vec();
        http.push(("CORDON_PUBLIC_URL", "http://cordon.example.com"));
        let err = load_err(&http);
        assert!(
            err.starts_with("public_url:") && err.contains("https://"),
            "{err}"
        );
        let mut https = base.to_vec();
        https.push(("CORDON_PUBLIC_URL", "https://cordon.example.com:8443"));
        let s = Settings::load_from(None, env(&https)).unwrap();
        assert_eq!(
            s.dashboard_url(8443).as_str(),
            "https://cordon.example.com:8443/"
        );
    }
}

#[test]
fn a_trusted_proxy_needs_an_https_public_url_on_loopback_too() {
    let err = load_err(&[("CORDON_TRUSTED_PROXY", "true")]);
    assert!(err.starts_with("public_url:"), "{err}");
    let err = load_err(&[
        ("CORDON_TRUSTED_PROXY", "true"),
        ("CORDON_PUBLIC_URL", "http://cordon.example.com"),
    ]);
    assert!(err.starts_with("public_url:"), "{err}");
    let s = Settings::load_from(
        None,
        env(&[
            ("CORDON_TRUSTED_PROXY", "true"),
            ("CORDON_PUBLIC_URL", "https://cordon.example.com"),
        ]),
    )
    .unwrap();
    assert!(s.server.trusted_proxy && !s.builtin_tls());
    assert!(
        !Settings::load_from(None, env(&[]))
            .unwrap()
            .server
            .trusted_proxy
    );
}

#[test]
fn tls_cert_and_tls_key_are_set_together() {
    let err = load_err(&[("CORDON_TLS_CERT", "/etc/cordon/cert.pem")]);
    assert!(err.starts_with("tls_key:"), "{err}");
    let err = load_err(&[("CORDON_TLS_KEY", "/etc/cordon/key.pem")]);
    assert!(err.starts_with("tls_cert:"), "{err}");
}

#[test]
fn builtin_tls_on_loopback_serves_https_localhost_unless_told_otherwise() {
    let tls = [
        ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
        ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
    ];
    let s = Settings::load_from(None, env(&tls)).unwrap();
    assert!(s.builtin_tls());
    assert_eq!(s.dashboard_url(8443).as_str(), "https://localhost:8443/");
    let mut http = tls.to_vec();
    http.push(("CORDON_PUBLIC_URL", "http://localhost:8443"));
    let err = load_err(&http);
    assert!(err.starts_with("public_url:"), "{err}");
    let plain = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(plain.dashboard_url(8080).as_str(), "http://localhost:8080/");
}

#[test]
fn with_builtin_tls_replicas_advertise_https_and_an_http_advertise_url_is_refused() {
    let tls = [
        ("CORDON_TLS_CERT", "/etc/cordon/cert.pem"),
        ("CORDON_TLS_KEY", "/etc/cordon/key.pem"),
    ];
    let s = Settings::load_from(None, env(&tls)).unwrap();
    let bound: SocketAddr = "127.0.0.1:8443".parse().unwrap();
    assert_eq!(s.advertise_url(bound), "https://127.0.0.1:8443");
    let wildcard: SocketAddr = "0.0.0.0:8443".parse().unwrap();
    assert_eq!(s.advertise_url(wildcard), "https://localhost:8443");
    let mut http = tls.to_vec();
    http.push(("CORDON_ADVERTISE_URL", "http://10.0.0.7:8443"));
    let err = load_err(&http);
    assert!(
        err.starts_with("advertise_url:") && err.contains("https://"),
        "{err}"
    );
    let mut https = tls.to_vec();
    https.push(("CORDON_ADVERTISE_URL", "https://10.0.0.7:8443/"));
    let s = Settings::load_from(None, env(&https)).unwrap();
    assert_eq!(s.advertise_url(bound), "https://10.0.0.7:8443");
    let plain = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(plain.advertise_url(bound), "http://127.0.0.1:8443");
}

#[test]
fn a_bad_egress_allow_entry_stops_the_load_naming_the_setting() {
    let err = load_err(&[("CORDON_EGRESS_ALLOW", "127.0.0.1:8000, nonsense")]);
    assert!(err.starts_with("egress_allow:"), "{err}");
    assert!(err.contains("nonsense"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn config_show_lists_every_setting_and_hides_secrets() {
    let s = Settings::load_from(
        None,
        env(&[
            ("CORDON_MASTER_KEY", &"ab".repeat(32)),
            (
                "CORDON_SMOKE_PROBES",
                r#"{"example.com":{"url":"https://example.com/","expect_status":200}}"#,
            ),
            ("CORDON_GRANT_EXPIRY_MIN", r#"{"acme":60}"#),
        ]),
    )
    .unwrap();
    let shown = s.show();
    for name in setting_names() {
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with(&format!("{name} = ")) || l == format!("# {name} is unset")),
            "{name} missing from:\n{shown}"
        );
    }
    assert!(setting_names().len() >= 27, "{:?}", setting_names());
    assert!(shown.contains("master_key = \"***\""), "{shown}");
    assert!(!shown.contains(&"ab".repeat(32)), "{shown}");
    assert!(
        shown.contains("grant_expiry_min = { \"acme\" = 60 }"),
        "{shown}"
    );
    assert!(
        shown.contains("smoke_probes = { \"example.com\" = {"),
        "{shown}"
    );
    // What is shown loads back as the same settings.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, shown.as_bytes()).unwrap();
    let again = Settings::load_from(Some(file.path()), env(&[])).unwrap();
    assert_eq!(again.sessions.smoke_probes, s.sessions.smoke_probes);
    assert_eq!(again.sessions.tool_timeout_s, s.sessions.tool_timeout_s);
}

#[test]
fn smoke_probes_come_from_the_file_or_json_in_the_environment() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        "[smoke_probes.\"example.com\"]\nurl = \"https://example.com/me\"\nexpect_status = 200"
    )
    .unwrap();
    let s = Settings::load_from(Some(file.path()), env(&[])).unwrap();
    assert_eq!(
        s.sessions.smoke_probes["example.com"].expect_status,
        Some(200)
    );
    let json = r#"{"a.test": {"url": "http://a.test/", "expect_text": "hi"}}"#;
    let s = Settings::load_from(None, env(&[("CORDON_SMOKE_PROBES", json)])).unwrap();
    assert_eq!(
        s.sessions.smoke_probes["a.test"].expect_text.as_deref(),
        Some("hi")
    );
    let err = Settings::load_from(None, env(&[("CORDON_SMOKE_PROBES", "{oops")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("smoke_probes"), "{err}");
}

#[test]
fn inconsistent_session_limits_are_refused() {
    let err = load_err(&[("CORDON_SESSION_DEADLINE_S", "99999")]);
    assert!(err.starts_with("session_deadline_s"), "{err}");
    let err = load_err(&[("CORDON_POOL_SIZE", "x")]);
    assert!(err.contains("CORDON_POOL_SIZE"), "{err}");
    let s = Settings::load_from(None, env(&[("CORDON_POOL_SIZE", "3")])).unwrap();
    assert_eq!(s.sessions.pool_size, 3);
    assert_eq!(s.sessions.pool_refill_delay_ms, 1000, "the default");
    let s = Settings::load_from(None, env(&[("CORDON_POOL_REFILL_DELAY_MS", "0")])).unwrap();
    assert_eq!(s.sessions.pool_refill_delay_ms, 0);
    let err = load_err(&[("CORDON_POOL_REFILL_DELAY_MS", "600000")]);
    assert!(err.starts_with("pool_refill_delay_ms"), "{err}");
    let err = load_err(&[("CORDON_POOL_REFILL_DELAY_MS", "-1")]);
    assert!(err.contains("CORDON_POOL_REFILL_DELAY_MS"), "{err}");
    let s = Settings::load_from(None, env(&[])).unwrap();
    assert_eq!(s.egress.egress_log_retention_days, 30, "the default");
    let err = load_err(&[("CORDON_EGRESS_LOG_RETENTION_DAYS", "0")]);
    assert!(err.starts_with("egress_log_retention_days"), "{err}");
}

#[test]
fn the_master_key_file_defaults_into_the_data_dir_and_can_be_moved() {
    let s = Settings::load_from(None, env(&[("CORDON_DATA_DIR", "/srv/cordon")])).unwrap();
    assert_eq!(s.master_key_file(), PathBuf::from("/srv/cordon/master.key"));
    assert!(
        s.show()
            .contains("master_key_file = \"/srv/cordon/master.key\""),
        "{}",
        s.show()
    );
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "master_key_file = \"/etc/cordon/key\"").unwrap();
    let s = Settings::load_from(Some(file.path()), env(&[])).unwrap();
    assert_eq!(s.master_key_file(), PathBuf::from("/etc/cordon/key"));
    let s = Settings::load_from(
        Some(file.path()),
        env(&[("CORDON_MASTER_KEY_FILE", "/run/keys/cordon")]),
    )
    .unwrap();
    assert_eq!(s.master_key_file(), PathBuf::from("/run/keys/cordon"));
    assert!(s.show().contains("master_key_file = \"/run/keys/cordon\""));
}

#[test]
fn an_unknown_database_scheme_is_refused() {
    let err = Settings::load_from(None, env(&[("CORDON_DATABASE_URL", "mysql://x/y")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("database_url") && err.contains("mysql"),
        "{err}"
    );
}

#[test]
fn a_missing_config_file_is_an_error() {
    let err = Settings::load_from(Some(Path::new("/nonexistent/cordon.toml")), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn show_and_debug_hide_the_database_password() {
    let s = Settings::load_from(
        None,
        env(&[(
            "CORDON_DATABASE_URL",
            "postgres://cordon:hunter2@127.0.0.1:5432/cordon",
        )]),
    )
    .unwrap();
    assert!(!s.show().contains("hunter2"));
    assert!(!format!("{s:?}").contains("hunter2"));
    assert!(
        s.show()
            .contains("postgres://cordon:***@127.0.0.1:5432/cordon"),
        "{}",
        s.show()
    );
}

/// A key, its value in `cordon.toml`, its value as `CORDON_<KEY>`, and the
/// `CORDON_*` variables that value needs beside it.
type KeyCase = (
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// Every setting Cordon had when the sections moved to their owners, with
/// a value other than its default as `cordon.toml` writes it and as its
/// `CORDON_*` variable does, and the other settings that value needs to
/// pass the checks. The names are written out here: a setting renamed,
/// dropped or added without this table fails
/// `every_setting_of_today_loads_from_the_file_and_the_environment`.
#[rustfmt::skip]
const EVERY_SETTING: &[KeyCase] = &[
    ("advertise_url", r#""http://10.0.0.7:8080""#, "http://10.0.0.7:8080", &[]),
    ("approval_timeout_s", "90", "90", &[]),
    ("bind", r#""127.0.0.1:9999""#, "127.0.0.1:9999", &[]),
    ("chromium_path", r#""/opt/chromium""#, "/opt/chromium", &[]),
    ("cluster_secret", r#""0123456789abcdef0123456789abcdef""#, "0123456789abcdef0123456789abcdef", &[]),
    ("dashboard_idle_minutes", "45", "45", &[]),
    ("dashboard_session_hours", "24", "24", &[]),
    ("data_dir", r#""/srv/cordon""#, "/srv/cordon", &[]),
    ("database_url", r#""postgres://c:pw@127.0.0.1:5432/c""#, "postgres://c:pw@127.0.0.1:5432/c", &[]),
    ("download_max_mb", "200", "200", &[]),
    ("download_session_max_mb", "2048", "2048", &[]),
    ("download_transfer", r#""cdp""#, "cdp", &[]),
    ("egress_allow", r#"["127.0.0.1:8000"]"#, "127.0.0.1:8000", &[]),
    ("egress_bind_host", r#""::1""#, "::1", &[]),
    ("egress_log_retention_days", "60", "60", &[]),
    ("egress_resolver", r#""loopback-only""#, "loopback-only", &[]),
    ("exec_create", r#""/bin/true""#, "/bin/true", &[]),
    ("exec_destroy", r#""/bin/true""#, "/bin/true", &[]),
    ("grant_expiry_min", "{ acme = 60 }", r#"{"acme": 60}"#, &[]),
    ("kube_cdp_port", "9333", "9333", &[]),
    ("kube_deployment", r#""other""#, "other", &[]),
    ("kube_egress_host", r#""10.1.2.3""#, "10.1.2.3", &[]),
    ("kube_namespace", r#""browsers""#, "browsers", &[]),
    ("kube_pod_template", r#""/etc/cordon/pod.yaml""#, "/etc/cordon/pod.yaml", &[]),
    ("kube_ready_timeout_s", "120", "120", &[]),
    ("live_jpeg_quality", "80", "80", &[]),
    ("live_max_height", "720", "720", &[]),
    ("live_max_width", "1280", "1280", &[]),
    ("log_format", r#""json""#, "json", &[]),
    ("log_level", r#""cordon=debug,info""#, "cordon=debug,info", &[]),
    ("master_key", r#""abababababababababababababababababababababababababababababababab""#, "abababababababababababababababababababababababababababababababab", &[]),
    ("master_key_file", r#""/etc/cordon/key""#, "/etc/cordon/key", &[]),
    ("max_sessions", "200", "200", &[]),
    ("max_sessions_per_tenant", "20", "20", &[]),
    ("model_api_key", r#""sk-test""#, "sk-test", &[]),
    ("model_base_url", r#""http://127.0.0.1:9/v1""#, "http://127.0.0.1:9/v1", &[]),
    ("model_coordinates", r#""relative1000""#, "relative1000", &[]),
    ("model_name", r#""other-model""#, "other-model", &[]),
    ("model_timeout_s", "30", "30", &[]),
    ("pool_refill_delay_ms", "500", "500", &[]),
    ("pool_size", "3", "3", &[]),
    ("public_url", r#""https://cordon.example.com""#, "https://cordon.example.com", &[]),
    ("recording_quota_mb", "100", "100", &[]),
    ("recording_retention_days", "3", "3", &[]),
    ("refresh_deadline_s", "300", "300", &[]),
    ("replica_lost_after_s", "20", "20", &[]),
    ("replica_name", r#""r1""#, "r1", &[]),
    ("risk_destructive_words", r#"["wipe", "nuke"]"#, "wipe, nuke", &[]),
    ("risk_dry_run", "true", "true", &[]),
    ("risk_levels", r#"{ destructive_click = "critical" }"#, r#"{"destructive_click": "critical"}"#, &[]),
    ("risk_payment_words", r#"["zahlen"]"#, "zahlen", &[]),
    ("risk_sensitive_domains", r#"["bank.test"]"#, "bank.test", &[]),
    ("runtime_workers", "1", "1", &[]),
    ("sandbox_driver", r#""bwrap""#, "bwrap", &[]),
    ("session_cpu_weight", "200", "200", &[]),
    ("session_deadline_max_s", "7200", "7200", &[]),
    ("session_deadline_s", "900", "900", &[]),
    ("session_idle_s", "60", "60", &[]),
    ("session_limits", "false", "false", &[]),
    ("session_memory_mb", "256", "256", &[]),
    ("session_open_files_max", "4096", "4096", &[]),
    ("session_pids_max", "512", "512", &[]),
    ("session_tmpfs_mb", "64", "64", &[]),
    ("shared_dir", r#""/mnt/cordon""#, "/mnt/cordon", &[]),
    ("site_root", r#""/srv/site""#, "/srv/site", &[]),
    ("smoke_probes", r#"{ "a.test" = { url = "http://a.test/", expect_status = 200 } }"#, r#"{"a.test": {"url": "http://a.test/", "expect_status": 200}}"#, &[]),
    ("task_frame_settle_ms", "40", "40", &[]),
    ("task_frame_wait_ms", "250", "250", &[]),
    ("task_history_images", "4", "4", &[]),
    ("task_instruction_max_bytes", "4096", "4096", &[]),
    ("task_max_steps", "20", "20", &[]),
    ("tenant_limits", "{ acme = { memory_mb = 256 } }", r#"{"acme": {"memory_mb": 256}}"#, &[]),
    ("tenant_live_links", r#"{ acme = { frame_ancestors = ["https://app.acme.example"] } }"#, r#"{"acme": {"frame_ancestors": ["https://app.acme.example"]}}"#, &[]),
    ("tenant_risk", "{ acme = { dry_run = true } }", r#"{"acme": {"dry_run": true}}"#, &[]),
    ("tls_cert", r#""/etc/cordon/cert.pem""#, "/etc/cordon/cert.pem", &[("CORDON_TLS_KEY", "/etc/cordon/key.pem")]),
    ("tls_key", r#""/etc/cordon/key.pem""#, "/etc/cordon/key.pem", &[("CORDON_TLS_CERT", "/etc/cordon/cert.pem")]),
    ("tool_timeout_s", "60", "60", &[]),
    ("trusted_proxy", "true", "true", &[("CORDON_PUBLIC_URL", "https://cordon.example.com")]),
    ("upload_max_mb", "50", "50", &[]),
    ("upload_transfer", r#""page""#, "page", &[]),
];

#[test]
fn every_setting_of_today_loads_from_the_file_and_the_environment() {
    let names: Vec<&str> = EVERY_SETTING.iter().map(|(k, ..)| *k).collect();
    assert_eq!(
        setting_names(),
        names,
        "the sections' keys differ from today's: a setting was renamed, dropped or added \
         without updating EVERY_SETTING"
    );
    let defaults = serde_json::to_value(Settings::load_from(None, env(&[])).unwrap()).unwrap();
    for (key, in_file, in_env, needs) in EVERY_SETTING {
        let value = |s: &Settings| serde_json::to_value(s).unwrap()[*key].clone();
        let default = defaults[*key].clone();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "{key} = {in_file}").unwrap();
        let from_file = Settings::load_from(Some(file.path()), env(needs))
            .unwrap_or_else(|e| panic!("{key} from the file: {e}"));
        let var = format!("CORDON_{}", key.to_ascii_uppercase());
        let mut vars = env(needs);
        vars.push((var.clone(), (*in_env).to_owned()));
        let from_env = Settings::load_from(None, vars).unwrap_or_else(|e| panic!("{var}: {e}"));
        assert_ne!(
            value(&from_file),
            default,
            "{key}: the file's value did not arrive"
        );
        assert_eq!(
            value(&from_env),
            value(&from_file),
            "{var}: not the file's value"
        );
    }
}

#[test]
fn the_joined_schema_keeps_each_settings_doc_and_default() {
    let schema = schemars::schema_for!(Settings);
    let props = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .unwrap();
    assert_eq!(
        props.len(),
        EVERY_SETTING.len(),
        "flat, one property per key"
    );
    for (name, p) in props {
        let doc = p.get("description").and_then(|d| d.as_str()).unwrap_or("");
        assert!(!doc.trim().is_empty(), "{name} has no doc comment");
    }
    assert_eq!(props["pool_size"]["default"], 2);
    assert_eq!(props["kube_cdp_port"]["default"], 9222);
    assert_eq!(props["risk_dry_run"]["default"], false);
    assert_eq!(props["pool_size"]["type"], "integer");
    assert_eq!(props["session_limits"]["type"], "boolean");
}

#[test]
fn an_unknown_key_in_the_file_is_refused_naming_it_and_the_file() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "pool_size = 3\nbnd = \"127.0.0.1:1\"").unwrap();
    let err = Settings::load_from(Some(file.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("bnd: unknown field: found `bnd`, expected `one of `advertise_url`"),
        "{err}"
    );
    assert!(
        err.ends_with(&format!("(from {})", file.path().display())),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
    // A key inside a section's table is its own type's to refuse.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "[tenant_limits.acme]\nswap = 5").unwrap();
    let err = Settings::load_from(Some(file.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("tenant_limits"), "{err}");
}

#[test]
fn a_value_of_the_wrong_type_names_its_key_and_source_in_every_section() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "task_max_steps = \"many\"").unwrap();
    let err = Settings::load_from(Some(file.path()), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("task_max_steps: "), "{err}");
    assert!(err.contains(&file.path().display().to_string()), "{err}");
    for var in [
        "CORDON_KUBE_CDP_PORT",
        "CORDON_LIVE_JPEG_QUALITY",
        "CORDON_RECORDING_QUOTA_MB",
        "CORDON_APPROVAL_TIMEOUT_S",
        "CORDON_DASHBOARD_IDLE_MINUTES",
        "CORDON_REPLICA_LOST_AFTER_S",
    ] {
        let err = load_err(&[(var, "lots")]);
        let key = var.trim_start_matches("CORDON_").to_ascii_lowercase();
        assert!(err.starts_with(&format!("{key}: ")), "{var}: {err}");
        assert!(err.ends_with(&format!("(from {var})")), "{var}: {err}");
    }
}

mod risk {
    //! The risk settings as they load (policy/rules.rs owns what they mean).
    use std::time::Duration;

    use super::*;
    use crate::policy::{Level, Policy, Rule};

    fn load(pairs: &[(&str, &str)]) -> anyhow::Result<Settings> {
        Settings::load_from(
            None,
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    #[test]
    fn defaults_hold_the_word_lists_and_the_rules_levels() {
        let s = load(&[]).unwrap();
        let p = Policy::from_settings(&s.risk_settings());
        let r = p.rules("acme");
        assert!(r.destructive.contains(&"close account".to_owned()));
        assert!(r.payment.contains(&"place order".to_owned()));
        assert!(r.sensitive_domains.is_empty());
        assert_eq!(r.level(Rule::DestructiveClick), Level::High);
        assert_eq!(r.level(Rule::PaymentClick), Level::Critical);
        assert_eq!(r.timeout, Duration::from_secs(60));
        assert!(!r.dry_run);
    }

    #[test]
    fn a_tenants_rules_override_the_settings_and_others_keep_them() {
        let s = load(&[
            ("CORDON_RISK_SENSITIVE_DOMAINS", "Bank.test, .pay.test"),
            ("CORDON_RISK_LEVELS", r#"{"destructive_click": "critical"}"#),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"dry_run": true, "approval_timeout_s": 5, "levels": {"payment_click": "medium"}, "payment_words": ["Zahlen"]}}"#,
            ),
        ])
        .unwrap();
        let p = Policy::from_settings(&s.risk_settings());
        let other = p.rules("other");
        assert_eq!(other.sensitive_domains, ["bank.test", "pay.test"]);
        assert_eq!(other.level(Rule::DestructiveClick), Level::Critical);
        assert!(!other.dry_run);
        let acme = p.rules("acme");
        assert!(acme.dry_run);
        assert_eq!(acme.timeout, Duration::from_secs(5));
        assert_eq!(acme.level(Rule::PaymentClick), Level::Medium);
        assert_eq!(acme.level(Rule::DestructiveClick), Level::Critical);
        assert_eq!(acme.payment, ["zahlen"]);
    }

    #[test]
    fn nonsense_is_refused_naming_the_setting() {
        for (key, value, starts) in [
            ("CORDON_APPROVAL_TIMEOUT_S", "0", "approval_timeout_s:"),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"approval_timeout_s": 99999}}"#,
                "tenant_risk.acme.approval_timeout_s:",
            ),
            (
                "CORDON_TENANT_RISK",
                r#"{"../x": {"dry_run": true}}"#,
                "tenant_risk:",
            ),
            (
                "CORDON_TENANT_RISK",
                r#"{"acme": {"bogus": 1}}"#,
                "tenant_risk",
            ),
            (
                "CORDON_RISK_LEVELS",
                r#"{"destructive_click": "huge"}"#,
                "risk_levels",
            ),
        ] {
            let err = load(&[(key, value)]).unwrap_err().to_string();
            assert!(err.starts_with(starts), "{value}: {err}");
        }
    }
}

#[test]
fn a_misspelled_variable_of_any_section_is_named_with_the_one_it_meant() {
    let warned = misspelled_env(
        [
            "CORDON_KUBE_CDP_PRT",
            "CORDON_RISK_DRYRUN",
            "CORDON_TASK_MAX_STEP",
            "CORDON_LIVE_JPEG_QUALTY",
            "CORDON_REPLICA_LOST_AFTER",
            "CORDON_MASTERKEY_FILE",
            "CORDON_PUBLIC_URI",
        ]
        .map(|n| (n.to_owned(), "x".to_owned())),
    );
    assert_eq!(
        warned,
        [
            ("CORDON_KUBE_CDP_PRT", "CORDON_KUBE_CDP_PORT"),
            ("CORDON_LIVE_JPEG_QUALTY", "CORDON_LIVE_JPEG_QUALITY"),
            ("CORDON_MASTERKEY_FILE", "CORDON_MASTER_KEY_FILE"),
            ("CORDON_PUBLIC_URI", "CORDON_PUBLIC_URL"),
            ("CORDON_REPLICA_LOST_AFTER", "CORDON_REPLICA_LOST_AFTER_S"),
            ("CORDON_RISK_DRYRUN", "CORDON_RISK_DRY_RUN"),
            ("CORDON_TASK_MAX_STEP", "CORDON_TASK_MAX_STEPS"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn runtime_workers_picks_the_runtime_and_refuses_absurd_counts() {
    use tokio::runtime::RuntimeFlavor;
    let of = |n: &str| {
        let s = Settings::load_from(None, env(&[("CORDON_RUNTIME_WORKERS", n)])).unwrap();
        let rt = s.server.runtime().unwrap();
        (rt.handle().runtime_flavor(), rt.metrics().num_workers())
    };
    assert_eq!(of("1"), (RuntimeFlavor::CurrentThread, 1));
    assert_eq!(of("3"), (RuntimeFlavor::MultiThread, 3));
    // 0: one per four cores, and one thread that runs everything below 8.
    let cores = std::thread::available_parallelism().unwrap().get();
    let auto = if cores < 8 {
        (RuntimeFlavor::CurrentThread, 1)
    } else {
        (RuntimeFlavor::MultiThread, cores / 4)
    };
    assert_eq!(of("0"), auto);
    let s = Settings::load_from(None, env(&[])).unwrap();
    let threads = [1, 2, 4, 7, 8, 15, 16, 64].map(|c| s.server.runtime_threads(c));
    assert_eq!(threads, [1, 1, 1, 1, 2, 3, 4, 16]);
    let s = Settings::load_from(None, env(&[("CORDON_RUNTIME_WORKERS", "3")])).unwrap();
    assert_eq!(s.server.runtime_threads(64), 3);
    let err = load_err(&[("CORDON_RUNTIME_WORKERS", "5000")]);
    assert!(err.contains("runtime_workers"), "{err}");
    let err = load_err(&[("CORDON_RUNTIME_WORKERS", "-1")]);
    assert!(err.contains("runtime_workers"), "{err}");
}
