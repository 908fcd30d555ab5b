//! Messages, content blocks and usage, in pi's session-format shape (JSON field names match
//! `packages/ai` types: `role`, `toolCallId`, `stopReason`, `cacheRead`, …).

use serde::{Deserialize, Serialize};

use crate::time::now_millis;

mod usage;

pub use usage::{Cost, Usage};
pub(crate) use usage::{CostWire, UsageWire};

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ContentBlock {
    /// Plain text.
    #[serde(rename = "text")]
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning.
    #[serde(rename = "thinking")]
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// What the provider needs back to continue from this reasoning (upstream's
        /// `thinkingSignature`: the Responses API's reasoning item with its encrypted content).
        #[serde(rename = "thinkingSignature", default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// A tool call requested by the model.
    #[serde(rename = "toolCall")]
    ToolCall {
        /// Provider-assigned call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments (a JSON object).
        arguments: serde_json::Value,
    },
    /// An image (base64).
    #[serde(rename = "image")]
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

/// User message content: a string or blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    /// Plain text.
    Text(String),
    /// Text and image blocks.
    Blocks(Vec<ContentBlock>),
}

impl UserContent {
    /// All text, blocks joined by newlines.
    pub fn text(&self) -> String {
        match self {
            UserContent::Text(text) => text.clone(),
            UserContent::Blocks(blocks) => joined_text(blocks),
        }
    }

    /// The images, in order: `(base64 data, MIME type)`.
    pub fn images(&self) -> Vec<(&str, &str)> {
        match self {
            UserContent::Text(_) => Vec::new(),
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Image { data, mime_type } => Some((data.as_str(), mime_type.as_str())),
                    _ => None,
                })
                .collect(),
        }
    }

    /// The content as one provider's parts: the text as `text(…)`, then each image as
    /// `image(data, mime)`; `None` when there is no image (providers send plain text then).
    pub fn parts<T>(&self, text: impl Fn(String) -> T, image: impl Fn(&str, &str) -> T) -> Option<Vec<T>> {
        let images = self.images();
        if images.is_empty() {
            return None;
        }
        let mut parts = vec![text(self.text())];
        parts.extend(images.into_iter().map(|(data, mime)| image(data, mime)));
        Some(parts)
    }

    /// Number of image blocks.
    pub fn image_count(&self) -> usize {
        match self {
            UserContent::Text(_) => 0,
            UserContent::Blocks(blocks) => blocks.iter().filter(|b| matches!(b, ContentBlock::Image { .. })).count(),
        }
    }
}

/// Text of all text blocks, joined by newlines.
pub fn joined_text(blocks: &[ContentBlock]) -> String {
    joined(blocks, |b| match b {
        ContentBlock::Text { text } => Some(text),
        _ => None,
    })
}

/// What `pick` takes from each block, joined by newlines.
fn joined(blocks: &[ContentBlock], pick: impl Fn(&ContentBlock) -> Option<&String>) -> String {
    blocks.iter().filter_map(pick).map(String::as_str).collect::<Vec<_>>().join("\n")
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// Finished normally.
    Stop,
    /// Hit the output token limit.
    Length,
    /// Wants tool results.
    ToolUse,
    /// Failed.
    Error,
    /// Cancelled.
    Aborted,
}

impl StopReason {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

/// A user message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// The content.
    pub content: UserContent,
    /// Unix milliseconds.
    pub timestamp: i64,
}

