//! The dashboard's audit search, on SQLite and PostgreSQL alike: each filter,
//! their combinations, keyset pages both ways and to the oldest, and hostile
//! filter text.

use cordon::audit::{
    self, Actor, AuditCursor, AuditFilter, AuditFilterInput, AuditPage, AuditQueryError, Event,
    GENESIS_HASH, NewEvent, PageSize, Verification,
};
use cordon::domain::SessionId;
use cordon::store::Store;
use sqlx::Connection;

use crate::helpers::{Backend, TestDb, both_backends};

both_backends!(
    each_filter_alone_selects_exactly_its_events,
    filters_combine_as_an_intersection,
    pages_walk_both_ways_and_to_the_oldest_without_gaps_or_repeats,
    a_time_range_is_inclusive_and_exact_at_equal_timestamps,
    action_prefixes_match_literally_even_with_wildcards_and_quotes,
    hostile_filter_text_is_refused_or_matched_literally_and_changes_nothing,
    appended_times_never_go_backwards,
);

/// The log the cases search: 150 events over three tenants (and none),
/// three sessions (and none), five actors, nine actions including ones with
/// `_`, `%` and a quote, and timestamps that repeat in pairs.
struct Log {
    events: Vec<Event>,
    sessions: [SessionId; 3],
}

const ACTIONS: [&str; 9] = [
    "session.open",
    "tool.click",
    "tool.wait_for",
    "tool_x",
    "tool%x",
    "grant.request",
    "tool.navigate",
    "session.close",
    "it's.quoted",
];
const ACTORS: [&str; 5] = [
    "agent:k_acme",
    "agent:k_globex",
    "operator:o'brien",
    "system",
    "cli",
];

