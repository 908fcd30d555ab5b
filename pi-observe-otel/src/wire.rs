//! OTLP/HTTP protobuf written straight from contract records: each span is encoded once, as it
//! is paired, into the batch's buffer; an export wraps the buffer in the request's resource and
//! scope with one copy. No `Span`/`KeyValue`/`AnyValue` structs are built and no `encoded_len`
//! pass walks them (what `prost` does for the struct path, which gRPC and OTLP/JSON still use).
//! Field numbers are those of `opentelemetry/proto/trace/v1/trace.proto` and
//! `common/v1/common.proto`; a test decodes the bytes with the generated types and compares them
//! with [`crate::convert::proto_span`].

use opentelemetry::{Array, KeyValue, StringValue, Value};
use pi_observe_core::ObsEvent;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::convert::{Conventions, SpanParts, span_parts};

/// Spans of one batch, already encoded as `ScopeSpans.spans` (field 2) entries.
#[derive(Debug, Default)]
pub(crate) struct EncodedSpans {
    bytes: Vec<u8>,
    count: usize,
    scratch: Vec<u8>,
}

impl EncodedSpans {
    /// Spans in the batch.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The batch so far, leaving an empty one (with the scratch buffer kept).
    pub(crate) fn take(&mut self) -> EncodedSpans {
        let capacity = self.bytes.capacity();
        let bytes = std::mem::replace(&mut self.bytes, Vec::with_capacity(capacity));
        EncodedSpans { bytes, count: std::mem::take(&mut self.count), scratch: Vec::new() }
    }

    /// Adds the span of `start` (settled by `end`, or incomplete at `now`), as
    /// [`crate::convert::proto_span`] builds it.
    pub(crate) fn push(
        &mut self,
        start: &ObsEvent,
        end: Option<&ObsEvent>,
        events: &[ObsEvent],
        now: std::time::SystemTime,
        conventions: Conventions,
        latest: bool,
    ) {
        let Some(parts) = span_parts(start, end, events, now, conventions, latest) else { return };
        self.scratch.clear();
        span(&parts, &mut self.scratch);
        message(2, &self.scratch, &mut self.bytes);
        self.count += 1;
    }

    /// The whole `ExportTraceServiceRequest`: one resource (its encoded `Resource` message and
    /// schema URL), one scope (its encoded `InstrumentationScope` and schema URL), these spans.
    pub(crate) fn request(&self, resource: &[u8], resource_schema: &str, scope: &[u8], scope_schema: &str) -> Vec<u8> {
        let scope_spans_len = field_len(1, scope.len()) + self.bytes.len() + string_len(3, scope_schema);
        let resource_spans_len =
            field_len(1, resource.len()) + field_len(2, scope_spans_len) + string_len(3, resource_schema);
        let mut out = Vec::with_capacity(field_len(1, resource_spans_len));
        header(1, resource_spans_len, &mut out);
        message(1, resource, &mut out);
        header(2, scope_spans_len, &mut out);
        message(1, scope, &mut out);
        out.extend_from_slice(&self.bytes);
        string(3, scope_schema, &mut out);
        string(3, resource_schema, &mut out);
        out
    }
}

/// `Span` fields in tag order (as `prost` writes them).
fn span(p: &SpanParts, out: &mut Vec<u8>) {
    bytes(1, &p.trace_id, out);
    bytes(2, &p.span_id, out);
    if let Some(parent) = &p.parent_span_id {
        bytes(4, parent, out);
    }
    string(5, &p.name, out);
    if p.kind != 0 {
        encode_key(6, WireType::Varint, out);
        encode_varint(p.kind as u64, out);
    }
    fixed64(7, p.start, out);
    fixed64(8, p.end, out);
    for kv in &p.attributes {
        key_value(9, kv, out);
    }
    for event in &p.events {
        let len = fixed64_len(event.time)
            + string_len(2, &event.name)
            + event.attributes.iter().map(|kv| field_len(3, key_value_len(kv))).sum::<usize>();
        header(11, len, out);
        fixed64(1, event.time, out);
        string(2, &event.name, out);
        for kv in &event.attributes {
            key_value(3, kv, out);
        }
    }
    // `Status` is always present (an empty message when unset).
    let code_len = if p.status_code != 0 { 1 + encoded_len_varint(p.status_code as u64) } else { 0 };
    let status_len = string_len(2, &p.status_message) + code_len;
    header(15, status_len, out);
    string(2, &p.status_message, out);
    if p.status_code != 0 {
        encode_key(3, WireType::Varint, out);
        encode_varint(p.status_code as u64, out);
    }
    if p.flags != 0 {
        encode_key(16, WireType::ThirtyTwoBit, out);
        out.extend_from_slice(&p.flags.to_le_bytes());
    }
}

