//! Google's Gemini API (`google-generative-ai`): `models/{id}:streamGenerateContent?alt=sse`
//! with the key in `x-goog-api-key`, mapped the way upstream's `packages/ai` maps it — thought
//! parts as thinking (their signatures carried back), function calls (ids made up when Gemini
//! gives none), a thinking budget or level per effort, and `usageMetadata` with cached and
//! thought tokens (thoughts are billed as output). The stream has no end marker: it ends when
//! the body does, and is complete only if a candidate said why it finished.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::assemble::Assembled;
use super::http::HttpConfig;
use super::sse::SseEvent;
use super::wire::{HttpProvider, Sink, Stream, Wire};
use super::{ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, Usage, joined_text};

const DEFAULT_BASE: &str = "https://generativelanguage.googleapis.com/v1beta";
/// What Gemini 3 accepts in place of a function call's missing thought signature.
const SKIP_THOUGHT_SIGNATURE: &str = "skip_thought_signature_validator";

/// The Gemini API's wire format.
#[derive(Debug, Default)]
pub struct GoogleWire;

/// The Gemini API provider.
pub type GoogleProvider = HttpProvider<GoogleWire>;

impl GoogleProvider {
    /// A provider named `name`; its key (`GEMINI_API_KEY`) is the caller's to give, required
    /// unless a base URL is set.
    pub fn new(config: HttpConfig, name: &str) -> Result<Self, ProviderError> {
        let mut provider = HttpProvider::keyed(config, name, GoogleWire, "GEMINI_API_KEY")?;
        provider.http.end_at_eof();
        Ok(provider)
    }
}

impl Wire for GoogleWire {
    type State = StreamState;
    const BASE: &'static str = DEFAULT_BASE;

    fn path(&self, request: &ProviderRequest) -> String {
        format!("models/{}:streamGenerateContent?alt=sse", request.model.id)
    }

    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        key.map(|key| ("x-goog-api-key", key.to_owned())).into_iter().collect()
    }

    fn body(&self, request: &ProviderRequest) -> Value {
        request_body(request)
    }
}

/// The request as upstream's SDK sends it.
fn request_body(request: &ProviderRequest) -> Value {
    let model = &request.model;
    let mut contents: Vec<Value> = Vec::new();
    for message in &request.messages {
        push_message(&mut contents, message, model);
    }
    let mut generation = json!({"maxOutputTokens": model.max_tokens});
    if model.reasoning {
        match request.reasoning.as_deref().filter(|l| *l != "off") {
            Some(level) => generation["thinkingConfig"] = thinking_config(&model.id, level),
            None => generation["thinkingConfig"] = json!({"thinkingBudget": 0}),
        }
    }
    let mut body = json!({"contents": contents, "generationConfig": generation});
    if let Some(system) = &request.system_prompt {
        body["systemInstruction"] = json!({"parts": [{"text": system}]});
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
            .collect();
        body["tools"] = json!([{"functionDeclarations": declarations}]);
    }
    body
}

/// Upstream's thinking settings per effort: a level for Gemini 3, a token budget for 2.5
/// (`-1`: dynamic for the others).
fn thinking_config(id: &str, level: &str) -> Value {
    let effort = if level == "xhigh" { "high" } else { level };
    let id = id.to_lowercase();
    let gemini3 = |kind: &str| id.contains("gemini-3") && id.contains(kind);
    if gemini3("-pro") {
        let level = if matches!(effort, "minimal" | "low") { "LOW" } else { "HIGH" };
        return json!({"includeThoughts": true, "thinkingLevel": level});
    }
    if gemini3("-flash") {
        return json!({"includeThoughts": true, "thinkingLevel": effort.to_uppercase()});
    }
    let budget: i64 = match (id.contains("2.5-pro"), id.contains("2.5-flash"), effort) {
        (true, _, "high") => 32_768,
        (_, true, "high") => 24_576,
        (true, _, _) | (_, true, _) => match effort {
            "minimal" => 128,
            "low" => 2048,
            _ => 8192,
        },
        _ => -1,
    };
    json!({"includeThoughts": true, "thinkingBudget": budget})
}