/// Writes a valid chain straight into the table, with chosen timestamps
/// (`audit_append` takes the clock's).
async fn seed(db: &TestDb) -> Log {
    let sessions = [
        SessionId::generate(),
        SessionId::generate(),
        SessionId::generate(),
    ];
    let mut events = Vec::new();
    let mut prev_hash = GENESIS_HASH.to_string();
    for i in 0..150_i64 {
        let tenant = match i % 7 {
            0..=3 => Some("acme"),
            4 | 5 => Some("globex"),
            _ => None,
        };
        let session = match (tenant, i % 3) {
            (Some("acme"), 0) => Some(&sessions[0]),
            (Some("acme"), 1) => Some(&sessions[1]),
            (Some("globex"), _) => Some(&sessions[2]),
            _ => None,
        };
        let mut e = Event {
            seq: i + 1,
            // Pairs of events share a millisecond.
            ts: 1_000_000 + (i / 2) * 1000,
            tenant: tenant.map(Into::into),
            session: session.map(ToString::to_string),
            actor: ACTORS[(i % 5) as usize].into(),
            action: ACTIONS[(i % 9) as usize].into(),
            params: "{}".into(),
            outcome: "ok".into(),
            prev_hash: prev_hash.clone(),
            hash: String::new(),
        };
        e.hash = e.compute_hash();
        prev_hash = e.hash.clone();
        events.push(e);
    }
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&db.url).await.unwrap();
    for e in &events {
        sqlx::query(
            "INSERT INTO audit_events (seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(e.seq)
        .bind(e.ts)
        .bind(e.tenant.clone())
        .bind(e.session.clone())
        .bind(&e.actor)
        .bind(&e.action)
        .bind(&e.params)
        .bind(&e.outcome)
        .bind(&e.prev_hash)
        .bind(&e.hash)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    sqlx::query("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1")
        .bind(150_i64)
        .bind(&prev_hash)
        .execute(&mut conn)
        .await
        .unwrap();
    Log { events, sessions }
}

fn filter(input: AuditFilterInput) -> AuditFilter {
    AuditFilter::parse(input).expect("a valid filter")
}

/// The seqs `input` should select, newest first, by plain Rust.
fn expected(log: &Log, input: &AuditFilterInput) -> Vec<i64> {
    let given = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    log.events
        .iter()
        .rev()
        .filter(|e| given(&input.tenant).is_none_or(|t| e.tenant.as_ref() == Some(&t)))
        .filter(|e| given(&input.session).is_none_or(|s| e.session.as_ref() == Some(&s)))
        .filter(|e| given(&input.actor).is_none_or(|a| e.actor == a))
        .filter(|e| given(&input.action_prefix).is_none_or(|p| e.action.starts_with(&p)))
        .filter(|e| input.from_ms.is_none_or(|f| e.ts >= f))
        .filter(|e| input.to_ms.is_none_or(|t| e.ts <= t))
        .map(|e| e.seq)
        .collect()
}

async fn page(store: &Store, f: &AuditFilter, cursor: AuditCursor, size: i64) -> AuditPage {
    store
        .audit_query(f, cursor, PageSize::parse(size).unwrap())
        .await
        .expect("query runs")
}

fn seqs(page: &AuditPage) -> Vec<i64> {
    page.events.iter().map(|e| e.seq).collect()
}

/// Every matching seq, newest first, walking older pages from the newest.
async fn walk_older(store: &Store, f: &AuditFilter, size: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut cursor = AuditCursor::Newest;
    let mut first = true;
    loop {
        let p = page(store, f, cursor, size).await;
        assert!(p.events.len() <= size as usize);
        assert_eq!(p.has_newer, !first, "has_newer at {cursor}");
        assert!(seqs(&p).windows(2).all(|w| w[0] > w[1]), "newest first");
        out.extend(seqs(&p));
        first = false;
        match p.older() {
            Some(next) => cursor = next,
            None => break,
        }
    }
    out
}

/// Every matching seq, newest first, walking newer pages from the oldest.
async fn walk_newer(store: &Store, f: &AuditFilter, size: i64) -> Vec<i64> {
    let mut pages = Vec::new();
    let mut cursor = AuditCursor::Oldest;
    let mut first = true;
    loop {
        let p = page(store, f, cursor, size).await;
        assert!(p.events.len() <= size as usize);
        assert_eq!(p.has_older, !first, "has_older at {cursor}");
        pages.push(seqs(&p));
        first = false;
        match p.newer() {
            Some(next) => cursor = next,
            None => break,
        }
    }
    pages.into_iter().rev().flatten().collect()
}

/// Checks `input` both ways with pages of 7, and that some event matches.
async fn check(store: &Store, log: &Log, input: AuditFilterInput) {
    let want = expected(log, &input);
    assert!(
        !want.is_empty(),
        "a case that selects nothing proves little: {input:?}"
    );
    let f = filter(input.clone());
    assert_eq!(
        walk_older(store, &f, 7).await,
        want,
        "older pages of {input:?}"
    );
    assert_eq!(
        walk_newer(store, &f, 7).await,
        want,
        "newer pages of {input:?}"
    );
}

fn by(
    tenant: Option<&str>,
    session: Option<&SessionId>,
    actor: Option<&str>,
    action: Option<&str>,
) -> AuditFilterInput {
    AuditFilterInput {
        tenant: tenant.map(Into::into),
        session: session.map(ToString::to_string),
        actor: actor.map(Into::into),
        action_prefix: action.map(Into::into),
        ..Default::default()
    }
}

async fn each_filter_alone_selects_exactly_its_events(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let log = seed(&db).await;
    check(&store, &log, AuditFilterInput::default()).await;
    for tenant in ["acme", "globex"] {
        check(&store, &log, by(Some(tenant), None, None, None)).await;
    }
    for session in &log.sessions {
        check(&store, &log, by(None, Some(session), None, None)).await;
    }
    for actor in ACTORS {
        check(&store, &log, by(None, None, Some(actor), None)).await;
    }
    for prefix in ["tool.", "tool", "session.", "grant.request", "g"] {
        check(&store, &log, by(None, None, None, Some(prefix))).await;
    }
    check(
        &store,
        &log,
        AuditFilterInput {
            from_ms: Some(1_020_000),
            to_ms: Some(1_050_000),
            ..Default::default()
        },
    )
    .await;
}

async fn filters_combine_as_an_intersection(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let log = seed(&db).await;
    let s = &log.sessions;
    let time = |mut input: AuditFilterInput| {
        input.from_ms = Some(1_010_000);
        input.to_ms = Some(1_060_000);
        input
    };
    for input in [
        by(Some("acme"), Some(&s[0]), None, None),
        by(Some("acme"), None, Some("system"), None),
        by(Some("globex"), None, None, Some("tool.")),
        by(None, Some(&s[1]), Some("agent:k_acme"), None),
        by(None, Some(&s[2]), None, Some("tool")),
        by(None, None, Some("operator:o'brien"), Some("tool.")),
        by(Some("acme"), None, Some("cli"), Some("t")),
        time(by(Some("acme"), None, None, None)),
        time(by(None, Some(&s[0]), None, None)),
        time(by(None, None, Some("system"), None)),
        time(by(None, None, None, Some("session."))),
        time(by(Some("acme"), Some(&s[0]), None, Some("t"))),
    ] {
        check(&store, &log, input).await;
    }
    // Intersections that are empty answer an empty page, both ways.
    for input in [
        by(Some("globex"), Some(&s[0]), None, None),
        by(None, None, Some("system"), Some("nothing.")),
        by(Some("acme"), None, Some("nobody"), None),
    ] {
        assert!(expected(&log, &input).is_empty());
        let f = filter(input);
        for cursor in [
            AuditCursor::Newest,
            AuditCursor::Oldest,
            AuditCursor::Before(75),
        ] {
            let p = page(&store, &f, cursor, 7).await;
            assert_eq!(
                (p.events.len(), p.has_older, p.has_newer),
                (0, false, false)
            );
        }
    }
}

async fn pages_walk_both_ways_and_to_the_oldest_without_gaps_or_repeats(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let log = seed(&db).await;
    for input in [
        AuditFilterInput::default(),
        by(Some("acme"), None, None, None),
        by(None, None, None, Some("tool.")),
    ] {
        let want = expected(&log, &input);
        let f = filter(input);
        for size in [1, 7, 10, 200] {
            assert_eq!(walk_older(&store, &f, size).await, want, "size {size}");
            assert_eq!(walk_newer(&store, &f, size).await, want, "size {size}");
        }
        // The last page is the oldest `size`, reached at once.
        let last = page(&store, &f, AuditCursor::Oldest, 10).await;
        assert_eq!(seqs(&last), want[want.len() - 10..]);
        assert!(!last.has_older && last.has_newer);
        // Back from the last page: the ten just newer, no overlap.
        let back = page(&store, &f, last.newer().unwrap(), 10).await;
        assert_eq!(seqs(&back), want[want.len() - 20..want.len() - 10]);
        assert!(back.has_older && back.has_newer);
        // Forward again from there lands on the last page.
        assert_eq!(page(&store, &f, back.older().unwrap(), 10).await, last);
        // A middle page from a cursor: the next ten older than it.
        let mid = want[want.len() / 2];
        let middle = page(&store, &f, AuditCursor::Before(mid), 10).await;
        let at = want.iter().position(|s| *s == mid).unwrap();
        assert_eq!(seqs(&middle), want[at + 1..at + 11]);
        assert!(middle.has_older && middle.has_newer);
    }
    // Cursors beyond either end of the log.
    let all = AuditFilter::default();
    let beyond = page(&store, &all, AuditCursor::Before(1_000_000), 5).await;
    assert_eq!(seqs(&beyond), [150, 149, 148, 147, 146]);
    assert!(!beyond.has_newer && beyond.has_older);
    let before_first = page(&store, &all, AuditCursor::Before(1), 5).await;
    assert!(before_first.events.is_empty() && before_first.has_newer && !before_first.has_older);
    let after_last = page(&store, &all, AuditCursor::After(150), 5).await;
    assert!(after_last.events.is_empty() && after_last.has_older && !after_last.has_newer);
}

async fn a_time_range_is_inclusive_and_exact_at_equal_timestamps(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let log = seed(&db).await;
    let range = |from_ms, to_ms| AuditFilterInput {
        from_ms,
        to_ms,
        ..Default::default()
    };
    // Seqs 21 and 22 share 1_010_000; 29 and 30 share 1_014_000.
    let f = filter(range(Some(1_010_000), Some(1_014_000)));
    let p = page(&store, &f, AuditCursor::Newest, 200).await;
    assert_eq!(seqs(&p), (21..=30).rev().collect::<Vec<_>>());
    // Between two timestamps: nothing.
    let f = filter(range(Some(1_010_001), Some(1_010_999)));
    assert!(
        page(&store, &f, AuditCursor::Newest, 10)
            .await
            .events
            .is_empty()
    );
    // Open ends, and ranges past either end of the log.
    for (from, to) in [
        (None, Some(1_003_000)),
        (Some(1_070_000), None),
        (Some(0), Some(i64::MAX)),
        (Some(1_074_000), Some(1_074_000)),
    ] {
        check(&store, &log, range(from, to)).await;
    }
    for (from, to) in [(Some(2_000_000), None), (None, Some(999_999))] {
        let f = filter(range(from, to));
        let p = page(&store, &f, AuditCursor::Oldest, 10).await;
        assert_eq!(
            (p.events.len(), p.has_older, p.has_newer),
            (0, false, false)
        );
    }
}

async fn action_prefixes_match_literally_even_with_wildcards_and_quotes(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let log = seed(&db).await;
    let store = &store;
    let actions = |prefix: &'static str| async move {
        let f = filter(by(None, None, None, Some(prefix)));
        let mut seen: Vec<String> = page(store, &f, AuditCursor::Newest, 200)
            .await
            .events
            .into_iter()
            .map(|e| e.action)
            .collect();
        seen.sort();
        seen.dedup();
        seen
    };
    // `_` and `%` are characters, not LIKE's wildcards.
    assert_eq!(actions("tool_").await, ["tool_x"]);
    assert_eq!(actions("tool%").await, ["tool%x"]);
    assert_eq!(actions("%").await, Vec::<String>::new());
    assert_eq!(actions("_").await, Vec::<String>::new());
    assert_eq!(actions("tool.wait_").await, ["tool.wait_for"]);
    assert_eq!(
        actions("tool").await,
        [
            "tool%x",
            "tool.click",
            "tool.navigate",
            "tool.wait_for",
            "tool_x"
        ]
    );
    assert_eq!(actions("it's").await, ["it's.quoted"]);
    assert_eq!(actions("'").await, Vec::<String>::new());
    // Exact values with quotes and wildcards match only themselves.
    let f = filter(by(None, None, Some("operator:o'brien"), None));
    let p = page(store, &f, AuditCursor::Newest, 200).await;
    assert_eq!(
        p.events.len(),
        expected(&log, &by(None, None, Some("operator:o'brien"), None)).len()
    );
    for actor in ["operator:o%", "operator:o_brien", "%", "operator:o''brien"] {
        let f = filter(by(None, None, Some(actor), None));
        assert!(
            page(store, &f, AuditCursor::Newest, 10)
                .await
                .events
                .is_empty(),
            "{actor}"
        );
    }
}

