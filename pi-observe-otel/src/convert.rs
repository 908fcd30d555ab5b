//! Pure mapping from contract records to OpenTelemetry span data. No I/O, no clocks.

use opentelemetry::trace::{SpanContext, SpanKind, Status, TraceFlags, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use pi_observe_core::{Attribution, EventKind, Field, ObsEvent, Value, names as pi};

use crate::names::*;

/// Which attribute conventions to add next to the `pi.*` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Conventions {
    /// OpenTelemetry GenAI semantic conventions.
    #[default]
    GenAi,
    /// OpenInference (Arize Phoenix LLM views).
    OpenInference,
    /// Both.
    Both,
}

impl Conventions {
    /// Parses `genai`, `openinference` or `both`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "genai" | "gen_ai" => Some(Conventions::GenAi),
            "openinference" => Some(Conventions::OpenInference),
            "both" => Some(Conventions::Both),
            _ => None,
        }
    }

    fn genai(self) -> bool {
        matches!(self, Conventions::GenAi | Conventions::Both)
    }

    fn openinference(self) -> bool {
        matches!(self, Conventions::OpenInference | Conventions::Both)
    }
}

/// `pi.<key>` as an attribute key, built once per distinct key per thread (the worker converts
/// the same few dozen keys over and over).
pub fn pi_key(key: &str) -> opentelemetry::Key {
    cached_key(PI_PREFIX, key)
}

/// `prefix + key` as an attribute key, cached per thread for the prefixes used here.
fn cached_key(prefix: &'static str, key: &str) -> opentelemetry::Key {
    type Keys = std::collections::HashMap<String, opentelemetry::Key>;
    thread_local! {
        static KEYS: std::cell::RefCell<Vec<(&'static str, Keys)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    KEYS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let index = match cache.iter().position(|(p, _)| *p == prefix) {
            Some(index) => index,
            None => {
                cache.push((prefix, Keys::new()));
                cache.len() - 1
            }
        };
        let keys = &mut cache[index].1;
        if let Some(k) = keys.get(key) {
            return k.clone();
        }
        let k = opentelemetry::Key::from(format!("{prefix}{key}"));
        // Bounded: payload and attribution keys are few; a flood of dynamic keys just stops
        // being cached.
        if keys.len() < 4096 {
            keys.insert(key.to_owned(), k.clone());
        }
        k
    })
}

/// A payload value as an OpenTelemetry value. Static strings are borrowed; others are
/// reference-counted, so the same value under a second convention key costs no copy.
pub fn otel_value(value: &Value) -> opentelemetry::Value {
    use opentelemetry::Value as V;
    let shared = |s: &str| StringValue::from(std::sync::Arc::<str>::from(s));
    match value {
        Value::Str(std::borrow::Cow::Borrowed(s)) => V::String(StringValue::from(*s)),
        Value::Str(s) => V::String(shared(s)),
        Value::I64(v) => V::I64(*v),
        Value::F64(v) => V::F64(*v),
        Value::Bool(v) => V::Bool(*v),
        Value::StrArray(v) => V::Array(Array::String(v.iter().map(|s| shared(s)).collect())),
        Value::I64Array(v) => V::Array(Array::I64(v.clone())),
        Value::F64Array(v) => V::Array(Array::F64(v.clone())),
        Value::BoolArray(v) => V::Array(Array::Bool(v.clone())),
    }
}

/// The exportable fields of one record next to their converted values.
struct Converted<'a> {
    fields: Vec<&'a Field>,
    values: Vec<opentelemetry::Value>,
}

impl Converted<'_> {
    fn index(&self, key: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.key == key)
    }

    fn int(&self, key: &str) -> Option<i64> {
        self.index(key).and_then(|i| self.fields[i].value.as_i64())
    }

    /// A string field's converted value (shared, not copied).
    fn string(&self, key: &str) -> Option<opentelemetry::Value> {
        self.index(key).filter(|&i| self.fields[i].value.as_str().is_some()).map(|i| self.values[i].clone())
    }
}

