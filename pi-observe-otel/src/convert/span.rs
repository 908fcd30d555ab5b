//! One span from its records: the parts every form shares, then the SDK's `SpanData` (for the
//! in-memory exporter and the probe), or OTLP's protobuf terms (for the direct encoder in
//! the `wire` module and the gRPC / OTLP-JSON exporters).

use opentelemetry::trace::{SpanContext, SpanKind, Status, TraceFlags, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pi_observe_core::{EventKind, ObsEvent};

use super::{Conventions, otel_value, pi_key, span_attributes, span_kind, span_name};
use crate::names::*;

fn trace_id(id: pi_observe_core::TraceId) -> opentelemetry::trace::TraceId {
    opentelemetry::trace::TraceId::from_bytes(id.to_bytes())
}

fn span_id(id: pi_observe_core::SpanId) -> opentelemetry::trace::SpanId {
    opentelemetry::trace::SpanId::from_bytes(id.to_bytes())
}

/// What a span is made of, whichever form it leaves in.
struct Parts {
    name: std::borrow::Cow<'static, str>,
    attributes: Vec<KeyValue>,
    status: Status,
    events: Vec<opentelemetry::trace::Event>,
}

fn parts(
    start: &ObsEvent,
    end: Option<&ObsEvent>,
    events: &[ObsEvent],
    conventions: Conventions,
    latest: bool,
) -> Parts {
    let record = end.unwrap_or(start);
    let mut attributes = span_attributes(&start.name, record, conventions, latest);
    let name = span_name(record, conventions);
    if name != start.name {
        attributes.push(KeyValue::new(PI_OPERATION, start.name.clone()));
    }
    if end.is_none() {
        attributes.push(KeyValue::new(PI_INCOMPLETE, true));
    }
    let status = match end {
        Some(e) if e.kind == EventKind::Error => {
            // The type by default; its text only when error text was captured for this sink.
            let name = e.error.as_ref().map(|err| err.name.as_str()).unwrap_or(pi_observe_core::names::ERROR_GENERIC);
            attributes.push(KeyValue::new(ERROR_TYPE, name.to_owned()));
            match e.exportable_error_message() {
                Some(message) => Status::error(format!("{name}: {message}")),
                None => Status::error(name.to_owned()),
            }
        }
        _ => Status::Unset,
    };
    let events = events
        .iter()
        .map(|e| {
            let attrs: Vec<KeyValue> =
                e.exportable_fields().map(|f| KeyValue::new(pi_key(&f.key), otel_value(&f.value))).collect();
            opentelemetry::trace::Event::new(e.name.clone(), e.timestamp.to_system_time(), attrs, 0)
        })
        .collect();
    Parts { name, attributes, status, events }
}

/// One span from its `start`, its `end`/`error` record (or `None` if it never ended, then it
/// ends at `shutdown_time` with `pi.incomplete=true`), and its point events.
pub fn span_data(
    start: &ObsEvent,
    end: Option<&ObsEvent>,
    events: &[ObsEvent],
    shutdown_time: std::time::SystemTime,
    conventions: Conventions,
    scope: &InstrumentationScope,
) -> Option<SpanData> {
    let own_span = start.span_id?;
    let latest = scope.schema_url() == Some(SCHEMA_URL_LATEST);
    let Parts { name, attributes, status, events: span_events } = parts(start, end, events, conventions, latest);
    let mut events = SpanEvents::default();
    events.events = span_events;
    Some(SpanData {
        span_context: SpanContext::new(
            trace_id(start.trace_id),
            span_id(own_span),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: start.parent_span_id.map(span_id).unwrap_or(opentelemetry::trace::SpanId::INVALID),
        parent_span_is_remote: false,
        span_kind: span_kind(&start.name),
        name,
        start_time: start.start_time().to_system_time(),
        end_time: end.map(|e| e.timestamp.to_system_time()).unwrap_or(shutdown_time),
        attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status,
        instrumentation_scope: scope.clone(),
    })
}

/// A span's parts in the form OTLP's protobuf wants them (ids as bytes, times as Unix
/// nanoseconds, the status as code and message): what [`proto_span`] and the direct encoder
/// (the `wire` module) both build from.
pub(crate) struct SpanParts {
    pub(crate) trace_id: [u8; 16],
    pub(crate) span_id: [u8; 8],
    pub(crate) parent_span_id: Option<[u8; 8]>,
    pub(crate) flags: u32,
    pub(crate) name: std::borrow::Cow<'static, str>,
    /// `SpanKind` as its protobuf number.
    pub(crate) kind: i32,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) attributes: Vec<KeyValue>,
    pub(crate) events: Vec<EventParts>,
    pub(crate) status_message: String,
    /// `StatusCode` as its protobuf number.
    pub(crate) status_code: i32,
}

/// A span event's parts.
pub(crate) struct EventParts {
    pub(crate) time: u64,
    pub(crate) name: std::borrow::Cow<'static, str>,
    pub(crate) attributes: Vec<KeyValue>,
}

/// The span of `start` (settled by `end`, or incomplete at `shutdown_time`) in OTLP's terms.
pub(crate) fn span_parts(
    start: &ObsEvent,
    end: Option<&ObsEvent>,
    events: &[ObsEvent],
    shutdown_time: std::time::SystemTime,
    conventions: Conventions,
    latest: bool,
) -> Option<SpanParts> {
    use opentelemetry_proto::tonic::trace::v1::{span, status::StatusCode};
    let own_span = start.span_id?;
    let Parts { name, attributes, status, events } = parts(start, end, events, conventions, latest);
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    };
    let (code, message) = match status {
        Status::Error { description } => (StatusCode::Error, description.into_owned()),
        Status::Ok => (StatusCode::Ok, String::new()),
        Status::Unset => (StatusCode::Unset, String::new()),
    };
    let kind = match span_kind(&start.name) {
        SpanKind::Client => span::SpanKind::Client,
        _ => span::SpanKind::Internal,
    };
    Some(SpanParts {
        trace_id: start.trace_id.to_bytes(),
        span_id: own_span.to_bytes(),
        parent_span_id: start.parent_span_id.map(|p| p.to_bytes()),
        // Sampled, and "is the parent remote" known (not remote): what the SDK's conversion sets.
        flags: 0x101,
        name,
        kind: kind as i32,
        start: start.start_time().unix_nanos(),
        end: end.map_or_else(|| nanos(shutdown_time), |e| e.timestamp.unix_nanos()),
        attributes,
        events: events
            .into_iter()
            .map(|e| EventParts { time: nanos(e.timestamp), name: e.name, attributes: e.attributes })
            .collect(),
        status_message: message,
        status_code: code as i32,
    })
}