async fn hostile_filter_text_is_refused_or_matched_literally_and_changes_nothing(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    seed(&db).await;
    // Refused before any query, naming the field.
    let refused = [
        (
            by(Some("acme'; DROP TABLE audit_events; --"), None, None, None),
            "tenant",
        ),
        (by(Some("%"), None, None, None), "tenant"),
        (
            AuditFilterInput {
                session: Some("s_%".into()),
                ..Default::default()
            },
            "session",
        ),
        (by(None, None, Some(&"a".repeat(129)), None), "actor"),
        (by(None, None, Some("system\r\n"), None), "actor"),
        (by(None, None, Some("sys\u{1b}[2Jtem"), None), "actor"),
        (by(None, None, None, Some(&"t".repeat(65))), "action"),
        (by(None, None, None, Some("tool.\0")), "action"),
        (by(None, None, None, Some("tööl")), "action"),
    ];
    for (input, field) in refused {
        let err = AuditFilter::parse(input.clone()).expect_err("refused");
        assert!(err.to_string().starts_with(field), "{input:?}: {err}");
    }
    assert_eq!(PageSize::parse(0), Err(AuditQueryError::PageSize));
    assert_eq!(PageSize::parse(201), Err(AuditQueryError::PageSize));
    assert_eq!(
        "before:1;--".parse::<AuditCursor>(),
        Err(AuditQueryError::Cursor)
    );
    // Taken literally: SQL in an actor or prefix finds nothing and runs nothing.
    for input in [
        by(None, None, Some("system' OR '1'='1"), None),
        by(None, None, Some("x\"; DELETE FROM audit_events; --"), None),
        by(None, None, None, Some("') UNION SELECT 1 --")),
        by(None, None, None, Some("%' OR action LIKE '%")),
    ] {
        let f = filter(input.clone());
        for cursor in [
            AuditCursor::Newest,
            AuditCursor::Oldest,
            AuditCursor::After(3),
        ] {
            let p = page(&store, &f, cursor, 50).await;
            assert!(p.events.is_empty(), "{input:?} at {cursor}");
        }
    }
    // The log is as it was: every event there, the chain intact.
    assert_eq!(
        audit::verify(&store).await.unwrap(),
        Verification::Intact { events: 150 }
    );
}

