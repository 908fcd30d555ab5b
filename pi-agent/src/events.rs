//! Agent events: what the agent loop reports while it runs (the `--mode json` stream).

use serde::Serialize;

use crate::message::{Message, StopReason, Usage};

/// A streamed fragment of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Delta {
    /// Text.
    Text {
        /// The fragment.
        text: String,
    },
    /// Reasoning.
    Thinking {
        /// The fragment.
        text: String,
    },
    /// A tool call began.
    #[serde(rename_all = "camelCase")]
    ToolCallStart {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
    },
    /// Argument JSON fragment.
    ToolCallArgs {
        /// Position among the calls.
        index: usize,
        /// The fragment.
        text: String,
    },
}

/// One agent event. Order per prompt: `agent_start`, then per turn `turn_start`,
/// `message_start`/`message_update`*/`message_end` (assistant), `tool_execution_start` for every
/// call in source order, `tool_execution_end` as each finishes, `message_start`/`message_end` for
/// each tool result in source order, `turn_end`; finally `agent_end`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The agent's session is ready (once, before the first prompt).
    #[serde(rename_all = "camelCase")]
    SessionStart {
        /// Session id, when there is a session.
        session_id: Option<String>,
        /// Why: `startup` (the process started), `reload`, `new`, `resume` or `fork` (upstream's
        /// values).
        reason: &'static str,
        /// The session this one replaced (`new`, `resume`, `fork`).
        #[serde(skip_serializing_if = "Option::is_none")]
        previous_session_file: Option<String>,
    },
    /// A prompt began.
    AgentStart,
    /// A turn began.
    #[serde(rename_all = "camelCase")]
    TurnStart {
        /// 0-based turn number.
        turn_index: usize,
    },
    /// A message began.
    MessageStart {
        /// `user`, `assistant` or `toolResult`.
        role: String,
    },
    /// A streamed fragment.
    MessageUpdate {
        /// The fragment.
        delta: Delta,
    },
    /// A message is final.
    MessageEnd {
        /// The message.
        message: Message,
    },
    /// A tool started.
    #[serde(rename_all = "camelCase")]
    ToolExecutionStart {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// Arguments.
        args: serde_json::Value,
    },
    /// A running tool produced output.
    #[serde(rename_all = "camelCase")]
    ToolExecutionUpdate {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// Output since the previous update.
        output: String,
    },
    /// A tool finished.
    #[serde(rename_all = "camelCase")]
    ToolExecutionEnd {
        /// Call id.
        tool_call_id: String,
        /// Tool name.
        tool_name: String,
        /// It failed.
        is_error: bool,
    },
    /// A turn ended.
    #[serde(rename_all = "camelCase")]
    TurnEnd {
        /// 0-based turn number.
        turn_index: usize,
    },
    /// The prompt is done.
    #[serde(rename_all = "camelCase")]
    AgentEnd {
        /// Why it ended.
        stop_reason: StopReason,
        /// Usage of the whole prompt.
        usage: Usage,
    },
    /// Everything the prompt produced is persisted; the agent is idle.
    AgentSettled,
    /// A compaction begins (manual or automatic); `session_compact` or `session_compact_failed`
    /// follows.
    CompactionStart {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
    },
    /// Context was compacted.
    #[serde(rename_all = "camelCase")]
    SessionCompact {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
        /// The summary that now stands for the older messages.
        summary: String,
        /// The prompt that overflowed the context is sent again next.
        will_retry: bool,
        /// Context tokens before.
        tokens_before: u64,
        /// Context tokens after (estimate).
        tokens_after: u64,
        /// The summary came from an extension.
        from_extension: bool,
    },
    /// A compaction failed (the session is unchanged).
    #[serde(rename_all = "camelCase")]
    SessionCompactFailed {
        /// `manual`, `threshold` or `overflow`.
        reason: String,
        /// What went wrong.
        error: String,
    },
    /// A request failed with a transient error (overloaded, rate limit, 5xx) and is sent again
    /// after `delay_ms`.
    #[serde(rename_all = "camelCase")]
    AutoRetryStart {
        /// The retry about to happen (1 = the first).
        attempt: u32,
        /// Retries allowed.
        max_attempts: u32,
        /// Wait before it.
        delay_ms: u64,
        /// What failed.
        error_message: String,
    },
    /// The retries of a request are over: it succeeded, or the last one failed (or they were
    /// stopped: `abort_retry`).
    #[serde(rename_all = "camelCase")]
    AutoRetryEnd {
        /// The request succeeded in the end.
        success: bool,
        /// Retries made.
        attempt: u32,
        /// The last error, when it failed.
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// The session leaf moved (branch navigation).
    #[serde(rename_all = "camelCase")]
    SessionTree {
        /// Leaf before.
        old_leaf_id: Option<String>,
        /// Leaf after (the target, or the branch summary written under it).
        new_leaf_id: Option<String>,
        /// A branch summary was written.
        summarized: bool,
    },
    /// The queued messages changed (one was typed, delivered, or the queues were cleared).
    #[serde(rename_all = "camelCase")]
    QueueUpdate {
        /// Steering messages still queued.
        steering: Vec<String>,
        /// Follow-up messages still queued.
        follow_up: Vec<String>,
    },
    /// The model changed (upstream's `model_select`).
    #[serde(rename_all = "camelCase")]
    ModelSelect {
        /// The model now in use.
        model: Box<crate::model::ModelInfo>,
        /// The one before.
        previous_model: Option<Box<crate::model::ModelInfo>>,
        /// `set` (chosen), `cycle` (cycled to) or `restore` (from a resumed session).
        source: &'static str,
    },
    /// The thinking level changed (upstream's `thinking_level_select`).
    #[serde(rename_all = "camelCase")]
    ThinkingLevelSelect {
        /// `off`, `minimal`, `low`, `medium`, `high` or `xhigh`.
        level: String,
        /// The level before.
        previous_level: String,
    },
    /// The agent is shutting down.
    SessionShutdown,
    /// An extension handler failed; the agent went on.
    #[serde(rename_all = "camelCase")]
    ExtensionError {
        /// The extension.
        extension: String,
        /// The hook.
        hook: String,
        /// What went wrong.
        error: String,
    },
}