/// An assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks.
    pub content: Vec<ContentBlock>,
    /// Provider API (`openai-completions`, `anthropic-messages`, `faux`).
    pub api: String,
    /// Provider name.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Usage and cost.
    pub usage: Usage,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Error text when `stop_reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Unix milliseconds.
    pub timestamp: i64,
}

impl AssistantMessage {
    /// The tool calls, in source order: `(id, name, arguments)`.
    pub fn tool_calls(&self) -> Vec<(String, String, serde_json::Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall { id, name, arguments } => Some((id.clone(), name.clone(), arguments.clone())),
                _ => None,
            })
            .collect()
    }

    /// All text blocks joined.
    pub fn text(&self) -> String {
        joined_text(&self.content)
    }

    /// All thinking blocks joined.
    pub fn thinking(&self) -> String {
        joined(&self.content, |b| match b {
            ContentBlock::Thinking { thinking, .. } => Some(thinking),
            _ => None,
        })
    }
}

/// A tool result message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The call this answers.
    pub tool_call_id: String,
    /// Tool name.
    pub tool_name: String,
    /// Result content.
    pub content: Vec<ContentBlock>,
    /// Tool-specific metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// Nested LLM work performed by the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The tool failed.
    pub is_error: bool,
    /// Unix milliseconds.
    pub timestamp: i64,
}

/// A shell command the user ran (`!cmd` in upstream's interactive mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashExecutionMessage {
    /// The command line.
    pub command: String,
    /// What it printed.
    pub output: String,
    /// Exit code (`None` when it did not finish).
    #[serde(default)]
    pub exit_code: Option<i64>,
    /// Cancelled by the user.
    #[serde(default)]
    pub cancelled: bool,
    /// The output was cut.
    #[serde(default)]
    pub truncated: bool,
    /// Where the whole output was saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// Not sent to the model (`!!cmd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude_from_context: Option<bool>,
    /// Unix milliseconds.
    #[serde(default)]
    pub timestamp: i64,
}

/// A message an extension put into the conversation (role `custom`; `hookMessage` before v3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomMessage {
    /// The extension's identifier.
    pub custom_type: String,
    /// The content.
    pub content: UserContent,
    /// Shown in a user interface.
    #[serde(default)]
    pub display: bool,
    /// Extension metadata (not sent to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// Unix milliseconds.
    #[serde(default)]
    pub timestamp: i64,
}

/// The summary of a branch the conversation came back from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryMessage {
    /// The summary.
    pub summary: String,
    /// The entry the branch left from.
    #[serde(default)]
    pub from_id: String,
    /// Unix milliseconds.
    #[serde(default)]
    pub timestamp: i64,
}

/// The summary earlier context was compacted into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionSummaryMessage {
    /// The summary.
    pub summary: String,
    /// Context tokens before the compaction.
    #[serde(default)]
    pub tokens_before: u64,
    /// Unix milliseconds.
    #[serde(default)]
    pub timestamp: i64,
}

/// A message of the conversation: upstream pi's `AgentMessage` union.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum Message {
    /// From the user.
    #[serde(rename = "user")]
    User(UserMessage),
    /// From the model.
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    /// A tool's answer.
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
    /// A shell command the user ran.
    #[serde(rename = "bashExecution")]
    BashExecution(BashExecutionMessage),
    /// From an extension.
    #[serde(rename = "custom")]
    Custom(CustomMessage),
    /// A branch summary.
    #[serde(rename = "branchSummary")]
    BranchSummary(BranchSummaryMessage),
    /// A compaction summary.
    #[serde(rename = "compactionSummary")]
    CompactionSummary(CompactionSummaryMessage),
}