async fn appended_times_never_go_backwards(backend: Backend) {
    let db = TestDb::new(backend).await;
    let store = db.store().await;
    let first = store
        .audit_append(NewEvent::new(Actor::Cli, "test.first"))
        .await
        .unwrap();
    // An event stamped far ahead, as if the clock had been set back since.
    let ahead = first.ts + 10 * 365 * 24 * 3600 * 1000;
    db.raw(&format!(
        "DROP TRIGGER audit_events_no_update{}",
        if backend == Backend::Postgres {
            " ON audit_events"
        } else {
            ""
        }
    ))
    .await
    .unwrap();
    let mut edited = first.clone();
    edited.ts = ahead;
    edited.hash = edited.compute_hash();
    db.raw(&format!(
        "UPDATE audit_events SET ts = {ahead}, hash = '{}' WHERE seq = 1; \
         UPDATE audit_head SET hash = '{}' WHERE id = 1",
        edited.hash, edited.hash
    ))
    .await
    .unwrap();
    let next = store
        .audit_append(NewEvent::new(Actor::Cli, "test.next"))
        .await
        .unwrap();
    assert_eq!(next.ts, ahead, "the next event does not go back in time");
    assert_eq!(
        audit::verify(&store).await.unwrap(),
        Verification::Intact { events: 2 }
    );
    // So a time range finds both where they are.
    let f = filter(AuditFilterInput {
        from_ms: Some(ahead),
        ..Default::default()
    });
    assert_eq!(
        seqs(&page(&store, &f, AuditCursor::Newest, 10).await),
        [2, 1]
    );
}

