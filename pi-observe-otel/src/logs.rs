//! Every contract record as an OTLP log record, correlated to its span (optional, off by
//! default): pure mapping here, transport in `export`.

use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use pi_observe_core::{EventKind, ObsEvent};

use crate::convert::{context_attributes, otel_value};
use crate::names::PI_PREFIX;

/// OTLP severity numbers used: DEBUG for start/end, INFO for point events, ERROR for errors.
pub const SEVERITY_DEBUG: i32 = 5;
/// INFO.
pub const SEVERITY_INFO: i32 = 9;
/// ERROR.
pub const SEVERITY_ERROR: i32 = 17;

fn kv(key: impl Into<String>, value: opentelemetry::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue::from(value)), ..Default::default() }
}

/// One record as a log record: body `"<kind> <name>"`, the trace and span ids, its own time,
/// `event.name` / `event.kind`, duration, error, exportable payload fields and attribution.
pub fn log_record(event: &ObsEvent) -> LogRecord {
    let (severity_number, severity_text) = match event.kind {
        EventKind::Error => (SEVERITY_ERROR, "ERROR"),
        EventKind::Event => (SEVERITY_INFO, "INFO"),
        EventKind::Start | EventKind::End => (SEVERITY_DEBUG, "DEBUG"),
    };
    let mut attributes =
        vec![kv("event.name", event.name.to_string().into()), kv("event.kind", event.kind.as_str().into())];
    if let Some(d) = event.duration {
        attributes.push(kv("duration_ms", (d.as_secs_f64() * 1e3).into()));
    }
    if let Some(parent) = event.parent_span_id {
        attributes.push(kv("parent_span_id", parent.to_string().into()));
    }
    if let Some(error) = &event.error {
        attributes.push(kv("error.type", error.name.clone().into()));
        if let Some(message) = event.exportable_error_message() {
            attributes.push(kv("error.message", message.to_owned().into()));
        }
    }
    attributes.extend(event.exportable_fields().map(|f| kv(format!("{PI_PREFIX}{}", f.key), otel_value(&f.value))));
    attributes.extend(context_attributes(&event.context).into_iter().map(|a| kv(a.key.to_string(), a.value)));
    LogRecord {
        time_unix_nano: event.timestamp.unix_nanos(),
        observed_time_unix_nano: event.timestamp.unix_nanos(),
        severity_number,
        severity_text: severity_text.to_owned(),
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(format!("{} {}", event.kind.as_str(), event.name))),
        }),
        attributes,
        trace_id: event.trace_id.to_bytes().to_vec(),
        span_id: event.span_id.map(|s| s.to_bytes().to_vec()).unwrap_or_default(),
        flags: 1,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{ContentKind, ErrorInfo, Payload, SpanId, TraceId, names};

    #[test]
    fn records_keep_ids_time_severity_and_only_exportable_fields() {
        let mut e = ObsEvent::new(EventKind::Error, names::AGENT_TOOL_CALL, TraceId::random());
        e.span_id = Some(SpanId::random());
        e.context = [("userId", "u1")].into_iter().collect();
        e.payload =
            Payload::new().safe(names::TOOL_NAME, "bash").content(ContentKind::ShellOutput, "out", "secret output");
        e.error = Some(ErrorInfo::new("ToolError", "exit 1"));
        let r = log_record(&e);
        assert_eq!(r.trace_id, e.trace_id.to_bytes().to_vec());
        assert_eq!(r.span_id, e.span_id.unwrap().to_bytes().to_vec());
        assert_eq!(r.time_unix_nano, e.timestamp.unix_nanos());
        assert_eq!(r.severity_number, SEVERITY_ERROR);
        let dump = format!("{:?}", r.attributes);
        assert!(dump.contains("pi.toolName") && dump.contains("user.id") && dump.contains("ToolError"));
        assert!(!dump.contains("secret output"), "content that skipped a policy is not logged");
    }
}
