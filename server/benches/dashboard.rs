//! Dashboard data benchmark: the audit search over 1,000,000 events and a
//! session's screenshot timeline of 10,000 frames.
//!
//! `cargo bench -p cordon --bench dashboard` (env: `BENCH_EVENTS`, default
//! 1,000,000, 0 skips the audit search; `BENCH_ITER` rounds per figure, default 40; `BENCH_SCREENSHOTS`,
//! default 10,000, 0 skips; `BENCH_POSTGRES_URL` or `CORDON_TEST_POSTGRES_URL`
//! an admin URL, for a fresh PostgreSQL database beside the SQLite file;
//! `BENCH_KEEP=1` keeps both databases and prints where they are, to look at
//! query plans by hand; the last step drops migration 0007's indexes to
//! measure appends without them). Prints p50/p95 per filter and page;
//! BENCHMARKS.md keeps the figures.
//!
//! The events are written straight into `audit_events` in large
//! transactions, with dummy chain hashes: only queries are measured, and
//! `audit_append` (one locked transaction per event) would take hours. Their
//! spread imitates a busy deployment: 40 tenants of Zipf-like sizes, each
//! with its own agent keys, about 18,000 sessions of ~50 events interleaved
//! in time, four operators, the system and the CLI, the actions Cordon
//! writes, 90 days of time.

use std::time::{Duration, Instant};

use anyhow::Context;
use cordon::audit::{AuditCursor, AuditFilter, AuditFilterInput, AuditPage, PageSize};
use cordon::store::Store;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use secrecy::SecretString;
use sqlx::Connection;

mod common;
use common::{Stats, env_usize, ms};

// --- the synthetic log ------------------------------------------------------

const TENANTS: usize = 40;
/// 2026-08-25T00:00:00Z: 90 days before the benchmark's date.
const START_MS: i64 = 1_787_616_000_000;
const DAY_MS: i64 = 86_400_000;

/// Tool actions and their weights (per thousand tool calls).
const TOOLS: &[(&str, u32)] = &[
    ("tool.navigate", 150),
    ("tool.click", 200),
    ("tool.type", 100),
    ("tool.screenshot", 120),
    ("tool.snapshot", 100),
    ("tool.wait_for", 80),
    ("tool.scroll", 50),
    ("tool.press", 50),
    ("tool.read_dom", 40),
    ("tool.hover", 20),
    ("tool.select", 10),
    ("tool.back", 15),
    ("tool.forward", 5),
    ("tool.reload", 10),
    ("tool.pdf", 5),
    ("tool.tabs.list", 15),
    ("tool.tabs.open", 10),
    ("tool.tabs.focus", 10),
    ("tool.tabs.close", 10),
];

/// Who writes the events outside sessions.
#[derive(Clone, Copy)]
enum By {
    Agent,
    Operator,
    Cli,
    System,
}

/// Events outside sessions, their writer and weights.
const OTHERS: &[(&str, By, u32)] = &[
    ("grant.request", By::Agent, 30),
    ("grant.approve", By::Operator, 20),
    ("grant.deny", By::Operator, 6),
    ("grant.deliver", By::Agent, 20),
    ("grant.redeem", By::Agent, 20),
    ("grant.revoke", By::Cli, 2),
    ("vault.import", By::Cli, 10),
    ("vault.store", By::Operator, 8),
    ("vault.export", By::Cli, 3),
    ("vault.delete", By::Cli, 2),
    ("tenant.create", By::Cli, 1),
    ("apikey.create", By::Cli, 3),
    ("apikey.revoke", By::Cli, 1),
    ("keys.rotate", By::Cli, 1),
    ("recording.refused", By::System, 5),
    ("session.reap", By::System, 10),
];

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T], weight: impl Fn(&T) -> u32) -> &'a T {
    let total: u32 = items.iter().map(&weight).sum();
    let mut n = rng.random_range(0..total);
    for item in items {
        let w = weight(item);
        if n < w {
            return item;
        }
        n -= w;
    }
    unreachable!()
}

fn id(rng: &mut StdRng, prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut s = prefix.to_owned();
    for _ in 0..26 {
        s.push(ALPHABET[rng.random_range(0..32)] as char);
    }
    s
}

struct Row {
    seq: i64,
    ts: i64,
    tenant: Option<String>,
    session: Option<String>,
    actor: String,
    action: String,
    params: String,
    outcome: String,
}

