//! The credential vault on both backends: sealing, binding to the row,
//! wrong keys, rotation, selection for injection, audit. Cookie values are
//! random canaries; assertions check their absence (or compare them without
//! printing), never show them.

mod cli;
mod harvest;
pub(crate) mod totp;

use cordon::audit::{self, Actor, Verification};
use cordon::crypto::{CryptoError, Keyring, MasterKey};
use cordon::store::Store;
use cordon::vault::{self, ImportError, ImportOptions, Vault, VaultError};
use serde_json::json;

use crate::helpers::{Backend, TestDb, both_backends, domain, tenant};

both_backends!(
    an_imported_credential_is_stored_sealed_and_selected_for_injection,
    a_ciphertext_copied_onto_another_row_does_not_decrypt,
    reimporting_a_domain_replaces_its_cookies_in_the_same_row,
    foreign_cookies_refuse_the_import_and_store_nothing,
    unknown_tenants_are_a_typed_error,
    a_wrong_master_key_names_the_stored_key_id_and_decrypts_nothing,
    rotation_reseals_every_row_under_the_new_key,
    a_rotation_that_meets_a_bad_row_changes_nothing,
    selection_is_per_tenant_and_per_domain_and_marks_injection,
    export_and_delete_are_audited_with_ids_and_counts_only,
);

pub(crate) fn canary() -> String {
    format!("canary-{}", hex::encode(rand::random::<[u8; 12]>()))
}

/// A storageState file with a session cookie holding `value` and a
/// persistent one, both of `host`.
pub(crate) fn storage_state(host: &str, value: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "cookies": [
            {"name": "sid", "value": value, "domain": format!(".{host}"), "path": "/",
             "expires": -1, "httpOnly": true, "secure": true, "sameSite": "Lax"},
            {"name": "pref", "value": "dark", "domain": host, "path": "/",
             "expires": 4_102_444_800_i64, "httpOnly": false, "secure": false, "sameSite": "Strict"}
        ],
        "origins": []
    }))
    .unwrap()
}

async fn setup(backend: Backend, tenants: &[&str]) -> (TestDb, Store, Vault) {
    let (db, store, key) = setup_keyed(backend, tenants).await;
    let vault = Vault::new(store.clone(), key);
    (db, store, vault)
}

async fn setup_keyed(backend: Backend, tenants: &[&str]) -> (TestDb, Store, MasterKey) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    for t in tenants {
        store.tenant_create(&tenant(t), t).await.unwrap();
    }
    (db, store, MasterKey::generate())
}

async fn import(vault: &Vault, t: &str, d: &str, value: &str) -> vault::ImportReport {
    vault
        .import(
            &Actor::Cli,
            &tenant(t),
            &domain(d),
            &storage_state(d, value),
            ImportOptions::default(),
        )
        .await
        .unwrap()
}

/// The value of cookie `sid` in a selection, compared without printing it.
fn sid_is(selected: &[vault::Selected], d: &str, value: &str) -> bool {
    selected.iter().any(|sel| {
        sel.domain.as_str() == d
            && sel
                .cookies
                .iter()
                .any(|c| c.name == "sid" && c.value == value)
    })
}

fn files_contain(dir: &std::path::Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let path = e.unwrap().path();
        if path.is_dir() {
            files_contain(&path, needle)
        } else {
            let bytes = std::fs::read(&path).unwrap_or_default();
            bytes.windows(needle.len()).any(|w| w == needle)
        }
    })
}

async fn an_imported_credential_is_stored_sealed_and_selected_for_injection(backend: Backend) {
    let (db, store, vault) = setup(backend, &["acme"]).await;
    let secret = canary();

    let report = import(&vault, "acme", "example.com", &secret).await;

    let c = &report.credential;
    assert!(c.id.starts_with("v_"));
    assert_eq!((c.domain.as_str(), c.cookie_count), ("example.com", 2));
    assert_eq!(c.source, "import");
    assert_eq!(c.key_id, vault.key_id().as_str());
    assert_eq!(c.earliest_expiry, Some(4_102_444_800_000));
    assert_eq!(c.last_injected_at, None);
    assert_eq!(store.vault_list(None).await.unwrap(), vec![c.clone()]);
    let selected = vault
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0].cookies.len(), 2);
    assert!(
        sid_is(&selected, "example.com", &secret),
        "the stored cookie did not come back"
    );
    let sid = selected[0]
        .cookies
        .iter()
        .find(|c| c.name == "sid")
        .unwrap();
    assert!(sid.http_only && sid.secure && sid.is_session());
    assert!(!format!("{selected:?}").contains(&secret));
    if backend == Backend::Sqlite {
        assert!(
            !files_contain(db.dir.path(), secret.as_bytes()),
            "the cookie value is in the database files in plaintext"
        );
    }
}

