//! Mistral (`mistral-conversations`): `POST /v1/chat/completions` streamed, as upstream's
//! `packages/ai` drives it through Mistral's SDK — content as text or chunk lists (`thinking`
//! chunks from Magistral), `prompt_mode: "reasoning"` for reasoning models given a level, tool
//! calls whose ids Mistral requires to be 9 letters or digits (others are rewritten the same
//! way every time), tool results with the tool's name, `[tool error]` marking failures.

use serde_json::{Value, json};

use super::assemble::Assembled;
use super::http::HttpConfig;
use super::sse::SseEvent;
use super::wire::{HttpProvider, Sink, Stream, Wire};
use super::{ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, Usage, joined_text};

const DEFAULT_BASE: &str = "https://api.mistral.ai";
/// The length Mistral requires of a tool call id.
const CALL_ID_LENGTH: usize = 9;

/// Mistral's wire format.
#[derive(Debug, Default)]
pub struct MistralWire;

/// The Mistral provider.
pub type MistralProvider = HttpProvider<MistralWire>;

impl MistralProvider {
    /// A provider named `name`; its key (`MISTRAL_API_KEY`) is the caller's to give, required
    /// unless a base URL is set.
    pub fn new(config: HttpConfig, name: &str) -> Result<Self, ProviderError> {
        HttpProvider::keyed(config, name, MistralWire, "MISTRAL_API_KEY")
    }
}

impl Wire for MistralWire {
    type State = StreamState;
    const BASE: &'static str = DEFAULT_BASE;

    const PATH: &'static str = "v1/chat/completions";

    fn body(&self, request: &ProviderRequest) -> Value {
        request_body(request)
    }
}

fn request_body(request: &ProviderRequest) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = &request.system_prompt {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    let mut body = json!({
        "model": request.model.id,
        "stream": true,
        "messages": messages,
        "max_tokens": request.model.max_tokens,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name, "description": t.description,
                       "parameters": t.parameters, "strict": false}})
            })
            .collect();
    }
    if request.model.reasoning && request.reasoning.as_deref().is_some_and(|l| l != "off") {
        body["prompt_mode"] = Value::String("reasoning".into());
    }
    body
}

