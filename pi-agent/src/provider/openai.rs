//! OpenAI Chat Completions (streaming), also for OpenAI-compatible servers (vLLM, llama.cpp,
//! Ollama, OpenRouter, LiteLLM): set the base URL.

use serde_json::{Value, json};

use super::assemble::Assembled;
use super::compat::Compat;
use super::http::HttpConfig;
use super::sse::SseEvent;
use super::wire::{HttpProvider, Sink, Stream, Wire};
use super::{ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, Message, StopReason, Usage, joined_text};

/// Env var holding the OpenAI key.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
const DEFAULT_BASE: &str = "https://api.openai.com/v1";

/// OpenAI Chat Completions' wire format.
#[derive(Debug, Default)]
pub struct OpenAiWire;

/// The OpenAI Chat Completions provider (OpenAI, or an OpenAI-compatible service).
pub type OpenAiProvider = HttpProvider<OpenAiWire>;

impl OpenAiProvider {
    /// A provider named `name` (`openai`, or the name of an OpenAI-compatible service). The key
    /// comes from the config, or for `openai` itself from `OPENAI_API_KEY` (required there
    /// unless a base URL is set); another service's key is its caller's to give.
    pub fn new(mut config: HttpConfig, name: &str) -> Result<Self, ProviderError> {
        if name != "openai" {
            return HttpProvider::of(config, name, OpenAiWire);
        }
        if config.api_key.is_none() {
            config.api_key = std::env::var(OPENAI_API_KEY).ok().filter(|k| !k.is_empty());
        }
        HttpProvider::keyed(config, name, OpenAiWire, OPENAI_API_KEY)
    }
}

impl Wire for OpenAiWire {
    type State = StreamState;
    const BASE: &'static str = DEFAULT_BASE;

    const PATH: &'static str = "chat/completions";

    fn body(&self, request: &ProviderRequest) -> Value {
        request_body(request)
    }
}

/// The request as upstream builds it for this model's service ([`Compat`]). A model no catalogue
/// knows (a local server) gets the plainest request every such server takes: `max_tokens`, no
/// `store`, no `strict`.
fn request_body(request: &ProviderRequest) -> Value {
    let model = &request.model;
    let base = model.base_url.as_deref().unwrap_or(DEFAULT_BASE);
    let mut compat = Compat::of(&model.provider, base, &model.id, model.compat.as_ref());
    if model.catalogued == crate::model::Catalogued::Neither && model.compat.is_none() {
        compat.supports_store = false;
        compat.supports_strict_mode = false;
        compat.max_tokens_field = "max_tokens".into();
    }
    let mut messages = Vec::new();
    if let Some(system) = &request.system_prompt {
        let role = if model.reasoning && compat.supports_developer_role { "developer" } else { "system" };
        messages.push(json!({"role": role, "content": system}));
    }
    let mut after_tool_result = false;
    for message in &request.messages {
        if compat.requires_assistant_after_tool_result && after_tool_result && matches!(message, Message::User(_)) {
            messages.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        after_tool_result = matches!(message, Message::ToolResult(_));
        push_message(&mut messages, message, &compat);
    }
    let mut body = json!({"model": model.id, "messages": messages, "stream": true});
    if compat.supports_usage_in_streaming {
        body["stream_options"] = json!({"include_usage": true});
    }
    if compat.supports_store {
        body["store"] = Value::Bool(false);
    }
    body[compat.max_tokens_field.as_str()] = json!(model.max_tokens);
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                let mut function = json!({"name": t.name, "description": t.description, "parameters": t.parameters});
                if compat.supports_strict_mode {
                    function["strict"] = Value::Bool(false);
                }
                json!({"type": "function", "function": function})
            })
            .collect();
    }
    let level = request.reasoning.as_deref().filter(|l| *l != "off");
    match compat.thinking_format.as_str() {
        "zai" | "qwen" if model.reasoning => body["enable_thinking"] = Value::Bool(level.is_some()),
        "qwen-chat-template" if model.reasoning => {
            body["chat_template_kwargs"] = json!({"enable_thinking": level.is_some()});
        }
        _ => {
            if let Some(level) = level.filter(|_| compat.supports_reasoning_effort) {
                let effort = compat.reasoning_effort_map.get(level).map_or(level, String::as_str);
                body["reasoning_effort"] = Value::String(effort.to_owned());
            }
        }
    }
    if let Some(routing) = compat.open_router_routing.as_ref().filter(|_| base.contains("openrouter.ai")) {
        body["provider"] = routing.clone();
    }
    body
}

