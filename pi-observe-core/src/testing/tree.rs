//! Normalized spans and tree assertions over an event sequence.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::event::{ErrorInfo, EventKind, ObsEvent, Timestamp};
use crate::ids::{SpanId, TraceId};
use crate::payload::Value;

/// A point event inside a [`RecordedSpan`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    /// Event name.
    pub name: String,
    /// When it happened.
    pub timestamp: Timestamp,
    /// Its attributes, keyed by contract payload keys.
    pub attributes: BTreeMap<String, Value>,
}

/// One finished (or unfinished) operation, backend-neutral: what adapters' conformance fixtures
/// convert their exported spans into.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedSpan {
    /// Operation name.
    pub name: String,
    /// Trace id.
    pub trace_id: TraceId,
    /// Span id.
    pub span_id: SpanId,
    /// Parent span id.
    pub parent_span_id: Option<SpanId>,
    /// Start time.
    pub start: Timestamp,
    /// End time; `None` if the operation never settled.
    pub end: Option<Timestamp>,
    /// `None` = ok; else the error.
    pub error: Option<ErrorInfo>,
    /// Attributes keyed by contract payload keys (start merged with end).
    pub attributes: BTreeMap<String, Value>,
    /// Attribution context.
    pub context: BTreeMap<String, String>,
    /// Point events, in order.
    pub events: Vec<RecordedEvent>,
}

fn attributes(event: &ObsEvent) -> BTreeMap<String, Value> {
    event.payload.iter().map(|f| (f.key.to_string(), f.value.clone())).collect()
}

/// The reference conversion of an event sequence into spans, in start order (an operation
/// whose start was skipped, [`ObsEvent::start_skipped`], where its end record comes):
/// attributes from the end record (which carries the merged payload), or the start record if
/// the span never ended.
pub fn spans_from_events(events: &[ObsEvent]) -> Vec<RecordedSpan> {
    let mut spans: Vec<RecordedSpan> = Vec::new();
    let mut index: HashMap<SpanId, usize> = HashMap::new();
    // Point events of operations whose start was skipped, until their end comes.
    let mut early: HashMap<SpanId, Vec<RecordedEvent>> = HashMap::new();
    for event in events {
        let Some(span_id) = event.span_id else { continue };
        let known = index.get(&span_id).copied();
        match event.kind {
            EventKind::Start => {
                index.insert(span_id, spans.len());
                spans.push(recorded_span(event, span_id, early.remove(&span_id).unwrap_or_default()));
            }
            EventKind::End | EventKind::Error => {
                let at = match known {
                    Some(at) => at,
                    None if event.start_skipped() => {
                        index.insert(span_id, spans.len());
                        spans.push(recorded_span(event, span_id, early.remove(&span_id).unwrap_or_default()));
                        spans.len() - 1
                    }
                    None => continue,
                };
                let span = &mut spans[at];
                span.end = Some(event.timestamp);
                span.error = event.error.clone();
                span.attributes = attributes(event);
            }
            EventKind::Event => {
                let recorded = RecordedEvent {
                    name: event.name.to_string(),
                    timestamp: event.timestamp,
                    attributes: attributes(event),
                };
                match known {
                    Some(at) => spans[at].events.push(recorded),
                    None if event.start_skipped() => early.entry(span_id).or_default().push(recorded),
                    None => {}
                }
            }
        }
    }
    spans
}

/// A span as its first record (a start, or an end whose start was skipped) shows it.
fn recorded_span(first: &ObsEvent, span_id: SpanId, events: Vec<RecordedEvent>) -> RecordedSpan {
    RecordedSpan {
        name: first.name.to_string(),
        trace_id: first.trace_id,
        span_id,
        parent_span_id: first.parent_span_id,
        start: first.start_time(),
        end: None,
        error: None,
        attributes: attributes(first),
        context: first.context.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect(),
        events,
    }
}

