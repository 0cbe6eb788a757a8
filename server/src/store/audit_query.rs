//! The dashboard's audit search: filters, keyset pages, both backends.
//!
//! A page is always a run of matching events in seq order, read from one
//! index whose leading columns the filter's equalities fill and whose last
//! column is seq (migrations `0007_audit_query.sql`), so the database walks
//! exactly the rows it returns, whichever page it is:
//!
//! - a time range becomes a seq range first (one lookup each end in the `ts`
//!   index: appends keep `ts` from going backwards, see `audit_append`);
//! - a session names few events (a session's lifetime of tool calls), so
//!   its index serves every filter it is combined with;
//! - with an actor or an action prefix, the page is the merge of one index
//!   range per distinct action the prefix covers (found first by a loose
//!   scan of the same index: one probe per action; Cordon writes about forty
//!   actions, an actor a handful to twenty-five), so a rare action under a
//!   busy actor or tenant costs no more than a common one;
//! - a tenant alone reads `audit_events_tenant`, no filter the primary key.
//!
//! An action prefix is a range, `action >= p AND action < p'` (p' is p with
//! its last byte raised), never `LIKE`: `%` and `_` stay literal and the
//! index works. Every value is bound, never spliced into the SQL.

use anyhow::Context;
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{FromRow, Row};

use super::Store;
use super::audit::COLUMNS;
use super::column::ReadContext;
use crate::domain::audit::{AuditCursor, AuditFilter, AuditPage, Event, PageSize};

/// Which index reads a filter's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drive {
    /// No equality filter: the primary key.
    Seq,
    /// Only a tenant: `audit_events_tenant`.
    Tenant,
    /// A session (with anything else checked row by row):
    /// `audit_events_session`.
    Session,
    /// An actor or an action prefix (with or without a tenant): one range
    /// per action of `audit_events_{,actor_,tenant_,tenant_actor_}action`.
    PerAction,
}

impl Drive {
    fn of(filter: &AuditFilter) -> Self {
        if filter.session().is_some() {
            Self::Session
        } else if filter.actor().is_some() || filter.action_prefix().is_some() {
            Self::PerAction
        } else if filter.tenant().is_some() {
            Self::Tenant
        } else {
            Self::Seq
        }
    }
}

/// A bound value.
enum Arg {
    Int(i64),
    Text(String),
}

/// SQL text with `$n` placeholders and the values they stand for.
#[derive(Default)]
struct Sql {
    text: String,
    args: Vec<Arg>,
}

impl Sql {
    /// Binds `arg` and returns its placeholder.
    fn bind(&mut self, arg: Arg) -> String {
        self.args.push(arg);
        format!("${}", self.args.len())
    }

    fn query(&self) -> Query<'_, sqlx::Any, AnyArguments<'_>> {
        let mut q = sqlx::query(&self.text);
        for arg in &self.args {
            q = match arg {
                Arg::Int(n) => q.bind(*n),
                Arg::Text(s) => q.bind(s.as_str()),
            };
        }
        q
    }
}

/// One read: matching seqs in `[lo, hi]`, in one direction, at most `limit`.
struct Window {
    lo: i64,
    hi: i64,
    newest_first: bool,
    limit: i64,
}

impl Window {
    fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
}

/// The filter's equalities on `alias` (`""` or `"e."`), bound in `sql`:
/// session, tenant and actor; and, when a session drives, the action prefix
/// (checked row by row within the session's events, as `substr` so the
/// planner stays on the session's index; the length is our own number).
fn equalities(sql: &mut Sql, filter: &AuditFilter, alias: &str) -> Vec<String> {
    let mut eq = Vec::new();
    if let Some(s) = filter.session() {
        let p = sql.bind(Arg::Text(s.as_str().into()));
        eq.push(format!("{alias}session_id = {p}"));
    }
    if let Some(t) = filter.tenant() {
        let p = sql.bind(Arg::Text(t.as_str().into()));
        eq.push(format!("{alias}tenant_id = {p}"));
    }
    if let Some(a) = filter.actor() {
        let p = sql.bind(Arg::Text(a.into()));
        eq.push(format!("{alias}actor = {p}"));
    }
    if Drive::of(filter) == Drive::Session
        && let Some(prefix) = filter.action_prefix()
    {
        let p = sql.bind(Arg::Text(prefix.into()));
        eq.push(format!("substr({alias}action, 1, {}) = {p}", prefix.len()));
    }
    eq
}

