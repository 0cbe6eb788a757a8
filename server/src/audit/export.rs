//! `cordon audit export`: the log as JSON Lines for a SIEM or `jq`, one
//! stored event per line with its chain hashes, so a range can be checked
//! offline (`cordon audit verify --file`) without the database.
//!
//! A line holds the stored fields as they are hashed (`seq`, `ts` in Unix
//! ms, `tenant`, `session`, `actor`, `action`, `params` as its canonical
//! JSON text, `outcome`, `prev_hash`, `hash`) plus `time` (RFC 3339, not
//! hashed, for people). `params` stays text so the hash recomputes
//! byte for byte; `jq '.params | fromjson'` reads it.

use std::io::{BufRead, Write};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::Event;
use crate::store::Store;

/// Rows read per round trip.
const PAGE: i64 = 1000;
/// The longest line `verify_file` reads (an event's params are bounded
/// when written; a longer line is not an event).
const MAX_LINE: usize = 1 << 20;

/// A bound of an export: a seq, or a time (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Events from (or up to) this seq.
    Seq(i64),
    /// Events from (or up to) this time, Unix ms.
    Time(i64),
}

impl Bound {
    /// A seq (digits) or an RFC 3339 time (`2026-11-26T10:00:00Z`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return text
                .parse()
                .map(Self::Seq)
                .map_err(|_| format!("{text:?} is not a seq"));
        }
        let t = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .map_err(|_| {
            format!("{text:?} is neither a seq nor an RFC 3339 time (2026-11-26T10:00:00Z)")
        })?;
        i64::try_from(t.unix_timestamp_nanos() / 1_000_000)
            .map(Self::Time)
            .map_err(|_| format!("{text:?} is out of range"))
    }

    fn after(self, e: &Event) -> bool {
        match self {
            Self::Seq(s) => e.seq >= s,
            Self::Time(t) => e.ts >= t,
        }
    }

    fn before(self, e: &Event) -> bool {
        match self {
            Self::Seq(s) => e.seq <= s,
            Self::Time(t) => e.ts <= t,
        }
    }
}

/// Which events an export holds.
#[derive(Debug, Clone, Default)]
pub struct ExportFilter {
    /// From this bound on (inclusive).
    pub since: Option<Bound>,
    /// Up to this bound (inclusive).
    pub until: Option<Bound>,
    /// Only this tenant's events.
    pub tenant: Option<String>,
}

impl ExportFilter {
    /// Whether `e` belongs in the export.
    pub fn wants(&self, e: &Event) -> bool {
        self.since.is_none_or(|b| b.after(e))
            && self.until.is_none_or(|b| b.before(e))
            && self
                .tenant
                .as_deref()
                .is_none_or(|t| e.tenant.as_deref() == Some(t))
    }

    /// Whether `e`, and every event after it, is past the end.
    pub fn past_end(&self, e: &Event) -> bool {
        matches!(self.until, Some(Bound::Seq(s)) if e.seq > s)
    }

    /// The seq the first page starts after.
    pub fn start_after(&self) -> i64 {
        match self.since {
            Some(Bound::Seq(s)) => s.saturating_sub(1).max(0),
            _ => 0,
        }
    }
}

/// `e` as one exported line, newline included.
fn line(e: Event) -> Vec<u8> {
    let mut out = serde_json::to_vec(&Line::from(e)).unwrap_or_default();
    out.push(b'\n');
    out
}

/// One exported line.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    seq: i64,
    ts: i64,
    #[serde(default, skip_deserializing)]
    time: String,
    tenant: Option<String>,
    session: Option<String>,
    actor: String,
    action: String,
    params: String,
    outcome: String,
    prev_hash: String,
    hash: String,
}

impl From<Event> for Line {
    fn from(e: Event) -> Self {
        Self {
            time: crate::time::rfc3339_ms(e.ts),
            seq: e.seq,
            ts: e.ts,
            tenant: e.tenant,
            session: e.session,
            actor: e.actor,
            action: e.action,
            params: e.params,
            outcome: e.outcome,
            prev_hash: e.prev_hash,
            hash: e.hash,
        }
    }
}

