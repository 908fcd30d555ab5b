//! Every event name, payload key and attribution key of the contract, as constants.
//! Grep a constant to find every emitter and every adapter that reads it.

// ---- Operations (start / end / error) ----

/// One user prompt: the root of a trace (or the child of an adopted traceparent).
pub const AGENT_PROMPT: &str = "pi.agent.prompt";
/// One turn: a provider call plus the tool calls it asked for.
pub const AGENT_TURN: &str = "pi.agent.turn";
/// One LLM provider request, streamed.
pub const PROVIDER_REQUEST: &str = "pi.ai.provider.request";
/// One tool execution.
pub const AGENT_TOOL_CALL: &str = "pi.agent.tool_call";
/// A `/skill:name` expansion.
pub const AGENT_SKILL: &str = "pi.agent.skill";
/// A `/template` expansion.
pub const AGENT_PROMPT_TEMPLATE: &str = "pi.agent.prompt_template";
/// A context compaction (summary call included).
pub const AGENT_COMPACTION: &str = "pi.agent.compaction";
/// Moving the session leaf within the session tree.
pub const AGENT_BRANCH_NAVIGATION: &str = "pi.agent.branch_navigation";
/// Appending one entry to the session.
pub const AGENT_SESSION_APPEND_ENTRY: &str = "pi.agent.session.append_entry";
/// One extension handler run.
pub const AGENT_HOOK: &str = "pi.agent.hook";
/// Reading a session file.
pub const SESSION_READ: &str = "pi.session.read";
/// Writing a session file.
pub const SESSION_WRITE: &str = "pi.session.write";

/// Every operation name.
pub const OPERATIONS: [&str; 12] = [
    AGENT_PROMPT,
    AGENT_TURN,
    PROVIDER_REQUEST,
    AGENT_TOOL_CALL,
    AGENT_SKILL,
    AGENT_PROMPT_TEMPLATE,
    AGENT_COMPACTION,
    AGENT_BRANCH_NAVIGATION,
    AGENT_SESSION_APPEND_ENTRY,
    AGENT_HOOK,
    SESSION_READ,
    SESSION_WRITE,
];

// ---- Point events ----

/// A provider request is retried (payload: attempt, delay, reason/status).
pub const PROVIDER_RETRY: &str = "pi.ai.provider.retry";
/// The first token of a streamed response arrived.
pub const PROVIDER_FIRST_TOKEN: &str = "pi.ai.provider.first_token";
/// Token usage and cost reported by a provider.
pub const PROVIDER_USAGE: &str = "pi.ai.provider.usage";
/// The steering / follow-up queue changed.
pub const AGENT_QUEUE_UPDATE: &str = "pi.agent.queue_update";

/// Every point-event name.
pub const POINT_EVENTS: [&str; 4] = [PROVIDER_RETRY, PROVIDER_FIRST_TOKEN, PROVIDER_USAGE, AGENT_QUEUE_UPDATE];

// ---- Error types: the fixed vocabulary an error record's name comes from ----
//
// An error or retry record carries by default only one of these names plus safe numbers
// (status code, attempt); its message is content of kind `error_text`.