/// Appends to `sql` a `SELECT seq …` of the matching seqs in `window`, in
/// its order, at most its limit. `actions` are the branches of
/// [`Drive::PerAction`].
fn seqs(sql: &mut Sql, filter: &AuditFilter, actions: &[String], window: &Window) {
    let drive = Drive::of(filter);
    let dir = if window.newest_first { "DESC" } else { "ASC" };
    let lo = sql.bind(Arg::Int(window.lo));
    let hi = sql.bind(Arg::Int(window.hi));
    let limit = sql.bind(Arg::Int(window.limit));
    let eq = equalities(sql, filter, "");
    let branch = |sql: &mut Sql, extra: Option<&str>| {
        let mut conds = eq.clone();
        if let Some(action) = extra {
            conds.push(format!("action = {}", sql.bind(Arg::Text(action.into()))));
        }
        conds.push(format!("seq >= {lo} AND seq <= {hi}"));
        format!(
            "SELECT seq FROM audit_events WHERE {} ORDER BY seq {dir} LIMIT {limit}",
            conds.join(" AND ")
        )
    };
    let text = if drive == Drive::PerAction {
        let branches: Vec<String> = actions
            .iter()
            .enumerate()
            .map(|(i, action)| {
                format!(
                    "SELECT seq FROM ({}) AS b{i}",
                    branch(sql, Some(action.as_str()))
                )
            })
            .collect();
        format!(
            "SELECT seq FROM ({}) AS u ORDER BY seq {dir} LIMIT {limit}",
            branches.join(" UNION ALL ")
        )
    } else {
        branch(sql, None)
    };
    sql.text.push_str(&text);
}

impl Store {
    /// One page of the events matching `filter`, newest first, starting at
    /// `cursor`; see the module documentation for how each filter is read.
    /// `has_older` / `has_newer` say whether matching events lie beyond
    /// either end of the page (the page reads one more than it shows, and
    /// probes the other side of its cursor).
    #[tracing::instrument(skip_all, fields(audit.cursor = %cursor))]
    pub async fn audit_query(
        &self,
        filter: &AuditFilter,
        cursor: AuditCursor,
        size: PageSize,
    ) -> anyhow::Result<AuditPage> {
        let empty = AuditPage {
            events: Vec::new(),
            has_older: false,
            has_newer: false,
        };
        let Some((lo, hi)) = self.audit_seq_range(filter).await? else {
            return Ok(empty);
        };
        let actions = if Drive::of(filter) == Drive::PerAction {
            let actions = self.audit_actions(filter).await?;
            if actions.is_empty() {
                return Ok(empty);
            }
            actions
        } else {
            Vec::new()
        };
        let n = i64::from(size.get());
        // The page itself, and the other side of its cursor (probed for one
        // event, only where the page cannot tell).
        let (page, beyond) = match cursor {
            AuditCursor::Newest => (
                Window {
                    lo,
                    hi,
                    newest_first: true,
                    limit: n + 1,
                },
                None,
            ),
            AuditCursor::Oldest => (
                Window {
                    lo,
                    hi,
                    newest_first: false,
                    limit: n + 1,
                },
                None,
            ),
            AuditCursor::Before(s) => (
                Window {
                    lo,
                    hi: hi.min(s.saturating_sub(1)),
                    newest_first: true,
                    limit: n + 1,
                },
                Some(Window {
                    lo: lo.max(s),
                    hi,
                    newest_first: false,
                    limit: 1,
                }),
            ),
            AuditCursor::After(s) => (
                Window {
                    lo: lo.max(s.saturating_add(1)),
                    hi,
                    newest_first: false,
                    limit: n + 1,
                },
                Some(Window {
                    lo,
                    hi: hi.min(s),
                    newest_first: true,
                    limit: 1,
                }),
            ),
        };
        let mut events = if page.is_empty() {
            Vec::new()
        } else {
            self.audit_window(filter, &actions, &page).await?
        };
        let more = events.len() as i64 > n;
        events.truncate(size.get() as usize);
        if !page.newest_first {
            events.reverse();
        }
        let beyond = match beyond {
            Some(w) if !w.is_empty() => self.audit_any(filter, &actions, &w).await?,
            _ => false,
        };
        let (has_older, has_newer) = if page.newest_first {
            (more, beyond)
        } else {
            (beyond, more)
        };
        Ok(AuditPage {
            events,
            has_older,
            has_newer,
        })
    }

