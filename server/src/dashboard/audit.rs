//! The audit page: filtered, keyset-paginated reading; chain verification.

use app::api::audit::{
    AuditCursor as UiCursor, AuditPageView, AuditQuery, AuditRow, AuditVerification,
};
use app::api::auth::Operator;
use app::api::backend::{AuditBackend, UiResult};
use app::error::UiError;

use super::internal;
use crate::audit::Event;
use crate::audit::{self, Verification};
use crate::audit::{
    AuditCursor, AuditFilter, AuditFilterInput, AuditPage, AuditQueryError, PageSize,
};
use crate::state::AppState;
use crate::time::rfc3339_ms;

/// An event as the page lists it.
pub(super) fn row(e: Event) -> AuditRow {
    AuditRow {
        seq: e.seq,
        ts: rfc3339_ms(e.ts),
        tenant: e.tenant,
        session: e.session,
        actor: e.actor,
        action: e.action,
        params: e.params,
        outcome: e.outcome,
        hash_prefix: e.hash.chars().take(12).collect(),
    }
}

#[async_trait::async_trait]
impl AuditBackend for AppState {
    async fn audit(&self, op: &Operator, query: AuditQuery) -> UiResult<AuditPageView> {
        let time = |field: &'static str, v: Option<String>| -> UiResult<Option<i64>> {
            v.filter(|t| !t.trim().is_empty())
                .map(|t| {
                    parse_time(t.trim()).ok_or_else(|| {
                        UiError::invalid(field, "a UTC time like 2026-11-23T09:00 or 2026-11-23")
                    })
                })
                .transpose()
        };
        let filter = AuditFilter::parse(AuditFilterInput {
            tenant: query.tenant,
            session: query.session,
            actor: query.actor,
            action_prefix: query.action,
            from_ms: time("from", query.from)?,
            to_ms: time("to", query.to)?,
        })
        .map_err(invalid)?;
        let size = PageSize::parse(query.limit).map_err(invalid)?;
        let cursor = match query.cursor {
            UiCursor::Newest => AuditCursor::Newest,
            UiCursor::Oldest => AuditCursor::Oldest,
            UiCursor::Before(n) => AuditCursor::Before(n),
            UiCursor::After(n) => AuditCursor::After(n),
        };
        let page = match (&op.tenants, filter.tenant()) {
            (None, _) => self
                .store
                .audit_query(&filter, cursor, size)
                .await
                .map_err(|e| internal("reading the audit log", e))?,
            (Some(_), Some(t)) if !op.sees(t.as_str()) => {
                self.auth
                    .out_of_scope(&op.id, "read the audit log", t.as_str())
                    .await;
                AuditPage {
                    events: Vec::new(),
                    has_older: false,
                    has_newer: false,
                }
            }
            (Some(_), Some(_)) => self
                .store
                .audit_query(&filter, cursor, size)
                .await
                .map_err(|e| internal("reading the audit log", e))?,
            (Some(scope), None) => scoped_page(self, &filter, scope, cursor, size).await?,
        };
        Ok(AuditPageView {
            rows: page.events.into_iter().map(row).collect(),
            has_older: page.has_older,
            has_newer: page.has_newer,
        })
    }

    async fn verify_audit(&self, op: &Operator) -> UiResult<AuditVerification> {
        let v = audit::verify(&self.store)
            .await
            .map_err(|e| internal("verifying the audit log", e))?;
        let result = match v {
            Verification::Intact { events } => AuditVerification {
                intact: true,
                events,
                broken_seq: None,
                reason: None,
            },
            Verification::Broken { seq, reason } => AuditVerification {
                intact: false,
                events: seq - 1,
                broken_seq: Some(seq),
                reason: Some(reason),
            },
        };
        *self.last_verification.0.lock().expect("verification lock") = Some(result.clone());
        scoped_verification(self, op, result).await
    }
}

