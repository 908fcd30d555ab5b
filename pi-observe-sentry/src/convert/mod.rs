//! Pure mapping from contract records to Sentry protocol values: ops, span data, statuses,
//! users, tags, breadcrumbs, and the transaction of one finished trace.

use std::collections::BTreeMap;

use pi_observe_core::{Attribution, EventKind, ObsEvent, Value, names};
use sentry::protocol::{self, Breadcrumb, SpanStatus, TraceContext};
use serde_json::{Value as Json, json};

mod breadcrumbs;
mod data;

pub use breadcrumbs::{Breadcrumbs, breadcrumb};
pub use data::span_data;
use data::{DataEntry, DataOut, DataValue, data_entries};

/// The Sentry op of an operation, following Sentry's AI agent monitoring where one applies.
pub fn op(name: &str) -> &str {
    match name {
        names::AGENT_PROMPT => "gen_ai.invoke_agent",
        names::PROVIDER_REQUEST => "gen_ai.chat",
        names::AGENT_TOOL_CALL => "gen_ai.execute_tool",
        other => other,
    }
}

fn text<'a>(record: &'a ObsEvent, key: &str) -> Option<&'a str> {
    record.exportable_fields().find(|f| f.key == key).and_then(|f| f.value.as_str())
}

fn int(record: &ObsEvent, key: &str) -> Option<i64> {
    record.exportable_fields().find(|f| f.key == key).and_then(|f| f.value.as_i64())
}

/// The span description (`chat faux-1`, `execute_tool read`, `invoke_agent pi`, else the name).
pub fn description(name: &str, record: &ObsEvent) -> String {
    match name {
        names::AGENT_PROMPT => "invoke_agent pi".to_owned(),
        names::PROVIDER_REQUEST => format!("chat {}", text(record, names::MODEL).unwrap_or_default()).trim().to_owned(),
        names::AGENT_TOOL_CALL => {
            format!("execute_tool {}", text(record, names::TOOL_NAME).unwrap_or_default()).trim().to_owned()
        }
        other => other.to_owned(),
    }
}

/// A payload value as JSON (non-finite floats as strings).
pub fn json_value(value: &Value) -> Json {
    pi_observe_core::value_to_json(value)
}

/// Span status from the settling record.
pub fn status(end: Option<&ObsEvent>) -> SpanStatus {
    match end.filter(|e| e.kind == EventKind::Error).and_then(|e| e.error.as_ref()) {
        None if end.is_some() => SpanStatus::Ok,
        None => SpanStatus::DeadlineExceeded,
        Some(error) => match error.name.as_str() {
            names::ERROR_CANCELLED => SpanStatus::Cancelled,
            "Timeout" => SpanStatus::DeadlineExceeded,
            "AuthError" => SpanStatus::Unauthenticated,
            _ => SpanStatus::InternalError,
        },
    }
}

/// The Sentry user for an attribution context (`userId` → id).
pub fn user(context: &Attribution) -> Option<protocol::User> {
    context.get(names::CTX_USER_ID).map(|id| protocol::User { id: Some(id.to_owned()), ..Default::default() })
}

