//! Anthropic Messages (streaming), with tool use and prompt-cache token accounting.

use serde_json::{Value, json};

use super::assemble::answer;
use super::assemble::parse_arguments;
use super::http::HttpConfig;
use super::sse::SseEvent;
use super::wire::{HttpProvider, Sink, Stream, Wire};
use super::{ProviderError, ProviderRequest, StreamEvent};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, Usage, joined_text};

/// Env var holding the Anthropic key.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";
const DEFAULT_BASE: &str = "https://api.anthropic.com";
const API_VERSION: &str = "2023-06-01";

/// Anthropic Messages' wire format.
#[derive(Debug, Default)]
pub struct AnthropicWire;

/// The Anthropic Messages provider (Anthropic itself, or a service speaking its API).
pub type AnthropicProvider = HttpProvider<AnthropicWire>;

impl AnthropicProvider {
    /// A provider named `name`. The key comes from the config, or for `anthropic` itself from
    /// `ANTHROPIC_API_KEY`; one is required unless a base URL is set. Another service's key is
    /// its caller's to give (an Anthropic key never goes to another server).
    pub fn new(mut config: HttpConfig, name: &str) -> Result<Self, ProviderError> {
        if config.api_key.is_none() && name == "anthropic" {
            config.api_key = std::env::var(ANTHROPIC_API_KEY).ok().filter(|k| !k.is_empty());
        }
        HttpProvider::keyed(config, name, AnthropicWire, ANTHROPIC_API_KEY)
    }
}

impl Wire for AnthropicWire {
    type State = StreamState;
    const BASE: &'static str = DEFAULT_BASE;

    const PATH: &'static str = "v1/messages";

    fn headers(&self, key: Option<&str>) -> Vec<(&'static str, String)> {
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        headers.extend(key.map(|key| ("x-api-key", key.to_owned())));
        headers
    }

    fn default_headers(&self) -> Vec<(String, String)> {
        vec![("anthropic-version".to_owned(), API_VERSION.to_owned())]
    }

    fn body(&self, request: &ProviderRequest) -> Value {
        request_body(request)
    }
}

/// A user message's content: its text, or text and base64 image blocks.
fn user_content(content: &crate::message::UserContent) -> Value {
    let parts = content.parts(
        |text| json!({"type": "text", "text": text}),
        |data, mime| json!({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}),
    );
    parts.map_or_else(|| json!(content.text()), Value::from)
}

