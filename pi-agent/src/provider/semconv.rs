//! Messages in the OpenTelemetry GenAI conventions' JSON schemas (v1.41.0: input and output
//! messages, system instructions, tool definitions), recorded on provider requests as content
//! fields — exported only where a sink captures them, scrubbed and size-limited like all content.

use serde_json::{Value, json};

use super::ToolSpec;
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, UserContent};

/// One content block as a conventions "part".
fn part(block: &ContentBlock) -> Value {
    match block {
        ContentBlock::Text { text } => json!({"type": "text", "content": text}),
        ContentBlock::Thinking { thinking, .. } => json!({"type": "reasoning", "content": thinking}),
        ContentBlock::ToolCall { id, name, arguments } => {
            json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments})
        }
        ContentBlock::Image { data, mime_type } => {
            json!({"type": "blob", "modality": "image", "mime_type": mime_type, "content": data})
        }
    }
}

/// The conversation sent to the model (`gen_ai.input.messages`).
pub fn input_messages(messages: &[Message]) -> String {
    let messages: Vec<Value> = messages
        .iter()
        .filter(|message| message.context_text().is_some() || matches!(message, Message::User(_) | Message::Assistant(_) | Message::ToolResult(_)))
        .map(|message| match message {
            Message::User(user) => {
                let parts: Vec<Value> = match &user.content {
                    UserContent::Text(text) => vec![json!({"type": "text", "content": text})],
                    UserContent::Blocks(blocks) => blocks.iter().map(part).collect(),
                };
                json!({"role": "user", "parts": parts})
            }
            Message::Assistant(reply) => {
                json!({"role": "assistant", "parts": reply.content.iter().map(part).collect::<Vec<_>>()})
            }
            Message::ToolResult(result) => json!({"role": "tool", "parts": [{
                "type": "tool_call_response",
                "id": result.tool_call_id,
                "response": crate::message::joined_text(&result.content),
            }]}),
            other => json!({"role": "user", "parts": [{"type": "text", "content": other.context_text().unwrap_or_default()}]}),
        })
        .collect();
    Value::Array(messages).to_string()
}

/// The model's answer without its reasoning (`gen_ai.output.messages`). Its tool calls carry
/// their id and name only: the arguments are content of another kind (`tool_args`, on the
/// tool's own span), which capturing the completion must not bring along.
pub fn output_messages(reply: &AssistantMessage) -> String {
    let finish_reason = match reply.stop_reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Error | StopReason::Aborted => "error",
    };
    // Reasoning is its own content kind (thinking): not part of the completion.
    let parts: Vec<Value> = reply
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Thinking { .. } => None,
            ContentBlock::ToolCall { id, name, .. } => Some(json!({"type": "tool_call", "id": id, "name": name})),
            other => Some(part(other)),
        })
        .collect();
    json!([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}]).to_string()
}

/// The system prompt (`gen_ai.system_instructions`).
pub fn system_instructions(prompt: &str) -> String {
    json!([{"type": "text", "content": prompt}]).to_string()
}

/// The tools offered (`gen_ai.tool.definitions`).
pub fn tool_definitions(tools: &[ToolSpec]) -> String {
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}))
        .collect();
    Value::Array(tools).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_the_conventions_schema() {
        let mut reply = AssistantMessage {
            content: vec![
                ContentBlock::Text { text: "Let me look.".into() },
                ContentBlock::ToolCall { id: "c1".into(), name: "read".into(), arguments: json!({"path": "a"}) },
            ],
            api: "faux".into(),
            provider: "faux".into(),
            model: "faux-1".into(),
            usage: Default::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 0,
        };
        let result = crate::message::ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "read".into(),
            content: vec![ContentBlock::text("alpha")],
            details: None,
            usage: None,
            is_error: false,
            timestamp: 0,
        };
        let input: Value = serde_json::from_str(&input_messages(&[
            Message::user("hi"),
            Message::Assistant(reply.clone()),
            Message::ToolResult(result),
        ]))
        .unwrap();
        assert_eq!(input[0], json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]}));
        assert_eq!(
            input[1]["parts"][1],
            json!({"type": "tool_call", "id": "c1", "name": "read", "arguments": {"path": "a"}})
        );
        assert_eq!(
            input[2],
            json!({"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "alpha"}]})
        );
        let output: Value = serde_json::from_str(&output_messages(&reply)).unwrap();
        assert_eq!(
            output[0]["parts"][1],
            json!({"type": "tool_call", "id": "c1", "name": "read"}),
            "the arguments are tool_args content, not part of the completion"
        );
        reply.content.truncate(1);
        reply.stop_reason = StopReason::Stop;
        let output: Value = serde_json::from_str(&output_messages(&reply)).unwrap();
        assert_eq!(
            output,
            json!([{"role": "assistant", "parts": [{"type": "text", "content": "Let me look."}], "finish_reason": "stop"}])
        );
        assert_eq!(system_instructions("be brief"), r#"[{"type":"text","content":"be brief"}]"#);
    }
}