/// Asserts the contract's pairing and tree invariants and returns the spans:
///
/// - every `start` has exactly one `end` or `error` later in the sequence, with the same name,
///   trace id and parent; no `end`/`error` without a `start`, unless its start was skipped
///   ([`ObsEvent::start_skipped`]: then the end alone stands for the span); span ids unique;
/// - every parent started earlier in the sequence (and not later in time), in the same trace
///   (a detached spawned task may start after its parent ended: that is allowed);
/// - `end` timestamps are not before their `start`, and `durationMs` matches them;
/// - point events belong to a span that is open at that moment.
pub fn assert_paired(events: &[ObsEvent]) -> Vec<RecordedSpan> {
    check(events, false)
}

/// [`assert_paired`], but parents that are not in the sequence (an adopted remote traceparent)
/// are allowed.
pub fn assert_paired_allowing_remote(events: &[ObsEvent]) -> Vec<RecordedSpan> {
    check(events, true)
}

fn check(events: &[ObsEvent], allow_remote: bool) -> Vec<RecordedSpan> {
    let mut started: HashMap<SpanId, &ObsEvent> = HashMap::new();
    let mut settled: HashSet<SpanId> = HashSet::new();
    for (i, event) in events.iter().enumerate() {
        let at = format!("event #{i} ({event})");
        match event.kind {
            EventKind::Start => {
                let span = event.span_id.unwrap_or_else(|| panic!("{at}: start without span id"));
                assert!(started.insert(span, event).is_none(), "{at}: span id {span} started twice");
                if let Some(parent) = event.parent_span_id {
                    match started.get(&parent) {
                        Some(p) => {
                            assert_eq!(p.trace_id, event.trace_id, "{at}: child in another trace than its parent");
                            assert!(p.timestamp <= event.timestamp, "{at}: child starts before its parent");
                        }
                        None => assert!(allow_remote, "{at}: parent {parent} never started before it"),
                    }
                }
            }
            EventKind::End | EventKind::Error => {
                let span = event.span_id.unwrap_or_else(|| panic!("{at}: end without span id"));
                assert!(settled.insert(span), "{at}: span {span} ended twice");
                assert_eq!(event.kind == EventKind::Error, event.error.is_some(), "{at}: error field mismatch");
                if event.start_skipped() && !started.contains_key(&span) {
                    // Its end alone stands for it; its start time is derived from it.
                    assert!(event.duration.is_some(), "{at}: end without duration");
                    continue;
                }
                let start = started.get(&span).unwrap_or_else(|| panic!("{at}: ends a span that never started"));
                assert_eq!(start.name, event.name, "{at}: end name differs from start");
                assert_eq!(start.trace_id, event.trace_id, "{at}: end trace differs from start");
                assert_eq!(start.parent_span_id, event.parent_span_id, "{at}: end parent differs from start");
                assert!(event.timestamp >= start.timestamp, "{at}: ends before it starts");
                let duration = event.duration.unwrap_or_else(|| panic!("{at}: end without duration"));
                let measured = event.timestamp.unix_nanos() - start.timestamp.unix_nanos();
                assert_eq!(u128::from(measured), duration.as_nanos(), "{at}: duration differs from timestamps");
            }
            EventKind::Event => {
                if let Some(span) = event.span_id {
                    assert!(!settled.contains(&span), "{at}: point event after its span ended");
                    assert!(
                        started.contains_key(&span) || event.start_skipped() || allow_remote,
                        "{at}: point event for unknown span {span}"
                    );
                }
            }
        }
    }
    let open: Vec<_> = started.keys().filter(|s| !settled.contains(s)).collect();
    assert!(open.is_empty(), "spans started but never ended: {open:?}");
    spans_from_events(events)
}

/// The only span named `name`; panics if there are none or several.
pub fn span_named<'a>(spans: &'a [RecordedSpan], name: &str) -> &'a RecordedSpan {
    let mut found = spans.iter().filter(|s| s.name == name);
    let span = found.next().unwrap_or_else(|| panic!("no span named {name}"));
    assert!(found.next().is_none(), "more than one span named {name}");
    span
}
