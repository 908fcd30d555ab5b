//! The JSON form of a record (the events file, `--mode json`, the design notes' shape): written
//! straight from the record's borrowed fields, read back through an owned intermediate, and the
//! payload values' JSON mapping.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ErrorInfo, EventKind, ObsEvent, Timestamp};
use crate::attribution::Attribution;
use crate::ids::{SpanId, TraceId};
use crate::payload::{Class, Field, Payload, Value};

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
