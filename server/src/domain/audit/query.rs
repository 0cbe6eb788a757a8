//! What the dashboard may ask of the audit log: a filter, a cursor and a page
//! size, each parsed once from what the page sends; and the page it gets
//! back. The store runs the query (`Store::audit_query`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::Event;
use crate::domain::{SessionId, TenantId};

/// The most rows one page may hold.
pub const MAX_PAGE_SIZE: u32 = 200;
/// The longest actor a filter may name (stored actors are
/// `agent:k_…`, `operator:…`, `cli`, `system`).
pub const MAX_ACTOR_LEN: usize = 128;
/// The longest action prefix a filter may hold (actions are
/// `resource.verb`, `tool.tabs.open`).
pub const MAX_ACTION_PREFIX_LEN: usize = 64;

/// A filter as the page sends it, unchecked. Empty strings mean "any".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilterInput {
    /// Exactly this tenant id.
    pub tenant: Option<String>,
    /// Exactly this session id.
    pub session: Option<String>,
    /// Exactly this stored actor (`agent:k_…`, `operator:…`, `cli`, `system`).
    pub actor: Option<String>,
    /// Actions starting with this text, taken literally (`tool.` matches
    /// `tool.click`; `%` and `_` are plain characters).
    pub action_prefix: Option<String>,
    /// Events at or after this time (Unix ms).
    pub from_ms: Option<i64>,
    /// Events at or before this time (Unix ms).
    pub to_ms: Option<i64>,
}

/// A checked filter: every field optional, all given fields must match.
/// Build it with [`AuditFilter::parse`] (or [`AuditFilter::default`] for
/// no filter); the store trusts its contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    tenant: Option<TenantId>,
    session: Option<SessionId>,
    actor: Option<String>,
    action_prefix: Option<String>,
    from_ms: Option<i64>,
    to_ms: Option<i64>,
}

/// Why a filter, cursor or page size was refused. Each names the field, so
/// the page can point at it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditQueryError {
    /// The tenant is not a tenant id.
    #[error("tenant: {0}")]
    Tenant(#[from] crate::domain::TenantIdError),
    /// The session is not a session id.
    #[error("session: not a session id (s_…)")]
    Session,
    /// A text field is longer than its cap.
    #[error("{field}: at most {max} characters")]
    TooLong {
        /// Which field.
        field: &'static str,
        /// Its cap, in characters.
        max: usize,
    },
    /// A text field holds a control character (or, for the action prefix,
    /// anything but printable ASCII).
    #[error("{field}: only printable characters are allowed")]
    NotPrintable {
        /// Which field.
        field: &'static str,
    },
    /// `from_ms` is after `to_ms`, or a time is negative.
    #[error("time range: 'from' must be a time before 'to'")]
    TimeRange,
    /// The page size is outside 1..=[`MAX_PAGE_SIZE`].
    #[error("page size: between 1 and {MAX_PAGE_SIZE}")]
    PageSize,
    /// The cursor is not `newest`, `oldest`, `before:<seq>` or `after:<seq>`.
    #[error("cursor: newest, oldest, before:<seq> or after:<seq>")]
    Cursor,
}