struct Live {
    id: String,
    tenant: usize,
    actor: String,
    left: u32,
    opened: bool,
}

/// What the generator made, for choosing filter values.
struct World {
    tenants: Vec<String>,
    keys: Vec<Vec<String>>,
    operators: Vec<String>,
    /// The session of the largest tenant with the most events in the
    /// middle of the log, and how many it has.
    long_session: (String, usize),
    /// That session's actor.
    session_actor: String,
    /// The first and last event's time.
    span: (i64, i64),
}

struct Generator {
    rng: StdRng,
    world: World,
    tenant_weights: Vec<u32>,
    live: Vec<Live>,
    seq: i64,
    ts: i64,
}

impl Generator {
    fn new() -> Self {
        let mut rng = StdRng::seed_from_u64(20261123);
        let tenants: Vec<String> = (0..TENANTS).map(|i| format!("tenant-{i:02}")).collect();
        let keys = (0..TENANTS)
            .map(|i| {
                (0..1 + (TENANTS - i) / 8)
                    .map(|_| format!("agent:{}", id(&mut rng, "k_")))
                    .collect()
            })
            .collect();
        let operators = (0..4)
            .map(|_| format!("operator:{}", id(&mut rng, "o_")))
            .collect();
        // Zipf-like: tenant i weighs 1/(i+1).
        let tenant_weights = (0..TENANTS).map(|i| 100_000 / (i as u32 + 1)).collect();
        Self {
            rng,
            world: World {
                tenants,
                keys,
                operators,
                long_session: Default::default(),
                session_actor: String::new(),
                span: (0, 0),
            },
            tenant_weights,
            live: Vec::new(),
            seq: 0,
            ts: START_MS,
        }
    }

    fn tenant(&mut self) -> usize {
        let weights: Vec<(usize, u32)> = self.tenant_weights.iter().copied().enumerate().collect();
        pick(&mut self.rng, &weights, |w| w.1).0
    }

    fn new_session(&mut self) -> Live {
        let tenant = self.tenant();
        let actor = if self.rng.random_bool(0.05) {
            let i = self.rng.random_range(0..self.world.operators.len());
            self.world.operators[i].clone()
        } else {
            let keys = &self.world.keys[tenant];
            keys[self.rng.random_range(0..keys.len())].clone()
        };
        // Geometric-ish lengths, mean ~50, a few long ones.
        let u: f64 = self.rng.random_range(0.0001..1.0);
        let left = ((-u.ln() * 48.0) as u32 + 2).min(3000);
        Live {
            id: id(&mut self.rng, "s_"),
            tenant,
            actor,
            left,
            opened: false,
        }
    }

