//! The event record ([`ObsEvent`]) and its JSON form.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::attribution::Attribution;
use crate::ids::{SpanId, TraceId};
use crate::payload::{Class, Field, Payload, Value};

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
/// [`Timestamp::now`] reads a process-wide anchor (wall clock once, then a monotonic clock), so
/// timestamps never go backwards within a process and `end - start` equals the measured duration.
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
        Self::at(Instant::now())
    }

    /// The wall-clock time of a monotonic instant (one clock read serves both).
    pub fn at(instant: Instant) -> Self {
        let (wall, mono) = anchor();
        let elapsed = u64::try_from(instant.saturating_duration_since(mono).as_nanos()).unwrap_or(u64::MAX);
        Timestamp(wall.saturating_add(elapsed))
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

fn anchor() -> (u64, Instant) {
    static ANCHOR: OnceLock<(u64, Instant)> = OnceLock::new();
    *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        (wall, Instant::now())
    })
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

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EventJson<'a> {
    #[serde(rename = "type")]
    kind: EventKind,
    #[serde(borrow)]
    name: Cow<'a, str>,
    trace_id: TraceId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    span_id: Option<SpanId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<SpanId>,
    /// Epoch milliseconds (float), as in upstream pi's JSON form (`docs/design/contract.md`).
    timestamp: f64,
    /// Exact epoch nanoseconds; wins over `timestamp` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_unix_nano: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
    /// Exact duration in nanoseconds; wins over `durationMs` when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    context: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "OrderedMap::is_empty")]
    payload: OrderedMap,
    /// Class of each non-safe payload field (`content:prompt`, `secret`); absent keys are safe.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    payload_classes: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ErrorInfo>,
}

/// The JSON form written straight from the event's borrowed fields (same fields, order and
/// values as [`EventJson`]): no intermediate `serde_json::Value` or copied strings per record.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventOut<'a> {
    #[serde(rename = "type")]
    kind: EventKind,
    name: &'a str,
    trace_id: TraceId,
    #[serde(skip_serializing_if = "Option::is_none")]
    span_id: Option<SpanId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_span_id: Option<SpanId>,
    timestamp: f64,
    time_unix_nano: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ns: Option<u64>,
    #[serde(skip_serializing_if = "Attribution::is_empty", serialize_with = "context_out")]
    context: &'a Attribution,
    #[serde(skip_serializing_if = "Payload::is_empty", serialize_with = "payload_out")]
    payload: &'a Payload,
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "classes_out")]
    payload_classes: Vec<(&'a str, Cow<'a, str>)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorInfo>,
}

fn context_out<S: serde::Serializer>(context: &&Attribution, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(context.iter())
}

fn payload_out<S: serde::Serializer>(payload: &&Payload, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(payload.iter().map(|f| (f.key.as_ref(), ValueJson(&f.value))))
}

fn classes_out<S: serde::Serializer>(classes: &Vec<(&str, Cow<'_, str>)>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(classes.iter().map(|(k, v)| (k, v)))
}

/// A payload value serialized as JSON straight from the field, exactly as [`value_to_json`]
/// writes it (non-finite floats as strings), without building a `serde_json::Value`.
#[derive(Debug, Clone, Copy)]
pub struct ValueJson<'a>(pub &'a Value);

struct F64Out(f64);

impl Serialize for F64Out {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() { s.serialize_f64(self.0) } else { s.serialize_str(&self.0.to_string()) }
    }
}

impl Serialize for ValueJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Str(v) => s.serialize_str(v),
            Value::I64(v) => s.serialize_i64(*v),
            Value::F64(v) => F64Out(*v).serialize(s),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::StrArray(v) => s.collect_seq(v),
            Value::I64Array(v) => s.collect_seq(v),
            Value::F64Array(v) => s.collect_seq(v.iter().map(|x| F64Out(*x))),
            Value::BoolArray(v) => s.collect_seq(v),
        }
    }
}

