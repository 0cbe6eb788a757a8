//! TOTP seeds in the vault on both backends: stored sealed and bound to
//! their row, listed without the secret, chosen per page host, resealed by
//! a key rotation, refused field by field for bad input (nothing stored),
//! audited without the secret.

use cordon::audit::Actor;
use cordon::crypto::{Keyring, MasterKey};
use cordon::vault::totp::{Params, PickError, SeedSource, code_at};
use cordon::vault::{self, Vault, VaultError};

use super::setup_keyed;
use crate::helpers::{Backend, both_backends, domain, tenant};

both_backends!(
    a_seed_is_stored_sealed_listed_without_its_secret_and_picked_by_host,
    bad_seeds_are_refused_by_field_and_store_nothing,
    a_rotation_reseals_seeds_and_a_moved_ciphertext_does_not_open,
);

/// A random base32 secret of 20 bytes (never printed).
pub(crate) fn random_secret() -> String {
    const A: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    (0..32)
        .map(|_| A[usize::from(rand::random::<u8>() % 32)] as char)
        .collect()
}

fn uri(secret: &str) -> String {
    format!(
        "otpauth://totp/Example:alice?secret={secret}&issuer=Example&algorithm=SHA256&digits=8&period=30"
    )
}

async fn a_seed_is_stored_sealed_listed_without_its_secret_and_picked_by_host(backend: Backend) {
    let (_db, store, key) = setup_keyed(backend, &["acme", "beta"]).await;
    let vault = Vault::new(store.clone(), key);
    let secret = random_secret();
    let admin = vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "admin account",
            SeedSource::Uri(&uri(&secret)),
        )
        .await
        .unwrap();
    assert_eq!(
        (admin.algorithm.as_str(), admin.digits, admin.period),
        ("SHA256", 8, 30)
    );
    // The same label twice for a domain: a typed conflict; another label
    // and another tenant's seed are fine.
    let again = vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "admin account",
            SeedSource::Uri(&uri(&random_secret())),
        )
        .await
        .unwrap_err();
    assert_eq!(again.code(), "conflict", "{again}");
    vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "billing",
            SeedSource::Base32(&random_secret(), Params::default()),
        )
        .await
        .unwrap();
    vault
        .totp_add(
            &Actor::Cli,
            &tenant("beta"),
            &domain("example.com"),
            "beta admin",
            SeedSource::Base32(&random_secret(), Params::default()),
        )
        .await
        .unwrap();

    // Stored sealed: no row holds the secret's bytes.
    let rows = store
        .totp_for_domains(&tenant("acme"), &["example.com".into()])
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    let plain = seed_bytes(&secret);
    for r in &rows {
        assert!(
            !r.sealed
                .ciphertext
                .windows(plain.len())
                .any(|w| w == plain.as_slice()),
            "a ciphertext holds the secret in the clear"
        );
    }
    let listed = vault.totp_list(&tenant("acme")).await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(),
        ["admin account", "billing"]
    );

    // Picked by host: the domain and its subdomains, within the session's
    // domains and the tenant; several need a label.
    let domains = vec!["example.com".to_owned()];
    let picked = vault
        .totp_pick(
            &tenant("acme"),
            &domains,
            "login.example.com",
            Some("admin account"),
        )
        .await
        .unwrap();
    assert_eq!(picked.info.id, admin.id);
    assert_eq!(picked.seed.secret(), plain.as_slice());
    // The code is the one an independent computation gives.
    assert_eq!(
        code_at(&picked.seed, 1_700_000_000).digits(),
        crate::totp::independent_code(&plain, 1_700_000_000, 8)
    );
    assert!(matches!(
        vault
            .totp_pick(&tenant("acme"), &domains, "example.com", None)
            .await,
        Err(PickError::Ambiguous { .. })
    ));
    assert!(matches!(
        vault
            .totp_pick(&tenant("acme"), &domains, "example.com", Some("nope"))
            .await,
        Err(PickError::UnknownLabel { .. })
    ));
    for (host, doms) in [
        ("evilexample.com", domains.clone()),
        ("example.com.evil.net", domains.clone()),
        ("example.com", vec!["other.com".to_owned()]),
    ] {
        assert!(
            matches!(
                vault
                    .totp_pick(&tenant("acme"), &doms, host, Some("admin account"))
                    .await,
                Err(PickError::UnknownLabel { .. } | PickError::NoSeed { .. })
            ),
            "{host} with {doms:?}"
        );
    }
    let beta = vault
        .totp_pick(&tenant("beta"), &domains, "example.com", None)
        .await
        .unwrap();
    assert_eq!(beta.info.label, "beta admin");

    // Deleted by id within its tenant only; audited without the secret.
    let other = vault
        .totp_delete(&Actor::Cli, &tenant("beta"), &admin.id.parse().unwrap())
        .await
        .unwrap_err();
    assert!(matches!(other, VaultError::TotpNotFound(_)), "{other}");
    vault
        .totp_delete(&Actor::Cli, &tenant("acme"), &admin.id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(vault.totp_list(&tenant("acme")).await.unwrap().len(), 1);
    let audit: String = store
        .audit_page(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {}\n", e.action, e.params))
        .collect();
    assert!(audit.contains("vault.totp.add") && audit.contains("vault.totp.delete"));
    assert!(!audit.contains(&secret), "the audit log holds a secret");
}

/// The bytes of a base32 secret, decoded independently of Cordon.
pub(crate) fn seed_bytes(b32: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u64, 0u32);
    for c in b32.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'2'..=b'7' => c - b'2' + 26,
            _ => panic!("not base32"),
        };
        acc = (acc << 5) | u64::from(v);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

