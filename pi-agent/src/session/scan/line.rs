//! One line of a session file as the report reads it, parsed on its own (no knowledge of the
//! lines before it): ids, type, model, attribution and usage. Valid JSON is read by a strict
//! walker that skips message content without building it ([`json`](super::json)); anything it
//! gives up on is parsed by serde, which decides.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::json;
use super::key;
use super::usage::usage;
use crate::message::Usage;
use crate::session::entry::ATTRIBUTION_CUSTOM_TYPE;
use crate::session::report::{Attribution, attribution_of};

/// One line, as far as the report reads it.
#[derive(Deserialize, Default)]
pub(super) struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, rename = "parentId", borrow)]
    parent_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(default, rename = "modelId", borrow)]
    model_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "customType", borrow)]
    custom_type: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<serde_json::Value>,
    /// The attribution an attribution entry's `data` gives, when the fast reading read it.
    #[serde(skip)]
    attribution: Option<Arc<Attribution>>,
    #[serde(default, borrow)]
    message: Option<MessageLine<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    /// The header's format version.
    #[serde(default)]
    version: Option<u32>,
}

#[derive(Deserialize, Default)]
pub(super) struct MessageLine<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default, borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    #[allow(dead_code)] // read past, never kept
    content: IgnoredAny,
}

/// One line as parsed on its own: its length, whether a newline ended it, and what it says.
pub(super) struct ParsedLine {
    pub(super) length: usize,
    pub(super) terminated: bool,
    pub(super) parsed: Result<Option<Parsed>, String>,
}

/// What a non-blank line contributes, knowing nothing of the lines before it.
#[derive(Debug, PartialEq)]
pub(super) struct Parsed {
    pub(super) session_header: bool,
    /// The header's format version (v1 entries have no ids: they chain in file order).
    pub(super) version: Option<u32>,
    /// The hashed id and parent id, if the line has an id.
    pub(super) ids: Option<(u64, Option<u64>)>,
    pub(super) change: Change,
    /// What the line bills, boxed: only some lines carry it, and every line's `Parsed` is moved
    /// through the block queues (200 bytes a line unboxed).
    pub(super) billed: Option<Box<Billed>>,
    /// The line carries usage in a shape this version cannot read.
    pub(super) unreadable_usage: bool,
}

/// A usage-carrying line's usage, its UTC day, and whether it is an assistant message.
#[derive(Debug, PartialEq)]
pub(super) struct Billed {
    pub(super) usage: Usage,
    pub(super) day: String,
    pub(super) assistant: bool,
}

/// How a line changes what is in force on its branch.
#[derive(Debug, PartialEq)]
pub(super) enum Change {
    Keep,
    Attribution(Arc<Attribution>),
    /// `provider/model`.
    Model(Arc<str>),
}

/// Attributions and models met lately on one parsing thread, shared instead of built again: a
/// file has few of each, repeated at every prompt and turn. A few of each are kept.
#[derive(Default)]
pub(super) struct Recent {
    /// An attribution entry's `data` text and what it gives.
    attributions: Vec<(Box<str>, Arc<Attribution>)>,
    /// Provider and model, and their `provider/model`.
    models: Vec<(Box<str>, Box<str>, Arc<str>)>,
}

/// How many attributions, and models, [`Recent`] keeps.
const RECENT: usize = 16;

/// The longest attribution `data` text, or `provider/model`, [`Recent`] keeps, in bytes.
const RECENT_TEXT: usize = 1024;

impl Recent {
    /// The attribution of an attribution entry's `data` (its JSON text); `None` if it is not
    /// JSON serde reads as a value.
    fn attribution(&mut self, data: &str) -> Option<Arc<Attribution>> {
        if let Some((_, seen)) = self.attributions.iter().find(|(text, _)| **text == *data) {
            return Some(seen.clone());
        }
        let attribution = Arc::new(attribution_of(&serde_json::from_str(data).ok()?));
        // A few ids are a few dozen bytes; an odd large `data` is not kept (memory stays small).
        if data.len() <= RECENT_TEXT {
            keep(&mut self.attributions, (data.into(), attribution.clone()));
        }
        Some(attribution)
    }