async fn a_ciphertext_copied_onto_another_row_does_not_decrypt(backend: Backend) {
    let (db, _store, vault) = setup(backend, &["acme", "beta"]).await;
    import(&vault, "acme", "example.com", &canary()).await;
    import(&vault, "acme", "other.com", &canary()).await;
    import(&vault, "beta", "example.com", &canary()).await;

    // A tamperer with database access moves acme's example.com cookies onto
    // acme's other.com row and onto beta's example.com row.
    for (t, d) in [("acme", "other.com"), ("beta", "example.com")] {
        db.raw(&format!(
            "UPDATE vault_credentials SET \
             ciphertext = (SELECT ciphertext FROM vault_credentials WHERE tenant_id = 'acme' AND domain = 'example.com'), \
             nonce = (SELECT nonce FROM vault_credentials WHERE tenant_id = 'acme' AND domain = 'example.com') \
             WHERE tenant_id = '{t}' AND domain = '{d}'"
        ))
        .await
        .unwrap();
        let err = vault
            .select_for_injection(&tenant(t), &[domain(d)])
            .await
            .unwrap_err();
        assert!(
            matches!(err, VaultError::Crypto(CryptoError::Tampered { .. })),
            "{err}"
        );
        assert_eq!(err.code(), "decrypt_failed");
    }
    // All or nothing: a selection including a bad row yields no cookies at all.
    let err = vault
        .select_for_injection(
            &tenant("acme"),
            &[domain("example.com"), domain("other.com")],
        )
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::Crypto(_)), "{err}");
    // The original row still opens.
    let ok = vault
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();
    assert_eq!(ok.len(), 1);
}

async fn reimporting_a_domain_replaces_its_cookies_in_the_same_row(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme"]).await;
    let first = import(&vault, "acme", "example.com", &canary()).await;
    let newer = canary();
    let netscape = format!(".example.com\tTRUE\t/\tTRUE\t0\tsid\t{newer}\n");

    let second = vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            netscape.as_bytes(),
            ImportOptions::default(),
        )
        .await
        .unwrap();

    assert_eq!(second.credential.id, first.credential.id);
    assert_eq!(second.credential.created_at, first.credential.created_at);
    assert_eq!(second.credential.cookie_count, 1);
    assert_eq!(second.credential.earliest_expiry, None);
    assert_eq!(store.vault_list(None).await.unwrap().len(), 1);
    let selected = vault
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();
    assert!(
        sid_is(&selected, "example.com", &newer),
        "the newer cookie did not replace the old"
    );
}

async fn foreign_cookies_refuse_the_import_and_store_nothing(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme"]).await;
    let secret = canary();
    let file = serde_json::to_vec(&json!([
        {"name": "sid", "value": "ok", "domain": "example.com"},
        {"name": "_ga", "value": secret, "domain": ".tracker.net"},
        {"name": "x", "value": secret, "domain": "evil-example.com"}
    ]))
    .unwrap();

    let err = vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            &file,
            ImportOptions::default(),
        )
        .await
        .unwrap_err();

    let VaultError::Import(ImportError::Foreign { rejected, .. }) = &err else {
        panic!("expected foreign cookies, got {}", err.code());
    };
    let names: Vec<_> = rejected
        .iter()
        .map(|r| (r.name.as_str(), r.domain.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("_ga", ".tracker.net"), ("x", "evil-example.com")]
    );
    assert!(!err.to_string().contains(&secret));
    assert!(store.vault_list(None).await.unwrap().is_empty());
    let events = store.audit_page(0, 100).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.action.as_str(), last.outcome.as_str()),
        ("vault.import", "denied: foreign_cookies")
    );

    // With --drop-foreign the domain's cookies are stored and the rest listed.
    let report = vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("example.com"),
            &file,
            ImportOptions { drop_foreign: true },
        )
        .await
        .unwrap();
    assert_eq!(report.credential.cookie_count, 1);
    assert_eq!(report.rejected.len(), 2);
}

