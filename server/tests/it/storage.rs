//! The storage suite, run against SQLite and PostgreSQL alike.

use cordon::audit::{self, Actor, GENESIS_HASH, NewEvent, Verification};
use cordon::domain::{LiveLinkId, SessionId, TenantId};
use cordon::store::tenants::CreateTenantError;
use serde_json::json;

use crate::helpers::{Backend, TestDb, both_backends};

both_backends!(
    migrations_can_run_twice,
    each_appended_event_links_to_the_one_before,
    concurrent_writers_in_two_processes_never_fork_the_chain,
    an_append_after_another_process_appended_links_to_its_event,
    an_append_whose_caller_gives_up_leaves_the_chain_whole,
    a_failed_append_writes_nothing_and_holds_no_lock,
    the_audit_table_refuses_updates_and_deletes,
    verify_names_the_first_edited_event,
    verify_finds_a_removed_middle_event,
    verify_finds_a_removed_last_event,
    tenants_are_created_once_and_listed,
    live_links_are_pruned_a_day_after_they_end,
    racing_live_links_never_pass_the_sessions_cap,
);

/// Thirty creates racing for one session's last places: exactly the cap
/// are recorded (the count and the insert cannot be split by another
/// request), and ended links do not count.
async fn racing_live_links_never_pass_the_sessions_cap(backend: Backend) {
    use cordon::store::live_links::NewLiveLink;
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let acme: TenantId = "acme".parse().unwrap();
    store.tenant_create(&acme, "Acme").await.unwrap();
    let now = 1_000_000_000;
    let link = |id: String, expires_at: i64| {
        let store = store.clone();
        async move {
            store
                .live_link_insert_within(
                    &NewLiveLink {
                        id: &id,
                        token_hash: &format!("hash-{id}"),
                        tenant_id: "acme",
                        session_id: "s_1",
                        key_id: "k_1",
                        mode: "view",
                        created_at: now,
                        expires_at,
                    },
                    5,
                )
                .await
                .unwrap()
        }
    };
    // One that ended takes no place.
    assert!(link("llk_old".into(), now - 1).await);
    let raced =
        futures::future::join_all((0..30).map(|i| link(format!("llk_{i}"), now + 60_000))).await;
    let recorded = raced.iter().filter(|r| **r).count();
    assert_eq!(recorded, 5, "{raced:?}");
    assert!(!link("llk_late".into(), now + 60_000).await);
    // Another session has its own places.
    let other = store
        .live_link_insert_within(
            &NewLiveLink {
                id: "llk_other",
                token_hash: "hash-other",
                tenant_id: "acme",
                session_id: "s_2",
                key_id: "k_1",
                mode: "view",
                created_at: now,
                expires_at: now + 60_000,
            },
            5,
        )
        .await
        .unwrap();
    assert!(other);
}

async fn live_links_are_pruned_a_day_after_they_end(backend: Backend) {
    use cordon::store::live_links::NewLiveLink;
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let acme: TenantId = "acme".parse().unwrap();
    store.tenant_create(&acme, "Acme").await.unwrap();
    let day = 24 * 3600 * 1000;
    let now = 100 * day;
    // (id, expires_at, revoked_at)
    let session: SessionId = SessionId::generate();
    let links = [
        ("live", now + 600_000, None),
        ("expired_today", now - 3_600_000, None),
        ("expired_long_ago", now - 2 * day, None),
        ("revoked_today", now + 600_000, Some(now - 60_000)),
        ("revoked_long_ago", now + 600_000, Some(now - 3 * day)),
    ]
    .map(|(name, expires_at, revoked)| (name, LiveLinkId::generate(), expires_at, revoked));
    for (name, id, expires_at, revoked) in &links {
        let recorded = store
            .live_link_insert_within(
                &NewLiveLink {
                    id: id.as_str(),
                    token_hash: &format!("hash-{name}"),
                    tenant_id: "acme",
                    session_id: session.as_str(),
                    key_id: "k_1",
                    mode: "view",
                    created_at: now - 4 * day,
                    expires_at: *expires_at,
                },
                20,
            )
            .await
            .unwrap();
        assert!(recorded, "{name}");
        if let Some(at) = revoked {
            assert!(
                store
                    .live_link_revoke("acme", &session, id, *at)
                    .await
                    .unwrap()
            );
        }
    }
    assert_eq!(store.live_links_prune(now - day).await.unwrap(), 2);
    for (name, id, _, _) in &links {
        let kept = store.live_link_get(id).await.unwrap().is_some();
        assert_eq!(kept, !name.ends_with("long_ago"), "{name}");
    }
    // Running it again removes nothing more.
    assert_eq!(store.live_links_prune(now - day).await.unwrap(), 0);
}