    /// The matching events in `window`, in its order.
    async fn audit_window(
        &self,
        filter: &AuditFilter,
        actions: &[String],
        window: &Window,
    ) -> anyhow::Result<Vec<Event>> {
        let mut sql = Sql {
            text: format!("SELECT {COLUMNS} FROM audit_events WHERE seq IN ("),
            args: Vec::new(),
        };
        seqs(&mut sql, filter, actions, window);
        sql.text.push_str(&format!(
            ") ORDER BY seq {}",
            if window.newest_first { "DESC" } else { "ASC" }
        ));
        sql.query()
            .try_map(|r: sqlx::any::AnyRow| Event::from_row(&r))
            .fetch_all(self.pool())
            .await
            .read("failed to query audit events", "malformed audit row")
    }

    /// Whether any event in `window` matches.
    async fn audit_any(
        &self,
        filter: &AuditFilter,
        actions: &[String],
        window: &Window,
    ) -> anyhow::Result<bool> {
        let mut sql = Sql::default();
        seqs(&mut sql, filter, actions, window);
        let row = sql
            .query()
            .fetch_optional(self.pool())
            .await
            .context("failed to probe audit events")?;
        Ok(row.is_some())
    }

    /// The filter's time range as an inclusive seq range; `None` when no
    /// event falls in it. Exact because `ts` never decreases along seq.
    async fn audit_seq_range(&self, filter: &AuditFilter) -> anyhow::Result<Option<(i64, i64)>> {
        let mut lo = 0;
        let mut hi = i64::MAX;
        if let Some(from) = filter.from_ms() {
            let row =
                sqlx::query("SELECT seq FROM audit_events WHERE ts >= $1 ORDER BY ts, seq LIMIT 1")
                    .bind(from)
                    .fetch_optional(self.pool())
                    .await
                    .context("failed to find the start of a time range")?;
            match row {
                Some(row) => lo = row.try_get("seq")?,
                None => return Ok(None),
            }
        }
        if let Some(to) = filter.to_ms() {
            let row = sqlx::query(
                "SELECT seq FROM audit_events WHERE ts <= $1 ORDER BY ts DESC, seq DESC LIMIT 1",
            )
            .bind(to)
            .fetch_optional(self.pool())
            .await
            .context("failed to find the end of a time range")?;
            match row {
                Some(row) => hi = row.try_get("seq")?,
                None => return Ok(None),
            }
        }
        Ok((lo <= hi).then_some((lo, hi)))
    }