/// One page of a scoped operator's events (no tenant asked for): the same
/// page read for each tenant of their scope, merged. Events naming no
/// tenant (logins, operators, configuration) are not theirs to see.
async fn scoped_page(
    state: &AppState,
    filter: &AuditFilter,
    scope: &[String],
    cursor: AuditCursor,
    size: PageSize,
) -> UiResult<AuditPage> {
    let mut events = Vec::new();
    let (mut has_older, mut has_newer) = (false, false);
    for t in scope {
        let Ok(t) = t.parse::<crate::domain::TenantId>() else {
            continue;
        };
        let page = state
            .store
            .audit_query(&filter.with_tenant(t), cursor, size)
            .await
            .map_err(|e| internal("reading the audit log", e))?;
        has_older |= page.has_older;
        has_newer |= page.has_newer;
        events.extend(page.events);
    }
    events.sort_by_key(|e| std::cmp::Reverse(e.seq));
    let n = size.get() as usize;
    if events.len() > n {
        // Newest/Before pages keep the newest `n`; Oldest/After pages the
        // `n` nearest their cursor, which are the oldest of the union.
        match cursor {
            AuditCursor::Newest | AuditCursor::Before(_) => {
                events.truncate(n);
                has_older = true;
            }
            AuditCursor::Oldest | AuditCursor::After(_) => {
                events.drain(..events.len() - n);
                has_newer = true;
            }
        }
    }
    Ok(AuditPage {
        events,
        has_older,
        has_newer,
    })
}

/// A verification of the whole chain as a scoped operator may see it: the
/// number of their tenants' events, and where it breaks only when that
/// event is one of theirs.
pub(super) async fn scoped_verification(
    state: &AppState,
    op: &Operator,
    v: AuditVerification,
) -> UiResult<AuditVerification> {
    let Some(scope) = &op.tenants else {
        return Ok(v);
    };
    let events = state
        .store
        .audit_count_in(scope)
        .await
        .map_err(|e| internal("counting audit events", e))?;
    let broken_seq = match v.broken_seq {
        Some(seq) => state
            .store
            .audit_tenant_of(seq)
            .await
            .map_err(|e| internal("reading an audit event", e))?
            .filter(|t| op.sees(t))
            .map(|_| seq),
        None => None,
    };
    Ok(AuditVerification {
        intact: v.intact,
        events,
        reason: match (v.intact, broken_seq) {
            (true, _) => None,
            (false, Some(_)) => v.reason,
            (false, None) => Some("the chain is broken at an event outside your tenants".into()),
        },
        broken_seq,
    })
}

fn invalid(e: AuditQueryError) -> UiError {
    let text = e.to_string();
    match text.split_once(": ") {
        Some((field, message)) => UiError::invalid(field.replace(' ', "_"), message),
        None => UiError::invalid("query", text),
    }
}

/// A UTC time as the filter form gives it: RFC 3339, `YYYY-MM-DDTHH:MM[:SS]`
/// (what a `datetime-local` input sends) or `YYYY-MM-DD`; Unix ms.
fn parse_time(s: &str) -> Option<i64> {
    use time::format_description::well_known::Rfc3339;
    use time::macros::format_description;
    use time::{Date, OffsetDateTime, PrimitiveDateTime};
    let ms = |t: OffsetDateTime| i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok();
    if let Ok(t) = OffsetDateTime::parse(s, &Rfc3339) {
        return ms(t);
    }
    for f in [
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
        format_description!("[year]-[month]-[day]T[hour]:[minute]"),
        format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
        format_description!("[year]-[month]-[day] [hour]:[minute]"),
    ] {
        if let Ok(t) = PrimitiveDateTime::parse(s, f) {
            return ms(t.assume_utc());
        }
    }
    Date::parse(s, format_description!("[year]-[month]-[day]"))
        .ok()
        .and_then(|d| ms(d.midnight().assume_utc()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_times_parse_in_the_forms_the_page_sends_and_nothing_else() {
        assert_eq!(parse_time("1970-01-01T00:01"), Some(60_000));
        assert_eq!(parse_time("1970-01-01 00:00:02"), Some(2_000));
        assert_eq!(parse_time("1970-01-02"), Some(86_400_000));
        assert_eq!(parse_time("1970-01-01T01:00:00+01:00"), Some(0));
        for bad in ["yesterday", "2026-13-01", "1970-01-01T25:00", "", "'; --"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }
}