    fn model(&mut self, provider: Option<&str>, model: Option<&str>) -> Arc<str> {
        let (provider, model) = (provider.unwrap_or(""), model.unwrap_or(""));
        if let Some((.., seen)) = self.models.iter().find(|(p, m, _)| **p == *provider && **m == *model) {
            return seen.clone();
        }
        let joined: Arc<str> = format!("{provider}/{model}").into();
        if joined.len() <= RECENT_TEXT {
            keep(&mut self.models, (provider.into(), model.into(), joined.clone()));
        }
        joined
    }
}

/// Adds `item` to a list of at most [`RECENT`], dropping the oldest.
fn keep<T>(list: &mut Vec<T>, item: T) {
    if list.len() == RECENT {
        list.remove(0);
    }
    list.push(item);
}

/// Every line of `block`, parsed.
pub(super) fn parse_block(block: &[u8], recent: &mut Recent) -> Vec<ParsedLine> {
    // Room for lines of 256 bytes; longer ones leave room unused, shorter ones grow it.
    let (mut lines, mut start) = (Vec::with_capacity(block.len() / 256 + 1), 0);
    let ends = memchr::memchr_iter(b'\n', block).map(|newline| newline + 1).chain(std::iter::once(block.len()));
    for end in ends {
        if end > start {
            let bytes = &block[start..end];
            lines.push(ParsedLine {
                length: bytes.len(),
                terminated: bytes.ends_with(b"\n"),
                parsed: parse_line(bytes, recent),
            });
        }
        start = end;
    }
    lines
}

fn parse_line(bytes: &[u8], recent: &mut Recent) -> Result<Option<Parsed>, String> {
    parse_line_as(bytes, recent, true)
}

/// [`parse_line`], trying the fast reading first or not: the result is the same either way.
fn parse_line_as(bytes: &[u8], recent: &mut Recent, fast: bool) -> Result<Option<Parsed>, String> {
    let text = utf8(bytes).map_err(|e| format!("not UTF-8 ({e})"))?.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let fast = if fast { fast_line(text, recent) } else { None };
    let line: Line<'_> = match fast.map_or_else(|| serde_json::from_str(text), Ok) {
        Ok(line) => line,
        // An object of a shape this version does not know: kept in the tree, counts nothing.
        Err(e) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(object)) => {
                let id = |k: &str| object.get(k).and_then(|v| v.as_str()).map(key);
                let billed = |v: Option<&serde_json::Value>| v.is_some_and(|v| !v.is_null());
                let message = object.get("message");
                let unreadable_usage = billed(object.get("usage"))
                    || billed(message.and_then(|m| m.get("usage")))
                    || message.and_then(|m| m.get("role")).and_then(|r| r.as_str()) == Some("assistant");
                return Ok(Some(Parsed {
                    session_header: false,
                    version: None,
                    ids: id("id").map(|i| (i, id("parentId"))),
                    change: Change::Keep,
                    billed: None,
                    unreadable_usage,
                }));
            }
            _ => return Err(format!("not a session entry ({e})")),
        },
    };
    let (change, usage, assistant) = change_of(&line, recent);
    Ok(Some(Parsed {
        session_header: line.kind == "session",
        version: line.version,
        ids: line.id.as_deref().map(|id| (key(id), line.parent_id.as_deref().map(key))),
        change,
        // The UTC day, also for a timestamp written with an offset.
        billed: usage.map(|usage| {
            let stamp = line.timestamp.as_deref().unwrap_or_default();
            let written = || stamp.get(..10).unwrap_or("unknown").to_owned();
            // A stamp in UTC (`Z`, as pi writes them) starts with its day, and one that is no
            // timestamp counts on its first ten characters: either way, no need to parse it.
            let utc = stamp.ends_with(['Z', 'z']);
            let day = if utc { written() } else { crate::time::utc_day(stamp).unwrap_or_else(written) };
            Box::new(Billed { usage, day, assistant })
        }),
        unreadable_usage: false,
    }))
}

