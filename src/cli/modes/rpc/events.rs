//! Agent events as upstream's RPC protocol writes them.

use std::collections::HashMap;

use pi_agent::events::{AgentEvent, Delta};
use pi_agent::message::Message;
use serde_json::{Value, json};

/// Agent events in upstream's RPC shapes: `message_start`/`message_end` carry the message,
/// `message_update` an `assistantMessageEvent` delta, `tool_execution_end` the result,
/// `turn_end` the turn's assistant message and tool results, `agent_end` the prompt's
/// messages. Events upstream does not have (`session_start`, `queue_update`, `agent_settled`,
/// `session_compact`, `session_tree`, `session_shutdown`) are written in pi's own shape.
#[derive(Default)]
pub struct Encoder {
    run_messages: Vec<Value>,
    turn_message: Value,
    turn_results: Vec<Value>,
    content_index: Option<usize>,
    last_delta: Option<&'static str>,
    tool_output: HashMap<String, String>,
    tool_end: Option<(String, String, bool)>,
}

impl Encoder {
    pub fn encode(&mut self, event: AgentEvent) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            AgentEvent::AgentStart => {
                self.run_messages.clear();
                out.push(json!({"type": "agent_start"}));
            }
            AgentEvent::TurnStart { turn_index } => {
                self.turn_message = Value::Null;
                self.turn_results.clear();
                out.push(json!({"type": "turn_start", "turnIndex": turn_index}));
            }
            AgentEvent::MessageStart { role } => {
                // Other roles are final at once: their start is written with their end.
                if role == "assistant" {
                    self.content_index = None;
                    self.last_delta = None;
                    out.push(json!({"type": "message_start", "message": {"role": "assistant", "content": []}}));
                }
            }
            AgentEvent::MessageUpdate { delta } => out.push(self.delta(delta)),
            AgentEvent::MessageEnd { message } => {
                let value = serde_json::to_value(&message).unwrap_or(Value::Null);
                self.run_messages.push(value.clone());
                match &message {
                    Message::Assistant(_) => self.turn_message = value.clone(),
                    Message::ToolResult(result) => {
                        self.turn_results.push(value.clone());
                        if let Some((id, name, is_error)) = self.tool_end.take() {
                            let output = json!({"content": result.content, "details": result.details});
                            out.push(json!({"type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": output, "isError": is_error}));
                        }
                    }
                    _ => {}
                }
                if !matches!(message, Message::Assistant(_)) {
                    out.push(json!({"type": "message_start", "message": value}));
                }
                out.push(json!({"type": "message_end", "message": value}));
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, output } => {
                let so_far = self.tool_output.entry(tool_call_id.clone()).or_default();
                so_far.push_str(&output);
                out.push(json!({
                    "type": "tool_execution_update",
                    "toolCallId": tool_call_id,
                    "toolName": tool_name,
                    "partialResult": {"content": [{"type": "text", "text": so_far}]},
                }));
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, is_error } => {
                // Written with its result, which the tool result message brings next.
                self.tool_output.remove(&tool_call_id);
                self.tool_end = Some((tool_call_id, tool_name, is_error));
            }
            AgentEvent::TurnEnd { turn_index } => out.push(json!({
                "type": "turn_end",
                "turnIndex": turn_index,
                "message": self.turn_message,
                "toolResults": self.turn_results,
            })),
            AgentEvent::AgentEnd { stop_reason, usage } => out.push(json!({
                "type": "agent_end",
                "messages": std::mem::take(&mut self.run_messages),
                "stopReason": stop_reason,
                "usage": usage,
            })),
            AgentEvent::ExtensionError { extension, hook, error } => {
                out.push(json!({"type": "extension_error", "extensionPath": extension, "event": hook, "error": error}));
            }
            other => out.push(serde_json::to_value(&other).unwrap_or(Value::Null)),
        }
        out
    }

    /// A streamed fragment as upstream's `assistantMessageEvent`.
    fn delta(&mut self, delta: Delta) -> Value {
        let event = match delta {
            Delta::Text { text } => {
                json!({"type": "text_delta", "contentIndex": self.block("text"), "delta": text})
            }
            Delta::Thinking { text } => {
                json!({"type": "thinking_delta", "contentIndex": self.block("thinking"), "delta": text})
            }
            Delta::ToolCallStart { tool_call_id, tool_name } => json!({
                "type": "toolcall_start",
                "contentIndex": self.block("toolcall"),
                "toolCall": {"id": tool_call_id, "name": tool_name},
            }),
            Delta::ToolCallArgs { text, .. } => {
                json!({"type": "toolcall_delta", "contentIndex": self.content_index.unwrap_or(0), "delta": text})
            }
        };
        json!({"type": "message_update", "assistantMessageEvent": event})
    }

    /// The content index of a fragment of `kind`: a new block when the kind changes (every tool
    /// call is a block of its own).
    fn block(&mut self, kind: &'static str) -> usize {
        if self.last_delta != Some(kind) || kind == "toolcall" {
            self.content_index = Some(self.content_index.map_or(0, |i| i + 1));
            self.last_delta = Some(kind);
        }
        self.content_index.unwrap_or(0)
    }
}
