//! Agent events as upstream's RPC protocol writes them.

use std::collections::HashMap;

use pi_agent::events::{AgentEvent, Delta};
use pi_agent::message::Message;
use serde_json::{Value, json};

use super::protocol::{AssistantMessageEvent, CompactionResult, Event, ToolCallStart};

/// Turns agent events into upstream's RPC [`Event`]s: `message_start`/`message_end` carry the
/// message, `message_update` an `assistantMessageEvent` delta, `tool_execution_end` the result,
/// `turn_end` the turn's assistant message and tool results, `agent_end` the prompt's messages.
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
    /// The lines `event` becomes (none while a tool's result is awaited, two for a message that
    /// is final at once).
    pub fn encode(&mut self, event: AgentEvent) -> Vec<Event> {
        let mut out = Vec::new();
        match event {
            AgentEvent::AgentStart => {
                self.run_messages.clear();
                out.push(Event::AgentStart);
            }
            AgentEvent::TurnStart { turn_index } => {
                self.turn_message = Value::Null;
                self.turn_results.clear();
                out.push(Event::TurnStart { turn_index });
            }
            AgentEvent::MessageStart { role } => {
                // Other roles are final at once: their start is written with their end.
                if role == "assistant" {
                    self.content_index = None;
                    self.last_delta = None;
                    out.push(Event::MessageStart { message: json!({"role": "assistant", "content": []}) });
                }
            }
            AgentEvent::MessageUpdate { delta } => {
                out.push(Event::MessageUpdate { assistant_message_event: self.delta(delta) });
            }
            AgentEvent::MessageEnd { message } => self.message_end(&message, &mut out),
            AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, output } => {
                let so_far = self.tool_output.entry(tool_call_id.clone()).or_default();
                so_far.push_str(&output);
                let partial_result = json!({"content": [{"type": "text", "text": so_far}]});
                out.push(Event::ToolExecutionUpdate { tool_call_id, tool_name, partial_result });
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, is_error } => {
                // Written with its result, which the tool result message brings next.
                self.tool_output.remove(&tool_call_id);
                self.tool_end = Some((tool_call_id, tool_name, is_error));
            }
            AgentEvent::TurnEnd { turn_index } => out.push(Event::TurnEnd {
                turn_index,
                message: self.turn_message.clone(),
                tool_results: self.turn_results.clone(),
            }),
            AgentEvent::AgentEnd { stop_reason, usage } => {
                out.push(Event::AgentEnd { messages: std::mem::take(&mut self.run_messages), stop_reason, usage });
            }
            AgentEvent::ExtensionError { extension, hook, error } => {
                out.push(Event::ExtensionError { extension_path: extension, event: hook, error });
            }
            // An automatic one is also written with older upstream releases' names.
            AgentEvent::CompactionStart { reason } => {
                if reason != "manual" {
                    out.push(Event::AutoCompactionStart { reason: reason.clone() });
                }
                out.push(Event::CompactionStart { reason });
            }
            AgentEvent::SessionCompact { reason, summary, will_retry, tokens_before, .. } => {
                let result = CompactionResult { summary, first_kept_entry_id: None, tokens_before, details: json!({}) };
                self.compaction_end(reason, (Some(result), will_retry, None), &mut out);
            }
            AgentEvent::SessionCompactFailed { reason, error } => {
                self.compaction_end(reason, (None, false, Some(error)), &mut out);
            }
            AgentEvent::AutoRetryStart { attempt, max_attempts, delay_ms, error_message } => {
                out.push(Event::AutoRetryStart { attempt, max_attempts, delay_ms, error_message });
            }
            AgentEvent::AutoRetryEnd { success, attempt, final_error } => {
                out.push(Event::AutoRetryEnd { success, attempt, final_error });
            }
            other => out.push(Event::Pi(other)),
        }
        out
    }

    /// `compaction_end` (and, for an automatic compaction, `auto_compaction_end`): the result,
    /// whether it retries the prompt, or the error.
    fn compaction_end(
        &self,
        reason: String,
        (result, will_retry, error): (Option<CompactionResult>, bool, Option<String>),
        out: &mut Vec<Event>,
    ) {
        let aborted = error.as_deref().is_some_and(|e| e.ends_with("aborted"));
        if reason != "manual" {
            let (result, error_message) = (result.clone(), error.clone());
            out.push(Event::AutoCompactionEnd { result, aborted, will_retry, error_message });
        }
        out.push(Event::CompactionEnd { reason, result, aborted, will_retry, error_message: error });
    }

    /// A finished message: a tool's awaited result first, then (for messages final at once) its
    /// start, then its end.
    fn message_end(&mut self, message: &Message, out: &mut Vec<Event>) {
        let value = serde_json::to_value(message).unwrap_or(Value::Null);
        self.run_messages.push(value.clone());
        match message {
            Message::Assistant(_) => self.turn_message = value.clone(),
            Message::ToolResult(result) => {
                self.turn_results.push(value.clone());
                if let Some((tool_call_id, tool_name, is_error)) = self.tool_end.take() {
                    let result = json!({"content": result.content, "details": result.details});
                    out.push(Event::ToolExecutionEnd { tool_call_id, tool_name, result, is_error });
                }
            }
            _ => {}
        }
        if !matches!(message, Message::Assistant(_)) {
            out.push(Event::MessageStart { message: value.clone() });
        }
        out.push(Event::MessageEnd { message: value });
    }

    /// A streamed fragment as upstream's `assistantMessageEvent`.
    fn delta(&mut self, delta: Delta) -> AssistantMessageEvent {
        match delta {
            Delta::Text { text } => AssistantMessageEvent::TextDelta { content_index: self.block("text"), delta: text },
            Delta::Thinking { text } => {
                AssistantMessageEvent::ThinkingDelta { content_index: self.block("thinking"), delta: text }
            }
            Delta::ToolCallStart { tool_call_id, tool_name } => AssistantMessageEvent::ToolcallStart {
                content_index: self.block("toolcall"),
                tool_call: ToolCallStart { id: tool_call_id, name: tool_name },
            },
            Delta::ToolCallArgs { text, .. } => {
                AssistantMessageEvent::ToolcallDelta { content_index: self.content_index.unwrap_or(0), delta: text }
            }
        }
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