/// Tags for an attribution context: the keys in `tag_keys` (or every key but `userId` when
/// `None`).
pub fn tags(context: &Attribution, tag_keys: Option<&[String]>) -> BTreeMap<String, String> {
    context
        .iter()
        .filter(|(key, _)| match tag_keys {
            Some(keys) => keys.iter().any(|k| k == key),
            None => *key != names::CTX_USER_ID,
        })
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

pub(crate) fn trace_id(id: pi_observe_core::TraceId) -> protocol::TraceId {
    protocol::TraceId::from(id.to_bytes())
}

pub(crate) fn span_id(id: pi_observe_core::SpanId) -> protocol::SpanId {
    protocol::SpanId::from(id.to_bytes())
}

/// One span of a trace: its `start`, its settling record if any, and whether it is the root.
#[derive(Debug, Clone)]
pub struct SpanRecords {
    /// The `start` record.
    pub start: ObsEvent,
    /// The `end`/`error` record (`None`: still open when the transaction was sent).
    pub end: Option<ObsEvent>,
}

impl SpanRecords {
    fn merged(&self) -> &ObsEvent {
        self.end.as_ref().unwrap_or(&self.start)
    }

    fn data(&self, cut_at: std::time::SystemTime) -> (BTreeMap<String, Json>, std::time::SystemTime) {
        let mut data = span_data(&self.start.name, self.merged());
        let end = match &self.end {
            Some(end) => end.timestamp.to_system_time(),
            None => {
                data.insert("pi.incomplete".into(), json!(true));
                cut_at
            }
        };
        (data, end)
    }
}

/// Everything needed to send one trace as a transaction.
#[derive(Debug)]
pub struct TransactionParts<'a> {
    /// The root span.
    pub root: &'a SpanRecords,
    /// Spans of the trace already written by [`write_span`] as they ended (their JSON objects,
    /// comma-separated): first in the transaction's spans.
    pub written: &'a [u8],
    /// Every other span of the trace, any depth.
    pub children: Vec<&'a SpanRecords>,
    /// Breadcrumbs from the trace's point events.
    pub breadcrumbs: &'a Breadcrumbs,
    /// Which attribution keys become tags.
    pub tag_keys: Option<&'a [String]>,
    /// `SENTRY_ENVIRONMENT`.
    pub environment: Option<&'a str>,
    /// `SENTRY_RELEASE`.
    pub release: Option<&'a str>,
    /// End time for spans still open.
    pub cut_at: std::time::SystemTime,
}

/// The transaction of one trace as the JSON Sentry ingests (a `transaction` event with the
/// spans at their true depth, ids and times as recorded, and the breadcrumbs, which the typed
/// protocol struct has no field for).
pub fn transaction_json(parts: &TransactionParts<'_>) -> Json {
    let mut json = serde_json::to_value(transaction(parts)).unwrap_or(Json::Null);
    if let Json::Object(map) = &mut json {
        if let Some(Json::Array(spans)) = map.get_mut("spans") {
            let written = [b"[".as_slice(), parts.written, b"]"].concat();
            let written: Vec<Json> = serde_json::from_slice(&written).unwrap_or_default();
            spans.splice(0..0, written);
        }
        if !parts.breadcrumbs.is_empty() {
            map.insert("breadcrumbs".into(), json!({ "values": parts.breadcrumbs.to_vec() }));
        }
    }
    json
}

/// Appends `span` to `out` as the JSON object [`transaction_bytes`] writes for it (after a comma
/// when `out` holds one already): a subscriber writes each child span as it ends, so that the
/// transaction, when its root ends, only joins them ([`TransactionParts::written`]). A span still
/// open is written as cut at the Unix epoch: write only ended spans.
pub fn write_span(out: &mut Vec<u8>, span: &SpanRecords) -> bool {
    if !out.is_empty() {
        out.push(b',');
    }
    let trace = span.start.trace_id.hex();
    serde_json::to_writer(&mut *out, &SpanOut { span, trace: &trace, cut_at: std::time::UNIX_EPOCH }).is_ok()
}

/// [`transaction_json`] serialized straight to bytes, with its event id: what the subscriber
/// sends. The spans — nearly all of it — are written straight from their records ([`SpanOut`]:
/// no `protocol::Span` or data map rebuilt per span); the rest goes through the typed
/// transaction.
pub fn transaction_bytes(parts: &TransactionParts<'_>) -> Option<(String, Vec<u8>)> {
    let transaction = transaction_without_spans(parts);
    let event_id = transaction.event_id.as_simple().to_string();
    // About a kilobyte per span: the buffer rarely grows (each growth copies it).
    let mut bytes = Vec::with_capacity(1024 * (parts.children.len() + 2));
    serde_json::to_writer(&mut bytes, &transaction).ok()?;
    // The first `"spans":[]` is the key: a string value holding those characters is escaped.
    const EMPTY: &[u8] = br#""spans":[]"#;
    let at = bytes.windows(EMPTY.len()).position(|w| w == EMPTY)? + EMPTY.len() - 1;
    // The spans are written in place, the rest of the transaction put back after them.
    let rest = bytes.split_off(at);
    bytes.extend_from_slice(parts.written);
    let trace = parts.root.start.trace_id.hex();
    for span in &parts.children {
        if bytes.last() != Some(&b'[') {
            bytes.push(b',');
        }
        serde_json::to_writer(&mut bytes, &SpanOut { span, trace: &trace, cut_at: parts.cut_at }).ok()?;
    }
    bytes.extend_from_slice(&rest);
    if !parts.breadcrumbs.is_empty() && bytes.last() == Some(&b'}') {
        // The typed transaction has no breadcrumbs field: add it as the last member.
        bytes.pop();
        bytes.extend_from_slice(br#","breadcrumbs":"#);
        parts.breadcrumbs.write_values(&mut bytes);
        bytes.push(b'}');
    }
    Some((event_id, bytes))
}

/// One child span as the JSON of the `protocol::Span` [`transaction`] builds for it: the same
/// fields, order and values (ids as hex, `timestamp` RFC 3339, `start_timestamp` seconds).
struct SpanOut<'a> {
    span: &'a SpanRecords,
    trace: &'a str,
    cut_at: std::time::SystemTime,
}