/// `text` read as serde reads a [`Line`], without building what the report skips (a message's
/// content above all); `None` leaves the line to serde — not an object, a value of a type the
/// report does not read, a field twice: whatever serde decides about.
fn fast_line<'a>(text: &'a str, recent: &mut Recent) -> Option<Line<'a>> {
    let (mut line, mut kind, mut data, mut seen) = (Line::default(), None, None, Seen::default());
    json::for_each_member(text, |key, value| match key {
        "type" => seen.first(0).and_then(|()| value.string(&mut kind)),
        "id" => seen.first(1).and_then(|()| value.string(&mut line.id)),
        "parentId" => seen.first(2).and_then(|()| value.string(&mut line.parent_id)),
        "timestamp" => seen.first(3).and_then(|()| value.string(&mut line.timestamp)),
        "provider" => seen.first(4).and_then(|()| value.string(&mut line.provider)),
        "modelId" => seen.first(5).and_then(|()| value.string(&mut line.model_id)),
        "customType" => seen.first(6).and_then(|()| value.string(&mut line.custom_type)),
        "data" => seen.first(7).and_then(|()| value.text(&mut data)),
        "usage" => seen.first(8).and_then(|()| usage(value, &mut line.usage)),
        "version" => seen.first(9).and_then(|()| value.read(&mut line.version)),
        "message" => seen.first(10).and_then(|()| value.null().or_else(|| fast_message(value, &mut line.message))),
        _ => value.skip(),
    })?;
    line.kind = kind?;
    // Read as serde would read it (a lone surrogate is no string in a value), attribution
    // from the recent ones.
    if let Some(data) = data {
        if line.custom_type.as_deref() == Some(ATTRIBUTION_CUSTOM_TYPE) {
            line.attribution = Some(recent.attribution(data)?);
        } else {
            line.data = Some(serde_json::from_str(data).ok()?);
        }
    }
    Some(line)
}

/// A line's `message` object read as serde reads a [`MessageLine`] (its content skipped); past it.
fn fast_message<'a>(value: json::Value<'a>, into: &mut Option<MessageLine<'a>>) -> Option<usize> {
    let (mut message, mut role, mut seen) = (MessageLine::default(), None, Seen::default());
    let end = value.members(|key, value| match key {
        "role" => seen.first(0).and_then(|()| value.string(&mut role)),
        "provider" => seen.first(1).and_then(|()| value.string(&mut message.provider)),
        "model" => seen.first(2).and_then(|()| value.string(&mut message.model)),
        "usage" => seen.first(3).and_then(|()| usage(value, &mut message.usage)),
        "content" => seen.first(4).and_then(|()| value.skip()),
        _ => value.skip(),
    })?;
    message.role = role?;
    *into = Some(message);
    Some(end)
}

/// `bytes` as text: checked with SIMD (std's check goes byte by byte through non-ASCII text),
/// std's error (which says where) when it is not UTF-8.
fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(bytes).or_else(|_| std::str::from_utf8(bytes))
}

/// A line's `id` and `parentId`, hashed, as serde reads them into a struct of those two
/// fields (whatever else the line holds); `None` for a line serde cannot read so.
pub(super) fn ids(line: &[u8]) -> Option<(Option<u64>, Option<u64>)> {
    ids_as(line, true)
}