    fn next(&mut self) -> Row {
        self.seq += 1;
        self.ts += self.rng.random_range(0..15_500);
        while self.live.len() < 24 {
            let s = self.new_session();
            self.live.push(s);
        }
        if self.rng.random_bool(0.05) {
            return self.other();
        }
        let i = self.rng.random_range(0..self.live.len());
        let s = &mut self.live[i];
        let tenant = Some(self.world.tenants[s.tenant].clone());
        let session = Some(s.id.clone());
        let (actor, action) = if !s.opened {
            s.opened = true;
            (s.actor.clone(), "session.open".to_owned())
        } else if s.left <= 1 {
            let by_system = self.rng.random_bool(0.2);
            (
                if by_system {
                    "system".into()
                } else {
                    s.actor.clone()
                },
                "session.close".into(),
            )
        } else {
            let (action, _) = *pick(&mut self.rng, TOOLS, |t| t.1);
            (self.live[i].actor.clone(), action.to_owned())
        };
        let s = &mut self.live[i];
        s.left = s.left.saturating_sub(1);
        let done = s.left == 0;
        if done {
            self.live.swap_remove(i);
        }
        let params = if action == "tool.navigate" {
            format!(r#"{{"url":"https://example.com/p/{}"}}"#, self.seq % 997)
        } else if action == "tool.type" {
            format!(r#"{{"chars":{}}}"#, self.seq % 40)
        } else {
            format!(r#"{{"x":{},"y":{}}}"#, self.seq % 1280, self.seq % 720)
        };
        Row {
            seq: self.seq,
            ts: self.ts,
            tenant,
            session,
            actor,
            action,
            params,
            outcome: "requested".into(),
        }
    }

    fn other(&mut self) -> Row {
        let (action, by, _) = *pick(&mut self.rng, OTHERS, |o| o.2);
        let tenant = self.tenant();
        let actor = match by {
            By::Agent => {
                let keys = &self.world.keys[tenant];
                keys[self.rng.random_range(0..keys.len())].clone()
            }
            By::Operator => {
                self.world.operators[self.rng.random_range(0..self.world.operators.len())].clone()
            }
            By::Cli => "cli".into(),
            By::System => "system".into(),
        };
        let tenant = (action != "keys.rotate").then(|| self.world.tenants[tenant].clone());
        Row {
            seq: self.seq,
            ts: self.ts,
            tenant,
            session: None,
            actor,
            action: action.into(),
            params: "{}".into(),
            outcome: "ok".into(),
        }
    }
}

/// Writes `n` events in transactions of 20,000, 500 rows per statement.
async fn load(url: &str, n: usize) -> anyhow::Result<World> {
    let mut conn = sqlx::AnyConnection::connect(url).await?;
    if url.starts_with("sqlite") {
        sqlx::query("PRAGMA cache_size = -262144")
            .execute(&mut conn)
            .await?;
    }
    let mut g = Generator::new();
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let mut tx = conn.begin().await?;
        for _ in 0..40 {
            let rows: Vec<Row> = (0..500.min(n - done)).map(|_| g.next()).collect();
            if rows.is_empty() {
                break;
            }
            done += rows.len();
            let mut sql = String::from(
                "INSERT INTO audit_events (seq, ts, tenant_id, session_id, actor, action, params, outcome, prev_hash, hash) VALUES ",
            );
            for (i, _) in rows.iter().enumerate() {
                let b = i * 10;
                if i > 0 {
                    sql.push(',');
                }
                sql.push_str(&format!(
                    "(${},${},${},${},${},${},${},${},${},${})",
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4,
                    b + 5,
                    b + 6,
                    b + 7,
                    b + 8,
                    b + 9,
                    b + 10
                ));
            }
            let mut q = sqlx::query(&sql);
            for r in rows {
                let hash = format!("{:064x}", r.seq);
                let prev = format!("{:064x}", r.seq - 1);
                q = q
                    .bind(r.seq)
                    .bind(r.ts)
                    .bind(r.tenant)
                    .bind(r.session)
                    .bind(r.actor)
                    .bind(r.action)
                    .bind(r.params)
                    .bind(r.outcome)
                    .bind(prev)
                    .bind(hash);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        if done % 200_000 == 0 {
            eprintln!("  {done} events, {:.0} s", t.elapsed().as_secs_f64());
        }
    }
    sqlx::query("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1")
        .bind(g.seq)
        .bind(format!("{:064x}", g.seq))
        .execute(&mut conn)
        .await?;
    if url.starts_with("postgres") {
        // What autovacuum would have done by the time a table holds a
        // million rows: statistics and the visibility map.
        sqlx::raw_sql("VACUUM ANALYZE audit_events")
            .execute(&mut conn)
            .await?;
    }
    eprintln!(
        "  loaded {done} events in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let mut world = g.world;
    let (session, events): (String, i64) = sqlx::query_as(
        "SELECT session_id, COUNT(*) AS n FROM audit_events \
         WHERE tenant_id = $1 AND session_id IS NOT NULL AND seq >= $2 AND seq <= $3 \
         GROUP BY session_id ORDER BY n DESC, session_id LIMIT 1",
    )
    .bind(&world.tenants[0])
    .bind(i64::try_from(n * 2 / 5)?)
    .bind(i64::try_from(n * 3 / 5)?)
    .fetch_one(&mut conn)
    .await?;
    world.session_actor = sqlx::query_scalar(
        "SELECT actor FROM audit_events WHERE session_id = $1 ORDER BY seq LIMIT 1",
    )
    .bind(&session)
    .fetch_one(&mut conn)
    .await?;
    world.long_session = (session, usize::try_from(events)?);
    world.span = (START_MS, g.ts);
    Ok(world)
}

// --- the filters measured ----------------------------------------------------

struct Case {
    label: String,
    input: AuditFilterInput,
}

fn cases(w: &World) -> Vec<Case> {
    let big = w.tenants[0].clone();
    let small = w.tenants[TENANTS - 1].clone();
    let agent = w.keys[0][0].clone();
    let session = w.long_session.0.clone();
    let session_actor = w.session_actor.clone();
    // One day in the middle of the log, and its middle third.
    let mid = (w.span.0 + w.span.1) / 2;
    let third = (w.span.1 - w.span.0) / 3;
    let day = (mid - DAY_MS / 2, mid + DAY_MS / 2 - 1);
    let month = (mid - third / 2, mid + third / 2);
    let f = |tenant: Option<&str>,
             session: Option<&str>,
             actor: Option<&str>,
             action: Option<&str>,
             time: Option<(i64, i64)>| AuditFilterInput {
        tenant: tenant.map(Into::into),
        session: session.map(Into::into),
        actor: actor.map(Into::into),
        action_prefix: action.map(Into::into),
        from_ms: time.map(|t| t.0),
        to_ms: time.map(|t| t.1),
    };
    let s = Some(session.as_str());
    let big_t = Some(big.as_str());
    let small_t = Some(small.as_str());
    let ag = Some(agent.as_str());
    let sys = Some("system");
    vec![
        ("none", f(None, None, None, None, None)),
        ("tenant (largest, 23 %)", f(big_t, None, None, None, None)),
        ("tenant (smallest)", f(small_t, None, None, None, None)),
        ("session", f(None, s, None, None, None)),
        ("actor (agent key)", f(None, None, ag, None, None)),
        ("actor system", f(None, None, sys, None, None)),
        ("action tool.", f(None, None, None, Some("tool."), None)),
        ("action grant.", f(None, None, None, Some("grant."), None)),
        (
            "action tool.wait_",
            f(None, None, None, Some("tool.wait_"), None),
        ),
        ("time (1 day)", f(None, None, None, None, Some(day))),
        ("tenant + session", f(big_t, s, None, None, None)),
        (
            "tenant (largest) + actor system",
            f(big_t, None, sys, None, None),
        ),
        (
            "tenant (smallest) + actor system",
            f(small_t, None, sys, None, None),
        ),
        (
            "tenant (largest) + action grant.",
            f(big_t, None, None, Some("grant."), None),
        ),
        (
            "tenant (smallest) + action tool.",
            f(small_t, None, None, Some("tool."), None),
        ),
        (
            "tenant (smallest) + time (1 day)",
            f(small_t, None, None, None, Some(day)),
        ),
        (
            "session + actor",
            f(None, s, Some(&session_actor), None, None),
        ),
        (
            "session + action tool.",
            f(None, s, None, Some("tool."), None),
        ),
        (
            "session + time (middle third)",
            f(None, s, None, None, Some(month)),
        ),
        (
            "actor (agent key) + action grant.",
            f(None, None, ag, Some("grant."), None),
        ),
        (
            "actor system + action tool. (none)",
            f(None, None, sys, Some("tool."), None),
        ),
        (
            "actor (agent key) + time (1 day)",
            f(None, None, ag, None, Some(day)),
        ),
        (
            "action grant. + time (1 day)",
            f(None, None, None, Some("grant."), Some(day)),
        ),
        (
            "action tool. + time (middle third)",
            f(None, None, None, Some("tool."), Some(month)),
        ),
        (
            "tenant (smallest) + actor of largest (none)",
            f(small_t, None, ag, None, None),
        ),
        (
            "tenant + actor + action tool.",
            f(big_t, None, ag, Some("tool."), None),
        ),
        (
            "all five",
            f(big_t, s, Some(&session_actor), Some("tool."), Some(month)),
        ),
    ]
    .into_iter()
    .map(|(label, input)| Case {
        label: label.into(),
        input,
    })
    .collect()
}

/// How many events match, by a plain count (once per case, not timed).
async fn count(url: &str, input: &AuditFilterInput) -> anyhow::Result<i64> {
    let mut conn = sqlx::AnyConnection::connect(url).await?;
    let mut conds = vec!["1 = 1".to_owned()];
    let mut args: Vec<String> = Vec::new();
    for (col, v) in [
        ("tenant_id", &input.tenant),
        ("session_id", &input.session),
        ("actor", &input.actor),
    ] {
        if let Some(v) = v {
            args.push(v.clone());
            conds.push(format!("{col} = ${}", args.len()));
        }
    }
    if let Some(p) = &input.action_prefix {
        args.push(p.clone());
        conds.push(format!("substr(action, 1, {}) = ${}", p.len(), args.len()));
    }
    if let (Some(from), Some(to)) = (input.from_ms, input.to_ms) {
        conds.push(format!("ts >= {from} AND ts <= {to}"));
    }
    let sql = format!(
        "SELECT COUNT(*) AS n FROM audit_events WHERE {}",
        conds.join(" AND ")
    );
    let mut q = sqlx::query_scalar::<_, i64>(&sql);
    for a in args {
        q = q.bind(a);
    }
    Ok(q.fetch_one(&mut conn).await?)
}

async fn timed(
    store: &Store,
    filter: &AuditFilter,
    cursor: AuditCursor,
    iters: usize,
) -> anyhow::Result<(Stats, AuditPage)> {
    let size = PageSize::default();
    let mut times = Vec::with_capacity(iters);
    let mut page = store.audit_query(filter, cursor, size).await?;
    for _ in 0..iters {
        let t = Instant::now();
        page = store.audit_query(filter, cursor, size).await?;
        times.push(t.elapsed());
    }
    Ok((Stats(times), page))
}

/// Every case at the first, a middle and the last page.
async fn audit(backend: &str, url: &str, world: &World, iters: usize) -> anyhow::Result<()> {
    let store = Store::connect(&SecretString::from(url.to_owned())).await?;
    println!("\n### {backend}: audit_query, page of 50, {iters} rounds (p50 / p95 ms)\n");
    println!("| filter | matching | first page | middle page | last page |");
    println!("| --- | --- | --- | --- | --- |");
    let mut worst: f64 = 0.0;
    for case in cases(world) {
        let filter = AuditFilter::parse(case.input.clone()).context("bench filter")?;
        let matching = count(url, &case.input).await?;
        let (first, page) = timed(&store, &filter, AuditCursor::Newest, iters).await?;
        let (last, oldest) = timed(&store, &filter, AuditCursor::Oldest, iters).await?;
        // The middle by seq: halfway between the newest and the oldest match.
        let middle_cursor = match (page.events.first(), oldest.events.last()) {
            (Some(n), Some(o)) => AuditCursor::Before((n.seq + o.seq) / 2),
            _ => AuditCursor::Newest,
        };
        let (middle, mid_page) = timed(&store, &filter, middle_cursor, iters).await?;
        // The pages hold what they should.
        for e in page
            .events
            .iter()
            .chain(&mid_page.events)
            .chain(&oldest.events)
        {
            let ok = case
                .input
                .tenant
                .as_ref()
                .is_none_or(|t| e.tenant.as_ref() == Some(t))
                && case
                    .input
                    .session
                    .as_ref()
                    .is_none_or(|s| e.session.as_ref() == Some(s))
                && case.input.actor.as_ref().is_none_or(|a| &e.actor == a)
                && case
                    .input
                    .action_prefix
                    .as_ref()
                    .is_none_or(|p| e.action.starts_with(p.as_str()))
                && case.input.from_ms.is_none_or(|f| e.ts >= f)
                && case.input.to_ms.is_none_or(|t| e.ts <= t);
            assert!(ok, "{}: {e:?} does not match", case.label);
        }
        let expected = (matching as usize).min(50);
        assert_eq!(page.events.len(), expected, "{}: first page", case.label);
        assert_eq!(oldest.events.len(), expected, "{}: last page", case.label);
        for s in [&first, &middle, &last] {
            worst = worst.max(ms(s.pct(0.95)));
        }
        println!(
            "| {} | {matching} | {} | {} | {} |",
            case.label,
            first.cell(),
            middle.cell(),
            last.cell()
        );
    }
    println!("\n{backend}: worst p95 {worst:.2} ms");
    println!("\n{backend}: {}", sizes(url).await?);
    // What the indexes cost the write path: real appends (lock, head row,
    // previous time, insert) on the full table, with them and without.
    let with = appends(&store, iters * 5).await?;
    let mut conn = sqlx::AnyConnection::connect(url).await?;
    for index in INDEXES_0007 {
        sqlx::raw_sql(&format!("DROP INDEX {index}"))
            .execute(&mut conn)
            .await?;
    }
    let without = appends(&store, iters * 5).await?;
    println!(
        "\n{backend}: `audit_append` p50 / p95 ms at 1M rows: {} with the 0007 indexes, {} without",
        with.cell(),
        without.cell()
    );
    store.close().await;
    Ok(())
}

/// One table's or index's size on disk, bytes.
async fn size(conn: &mut sqlx::AnyConnection, sqlite: bool, name: &str) -> anyhow::Result<i64> {
    let sql = if sqlite {
        "SELECT CAST(COALESCE(SUM(pgsize), 0) AS BIGINT) FROM dbstat WHERE name = $1"
    } else {
        "SELECT pg_relation_size($1::regclass)"
    };
    Ok(sqlx::query_scalar::<_, i64>(sql)
        .bind(name)
        .fetch_one(conn)
        .await?)
}

/// The table's and the indexes' size on disk.
async fn sizes(url: &str) -> anyhow::Result<String> {
    let mut conn = sqlx::AnyConnection::connect(url).await?;
    let sqlite = url.starts_with("sqlite");
    let mib = |b: i64| b as f64 / (1 << 20) as f64;
    let table = size(&mut conn, sqlite, "audit_events").await?;
    let mut before = 0;
    for index in ["audit_events_tenant", "audit_events_session"] {
        before += size(&mut conn, sqlite, index).await?;
    }
    let mut added = 0;
    for index in INDEXES_0007 {
        added += size(&mut conn, sqlite, index).await?;
    }
    Ok(format!(
        "`audit_events` {:.0} MiB, its indexes before 0007 {:.0} MiB, the five 0007 indexes {:.0} MiB",
        mib(table),
        mib(before),
        mib(added)
    ))
}

/// The indexes migration 0007 adds.
const INDEXES_0007: [&str; 5] = [
    "audit_events_ts",
    "audit_events_action",
    "audit_events_actor_action",
    "audit_events_tenant_action",
    "audit_events_tenant_actor_action",
];

async fn appends(store: &Store, n: usize) -> anyhow::Result<Stats> {
    use cordon::audit::{Actor, NewEvent};
    let tenant: cordon::domain::TenantId = "tenant-07".parse()?;
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let event = NewEvent::new(Actor::Agent(format!("k_bench{}", i % 3)), "tool.click")
            .tenant(&tenant)
            .session(cordon::domain::SessionId::generate().as_str())
            .params(serde_json::json!({ "x": i, "y": 2 * i }))
            .outcome("requested");
        let t = Instant::now();
        store.audit_append(event).await?;
        times.push(t.elapsed());
    }
    Ok(Stats(times))
}

/// A fresh PostgreSQL database from an admin URL; returns its URL.
async fn postgres_db(admin: &str) -> anyhow::Result<(String, String)> {
    let name = format!("cordon_bench_{}", hex::encode(rand::random::<[u8; 6]>()));
    let mut conn = sqlx::AnyConnection::connect(admin).await?;
    sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    let base = admin.rsplit_once('/').context("URL with a database")?.0;
    Ok((format!("{base}/{name}"), name))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    sqlx::any::install_default_drivers();
    let events = env_usize("BENCH_EVENTS", 1_000_000);
    let iters = env_usize("BENCH_ITER", 40);
    let shots = env_usize("BENCH_SCREENSHOTS", 10_000);
    let keep = std::env::var("BENCH_KEEP").is_ok_and(|v| v == "1");
    let tmp = tempfile::tempdir()?;
    println!(
        "cordon dashboard benchmark: {events} events, {iters} rounds, {} cores",
        std::thread::available_parallelism()?
    );

    if events > 0 {
        audit_both(tmp.path(), events, iters, keep).await?;
    }
    if shots > 0 {
        screenshots(tmp.path(), shots, iters).await?;
    }
    if keep {
        let kept = tmp.keep();
        eprintln!("kept SQLite file {}", kept.join("bench.db").display());
    }
    Ok(())
}

/// The audit search on SQLite, then on PostgreSQL if one is configured.
async fn audit_both(
    dir: &std::path::Path,
    events: usize,
    iters: usize,
    keep: bool,
) -> anyhow::Result<()> {
    // SQLite.
    let file = dir.join("bench.db");
    let url = format!("sqlite://{}", file.display());
    let store = Store::connect(&SecretString::from(url.clone())).await?;
    store.migrate().await?;
    store.close().await;
    eprintln!("loading SQLite");
    let world = load(&url, events).await?;
    eprintln!(
        "  long session: {} events; file {} MiB",
        world.long_session.1,
        std::fs::metadata(&file)?.len() >> 20
    );
    audit("SQLite", &url, &world, iters).await?;

    // PostgreSQL.
    let admin = std::env::var("BENCH_POSTGRES_URL")
        .or_else(|_| std::env::var("CORDON_TEST_POSTGRES_URL"))
        .ok();
    if let Some(admin) = admin {
        let (url, name) = postgres_db(&admin).await?;
        let store = Store::connect(&SecretString::from(url.clone())).await?;
        store.migrate().await?;
        store.close().await;
        eprintln!("loading PostgreSQL");
        let world = load(&url, events).await?;
        audit("PostgreSQL", &url, &world, iters).await?;
        if keep {
            eprintln!("kept PostgreSQL database {url}");
        } else {
            let mut conn = sqlx::AnyConnection::connect(&admin).await?;
            // FORCE: a connection the benchmark dropped may not be closed yet.
            sqlx::raw_sql(&format!("DROP DATABASE {name} WITH (FORCE)"))
                .execute(&mut conn)
                .await?;
        }
    } else {
        println!("\n(PostgreSQL skipped: set BENCH_POSTGRES_URL or CORDON_TEST_POSTGRES_URL)");
    }
    Ok(())
}

/// A 1280×720 JPEG with something on it, as a screenshot would be.
fn frame_jpeg(seed: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(1280, 720, |x, y| {
        let band = ((y / 40 + seed) % 7) as u8;
        image::Rgb([
            (x / 5) as u8 ^ band.wrapping_mul(31),
            (y / 3) as u8,
            band.wrapping_mul(36),
        ])
    });
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 60)
        .encode_image(&img)
        .expect("encode a frame");
    out
}

/// One session's `n` screenshots: the timeline, a full image, and a
/// thumbnail the first time (made) and after (read back).
async fn screenshots(dir: &std::path::Path, n: usize, iters: usize) -> anyhow::Result<()> {
    use cordon::recording::{RecordMode, Recorder, ScreenshotId, Variant};
    let rec = Recorder::new(dir);
    let tenant: cordon::domain::TenantId = "bench".parse()?;
    let session = cordon::domain::SessionId::generate();
    let frames: Vec<Vec<u8>> = (0..8).map(frame_jpeg).collect();
    let t = Instant::now();
    for seq in 1..=n as u64 {
        rec.save(
            RecordMode::Audit,
            tenant.as_str(),
            session.as_str(),
            seq,
            "jpg",
            &frames[seq as usize % frames.len()],
        )
        .await?;
    }
    eprintln!(
        "  wrote {n} screenshots ({} KiB each) in {:.1} s",
        frames[0].len() >> 10,
        t.elapsed().as_secs_f64()
    );
    let mut times = Vec::new();
    let mut listed = 0;
    for _ in 0..iters {
        let t = Instant::now();
        listed = rec.timeline(&tenant, &session).await?.len();
        times.push(t.elapsed());
    }
    assert_eq!(listed, n);
    let timeline = Stats(times);
    let mut times = Vec::new();
    for _ in 0..iters {
        let t = Instant::now();
        rec.expires_at(&tenant, &session, Duration::from_secs(30 * 86_400))
            .await?
            .context("frames are there")?;
        times.push(t.elapsed());
    }
    let expires = Stats(times);
    let id = |seq: u64| ScreenshotId::new(tenant.clone(), session.clone(), seq);
    let mut full = Vec::new();
    let mut made = Vec::new();
    let mut kept = Vec::new();
    for i in 0..iters as u64 {
        let seq = 1 + i * (n as u64 / iters as u64).max(1);
        let t = Instant::now();
        rec.open(&id(seq), Variant::Full).await?;
        full.push(t.elapsed());
        let t = Instant::now();
        rec.open(&id(seq), Variant::Thumb).await?;
        made.push(t.elapsed());
        let t = Instant::now();
        rec.open(&id(seq), Variant::Thumb).await?;
        kept.push(t.elapsed());
    }
    println!("\n### Screenshots: one session of {n} (p50 / p95 ms, {iters} rounds)\n");
    println!("| what | p50 / p95 |");
    println!("| --- | --- |");
    println!("| `timeline` ({n} entries) | {} |", timeline.cell());
    println!(
        "| `expires_at` (newest of {n} frames) | {} |",
        expires.cell()
    );
    println!("| `open` full image | {} |", Stats(full).cell());
    println!(
        "| `open` thumbnail, first request (made, 1280×720 → 320×180) | {} |",
        Stats(made).cell()
    );
    println!("| `open` thumbnail, kept | {} |", Stats(kept).cell());
    Ok(())
}