/// An operation dropped before it completed.
pub const ERROR_CANCELLED: &str = "Cancelled";
/// An operation that panicked.
pub const ERROR_PANIC: &str = "Panic";
/// A tool reported an error (non-zero exit, failed file operation, bad arguments, …).
pub const ERROR_TOOL: &str = "ToolError";
/// A tool call that an extension blocked.
pub const ERROR_BLOCKED: &str = "Blocked";
/// A tool the model asked for that is not registered.
pub const ERROR_UNKNOWN_TOOL: &str = "UnknownTool";
/// A server answered with an error status (the status code is a safe number beside it).
pub const ERROR_HTTP_STATUS: &str = "HttpStatus";
/// 401 / 403 from a provider.
pub const ERROR_AUTH: &str = "AuthError";
/// Could not connect, or the connection broke.
pub const ERROR_NETWORK: &str = "Network";
/// No answer, or a stalled stream, within the deadline.
pub const ERROR_TIMEOUT: &str = "Timeout";
/// A stream that ended early or carried malformed data.
pub const ERROR_INVALID_STREAM: &str = "InvalidStream";
/// A provider reported an error inside its stream.
pub const ERROR_PROVIDER: &str = "ProviderError";
/// Misconfiguration found when a request was made (missing key, bad URL).
pub const ERROR_CONFIG: &str = "ConfigError";
/// The scripted faux provider ran out of responses.
pub const ERROR_NO_MORE_RESPONSES: &str = "NoMoreResponses";
/// An extension handler failed (error, panic or timeout).
pub const ERROR_HOOK_FAILED: &str = "HookFailed";
/// A compaction that could not be made.
pub const ERROR_COMPACTION_FAILED: &str = "CompactionFailed";
/// A branch summary that could not be made.
pub const ERROR_BRANCH_SUMMARY_FAILED: &str = "BranchSummaryFailed";
/// A session file could not be read or written.
pub const ERROR_SESSION_IO: &str = "SessionIo";
/// Any error whose name is not an identifier (the name is replaced by this).
pub const ERROR_GENERIC: &str = "Error";

/// Safe payload key of what a model call was for: [`CALL_KIND_TURN`], [`CALL_KIND_COMPACTION`],
/// [`CALL_KIND_BRANCH_SUMMARY`] or [`CALL_KIND_TOOL`]. Every record with usage that counts toward
/// the bill carries it, exactly once per call (on spans: `pi.call_kind`).
pub const CALL_KIND: &str = "call_kind";
/// A turn of the conversation.
pub const CALL_KIND_TURN: &str = "turn";
/// A compaction summary.
pub const CALL_KIND_COMPACTION: &str = "compaction";
/// A branch summary.
pub const CALL_KIND_BRANCH_SUMMARY: &str = "branch_summary";
/// Model work a tool reported (its result carries usage).
pub const CALL_KIND_TOOL: &str = "tool";

/// Safe payload key of the error type on a retry event ([`PROVIDER_RETRY`]).
pub const ERROR_TYPE: &str = "errorType";
/// Content payload key ([`crate::ContentKind::ErrorText`]) of error text from outside pi.
pub const ERROR_TEXT: &str = "errorText";

// ---- Attribution context keys (conventional; any string key is allowed) ----

/// The user who caused the work.
pub const CTX_USER_ID: &str = "userId";
/// The user's organisation.
pub const CTX_ORG_ID: &str = "orgId";
/// The user's team.
pub const CTX_TEAM_ID: &str = "teamId";
/// The project the work is for.
pub const CTX_PROJECT_ID: &str = "projectId";

// ---- Safe payload keys ----