/// All attributes of one span: exportable payload fields as `pi.<key>`, attribution as
/// `pi.context.<key>` plus `user.id` / `organization.id`, and the chosen conventions.
/// Only [`ObsEvent::exportable_fields`] are used: content never arrives here unless the
/// hub's policy captured it, and secrets never do.
/// `latest` selects the newest GenAI names (`OTEL_SEMCONV_STABILITY_OPT_IN`).
pub fn span_attributes(name: &str, record: &ObsEvent, conventions: Conventions, latest: bool) -> Vec<KeyValue> {
    let fields: Vec<&Field> = record.exportable_fields().collect();
    let values = fields.iter().map(|f| otel_value(&f.value)).collect();
    let payload = Converted { fields, values };
    // Room for the payload, the attribution (two keys each at most) and the convention keys.
    let mut out: Vec<KeyValue> = Vec::with_capacity(payload.fields.len() + 2 * record.context.len() + 12);
    out.extend(payload.fields.iter().zip(&payload.values).map(|(f, v)| KeyValue::new(pi_key(&f.key), v.clone())));
    push_context_attributes(&record.context, &mut out);
    let input = payload.int(pi::INPUT_TOKENS);
    let output = payload.int(pi::OUTPUT_TOKENS);
    let cache_read = payload.int(pi::CACHE_READ_TOKENS).unwrap_or(0);
    let cache_write = payload.int(pi::CACHE_WRITE_TOKENS).unwrap_or(0);
    let prompt_tokens = input.map(|i| i + cache_read + cache_write);
    let push_str = |out: &mut Vec<KeyValue>, key: &'static str, field: &str| {
        if let Some(v) = payload.string(field) {
            out.push(KeyValue::new(key, v));
        }
    };
    if conventions.genai() {
        let operation = match name {
            pi::AGENT_PROMPT => Some(OP_INVOKE_AGENT),
            pi::PROVIDER_REQUEST => Some(OP_CHAT),
            pi::AGENT_TOOL_CALL => Some(OP_EXECUTE_TOOL),
            _ => None,
        };
        if let Some(op) = operation {
            out.push(KeyValue::new(GEN_AI_OPERATION_NAME, op));
        }
        push_str(&mut out, GEN_AI_PROVIDER_NAME, pi::PROVIDER);
        push_str(&mut out, GEN_AI_REQUEST_MODEL, pi::MODEL);
        push_str(&mut out, GEN_AI_RESPONSE_MODEL, pi::RESPONSE_MODEL);
        push_str(&mut out, GEN_AI_CONVERSATION_ID, pi::SESSION_ID);
        push_str(&mut out, GEN_AI_TOOL_NAME, pi::TOOL_NAME);
        push_str(&mut out, GEN_AI_TOOL_CALL_ID, pi::TOOL_CALL_ID);
        if name == pi::AGENT_PROMPT {
            out.push(KeyValue::new(GEN_AI_AGENT_NAME, AGENT_NAME));
        }
        // Captured content on the conventions' own keys (absent unless a sink captures it).
        push_str(&mut out, GEN_AI_INPUT_MESSAGES, pi::INPUT_MESSAGES);
        push_str(&mut out, GEN_AI_OUTPUT_MESSAGES, pi::OUTPUT_MESSAGES);
        push_str(&mut out, GEN_AI_SYSTEM_INSTRUCTIONS, pi::SYSTEM_INSTRUCTIONS);
        push_str(&mut out, GEN_AI_TOOL_DEFINITIONS, pi::TOOL_DEFINITIONS);
        if name == pi::AGENT_TOOL_CALL {
            push_str(&mut out, GEN_AI_TOOL_CALL_ARGUMENTS, pi::TOOL_ARGS);
            for output in [pi::TOOL_RESULT, pi::SHELL_OUTPUT, pi::FILE_CONTENT] {
                push_str(&mut out, GEN_AI_TOOL_CALL_RESULT, output);
            }
        }
        if name == pi::PROVIDER_REQUEST {
            push_str(&mut out, SERVER_ADDRESS, pi::SERVER_ADDRESS);
            if let Some(port) = payload.int(pi::SERVER_PORT) {
                out.push(KeyValue::new(SERVER_PORT, port));
            }
            if let Some(tokens) = prompt_tokens {
                // Input tokens include the cached ones (pi's session `input` does not).
                out.push(KeyValue::new(GEN_AI_USAGE_INPUT_TOKENS, tokens));
                out.push(KeyValue::new(GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache_read));
                let cache_write_key = if latest {
                    GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS
                } else {
                    GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
                };
                out.push(KeyValue::new(cache_write_key, cache_write));
            }
            if let Some(tokens) = output {
                out.push(KeyValue::new(GEN_AI_USAGE_OUTPUT_TOKENS, tokens));
            }
            if let Some(opentelemetry::Value::String(reason)) = payload.string(pi::STOP_REASON) {
                out.push(KeyValue::new(
                    GEN_AI_RESPONSE_FINISH_REASONS,
                    opentelemetry::Value::Array(Array::String(vec![reason])),
                ));
            }
        }
    }
    if conventions.openinference() {
        let kind = match name {
            pi::AGENT_PROMPT => "AGENT",
            pi::PROVIDER_REQUEST => "LLM",
            pi::AGENT_TOOL_CALL => "TOOL",
            _ => "CHAIN",
        };
        out.push(KeyValue::new(OPENINFERENCE_SPAN_KIND, kind));
        if name == pi::PROVIDER_REQUEST {
            push_str(&mut out, LLM_MODEL_NAME, pi::MODEL);
            push_str(&mut out, LLM_PROVIDER, pi::PROVIDER);
            if let (Some(prompt), Some(completion)) = (prompt_tokens, output) {
                out.push(KeyValue::new(LLM_TOKEN_COUNT_PROMPT, prompt));
                out.push(KeyValue::new(LLM_TOKEN_COUNT_COMPLETION, completion));
                out.push(KeyValue::new(LLM_TOKEN_COUNT_TOTAL, prompt + completion));
            }
        }
        push_str(&mut out, TOOL_NAME, pi::TOOL_NAME);
        push_str(&mut out, SESSION_ID, pi::SESSION_ID);
        openinference_content(name, &payload, &mut out);
    }
    out
}