/// One conversation message as Gemini `contents` (tool results of one turn share one content).
fn push_message(contents: &mut Vec<Value>, message: &Message, model: &crate::model::ModelInfo) {
    match message {
        Message::User(m) => {
            let parts = m.content.parts(
                |text| json!({"text": text}),
                |data, mime| json!({"inlineData": {"mimeType": mime, "data": data}}),
            );
            contents.push(
                json!({"role": "user", "parts": parts.unwrap_or_else(|| vec![json!({"text": m.content.text()})])}),
            );
        }
        Message::Assistant(m) => {
            let same_model = m.provider == model.provider && m.model == model.id;
            let mut parts = Vec::new();
            for block in &m.content {
                match block {
                    ContentBlock::Text { text } if !text.trim().is_empty() => parts.push(json!({"text": text})),
                    ContentBlock::Thinking { thinking, signature } if !thinking.trim().is_empty() => {
                        let mut part = json!({"text": thinking});
                        if same_model {
                            part["thought"] = Value::Bool(true);
                            if let Some(signature) = signature {
                                part["thoughtSignature"] = Value::String(signature.clone());
                            }
                        }
                        parts.push(part);
                    }
                    ContentBlock::ToolCall { name, arguments, .. } => {
                        let mut part = json!({"functionCall": {"name": name, "args": arguments}});
                        if model.id.to_lowercase().contains("gemini-3") {
                            part["thoughtSignature"] = Value::String(SKIP_THOUGHT_SIGNATURE.into());
                        }
                        parts.push(part);
                    }
                    _ => {}
                }
            }
            if !parts.is_empty() {
                contents.push(json!({"role": "model", "parts": parts}));
            }
        }
        Message::ToolResult(m) => {
            let text = joined_text(&m.content);
            let response = if m.is_error { json!({"error": text}) } else { json!({"output": text}) };
            let part = json!({"functionResponse": {"name": m.tool_name, "response": response}});
            match contents.last_mut() {
                Some(last) if last["role"] == "user" && last["parts"][0].get("functionResponse").is_some() => {
                    if let Some(parts) = last["parts"].as_array_mut() {
                        parts.push(part);
                    }
                }
                _ => contents.push(json!({"role": "user", "parts": [part]})),
            }
        }
        other => {
            if let Some(text) = other.context_text() {
                contents.push(json!({"role": "user", "parts": [{"text": text}]}));
            }
        }
    }
}

/// Makes up a call id where Gemini gives none (upstream: `NAME_MILLIS_COUNTER`).
fn call_id(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{name}_{}_{}", crate::time::now_millis(), COUNTER.fetch_add(1, Ordering::Relaxed) + 1)
}

#[derive(Default)]
pub(crate) struct StreamState {
    parts: Assembled,
    /// The kind of the block being streamed: `Some(true)` thinking, `Some(false)` text.
    in_thinking: Option<bool>,
    finish_reason: Option<String>,
}

impl Stream for StreamState {
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError> {
        self.on_data(&event.data, sink).map(|()| false)
    }

    /// The body has ended: complete only if a candidate said why it finished.
    fn finish(
        self,
        request: &ProviderRequest,
        provider: &str,
        sink: Sink<'_>,
    ) -> Result<AssistantMessage, ProviderError> {
        let Some(reason) = self.finish_reason.as_deref() else {
            return Err(ProviderError::Stream("stream ended before a candidate finished".into()));
        };
        let stop_reason = self.stop_reason(reason);
        for index in 0..self.parts.calls.len() {
            sink(StreamEvent::ToolCallEnd { index });
        }
        sink(StreamEvent::Done { stop_reason });
        Ok(self.parts.message(request, provider, stop_reason))
    }
}