async fn unknown_tenants_are_a_typed_error(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme"]).await;
    let ghost = tenant("ghost");
    let file = storage_state("example.com", &canary());
    let errs = [
        vault
            .import(
                &Actor::Cli,
                &ghost,
                &domain("example.com"),
                &file,
                ImportOptions::default(),
            )
            .await
            .unwrap_err(),
        vault
            .select_for_injection(&ghost, &[domain("example.com")])
            .await
            .unwrap_err(),
        vault
            .mark_injected(&ghost, &[domain("example.com")])
            .await
            .unwrap_err(),
        vault
            .export(&Actor::Cli, &ghost, &domain("example.com"))
            .await
            .unwrap_err(),
        vault.list(Some(&ghost)).await.unwrap_err(),
    ];
    for err in errs {
        assert!(
            matches!(&err, VaultError::UnknownTenant(t) if t == &ghost),
            "{err}"
        );
        assert_eq!(err.code(), "unknown_tenant");
    }
    assert!(store.vault_list(None).await.unwrap().is_empty());
    // A known tenant without the credential is another error.
    let err = vault
        .export(&Actor::Cli, &tenant("acme"), &domain("example.com"))
        .await
        .unwrap_err();
    assert!(matches!(err, VaultError::NotFound { .. }), "{err}");
}

async fn a_wrong_master_key_names_the_stored_key_id_and_decrypts_nothing(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme"]).await;
    import(&vault, "acme", "example.com", &canary()).await;
    let stored_id = vault.key_id().clone();
    let wrong = Vault::new(store.clone(), MasterKey::generate());

    let err = wrong.check_keys().await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, VaultError::Crypto(CryptoError::KeyMismatch { .. })),
        "{msg}"
    );
    assert!(
        msg.contains(stored_id.as_str()) && msg.contains(wrong.key_id().as_str()),
        "{msg}"
    );

    let err = wrong
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap_err();
    assert!(
        matches!(err, VaultError::Crypto(CryptoError::WrongKey { .. })),
        "{err}"
    );
    assert!(err.to_string().contains(stored_id.as_str()));
    assert_eq!(err.code(), "wrong_key");

    // Nor does it write: rows under two keys would be a trap.
    let err = wrong
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("other.com"),
            &storage_state("other.com", &canary()),
            ImportOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "wrong_key");
    let rows = store.vault_list(None).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].key_id, stored_id.as_str());
}

async fn rotation_reseals_every_row_under_the_new_key(backend: Backend) {
    let (_db, store, old_key) = setup_keyed(backend, &["acme", "beta"]).await;
    let old_vault = Vault::new(store.clone(), old_key.clone());
    let a = canary();
    let b = canary();
    import(&old_vault, "acme", "example.com", &a).await;
    import(&old_vault, "beta", "other.com", &b).await;
    let old = old_vault.key_id().clone();
    let new_key = MasterKey::generate();

    // A keyring over the old key in memory: no key file is involved here
    // (the CLI tests cover the file).
    let done = vault::rotate(
        &store,
        &Keyring::in_memory(old_key),
        new_key.clone(),
        &Actor::Cli,
    )
    .await
    .unwrap();

    assert_eq!(
        (done.from.clone(), done.to.clone(), done.credentials),
        (old.clone(), new_key.id().clone(), 2)
    );
    assert!(done.old_key_kept_at.is_none());
    for row in store.vault_list(None).await.unwrap() {
        assert_eq!(row.key_id, new_key.id().as_str());
    }
    let new_vault = Vault::new(store.clone(), new_key);
    new_vault.check_keys().await.unwrap();
    let sel = new_vault
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();
    assert!(
        sid_is(&sel, "example.com", &a),
        "acme's cookie did not survive rotation"
    );
    let sel = new_vault
        .select_for_injection(&tenant("beta"), &[domain("other.com")])
        .await
        .unwrap();
    assert!(
        sid_is(&sel, "other.com", &b),
        "beta's cookie did not survive rotation"
    );
    let err = old_vault.check_keys().await.unwrap_err();
    assert!(err.to_string().contains(done.to.as_str()));
    let actions: Vec<_> = store
        .audit_page(0, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.action == "keys.rotate")
        .map(|e| e.params)
        .collect();
    assert_eq!(actions.len(), 2);
    assert!(actions[1].contains("\"credentials\":2"), "{}", actions[1]);
}