impl serde::Serialize for SpanOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (start, merged) = (&self.span.start, self.span.merged());
        let mut data = data_entries(&start.name, merged);
        let end = match &self.span.end {
            Some(end) => end.timestamp.to_system_time(),
            None => {
                data.push(DataEntry::new("pi.", "incomplete", DataValue::Bool(true)));
                self.cut_at
            }
        };
        let mut map = s.serialize_map(None)?;
        match start.span_id {
            Some(id) => map.serialize_entry("span_id", &*id.hex())?,
            None => map.serialize_entry("span_id", &protocol::SpanId::default())?,
        }
        map.serialize_entry("trace_id", self.trace)?;
        if let Some(parent) = start.parent_span_id {
            map.serialize_entry("parent_span_id", &*parent.hex())?;
        }
        map.serialize_entry("same_process_as_parent", &true)?;
        map.serialize_entry("op", op(&start.name))?;
        map.serialize_entry("description", &description(&start.name, merged))?;
        map.serialize_entry("timestamp", &Rfc3339(end))?;
        map.serialize_entry("start_timestamp", &Seconds(start.timestamp.to_system_time()))?;
        map.serialize_entry("status", &status(self.span.end.as_ref()))?;
        if !data.is_empty() {
            map.serialize_entry("data", &DataOut(data))?;
        }
        map.end()
    }
}

/// A time as Sentry's protocol writes `timestamp`: RFC 3339 in UTC, as precise as it is.
struct Rfc3339(std::time::SystemTime);

impl serde::Serialize for Rfc3339 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let formatted = time::OffsetDateTime::from(self.0)
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(serde::ser::Error::custom)?;
        s.serialize_str(&formatted)
    }
}

/// A time as Sentry's protocol writes `start_timestamp`: seconds since the epoch, whole when
/// there is no fraction.
struct Seconds(std::time::SystemTime);

impl serde::Serialize for Seconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let since = self.0.duration_since(std::time::UNIX_EPOCH).map_err(serde::ser::Error::custom)?;
        if since.subsec_nanos() == 0 { s.serialize_u64(since.as_secs()) } else { s.serialize_f64(since.as_secs_f64()) }
    }
}