/// A PostgreSQL database whose default collation is linguistic (ICU `en`,
/// where `tool'x` and `tool(x` sort between `tool.` and `tool/`): prefixes
/// still match by bytes, because migration 0007 gives `action` the "C"
/// collation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_with_a_linguistic_collation_still_matches_prefixes_by_bytes() {
    let admin = std::env::var("CORDON_TEST_POSTGRES_URL")
        .expect("CORDON_TEST_POSTGRES_URL is not set: run the suite with infra/scripts/test.sh");
    let name = format!("cordon_test_icu_{}", hex::encode(rand::random::<[u8; 8]>()));
    let mut conn = <sqlx::PgConnection as Connection>::connect(&admin)
        .await
        .unwrap();
    sqlx::query(&format!(
        "CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en' LOCALE 'C.UTF-8'"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let url = format!("{}/{name}", admin.rsplit_once('/').unwrap().0);
    let store = Store::connect(&secrecy::SecretString::from(url))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    for action in ["tool.a", "tool(x", "tool'x", "tool-x", "tool.b"] {
        store
            .audit_append(NewEvent::new(Actor::System, action))
            .await
            .unwrap();
    }
    let f = filter(by(None, None, None, Some("tool.")));
    let p = page(&store, &f, AuditCursor::Newest, 10).await;
    let actions: Vec<&str> = p.events.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["tool.b", "tool.a"]);
    // With an actor, the per-action path.
    let f = filter(by(None, None, Some("system"), Some("tool.")));
    assert_eq!(
        seqs(&page(&store, &f, AuditCursor::Oldest, 10).await),
        [5, 1]
    );
    store.close().await;
}
