//! A session line's `usage` read by the walker as serde reads it, without serde (the report
//! reads one per billed line): counts as digits, amounts correctly rounded; anything unusual is
//! left to serde (`None`), so the result is serde's either way.

use super::json;
use super::line::Seen;
use crate::message::{Cost, CostWire, Usage, UsageWire};

/// A `usage` value read as serde reads an `Option<Usage>` (missing numbers zero, a missing
/// total the sum), without serde; past it. Gives up on anything serde might read otherwise: a
/// number with a sign or an exponent, a fraction where a count goes, a count past `u64`, a
/// value of another type, a field named twice.
pub(super) fn usage(value: json::Value<'_>, into: &mut Option<Usage>) -> Option<usize> {
    nullable(value, into, usage_object)
}

/// A `usage` object (see [`usage`]); past it.
fn usage_object(value: json::Value<'_>, into: &mut Usage) -> Option<usize> {
    let (mut wire, mut cost, mut seen) = (UsageWire::default(), None, Seen::default());
    let end = value.members(|key, value| match key {
        "input" => seen.first(0).and_then(|()| count(value, &mut wire.input)),
        "output" => seen.first(1).and_then(|()| count(value, &mut wire.output)),
        "cacheRead" => seen.first(2).and_then(|()| count(value, &mut wire.cache_read)),
        "cacheWrite" => seen.first(3).and_then(|()| count(value, &mut wire.cache_write)),
        "totalTokens" => seen.first(4).and_then(|()| nullable(value, &mut wire.total_tokens, count)),
        "cost" => seen.first(5).and_then(|()| nullable(value, &mut cost, cost_of)),
        _ => value.skip(),
    })?;
    wire.cost = cost.map(Cost::from);
    *into = Usage::from(wire);
    Some(end)
}

/// A `cost` object as serde reads it (see [`usage`]); past it.
fn cost_of(value: json::Value<'_>, into: &mut CostWire) -> Option<usize> {
    let mut seen = Seen::default();
    value.members(|key, value| match key {
        "input" => seen.first(0).and_then(|()| amount(value, &mut into.input)),
        "output" => seen.first(1).and_then(|()| amount(value, &mut into.output)),
        "cacheRead" => seen.first(2).and_then(|()| amount(value, &mut into.cache_read)),
        "cacheWrite" => seen.first(3).and_then(|()| amount(value, &mut into.cache_write)),
        "total" => seen.first(4).and_then(|()| nullable(value, &mut into.total, amount)),
        "unknown" => seen.first(5).and_then(|()| flag(value, &mut into.unknown)),
        _ => value.skip(),
    })
}

/// `null` as `None`, anything else read by `read` into `Some`; past the value.
fn nullable<'a, T: Default>(
    value: json::Value<'a>,
    into: &mut Option<T>,
    read: impl FnOnce(json::Value<'a>, &mut T) -> Option<usize>,
) -> Option<usize> {
    if let Some(end) = value.null() {
        *into = None;
        return Some(end);
    }
    read(value, into.insert(T::default()))
}

/// The JSON text of a number made of digits and at most one `.` (no sign, no exponent).
fn plain_number<'a>(value: json::Value<'a>) -> Option<(&'a str, usize)> {
    let mut text = None;
    let end = value.text(&mut text)?;
    let text = text.filter(|t| t.bytes().all(|b| b.is_ascii_digit() || b == b'.'))?;
    Some((text, end))
}

/// A token count: digits only, within `u64`.
fn count(value: json::Value<'_>, into: &mut u64) -> Option<usize> {
    let (text, end) = plain_number(value)?;
    *into = text.parse().ok()?;
    Some(end)
}

/// An amount: serde reads decimal text correctly rounded (`float_roundtrip`), as `parse` does
/// — and as [`short_decimal`] does for the short amounts pi writes.
fn amount(value: json::Value<'_>, into: &mut f64) -> Option<usize> {
    let (text, end) = plain_number(value)?;
    *into = match short_decimal(text) {
        Some(amount) => amount,
        None => text.parse().ok()?,
    };
    Some(end)
}

/// `digits[.digits]` with at most 15 digits in all, correctly rounded: the digits as an integer
/// and the power of ten are both exact doubles, so one division rounds the exact quotient once
/// (Clinger's fast path).
fn short_decimal(text: &str) -> Option<f64> {
    const POW10: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.len() + fraction.len() > 15 {
        return None;
    }
    let digits = whole.bytes().chain(fraction.bytes());
    let mantissa = digits.fold(0u64, |m, b| m * 10 + u64::from(b.wrapping_sub(b'0')));
    Some(mantissa as f64 / POW10.get(fraction.len())?)
}

/// `true` or `false`.
fn flag(value: json::Value<'_>, into: &mut bool) -> Option<usize> {
    let mut text = None;
    let end = value.text(&mut text)?;
    *into = match text? {
        "true" => true,
        "false" => false,
        _ => return None,
    };
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Short decimals read as `parse` reads them, to the bit.
        #[test]
        fn short_decimals_read_as_parse_reads_them(whole in 0u64..1_000_000_000, fraction in 0u64..1_000_000, zeros in 0usize..8) {
            let text = format!("{whole}.{}{fraction}", "0".repeat(zeros));
            if let Some(ours) = short_decimal(&text) {
                prop_assert_eq!(ours.to_bits(), text.parse::<f64>().unwrap().to_bits(), "{}", text);
            }
            prop_assert_eq!(short_decimal(&whole.to_string()), Some(whole as f64));
        }
    }

    #[test]
    fn the_usage_reader_takes_what_pi_writes() {
        let text = "{\"input\":100,\"output\":20,\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":120,\"cost\":{\"input\":0.0003,\"output\":0.0006,\"cacheRead\":0,\"cacheWrite\":0,\"total\":0.0009}}";
        let mut ours = None;
        assert!(
            json::for_each_member(&format!("{{\"u\":{text}}}"), |_, value| super::usage(value, &mut ours)).is_some()
        );
        assert_eq!(ours, serde_json::from_str::<Option<Usage>>(text).unwrap());
        assert_eq!(ours.unwrap().cost.total, 0.0009);
    }
}