impl Serialize for ObsEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut payload_classes: Vec<(&str, Cow<'_, str>)> =
            self.payload.iter().filter(|f| f.class != Class::Safe).map(|f| (f.key.as_ref(), f.class.label())).collect();
        // Key order, as the parsed form (a sorted map) has it.
        payload_classes.sort_by(|a, b| a.0.cmp(b.0));
        EventOut {
            kind: self.kind,
            name: &self.name,
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_span_id: self.parent_span_id,
            timestamp: self.timestamp.unix_millis_f64(),
            time_unix_nano: self.timestamp.unix_nanos(),
            duration_ms: self.duration.map(|d| d.as_nanos() as f64 / 1e6),
            duration_ns: self.duration.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            context: &self.context,
            payload: &self.payload,
            payload_classes,
            error: self.error.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for ObsEvent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let json = EventJson::deserialize(d)?;
        let timestamp = match json.time_unix_nano {
            Some(nanos) => Timestamp(nanos),
            None if json.timestamp.is_finite() && json.timestamp >= 0.0 => {
                // Whole milliseconds and the fraction separately: `ms * 1e6` loses precision.
                let whole = json.timestamp.trunc();
                let fraction = ((json.timestamp - whole) * 1e6).round() as u64;
                Timestamp((whole as u64).saturating_mul(1_000_000).saturating_add(fraction))
            }
            None => return Err(D::Error::custom("timestamp must be a non-negative number")),
        };
        let duration = match (json.duration_ns, json.duration_ms) {
            (Some(nanos), _) => Some(Duration::from_nanos(nanos)),
            (None, Some(ms)) => Some(
                Duration::try_from_secs_f64(ms / 1e3)
                    .map_err(|_| D::Error::custom("durationMs must be a non-negative number"))?,
            ),
            (None, None) => None,
        };
        let mut payload = Payload::new();
        for (key, value) in json.payload.0 {
            let class = match json.payload_classes.get(&key) {
                None => Class::Safe,
                Some(label) => Class::parse(label)
                    .ok_or_else(|| D::Error::custom(format!("payloadClasses.{key}: unknown class {label:?}")))?,
            };
            let value =
                value_from_json(&value).ok_or_else(|| D::Error::custom(format!("payload.{key}: unsupported value")))?;
            payload.push_field(Field { key: Cow::Owned(key), value, class });
        }
        Ok(ObsEvent {
            kind: json.kind,
            name: Cow::Owned(json.name.into_owned()),
            trace_id: json.trace_id,
            span_id: json.span_id,
            parent_span_id: json.parent_span_id,
            timestamp,
            duration,
            context: json.context.into_iter().collect(),
            payload,
            error: json.error,
            captured: 0,
            start_skipped: false,
        })
    }
}

/// A JSON object that keeps its keys in document order (payload field order is meaningful).
#[derive(Default)]
struct OrderedMap(Vec<(String, serde_json::Value)>);

impl OrderedMap {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for OrderedMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for OrderedMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OrderedMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<OrderedMap, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = access.next_entry::<String, serde_json::Value>()? {
                    entries.push(entry);
                }
                Ok(OrderedMap(entries))
            }
        }
        d.deserialize_map(Visitor)
    }
}

fn f64_to_json(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v)
        .map(serde_json::Value::Number)
        .unwrap_or_else(|| serde_json::Value::String(v.to_string()))
}

/// A payload value as JSON (non-finite floats become strings).
pub fn value_to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::Str(v) => J::String(v.to_string()),
        Value::I64(v) => J::from(*v),
        Value::F64(v) => f64_to_json(*v),
        Value::Bool(v) => J::Bool(*v),
        Value::StrArray(v) => J::Array(v.iter().cloned().map(J::String).collect()),
        Value::I64Array(v) => J::Array(v.iter().map(|x| J::from(*x)).collect()),
        Value::F64Array(v) => J::Array(v.iter().map(|x| f64_to_json(*x)).collect()),
        Value::BoolArray(v) => J::Array(v.iter().map(|x| J::Bool(*x)).collect()),
    }
}

/// A JSON value as a payload value; `None` for null, objects and mixed arrays.
/// An empty array reads as an empty string array.
pub fn value_from_json(json: &serde_json::Value) -> Option<Value> {
    use serde_json::Value as J;
    Some(match json {
        J::String(s) => Value::Str(s.clone().into()),
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) if !n.is_f64() => Value::I64(i),
            _ => Value::F64(n.as_f64()?),
        },
        J::Array(items) => match items.first() {
            None | Some(J::String(_)) => {
                Value::StrArray(items.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<_>>()?)
            }
            Some(J::Bool(_)) => Value::BoolArray(items.iter().map(J::as_bool).collect::<Option<_>>()?),
            Some(J::Number(_)) if items.iter().all(|v| v.is_i64()) => {
                Value::I64Array(items.iter().map(J::as_i64).collect::<Option<_>>()?)
            }
            Some(J::Number(_)) => Value::F64Array(items.iter().map(J::as_f64).collect::<Option<_>>()?),
            Some(_) => return None,
        },
        J::Null | J::Object(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::ContentKind;

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