impl From<Line> for Event {
    fn from(l: Line) -> Self {
        Self {
            seq: l.seq,
            ts: l.ts,
            tenant: l.tenant,
            session: l.session,
            actor: l.actor,
            action: l.action,
            params: l.params,
            outcome: l.outcome,
            prev_hash: l.prev_hash,
            hash: l.hash,
        }
    }
}

/// The export's lines, page by page, in seq order: what both the CLI
/// (`export`) and the dashboard's stream read.
pub struct Pages<'a> {
    store: &'a Store,
    filter: ExportFilter,
    after: i64,
    done: bool,
}

impl<'a> Pages<'a> {
    /// The pages of `filter`'s events.
    pub fn new(store: &'a Store, filter: ExportFilter) -> Self {
        Self {
            after: filter.start_after(),
            store,
            filter,
            done: false,
        }
    }

    /// The next chunk of lines (never empty) and how many events it holds;
    /// `None` at the end.
    pub async fn next(&mut self) -> anyhow::Result<Option<(Vec<u8>, u64)>> {
        while !self.done {
            let page = self.store.audit_page(self.after, PAGE).await?;
            self.done = (page.len() as i64) < PAGE;
            let mut chunk = Vec::new();
            let mut n = 0;
            for e in page {
                self.after = e.seq;
                if self.filter.past_end(&e) {
                    self.done = true;
                    break;
                }
                if self.filter.wants(&e) {
                    chunk.extend(line(e));
                    n += 1;
                }
            }
            if n > 0 {
                return Ok(Some((chunk, n)));
            }
        }
        Ok(None)
    }
}

/// Writes the events `filter` selects to `out`, one JSON line each, in seq
/// order; answers how many.
pub async fn export(
    store: &Store,
    filter: &ExportFilter,
    out: &mut impl Write,
) -> anyhow::Result<u64> {
    let mut pages = Pages::new(store, filter.clone());
    let mut written = 0;
    while let Some((chunk, n)) = pages.next().await? {
        out.write_all(&chunk).context("writing the export")?;
        written += n;
    }
    out.flush().context("writing the export")?;
    Ok(written)
}

/// What checking an exported file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileVerification {
    /// Every event's hash recomputes, and each event that follows its seq's
    /// predecessor in the file links to it.
    Intact {
        /// Events checked.
        events: u64,
        /// First and last seq.
        range: Option<(i64, i64)>,
        /// Places where seqs skip (a filtered or partial export): the
        /// events between are not in the file, so the link there is not
        /// checked.
        gaps: u64,
    },
    /// The file's chain breaks at `seq`.
    Broken {
        /// The first seq that does not verify.
        seq: i64,
        /// What is wrong there.
        reason: String,
    },
}