fn push_message(messages: &mut Vec<Value>, message: &Message) {
    match message {
        Message::User(m) => {
            let parts = m.content.parts(
                |text| json!({"type": "text", "text": text}),
                |data, mime| json!({"type": "image_url", "image_url": format!("data:{mime};base64,{data}")}),
            );
            messages
                .push(json!({"role": "user", "content": parts.map_or_else(|| json!(m.content.text()), Value::from)}));
        }
        Message::Assistant(m) => {
            let mut content = Vec::new();
            let mut calls = Vec::new();
            for block in &m.content {
                match block {
                    ContentBlock::Text { text } if !text.trim().is_empty() => {
                        content.push(json!({"type": "text", "text": text}));
                    }
                    ContentBlock::Thinking { thinking, .. } if !thinking.trim().is_empty() => {
                        content.push(json!({"type": "thinking", "thinking": [{"type": "text", "text": thinking}]}));
                    }
                    ContentBlock::ToolCall { id, name, arguments } => {
                        let arguments = match arguments {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        calls.push(json!({"id": call_id(id), "type": "function",
                                          "function": {"name": name, "arguments": arguments}}));
                    }
                    _ => {}
                }
            }
            let mut out = json!({"role": "assistant"});
            if !content.is_empty() {
                out["content"] = Value::Array(content);
            }
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            if out.as_object().is_some_and(|o| o.len() > 1) {
                messages.push(out);
            }
        }
        Message::ToolResult(m) => {
            let text = joined_text(&m.content);
            let text = match (text.trim(), m.is_error) {
                ("", false) => "(no tool output)".to_owned(),
                ("", true) => "[tool error] (no tool output)".to_owned(),
                (text, true) => format!("[tool error] {text}"),
                (text, false) => text.to_owned(),
            };
            messages.push(json!({"role": "tool", "tool_call_id": call_id(&m.tool_call_id), "name": m.tool_name,
                                 "content": [{"type": "text", "text": text}]}));
        }
        other => {
            if let Some(text) = other.context_text() {
                messages.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

/// A tool call id as Mistral accepts it: 9 letters or digits. One that is already so stays;
/// any other (from another provider) becomes 9 characters of a hash of it — the same for the
/// call and its result.
fn call_id(id: &str) -> String {
    let kept: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    if kept.len() == CALL_ID_LENGTH {
        return kept;
    }
    // FNV-1a, written in base 36: stable across runs and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in id.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..CALL_ID_LENGTH)
        .map(|_| {
            let digit = DIGITS[(hash % 36) as usize] as char;
            hash /= 36;
            digit
        })
        .collect()
}

#[derive(Default)]
pub(crate) struct StreamState {
    parts: Assembled,
    /// The thinking block being streamed, if the last content was thinking.
    in_thinking: bool,
    finish_reason: Option<String>,
}

impl Stream for StreamState {
    /// Handles one `data:` payload; `Ok(true)` at `[DONE]`.
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError> {
        let data = event.data.as_str();
        if data.trim() == "[DONE]" {
            for index in 0..self.parts.calls.len() {
                sink(StreamEvent::ToolCallEnd { index });
            }
            sink(StreamEvent::Done { stop_reason: self.stop_reason() });
            return Ok(true);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| ProviderError::Stream(format!("chunk is not JSON ({e})")))?;
        if let Some(message) = chunk.get("message").and_then(Value::as_str).filter(|_| chunk.get("choices").is_none()) {
            return Err(ProviderError::Provider(message.to_owned()));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.parts.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
            self.parts.usage = Usage::tokens(count("prompt_tokens"), count("completion_tokens"), 0, 0);
        }
        let Some(choice) = chunk.pointer("/choices/0") else { return Ok(false) };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let delta = &choice["delta"];
        match &delta["content"] {
            Value::String(text) => self.text(text, sink),
            Value::Array(items) => {
                for item in items {
                    match item.get("type").and_then(Value::as_str) {
                        Some("thinking") => {
                            let parts = item.get("thinking").and_then(Value::as_array).into_iter().flatten();
                            let text: String = parts.filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
                            self.thinking(&text, sink);
                        }
                        Some("text") => self.text(item.get("text").and_then(Value::as_str).unwrap_or_default(), sink),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            self.call(call, sink)?;
        }
        Ok(false)
    }

    fn finish(self, request: &ProviderRequest, provider: &str, _: Sink<'_>) -> Result<AssistantMessage, ProviderError> {
        let stop_reason = self.stop_reason();
        Ok(self.parts.message(request, provider, stop_reason))
    }
}

impl StreamState {
    fn text(&mut self, text: &str, sink: &mut (dyn FnMut(StreamEvent) + Send)) {
        if !text.is_empty() {
            self.in_thinking = false;
            self.parts.text.push_str(text);
            sink(StreamEvent::TextDelta(text.to_owned()));
        }
    }

    fn thinking(&mut self, text: &str, sink: &mut (dyn FnMut(StreamEvent) + Send)) {
        if text.is_empty() {
            return;
        }
        if !self.in_thinking {
            self.parts.thinking.push((String::new(), None));
            self.in_thinking = true;
        }
        if let Some((buf, _)) = self.parts.thinking.last_mut() {
            buf.push_str(text);
        }
        sink(StreamEvent::ThinkingDelta(text.to_owned()));
    }

    /// A tool call delta: a new id (or index) starts a call, the same one adds arguments.
    fn call(&mut self, call: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) -> Result<(), ProviderError> {
        let position = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let id = match call.get("id").and_then(Value::as_str).filter(|id| !id.is_empty() && *id != "null") {
            Some(id) => id.to_owned(),
            None => call_id(&format!("toolcall:{position}")),
        };
        let arguments = match call.pointer("/function/arguments") {
            Some(Value::String(raw)) => raw.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        };
        let index = match self.parts.calls.iter().position(|(existing, _, _)| *existing == id) {
            Some(index) => index,
            None => {
                let index = self.parts.calls.len();
                if index > 128 {
                    return Err(ProviderError::Stream("more than 128 tool calls".into()));
                }
                let name = call.pointer("/function/name").and_then(Value::as_str).unwrap_or_default().to_owned();
                sink(StreamEvent::ToolCallStart { index, id: id.clone(), name: name.clone() });
                self.parts.calls.push((id, name, String::new()));
                index
            }
        };
        if !arguments.is_empty() {
            self.parts.calls[index].2.push_str(&arguments);
            sink(StreamEvent::ToolCallDelta { index, delta: arguments });
        }
        Ok(())
    }

    /// Upstream's mapping of Mistral's finish reasons.
    fn stop_reason(&self) -> StopReason {
        match self.finish_reason.as_deref() {
            Some("length" | "model_length") => StopReason::Length,
            Some("error") => StopReason::Error,
            Some("tool_calls") => StopReason::ToolUse,
            _ if !self.parts.calls.is_empty() => StopReason::ToolUse,
            _ => StopReason::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::call_id;

    #[test]
    fn images_are_image_url_parts() {
        let mut messages = Vec::new();
        super::push_message(&mut messages, &crate::message::user_with_image());
        assert_eq!(
            messages[0]["content"],
            serde_json::json!([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": "data:image/png;base64,AAAA"}])
        );
    }

    #[test]
    fn call_ids_are_nine_letters_or_digits_and_stable() {
        assert_eq!(call_id("D681PevKs"), "D681PevKs");
        let foreign = call_id("call_1|fc_abcdef");
        assert_eq!(foreign.len(), 9);
        assert!(foreign.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_eq!(foreign, call_id("call_1|fc_abcdef"), "the call and its result agree");
        assert_ne!(foreign, call_id("call_2|fc_abcdef"));
    }
}