/// A span's parts (from [`span_parts`]) as an OTLP protobuf struct (what the gRPC and OTLP/JSON
/// exporters send), without building `SpanData` and converting it again.
pub(crate) fn proto_span(p: SpanParts) -> opentelemetry_proto::tonic::trace::v1::Span {
    use opentelemetry_proto::tonic::trace::v1::{Span, Status as ProtoStatus, span};
    use opentelemetry_proto::transform::common::tonic::Attributes;
    Span {
        trace_id: p.trace_id.to_vec(),
        span_id: p.span_id.to_vec(),
        trace_state: String::new(),
        parent_span_id: p.parent_span_id.map(|id| id.to_vec()).unwrap_or_default(),
        flags: p.flags,
        name: p.name.into_owned(),
        kind: p.kind,
        start_time_unix_nano: p.start,
        end_time_unix_nano: p.end,
        attributes: Attributes::from(p.attributes).0,
        dropped_attributes_count: 0,
        events: p
            .events
            .into_iter()
            .map(|e| span::Event {
                time_unix_nano: e.time,
                name: e.name.into_owned(),
                attributes: Attributes::from(e.attributes).0,
                dropped_attributes_count: 0,
            })
            .collect(),
        dropped_events_count: 0,
        links: Vec::new(),
        dropped_links_count: 0,
        status: Some(ProtoStatus { message: p.status_message, code: p.status_code }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{ErrorInfo, Payload, SpanId, TraceId, names as pi};

    fn record(name: &'static str, kind: EventKind, payload: Payload) -> ObsEvent {
        let mut e = ObsEvent::new(kind, name, TraceId::random());
        e.span_id = Some(SpanId::random());
        e.payload = payload;
        e
    }

    #[test]
    fn span_data_keeps_ids_times_status_and_events() {
        let start = record(pi::AGENT_TOOL_CALL, EventKind::Start, Payload::new().safe(pi::TOOL_NAME, "bash"));
        let mut end = start.clone();
        end.kind = EventKind::Error;
        end.timestamp = start.timestamp.saturating_add(std::time::Duration::from_millis(5));
        end.error = Some(ErrorInfo::new("ToolError", "exit 1"));
        let mut point = start.clone();
        point.kind = EventKind::Event;
        point.name = "pi.test.point".into();
        point.timestamp = start.timestamp.saturating_add(std::time::Duration::from_millis(2));
        let parent = SpanId::random();
        let mut start = start;
        start.parent_span_id = Some(parent);
        let scope = InstrumentationScope::builder("pi-observe").build();
        let span =
            span_data(&start, Some(&end), &[point.clone()], std::time::SystemTime::now(), Conventions::GenAi, &scope)
                .unwrap();
        assert_eq!(span.span_context.trace_id().to_bytes(), start.trace_id.to_bytes());
        assert_eq!(span.span_context.span_id().to_bytes(), start.span_id.unwrap().to_bytes());
        assert_eq!(span.parent_span_id.to_bytes(), parent.to_bytes());
        assert_eq!(span.start_time, start.timestamp.to_system_time());
        assert_eq!(span.end_time, end.timestamp.to_system_time());
        // Error text skipped the policy here, so only the type is exported.
        assert_eq!(span.status, Status::error("ToolError"));
        let attribute =
            |key: &str| span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.as_str());
        assert_eq!(attribute(ERROR_TYPE).as_deref(), Some("ToolError"));
        assert_eq!(span.name, "execute_tool bash");
        assert_eq!(attribute(PI_OPERATION).as_deref(), Some(pi::AGENT_TOOL_CALL));
        assert_eq!(span.events.events.len(), 1);
        assert_eq!(span.events.events[0].timestamp, point.timestamp.to_system_time());
        let open = span_data(&start, None, &[], std::time::SystemTime::UNIX_EPOCH, Conventions::GenAi, &scope).unwrap();
        assert!(open.attributes.iter().any(|kv| kv.key.as_str() == PI_INCOMPLETE));
        assert_eq!(open.status, Status::Unset);
    }
}