impl Message {
    /// A user text message stamped now.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User(UserMessage { content: UserContent::Text(text.into()), timestamp: now_millis() })
    }

    /// The role as written (`user`, `assistant`, `toolResult`, `bashExecution`, `custom`,
    /// `branchSummary`, `compactionSummary`).
    pub fn role(&self) -> &'static str {
        match self {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "toolResult",
            Message::BashExecution(_) => "bashExecution",
            Message::Custom(_) => "custom",
            Message::BranchSummary(_) => "branchSummary",
            Message::CompactionSummary(_) => "compactionSummary",
        }
    }

    /// The usage this message adds to the totals (assistant messages, tool results with usage).
    pub fn usage(&self) -> Option<&Usage> {
        match self {
            Message::Assistant(m) => Some(&m.usage),
            Message::ToolResult(m) => m.usage.as_ref(),
            _ => None,
        }
    }

    /// Unix milliseconds.
    pub fn timestamp(&self) -> i64 {
        match self {
            Message::User(m) => m.timestamp,
            Message::Assistant(m) => m.timestamp,
            Message::ToolResult(m) => m.timestamp,
            Message::BashExecution(m) => m.timestamp,
            Message::Custom(m) => m.timestamp,
            Message::BranchSummary(m) => m.timestamp,
            Message::CompactionSummary(m) => m.timestamp,
        }
    }

    /// What the model reads of the roles it has no slot for — a user's shell command, an
    /// extension's message, a summary — as the text of a user message (as upstream's
    /// `convertToLlm`); `None` for `user`, `assistant` and `toolResult` (sent as themselves) and
    /// for commands excluded from the context.
    pub fn context_text(&self) -> Option<String> {
        match self {
            Message::User(_) | Message::Assistant(_) | Message::ToolResult(_) => None,
            Message::BashExecution(m) if m.exclude_from_context == Some(true) => None,
            Message::BashExecution(m) => {
                let mut text = format!("Ran `{}`\n```\n{}\n```", m.command, m.output.trim_end());
                if m.cancelled {
                    text.push_str("\n(command cancelled)");
                } else if let Some(code) = m.exit_code.filter(|c| *c != 0) {
                    text.push_str(&format!("\nCommand exited with code {code}"));
                }
                if m.truncated {
                    text.push_str("\n(output truncated)");
                }
                Some(text)
            }
            Message::Custom(m) => Some(m.content.text()),
            Message::BranchSummary(m) => Some(format!(
                "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{}\n</summary>",
                m.summary
            )),
            Message::CompactionSummary(m) => Some(format!(
                "The conversation history before this point was compacted into the following summary:\n\n<summary>\n{}\n</summary>",
                m.summary
            )),
        }
    }

    /// Approximate size in characters of everything the model would read.
    pub fn char_len(&self) -> usize {
        match self {
            Message::User(m) => m.content.text().len(),
            Message::Assistant(m) => m
                .content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text { text } => text.len(),
                    ContentBlock::Thinking { thinking, .. } => thinking.len(),
                    ContentBlock::ToolCall { name, arguments, .. } => name.len() + arguments.to_string().len(),
                    ContentBlock::Image { .. } => 1000,
                })
                .sum(),
            Message::ToolResult(m) => joined_text(&m.content).len(),
            other => other.context_text().map_or(0, |t| t.len()),
        }
    }
}

/// A user message of text and one PNG (`"look"`, data `AAAA`): the providers' image tests.
#[cfg(test)]
pub(crate) fn user_with_image() -> Message {
    Message::User(UserMessage {
        content: UserContent::Blocks(vec![
            ContentBlock::text("look"),
            ContentBlock::Image { data: "AAAA".into(), mime_type: "image/png".into() },
        ]),
        timestamp: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_use_pi_field_names() {
        let m = Message::ToolResult(ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::text("ok")],
            details: None,
            usage: None,
            is_error: false,
            timestamp: 1,
        });
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["role"], "toolResult");
        assert_eq!(json["toolCallId"], "c1");
        assert_eq!(json["content"][0]["type"], "text");
        let user: Message = serde_json::from_str(r#"{"role":"user","content":"Hello","timestamp":5}"#).unwrap();
        assert_eq!(user, Message::User(UserMessage { content: UserContent::Text("Hello".into()), timestamp: 5 }));
        let call: ContentBlock =
            serde_json::from_str(r#"{"type":"toolCall","id":"a","name":"read","arguments":{"path":"x"}}"#).unwrap();
        assert!(matches!(call, ContentBlock::ToolCall { .. }));
    }

    #[test]
    fn usage_adds_every_bucket() {
        let mut a = Usage::tokens(1, 2, 3, 4);
        a.cost.total = 0.5;
        a.add(&a.clone());
        assert_eq!((a.input, a.output, a.cache_read, a.cache_write, a.total_tokens), (2, 4, 6, 8, 20));
        assert_eq!(a.cost.total, 1.0);
    }
}
