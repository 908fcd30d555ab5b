//! Compaction: summarize older messages so a long session fits the model's context window.
//!
//! Three reasons, as in pi: `threshold` (before a turn, when the context estimate exceeds
//! `context_window - reserve_tokens`), `overflow` (the provider said the context is too long:
//! compact, then retry the turn) and `manual` (`/compact [instructions]` or
//! [`Agent::compact`](crate::Agent::compact)). The most recent messages worth
//! `keep_recent_tokens` are kept verbatim, cut at a message boundary that never separates a tool
//! result from its call; the rest is summarized by the provider. The summary's usage is recorded
//! on the `compaction` session entry (so session totals count it once) and on the
//! `pi.agent.compaction` span with the reason, `willRetry` and the token estimates before/after.

use crate::message::{Message, StopReason, UserContent};

/// When and how much to compact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// Compact automatically (threshold and overflow).
    pub enabled: bool,
    /// Tokens left free for the response: compaction triggers above `context_window - reserve_tokens`.
    pub reserve_tokens: u64,
    /// Recent context kept verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings { enabled: true, reserve_tokens: 16_384, keep_recent_tokens: 20_000 }
    }
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// Asked for.
    Manual,
    /// The context estimate crossed the threshold.
    Threshold,
    /// The provider rejected the context as too long.
    Overflow,
}

impl CompactionReason {
    /// `manual`, `threshold` or `overflow`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionReason::Manual => "manual",
            CompactionReason::Threshold => "threshold",
            CompactionReason::Overflow => "overflow",
        }
    }
}

/// A rough token estimate of one message (4 characters per token).
pub fn estimate_message(message: &Message) -> u64 {
    (message.char_len() as u64).div_ceil(4)
}

/// The context size of `messages`: the last successful assistant message's reported usage
/// (it covers everything before it) plus estimates for what came after; estimates only when no
/// usage is known. Usage of assistant messages before `trust_usage_from` is ignored (after a
/// compaction, kept messages report the size of a context that no longer exists).
pub fn context_tokens(messages: &[Message], trust_usage_from: usize) -> u64 {
    let last_usage = messages.iter().enumerate().skip(trust_usage_from).rev().find_map(|(i, m)| match m {
        Message::Assistant(a) if a.stop_reason != StopReason::Error && a.usage.total_tokens > 0 => {
            Some((i, a.usage.total_tokens))
        }
        _ => None,
    });
    match last_usage {
        Some((index, tokens)) => tokens + messages[index + 1..].iter().map(estimate_message).sum::<u64>(),
        None => messages.iter().map(estimate_message).sum(),
    }
}

/// Where the kept messages start: walking back from the newest message until `keep_recent`
/// tokens are covered, then back to a message that is not a tool result. 0 = nothing to
/// summarize.
pub fn find_cut(messages: &[Message], keep_recent: u64) -> usize {
    let mut kept = 0u64;
    let mut cut = messages.len();
    while cut > 0 && kept < keep_recent {
        cut -= 1;
        kept += estimate_message(&messages[cut]);
    }
    while cut > 0 && matches!(messages[cut], Message::ToolResult(_)) {
        cut -= 1;
    }
    cut
}

/// Tool results longer than this are cut in the text sent for summarization.
const TOOL_RESULT_CHARS: usize = 2000;

