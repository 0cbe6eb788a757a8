//! `cordon creds …` and `cordon keys rotate` as an operator runs them: the
//! real binary, a fresh data dir (SQLite), canary cookie values that must
//! never show up in plaintext.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use cordon::crypto::MasterKey;
use cordon::store::Store;
use secrecy::SecretString;

use super::{canary, storage_state};

/// A data dir for the binary: `<tmp>/data`, default SQLite database.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Self {
        let host = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        let out = host.run(&[], &["tenant", "create", "acme"]);
        assert!(out.status.success(), "{}", stderr(&out));
        host
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn key_file(&self) -> PathBuf {
        self.data().join("master.key")
    }

    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        self.run_logged(env, args, "warn")
    }

    fn run_logged(&self, env: &[(&str, &str)], args: &[&str], level: &str) -> Output {
        let mut env = env.to_vec();
        env.push(("CORDON_LOG_LEVEL", level));
        crate::helpers::cordon_cli(self.dir.path(), &env, args)
    }

    async fn store(&self) -> Store {
        let url = format!("sqlite://{}/cordon.db", self.data().display());
        Store::connect(&SecretString::from(url)).await.unwrap()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn holds(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Neither output stream holds `secret` (checked without printing it).
fn quiet_about(out: &Output, secret: &str) {
    assert!(
        !holds(&out.stdout, secret) && !holds(&out.stderr, secret),
        "a secret appeared in the command's output"
    );
}

fn assert_clean_failure(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
    assert!(!err.contains("panicked"), "{err}");
    // One line; then, when Cordon knows what to do about it, one `fix:` line.
    let lines: Vec<&str> = err.trim_end().lines().collect();
    assert!(
        lines.len() == 1 || (lines.len() == 2 && lines[1].starts_with("fix: ")),
        "one line (and a fix) expected: {err:?}"
    );
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn key_text() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

fn key_id(text: &str) -> String {
    MasterKey::from_text(text).unwrap().id().to_string()
}

#[tokio::test]
async fn the_cli_imports_lists_exports_and_deletes_a_credential() {
    let host = Host::new();
    let secret = canary();
    let file = host.write("state.json", &storage_state("example.com", &secret));
    let creds = |args: &[&str]| -> Output {
        let mut all = vec!["creds"];
        all.extend_from_slice(args);
        let out = host.run(&[], &all);
        quiet_about(&out, &secret);
        out
    };

    let out = creds(&[
        "import",
        "--tenant",
        "acme",
        "--domain",
        "example.com",
        &file,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("imported 2 cookie(s) for example.com (tenant acme)"));
    assert_eq!(mode(&host.key_file()), 0o600);

    let out = creds(&["list"]);
    let listed = stdout(&out);
    assert!(
        listed.contains("\tacme\texample.com\t2 cookies\t0 storage items\timport\t"),
        "{listed}"
    );
    assert!(listed.contains("injected never"), "{listed}");

    let exported = host.dir.path().join("out.json");
    let out_arg = exported.display().to_string();
    let out = creds(&[
        "export",
        "--tenant",
        "acme",
        "--domain",
        "example.com",
        "--out",
        &out_arg,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&exported), 0o600);
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&exported).unwrap()).unwrap();
    let cookies = state["cookies"].as_array().unwrap();
    assert_eq!(cookies.len(), 2);
    assert!(
        cookies
            .iter()
            .any(|c| c["value"].as_str() == Some(secret.as_str())),
        "the exported file lacks the cookie"
    );
    assert_eq!(state["origins"], serde_json::json!([]));
    // An export never overwrites a file.
    let out = creds(&[
        "export",
        "--tenant",
        "acme",
        "--domain",
        "example.com",
        "--out",
        &out_arg,
    ]);
    assert_clean_failure(&out, "out.json");

    let out = creds(&["delete", "--tenant", "acme", "--domain", "example.com"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&creds(&["list"])), "");
    let out = creds(&["delete", "--tenant", "acme", "--domain", "example.com"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    let store = host.store().await;
    let events = store.audit_page(0, 100).await.unwrap();
    let actions: Vec<_> = events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        vec![
            "tenant.create",
            "vault.import",
            "vault.export",
            "vault.delete"
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e.actor == "cli" && !e.params.contains(&secret))
    );
    store.close().await;
}

#[test]
fn a_canary_cookie_value_never_appears_in_plaintext_in_the_data_dir() {
    let host = Host::new();
    let secret = canary();
    let json = host.write("state.json", &storage_state("example.com", &secret));
    let txt = host.write(
        "cookies.txt",
        format!(
            "# Netscape HTTP Cookie File\n#HttpOnly_.other.com\tTRUE\t/\tTRUE\t0\tsid\t{secret}\n"
        )
        .as_bytes(),
    );
    let cdp = host.write(
        "cdp.json",
        &serde_json::to_vec(
            &serde_json::json!([{"name": "t", "value": secret, "domain": "third.net"}]),
        )
        .unwrap(),
    );

    for (domain, file) in [
        ("example.com", &json),
        ("other.com", &txt),
        ("third.net", &cdp),
    ] {
        let out = host.run_logged(
            &[],
            &[
                "creds", "import", "--tenant", "acme", "--domain", domain, file,
            ],
            "debug",
        );
        assert!(out.status.success(), "{}", stderr(&out));
        quiet_about(&out, &secret);
    }
    let out = host.run_logged(&[], &["creds", "list"], "debug");
    quiet_about(&out, &secret);
    assert_eq!(stdout(&out).lines().count(), 3);
    let out = host.run(&[], &["audit", "verify"]);
    assert!(out.status.success(), "{}", stdout(&out));

    let all = files(&host.data());
    assert!(all.iter().any(|p| p.ends_with("cordon.db")));
    for path in all {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            !holds(&bytes, &secret),
            "{} holds the cookie value in plaintext",
            path.display()
        );
    }
}

#[test]
fn a_key_file_readable_by_others_is_refused_naming_the_file() {
    let host = Host::new();
    let out = host.run(&[], &["creds", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::set_permissions(host.key_file(), std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = host.run(&[], &["creds", "list"]);

    // The data dir is the relative default, so the file is named as `data/master.key`.
    assert_clean_failure(&out, "master key file data/master.key has mode 0644");
    assert!(stderr(&out).contains("chmod 600"), "{}", stderr(&out));
    let out = host.run(&[], &["keys", "rotate"]);
    assert_clean_failure(&out, "master.key");
}

#[test]
fn a_wrong_master_key_is_refused_naming_the_key_id() {
    let host = Host::new();
    let (right, wrong) = (key_text(), key_text());
    let secret = canary();
    let file = host.write("state.json", &storage_state("example.com", &secret));
    let out = host.run(
        &[("CORDON_MASTER_KEY", &right)],
        &[
            "creds",
            "import",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            &file,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !host.key_file().exists(),
        "a key from the setting needs no file"
    );

    let out_file = host.dir.path().join("out.json").display().to_string();
    for args in [
        &[
            "creds",
            "export",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            "--out",
            out_file.as_str(),
        ][..],
        &[
            "creds",
            "import",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            file.as_str(),
        ][..],
    ] {
        let out = host.run(&[("CORDON_MASTER_KEY", &wrong)], args);
        assert_clean_failure(&out, &key_id(&right));
        assert!(stderr(&out).contains(&key_id(&wrong)), "{}", stderr(&out));
        quiet_about(&out, &secret);
        quiet_about(&out, &right);
        quiet_about(&out, &wrong);
    }
    assert!(
        !Path::new(&out_file).exists(),
        "nothing is exported under a wrong key"
    );
    let out = host.run(&[("CORDON_MASTER_KEY", "not-a-key")], &["creds", "list"]);
    assert_clean_failure(&out, "CORDON_MASTER_KEY");
}

#[test]
fn keys_rotate_reencrypts_and_keeps_the_old_key_file() {
    let host = Host::new();
    let secret = canary();
    let file = host.write("state.json", &storage_state("example.com", &secret));
    let out = host.run(
        &[],
        &[
            "creds",
            "import",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            &file,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let old = MasterKey::from_text(&std::fs::read_to_string(host.key_file()).unwrap()).unwrap();

    let out = host.run(&[], &["keys", "rotate"]);

    assert!(out.status.success(), "{}", stderr(&out));
    let new = MasterKey::from_text(&std::fs::read_to_string(host.key_file()).unwrap()).unwrap();
    assert_ne!(old.id(), new.id());
    let text = stdout(&out);
    assert!(
        text.contains(&format!("from key id {} to key id {}", old.id(), new.id())),
        "{text}"
    );
    let kept = host.data().join(format!("master.key.{}", old.id()));
    assert_eq!(
        MasterKey::from_text(&std::fs::read_to_string(&kept).unwrap())
            .unwrap()
            .id(),
        old.id()
    );
    assert_eq!(mode(&kept), 0o600);
    assert_eq!(mode(&host.key_file()), 0o600);
    assert!(!host.data().join("master.key.next").exists());
    let listed = stdout(&host.run(&[], &["creds", "list"]));
    assert!(listed.contains(&format!("key {}", new.id())), "{listed}");
    let out_file = host.dir.path().join("out.json");
    let out = host.run(
        &[],
        &[
            "creds",
            "export",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            "--out",
            &out_file.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        holds(&std::fs::read(&out_file).unwrap(), &secret),
        "the cookie did not survive rotation"
    );

    // A key given by setting is rotated to a key the operator supplies.
    let supplied = key_text();
    let new_file = host.write("new.key", supplied.as_bytes());
    std::fs::set_permissions(&new_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let env_key = std::fs::read_to_string(host.key_file()).unwrap();
    let env = [("CORDON_MASTER_KEY", env_key.trim())];
    let out = host.run(&env, &["keys", "rotate"]);
    assert_clean_failure(&out, "--new-key-file");
    let out = host.run(&env, &["keys", "rotate", "--new-key-file", &new_file]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains(&format!(
        "set CORDON_MASTER_KEY to the new key (key id {})",
        key_id(&supplied)
    )));
    quiet_about(&out, &supplied);
    let out = host.run(
        &[("CORDON_MASTER_KEY", &supplied)],
        &[
            "creds",
            "export",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            "--out",
            &host.dir.path().join("again.json").display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn importing_foreign_cookies_fails_listing_them_by_name_and_domain() {
    let host = Host::new();
    let secret = canary();
    let file = host.write(
        "mixed.json",
        &serde_json::to_vec(&serde_json::json!([
            {"name": "sid", "value": "ok", "domain": ".example.com"},
            {"name": "_ga", "value": secret, "domain": ".tracker.net"}
        ]))
        .unwrap(),
    );
    let args = [
        "creds",
        "import",
        "--tenant",
        "acme",
        "--domain",
        "example.com",
        file.as_str(),
    ];

    let out = host.run(&[], &args);

    assert_clean_failure(&out, "\"_ga\"@.tracker.net");
    quiet_about(&out, &secret);
    assert_eq!(stdout(&host.run(&[], &["creds", "list"])), "");

    let mut dropping = args.to_vec();
    dropping.insert(2, "--drop-foreign");
    let out = host.run(&[], &dropping);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("skipped 1 cookie(s) of other sites: \"_ga\"@.tracker.net"));
    quiet_about(&out, &secret);
}

#[test]
fn bad_imports_are_one_line_errors() {
    let host = Host::new();
    let big = host.dir.path().join("big.json");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(cordon::vault::MAX_IMPORT_BYTES + 1)
        .unwrap();
    let secret = canary();
    let malformed = host.write(
        "bad.json",
        format!(r#"[{{"name":"a","value":{{"v":"{secret}"}}}}]"#).as_bytes(),
    );
    let good = host.write("good.json", &storage_state("example.com", &secret));
    let big = big.display().to_string();
    for (tenant, domain, file, needle) in [
        ("acme", "example.com", big.as_str(), "5 MiB"),
        (
            "acme",
            "example.com",
            malformed.as_str(),
            "malformed cookie JSON at line 1",
        ),
        (
            "acme",
            "example.com",
            "missing.json",
            "cannot read missing.json",
        ),
        (
            "ghost",
            "example.com",
            good.as_str(),
            "tenant ghost does not exist",
        ),
        ("acme", "https://example.com", good.as_str(), "domain:"),
        ("Acme!", "example.com", good.as_str(), "tenant id:"),
    ] {
        let out = host.run(
            &[],
            &[
                "creds", "import", "--tenant", tenant, "--domain", domain, file,
            ],
        );
        assert_clean_failure(&out, needle);
        quiet_about(&out, &secret);
    }
    assert_eq!(stdout(&host.run(&[], &["creds", "list"])), "");
}
