//! The events extensions' handlers receive and the results they return, one type per hook.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::message::{ContentBlock, Message};

/// Where a prompt came from (the `source` attribute of `pi.agent.prompt`, and `input.source`):
/// upstream pi's three values, which extensions written for upstream compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptSource {
    /// A person typed it — in the interactive UI, and on the command line (`pi -p`), as upstream.
    Interactive,
    /// Sent over RPC.
    Rpc,
    /// Sent by an extension.
    Extension,
}

impl PromptSource {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptSource::Interactive => "interactive",
            PromptSource::Rpc => "rpc",
            PromptSource::Extension => "extension",
        }
    }
}

/// `input` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InputEvent {
    /// The text (after earlier transforms).
    pub text: String,
    /// Attached images.
    pub images: usize,
    /// Where it came from.
    pub source: PromptSource,
}

/// What an `input` handler decides.
#[derive(Debug, Clone, PartialEq)]
pub enum InputAction {
    /// Pass through unchanged.
    Continue,
    /// Replace the text; later handlers and the expansion see the new text.
    Transform {
        /// The new text.
        text: String,
    },
    /// The extension handled it: the agent does not start.
    Handled,
}

/// How the `input` chain ended.
#[derive(Debug, Clone, PartialEq)]
pub enum InputOutcome {
    /// Run the agent on this text.
    Continue(String),
    /// An extension handled the input.
    Handled {
        /// Which one.
        extension: String,
    },
}

/// `before_agent_start` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeAgentStartEvent {
    /// The prompt (after expansion).
    pub prompt: String,
    /// The system prompt so far (earlier handlers' changes included).
    pub system_prompt: Option<String>,
    /// What the system prompt was built from (upstream's `systemPromptOptions`).
    pub system_prompt_options: SystemPromptOptions,
}

/// Upstream's `BuildSystemPromptOptions`, as far as pi builds its system prompt from them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemPromptOptions {
    /// The working directory.
    pub cwd: String,
    /// The tools offered to the model.
    pub selected_tools: Vec<String>,
    /// A system prompt given in place of pi's own (`--system-prompt`, settings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_prompt: Option<String>,
    /// The skills offered (`name`, `description`, `filePath`).
    pub skills: Vec<SkillInfo>,
}

/// A skill as `systemPromptOptions` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillInfo {
    /// `/skill:<name>`.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// Its markdown file.
    pub file_path: String,
}

/// A message an extension injects: persisted as a `custom_message` entry and sent to the model
/// as a user message.
#[derive(Debug, Clone, PartialEq)]
pub struct InjectedMessage {
    /// The extension's message type.
    pub custom_type: String,
    /// The text.
    pub content: String,
    /// Shown in a UI.
    pub display: bool,
}

/// `before_agent_start` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BeforeAgentStartResult {
    /// Messages to inject (collected across handlers).
    pub messages: Vec<InjectedMessage>,
    /// A new system prompt (chained: the next handler sees it).
    pub system_prompt: Option<String>,
}

/// `context` event: a copy of the messages about to be sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEvent {
    /// The messages.
    pub messages: Vec<Message>,
}

/// Header changes: `Some(value)` sets, `None` deletes. Names are case-insensitive.
pub type HeaderPatch = BTreeMap<String, Option<String>>;

/// `before_provider_headers` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHeadersEvent {
    /// Provider.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// The headers the request will carry besides credentials and content negotiation
    /// (earlier handlers' patches applied), lowercase names.
    pub headers: BTreeMap<String, String>,
}

/// `before_provider_request` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRequestEvent {
    /// The provider-specific request body (earlier replacements applied).
    pub payload: Value,
}

/// `after_provider_response` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderResponseEvent {
    /// HTTP status.
    pub status: u16,
    /// Response headers, lowercase names.
    #[serde(serialize_with = "pairs_as_object")]
    pub headers: Vec<(String, String)>,
}

/// `[(name, value)]` as a JSON object (a repeated name keeps its last value).
fn pairs_as_object<S: serde::Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

/// `tool_call` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallEvent {
    /// Call id.
    pub tool_call_id: String,
    /// Tool name.
    pub tool_name: String,
    /// Arguments (earlier handlers' changes applied).
    pub input: Value,
}