/// Captured content where Phoenix/Arize read it: `input.value` / `output.value`, the LLM span's
/// `llm.input_messages.{i}.message.role|content` and `llm.output_messages.0…`, and
/// `tool.parameters`.
fn openinference_content(name: &str, payload: &Converted<'_>, out: &mut Vec<KeyValue>) {
    let text = |key: &str| payload.index(key).and_then(|i| payload.fields[i].value.as_str());
    let message = |out: &mut Vec<KeyValue>, prefix: &str, i: usize, role: &str, content: &str| {
        out.push(KeyValue::new(format!("{prefix}.{i}.message.role"), role.to_owned()));
        out.push(KeyValue::new(format!("{prefix}.{i}.message.content"), content.to_owned()));
    };
    match name {
        pi::AGENT_PROMPT => {
            if let Some(prompt) = text(pi::PROMPT_TEXT) {
                out.push(KeyValue::new(INPUT_VALUE, prompt.to_owned()));
            }
        }
        pi::PROVIDER_REQUEST => {
            if let Some(input) = text(pi::INPUT_MESSAGES) {
                out.push(KeyValue::new(INPUT_VALUE, input.to_owned()));
                out.push(KeyValue::new(INPUT_MIME_TYPE, "application/json"));
                // Cut to the size limit, the JSON may not parse: then only `input.value` is set.
                let parsed: Vec<serde_json::Value> = serde_json::from_str(input).unwrap_or_default();
                for (i, m) in parsed.iter().enumerate() {
                    let role = m["role"].as_str().unwrap_or("user");
                    let parts = m["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
                    let content: Vec<&str> =
                        parts.iter().filter_map(|p| p["content"].as_str().or_else(|| p["response"].as_str())).collect();
                    message(out, LLM_INPUT_MESSAGES, i, role, &content.join("\n"));
                }
            }
            if let Some(completion) = text(pi::COMPLETION_TEXT) {
                out.push(KeyValue::new(OUTPUT_VALUE, completion.to_owned()));
                message(out, LLM_OUTPUT_MESSAGES, 0, "assistant", completion);
            }
        }
        pi::AGENT_TOOL_CALL => {
            if let Some(args) = text(pi::TOOL_ARGS) {
                out.push(KeyValue::new(TOOL_PARAMETERS, args.to_owned()));
                out.push(KeyValue::new(INPUT_VALUE, args.to_owned()));
            }
            if let Some(result) = [pi::TOOL_RESULT, pi::SHELL_OUTPUT, pi::FILE_CONTENT].into_iter().find_map(text) {
                out.push(KeyValue::new(OUTPUT_VALUE, result.to_owned()));
            }
        }
        _ => {}
    }
}

/// Attribution as `pi.context.<key>`, plus `user.id` and `organization.id` when present.
pub fn context_attributes(context: &Attribution) -> Vec<KeyValue> {
    let mut out = Vec::with_capacity(context.len() + 2);
    push_context_attributes(context, &mut out);
    out
}

fn push_context_attributes(context: &Attribution, out: &mut Vec<KeyValue>) {
    for (key, value) in context.iter() {
        let value: opentelemetry::Value = StringValue::from(std::sync::Arc::<str>::from(value)).into();
        match key {
            pi::CTX_USER_ID => out.push(KeyValue::new(USER_ID, value.clone())),
            pi::CTX_ORG_ID => out.push(KeyValue::new(ORGANIZATION_ID, value.clone())),
            _ => {}
        }
        out.push(KeyValue::new(cached_key(PI_CONTEXT_PREFIX, key), value));
    }
}

/// The span name: with the GenAI conventions `invoke_agent pi`, `chat {model}` and
/// `execute_tool {tool}` for the three GenAI operations (the contract name is then
/// [`PI_OPERATION`]); the contract's operation name otherwise.
/// `record` is the span's end record (else its start), whose name is the contract's.
pub fn span_name(record: &ObsEvent, conventions: Conventions) -> std::borrow::Cow<'static, str> {
    let name = &record.name;
    let text = |key: &str| record.exportable_fields().find(|f| f.key == key).and_then(|f| f.value.as_str());
    if conventions.genai() {
        match name.as_ref() {
            pi::AGENT_PROMPT => return format!("{OP_INVOKE_AGENT} {AGENT_NAME}").into(),
            pi::PROVIDER_REQUEST => {
                return text(pi::MODEL).map_or(OP_CHAT.into(), |model| format!("{OP_CHAT} {model}").into());
            }
            pi::AGENT_TOOL_CALL => {
                return text(pi::TOOL_NAME)
                    .map_or(OP_EXECUTE_TOOL.into(), |tool| format!("{OP_EXECUTE_TOOL} {tool}").into());
            }
            _ => {}
        }
    }
    name.clone()
}

