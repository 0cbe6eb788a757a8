//! Time as Cordon stores and shows it: Unix milliseconds in the database,
//! RFC 3339 UTC at the edges.

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

/// Unix milliseconds as RFC 3339 UTC (`2026-11-21T22:40:00.123Z`).
pub fn rfc3339_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_are_shown_as_rfc3339_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_ms(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn now_is_after_this_code_was_written() {
        assert!(now_ms() > 1_795_000_000_000);
    }
}
