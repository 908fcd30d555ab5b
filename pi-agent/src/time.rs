//! Wall-clock helpers: Unix milliseconds and RFC 3339 / ISO-8601 strings (the `time` crate).
//! pi writes UTC with milliseconds (`2024-12-03T14:00:00.123Z`); upstream files and other
//! writers may carry an offset (`2024-12-03T15:00:00+01:00`), which reads as the same instant.

use std::time::{SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch.
pub fn now_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix milliseconds (out-of-range instants clamp to the epoch).
pub fn iso8601(millis: i64) -> String {
    let at =
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// The `YYYY-MM-DD` date of Unix milliseconds (UTC).
pub fn date(millis: i64) -> String {
    iso8601(millis)[..10].to_owned()
}

/// A `YYYY-MM-DD` date as a calendar date, `None` when it is not one.
fn calendar_date(day: &str) -> Option<time::Date> {
    let mut parts = day.splitn(3, '-');
    let year: i32 = parts.next()?.parse().ok()?;
    let month: u8 = parts.next()?.parse().ok()?;
    let day: u8 = parts.next()?.get(..2)?.parse().ok()?;
    time::Date::from_calendar_date(year, time::Month::try_from(month).ok()?, day).ok()
}

/// True for a real `YYYY-MM-DD` date.
pub fn is_date(day: &str) -> bool {
    day.len() == 10 && calendar_date(day).is_some()
}

/// The ISO week of a `YYYY-MM-DD` date, `YYYY-Www` (the week's own year: 2026-12-31 is
/// `2026-W53`, 2027-01-01 `2026-W53` too).
pub fn iso_week(day: &str) -> Option<String> {
    let (year, week, _) = calendar_date(day)?.to_iso_week_date();
    Some(format!("{year:04}-W{week:02}"))
}

/// The date `days` days before today (UTC), `YYYY-MM-DD`.
pub fn days_ago(days: u32) -> String {
    date(now_millis() - i64::from(days) * 86_400_000)
}

/// Unix milliseconds of an RFC 3339 timestamp (`Z` or an offset, any fraction of a second);
/// `None` for anything else.
pub fn parse_iso8601(text: &str) -> Option<i64> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

/// The UTC day (`YYYY-MM-DD`) of an RFC 3339 timestamp, `None` when it is not one.
pub fn utc_day(text: &str) -> Option<String> {
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    // A UTC timestamp starts with its day: no arithmetic, no formatting.
    if at.offset().is_utc() {
        return text.get(..10).map(str::to_owned);
    }
    Some(date(i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_group_into_iso_weeks() {
        assert_eq!(iso_week("2026-12-04").as_deref(), Some("2026-W49"));
        assert_eq!(iso_week("2027-01-01").as_deref(), Some("2026-W53"));
        assert_eq!(iso_week("2024-12-30").as_deref(), Some("2025-W01"));
        assert!(iso_week("2026-02-30").is_none() && !is_date("2026-13-01") && is_date("2026-02-28"));
    }

    #[test]
    fn iso_dates_match_known_values() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_733_234_400_123), "2024-12-03T14:00:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(date(1_733_234_400_123), "2024-12-03");
        assert_eq!(utc_day("2026-12-01T10:00:00.000Z").as_deref(), Some("2026-12-01"));
        assert_eq!(utc_day("2026-12-01T23:30:00-02:00").as_deref(), Some("2026-12-02"));
        assert_eq!(utc_day("2026-12-01T00:30:00+00:00").as_deref(), Some("2026-12-01"));
        assert!(utc_day("2026-12-01").is_none() && utc_day("yesterday").is_none());
    }

    #[test]
    fn iso_strings_parse_back_and_offsets_are_the_same_instant() {
        for millis in [0, 951_782_400_000, 1_733_234_400_123, 4_102_444_799_999, -86_400_000] {
            assert_eq!(parse_iso8601(&iso8601(millis)), Some(millis));
        }
        assert_eq!(parse_iso8601("2024-12-03T14:00:00Z"), Some(1_733_234_400_000));
        assert_eq!(parse_iso8601("2024-12-03T14:00:00.5Z"), Some(1_733_234_400_500));
        assert_eq!(parse_iso8601("2024-12-03T15:00:00+01:00"), Some(1_733_234_400_000));
        assert_eq!(parse_iso8601("2024-12-03T09:30:00.250-04:30"), Some(1_733_234_400_250));
        for bad in
            ["", "2024-12-03", "2024-13-03T00:00:00Z", "2024-12-03T14:00:00", "x-y-zT1:2:3Z", "2024-12-03T14:00:00.Z"]
        {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
