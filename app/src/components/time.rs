//! Times as the dashboard shows them: UTC, to the second, the same on the
//! server and in the browser (no locale, so hydration sees the same text).

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now() as i64
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// `2026-11-23 13:40:12` (UTC) for Unix milliseconds.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// A duration in words: `42 s`, `5 min`, `3 h 10 min`, `2 d`.
pub fn span(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86_400 => {
            let m = (s % 3600) / 60;
            if m == 0 {
                format!("{} h", s / 3600)
            } else {
                format!("{} h {m} min", s / 3600)
            }
        }
        _ => format!("{} d", s / 86_400),
    }
}

/// How long ago `ms` was, from `now`: `5 min ago`.
pub fn ago(ms: i64, now: i64) -> String {
    format!("{} ago", span(now - ms))
}

/// Howard Hinnant's days-from-civil inverse.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_440_012_000), "2026-11-23 13:20:12");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00");
    }

    #[test]
    fn spans_read_naturally() {
        assert_eq!(span(42_000), "42 s");
        assert_eq!(span(5 * 60_000 + 10), "5 min");
        assert_eq!(span(3 * 3_600_000), "3 h");
        assert_eq!(span(3 * 3_600_000 + 600_000), "3 h 10 min");
        assert_eq!(span(-5), "0 s");
        assert_eq!(ago(0, 120_000), "2 min ago");
    }
}