/// Checks an exported file (JSON Lines, seq order) without the database.
/// A line that is not an exported event is an error naming its number.
pub fn verify_file(input: impl BufRead) -> Result<FileVerification, String> {
    let mut events = 0u64;
    let mut gaps = 0u64;
    let mut first = None;
    let mut last: Option<(i64, String)> = None;
    for (n, line) in input.split(b'\n').enumerate() {
        let line = line.map_err(|e| format!("line {}: cannot read: {e}", n + 1))?;
        if line.len() > MAX_LINE {
            return Err(format!("line {}: longer than {MAX_LINE} bytes", n + 1));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let parsed: Line = serde_json::from_slice(&line)
            .map_err(|e| format!("line {}: not an exported audit event: {e}", n + 1))?;
        let event = Event::from(parsed);
        if let Some((seq, hash)) = &last {
            if event.seq <= *seq {
                return Ok(FileVerification::Broken {
                    seq: event.seq,
                    reason: format!("seq {} follows seq {seq}: out of order", event.seq),
                });
            }
            if event.seq == seq + 1 {
                if &event.prev_hash != hash {
                    return Ok(FileVerification::Broken {
                        seq: event.seq,
                        reason: "prev_hash does not match the previous event's hash".into(),
                    });
                }
            } else {
                gaps += 1;
            }
        } else if event.seq == 1 && event.prev_hash != super::GENESIS_HASH {
            return Ok(FileVerification::Broken {
                seq: 1,
                reason: "the first event does not start from the genesis hash".into(),
            });
        }
        if event.compute_hash() != event.hash {
            return Ok(FileVerification::Broken {
                seq: event.seq,
                reason: "contents do not match the event's hash".into(),
            });
        }
        first.get_or_insert(event.seq);
        events += 1;
        last = Some((event.seq, event.hash));
    }
    Ok(FileVerification::Intact {
        events,
        range: first.zip(last.map(|(s, _)| s)),
        gaps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Actor, NewEvent};

    async fn store_with(n: usize) -> Store {
        let store = Store::connect(&secrecy::SecretString::from("sqlite::memory:".to_owned()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        for i in 0..n {
            let tenant: crate::domain::TenantId =
                if i % 2 == 0 { "acme" } else { "globex" }.parse().unwrap();
            store
                .audit_append(
                    NewEvent::new(Actor::Cli, "test.event")
                        .tenant(&tenant)
                        .params(serde_json::json!({ "i": i, "x": 1.5, "s": "ä\"<" })),
                )
                .await
                .unwrap();
        }
        store
    }

    async fn exported(store: &Store, filter: ExportFilter) -> Vec<u8> {
        let mut out = Vec::new();
        export(store, &filter, &mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn an_export_verifies_offline_whole_or_filtered_and_names_a_forged_line() {
        let store = store_with(2500).await;
        let all = exported(&store, ExportFilter::default()).await;
        assert_eq!(
            verify_file(&all[..]),
            Ok(FileVerification::Intact {
                events: 2500,
                range: Some((1, 2500)),
                gaps: 0
            })
        );
        let text = String::from_utf8(all.clone()).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert!(first["time"].as_str().unwrap().ends_with('Z'), "{first}");
        assert_eq!(first["tenant"], "acme");
        // One tenant's: every other row, each still verifies on its own.
        let acme = exported(
            &store,
            ExportFilter {
                tenant: Some("acme".into()),
                ..Default::default()
            },
        )
        .await;
        match verify_file(&acme[..]) {
            Ok(FileVerification::Intact { events, gaps, .. }) => {
                assert_eq!((events, gaps), (1250, 1249));
            }
            other => panic!("{other:?}"),
        }
        // A range by seq.
        let some = exported(
            &store,
            ExportFilter {
                since: Some(Bound::Seq(1001)),
                until: Some(Bound::Seq(1010)),
                tenant: None,
            },
        )
        .await;
        assert_eq!(
            verify_file(&some[..]),
            Ok(FileVerification::Intact {
                events: 10,
                range: Some((1001, 1010)),
                gaps: 0
            })
        );
        // A changed outcome, a dropped line, a malformed line.
        let forged = text.replacen("\"outcome\":\"ok\"", "\"outcome\":\"denied\"", 1);
        assert!(matches!(
            verify_file(forged.as_bytes()),
            Ok(FileVerification::Broken { seq: 1, .. })
        ));
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(5);
        let dropped = lines.join("\n");
        // A missing line reads as a gap, not a break: the file says which.
        assert!(matches!(
            verify_file(dropped.as_bytes()),
            Ok(FileVerification::Intact { gaps: 1, .. })
        ));
        let swapped = text.replacen(
            &format!("\"prev_hash\":\"{}\"", crate::audit::GENESIS_HASH),
            &format!("\"prev_hash\":\"{}\"", "1".repeat(64)),
            1,
        );
        assert!(matches!(
            verify_file(swapped.as_bytes()),
            Ok(FileVerification::Broken { seq: 1, .. })
        ));
        let err = verify_file(&b"{\"seq\":1}\n"[..]).unwrap_err();
        assert!(
            err.starts_with("line 1: not an exported audit event"),
            "{err}"
        );
        assert!(verify_file(&b"not json\n"[..]).is_err());
    }

    #[test]
    fn bounds_are_seqs_or_rfc3339_times() {
        assert_eq!(Bound::parse("42"), Ok(Bound::Seq(42)));
        assert_eq!(
            Bound::parse("2023-11-14T22:13:20.123Z"),
            Ok(Bound::Time(1_700_000_000_123))
        );
        for bad in [
            "",
            "yesterday",
            "-1",
            "99999999999999999999",
            "2026-13-01T00:00:00Z",
        ] {
            assert!(Bound::parse(bad).is_err(), "{bad}");
        }
    }
}