async fn a_rotation_that_meets_a_bad_row_changes_nothing(backend: Backend) {
    let (db, store, key) = setup_keyed(backend, &["acme"]).await;
    let vault = Vault::new(store.clone(), key.clone());
    import(&vault, "acme", "example.com", &canary()).await;
    import(&vault, "acme", "other.com", &canary()).await;
    db.raw(
        "UPDATE vault_credentials SET nonce = (SELECT nonce FROM vault_credentials WHERE domain = 'example.com') \
         WHERE domain = 'other.com'",
    )
    .await
    .unwrap();
    let before = store.vault_list(None).await.unwrap();

    let err = vault::rotate(
        &store,
        &Keyring::in_memory(key.clone()),
        MasterKey::generate(),
        &Actor::Cli,
    )
    .await
    .unwrap_err();

    assert!(err.to_string().contains("decryption"), "{err}");
    assert_eq!(store.vault_list(None).await.unwrap(), before);
    let ok = vault
        .select_for_injection(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();
    assert_eq!(ok.len(), 1);
}

async fn selection_is_per_tenant_and_per_domain_and_marks_injection(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme", "beta"]).await;
    let acme = canary();
    let beta = canary();
    import(&vault, "acme", "example.com", &acme).await;
    import(&vault, "acme", "other.com", &canary()).await;
    import(&vault, "beta", "example.com", &beta).await;
    let expired = serde_json::to_vec(&json!([
        {"name": "old", "value": "x", "domain": "stale.com", "expires": 1_000_000},
        {"name": "sid", "value": "y", "domain": "stale.com", "expires": -1}
    ]))
    .unwrap();
    vault
        .import(
            &Actor::Cli,
            &tenant("acme"),
            &domain("stale.com"),
            &expired,
            ImportOptions::default(),
        )
        .await
        .unwrap();

    let sel = vault
        .select_for_injection(
            &tenant("acme"),
            &[domain("example.com"), domain("absent.com")],
        )
        .await
        .unwrap();
    assert_eq!(sel.len(), 1);
    assert!(
        sid_is(&sel, "example.com", &acme),
        "acme did not get its own cookie"
    );
    assert!(
        !sid_is(&sel, "example.com", &beta),
        "acme got beta's cookie"
    );
    let sel = vault
        .select_for_injection(
            &tenant("beta"),
            &[domain("example.com"), domain("other.com")],
        )
        .await
        .unwrap();
    assert_eq!(sel.len(), 1, "beta has no other.com credential");
    assert!(sid_is(&sel, "example.com", &beta));
    assert!(
        !sid_is(&sel, "example.com", &acme),
        "beta got acme's cookie"
    );
    let sel = vault
        .select_for_injection(&tenant("acme"), &[domain("stale.com")])
        .await
        .unwrap();
    let names: Vec<_> = sel[0].cookies.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["sid"], "expired cookies are not handed out");

    let marked = vault
        .mark_injected(&tenant("acme"), &[domain("example.com")])
        .await
        .unwrap();

    assert_eq!(marked, 1);
    for c in store.vault_list(None).await.unwrap() {
        let injected = c.tenant_id == "acme" && c.domain == "example.com";
        assert_eq!(
            c.last_injected_at.is_some(),
            injected,
            "{} {}",
            c.tenant_id,
            c.domain
        );
    }
}

async fn export_and_delete_are_audited_with_ids_and_counts_only(backend: Backend) {
    let (_db, store, vault) = setup(backend, &["acme"]).await;
    let secret = canary();
    let report = import(&vault, "acme", "example.com", &secret).await;

    let state = vault
        .export(&Actor::Cli, &tenant("acme"), &domain("example.com"))
        .await
        .unwrap();
    assert_eq!(state.cookies.len(), 2);
    assert!(
        state.cookies.iter().any(|c| c.value == secret),
        "export lost the value"
    );
    let id = vault
        .delete(&Actor::Cli, &tenant("acme"), &domain("example.com"))
        .await
        .unwrap();
    assert_eq!(id, report.credential.id);
    assert!(matches!(
        vault
            .delete(&Actor::Cli, &tenant("acme"), &domain("example.com"))
            .await,
        Err(VaultError::NotFound { .. })
    ));

    let events = store.audit_page(0, 100).await.unwrap();
    let actions: Vec<_> = events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        vec!["vault.import", "vault.export", "vault.delete"]
    );
    for e in &events {
        assert!(
            !e.params.contains(&secret),
            "audit row {} holds the value",
            e.seq
        );
        assert!(e.params.contains(&report.credential.id) || e.action == "vault.import");
    }
    assert_eq!(
        audit::verify(&store).await.unwrap(),
        Verification::Intact { events: 3 }
    );
}