/// [`ids`], trying the fast reading first or not: the result is the same either way.
fn ids_as(line: &[u8], fast: bool) -> Option<(Option<u64>, Option<u64>)> {
    #[derive(Deserialize)]
    struct Ids<'a> {
        #[serde(default, borrow)]
        id: Option<Cow<'a, str>>,
        #[serde(default, rename = "parentId", borrow)]
        parent_id: Option<Cow<'a, str>>,
    }
    let fast = utf8(line).ok().filter(|_| fast).and_then(|text| {
        let (mut ids, mut seen) = (Ids { id: None, parent_id: None }, Seen::default());
        json::for_each_member(text, |name, value| match name {
            "id" => seen.first(0).and_then(|()| value.string(&mut ids.id)),
            "parentId" => seen.first(1).and_then(|()| value.string(&mut ids.parent_id)),
            _ => value.skip(),
        })?;
        Some(ids)
    });
    let ids = fast.or_else(|| serde_json::from_slice::<Ids<'_>>(line).ok())?;
    Some((ids.id.as_deref().map(key), ids.parent_id.as_deref().map(key)))
}

/// The fields of a struct a line has named so far: serde rejects a field named twice, so the
/// fast reading gives up on one.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    /// `None` when field number `field` was named before.
    pub(super) fn first(&mut self, field: u32) -> Option<()> {
        let bit = 1 << field;
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }
}