async fn bad_seeds_are_refused_by_field_and_store_nothing(backend: Backend) {
    let (_db, store, key) = setup_keyed(backend, &["acme"]).await;
    let vault = Vault::new(store.clone(), key);
    let ok = random_secret();
    let long_label = "x".repeat(10 * 1024);
    let not_qr = {
        // A real PNG with no QR code in it.
        let img = image::GrayImage::from_pixel(64, 64, image::Luma([255]));
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    };
    let huge = vec![0u8; 50 * 1024 * 1024];
    let params = |digits, period| Params {
        digits,
        period,
        ..Params::default()
    };
    let cases: Vec<(&str, SeedSource<'_>, &str)> = vec![
        ("label", SeedSource::Base32(&ok, Params::default()), "uri"),
        ("label", SeedSource::Uri("otpauth://totp/x"), "secret"),
        (
            "label",
            SeedSource::Uri("mailto:someone@example.com"),
            "uri",
        ),
        (
            "label",
            SeedSource::Uri("otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP"),
            "uri",
        ),
        (
            "label",
            SeedSource::Base32("not base 32 !", Params::default()),
            "secret",
        ),
        ("label", SeedSource::Base32(&ok, params(0, 30)), "digits"),
        ("label", SeedSource::Base32(&ok, params(20, 30)), "digits"),
        ("label", SeedSource::Base32(&ok, params(6, 0)), "period"),
        ("label", SeedSource::QrImage(&not_qr), "image"),
        ("label", SeedSource::QrImage(b"not an image"), "image"),
        ("label", SeedSource::QrImage(&huge), "image"),
        (
            &long_label,
            SeedSource::Base32(&ok, Params::default()),
            "label",
        ),
        ("", SeedSource::Base32(&ok, Params::default()), "label"),
    ];
    for (i, (label, source, field)) in cases.into_iter().enumerate() {
        // The first case is the control: it is stored.
        let res = vault
            .totp_add(
                &Actor::Cli,
                &tenant("acme"),
                &domain("example.com"),
                label,
                source,
            )
            .await;
        if i == 0 {
            res.unwrap();
            continue;
        }
        match res {
            Err(VaultError::Totp(e)) => {
                assert_eq!(e.field, field, "case {i}: {e}");
                assert!(!e.to_string().contains(&ok), "case {i} echoes the secret");
            }
            other => panic!("case {i}: expected a field error on {field}, got {other:?}"),
        }
    }
    assert_eq!(
        vault.totp_list(&tenant("acme")).await.unwrap().len(),
        1,
        "only the control was stored"
    );
    let unknown = vault
        .totp_add(
            &Actor::Cli,
            &tenant("nobody"),
            &domain("example.com"),
            "x",
            SeedSource::Base32(&ok, Params::default()),
        )
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "unknown_tenant");
}

async fn a_rotation_reseals_seeds_and_a_moved_ciphertext_does_not_open(backend: Backend) {
    let (db, store, old_key) = setup_keyed(backend, &["acme"]).await;
    let vault = Vault::new(store.clone(), old_key.clone());
    let secret = random_secret();
    let a = vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "a",
            SeedSource::Base32(&secret, Params::default()),
        )
        .await
        .unwrap();
    let b = vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "b",
            SeedSource::Base32(&random_secret(), Params::default()),
        )
        .await
        .unwrap();
    // b's ciphertext copied onto a's row does not open (bound to its id).
    db.raw(&format!(
        "UPDATE vault_totp SET ciphertext = (SELECT ciphertext FROM vault_totp WHERE id = '{}'), \
         nonce = (SELECT nonce FROM vault_totp WHERE id = '{}') WHERE id = '{}'",
        b.id, b.id, a.id
    ))
    .await
    .unwrap();
    let domains = vec!["example.com".to_owned()];
    let moved = vault
        .totp_pick(&tenant("acme"), &domains, "example.com", Some("a"))
        .await;
    assert!(
        matches!(moved, Err(PickError::Vault(VaultError::Crypto(_)))),
        "a moved ciphertext opened: {:?}",
        moved.err()
    );
    vault
        .totp_delete(&Actor::Cli, &tenant("acme"), &a.id.parse().unwrap())
        .await
        .unwrap();
    vault
        .totp_add(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            "a",
            SeedSource::Base32(&secret, Params::default()),
        )
        .await
        .unwrap();

    // Rotation: every seed under the new key, still opening to the same
    // secret; the old key no longer matches the rows.
    let new_key = MasterKey::generate();
    let done = vault::rotate(
        &store,
        &Keyring::in_memory(old_key),
        new_key.clone(),
        &Actor::Cli,
    )
    .await
    .unwrap();
    assert_eq!(done.credentials, 2, "both seeds resealed");
    for t in store.totp_list(None).await.unwrap() {
        assert_eq!(t.key_id, new_key.id().as_str());
    }
    let new_vault = Vault::new(store.clone(), new_key);
    new_vault.check_keys().await.unwrap();
    let picked = new_vault
        .totp_pick(&tenant("acme"), &domains, "example.com", Some("a"))
        .await
        .unwrap();
    assert_eq!(picked.seed.secret(), seed_bytes(&secret).as_slice());
    assert!(
        vault.check_keys().await.is_err(),
        "the old key still matches"
    );
}