/// `tool_call` result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCallResult {
    /// Do not run the tool.
    pub block: bool,
    /// Why (sent to the model as the error result).
    pub reason: Option<String>,
    /// New arguments for later handlers and the tool.
    pub input: Option<Value>,
}

impl ToolCallResult {
    /// Blocks the tool with a reason.
    pub fn block(reason: impl Into<String>) -> Self {
        ToolCallResult { block: true, reason: Some(reason.into()), input: None }
    }

    /// Replaces the arguments.
    pub fn input(input: Value) -> Self {
        ToolCallResult { input: Some(input), ..Default::default() }
    }
}

/// How the `tool_call` chain ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallDecision {
    /// The arguments to run the tool with.
    pub input: Value,
    /// `Some((extension, reason))` when blocked.
    pub blocked: Option<(String, String)>,
}

/// `tool_result` event: the result so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultEvent {
    /// Call id.
    pub tool_call_id: String,
    /// Tool name.
    pub tool_name: String,
    /// The arguments it ran with.
    pub input: Value,
    /// Result content (earlier patches applied).
    pub content: Vec<ContentBlock>,
    /// Result details.
    pub details: Option<Value>,
    /// The tool failed.
    pub is_error: bool,
}

/// A partial `tool_result` patch: omitted fields keep their current value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolResultPatch {
    /// New content.
    pub content: Option<Vec<ContentBlock>>,
    /// New details.
    pub details: Option<Value>,
    /// New error flag.
    pub is_error: Option<bool>,
}

/// `message_end` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageEndEvent {
    /// The message (earlier replacements applied).
    pub message: Message,
}

/// `session_before_compact` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeCompactEvent {
    /// `manual`, `threshold` or `overflow`.
    pub reason: String,
    /// Context tokens before.
    pub tokens_before: u64,
    /// The messages that would be summarized.
    pub messages_to_summarize: Vec<Message>,
    /// Messages kept verbatim.
    pub kept_messages: usize,
    /// The turn that overflowed the context will be sent again after the compaction.
    pub will_retry: bool,
    /// The summary the conversation starts with (an earlier compaction's), if any.
    pub previous_summary: Option<String>,
    /// What the user asked the summary to focus on (`/compact …`).
    pub custom_instructions: Option<String>,
}

/// `session_before_tree` event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeTreeEvent {
    /// Leaf before the move.
    pub old_leaf_id: Option<String>,
    /// Entry to move to.
    pub target_id: String,
    /// A summary of the abandoned branch was asked for.
    pub summarize: bool,
}

/// `session_before_switch` event: the session is about to be replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeSwitchEvent {
    /// `new` (a fresh session) or `resume` (an existing one).
    pub reason: String,
    /// The session file being switched to, when there is one.
    pub target_session_file: Option<String>,
}

/// `session_before_fork` event: a new session is about to branch off at an entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BeforeForkEvent {
    /// The entry the fork keeps the conversation up to.
    pub entry_id: String,
}

/// `user_bash` event: the user runs a shell command (`!cmd` in the terminal, RPC `bash`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserBashEvent {
    /// The command as typed.
    pub command: String,
    /// `!!cmd`: its output stays out of the model's context.
    pub exclude_from_context: bool,
    /// Where it runs.
    pub cwd: String,
}

/// What a `user_bash` handler ran in pi's place (upstream's `BashResult`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserBashResult {
    /// Its output.
    pub output: String,
    /// Its exit code.
    pub exit_code: Option<i64>,
    /// It was cancelled.
    pub cancelled: bool,
    /// Its output was cut.
    pub truncated: bool,
}

/// Result of a `session_before_*` handler.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BeforeResult {
    /// Cancel the operation.
    pub cancel: bool,
    /// Use this summary instead of asking the model.
    pub summary: Option<String>,
}

impl BeforeResult {
    /// Cancels.
    pub fn cancel() -> Self {
        BeforeResult { cancel: true, summary: None }
    }

    /// Supplies the summary.
    pub fn summary(text: impl Into<String>) -> Self {
        BeforeResult { cancel: false, summary: Some(text.into()) }
    }
}