fn transaction(parts: &TransactionParts<'_>) -> protocol::Transaction<'static> {
    let mut transaction = transaction_without_spans(parts);
    let trace = trace_id(parts.root.start.trace_id);
    transaction.spans = parts
        .children
        .iter()
        .map(|span| {
            let (data, end) = span.data(parts.cut_at);
            protocol::Span {
                span_id: span.start.span_id.map(span_id).unwrap_or_default(),
                trace_id: trace,
                parent_span_id: span.start.parent_span_id.map(span_id),
                same_process_as_parent: Some(true),
                op: Some(op(&span.start.name).to_owned()),
                description: Some(description(&span.start.name, span.merged())),
                timestamp: Some(end),
                start_timestamp: span.start.timestamp.to_system_time(),
                status: Some(status(span.end.as_ref())),
                data: data.into_iter().collect(),
                ..Default::default()
            }
        })
        .collect();
    transaction
}

/// The transaction of [`transaction`] with no spans: name, times, user, tags, trace context.
fn transaction_without_spans(parts: &TransactionParts<'_>) -> protocol::Transaction<'static> {
    let root = parts.root;
    let (root_data, root_end) = root.data(parts.cut_at);
    let root_span = root.start.span_id.map(span_id).unwrap_or_default();
    let trace = trace_id(root.start.trace_id);
    let trace_context = TraceContext {
        span_id: root_span,
        trace_id: trace,
        parent_span_id: root.start.parent_span_id.map(span_id),
        op: Some(op(&root.start.name).to_owned()),
        description: Some(description(&root.start.name, root.merged())),
        status: Some(status(root.end.as_ref())),
        data: root_data.into_iter().collect(),
        ..Default::default()
    };
    protocol::Transaction {
        name: Some(description(&root.start.name, root.merged())),
        release: parts.release.map(|r| r.to_owned().into()),
        environment: parts.environment.map(|e| e.to_owned().into()),
        user: user(&root.start.context),
        tags: tags(&root.start.context, parts.tag_keys).into_iter().collect(),
        start_timestamp: root.start.timestamp.to_system_time(),
        timestamp: Some(root_end),
        spans: Vec::new(),
        contexts: [("trace".to_owned(), protocol::Context::Trace(Box::new(trace_context)))].into_iter().collect(),
        ..Default::default()
    }
}

/// An `error` record as a Sentry error event linked to its trace and span.
pub fn error_event(
    record: &ObsEvent,
    breadcrumbs: &[Breadcrumb],
    tag_keys: Option<&[String]>,
    environment: Option<&str>,
    release: Option<&str>,
) -> protocol::Event<'static> {
    let error = record.error.clone().unwrap_or_else(|| pi_observe_core::ErrorInfo::new("Error", ""));
    let trace_context = TraceContext {
        span_id: record.span_id.map(span_id).unwrap_or_default(),
        trace_id: trace_id(record.trace_id),
        parent_span_id: record.parent_span_id.map(span_id),
        op: Some(op(&record.name).to_owned()),
        status: Some(status(Some(record))),
        ..Default::default()
    };
    let mut tags = tags(&record.context, tag_keys);
    tags.insert("pi.operation".into(), record.name.to_string());
    protocol::Event {
        level: protocol::Level::Error,
        message: Some(format!("{} failed: {}", record.name, error.name)),
        exception: vec![protocol::Exception {
            ty: error.name.clone(),
            // The type by default; the text only when error text was captured for Sentry.
            value: Some(record.exportable_error_message().unwrap_or(&error.name).to_owned()),
            ..Default::default()
        }]
        .into(),
        timestamp: record.timestamp.to_system_time(),
        user: user(&record.context),
        tags: tags.into_iter().collect(),
        breadcrumbs: breadcrumbs.to_vec().into(),
        contexts: [("trace".to_owned(), protocol::Context::Trace(Box::new(trace_context)))].into_iter().collect(),
        environment: environment.map(|e| e.to_owned().into()),
        release: release.map(|r| r.to_owned().into()),
        extra: span_data(&record.name, record).into_iter().collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{ErrorInfo, Payload, SpanId, Timestamp, TraceId};

    pub(super) fn record(
        kind: EventKind,
        name: &'static str,
        trace: TraceId,
        span: SpanId,
        parent: Option<SpanId>,
        at: u64,
    ) -> ObsEvent {
        let mut record = ObsEvent::new(kind, name, trace);
        record.span_id = Some(span);
        record.parent_span_id = parent;
        record.timestamp = Timestamp::from_unix_nanos(at);
        record
    }

    #[test]
    fn spans_written_straight_from_records_equal_the_typed_transaction() {
        let trace = TraceId::random();
        let (root, request, tool, open, whole) =
            (SpanId::random(), SpanId::random(), SpanId::random(), SpanId::random(), SpanId::random());
        let t0 = 1_796_323_361_465_714_700;
        let context = Attribution::new().with("userId", "alice").with("orgId", "acme \"quoted\" \u{7}");
        let mut root_start = record(EventKind::Start, names::AGENT_PROMPT, trace, root, None, t0);
        root_start.context = context.clone();
        let mut root_end = record(EventKind::End, names::AGENT_PROMPT, trace, root, None, t0 + 900_000_000);
        root_end.context = context;
        root_end.payload = Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1").safe("turns", 2);
        let request_start = record(EventKind::Start, names::PROVIDER_REQUEST, trace, request, Some(root), t0 + 1_000);
        let mut request_end =
            record(EventKind::End, names::PROVIDER_REQUEST, trace, request, Some(root), t0 + 400_000_123);
        request_end.payload = Payload::new()
            .safe(names::MODEL, "faux-1")
            .safe(names::INPUT_TOKENS, 1834)
            .safe(names::CACHE_READ_TOKENS, 1024)
            .safe(names::OUTPUT_TOKENS, 211)
            .safe(names::STOP_REASON, "toolUse")
            .safe("costTotal", 0.000712)
            .safe("ratio", f64::NAN)
            .safe("incomplete", "a payload key that collides with pi.incomplete");
        let tool_start = record(EventKind::Start, names::AGENT_TOOL_CALL, trace, tool, Some(request), t0 + 500_000_000);
        let mut tool_end =
            record(EventKind::Error, names::AGENT_TOOL_CALL, trace, tool, Some(request), t0 + 600_000_000);
        tool_end.payload = Payload::new().safe(names::TOOL_NAME, "bash").safe(names::TOOL_CALL_ID, "call_1");
        tool_end.error = Some(ErrorInfo::new("Timeout", "took too long"));
        let mut open_start = record(EventKind::Start, "pi.agent.hook", trace, open, Some(root), t0 + 700_000_000);
        open_start.payload = Payload::new().safe("incomplete", "still running");
        // Whole seconds: `start_timestamp` is written as an integer then.
        let whole_start =
            record(EventKind::Start, "pi.agent.turn", trace, whole, Some(root), 1_796_323_362_000_000_000);
        let whole_end = record(EventKind::End, "pi.agent.turn", trace, whole, Some(root), 1_796_323_362_100_000_000);
        let spans = [
            SpanRecords { start: request_start, end: Some(request_end) },
            SpanRecords { start: tool_start, end: Some(tool_end) },
            SpanRecords { start: open_start, end: None },
            SpanRecords { start: whole_start, end: Some(whole_end) },
        ];
        let root = SpanRecords { start: root_start, end: Some(root_end) };
        let mut point = record(EventKind::Event, "pi.ai.provider.usage", trace, request, None, t0 + 300_000_000);
        point.payload = Payload::new().safe(names::INPUT_TOKENS, 7);
        let mut breadcrumbs = Breadcrumbs::new(100);
        breadcrumbs.push(&point);
        let tag_keys = ["orgId".to_owned()];
        // All four spans from their records, then the two that ended first written as they ended.
        for written_first in [0, 2] {
            let mut written = Vec::new();
            for span in &spans[..written_first] {
                assert!(write_span(&mut written, span));
            }
            let parts = TransactionParts {
                root: &root,
                written: &written,
                children: spans[written_first..].iter().collect(),
                breadcrumbs: &breadcrumbs,
                tag_keys: Some(&tag_keys),
                environment: Some("ci"),
                release: Some("pi@1.2.3"),
                cut_at: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(t0 + 950_000_000),
            };
            let (event_id, bytes) = transaction_bytes(&parts).unwrap();
            let direct: Json = serde_json::from_slice(&bytes).unwrap();
            let mut typed = transaction_json(&parts);
            assert_eq!(direct["event_id"], event_id.as_str());
            // Each call draws its own event id; everything else must be the same, in the same order.
            typed["event_id"] = direct["event_id"].clone();
            assert_eq!(direct, typed);
            assert_eq!(serde_json::to_string(&direct).unwrap(), serde_json::to_string(&typed).unwrap());
            assert_eq!(direct["spans"].as_array().unwrap().len(), 4);
            assert!(direct["spans"][3]["start_timestamp"].is_u64(), "{}", direct["spans"][3]);
            assert_eq!(direct["spans"][2]["data"]["pi.incomplete"], true);
            assert_eq!(direct["spans"][1]["status"], "deadline_exceeded", "{}", direct["spans"][1]);
        }
    }
}