fn key_value(tag: u32, kv: &KeyValue, out: &mut Vec<u8>) {
    header(tag, key_value_len(kv), out);
    string(1, kv.key.as_str(), out);
    header(2, any_value_len(&kv.value), out);
    any_value(&kv.value, out);
}

fn key_value_len(kv: &KeyValue) -> usize {
    string_len(1, kv.key.as_str()) + field_len(2, any_value_len(&kv.value))
}

/// `AnyValue`'s one-of (always written, even when it holds a default value).
fn any_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Bool(v) => {
            encode_key(2, WireType::Varint, out);
            encode_varint(u64::from(*v), out);
        }
        Value::I64(v) => {
            encode_key(3, WireType::Varint, out);
            encode_varint(*v as u64, out);
        }
        Value::F64(v) => {
            encode_key(4, WireType::SixtyFourBit, out);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Value::String(s) => {
            header(1, s.as_str().len(), out);
            out.extend_from_slice(s.as_str().as_bytes());
        }
        Value::Array(array) => {
            header(5, array_len(array), out);
            for_each_element(array, |element| {
                header(1, any_value_len(&element), out);
                any_value(&element, out);
            });
        }
        other => {
            let text = other.to_string();
            header(1, text.len(), out);
            out.extend_from_slice(text.as_bytes());
        }
    }
}

fn any_value_len(value: &Value) -> usize {
    match value {
        Value::Bool(_) => 2,
        Value::I64(v) => 1 + encoded_len_varint(*v as u64),
        Value::F64(_) => 9,
        Value::String(s) => field_len(1, s.as_str().len()),
        Value::Array(array) => field_len(5, array_len(array)),
        other => field_len(1, other.to_string().len()),
    }
}

fn array_len(array: &Array) -> usize {
    let mut len = 0;
    for_each_element(array, |element| len += field_len(1, any_value_len(&element)));
    len
}

/// Each element of an array as a value of its own.
fn for_each_element(array: &Array, mut f: impl FnMut(Value)) {
    match array {
        Array::Bool(v) => v.iter().for_each(|b| f(Value::Bool(*b))),
        Array::I64(v) => v.iter().for_each(|i| f(Value::I64(*i))),
        Array::F64(v) => v.iter().for_each(|x| f(Value::F64(*x))),
        Array::String(v) => v.iter().for_each(|s: &StringValue| f(Value::String(s.clone()))),
        _ => {}
    }
}

/// Tag and length of a length-delimited field.
fn header(tag: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

fn message(tag: u32, body: &[u8], out: &mut Vec<u8>) {
    header(tag, body.len(), out);
    out.extend_from_slice(body);
}

/// A non-empty bytes field (proto3 leaves empty ones out).
fn bytes(tag: u32, value: &[u8], out: &mut Vec<u8>) {
    if !value.is_empty() {
        message(tag, value, out);
    }
}

fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    bytes(tag, value.as_bytes(), out);
}

