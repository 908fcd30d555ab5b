//! Shared by the log tests: an in-memory writer and JSON-line → contract-event parsing.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pi_observe_core::{Attribution, ErrorInfo, EventKind, ObsEvent, Payload, SpanId, Timestamp, TraceId, Value};
use serde_json::Value as Json;

/// Collects everything written; clone to share.
pub type Buffer = pi_observe_log::testing::MemoryWriter;

/// Each line `buffer` holds, parsed.
pub fn lines(buffer: &Buffer) -> Vec<Json> {
    buffer.text().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A `pi_observe` JSON line back as the contract event it came from.
pub fn event_from_line(line: &Json) -> ObsEvent {
    let text = |key: &str| line[key].as_str().map(str::to_owned);
    let kind = match text("event.kind").unwrap().as_str() {
        "start" => EventKind::Start,
        "end" => EventKind::End,
        "error" => EventKind::Error,
        _ => EventKind::Event,
    };
    let trace_id: TraceId = text("trace_id").unwrap().parse().unwrap();
    let mut event = ObsEvent::new(kind, text("event.name").unwrap(), trace_id);
    event.span_id = text("span_id").map(|s| s.parse::<SpanId>().unwrap());
    event.parent_span_id = text("parent_span_id").map(|s| s.parse::<SpanId>().unwrap());
    event.timestamp = Timestamp::from_unix_nanos(text("time_unix_nano").unwrap().parse().unwrap());
    event.duration = text("duration_ns").map(|d| Duration::from_nanos(d.parse().unwrap()));
    if let Some(name) = text("error.name") {
        event.error = Some(ErrorInfo::new(name, text("error.message").unwrap_or_default()));
    }
    let mut context = Attribution::new();
    let mut payload = Payload::new();
    for (key, value) in line.as_object().unwrap() {
        if let Some(k) = key.strip_prefix("ctx.") {
            context = context.with(k, value.as_str().unwrap());
        } else if let Some(k) = key.strip_prefix("payload.") {
            let value = match value {
                Json::String(s) => Value::Str(s.clone().into()),
                Json::Bool(b) => Value::Bool(*b),
                Json::Number(n) => n.as_i64().map(Value::I64).unwrap_or_else(|| Value::F64(n.as_f64().unwrap())),
                other => Value::Str(other.to_string().into()),
            };
            payload.insert(k.to_owned(), value, pi_observe_core::Class::Safe);
        }
    }
    event.context = context;
    event.payload = payload;
    event
}
