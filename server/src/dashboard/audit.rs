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
use crate::audit::{AuditCursor, AuditFilter, AuditFilterInput, AuditQueryError, PageSize};
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
    async fn audit(&self, _op: &Operator, query: AuditQuery) -> UiResult<AuditPageView> {
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
        let page = self
            .store
            .audit_query(&filter, cursor, size)
            .await
            .map_err(|e| internal("reading the audit log", e))?;
        Ok(AuditPageView {
            rows: page.events.into_iter().map(row).collect(),
            has_older: page.has_older,
            has_newer: page.has_newer,
        })
    }

    async fn verify_audit(&self, _op: &Operator) -> UiResult<AuditVerification> {
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
        Ok(result)
    }
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
