//! The RPC protocol's messages as types, mirroring upstream's `rpc-types.ts`
//! (`packages/coding-agent/src/modes/rpc/rpc-types.ts`): the commands read from stdin, the
//! responses written to stdout with the data of the queries, and the errors a command can get.
//! Lines are parsed into these types at the edge and written from them; nothing in between
//! reads or builds a command by field name.

use pi_agent::events::AgentEvent;
use pi_agent::message::{StopReason, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One command line (`RpcCommand`); its `id`, when given, is echoed on the response.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum Command {
    /// Run a prompt, or queue it while the agent streams (`streamingBehavior`).
    Prompt {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
        streaming_behavior: Option<String>,
    },
    /// Queue a steering message.
    Steer {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
    },
    /// Queue a follow-up message.
    FollowUp {
        message: String,
        #[serde(default)]
        images: Vec<Value>,
    },
    /// Abort the running prompt.
    Abort,
    /// A fresh session (upstream's `parentSession` is accepted and not used).
    NewSession { parent_session: Option<String> },
    /// The session's state ([`SessionState`]).
    GetState,
    /// Switch the model.
    SetModel { provider: String, model_id: String },
    /// The next model.
    CycleModel,
    /// The models known ([`Models`]).
    GetAvailableModels,
    /// Set the thinking level.
    SetThinkingLevel { level: String },
    /// The next thinking level.
    CycleThinkingLevel,
    /// `all` or `one-at-a-time` for steering messages.
    SetSteeringMode { mode: String },
    /// `all` or `one-at-a-time` for follow-ups.
    SetFollowUpMode { mode: String },
    /// Compact now.
    Compact { custom_instructions: Option<String> },
    /// Compaction when the context fills.
    SetAutoCompaction { enabled: bool },
    /// Retries of failed provider requests.
    SetAutoRetry { enabled: bool },
    /// Run a shell command (its output is not added to the context).
    Bash { command: String },
    /// Abort the running shell command.
    AbortBash,
    /// Stop a retry that waits (its request fails with the error it had).
    AbortRetry,
    /// The session as an HTML page (`outputPath`, default `pi-session-<file>.html` in the
    /// working directory); answered with its `path`.
    ExportHtml { output_path: Option<String> },
    /// Messages, tool calls, tokens and cost so far ([`SessionStats`]).
    GetSessionStats,
    /// Continue another session file.
    SwitchSession { session_path: String },
    /// Fork before a user message.
    Fork { entry_id: String },
    /// The current branch into a new session at the current position.
    Clone,
    /// The user messages a fork can start before.
    GetForkMessages,
    /// The last assistant message's text.
    GetLastAssistantText,
    /// Name the session.
    SetSessionName { name: String },
    /// Every message of the session.
    GetMessages,
    /// The commands a prompt can invoke (extension commands, skills, templates).
    GetCommands,
    /// An answer to an extension UI request: this pi sends none, so it is ignored.
    ExtensionUiResponse,
}

impl Command {
    /// Reads a command from a line's JSON object: an unknown `type` is [`RpcError::Unknown`], a
    /// missing or mistyped field [`RpcError::Invalid`] naming the command and the field.
    pub fn from_json(value: Value, kind: &str) -> Result<Command, RpcError> {
        Command::deserialize(value).map_err(|e| {
            let why = e.to_string();
            if why.starts_with("unknown variant") {
                RpcError::Unknown(kind.to_owned())
            } else {
                RpcError::Invalid { command: kind.to_owned(), why }
            }
        })
    }
}

/// Why a command failed: the `error` of its response.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RpcError {
    /// The line is JSON but not an object (`line` names it).
    #[error("{line}: a command is a JSON object")]
    NotAnObject { line: String },
    /// The line is not JSON.
    #[error("{line}: Failed to parse command: {why}")]
    NotJson { line: String, why: String },
    /// The line is not UTF-8.
    #[error("line {number}: not UTF-8 (invalid byte at offset {at}); the command was not run")]
    NotUtf8 { number: usize, at: usize },
    /// The object has no `type`.
    #[error("{line}: the command has no \"type\"")]
    NoType { line: String },
    /// No such command.
    #[error("unknown command: {0}")]
    Unknown(String),
    /// A field is missing or of the wrong type, or its value is not one the command takes.
    #[error("{command}: {why}")]
    Invalid { command: String, why: String },
    /// The agent is streaming and the prompt says neither steer nor follow up.
    #[error(
        "prompt: the agent is streaming; give \"streamingBehavior\": \"steer\" or \"followUp\" to queue the message"
    )]
    Busy,
    /// The driver has stopped taking jobs.
    #[error("pi is shutting down")]
    ShuttingDown,
    /// The job ran and failed (its own words).
    #[error("{0}")]
    Failed(String),
}

impl RpcError {
    /// A value the command `command` does not take.
    pub fn invalid(command: &str, why: impl Into<String>) -> RpcError {
        RpcError::Invalid { command: command.to_owned(), why: why.into() }
    }
}

/// A response line (`RpcResponse`): `{id?, type: "response", command, success, data? | error}`.
#[derive(Debug, Serialize)]
pub struct Response<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub command: &'a str,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<'a> Response<'a> {
    /// The response to `command` (with the request's `id`) for `outcome`.
    pub fn to(command: &'a str, id: Option<Value>, outcome: Result<Option<Value>, RpcError>) -> Self {
        let (success, data, error) = match outcome {
            Ok(data) => (true, data.filter(|d| !d.is_null()), None),
            Err(e) => (false, None, Some(e.to_string())),
        };
        Response { id, kind: "response", command, success, data, error }
    }
}