    /// The distinct actions among the events the filter's equalities
    /// (tenant, actor) select that its prefix covers (all without a
    /// prefix), by a loose scan of the index those equalities lead: one
    /// index probe per action found.
    async fn audit_actions(&self, filter: &AuditFilter) -> anyhow::Result<Vec<String>> {
        let mut sql = Sql::default();
        let start = sql.bind(Arg::Text(filter.action_prefix().unwrap_or("").into()));
        let end = filter
            .action_prefix_end()
            .map(|end| sql.bind(Arg::Text(end)));
        let first = equalities(&mut sql, filter, "");
        let next = equalities(&mut sql, filter, "e.");
        let below = |col: &str| {
            end.as_ref()
                .map(|end| format!(" AND {col} < {end}"))
                .unwrap_or_default()
        };
        let and = |conds: Vec<String>| conds.into_iter().map(|c| c + " AND ").collect::<String>();
        sql.text = format!(
            "WITH RECURSIVE acts(action) AS ( \
               SELECT (SELECT action FROM audit_events \
                       WHERE {}action >= {start}{} ORDER BY action LIMIT 1) \
               UNION ALL \
               SELECT (SELECT e.action FROM audit_events AS e \
                       WHERE {}e.action > acts.action{} ORDER BY e.action LIMIT 1) \
               FROM acts WHERE acts.action IS NOT NULL \
             ) SELECT action FROM acts WHERE action IS NOT NULL",
            and(first),
            below("action"),
            and(next),
            below("e.action"),
        );
        sql.query()
            .try_map(|r: sqlx::any::AnyRow| r.try_get::<String, _>("action"))
            .fetch_all(self.pool())
            .await
            .read("failed to list audit actions", "malformed audit action")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::audit::AuditFilterInput;

    fn filter(input: AuditFilterInput) -> AuditFilter {
        AuditFilter::parse(input).unwrap()
    }

    fn window() -> Window {
        Window {
            lo: 0,
            hi: 99,
            newest_first: true,
            limit: 51,
        }
    }

    #[test]
    fn each_filter_is_read_from_its_index() {
        let session = crate::domain::SessionId::generate().to_string();
        let cases = [
            (AuditFilterInput::default(), Drive::Seq),
            (
                AuditFilterInput {
                    from_ms: Some(1),
                    ..Default::default()
                },
                Drive::Seq,
            ),
            (
                AuditFilterInput {
                    tenant: Some("acme".into()),
                    ..Default::default()
                },
                Drive::Tenant,
            ),
            (
                AuditFilterInput {
                    tenant: Some("acme".into()),
                    actor: Some("system".into()),
                    session: Some(session),
                    action_prefix: Some("tool.".into()),
                    ..Default::default()
                },
                Drive::Session,
            ),
            (
                AuditFilterInput {
                    tenant: Some("acme".into()),
                    actor: Some("system".into()),
                    ..Default::default()
                },
                Drive::PerAction,
            ),
            (
                AuditFilterInput {
                    action_prefix: Some("tool.".into()),
                    ..Default::default()
                },
                Drive::PerAction,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(Drive::of(&filter(input.clone())), want, "{input:?}");
        }
    }

    #[test]
    fn values_are_bound_never_spliced() {
        let hostile = "o'); DROP TABLE audit_events; --%_";
        let f = filter(AuditFilterInput {
            actor: Some(hostile.into()),
            action_prefix: Some("tool.'%".into()),
            ..Default::default()
        });
        let mut sql = Sql::default();
        seqs(&mut sql, &f, &["tool.'%x".into()], &window());
        assert!(!sql.text.contains('\''), "{}", sql.text);
        assert!(!sql.text.contains("LIKE"), "{}", sql.text);
        assert!(
            sql.args
                .iter()
                .any(|a| matches!(a, Arg::Text(s) if s == hostile))
        );
    }

    #[test]
    fn one_branch_per_action_each_in_seq_order() {
        let f = filter(AuditFilterInput {
            tenant: Some("acme".into()),
            action_prefix: Some("tool.".into()),
            ..Default::default()
        });
        let mut sql = Sql::default();
        let actions = ["tool.click".to_owned(), "tool.navigate".to_owned()];
        seqs(&mut sql, &f, &actions, &window());
        assert_eq!(sql.text.matches("UNION ALL").count(), 1, "{}", sql.text);
        assert_eq!(sql.text.matches("ORDER BY seq DESC").count(), 3);
        assert!(sql.text.contains("tenant_id = $4 AND action = $5"));
        assert!(sql.text.contains("tenant_id = $4 AND action = $6"));
    }
}