impl StreamState {
    /// Handles one chunk (a `GenerateContentResponse`).
    fn on_data(&mut self, data: &str, sink: &mut (dyn FnMut(StreamEvent) + Send)) -> Result<(), ProviderError> {
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::Stream(format!("chunk is not JSON ({e})")))?;
        if let Some(error) = chunk.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            return Err(ProviderError::Provider(message.to_owned()));
        }
        let candidate = chunk.pointer("/candidates/0");
        let parts = candidate.and_then(|c| c.pointer("/content/parts")).and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part, sink)?;
        }
        if let Some(reason) = candidate.and_then(|c| c.get("finishReason")).and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        if let Some(version) = chunk.get("modelVersion").and_then(Value::as_str) {
            self.parts.model = Some(version.to_owned());
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            let cached = count("cachedContentTokenCount");
            let output = count("candidatesTokenCount") + count("thoughtsTokenCount");
            // `promptTokenCount` includes the cached tokens: the fresh input is the rest.
            self.parts.usage = Usage::tokens(count("promptTokenCount").saturating_sub(cached), output, cached, 0);
        }
        Ok(())
    }

    fn part(&mut self, part: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) -> Result<(), ProviderError> {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
            let signature = part.get("thoughtSignature").and_then(Value::as_str).filter(|s| !s.is_empty());
            if thought {
                if self.in_thinking != Some(true) {
                    self.parts.thinking.push((String::new(), None));
                }
                if let Some((buf, sig)) = self.parts.thinking.last_mut() {
                    buf.push_str(text);
                    if let Some(signature) = signature {
                        *sig = Some(signature.to_owned());
                    }
                }
                sink(StreamEvent::ThinkingDelta(text.to_owned()));
            } else {
                self.parts.text.push_str(text);
                sink(StreamEvent::TextDelta(text.to_owned()));
            }
            self.in_thinking = Some(thought);
        }
        if let Some(call) = part.get("functionCall") {
            self.in_thinking = None;
            let name = call.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let given = call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
            let id = match given {
                Some(id) if !self.parts.calls.iter().any(|(existing, _, _)| existing == id) => id.to_owned(),
                _ => call_id(&name),
            };
            let index = self.parts.calls.len();
            if index > 128 {
                return Err(ProviderError::Stream("more than 128 function calls".into()));
            }
            let arguments = call.get("args").cloned().unwrap_or_else(|| json!({})).to_string();
            sink(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
            sink(StreamEvent::ToolCallDelta { index, delta: arguments.clone() });
            self.parts.calls.push((id, name, arguments));
        }
        Ok(())
    }

    /// Upstream's mapping: `STOP` stops (a tool use when there were calls), `MAX_TOKENS` is the
    /// length, anything else (safety, recitation, a malformed call…) an error.
    fn stop_reason(&self, reason: &str) -> StopReason {
        let mapped = match reason {
            "STOP" => StopReason::Stop,
            "MAX_TOKENS" => StopReason::Length,
            _ => StopReason::Error,
        };
        if self.parts.calls.is_empty() { mapped } else { StopReason::ToolUse }
    }
}

#[cfg(test)]
mod tests {
    use super::thinking_config;
    use serde_json::json;

    #[test]
    fn images_are_inline_data_parts() {
        let mut contents = Vec::new();
        let registry = crate::model::Registry::builtin();
        let model = registry.find("faux", "faux-1").unwrap();
        super::push_message(&mut contents, &crate::message::user_with_image(), model);
        assert_eq!(
            contents[0]["parts"],
            json!([{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}])
        );
    }

    #[test]
    fn thinking_follows_upstreams_budgets_and_levels() {
        assert_eq!(
            thinking_config("gemini-2.5-pro", "high"),
            json!({"includeThoughts": true, "thinkingBudget": 32768})
        );
        assert_eq!(thinking_config("gemini-2.5-flash", "high")["thinkingBudget"], 24576);
        assert_eq!(thinking_config("gemini-2.5-flash", "low")["thinkingBudget"], 2048);
        assert_eq!(thinking_config("gemini-3-pro-preview", "minimal")["thinkingLevel"], "LOW");
        assert_eq!(thinking_config("gemini-3-flash-preview", "medium")["thinkingLevel"], "MEDIUM");
        assert_eq!(thinking_config("gemini-2.0-flash-thinking", "medium")["thinkingBudget"], -1);
    }
}