/// How `line` changes the branch's state, its usage (if it carries any) and whether it is an
/// assistant message.
fn change_of(line: &Line<'_>, recent: &mut Recent) -> (Change, Option<Usage>, bool) {
    let mut model = |provider: &Option<Cow<'_, str>>, model: &Option<Cow<'_, str>>| {
        Change::Model(recent.model(provider.as_deref(), model.as_deref()))
    };
    match (line.kind.as_ref(), &line.message) {
        ("custom", _) if line.custom_type.as_deref() == Some(ATTRIBUTION_CUSTOM_TYPE) => {
            let attribution = line
                .attribution
                .clone()
                .unwrap_or_else(|| Arc::new(line.data.as_ref().map(attribution_of).unwrap_or_default()));
            (Change::Attribution(attribution), None, false)
        }
        ("model_change", _) => (model(&line.provider, &line.model_id), None, false),
        ("message", Some(message)) if message.role == "assistant" => {
            (model(&message.provider, &message.model), Some(message.usage.unwrap_or_default()), true)
        }
        ("message", Some(message)) if message.role == "toolResult" => (Change::Keep, message.usage, false),
        ("compaction" | "branch_summary", _) => (Change::Keep, line.usage, false),
        _ => (Change::Keep, None, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A JSON value's text, valid or nearly: odd spacing, escapes, numbers at the grammar's edges.
    fn value() -> impl Strategy<Value = String> {
        let pieces = ["a", "é", "\\n", "\\\"", "\\\\", "\\u00e9", "\\ud800", "\\/", "\t", " ", "\\x", "{", "\\"];
        let string = prop::collection::vec(prop::sample::select(pieces.to_vec()), 0..4)
            .prop_map(|p| format!("\"{}\"", p.concat()));
        let numbers = ["0", "-1", "12", "1.5", "-0.0e+3", "1E2", "01", "1.", ".5", "18446744073709551616", "1e999"];
        let leaf = prop_oneof![
            string,
            prop::sample::select(numbers.to_vec()).prop_map(str::to_owned),
            prop::sample::select(["true", "false", "null", "nul"].to_vec()).prop_map(str::to_owned),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(|items| format!("[{}]", items.join(","))),
                prop::collection::vec((key(), inner), 0..4).prop_map(|members| object(&members)),
            ]
        })
    }

    /// A key the report reads (some spelled with an escape), or one it does not.
    fn key() -> impl Strategy<Value = String> {
        let keys = [
            "type",
            "id",
            "parentId",
            "timestamp",
            "provider",
            "modelId",
            "customType",
            "data",
            "message",
            "usage",
            "version",
            "role",
            "model",
            "content",
            "input",
            "cost",
            "total",
            "userId",
            "typ\\u0065",
            "other",
        ];
        prop::sample::select(keys.to_vec()).prop_map(str::to_owned)
    }

    /// A `usage` value: its members (and its cost's) in any number and order, each a number at
    /// the edges of what the reader takes (fractions, signs, exponents, past `u64`) or a value
    /// of another type; sometimes not an object at all.
    fn usage_text() -> impl Strategy<Value = String> {
        let values = [
            "0",
            "1",
            "7",
            "18446744073709551615",
            "18446744073709551616",
            "1.0",
            "0.5",
            "0.0003",
            "123456789.125",
            "1e2",
            "-0",
            "-1",
            "null",
            "true",
            "false",
            "\"x\"",
            "[]",
        ];
        let value = || prop::sample::select(values.to_vec()).prop_map(str::to_owned);
        let named =
            |keys: Vec<&'static str>| (prop::sample::select(keys), value()).prop_map(|(k, v)| (k.to_owned(), v));
        let cost_keys = vec!["input", "output", "cacheRead", "cacheWrite", "total", "unknown", "tot\\u0061l", "x"];
        let cost = prop::collection::vec(named(cost_keys), 0..5).prop_map(|members| object(&members));
        let usage_keys = vec!["input", "output", "cacheRead", "cacheWrite", "totalTokens", "inp\\u0075t", "other"];
        let member = prop_oneof![
            4 => named(usage_keys),
            1 => prop_oneof![cost, value()].prop_map(|c| ("cost".to_owned(), c)),
        ];
        prop_oneof![
            8 => prop::collection::vec(member, 0..7).prop_map(|members| object(&members)),
            1 => prop::sample::select(["null", "[1,2]", "\"usage\""].to_vec()).prop_map(str::to_owned),
        ]
    }

    fn object(members: &[(String, String)]) -> String {
        let members: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\" : {v}")).collect();
        format!("{{ {} }}", members.join(","))
    }

    /// A line as pi writes one, with members of its own and of other shapes mixed in.
    fn line() -> impl Strategy<Value = String> {
        let kind = prop::sample::select(
            ["\"message\"", "\"custom\"", "\"model_change\"", "\"session\"", "\"compaction\"", "3"].to_vec(),
        );
        let typed = prop_oneof![
            Just(("customType".to_owned(), format!("\"{ATTRIBUTION_CUSTOM_TYPE}\""))),
            Just(("data".to_owned(), "{\"userId\":\"alice\",\"n\":1}".to_owned())),
            usage_text().prop_map(|usage| ("usage".to_owned(), usage)),
            Just(("timestamp".to_owned(), "\"2026-12-01T10:00:00+02:00\"".to_owned())),
            (prop::sample::select(["\"assistant\"", "\"toolResult\"", "\"user\""].to_vec()), usage_text()).prop_map(
                |(role, usage)| {
                    (
                        "message".to_owned(),
                        format!("{{\"role\":{role},\"content\":[{{\"text\":\"x\"}}],\"usage\":{usage}}}"),
                    )
                }
            ),
        ];
        let member = prop_oneof![3 => typed, 1 => (key(), value())];
        // Mostly a line with a type first, as every line pi writes has.
        let kind = kind.prop_map(|k| ("type".to_owned(), k.to_owned()));
        (prop::option::weighted(0.9, kind), prop::collection::vec(member, 0..6))
            .prop_map(|(kind, members)| object(&kind.into_iter().chain(members).collect::<Vec<_>>()))
    }

    proptest! {
        /// The fast reading changes nothing: every line — valid, of an unknown shape, or broken
        /// by a cut or a stray character — reads as serde alone reads it, errors included.
        #[test]
        fn the_fast_reading_reads_as_serde_does(
            text in line(),
            cut in any::<prop::sample::Index>(),
            stray in prop::sample::select(["", "\"", ",", "}", "\\", " "].to_vec()),
        ) {
            let at = cut.index(text.len() + 1);
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
            for text in [text.clone(), format!("{}{stray}{}", &text[..at], &text[at..])] {
                let fast = parse_line_as(text.as_bytes(), &mut Recent::default(), true);
                let serde = parse_line_as(text.as_bytes(), &mut Recent::default(), false);
                prop_assert_eq!(fast, serde, "{}", text);
                prop_assert_eq!(ids_as(text.as_bytes(), true), ids_as(text.as_bytes(), false), "{}", text);
            }
        }

        /// A usage the reader takes is the usage serde reads, to the bit; what it gives up on
        /// is left to serde.
        #[test]
        fn the_usage_reader_reads_as_serde_does(text in usage_text()) {
            let mut ours = None;
            let fast = json::for_each_member(&format!("{{\"u\":{text}}}"), |_, value| super::usage(value, &mut ours));
            let serde = serde_json::from_str::<Option<Usage>>(&text);
            if fast.is_some() {
                let serde = serde.map_err(|e| e.to_string());
                prop_assert_eq!(Ok(ours), serde.clone(), "{}", text);
                // `PartialEq` takes -0.0 for 0.0: the amounts' bits too.
                let bits = |u: Option<Usage>| u.map(|u| [u.cost.input, u.cost.output, u.cost.total].map(f64::to_bits));
                prop_assert_eq!(bits(ours), bits(serde.ok().flatten()), "{}", text);
            }
        }
    }

    #[test]
    fn usage_counts_on_the_utc_day_of_its_timestamp() {
        let day = |stamp: &str| {
            let line = format!(
                "{{\"type\":\"message\",\"id\":\"a\",\"timestamp\":\"{stamp}\",\"message\":{{\"role\":\"assistant\",\"usage\":{{\"input\":1}}}}}}"
            );
            parse_line(line.as_bytes(), &mut Recent::default()).unwrap().unwrap().billed.unwrap().day
        };
        assert_eq!(day("2026-12-01T23:30:00.000Z"), "2026-12-01");
        assert_eq!(day("2026-12-01T23:30:00-02:00"), "2026-12-02");
        assert_eq!(day("2026-12-01T23:30:00+00:00"), "2026-12-01");
        // Not a timestamp: its first ten characters, as before.
        assert_eq!(day("2026-13-45T99:00:00Z"), "2026-13-45");
        assert_eq!(day("soon"), "unknown");
    }

    #[test]
    fn a_line_that_is_not_utf8_says_where() {
        let line = b"{\"type\":\"message\",\"x\":\"caf\xe9\"}\n";
        let error = parse_line(line, &mut Recent::default()).err().unwrap();
        assert_eq!(error, "not UTF-8 (invalid utf-8 sequence of 1 bytes from index 26)");
        // The first pass reads ids as serde does, past the bytes of a member it skips.
        assert_eq!(ids(line), Some((None, None)));
        let text = "{\"type\":\"message\",\"x\":\"café — 漢字 🙂\"}";
        assert!(parse_line(text.as_bytes(), &mut Recent::default()).unwrap().is_some());
    }

    #[test]
    fn the_fast_reading_reads_what_pi_writes() {
        let line = format!(
            "{{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"timestamp\":\"2026-12-01T10:00:00.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}],\"provider\":\"p\",\"model\":\"m\",\"usage\":{{\"input\":1,\"output\":2}}}}}}",
            "x".repeat(5000)
        );
        assert!(fast_line(&line, &mut Recent::default()).is_some());
        let attribution = format!(
            "{{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null,\"customType\":\"{ATTRIBUTION_CUSTOM_TYPE}\",\"data\":{{\"userId\":\"u\"}}}}"
        );
        let mut recent = Recent::default();
        let first = fast_line(&attribution, &mut recent).and_then(|l| l.attribution).unwrap();
        let again = fast_line(&attribution, &mut recent).and_then(|l| l.attribution).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the same data is one attribution");
        assert_eq!(first.get("userId").map(String::as_str), Some("u"));
    }
}