/// One conversation message as Chat Completions messages.
fn push_message(messages: &mut Vec<Value>, message: &Message, compat: &Compat) {
    match message {
        Message::User(m) => {
            let parts = m.content.parts(
                |text| json!({"type": "text", "text": text}),
                |data, mime| json!({"type": "image_url", "image_url": {"url": format!("data:{mime};base64,{data}")}}),
            );
            messages
                .push(json!({"role": "user", "content": parts.map_or_else(|| json!(m.content.text()), Value::from)}));
        }
        Message::Assistant(m) => {
            let calls: Vec<Value> = m
                .tool_calls()
                .into_iter()
                .map(|(id, name, args)| {
                    let arguments = match args {
                        Value::String(raw) => raw,
                        other => other.to_string(),
                    };
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            let text = m.text();
            let mut out = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { Value::String(text) }});
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            messages.push(out);
        }
        Message::ToolResult(m) => {
            let mut out = json!({"role": "tool", "tool_call_id": m.tool_call_id, "content": joined_text(&m.content)});
            if compat.requires_tool_result_name {
                out["name"] = Value::String(m.tool_name.clone());
            }
            messages.push(out);
        }
        other => {
            if let Some(text) = other.context_text() {
                messages.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

#[derive(Default)]
struct ToolCallState {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Default)]
pub(crate) struct StreamState {
    text: String,
    thinking: String,
    calls: Vec<ToolCallState>,
    finish_reason: Option<String>,
    usage: Usage,
    model: Option<String>,
    done: bool,
}

impl Stream for StreamState {
    /// Handles one `data:` payload; `Ok(true)` at `[DONE]`.
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError> {
        let data = event.data.as_str();
        if data.trim() == "[DONE]" {
            self.done = true;
            for index in 0..self.calls.len() {
                sink(StreamEvent::ToolCallEnd { index });
            }
            sink(StreamEvent::Done { stop_reason: self.stop_reason() });
            return Ok(true);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::Stream(format!("chunk is not JSON ({e})")))?;
        if let Some(error) = chunk.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            return Err(ProviderError::Provider(message.to_owned()));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let prompt = usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
            let completion = usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0);
            let cached = usage.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage::tokens(prompt.saturating_sub(cached), completion, cached, 0);
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else { return Ok(false) };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else { return Ok(false) };
        if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            self.text.push_str(text);
            sink(StreamEvent::TextDelta(text.to_owned()));
        }
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta.get(key).and_then(Value::as_str).filter(|t| !t.is_empty()) {
                self.thinking.push_str(text);
                sink(StreamEvent::ThinkingDelta(text.to_owned()));
            }
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
            if index > self.calls.len() || index > 128 {
                return Err(ProviderError::Stream(format!("tool call index {index} out of order")));
            }
            if index == self.calls.len() {
                let id = call.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned();
                sink(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
                self.calls.push(ToolCallState { id, name, arguments: String::new() });
            }
            if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                self.calls[index].arguments.push_str(args);
                sink(StreamEvent::ToolCallDelta { index, delta: args.to_owned() });
            }
        }
        Ok(false)
    }

    fn finish(self, request: &ProviderRequest, provider: &str, _: Sink<'_>) -> Result<AssistantMessage, ProviderError> {
        let stop_reason = self.stop_reason();
        let calls = self.calls.into_iter().map(|call| (call.id, call.name, call.arguments)).collect();
        let assembled = Assembled {
            thinking: vec![(self.thinking, None)],
            text: self.text,
            calls,
            model: self.model,
            usage: self.usage,
        };
        Ok(assembled.message(request, provider, stop_reason))
    }
}

impl StreamState {
    fn stop_reason(&self) -> StopReason {
        match self.finish_reason.as_deref() {
            Some("length") => StopReason::Length,
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            Some("tool_calls") => StopReason::ToolUse,
            _ => StopReason::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Api, ModelInfo, Registry};

    fn body_for(model: ModelInfo) -> Value {
        let request = ProviderRequest {
            model,
            system_prompt: Some("sys".into()),
            messages: vec![Message::user("hi")],
            tools: vec![super::super::ToolSpec {
                name: "read".into(),
                description: "Read a file".into(),
                parameters: serde_json::json!({"type": "object"}),
            }],
            reasoning: Some("high".into()),
            session_id: None,
            control: Default::default(),
            call_kind: Default::default(),
        };
        request_body(&request)
    }

    #[test]
    fn each_service_gets_the_request_upstream_sends_it() {
        let registry = Registry::builtin();
        let grok = body_for(
            registry
                .find("xai", "grok-4")
                .cloned()
                .unwrap_or_else(|| ModelInfo::unknown("xai", "x", Api::OpenAiCompletions)),
        );
        assert_eq!(grok["messages"][0]["role"], "system", "xAI takes no developer role");
        assert!(grok.get("store").is_none() && grok.get("reasoning_effort").is_none());
        assert_eq!(grok["max_completion_tokens"], 64000);
        assert_eq!(grok["tools"][0]["function"]["strict"], false);
        let local = body_for(ModelInfo::unknown("openai", "llama-local", Api::OpenAiCompletions));
        assert_eq!(local["max_tokens"], 8192, "a local server gets max_tokens");
        assert!(local.get("store").is_none() && local["tools"][0]["function"].get("strict").is_none());
        assert_eq!(local["reasoning_effort"], "high");
    }
}