/// What a compaction produced (upstream's `CompactionResult`). pi keeps the recent messages
/// in the compaction entry itself, so `firstKeptEntryId` is null.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: Option<String>,
    pub tokens_before: u64,
    pub details: Value,
}

/// An event line, as upstream's RPC mode writes the agent session's events. Events upstream
/// does not have (`session_start`, `queue_update`, `agent_settled`, `session_compact`,
/// `session_tree`, `session_shutdown`, …) are written in pi's own `--mode json` shape.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum Event {
    AgentStart,
    TurnStart {
        turn_index: usize,
    },
    MessageStart {
        message: Value,
    },
    MessageUpdate {
        assistant_message_event: AssistantMessageEvent,
    },
    MessageEnd {
        message: Value,
    },
    ToolExecutionUpdate {
        tool_call_id: String,
        tool_name: String,
        partial_result: Value,
    },
    ToolExecutionEnd {
        tool_call_id: String,
        tool_name: String,
        result: Value,
        is_error: bool,
    },
    TurnEnd {
        turn_index: usize,
        message: Value,
        tool_results: Vec<Value>,
    },
    AgentEnd {
        messages: Vec<Value>,
        stop_reason: StopReason,
        usage: Usage,
    },
    ExtensionError {
        extension_path: String,
        event: String,
        error: String,
    },
    CompactionStart {
        reason: String,
    },
    /// `result` is null when the compaction failed (`errorMessage`) or was aborted.
    CompactionEnd {
        reason: String,
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    /// Older upstream releases' name for an automatic compaction's start (also written).
    AutoCompactionStart {
        reason: String,
    },
    /// Older upstream releases' name for an automatic compaction's end (also written).
    AutoCompactionEnd {
        result: Option<CompactionResult>,
        aborted: bool,
        will_retry: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        error_message: Option<String>,
    },
    AutoRetryStart {
        attempt: u32,
        max_attempts: u32,
        delay_ms: u64,
        error_message: String,
    },
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        final_error: Option<String>,
    },
    /// An event in pi's own shape.
    #[serde(untagged)]
    Pi(AgentEvent),
}

/// A streamed fragment of the assistant message (`assistantMessageEvent`).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum AssistantMessageEvent {
    TextDelta { content_index: usize, delta: String },
    ThinkingDelta { content_index: usize, delta: String },
    ToolcallStart { content_index: usize, tool_call: ToolCallStart },
    ToolcallDelta { content_index: usize, delta: String },
}

/// The tool call a `toolcall_start` opens.
#[derive(Debug, Serialize)]
pub struct ToolCallStart {
    pub id: String,
    pub name: String,
}

/// `get_state`'s data (`RpcSessionState`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionState {
    pub model: Value,
    pub thinking_level: Value,
    pub is_streaming: bool,
    pub is_compacting: bool,
    pub steering_mode: &'static str,
    pub follow_up_mode: &'static str,
    pub session_file: Value,
    pub session_id: Value,
    pub auto_compaction_enabled: bool,
    pub message_count: usize,
    pub pending_message_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
}

/// `get_session_stats`' data (`SessionStats`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    pub session_file: Value,
    pub session_id: Value,
    pub user_messages: usize,
    pub assistant_messages: usize,
    pub tool_calls: usize,
    pub tool_results: usize,
    pub total_messages: usize,
    pub tokens: Tokens,
    pub cost: f64,
}

/// Token counts of [`SessionStats`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// `get_available_models`' data.
#[derive(Debug, Serialize)]
pub struct Models<'a> {
    pub models: &'a [Value],
}

/// An entry of `get_commands`' data (`RpcSlashCommand`).
#[derive(Debug, Serialize)]
pub struct SlashCommand {
    pub name: String,
    pub description: Value,
    pub source: String,
    pub path: Value,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn commands_read_as_upstream_writes_them() {
        let read = |v: Value| Command::from_json(v, "x");
        assert_eq!(
            read(json!({"type": "set_model", "id": "1", "provider": "p", "modelId": "m"})),
            Ok(Command::SetModel { provider: "p".into(), model_id: "m".into() })
        );
        assert_eq!(
            read(json!({"type": "prompt", "message": "hi", "streamingBehavior": "steer"})),
            Ok(Command::Prompt { message: "hi".into(), images: vec![], streaming_behavior: Some("steer".into()) })
        );
        assert_eq!(read(json!({"type": "abort_retry"})), Ok(Command::AbortRetry));
        assert_eq!(read(json!({"type": "no_such_command"})), Err(RpcError::Unknown("x".into())));
        let Err(RpcError::Invalid { why, .. }) = read(json!({"type": "fork"})) else { panic!() };
        assert!(why.contains("entryId"), "{why}");
    }

    #[test]
    fn a_response_has_data_or_an_error() {
        let ok = serde_json::to_value(Response::to("get_state", Some(json!(7)), Ok(Some(json!({"a": 1}))))).unwrap();
        assert_eq!(ok, json!({"id": 7, "type": "response", "command": "get_state", "success": true, "data": {"a": 1}}));
        let err = serde_json::to_value(Response::to("fork", None, Err(RpcError::ShuttingDown))).unwrap();
        assert_eq!(
            err,
            json!({"type": "response", "command": "fork", "success": false, "error": "pi is shutting down"})
        );
    }
}