/// Session id.
pub const SESSION_ID: &str = "sessionId";
/// Provider name (`openai`, `anthropic`, `faux`, …).
pub const PROVIDER: &str = "provider";
/// Model id as requested.
pub const MODEL: &str = "model";
/// Model id as reported in the response.
pub const RESPONSE_MODEL: &str = "responseModel";
/// Content (kind `prompt`): a provider name a user typed that no catalogue knows (the safe
/// `provider` field then reads `invalid`).
pub const REQUESTED_PROVIDER: &str = "requestedProvider";
/// Content (kind `prompt`): a model id a user typed that no catalogue knows (the safe `model`
/// field then reads `invalid`).
pub const REQUESTED_MODEL: &str = "requestedModel";
/// Provider API (`openai-completions`, `anthropic-messages`, `faux`).
pub const API: &str = "api";
/// Reasoning / thinking level.
pub const REASONING: &str = "reasoning";
/// Length of the prompt text in characters.
pub const PROMPT_LENGTH: &str = "promptLength";
/// Number of images attached to a prompt.
pub const IMAGE_COUNT: &str = "imageCount";
/// Where a prompt came from: `interactive|rpc|extension|print`.
pub const SOURCE: &str = "source";
/// Turn index within a prompt (0-based).
pub const TURN_INDEX: &str = "turnIndex";
/// Why the model stopped (`stop`, `length`, `toolUse`, `error`, `aborted`).
pub const STOP_REASON: &str = "stopReason";
/// HTTP status code.
pub const STATUS_CODE: &str = "statusCode";
/// Safe payload key on an operation whose parent is a remote (adopted `traceparent`) span:
/// whether the caller sampled the trace, for parent-based samplers downstream.
pub const PARENT_SAMPLED: &str = "parentSampled";
/// Host of the provider endpoint (from pi's configuration; `server.address` in OTLP).
pub const SERVER_ADDRESS: &str = "serverAddress";
/// Port of the provider endpoint (`server.port` in OTLP).
pub const SERVER_PORT: &str = "serverPort";
/// Retries made for a request.
pub const RETRY_COUNT: &str = "retryCount";
/// Retry attempt number (on `pi.ai.provider.retry`).
pub const ATTEMPT: &str = "attempt";
/// Delay before a retry, in milliseconds.
pub const DELAY_MS: &str = "delayMs";
/// Fresh input tokens.
pub const INPUT_TOKENS: &str = "inputTokens";
/// Output tokens.
pub const OUTPUT_TOKENS: &str = "outputTokens";
/// Input tokens read from the provider's prompt cache.
pub const CACHE_READ_TOKENS: &str = "cacheReadTokens";
/// Input tokens written to the provider's prompt cache.
pub const CACHE_WRITE_TOKENS: &str = "cacheWriteTokens";
/// Sum of the four token buckets.
pub const TOTAL_TOKENS: &str = "totalTokens";
/// Estimated total cost in USD.
pub const COST_TOTAL: &str = "costTotal";
/// Estimated cost of input tokens in USD.
pub const COST_INPUT: &str = "costInput";
/// Estimated cost of output tokens in USD.
pub const COST_OUTPUT: &str = "costOutput";
/// Estimated cost of cache-read tokens in USD.
pub const COST_CACHE_READ: &str = "costCacheRead";
/// Estimated cost of cache-write tokens in USD.
pub const COST_CACHE_WRITE: &str = "costCacheWrite";
/// `true` when no price was known for the tokens of this call: the cost fields are left out (a
/// zero would read as free); exported as `pi.cost.unknown`.
pub const COST_UNKNOWN: &str = "cost.unknown";
/// The operation was aborted (cancelled).
pub const ABORTED: &str = "aborted";
/// The operation timed out.
pub const TIMEOUT: &str = "timeout";
/// Milliseconds from request start to the first streamed token.
pub const TIME_TO_FIRST_TOKEN_MS: &str = "timeToFirstTokenMs";
/// Tool name.
pub const TOOL_NAME: &str = "toolName";
/// Tool call id.
pub const TOOL_CALL_ID: &str = "toolCallId";
/// A tool call was blocked by an extension.
pub const BLOCKED: &str = "blocked";
/// Which extension blocked a tool call.
pub const BLOCKED_BY: &str = "blockedBy";
/// The tool result is an error.
pub const IS_ERROR: &str = "isError";
/// Size of a tool result in bytes.
pub const RESULT_BYTES: &str = "resultBytes";
/// Compaction reason: `manual|threshold|overflow`.
pub const COMPACTION_REASON: &str = "reason";
/// The turn is retried after an overflow compaction.
pub const WILL_RETRY: &str = "willRetry";
/// Context tokens before compaction.
pub const TOKENS_BEFORE: &str = "tokensBefore";
/// Context tokens after compaction.
pub const TOKENS_AFTER: &str = "tokensAfter";
/// Session entry type (`message`, `compaction`, …).
pub const ENTRY_TYPE: &str = "entryType";
/// Hook (extension event) name.
pub const HOOK_NAME: &str = "hookName";
/// Extension name.
pub const EXTENSION_NAME: &str = "extensionName";
/// Where an extension was loaded from: `builtin` (compiled in), `global`, `project`,
/// `settings`, `managed` or `flag` (`-e`).
pub const EXTENSION_ORIGIN: &str = "extensionOrigin";
/// Hook outcome: `completed|blocked|transformed|handled|cancelled|failed`.
pub const HOOK_OUTCOME: &str = "outcome";
/// Skill name.
pub const SKILL_NAME: &str = "skillName";
/// Prompt template name.
pub const TEMPLATE_NAME: &str = "templateName";
/// Number of queued messages.
pub const QUEUE_LENGTH: &str = "queueLength";
/// Bytes read or written.
pub const BYTES: &str = "bytes";
/// Number of entries read or written.
pub const ENTRY_COUNT: &str = "entryCount";
/// Number of entries read that this version does not understand (kept as written).
pub const UNKNOWN_ENTRY_COUNT: &str = "unknownEntryCount";
/// The session format version a file was migrated from.
pub const MIGRATED_FROM_VERSION: &str = "migratedFromVersion";