fn fixed64(tag: u32, value: u64, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::SixtyFourBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed64_len(value: u64) -> usize {
    if value != 0 { 9 } else { 0 }
}

/// Encoded size of a length-delimited field holding `len` bytes (tags here are < 16: one byte).
fn field_len(_tag: u32, len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn string_len(tag: u32, value: &str) -> usize {
    if value.is_empty() { 0 } else { field_len(tag, value.len()) }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    use pi_observe_core::{ErrorInfo, EventKind, Payload, SpanId, TraceId, Value as V, names};
    use prost::Message;

    use super::*;
    use crate::convert::proto_span;

    fn record(kind: EventKind, name: &'static str, trace: TraceId, span: SpanId, payload: Payload) -> ObsEvent {
        let mut e = ObsEvent::new(kind, name, trace);
        e.span_id = Some(span);
        e.context = [("userId", "u1"), ("orgId", "acme")].into_iter().collect();
        e.payload = payload;
        e
    }

    /// Spans of every shape: a child with a parent, a failed one with an error type, one that
    /// never ended, point events, every value type (arrays included), empty strings, big and
    /// negative numbers.
    fn spans() -> Vec<(ObsEvent, Option<ObsEvent>, Vec<ObsEvent>)> {
        let trace = TraceId::random();
        let (root, child, open) = (SpanId::random(), SpanId::random(), SpanId::random());
        let start = record(EventKind::Start, names::AGENT_PROMPT, trace, root, Payload::new().safe(names::MODEL, "m"));
        let end = record(
            EventKind::End,
            names::AGENT_PROMPT,
            trace,
            root,
            Payload::new()
                .safe(names::MODEL, "m")
                .safe(names::INPUT_TOKENS, 1_234_567_890_123i64)
                .safe("negative", -7)
                .safe("ratio", 0.25)
                .safe("flag", true)
                .safe("empty", "")
                .safe("labels", V::StrArray(vec!["a".into(), String::new(), "ü".into()]))
                .safe("counts", V::I64Array(vec![0, -1, i64::MAX]))
                .safe("weights", V::F64Array(vec![1.5, -0.0]))
                .safe("bits", V::BoolArray(vec![true, false])),
        );
        let mut child_start =
            record(EventKind::Start, names::PROVIDER_REQUEST, trace, child, Payload::new().safe(names::PROVIDER, "p"));
        child_start.parent_span_id = Some(root);
        let mut failed = record(EventKind::Error, names::PROVIDER_REQUEST, trace, child, Payload::new());
        failed.parent_span_id = Some(root);
        failed.error = Some(ErrorInfo { name: "HttpStatus".into(), message: "quota".into() });
        let mut retry =
            record(EventKind::Event, names::PROVIDER_RETRY, trace, child, Payload::new().safe("attempt", 2));
        retry.parent_span_id = Some(root);
        let unfinished = record(EventKind::Start, names::AGENT_TOOL_CALL, trace, open, Payload::new());
        vec![(start, Some(end), vec![]), (child_start, Some(failed), vec![retry]), (unfinished, None, vec![])]
    }

    #[test]
    fn the_bytes_decode_to_what_the_struct_path_sends() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let resource = Resource { attributes: vec![], dropped_attributes_count: 0, entity_refs: vec![] };
        let scope = InstrumentationScope { name: "pi-observe".into(), version: "1".into(), ..Default::default() };
        for conventions in [Conventions::default(), Conventions::OpenInference, Conventions::Both] {
            let mut encoded = EncodedSpans::default();
            let mut structs = Vec::new();
            for (start, end, events) in &spans() {
                encoded.push(start, end.as_ref(), events, now, conventions, true);
                structs.extend(span_parts(start, end.as_ref(), events, now, conventions, true).map(proto_span));
            }
            assert_eq!(encoded.len(), 3);
            let bytes = encoded.request(&resource.encode_to_vec(), "https://r", &scope.encode_to_vec(), "https://s");
            let expected = ExportTraceServiceRequest {
                resource_spans: vec![ResourceSpans {
                    resource: Some(resource.clone()),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(scope.clone()),
                        spans: structs,
                        schema_url: "https://s".into(),
                    }],
                    schema_url: "https://r".into(),
                }],
            };
            assert_eq!(ExportTraceServiceRequest::decode(&bytes[..]).unwrap(), expected);
            // And byte for byte what prost writes for the same request.
            assert_eq!(bytes, expected.encode_to_vec());
        }
        let mut empty = EncodedSpans::default();
        assert_eq!(empty.take().len(), 0);
    }
}