fn event(n: usize) -> NewEvent {
    NewEvent::new(Actor::System, "test.event")
        .tenant(&"acme".parse::<TenantId>().unwrap())
        .session(format!("s{n}"))
        .params(json!({ "n": n }))
}

async fn migrations_can_run_twice(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    store
        .migrate()
        .await
        .expect("second migration run is a no-op");
    assert_eq!(
        store.audit_head().await.unwrap(),
        (0, GENESIS_HASH.to_string())
    );
}

async fn each_appended_event_links_to_the_one_before(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let a = store.audit_append(event(1)).await.unwrap();
    let b = store.audit_append(event(2)).await.unwrap();
    let c = store.audit_append(event(3)).await.unwrap();
    assert_eq!((a.seq, b.seq, c.seq), (1, 2, 3));
    assert_eq!(a.prev_hash, GENESIS_HASH);
    assert_eq!(b.prev_hash, a.hash);
    assert_eq!(c.prev_hash, b.hash);
    assert_eq!(c.hash, c.compute_hash());
    assert_eq!(store.audit_head().await.unwrap(), (3, c.hash.clone()));
    let stored = store.audit_page(0, 10).await.unwrap();
    assert_eq!(stored, vec![a, b, c.clone()]);
    assert_eq!(stored[2].params, r#"{"n":3}"#);
    assert_eq!(
        audit::verify(&store).await.unwrap(),
        Verification::Intact { events: 3 }
    );
}

async fn concurrent_writers_in_two_processes_never_fork_the_chain(backend: Backend) {
    let db = TestDb::new(backend).await;
    // Two stores = two pools and two in-process locks, as two control planes
    // sharing one database would have: only the database serialises them.
    let stores = [db.store().await, db.store().await];
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = stores[i % 2].clone();
        tasks.push(tokio::spawn(
            async move { store.audit_append(event(i)).await },
        ));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(
            t.await
                .unwrap()
                .expect("append succeeds under contention")
                .seq,
        );
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=40).collect::<Vec<_>>());
    assert_eq!(
        audit::verify(&stores[0]).await.unwrap(),
        Verification::Intact { events: 40 }
    );
}

/// An append links to the head it last saw only while that is still the
/// database's head: after another process appended, it links to that
/// event instead (SQLite keeps the head in the process, `audit_append`).
async fn an_append_after_another_process_appended_links_to_its_event(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (a, b) = (db.store().await, db.store().await);
    let e1 = a.audit_append(event(1)).await.unwrap();
    let e2 = a.audit_append(event(2)).await.unwrap();
    let e3 = b.audit_append(event(3)).await.unwrap();
    let e4 = a.audit_append(event(4)).await.unwrap();
    let e5 = a.audit_append(event(5)).await.unwrap();
    let e6 = b.audit_append(event(6)).await.unwrap();
    let seqs = [&e1, &e2, &e3, &e4, &e5, &e6].map(|e| e.seq);
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
    for (before, after) in [(&e2, &e3), (&e3, &e4), (&e5, &e6)] {
        assert_eq!(after.prev_hash, before.hash, "event {}", after.seq);
        assert!(after.ts >= before.ts, "time goes back at {}", after.seq);
    }
    assert_eq!(b.audit_head().await.unwrap(), (6, e6.hash.clone()));
    assert_eq!(
        audit::verify(&a).await.unwrap(),
        Verification::Intact { events: 6 }
    );
}

/// Appends dropped part-way (a client gone mid-call), at forty points
/// from before the first statement to after the last: each is whole or
/// absent, and none leaves a transaction open: another process appends at
/// once after them (an open one would hold SQLite's write lock until its
/// busy timeout failed the append).
async fn an_append_whose_caller_gives_up_leaves_the_chain_whole(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (a, b) = (db.store().await, db.store().await);
    a.audit_append(event(0)).await.unwrap();
    for i in 1..=40u64 {
        let _ = tokio::time::timeout(
            std::time::Duration::from_micros(i * 25),
            a.audit_append(event(i as usize)),
        )
        .await;
    }
    let other = b
        .audit_append(event(98))
        .await
        .expect("another process appends after the dropped ones");
    let next = a
        .audit_append(event(99))
        .await
        .expect("the process whose appends were dropped appends again");
    assert_eq!(next.prev_hash, other.hash);
    assert_eq!(next.seq, other.seq + 1);
    assert_eq!(
        audit::verify(&a).await.unwrap(),
        Verification::Intact { events: next.seq }
    );
}