// ---- Content payload keys (Class::Content; exported only when captured) ----

/// Prompt text ([`crate::ContentKind::Prompt`]).
pub const PROMPT_TEXT: &str = "prompt";
/// System prompt text ([`crate::ContentKind::Prompt`]).
pub const SYSTEM_PROMPT: &str = "systemPrompt";
/// Completion text ([`crate::ContentKind::Completion`]).
pub const COMPLETION_TEXT: &str = "completion";
/// Thinking text ([`crate::ContentKind::Thinking`]).
pub const THINKING_TEXT: &str = "thinking";
/// Tool arguments as JSON ([`crate::ContentKind::ToolArgs`]).
pub const TOOL_ARGS: &str = "toolArgs";
/// Tool result text ([`crate::ContentKind::ToolResult`]).
pub const TOOL_RESULT: &str = "toolResult";
/// Shell output ([`crate::ContentKind::ShellOutput`]).
pub const SHELL_OUTPUT: &str = "shellOutput";
/// File contents ([`crate::ContentKind::FileContent`]).
pub const FILE_CONTENT: &str = "fileContent";
/// Provider request body ([`crate::ContentKind::ProviderPayload`]).
pub const REQUEST_BODY: &str = "requestBody";
/// Provider response body ([`crate::ContentKind::ProviderPayload`]).
pub const RESPONSE_BODY: &str = "responseBody";
/// The conversation sent to a model, in the GenAI conventions' input messages schema
/// ([`crate::ContentKind::ProviderPayload`]: it holds earlier answers and tool results too;
/// `gen_ai.input.messages`).
pub const INPUT_MESSAGES: &str = "inputMessages";
/// The model's answer in the conventions' output messages schema, without its reasoning (that
/// is [`crate::ContentKind::Thinking`]) ([`crate::ContentKind::Completion`];
/// `gen_ai.output.messages`).
pub const OUTPUT_MESSAGES: &str = "outputMessages";
/// The system prompt in the conventions' schema ([`crate::ContentKind::Prompt`];
/// `gen_ai.system_instructions`).
pub const SYSTEM_INSTRUCTIONS: &str = "systemInstructions";
/// The tools offered to a model ([`crate::ContentKind::ProviderPayload`];
/// `gen_ai.tool.definitions`).
pub const TOOL_DEFINITIONS: &str = "toolDefinitions";
/// HTTP headers ([`crate::ContentKind::Header`]).
pub const HEADERS: &str = "headers";

// ---- Secret payload keys (Class::Secret; never exported) ----

/// An API key.
pub const API_KEY: &str = "apiKey";
/// An `authorization` header value.
pub const AUTHORIZATION: &str = "authorization";

// ---- Environment variables ----

/// Incoming W3C traceparent of a parent process.
pub const ENV_TRACEPARENT: &str = "TRACEPARENT";
/// Attribution: user id.
pub const ENV_USER_ID: &str = "PI_USER_ID";
/// Attribution: org id.
pub const ENV_ORG_ID: &str = "PI_ORG_ID";