/// CLIENT for provider requests (they leave the process), INTERNAL otherwise.
pub fn span_kind(name: &str) -> SpanKind {
    if name == pi::PROVIDER_REQUEST { SpanKind::Client } else { SpanKind::Internal }
}

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
        start_time: start.timestamp.to_system_time(),
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
/// ([`crate::wire`]) both build from.
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
        start: start.timestamp.unix_nanos(),
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

/// The same span as [`span_data`], straight in its OTLP protobuf form (what the gRPC and
/// OTLP/JSON exporters send), without building `SpanData` and converting it again.
pub(crate) fn proto_span(
    start: &ObsEvent,
    end: Option<&ObsEvent>,
    events: &[ObsEvent],
    shutdown_time: std::time::SystemTime,
    conventions: Conventions,
    latest: bool,
) -> Option<opentelemetry_proto::tonic::trace::v1::Span> {
    use opentelemetry_proto::tonic::trace::v1::{Span, Status as ProtoStatus, span};
    use opentelemetry_proto::transform::common::tonic::Attributes;
    let p = span_parts(start, end, events, shutdown_time, conventions, latest)?;
    Some(Span {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{ContentKind, ContentPolicy, ErrorInfo, Observability, Payload, SpanId, TraceId};
    use std::collections::HashMap;

    fn record(name: &'static str, kind: EventKind, payload: Payload) -> ObsEvent {
        let mut e = ObsEvent::new(kind, name, TraceId::random());
        e.span_id = Some(SpanId::random());
        e.context = [("userId", "u1"), ("orgId", "acme"), ("teamId", "core")].into_iter().collect();
        e.payload = payload;
        e
    }

    fn attrs(name: &'static str, payload: Payload, conventions: Conventions) -> HashMap<String, opentelemetry::Value> {
        span_attributes(name, &record(name, EventKind::End, payload), conventions, false)
            .into_iter()
            .map(|kv| (kv.key.to_string(), kv.value))
            .collect()
    }

    fn provider_end() -> Payload {
        Payload::new()
            .safe(pi::API, "openai-completions")
            .safe(pi::PROVIDER, "openai")
            .safe(pi::MODEL, "gpt-4o")
            .safe(pi::RESPONSE_MODEL, "gpt-4o-2024-08-06")
            .safe(pi::SESSION_ID, "s1")
            .safe(pi::INPUT_TOKENS, 20)
            .safe(pi::OUTPUT_TOKENS, 30)
            .safe(pi::CACHE_READ_TOKENS, 100)
            .safe(pi::CACHE_WRITE_TOKENS, 5)
            .safe(pi::COST_TOTAL, 0.01)
            .safe(pi::STOP_REASON, "toolUse")
            .safe(pi::SERVER_ADDRESS, "api.openai.com")
            .safe(pi::SERVER_PORT, 443)
            .content(ContentKind::Completion, pi::COMPLETION_TEXT, "secret completion")
            .secret(pi::API_KEY, "sk-secret")
    }

    #[test]
    fn provider_request_maps_to_genai_chat_attributes() {
        let a = attrs(pi::PROVIDER_REQUEST, provider_end(), Conventions::GenAi);
        let s = |k: &str| a.get(k).map(|v| v.as_str().into_owned());
        assert_eq!(s(GEN_AI_OPERATION_NAME).as_deref(), Some("chat"));
        assert_eq!(s(GEN_AI_PROVIDER_NAME).as_deref(), Some("openai"));
        assert_eq!(s(GEN_AI_REQUEST_MODEL).as_deref(), Some("gpt-4o"));
        assert_eq!(s(GEN_AI_RESPONSE_MODEL).as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(s(GEN_AI_CONVERSATION_ID).as_deref(), Some("s1"));
        assert_eq!(s(SERVER_ADDRESS).as_deref(), Some("api.openai.com"));
        assert_eq!(a[SERVER_PORT], opentelemetry::Value::I64(443));
        assert_eq!(a[GEN_AI_USAGE_INPUT_TOKENS], opentelemetry::Value::I64(125));
        assert_eq!(a[GEN_AI_USAGE_OUTPUT_TOKENS], opentelemetry::Value::I64(30));
        assert_eq!(a[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS], opentelemetry::Value::I64(100));
        assert_eq!(a[GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS], opentelemetry::Value::I64(5));
        assert_eq!(
            a[GEN_AI_RESPONSE_FINISH_REASONS],
            opentelemetry::Value::Array(Array::String(vec!["toolUse".into()]))
        );
        assert_eq!(a["pi.costTotal"], opentelemetry::Value::F64(0.01));
        assert_eq!(s(USER_ID).as_deref(), Some("u1"));
        assert_eq!(s(ORGANIZATION_ID).as_deref(), Some("acme"));
        assert_eq!(s("pi.context.teamId").as_deref(), Some("core"));
        assert!(!a.contains_key(OPENINFERENCE_SPAN_KIND), "openinference keys only on request");
        // Content that did not pass a policy, and secrets, are never attributes.
        assert!(!a.contains_key("pi.completion") && !a.contains_key("pi.apiKey"));
        assert!(a.values().all(|v| !v.as_str().contains("secret")));
    }

    #[test]
    fn spans_follow_the_pinned_genai_names_and_the_latest_ones_when_opted_in() {
        assert_eq!(GENAI_SEMCONV_VERSION, "1.41.0");
        assert_eq!(SCHEMA_URL, "https://opentelemetry.io/schemas/1.41.0");
        let named = |name: &'static str, payload: Payload, conventions| {
            span_name(&record(name, EventKind::End, payload), conventions).into_owned()
        };
        assert_eq!(named(pi::AGENT_PROMPT, Payload::new(), Conventions::GenAi), "invoke_agent pi");
        assert_eq!(named(pi::PROVIDER_REQUEST, provider_end(), Conventions::GenAi), "chat gpt-4o");
        let bash = Payload::new().safe(pi::TOOL_NAME, "bash");
        assert_eq!(named(pi::AGENT_TOOL_CALL, bash.clone(), Conventions::GenAi), "execute_tool bash");
        assert_eq!(named(pi::AGENT_TURN, Payload::new(), Conventions::GenAi), pi::AGENT_TURN);
        assert_eq!(named(pi::AGENT_TOOL_CALL, bash, Conventions::OpenInference), pi::AGENT_TOOL_CALL);
        let prompt = attrs(pi::AGENT_PROMPT, Payload::new(), Conventions::GenAi);
        assert_eq!(prompt[GEN_AI_AGENT_NAME].as_str(), "pi");
        // The cache-write spelling follows the switch; input tokens include cached input.
        let latest: HashMap<String, opentelemetry::Value> = span_attributes(
            pi::PROVIDER_REQUEST,
            &record(pi::PROVIDER_REQUEST, EventKind::End, provider_end()),
            Conventions::GenAi,
            true,
        )
        .into_iter()
        .map(|kv| (kv.key.to_string(), kv.value))
        .collect();
        assert_eq!(latest[GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS], opentelemetry::Value::I64(5));
        assert!(!latest.contains_key(GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS));
        assert_eq!(latest[GEN_AI_USAGE_INPUT_TOKENS], opentelemetry::Value::I64(125));
        let pinned = attrs(pi::PROVIDER_REQUEST, provider_end(), Conventions::GenAi);
        assert!(!pinned.contains_key(GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS));
    }

    #[test]
    fn openinference_profile_adds_llm_views_and_both_adds_both() {
        let a = attrs(pi::PROVIDER_REQUEST, provider_end(), Conventions::OpenInference);
        assert_eq!(a[OPENINFERENCE_SPAN_KIND].as_str(), "LLM");
        assert_eq!(a[LLM_MODEL_NAME].as_str(), "gpt-4o");
        assert_eq!(a[LLM_TOKEN_COUNT_PROMPT], opentelemetry::Value::I64(125));
        assert_eq!(a[LLM_TOKEN_COUNT_TOTAL], opentelemetry::Value::I64(155));
        assert_eq!(a[SESSION_ID].as_str(), "s1");
        assert!(!a.contains_key(GEN_AI_OPERATION_NAME));
        let both = attrs(pi::PROVIDER_REQUEST, provider_end(), Conventions::Both);
        assert!(both.contains_key(GEN_AI_OPERATION_NAME) && both.contains_key(OPENINFERENCE_SPAN_KIND));
        for (name, kind) in [(pi::AGENT_PROMPT, "AGENT"), (pi::AGENT_TOOL_CALL, "TOOL"), (pi::AGENT_TURN, "CHAIN")] {
            assert_eq!(attrs(name, Payload::new(), Conventions::OpenInference)[OPENINFERENCE_SPAN_KIND].as_str(), kind);
        }
    }

    #[test]
    fn every_contract_name_and_safe_key_maps_under_the_pi_prefix() {
        for name in pi::OPERATIONS {
            let a = attrs(
                name,
                Payload::new().safe(pi::ENTRY_TYPE, "message").safe(pi::TOOL_NAME, "bash"),
                Conventions::GenAi,
            );
            assert_eq!(a["pi.entryType"].as_str(), "message", "{name}");
            let op = a.get(GEN_AI_OPERATION_NAME).map(|v| v.as_str().into_owned());
            let expected = match name {
                pi::AGENT_PROMPT => Some("invoke_agent"),
                pi::PROVIDER_REQUEST => Some("chat"),
                pi::AGENT_TOOL_CALL => Some("execute_tool"),
                _ => None,
            };
            assert_eq!(op.as_deref(), expected, "{name}");
            assert_eq!(
                span_kind(name),
                if name == pi::PROVIDER_REQUEST { SpanKind::Client } else { SpanKind::Internal }
            );
        }
        let tool = attrs(
            pi::AGENT_TOOL_CALL,
            Payload::new().safe(pi::TOOL_NAME, "bash").safe(pi::TOOL_CALL_ID, "c1"),
            Conventions::GenAi,
        );
        assert_eq!(tool[GEN_AI_TOOL_NAME].as_str(), "bash");
        assert_eq!(tool[GEN_AI_TOOL_CALL_ID].as_str(), "c1");
    }

    #[test]
    fn captured_content_passes_only_through_a_policy() {
        let hub = Observability::with_policy(ContentPolicy::default().capture(ContentKind::Completion));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let _s = hub.subscribe(move |e: &ObsEvent| sink.lock().unwrap().push(e.clone()));
        hub.emit(record(pi::PROVIDER_REQUEST, EventKind::End, provider_end()));
        let through = seen.lock().unwrap()[0].clone();
        let a: HashMap<_, _> = span_attributes(pi::PROVIDER_REQUEST, &through, Conventions::GenAi, false)
            .into_iter()
            .map(|kv| (kv.key.to_string(), kv.value))
            .collect();
        assert_eq!(a["pi.completion"].as_str(), "secret completion");
        assert!(!a.contains_key("pi.apiKey"));
    }

    /// `record` as a sink with `policy` receives it, converted with `conventions`.
    fn through(policy: ContentPolicy, record: ObsEvent, conventions: Conventions) -> HashMap<String, String> {
        let hub = Observability::with_policy(policy);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let _s = hub.subscribe(move |e: &ObsEvent| sink.lock().unwrap().push(e.clone()));
        let name = record.name.clone();
        hub.emit(record);
        let received = seen.lock().unwrap()[0].clone();
        span_attributes(&name, &received, conventions, false)
            .into_iter()
            .map(|kv| (kv.key.to_string(), kv.value.as_str().into_owned()))
            .collect()
    }

    #[test]
    fn captured_content_goes_on_the_conventions_keys_and_uncaptured_leaves_no_trace() {
        let input = r#"[{"role":"user","parts":[{"type":"text","content":"fix it"}]}]"#;
        let output = r#"[{"role":"assistant","parts":[{"type":"text","content":"done"}],"finish_reason":"stop"}]"#;
        let request = || {
            record(
                pi::PROVIDER_REQUEST,
                EventKind::End,
                provider_end()
                    .content(ContentKind::ProviderPayload, pi::INPUT_MESSAGES, input)
                    .content(ContentKind::Prompt, pi::SYSTEM_INSTRUCTIONS, r#"[{"type":"text","content":"be brief"}]"#)
                    .content(ContentKind::Completion, pi::OUTPUT_MESSAGES, output),
            )
        };
        let captured = ContentPolicy::default()
            .capture(ContentKind::Prompt)
            .capture(ContentKind::Completion)
            .capture(ContentKind::ProviderPayload);
        let a = through(captured.clone(), request(), Conventions::Both);
        assert_eq!(a[GEN_AI_INPUT_MESSAGES], input);
        assert_eq!(a[GEN_AI_OUTPUT_MESSAGES], output);
        assert!(a[GEN_AI_SYSTEM_INSTRUCTIONS].contains("be brief"));
        assert_eq!(a[INPUT_VALUE], input);
        assert_eq!(a["llm.input_messages.0.message.role"], "user");
        assert_eq!(a["llm.input_messages.0.message.content"], "fix it");
        assert_eq!(a["llm.output_messages.0.message.content"], "secret completion");
        let none = through(ContentPolicy::default(), request(), Conventions::Both);
        for key in
            [GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES, GEN_AI_SYSTEM_INSTRUCTIONS, INPUT_VALUE, OUTPUT_VALUE]
        {
            assert!(!none.contains_key(key), "{key} without capture");
        }
        assert!(none.keys().all(|k| !k.starts_with(LLM_INPUT_MESSAGES)));
        let tool = || {
            record(
                pi::AGENT_TOOL_CALL,
                EventKind::End,
                Payload::new()
                    .safe(pi::TOOL_NAME, "bash")
                    .content(ContentKind::ToolArgs, pi::TOOL_ARGS, r#"{"command":"ls"}"#)
                    .content(ContentKind::ShellOutput, pi::SHELL_OUTPUT, "a.txt"),
            )
        };
        let kinds = ContentPolicy::default().capture(ContentKind::ToolArgs).capture(ContentKind::ShellOutput);
        let t = through(kinds, tool(), Conventions::Both);
        assert_eq!(t[GEN_AI_TOOL_CALL_ARGUMENTS], r#"{"command":"ls"}"#);
        assert_eq!(t[GEN_AI_TOOL_CALL_RESULT], "a.txt");
        assert_eq!(t[TOOL_PARAMETERS], r#"{"command":"ls"}"#);
        let t = through(ContentPolicy::default(), tool(), Conventions::Both);
        assert!(!t.contains_key(GEN_AI_TOOL_CALL_ARGUMENTS) && !t.contains_key(TOOL_PARAMETERS));
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