/// An insert the database refuses fails the append with the database's
/// reason, writes nothing, and leaves no transaction open on a pooled
/// connection: both processes append after it.
async fn a_failed_append_writes_nothing_and_holds_no_lock(backend: Backend) {
    let db = TestDb::new(backend).await;
    let (a, b) = (db.store().await, db.store().await);
    let refuse = match backend {
        Backend::Sqlite => {
            "CREATE TRIGGER audit_refuse BEFORE INSERT ON audit_events \
             WHEN NEW.action = 'test.refused' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        }
        Backend::Postgres => {
            "CREATE FUNCTION audit_refuse() RETURNS trigger AS $$ BEGIN \
             RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER audit_refuse BEFORE INSERT ON audit_events FOR EACH ROW \
             WHEN (NEW.action = 'test.refused') EXECUTE FUNCTION audit_refuse();"
        }
    };
    db.raw(refuse).await.expect("the refusing trigger");
    let e1 = a.audit_append(event(1)).await.unwrap();
    for _ in 0..3 {
        let err = a
            .audit_append(NewEvent::new(Actor::System, "test.refused"))
            .await
            .expect_err("the database refuses the insert");
        assert!(
            format!("{err:#}").contains("refused by the test"),
            "{err:#}"
        );
    }
    assert_eq!(a.audit_head().await.unwrap(), (1, e1.hash.clone()));
    let e2 = b
        .audit_append(event(2))
        .await
        .expect("the other process appends");
    let e3 = a
        .audit_append(event(3))
        .await
        .expect("this process appends");
    assert_eq!(
        (e2.prev_hash.as_str(), e3.prev_hash.as_str()),
        (e1.hash.as_str(), e2.hash.as_str())
    );
    assert_eq!(
        audit::verify(&a).await.unwrap(),
        Verification::Intact { events: 3 }
    );
}

async fn the_audit_table_refuses_updates_and_deletes(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    store.audit_append(event(1)).await.unwrap();
    let update = db
        .raw("UPDATE audit_events SET outcome = 'denied' WHERE seq = 1")
        .await;
    assert!(update.unwrap_err().to_string().contains("append-only"));
    let delete = db.raw("DELETE FROM audit_events WHERE seq = 1").await;
    assert!(delete.unwrap_err().to_string().contains("append-only"));
    assert_eq!(
        audit::verify(&store).await.unwrap(),
        Verification::Intact { events: 1 }
    );
}

/// Removes the append-only guard, as someone with the database's owner rights could.
async fn disable_guard(db: &TestDb, backend: Backend) {
    let sql = match backend {
        Backend::Sqlite => {
            "DROP TRIGGER audit_events_no_update; DROP TRIGGER audit_events_no_delete;"
        }
        Backend::Postgres => "DROP TRIGGER audit_events_no_update ON audit_events;",
    };
    db.raw(sql).await.expect("guard removed");
}

async fn verify_names_the_first_edited_event(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    for i in 1..=5 {
        store.audit_append(event(i)).await.unwrap();
    }
    disable_guard(&db, backend).await;
    db.raw("UPDATE audit_events SET params = '{\"n\":99}' WHERE seq = 3")
        .await
        .unwrap();
    match audit::verify(&store).await.unwrap() {
        Verification::Broken { seq, reason } => {
            assert_eq!(seq, 3);
            assert!(reason.contains("hash"), "{reason}");
        }
        other => panic!("tampering not found: {other:?}"),
    }
}

async fn verify_finds_a_removed_middle_event(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    for i in 1..=4 {
        store.audit_append(event(i)).await.unwrap();
    }
    disable_guard(&db, backend).await;
    db.raw("DELETE FROM audit_events WHERE seq = 2")
        .await
        .unwrap();
    match audit::verify(&store).await.unwrap() {
        Verification::Broken { seq, reason } => {
            assert_eq!(seq, 2);
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("deletion not found: {other:?}"),
    }
}

async fn verify_finds_a_removed_last_event(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    for i in 1..=4 {
        store.audit_append(event(i)).await.unwrap();
    }
    disable_guard(&db, backend).await;
    db.raw("DELETE FROM audit_events WHERE seq = 4")
        .await
        .unwrap();
    match audit::verify(&store).await.unwrap() {
        Verification::Broken { seq, .. } => assert_eq!(seq, 4),
        other => panic!("truncation not found: {other:?}"),
    }
}

async fn tenants_are_created_once_and_listed(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let acme: TenantId = "acme".parse().unwrap();
    let beta: TenantId = "beta".parse().unwrap();
    store.tenant_create(&beta, "Beta").await.unwrap();
    store.tenant_create(&acme, "Acme").await.unwrap();
    let dup = store.tenant_create(&acme, "Other").await.unwrap_err();
    assert!(
        matches!(dup, CreateTenantError::Exists(ref id) if *id == acme),
        "{dup}"
    );
    let list = store.tenant_list().await.unwrap();
    let ids: Vec<_> = list
        .iter()
        .map(|t| (t.id.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(ids, vec![("acme", "Acme"), ("beta", "Beta")]);
}