/// `None` for an absent or empty field.
fn present(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl AuditFilter {
    /// Checks what the page sent: ids must parse, the actor is at most
    /// [`MAX_ACTOR_LEN`] printable characters, the action prefix at most
    /// [`MAX_ACTION_PREFIX_LEN`] printable ASCII characters, and the time
    /// range must not be reversed.
    pub fn parse(input: AuditFilterInput) -> Result<Self, AuditQueryError> {
        let tenant = present(input.tenant)
            .map(|t| t.parse::<TenantId>())
            .transpose()?;
        let session = present(input.session)
            .map(|s| s.parse::<SessionId>().map_err(|_| AuditQueryError::Session))
            .transpose()?;
        let actor = present(input.actor)
            .map(|a| {
                if a.chars().count() > MAX_ACTOR_LEN {
                    return Err(AuditQueryError::TooLong {
                        field: "actor",
                        max: MAX_ACTOR_LEN,
                    });
                }
                if a.chars().any(char::is_control) {
                    return Err(AuditQueryError::NotPrintable { field: "actor" });
                }
                Ok(a)
            })
            .transpose()?;
        let action_prefix = present(input.action_prefix)
            .map(|p| {
                if p.chars().count() > MAX_ACTION_PREFIX_LEN {
                    return Err(AuditQueryError::TooLong {
                        field: "action",
                        max: MAX_ACTION_PREFIX_LEN,
                    });
                }
                // ASCII only, so the prefix's upper bound is one byte up
                // and compares the same way on both backends.
                if !p.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                    return Err(AuditQueryError::NotPrintable { field: "action" });
                }
                Ok(p)
            })
            .transpose()?;
        if input.from_ms.is_some_and(|t| t < 0)
            || input.to_ms.is_some_and(|t| t < 0)
            || matches!((input.from_ms, input.to_ms), (Some(f), Some(t)) if f > t)
        {
            return Err(AuditQueryError::TimeRange);
        }
        Ok(Self {
            tenant,
            session,
            actor,
            action_prefix,
            from_ms: input.from_ms,
            to_ms: input.to_ms,
        })
    }

    /// Only this tenant's events.
    pub fn tenant(&self) -> Option<&TenantId> {
        self.tenant.as_ref()
    }

    /// The same filter, for `tenant`'s events only (a scoped operator's
    /// query is read once per tenant of their scope).
    pub fn with_tenant(&self, tenant: TenantId) -> Self {
        Self {
            tenant: Some(tenant),
            ..self.clone()
        }
    }

    /// Only this session's events.
    pub fn session(&self) -> Option<&SessionId> {
        self.session.as_ref()
    }

    /// Only this actor's events (stored form).
    pub fn actor(&self) -> Option<&str> {
        self.actor.as_deref()
    }

    /// Only actions starting with this (printable ASCII, literal).
    pub fn action_prefix(&self) -> Option<&str> {
        self.action_prefix.as_deref()
    }

    /// The first string after every string that starts with the action
    /// prefix: the prefix with its last byte raised by one (the prefix is
    /// printable ASCII, so the result is still ASCII).
    pub fn action_prefix_end(&self) -> Option<String> {
        let p = self.action_prefix.as_deref()?;
        let mut bytes = p.as_bytes().to_vec();
        let last = bytes.last_mut().expect("an action prefix is never empty");
        *last += 1;
        Some(String::from_utf8(bytes).expect("ASCII stays UTF-8"))
    }

    /// Events at or after this time (Unix ms).
    pub fn from_ms(&self) -> Option<i64> {
        self.from_ms
    }

    /// Events at or before this time (Unix ms).
    pub fn to_ms(&self) -> Option<i64> {
        self.to_ms
    }
}

/// Where a page starts. Pages always list events newest first; a cursor
/// names a seq from the page the operator is on, never an offset, so a page
/// costs the same at the start, the middle and the end of the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AuditCursor {
    /// The newest matching events.
    #[default]
    Newest,
    /// The matching events just older than this seq (the next page).
    Before(i64),
    /// The matching events just newer than this seq (the previous page).
    After(i64),
    /// The oldest matching events (the last page).
    Oldest,
}

impl FromStr for AuditCursor {
    type Err = AuditQueryError;

    /// `newest`, `oldest`, `before:<seq>`, `after:<seq>` (seq ≥ 0).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Digits only: `i64::from_str` would also take `+1` and `-1`.
        let seq = |n: &str| {
            n.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| n.parse::<i64>().ok())
                .flatten()
                .ok_or(AuditQueryError::Cursor)
        };
        match s {
            "newest" => Ok(Self::Newest),
            "oldest" => Ok(Self::Oldest),
            _ => match s.split_once(':') {
                Some(("before", n)) => Ok(Self::Before(seq(n)?)),
                Some(("after", n)) => Ok(Self::After(seq(n)?)),
                _ => Err(AuditQueryError::Cursor),
            },
        }
    }
}