/// Runs the real binary in `dir` with `input` on stdin.
fn cli_with_stdin(dir: &std::path::Path, args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_cordon"))
        .current_dir(dir)
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("CORDON_MASTER_KEY")
        .env_remove("CORDON_MASTER_KEY_FILE")
        .env_remove("CORDON_DATA_DIR")
        .env_remove("CORDON_DATABASE_URL")
        .env("CORDON_LOG_LEVEL", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cordon runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `cordon creds totp add` reads the link or secret from stdin and echoes
/// neither; `list` shows metadata only; bad input exits non-zero naming
/// the field; `delete` removes by id.
#[test]
fn the_cli_adds_lists_and_deletes_seeds_without_showing_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::helpers::cordon_cli(dir.path(), &[], &["tenant", "create", "acme"]);
    assert!(out.status.success());
    let secret = random_secret();
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let add = |label: &str, input: &str, extra: &[&str]| {
        let mut args = vec![
            "creds",
            "totp",
            "add",
            "--tenant",
            "acme",
            "--domain",
            "example.com",
            "--label",
            label,
        ];
        args.extend_from_slice(extra);
        cli_with_stdin(dir.path(), &args, input)
    };
    let out = add("admin", &format!("{}\n", uri(&secret)), &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("SHA256, 8 digits, 30 s"),
        "{}",
        text(&out)
    );
    let out = add(
        "billing",
        &random_secret(),
        &["--digits", "7", "--period", "60"],
    );
    assert!(out.status.success(), "{}", text(&out));
    for (input, extra, field) in [
        ("not base32!", &[][..], "secret"),
        ("otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP", &[][..], "uri"),
        (secret.as_str(), &["--digits", "20"][..], "digits"),
        (secret.as_str(), &["--period", "0"][..], "period"),
        (secret.as_str(), &["--algorithm", "MD5"][..], "algorithm"),
    ] {
        let out = add("bad", input, extra);
        assert!(!out.status.success(), "{field}: accepted");
        assert!(text(&out).contains(field), "{field}: {}", text(&out));
        assert!(!text(&out).contains(&secret), "{field}: echoes the secret");
    }
    let out = add("admin", &uri(&random_secret()), &[]);
    assert!(!out.status.success(), "a taken label was accepted");
    assert!(text(&out).contains("already has"), "{}", text(&out));

    let out = crate::helpers::cordon_cli(
        dir.path(),
        &[],
        &["creds", "totp", "list", "--tenant", "acme"],
    );
    let listed = text(&out);
    assert!(out.status.success(), "{listed}");
    assert_eq!(listed.lines().count(), 2, "{listed}");
    assert!(
        listed.contains("admin") && listed.contains("7 digits\t60 s"),
        "{listed}"
    );
    assert!(!listed.contains(&secret));
    let id = listed
        .lines()
        .find(|l| l.contains("\tadmin\t"))
        .and_then(|l| l.split('\t').next())
        .unwrap()
        .to_owned();
    let out = crate::helpers::cordon_cli(
        dir.path(),
        &[],
        &["creds", "totp", "delete", "--tenant", "acme", &id],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = crate::helpers::cordon_cli(
        dir.path(),
        &[],
        &["creds", "totp", "delete", "--tenant", "acme", &id],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // A malformed id is refused as an unknown one is (the same exit code and
    // words, after the tenant's own check), and deletes nothing.
    let answer = |tenant: &str, id: &str| {
        let out = crate::helpers::cordon_cli(
            dir.path(),
            &[],
            &["creds", "totp", "delete", "--tenant", tenant, id],
        );
        (out.status.code(), text(&out).replace(id, "<id>"))
    };
    for tenant in ["acme", "nobody"] {
        let unknown = answer(tenant, &id);
        assert_ne!(unknown.0, Some(0), "{unknown:?}");
        for bad in [
            cordon::domain::SessionId::generate().to_string(),
            format!("x_{}", &id[3..]),
            format!("{id}a"),
            format!("tp_{}", "é".repeat(13)),
            id.to_uppercase(),
            "tp_".to_owned(),
        ] {
            assert_eq!(answer(tenant, &bad), unknown, "{tenant}: {bad:?}");
        }
    }
    let out = crate::helpers::cordon_cli(dir.path(), &[], &["creds", "totp", "list"]);
    assert_eq!(text(&out).lines().count(), 1);
}
