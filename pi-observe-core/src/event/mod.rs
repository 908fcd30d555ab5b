//! The event record ([`ObsEvent`]) and its JSON form.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::attribution::Attribution;
use crate::clock::Tick;
use crate::ids::{SpanId, TraceId};
use crate::payload::{Class, Field, Payload};

mod json;

pub use json::{ValueJson, value_from_json, value_to_json};

/// What an [`ObsEvent`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// An operation began.
    Start,
    /// An operation finished normally.
    End,
    /// An operation failed, panicked or was cancelled.
    Error,
    /// A point-in-time event inside an operation (or outside any).
    Event,
}

impl EventKind {
    /// `start`, `end`, `error` or `event`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::End => "end",
            EventKind::Error => "error",
            EventKind::Event => "event",
        }
    }
}

/// Wall-clock time in nanoseconds since the Unix epoch.
///
/// [`Timestamp::now`] reads a process-wide anchor (wall clock once, then a monotonic clock: the
/// cycle counter once calibrated), so timestamps never go backwards within a process and
/// `end - start` equals the measured duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// From nanoseconds since the Unix epoch.
    pub fn from_unix_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// Nanoseconds since the Unix epoch.
    pub fn unix_nanos(self) -> u64 {
        self.0
    }

    /// Milliseconds since the Unix epoch (the JSON form's `timestamp`, `docs/design/contract.md`).
    pub fn unix_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// As a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.0)
    }

    /// Now, on the process's monotonic wall clock.
    pub fn now() -> Self {
        Tick::now().timestamp()
    }

    /// The wall-clock time of a monotonic instant (one clock read serves both).
    pub fn at(instant: Instant) -> Self {
        Tick::of(instant).timestamp()
    }

    /// This timestamp plus `d` (saturating).
    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }

    /// This timestamp minus `d` (saturating at the epoch).
    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(self.0.saturating_sub(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

/// The error of an `error` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A short type-like name: the error type, `Panic` or `Cancelled`.
    pub name: String,
    /// The message: content of kind [`ContentKind::ErrorText`](crate::ContentKind::ErrorText),
    /// emptied by the content policy unless captured, else scrubbed, redacted and truncated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ErrorInfo {
    /// An error with this name and message.
    pub fn new(name: impl Into<String>, message: impl Into<String>) -> Self {
        Self { name: name.into(), message: message.into() }
    }
}

/// One record of the event contract.
#[derive(Debug, Clone, PartialEq)]
pub struct ObsEvent {
    /// Start, end, error or event.
    pub kind: EventKind,
    /// Dotted operation or event name (see [`crate::names`]).
    pub name: Cow<'static, str>,
    /// The trace (causal tree) this record belongs to.
    pub trace_id: TraceId,
    /// The operation's span; for `event` records the span the event belongs to, if any.
    pub span_id: Option<SpanId>,
    /// The enclosing span; `None` on a root.
    pub parent_span_id: Option<SpanId>,
    /// When the record was made.
    pub timestamp: Timestamp,
    /// On `end`/`error`: monotonic time since the matching `start`.
    pub duration: Option<Duration>,
    /// The attribution context in force (userId, orgId, …).
    pub context: Attribution,
    /// Typed, classified attributes. On `end`/`error` this is the start payload merged with what
    /// was recorded while the operation ran.
    pub payload: Payload,
    /// On `error`: what went wrong.
    pub error: Option<ErrorInfo>,
    /// Content kinds the policy that delivered this event captures (bit set); 0 for events that
    /// never passed through a policy. See [`ObsEvent::exportable_fields`].
    pub(crate) captured: u16,
    /// On an operation's `end`, `error` and `event` records: its `start` record was not emitted
    /// (see [`ObsEvent::start_skipped`]).
    pub(crate) start_skipped: bool,
}

impl ObsEvent {
    /// A record with no span, context, payload, duration or error, stamped now.
    pub fn new(kind: EventKind, name: impl Into<Cow<'static, str>>, trace_id: TraceId) -> Self {
        ObsEvent {
            kind,
            name: name.into(),
            trace_id,
            span_id: None,
            parent_span_id: None,
            timestamp: Timestamp::now(),
            duration: None,
            context: Attribution::default(),
            payload: Payload::new(),
            error: None,
            captured: 0,
            start_skipped: false,
        }
    }

    /// This record with an empty payload: what a subscriber that reads no payloads is given
    /// ([`crate::Subscriber::wants_payloads`]) when another subscriber keeps the record itself.
    pub(crate) fn without_payload(&self) -> ObsEvent {
        ObsEvent {
            kind: self.kind,
            name: self.name.clone(),
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_span_id: self.parent_span_id,
            timestamp: self.timestamp,
            duration: self.duration,
            context: self.context.clone(),
            payload: Payload::new(),
            error: self.error.clone(),
            captured: self.captured,
            start_skipped: self.start_skipped,
        }
    }

    /// True on an `end`, `error` or `event` record of an operation whose `start` record was not
    /// emitted: every subscriber of the hub said it needs only some starts
    /// ([`crate::Subscriber::starts`]) and this operation's was not among them. Such an operation
    /// reaches subscribers as its end record alone, which carries everything its start would
    /// have: the name, ids and context, the start payload (merged with what was recorded), and
    /// the start time as [`ObsEvent::start_time`]. `false` on every other record.
    pub fn start_skipped(&self) -> bool {
        self.start_skipped
    }

    /// When the operation began: on an `end`/`error` record, its timestamp minus its duration
    /// (exactly the start record's timestamp); otherwise the record's timestamp.
    pub fn start_time(&self) -> Timestamp {
        match self.duration {
            Some(duration) => self.timestamp.saturating_sub(duration),
            None => self.timestamp,
        }
    }

    /// The payload fields an exporter may send: safe fields, plus content fields of the kinds the
    /// delivering policy captures; never secrets. Events that did not come through a hub's
    /// policy export no content at all (defence in depth for adapters).
    pub fn exportable_fields(&self) -> impl Iterator<Item = &Field> {
        self.payload.iter().filter(|field| match field.class {
            Class::Safe => true,
            Class::Content(kind) => self.captured & kind.bit() != 0,
            Class::Secret => false,
        })
    }

    /// The error message, when this record passed a policy that captures
    /// [`ContentKind::ErrorText`](crate::ContentKind::ErrorText) and there is one. Adapters use
    /// it instead of `error.message`, so an error that skipped the policy exports only its name.
    pub fn exportable_error_message(&self) -> Option<&str> {
        let error = self.error.as_ref()?;
        let captured = self.captured & crate::ContentKind::ErrorText.bit() != 0;
        (captured && !error.message.is_empty()).then_some(error.message.as_str())
    }

    /// The JSON form (one line, design-note field names).
    pub fn to_json(&self) -> String {
        // Serializing plain data into a String cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses the JSON form.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}

impl fmt::Display for ObsEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} trace={}", self.kind.as_str(), self.name, self.trace_id)?;
        if let Some(span) = self.span_id {
            write!(f, " span={span}")?;
        }
        if let Some(parent) = self.parent_span_id {
            write!(f, " parent={parent}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::ContentKind;
    use crate::payload::Value;

    #[test]
    fn value_json_writes_what_value_to_json_builds() {
        let values = [
            Value::Str("quote \" and \u{7}".into()),
            Value::I64(-3),
            Value::F64(0.1),
            Value::F64(f64::NAN),
            Value::F64(f64::NEG_INFINITY),
            Value::Bool(true),
            Value::StrArray(vec!["a".into(), "b".into()]),
            Value::I64Array(vec![1, 2]),
            Value::F64Array(vec![1.5, f64::INFINITY]),
            Value::BoolArray(vec![false]),
        ];
        for value in &values {
            let written = serde_json::to_string(&ValueJson(value)).unwrap();
            assert_eq!(written, value_to_json(value).to_string(), "{value:?}");
        }
    }

    #[test]
    fn json_uses_design_note_names_and_round_trips() {
        let mut event = ObsEvent::new(EventKind::End, "pi.agent.turn", TraceId::random());
        event.span_id = Some(SpanId::random());
        event.parent_span_id = Some(SpanId::random());
        event.duration = Some(Duration::from_nanos(1_234_567));
        event.context = [("userId", "u1"), ("orgId", "acme")].into_iter().collect();
        event.payload = Payload::new()
            .safe("model", "m")
            .safe("inputTokens", 12)
            .safe("cost", 0.5)
            .safe("aborted", false)
            .safe("ints", vec![1i64, 2])
            .content(ContentKind::Prompt, "prompt", "hello");
        event.error = Some(ErrorInfo::new("Boom", "bad"));
        let text = event.to_json();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in [
            "type",
            "name",
            "traceId",
            "spanId",
            "parentSpanId",
            "timestamp",
            "durationMs",
            "context",
            "payload",
            "error",
        ] {
            assert!(json.get(key).is_some(), "missing {key} in {text}");
        }
        assert_eq!(json["type"], "end");
        assert_eq!(json["payloadClasses"]["prompt"], "content:prompt");
        assert!(json["payloadClasses"].get("model").is_none(), "safe fields carry no class");
        assert_eq!(ObsEvent::from_json(&text).unwrap(), event);
    }

    #[test]
    fn float_millisecond_timestamps_without_nanos_are_accepted() {
        let text =
            r#"{"type":"event","name":"x","traceId":"0af7651916cd43dd8448eb211c80319c","timestamp":1700000000123.5}"#;
        let event = ObsEvent::from_json(text).unwrap();
        assert_eq!(event.timestamp.unix_nanos(), 1_700_000_000_123_500_000);
        assert!(ObsEvent::from_json(&text.replace("123.5", "-1")).is_err());
        assert!(ObsEvent::from_json(&text.replace("\"x\"", "\"x\",\"bogus\":1")).is_err());
    }

    #[test]
    fn timestamps_never_go_backwards() {
        let mut last = Timestamp::now();
        for _ in 0..1000 {
            let now = Timestamp::now();
            assert!(now >= last);
            last = now;
        }
    }

    #[test]
    fn the_direct_json_form_equals_the_value_based_one_for_every_value_kind() {
        let mut event = ObsEvent::new(EventKind::Error, "op", TraceId::random());
        event.span_id = Some(SpanId::random());
        event.context = [("zeta", "1"), ("alpha", "2")].into_iter().collect();
        event.payload = Payload::new()
            .safe("s", "text \"quoted\"\n")
            .safe("i", -3)
            .safe("f", 0.1)
            .safe("nan", f64::NAN)
            .safe("inf", f64::INFINITY)
            .safe("b", true)
            .safe("sa", vec!["a".to_owned(), "b".to_owned()])
            .safe("fa", vec![1.5f64, f64::NEG_INFINITY])
            .safe("ba", vec![true, false])
            .content(ContentKind::Prompt, "zz", "p")
            .secret("aa", "k");
        event.error = Some(ErrorInfo::new("Boom", "bad"));
        let direct: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        let payload: serde_json::Map<String, serde_json::Value> =
            event.payload.iter().map(|f| (f.key.to_string(), value_to_json(&f.value))).collect();
        assert_eq!(direct["payload"], serde_json::Value::Object(payload));
        assert_eq!(direct["payload"]["nan"], "NaN");
        assert_eq!(direct["payloadClasses"], serde_json::json!({"aa": "secret", "zz": "content:prompt"}));
        assert_eq!(direct["context"], serde_json::json!({"alpha": "2", "zeta": "1"}));
        // Keys in payload order, classes in key order: the text itself is stable.
        let text = event.to_json();
        assert!(text.find("\"s\"").unwrap() < text.find("\"ba\"").unwrap());
    }
}
