//! What a streamed response assembles into, shared by the HTTP providers that collect thinking,
//! text and tool calls separately: the assistant message, in upstream's block order.

use serde_json::{Value, json};

use super::ProviderRequest;
use crate::message::{AssistantMessage, ContentBlock, StopReason, Usage};

/// The parts of one response as they were streamed.
#[derive(Debug, Default)]
pub(crate) struct Assembled {
    /// Reasoning text, each with what the provider needs back next turn (its signature).
    pub thinking: Vec<(String, Option<String>)>,
    /// Answer text.
    pub text: String,
    /// Tool calls: id, name and the arguments' JSON text as streamed.
    pub calls: Vec<(String, String, String)>,
    /// The model the response names (else the requested id is recorded).
    pub model: Option<String>,
    /// Token usage (not yet priced).
    pub usage: Usage,
}

impl Assembled {
    /// The assistant message `provider` answered `request` with: thinking, then text, then tool
    /// calls (arguments parsed; text that is not a JSON object kept for the tool to report).
    pub fn message(self, request: &ProviderRequest, provider: &str, stop_reason: StopReason) -> AssistantMessage {
        let mut content = Vec::new();
        for (thinking, signature) in self.thinking.into_iter().filter(|(t, s)| !t.is_empty() || s.is_some()) {
            content.push(ContentBlock::Thinking { thinking, signature });
        }
        if !self.text.is_empty() {
            content.push(ContentBlock::Text { text: self.text });
        }
        for (id, name, arguments) in self.calls {
            content.push(ContentBlock::ToolCall { id, name, arguments: parse_arguments(&arguments) });
        }
        answer(request, provider, content, (self.model, self.usage, stop_reason))
    }
}

/// The assistant message `provider` answered `request` with: `content`, and the model the
/// response named (else the requested id), its usage and why it stopped.
pub(crate) fn answer(
    request: &ProviderRequest,
    provider: &str,
    content: Vec<ContentBlock>,
    (model, usage, stop_reason): (Option<String>, Usage, StopReason),
) -> AssistantMessage {
    AssistantMessage {
        content,
        api: request.model.api.as_str().to_owned(),
        provider: provider.to_owned(),
        model: model.unwrap_or_else(|| request.model.id.clone()),
        usage,
        stop_reason,
        error_message: None,
        timestamp: crate::time::now_millis(),
    }
}

/// Tool arguments as JSON; text that is not a JSON object is kept as a string so the tool can
/// report the problem to the model instead of the whole request failing.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(raw.to_owned()),
    }
}
