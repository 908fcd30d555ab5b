//! Shared by the Sentry tests: envelope parsing and a transaction → `RecordedSpan` mapping.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use pi_observe_core::testing::{RecordedEvent, RecordedSpan};
use pi_observe_core::{ErrorInfo, SpanId, Timestamp, TraceId, Value};
use serde_json::Value as Json;

/// The items of an envelope.
pub fn items(envelope: &sentry::Envelope) -> Vec<(String, Json)> {
    let mut bytes = Vec::new();
    envelope.to_writer(&mut bytes).unwrap();
    pi_observe_sentry::testing::envelope_items(&bytes)
}

/// Every item of every envelope captured by a test transport.
pub fn captured(transport: &Arc<sentry::test::TestTransport>) -> Vec<(String, Json)> {
    transport.fetch_and_clear_envelopes().iter().flat_map(items).collect()
}

fn nanos(seconds: &Json) -> u64 {
    match seconds {
        Json::Number(n) => (n.as_f64().unwrap() * 1e9).round() as u64,
        Json::String(s) => {
            // RFC 3339 with microseconds, as the Rust SDK writes timestamps.
            let t = time_from_rfc3339(s);
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        }
        _ => 0,
    }
}

fn time_from_rfc3339(s: &str) -> std::time::SystemTime {
    // 2026-12-02T14:15:20.243030Z
    let (date, rest) = s.split_once('T').unwrap();
    let mut d = date.split('-').map(|p| p.parse::<i64>().unwrap());
    let (y, m, day) = (d.next().unwrap(), d.next().unwrap(), d.next().unwrap());
    let rest = rest.trim_end_matches('Z');
    let (hms, frac) = rest.split_once('.').unwrap_or((rest, "0"));
    let mut t = hms.split(':').map(|p| p.parse::<i64>().unwrap());
    let (h, min, sec) = (t.next().unwrap(), t.next().unwrap(), t.next().unwrap());
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    let secs = days * 86400 + h * 3600 + min * 60 + sec;
    let frac_nanos = format!("{frac:0<9}")[..9].parse::<u64>().unwrap();
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64) + std::time::Duration::from_nanos(frac_nanos)
}

fn value(json: &Json) -> Value {
    match json {
        Json::String(s) => Value::Str(s.clone().into()),
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => n.as_i64().map(Value::I64).unwrap_or_else(|| Value::F64(n.as_f64().unwrap())),
        other => Value::Str(other.to_string().into()),
    }
}

fn attributes(data: &Json) -> BTreeMap<String, Value> {
    data.as_object()
        .map(|o| o.iter().filter_map(|(k, v)| Some((k.strip_prefix("pi.")?.to_owned(), value(v)))).collect())
        .unwrap_or_default()
}

fn error_of(status: &Json, errors: &[(String, Json)], span_id: &str) -> Option<ErrorInfo> {
    if status.as_str().unwrap_or("ok") == "ok" {
        return None;
    }
    errors
        .iter()
        .find(|(_, e)| e["contexts"]["trace"]["span_id"] == span_id)
        .map(|(_, e)| {
            let exception = &e["exception"]["values"][0];
            let (ty, value) =
                (exception["type"].as_str().unwrap_or_default(), exception["value"].as_str().unwrap_or_default());
            // Without captured error text the value repeats the type.
            ErrorInfo::new(ty, if value == ty { "" } else { value })
        })
        .or_else(|| Some(ErrorInfo::new(status.as_str().unwrap_or_default(), "")))
}

/// Every span of every transaction, as the contract would record it (attributes by payload key,
/// context from user + tags, breadcrumbs as events on the root).
pub fn recorded_spans(items: &[(String, Json)]) -> Vec<RecordedSpan> {
    let errors: Vec<(String, Json)> = items.iter().filter(|(t, _)| t == "event").cloned().collect();
    let mut spans = Vec::new();
    for (_, tx) in items.iter().filter(|(t, _)| t == "transaction") {
        let trace = &tx["contexts"]["trace"];
        let trace_id: TraceId = trace["trace_id"].as_str().unwrap().parse().unwrap();
        let mut context: BTreeMap<String, String> = tx["tags"]
            .as_object()
            .map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
            .unwrap_or_default();
        if let Some(user) = tx["user"]["id"].as_str() {
            context.insert("userId".into(), user.to_owned());
        }
        let root_id = trace["span_id"].as_str().unwrap();
        let events_of = |span: &str| -> Vec<RecordedEvent> {
            tx["breadcrumbs"]["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["data"]["span_id"] == span)
                .map(|c| RecordedEvent {
                    name: c["category"].as_str().unwrap_or_default().to_owned(),
                    timestamp: Timestamp::from_unix_nanos(nanos(&c["timestamp"])),
                    attributes: c["data"]
                        .as_object()
                        .map(|o| {
                            o.iter().filter(|(k, _)| *k != "span_id").map(|(k, v)| (k.clone(), value(v))).collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        };
        // A span from its JSON (`span`: name, ids, status, data) and the object with its times
        // (the transaction's own for the root).
        let record = |span: &Json, times: &Json, id: &str| RecordedSpan {
            name: name_of(span),
            trace_id,
            span_id: id.parse().unwrap(),
            parent_span_id: span["parent_span_id"].as_str().and_then(|p| p.parse::<SpanId>().ok()),
            start: Timestamp::from_unix_nanos(nanos(&times["start_timestamp"])),
            end: Some(Timestamp::from_unix_nanos(nanos(&times["timestamp"]))),
            error: error_of(&span["status"], &errors, id),
            attributes: attributes(&span["data"]),
            context: context.clone(),
            events: events_of(id),
        };
        spans.push(record(trace, tx, root_id));
        for span in tx["spans"].as_array().into_iter().flatten() {
            spans.push(record(span, span, span["span_id"].as_str().unwrap()));
        }
    }
    spans
}

/// The contract operation name of a span: its op, mapped back from the gen_ai ops.
fn name_of(span: &Json) -> String {
    match span["op"].as_str().unwrap_or_default() {
        "gen_ai.invoke_agent" => "pi.agent.prompt".into(),
        "gen_ai.chat" => "pi.ai.provider.request".into(),
        "gen_ai.execute_tool" => "pi.agent.tool_call".into(),
        other => other.to_owned(),
    }
}