impl fmt::Display for AuditCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Newest => f.write_str("newest"),
            Self::Oldest => f.write_str("oldest"),
            Self::Before(n) => write!(f, "before:{n}"),
            Self::After(n) => write!(f, "after:{n}"),
        }
    }
}

/// How many events a page holds: 1 to [`MAX_PAGE_SIZE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSize(u32);

impl PageSize {
    /// Checks a requested page size.
    pub fn parse(n: i64) -> Result<Self, AuditQueryError> {
        u32::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
            .map(Self)
            .ok_or(AuditQueryError::PageSize)
    }

    /// The size.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl Default for PageSize {
    /// 50 events.
    fn default() -> Self {
        Self(50)
    }
}

/// One page of matching events, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    /// The events, newest (highest seq) first.
    pub events: Vec<Event>,
    /// Whether matching events older than the last one exist.
    pub has_older: bool,
    /// Whether matching events newer than the first one exist.
    pub has_newer: bool,
}

impl AuditPage {
    /// The cursor of the next older page, if there is one.
    pub fn older(&self) -> Option<AuditCursor> {
        self.has_older
            .then(|| self.events.last().map(|e| AuditCursor::Before(e.seq)))
            .flatten()
    }

    /// The cursor of the next newer page, if there is one.
    pub fn newer(&self) -> Option<AuditCursor> {
        self.has_newer
            .then(|| self.events.first().map(|e| AuditCursor::After(e.seq)))
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> AuditFilterInput {
        AuditFilterInput::default()
    }

    #[test]
    fn an_empty_input_is_no_filter_at_all() {
        let f = AuditFilter::parse(AuditFilterInput {
            tenant: Some(String::new()),
            session: Some(String::new()),
            actor: Some(String::new()),
            action_prefix: Some(String::new()),
            ..input()
        })
        .unwrap();
        assert_eq!(f, AuditFilter::default());
    }

    #[test]
    fn every_field_parses_into_the_filter() {
        let session = SessionId::generate();
        let f = AuditFilter::parse(AuditFilterInput {
            tenant: Some("acme".into()),
            session: Some(session.to_string()),
            actor: Some("agent:k_abc".into()),
            action_prefix: Some("tool.".into()),
            from_ms: Some(1),
            to_ms: Some(2),
        })
        .unwrap();
        assert_eq!(f.tenant().unwrap().as_str(), "acme");
        assert_eq!(f.session(), Some(&session));
        assert_eq!(f.actor(), Some("agent:k_abc"));
        assert_eq!(f.action_prefix(), Some("tool."));
        assert_eq!(f.action_prefix_end().as_deref(), Some("tool/"));
        assert_eq!((f.from_ms(), f.to_ms()), (Some(1), Some(2)));
    }

    #[test]
    fn malformed_ids_are_refused_by_field() {
        let bad_tenant = AuditFilter::parse(AuditFilterInput {
            tenant: Some("Acme'; DROP TABLE audit_events; --".into()),
            ..input()
        });
        assert!(matches!(bad_tenant, Err(AuditQueryError::Tenant(_))));
        let bad_session = AuditFilter::parse(AuditFilterInput {
            session: Some("s_%".into()),
            ..input()
        });
        assert_eq!(bad_session, Err(AuditQueryError::Session));
    }

    #[test]
    fn wildcards_and_quotes_are_plain_characters() {
        let f = AuditFilter::parse(AuditFilterInput {
            actor: Some("operator:o'%_\"".into()),
            action_prefix: Some("tool.wait_%'".into()),
            ..input()
        })
        .unwrap();
        assert_eq!(f.actor(), Some("operator:o'%_\""));
        assert_eq!(f.action_prefix(), Some("tool.wait_%'"));
        assert_eq!(f.action_prefix_end().as_deref(), Some("tool.wait_%("));
        let tilde = AuditFilter::parse(AuditFilterInput {
            action_prefix: Some("a~".into()),
            ..input()
        })
        .unwrap();
        assert_eq!(tilde.action_prefix_end().as_deref(), Some("a\u{7f}"));
    }

    #[test]
    fn overlong_and_control_characters_are_refused() {
        let cases = [
            (
                AuditFilterInput {
                    actor: Some("a".repeat(MAX_ACTOR_LEN + 1)),
                    ..input()
                },
                AuditQueryError::TooLong {
                    field: "actor",
                    max: MAX_ACTOR_LEN,
                },
            ),
            (
                AuditFilterInput {
                    action_prefix: Some("t".repeat(MAX_ACTION_PREFIX_LEN + 1)),
                    ..input()
                },
                AuditQueryError::TooLong {
                    field: "action",
                    max: MAX_ACTION_PREFIX_LEN,
                },
            ),
            (
                AuditFilterInput {
                    actor: Some("cli\0".into()),
                    ..input()
                },
                AuditQueryError::NotPrintable { field: "actor" },
            ),
            (
                AuditFilterInput {
                    actor: Some("cli\n".into()),
                    ..input()
                },
                AuditQueryError::NotPrintable { field: "actor" },
            ),
            (
                AuditFilterInput {
                    action_prefix: Some("tool.\u{7f}".into()),
                    ..input()
                },
                AuditQueryError::NotPrintable { field: "action" },
            ),
            (
                AuditFilterInput {
                    action_prefix: Some("tööl".into()),
                    ..input()
                },
                AuditQueryError::NotPrintable { field: "action" },
            ),
        ];
        for (bad, want) in cases {
            assert_eq!(AuditFilter::parse(bad.clone()), Err(want), "{bad:?}");
        }
        // At the cap is fine, counted in characters.
        assert!(
            AuditFilter::parse(AuditFilterInput {
                actor: Some("é".repeat(MAX_ACTOR_LEN)),
                ..input()
            })
            .is_ok()
        );
    }

    #[test]
    fn a_reversed_or_negative_time_range_is_refused() {
        for (from_ms, to_ms) in [(Some(2), Some(1)), (Some(-1), None), (None, Some(-5))] {
            assert_eq!(
                AuditFilter::parse(AuditFilterInput {
                    from_ms,
                    to_ms,
                    ..input()
                }),
                Err(AuditQueryError::TimeRange)
            );
        }
        assert!(
            AuditFilter::parse(AuditFilterInput {
                from_ms: Some(5),
                to_ms: Some(5),
                ..input()
            })
            .is_ok()
        );
    }

    #[test]
    fn page_sizes_outside_one_to_two_hundred_are_refused() {
        for bad in [0, -1, 201, i64::MAX, i64::MIN] {
            assert_eq!(PageSize::parse(bad), Err(AuditQueryError::PageSize));
        }
        assert_eq!(PageSize::parse(1).unwrap().get(), 1);
        assert_eq!(PageSize::parse(200).unwrap().get(), 200);
        assert_eq!(PageSize::default().get(), 50);
    }

    #[test]
    fn cursors_round_trip_through_text() {
        for c in [
            AuditCursor::Newest,
            AuditCursor::Oldest,
            AuditCursor::Before(42),
            AuditCursor::After(0),
        ] {
            assert_eq!(c.to_string().parse::<AuditCursor>(), Ok(c));
        }
        for bad in [
            "",
            "before",
            "before:",
            "before:-1",
            "before:+1",
            "after:1x",
            "after: 1",
            "sideways:1",
            "before:99999999999999999999",
        ] {
            assert_eq!(
                bad.parse::<AuditCursor>(),
                Err(AuditQueryError::Cursor),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_page_names_the_cursors_next_to_it() {
        let event = |seq| Event {
            seq,
            ts: seq,
            tenant: None,
            session: None,
            actor: "cli".into(),
            action: "a.b".into(),
            params: "{}".into(),
            outcome: "ok".into(),
            prev_hash: String::new(),
            hash: String::new(),
        };
        let page = AuditPage {
            events: vec![event(9), event(7)],
            has_older: true,
            has_newer: true,
        };
        assert_eq!(page.older(), Some(AuditCursor::Before(7)));
        assert_eq!(page.newer(), Some(AuditCursor::After(9)));
        let last = AuditPage {
            has_older: false,
            has_newer: false,
            ..page
        };
        assert_eq!((last.older(), last.newer()), (None, None));
    }
}