fn request_body(request: &ProviderRequest) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(m) => messages.push(json!({"role": "user", "content": user_content(&m.content)})),
            Message::Assistant(m) => {
                let mut blocks = Vec::new();
                let text = m.text();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for (id, name, args) in m.tool_calls() {
                    let input = if args.is_object() { args } else { json!({}) };
                    blocks.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                }
                if !blocks.is_empty() {
                    messages.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Message::ToolResult(m) => {
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id,
                    "content": joined_text(&m.content),
                    "is_error": m.is_error,
                });
                // Consecutive tool results travel in one user message.
                match messages.last_mut() {
                    Some(last) if last["role"] == "user" && last["content"].is_array() => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => messages.push(json!({"role": "user", "content": [block]})),
                }
            }
            other => {
                if let Some(text) = other.context_text() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
        }
    }
    let mut body = json!({
        "model": request.model.id,
        "max_tokens": request.model.max_tokens,
        "messages": messages,
        "stream": true,
    });
    if let Some(system) = &request.system_prompt {
        body["system"] = Value::String(system.clone());
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

enum Block {
    Text(String),
    Thinking(String),
    Tool { id: String, name: String, json: String, index: usize },
}

#[derive(Default)]
pub(crate) struct StreamState {
    blocks: Vec<(u64, Block)>,
    tool_count: usize,
    usage: Usage,
    stop_reason: Option<String>,
    model: Option<String>,
}

impl Stream for StreamState {
    fn on_event(&mut self, event: SseEvent, sink: Sink<'_>) -> Result<bool, ProviderError> {
        self.handle(&event.event, &event.data, sink)
    }

    fn finish(self, request: &ProviderRequest, provider: &str, _: Sink<'_>) -> Result<AssistantMessage, ProviderError> {
        let stop_reason = self.stop_reason();
        let content = self
            .blocks
            .into_iter()
            .map(|(_, block)| match block {
                Block::Text(text) => ContentBlock::Text { text },
                Block::Thinking(thinking) => ContentBlock::Thinking { thinking, signature: None },
                Block::Tool { id, name, json, .. } => {
                    ContentBlock::ToolCall { id, name, arguments: parse_arguments(&json) }
                }
            })
            .collect();
        Ok(answer(request, provider, content, (self.model, self.usage, stop_reason)))
    }
}

impl StreamState {
    fn handle(
        &mut self,
        event: &str,
        data: &str,
        sink: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<bool, ProviderError> {
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("{event} event is not JSON ({e})")))?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or(event);
        let u64_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.model = value.pointer("/message/model").and_then(Value::as_str).map(str::to_owned);
                self.usage = Usage::tokens(
                    u64_at(&value, "/message/usage/input_tokens"),
                    u64_at(&value, "/message/usage/output_tokens"),
                    u64_at(&value, "/message/usage/cache_read_input_tokens"),
                    u64_at(&value, "/message/usage/cache_creation_input_tokens"),
                );
                sink(StreamEvent::Start);
            }
            "content_block_start" => self.block_start(&value, sink),
            "content_block_delta" => self.block_delta(&value, sink)?,
            "content_block_stop" => {
                let index = u64_at(&value, "/index");
                if let Ok(Block::Tool { index, .. }) = self.block(index) {
                    let index = *index;
                    sink(StreamEvent::ToolCallEnd { index });
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(output) = value.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage = Usage::tokens(self.usage.input, output, self.usage.cache_read, self.usage.cache_write);
                }
            }
            "message_stop" => {
                sink(StreamEvent::Done { stop_reason: self.stop_reason() });
                return Ok(true);
            }
            "error" => {
                let message = value.pointer("/error/message").and_then(Value::as_str).unwrap_or("unknown error");
                return Err(ProviderError::Provider(message.to_owned()));
            }
            _ => {}
        }
        Ok(false)
    }

    fn block(&mut self, index: u64) -> Result<&mut Block, ProviderError> {
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, b)| b)
            .ok_or_else(|| ProviderError::Stream(format!("delta for unknown content block {index}")))
    }

    /// `content_block_start`: a text, thinking or tool-use block (others carry nothing replayed).
    fn block_start(&mut self, value: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) {
        let index = value.pointer("/index").and_then(Value::as_u64).unwrap_or(0);
        let block = value.get("content_block").cloned().unwrap_or(Value::Null);
        let new = match block.get("type").and_then(Value::as_str) {
            Some("text") => Block::Text(String::new()),
            Some("thinking") => Block::Thinking(String::new()),
            Some("tool_use") => {
                let id = block.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                let name = block.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                let tool_index = self.tool_count;
                self.tool_count += 1;
                sink(StreamEvent::ToolCallStart { index: tool_index, id: id.clone(), name: name.clone() });
                Block::Tool { id, name, json: String::new(), index: tool_index }
            }
            // Redacted thinking and future block types carry nothing we replay.
            _ => return,
        };
        self.blocks.push((index, new));
    }

    /// `content_block_delta`: more text, thinking or tool-call JSON for an open block.
    fn block_delta(&mut self, value: &Value, sink: &mut (dyn FnMut(StreamEvent) + Send)) -> Result<(), ProviderError> {
        let index = value.pointer("/index").and_then(Value::as_u64).unwrap_or(0);
        let delta = value.get("delta").cloned().unwrap_or(Value::Null);
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        match (delta.get("type").and_then(Value::as_str), self.block(index)?) {
            (Some("text_delta"), Block::Text(buf)) => {
                let t = text("text");
                buf.push_str(&t);
                sink(StreamEvent::TextDelta(t));
            }
            (Some("thinking_delta"), Block::Thinking(buf)) => {
                let t = text("thinking");
                buf.push_str(&t);
                sink(StreamEvent::ThinkingDelta(t));
            }
            (Some("input_json_delta"), Block::Tool { json, index, .. }) => {
                let t = text("partial_json");
                json.push_str(&t);
                sink(StreamEvent::ToolCallDelta { index: *index, delta: t });
            }
            (Some("signature_delta"), _) => {}
            (other, _) => {
                return Err(ProviderError::Stream(format!("delta {other:?} does not fit content block {index}")));
            }
        }
        Ok(())
    }

    fn stop_reason(&self) -> StopReason {
        match self.stop_reason.as_deref() {
            Some("max_tokens") => StopReason::Length,
            Some("tool_use") => StopReason::ToolUse,
            _ if self.tool_count > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::message::{ContentBlock, UserContent};

    #[test]
    fn images_are_base64_image_blocks_and_text_stays_a_string() {
        let blocks = UserContent::Blocks(vec![
            ContentBlock::text("look"),
            ContentBlock::Image { data: "AAAA".into(), mime_type: "image/png".into() },
        ]);
        assert_eq!(
            super::user_content(&blocks),
            serde_json::json!([{"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}])
        );
        assert_eq!(super::user_content(&UserContent::Text("hi".into())), "hi");
    }
}
