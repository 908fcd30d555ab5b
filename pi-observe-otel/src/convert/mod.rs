//! Pure mapping from contract records to OpenTelemetry span data. No I/O, no clocks.
//!
//! This module maps names and attributes (conventions, keys, values); [`span`] puts a span
//! together from its records, in the SDK's form or straight in OTLP's protobuf terms.

mod span;

pub use span::span_data;
pub(crate) use span::{SpanParts, proto_span, span_parts};

use opentelemetry::trace::SpanKind;
use opentelemetry::{Array, KeyValue, StringValue};
use pi_observe_core::{Attribution, Field, ObsEvent, Value, names as pi};

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

    /// OpenInference (Phoenix, Arize) names are written.
    pub(crate) fn openinference(self) -> bool {
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
    // Looked up once per attribute of every span: a fast hash for short keys.
    type Keys = std::collections::HashMap<String, opentelemetry::Key, rustc_hash::FxBuildHasher>;
    thread_local! {
        static KEYS: std::cell::RefCell<Vec<(&'static str, Keys)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    KEYS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let index = match cache.iter().position(|(p, _)| *p == prefix) {
            Some(index) => index,
            None => {
                cache.push((prefix, Keys::default()));
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

    fn float(&self, key: &str) -> Option<f64> {
        self.index(key).and_then(|i| self.fields[i].value.as_f64())
    }

    /// A string field's converted value (shared, not copied).
    fn string(&self, key: &str) -> Option<opentelemetry::Value> {
        self.index(key).filter(|&i| self.fields[i].value.as_str().is_some()).map(|i| self.values[i].clone())
    }

    /// Copies the string field `field`, if present, onto the attribute `key`.
    fn push_str(&self, out: &mut Vec<KeyValue>, key: &'static str, field: &str) {
        if let Some(v) = self.string(field) {
            out.push(KeyValue::new(key, v));
        }
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
        if let Some(provider) = payload.index(pi::PROVIDER).and_then(|i| payload.fields[i].value.as_str()) {
            out.push(KeyValue::new(GEN_AI_PROVIDER_NAME, genai_provider_name(provider).to_owned()));
        }
        payload.push_str(&mut out, GEN_AI_REQUEST_MODEL, pi::MODEL);
        payload.push_str(&mut out, GEN_AI_RESPONSE_MODEL, pi::RESPONSE_MODEL);
        payload.push_str(&mut out, GEN_AI_CONVERSATION_ID, pi::SESSION_ID);
        payload.push_str(&mut out, GEN_AI_TOOL_NAME, pi::TOOL_NAME);
        payload.push_str(&mut out, GEN_AI_TOOL_CALL_ID, pi::TOOL_CALL_ID);
        if name == pi::AGENT_PROMPT {
            out.push(KeyValue::new(GEN_AI_AGENT_NAME, AGENT_NAME));
        }
        // Captured content on the conventions' own keys (absent unless a sink captures it).
        payload.push_str(&mut out, GEN_AI_INPUT_MESSAGES, pi::INPUT_MESSAGES);
        payload.push_str(&mut out, GEN_AI_OUTPUT_MESSAGES, pi::OUTPUT_MESSAGES);
        payload.push_str(&mut out, GEN_AI_SYSTEM_INSTRUCTIONS, pi::SYSTEM_INSTRUCTIONS);
        payload.push_str(&mut out, GEN_AI_TOOL_DEFINITIONS, pi::TOOL_DEFINITIONS);
        if name == pi::AGENT_TOOL_CALL {
            payload.push_str(&mut out, GEN_AI_TOOL_CALL_ARGUMENTS, pi::TOOL_ARGS);
            for output in [pi::TOOL_RESULT, pi::SHELL_OUTPUT, pi::FILE_CONTENT] {
                payload.push_str(&mut out, GEN_AI_TOOL_CALL_RESULT, output);
            }
        }
        if name == pi::PROVIDER_REQUEST {
            payload.push_str(&mut out, SERVER_ADDRESS, pi::SERVER_ADDRESS);
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
        openinference_attributes(name, &payload, prompt_tokens, output, &mut out);
    }
    out
}

/// The OpenInference keys Phoenix and Arize read: span kind, model, token counts, pi's cost
/// and captured content.
fn openinference_attributes(
    name: &str,
    payload: &Converted<'_>,
    prompt_tokens: Option<i64>,
    output: Option<i64>,
    out: &mut Vec<KeyValue>,
) {
    let kind = match name {
        pi::AGENT_PROMPT => "AGENT",
        pi::PROVIDER_REQUEST => "LLM",
        pi::AGENT_TOOL_CALL => "TOOL",
        _ => "CHAIN",
    };
    out.push(KeyValue::new(OPENINFERENCE_SPAN_KIND, kind));
    if name == pi::PROVIDER_REQUEST {
        payload.push_str(out, LLM_MODEL_NAME, pi::MODEL);
        payload.push_str(out, LLM_PROVIDER, pi::PROVIDER);
        if let (Some(prompt), Some(completion)) = (prompt_tokens, output) {
            out.push(KeyValue::new(LLM_TOKEN_COUNT_PROMPT, prompt));
            out.push(KeyValue::new(LLM_TOKEN_COUNT_COMPLETION, completion));
            out.push(KeyValue::new(LLM_TOKEN_COUNT_TOTAL, prompt + completion));
        }
        // pi's own cost, where Phoenix reads it: a model it has no price for shows pi's, not $0.
        if let Some(total) = payload.float(pi::COST_TOTAL) {
            let prompt: f64 = [pi::COST_INPUT, pi::COST_CACHE_READ, pi::COST_CACHE_WRITE]
                .iter()
                .filter_map(|k| payload.float(k))
                .sum();
            out.push(KeyValue::new(LLM_COST_PROMPT, prompt));
            out.push(KeyValue::new(LLM_COST_COMPLETION, payload.float(pi::COST_OUTPUT).unwrap_or(0.0)));
            out.push(KeyValue::new(LLM_COST_TOTAL, total));
        }
    }
    payload.push_str(out, TOOL_NAME, pi::TOOL_NAME);
    payload.push_str(out, SESSION_ID, pi::SESSION_ID);
    openinference_content(name, payload, out);
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
    // `operation target`, written directly: one per span, on the export worker.
    let joined = |operation: &str, target: &str| {
        let mut out = String::with_capacity(operation.len() + 1 + target.len());
        out.push_str(operation);
        out.push(' ');
        out.push_str(target);
        std::borrow::Cow::Owned(out)
    };
    if conventions.genai() {
        match name.as_ref() {
            pi::AGENT_PROMPT => return joined(OP_INVOKE_AGENT, AGENT_NAME),
            pi::PROVIDER_REQUEST => return text(pi::MODEL).map_or(OP_CHAT.into(), |model| joined(OP_CHAT, model)),
            pi::AGENT_TOOL_CALL => {
                return text(pi::TOOL_NAME).map_or(OP_EXECUTE_TOOL.into(), |tool| joined(OP_EXECUTE_TOOL, tool));
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

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{ContentKind, ContentPolicy, EventKind, Observability, Payload, SpanId, TraceId};
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
            .safe(pi::COST_INPUT, 0.002)
            .safe(pi::COST_CACHE_READ, 0.001)
            .safe(pi::COST_OUTPUT, 0.007)
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
        assert_eq!(a[LLM_COST_PROMPT], opentelemetry::Value::F64(0.003), "pi's own cost, where Phoenix reads it");
        assert_eq!(a[LLM_COST_COMPLETION], opentelemetry::Value::F64(0.007));
        assert_eq!(a[LLM_COST_TOTAL], opentelemetry::Value::F64(0.01));
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
}