/// Messages as plain text for the summarizer, so it does not continue the conversation.
pub fn serialize_conversation(messages: &[Message]) -> String {
    let mut out = Vec::new();
    for message in messages {
        match message {
            Message::User(u) => out.push(format!("[User]: {}", u.content.text())),
            Message::Assistant(a) => {
                let thinking = a.thinking();
                if !thinking.is_empty() {
                    out.push(format!("[Assistant thinking]: {thinking}"));
                }
                let text = a.text();
                if !text.is_empty() {
                    out.push(format!("[Assistant]: {text}"));
                }
                let calls: Vec<String> =
                    a.tool_calls().into_iter().map(|(_, name, args)| format!("{name}({args})")).collect();
                if !calls.is_empty() {
                    out.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Message::ToolResult(r) => {
                let text = crate::message::joined_text(&r.content);
                let total = text.chars().count();
                let shown: String = text.chars().take(TOOL_RESULT_CHARS).collect();
                let marker = if total > TOOL_RESULT_CHARS {
                    format!("\n[… {} more characters truncated]", total - TOOL_RESULT_CHARS)
                } else {
                    String::new()
                };
                out.push(format!("[Tool result]: {shown}{marker}"));
            }
            other => {
                if let Some(text) = other.context_text() {
                    out.push(format!("[User]: {text}"));
                }
            }
        }
    }
    out.join("\n\n")
}

/// The summarizer's system prompt.
pub const SUMMARY_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Read the conversation and \
     write a structured summary that lets another assistant continue the work. Do not continue the \
     conversation and do not answer questions in it.";

/// The summarizer's instructions (the structured format pi uses).
pub fn summary_instructions(conversation: &str, previous_summary: Option<&str>, custom: Option<&str>) -> String {
    let mut text = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(previous) = previous_summary {
        text.push_str(&format!("<previous-summary>\n{previous}\n</previous-summary>\n\n"));
    }
    text.push_str(
        "Summarize the conversation above in this format:\n\n## Goal\n## Constraints & Preferences\n## Progress\n\
         ### Done\n### In Progress\n### Blocked\n## Key Decisions\n## Next Steps\n## Critical Context",
    );
    if let Some(custom) = custom.filter(|c| !c.trim().is_empty()) {
        text.push_str(&format!("\n\nAdditional focus: {custom}"));
    }
    text
}

/// Prefix of the user message that carries a summary into the context.
pub const SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:";

/// The message that stands for the summarized history.
pub fn summary_message(summary: &str) -> Message {
    Message::user(format!("{SUMMARY_PREFIX}\n\n<summary>\n{summary}\n</summary>"))
}

/// The message that carries a branch summary (work done on a branch the session left).
pub fn branch_summary_message(summary: &str) -> Message {
    Message::user(format!(
        "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n{summary}\n</summary>"
    ))
}

/// The conversation an agent resumes with at the end of `path` (the entries from the first one
/// to the leaf): the latest compaction's summary and retained messages, then what follows;
/// branch summaries and extension messages as user messages. Also returns the index from which
/// assistant usage describes the current context.
pub fn context_from<'a>(path: impl IntoIterator<Item = &'a crate::session::Entry>) -> (Vec<Message>, usize) {
    use crate::session::EntryKind;
    // Each message with the id of the entry it came from (a compaction written by upstream
    // pi keeps the messages from its `firstKeptEntryId` on).
    let mut messages: Vec<(Option<&str>, Message)> = Vec::new();
    let mut trust_usage_from = 0;
    for entry in path {
        let id = Some(entry.id.as_str());
        match &entry.kind {
            EntryKind::Message { message } => messages.push((id, message.clone())),
            EntryKind::CustomMessage { content, .. } => messages.push((id, Message::user(content.text()))),
            EntryKind::BranchSummary { summary, .. } => messages.push((id, branch_summary_message(summary))),
            EntryKind::Compaction { summary, retained_tail, first_kept_entry_id, .. } => {
                let kept: Vec<(Option<&str>, Message)> = match (retained_tail, first_kept_entry_id) {
                    (Some(tail), _) => tail.iter().map(|m| (None, m.clone())).collect(),
                    (None, Some(first)) => match messages.iter().position(|(id, _)| *id == Some(first.as_str())) {
                        Some(at) => messages.split_off(at),
                        None => Vec::new(),
                    },
                    (None, None) => Vec::new(),
                };
                messages = vec![(None, summary_message(summary))];
                messages.extend(kept);
                trust_usage_from = messages.len();
            }
            _ => {}
        }
    }
    (messages.into_iter().map(|(_, m)| m).collect(), trust_usage_from)
}

/// The summary text inside a message made by [`summary_message`].
pub fn summary_of(message: &Message) -> Option<String> {
    let Message::User(user) = message else { return None };
    let text = match &user.content {
        UserContent::Text(text) => text.clone(),
        UserContent::Blocks(blocks) => crate::message::joined_text(blocks),
    };
    let rest = text.strip_prefix(SUMMARY_PREFIX)?;
    let inner = rest.trim().strip_prefix("<summary>")?.strip_suffix("</summary>")?;
    Some(inner.trim().to_owned())
}

/// True when a provider error says the request did not fit the context window.
pub fn is_context_overflow(error: &crate::provider::ProviderError) -> bool {
    use crate::provider::ProviderError;
    let message = match error {
        ProviderError::Http { status: 400 | 413, message, .. } | ProviderError::Provider(message) => message,
        _ => return false,
    };
    let message = message.to_ascii_lowercase();
    ["context length", "context window", "context_length", "too long", "too many tokens", "maximum context"]
        .iter()
        .any(|needle| message.contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, ContentBlock, ToolResultMessage, Usage};

    fn assistant(text: &str, tokens: u64) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text(text)],
            api: "faux".into(),
            provider: "faux".into(),
            model: "faux-1".into(),
            usage: Usage::tokens(tokens, 0, 0, 0),
            stop_reason: StopReason::Stop,
            error_message: None,
            timestamp: 0,
        })
    }

    fn tool(text: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "read".into(),
            content: vec![ContentBlock::text(text)],
            details: None,
            usage: None,
            is_error: false,
            timestamp: 0,
        })
    }

    #[test]
    fn cuts_never_start_at_a_tool_result() {
        let messages =
            vec![Message::user("a".repeat(400)), assistant("b", 0), tool(&"c".repeat(400)), tool(&"d".repeat(40))];
        // Keeping ~10 tokens lands on the last tool result: move back to its assistant message.
        assert_eq!(find_cut(&messages, 10), 1);
        assert_eq!(find_cut(&messages, 1_000_000), 0, "everything fits: nothing to summarize");
    }

    #[test]
    fn context_uses_the_last_reported_usage_plus_estimates() {
        let messages = vec![Message::user("x".repeat(4000)), assistant("ok", 1500), Message::user("y".repeat(40))];
        assert_eq!(context_tokens(&messages, 0), 1500 + 10);
        assert_eq!(context_tokens(&messages[..1], 0), 1000);
        assert_eq!(context_tokens(&messages, 2), 1000 + 1 + 10, "usage before a compaction is not trusted");
    }

    #[test]
    fn summaries_round_trip_and_overflow_errors_are_recognised() {
        assert_eq!(summary_of(&summary_message("## Goal\nship")).as_deref(), Some("## Goal\nship"));
        assert_eq!(summary_of(&Message::user("plain")), None);
        let overflow = crate::provider::ProviderError::Http {
            status: 400,
            message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
            retry_after: None,
        };
        assert!(is_context_overflow(&overflow));
        assert!(!is_context_overflow(&crate::provider::ProviderError::Network("reset".into())));
    }

    #[test]
    fn long_tool_results_are_truncated_for_the_summarizer() {
        let text = serialize_conversation(&[Message::user("hi"), tool(&"z".repeat(2500))]);
        assert!(text.starts_with("[User]: hi\n\n[Tool result]: "));
        assert!(text.ends_with("[… 500 more characters truncated]"));
    }
}
