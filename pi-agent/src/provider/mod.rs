//! LLM providers behind one streaming interface, and the traced, retrying request around them.

mod anthropic;
mod assemble;
mod bedrock;
mod compat;
mod error;
mod eventstream;
mod faux;
mod google;
mod http;
mod mistral;
mod openai;
mod responses;
mod retry;
pub mod semconv;
mod sse;
mod wire;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pi_observe_core::{ContentKind, Payload, Span, names, record_event, trace_operation_with};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use anthropic::AnthropicProvider;
pub use bedrock::{AwsAuth, BedrockProvider, aws_region, sigv4_headers};
pub use compat::Compat;
pub use error::ProviderError;
pub use faux::{FauxBlock, FauxProvider, FauxRequest, FauxResponse};
pub use google::GoogleProvider;
pub use http::HttpConfig;
pub use mistral::MistralProvider;
pub use openai::OpenAiProvider;
pub use responses::ResponsesProvider;
pub use retry::RetryPolicy;
pub use wire::HttpProvider;

use crate::message::{AssistantMessage, Message, StopReason};
use crate::model::{Catalogued, ModelInfo};

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSpec {
    /// Name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// Everything a provider needs for one request.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    /// The model.
    pub model: ModelInfo,
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Conversation so far.
    pub messages: Vec<Message>,
    /// Tools offered.
    pub tools: Vec<ToolSpec>,
    /// Reasoning level (`low|medium|high`), if any.
    pub reasoning: Option<String>,
    /// The session id as telemetry carries it (the session writer's `exported_id`).
    pub session_id: Option<String>,
    /// What extensions decided about this request (headers, payload, response observer).
    pub control: RequestControl,
    /// What the call is for (`pi.call_kind`: a turn, a compaction or a branch summary).
    pub call_kind: CallKind,
}

/// What a model call is for; its usage is billed under this kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallKind {
    /// A turn of the conversation.
    #[default]
    Turn,
    /// A compaction summary.
    Compaction,
    /// A summary of an abandoned branch.
    BranchSummary,
}

impl CallKind {
    /// The `pi.call_kind` value.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Turn => names::CALL_KIND_TURN,
            CallKind::Compaction => names::CALL_KIND_COMPACTION,
            CallKind::BranchSummary => names::CALL_KIND_BRANCH_SUMMARY,
        }
    }
}

/// Called with the status and headers of a provider response before its body is read.
pub type ResponseObserver =
    Arc<dyn Fn(u16, Vec<(String, String)>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Per-request decisions from the control plane, applied by every attempt of the request (so
/// retries reuse them).
#[derive(Clone, Default)]
pub struct RequestControl {
    /// Header changes: `Some` sets, `None` deletes (lowercase names), applied last.
    pub headers: std::collections::BTreeMap<String, Option<String>>,
    /// Replacement request body.
    pub payload: Option<serde_json::Value>,
    /// Sees each response's status and headers before the body is read.
    pub on_response: Option<ResponseObserver>,
}

impl std::fmt::Debug for RequestControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestControl")
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("payload", &self.payload.is_some())
            .field("on_response", &self.on_response.is_some())
            .finish()
    }
}

impl RequestControl {
    /// Tells the observer about a response.
    pub async fn observe_response(&self, status: u16, headers: Vec<(String, String)>) {
        if let Some(observer) = &self.on_response {
            observer(status, headers).await;
        }
    }
}

/// One streamed update.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The response started.
    Start,
    /// More assistant text.
    TextDelta(String),
    /// More reasoning text.
    ThinkingDelta(String),
    /// A tool call began.
    ToolCallStart {
        /// Position among the tool calls.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More tool-call argument JSON.
    ToolCallDelta {
        /// Position among the tool calls.
        index: usize,
        /// Argument text fragment.
        delta: String,
    },
    /// A tool call is complete.
    ToolCallEnd {
        /// Position among the tool calls.
        index: usize,
    },
    /// The response is complete.
    Done {
        /// Why it stopped.
        stop_reason: StopReason,
    },
    /// Not from the provider: the retry loop sends the request again after `delay`.
    Retry {
        /// The retry about to happen (1 = the first).
        attempt: u32,
        /// Retries allowed.
        max_attempts: u32,
        /// Wait before it.
        delay: Duration,
        /// What failed (the provider's text: content).
        error: String,
    },
    /// Not from the provider: the retries of this request are over.
    RetryEnd {
        /// The request succeeded in the end.
        success: bool,
        /// Retries made.
        attempts: u32,
        /// The last error, when it failed.
        error: Option<String>,
    },
}

/// Wakes every retry delay now running (RPC's `abort_retry`): each request stops retrying and
/// fails with the error it had. A request not waiting to retry is not affected.
pub fn abort_retry_delays() {
    RETRY_ABORT.notify_waiters();
}

static RETRY_ABORT: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Receives stream events as they arrive.
pub type EventSink<'a> = &'a mut (dyn FnMut(StreamEvent) + Send);

/// The boxed future a provider returns.
pub type AttemptFuture<'a> = Pin<Box<dyn Future<Output = Result<AttemptOutcome, ProviderError>> + Send + 'a>>;

/// What one successful attempt produced.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    /// The assembled message (usage not yet priced).
    pub message: AssistantMessage,
    /// HTTP status, for HTTP providers.
    pub status: Option<u16>,
}

/// One LLM backend. `attempt` makes a single request and streams it into `sink`; retries,
/// tracing and pricing are done around it by [`request`].
pub trait Provider: Send + Sync {
    /// Provider name (`openai`, `anthropic`, `faux`).
    fn name(&self) -> &str;

    /// The request body this provider would send (before extensions replace it).
    fn payload(&self, request: &ProviderRequest) -> serde_json::Value;

    /// Headers the provider adds besides credentials and content negotiation.
    fn default_headers(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Host and port the request goes to (from pi's configuration, not the network), if any.
    fn server(&self, request: &ProviderRequest) -> Option<(String, u16)> {
        let _ = request;
        None
    }

    /// One attempt. Must return [`ProviderError::Aborted`] promptly when `attempt.cancel`
    /// fires. Uses `attempt.request.control` (replacement payload, header patch, response
    /// observer).
    fn attempt<'a>(&'a self, attempt: Attempt<'a>) -> AttemptFuture<'a>;
}

/// What one attempt works with.
#[allow(missing_debug_implementations)] // the sink is a closure
pub struct Attempt<'a> {
    /// The request.
    pub request: &'a ProviderRequest,
    /// Fires when the run is aborted.
    pub cancel: &'a CancellationToken,
    /// Receives stream events as they arrive.
    pub sink: EventSink<'a>,
}

/// A completed (or aborted/failed) request: the message to persist and what happened.
#[derive(Debug, Clone)]
pub struct RequestOutcome {
    /// The assistant message; on failure it has `stopReason` `error` or `aborted`.
    pub message: AssistantMessage,
    /// Retries made.
    pub retries: u32,
    /// The error, when the request failed.
    pub error: Option<ProviderError>,
}

/// Runs one provider request as a `pi.ai.provider.request` operation: retries retryable errors
/// that happen before anything was streamed (each retry emits `pi.ai.provider.retry`), emits
/// `first_token` and `usage` events, prices the usage, and records the safe result fields
/// (stop reason, status, retry count, tokens, cost, time to first token) plus the completion and
/// thinking text as Content-class fields.
pub async fn request(
    provider: &dyn Provider,
    request: &ProviderRequest,
    retry: &RetryPolicy,
    cancel: &CancellationToken,
    sink: EventSink<'_>,
) -> RequestOutcome {
    let model = &request.model;
    let payload = || start_payload(provider, request);
    trace_operation_with(names::PROVIDER_REQUEST, payload, |span: Span| async move {
        let started = Instant::now();
        let mut retries = 0u32;
        // Nanoseconds to the first token of any attempt; 0 = none yet.
        let first_token = AtomicU64::new(0);
        let result = loop {
            let streamed = AtomicBool::new(false);
            let mut forward = |event: StreamEvent| {
                let content = matches!(
                    event,
                    StreamEvent::TextDelta(_) | StreamEvent::ThinkingDelta(_) | StreamEvent::ToolCallStart { .. }
                );
                if content && !streamed.swap(true, Ordering::Relaxed) && first_token.load(Ordering::Relaxed) == 0 {
                    let ttft = started.elapsed();
                    first_token.store(ttft.as_nanos().max(1) as u64, Ordering::Relaxed);
                    record_event(names::PROVIDER_FIRST_TOKEN, || {
                        Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, ttft.as_millis() as u64)
                    });
                }
                sink(event);
            };
            let attempt = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ProviderError::Aborted),
                result = provider.attempt(Attempt { request, cancel, sink: &mut forward }) => result,
            };
            let streamed = streamed.load(Ordering::Relaxed);
            match attempt {
                Err(error) if error.is_retryable() && !streamed && retries < retry.max_retries => {
                    let delay = retry.delay(retries, error.retry_after());
                    retries += 1;
                    record_event(names::PROVIDER_RETRY, || retry_payload(retries, delay, &error));
                    // Listening before the retry is announced: an `abort_retry` sent on seeing
                    // it is never missed.
                    let aborted = RETRY_ABORT.notified();
                    tokio::pin!(aborted);
                    aborted.as_mut().enable();
                    let max_attempts = retry.max_retries;
                    sink(StreamEvent::Retry { attempt: retries, max_attempts, delay, error: error.to_string() });
                    tokio::select! {
                        () = cancel.cancelled() => break Err(ProviderError::Aborted),
                        () = aborted => break Err(error),
                        () = tokio::time::sleep(delay) => {}
                    }
                }
                other => break other,
            }
        };
        if retries > 0 {
            let error = result.as_ref().err().map(ToString::to_string);
            sink(StreamEvent::RetryEnd { success: result.is_ok(), attempts: retries, error });
        }
        let first_token = match first_token.load(Ordering::Relaxed) {
            0 => None,
            nanos => Some(Duration::from_nanos(nanos)),
        };
        finish(&span, model, provider, result, retries, first_token)
    })
    .await
}

/// The start fields of `pi.ai.provider.request`: the model's names, call kind, session,
/// reasoning level and server; the conversation, system prompt and tool definitions as content,
/// built only when a sink captures them (the conversation grows with every turn).
fn start_payload(provider: &dyn Provider, request: &ProviderRequest) -> Payload {
    let model = &request.model;
    let mut p = model_names(Some(model.api.as_str()), &model.provider, &model.id, model.catalogued)
        .safe(names::CALL_KIND, request.call_kind.as_str());
    if let Some(session) = &request.session_id {
        p = p.safe(names::SESSION_ID, session.clone());
    }
    if let Some(level) = &request.reasoning {
        p = p.safe(names::REASONING, crate::model::thinking_level_name(level));
    }
    if let Some((host, port)) = provider.server(request) {
        p = p.safe(names::SERVER_ADDRESS, host).safe(names::SERVER_PORT, port);
    }
    // In the conventions' schemas: the whole conversation (earlier answers and tool results too).
    p = p.content_with(ContentKind::ProviderPayload, names::INPUT_MESSAGES, || {
        semconv::input_messages(&request.messages)
    });
    if let Some(system) = &request.system_prompt {
        p = p.content_with(ContentKind::Prompt, names::SYSTEM_INSTRUCTIONS, || semconv::system_instructions(system));
    }
    if !request.tools.is_empty() {
        p = p.content_with(ContentKind::ProviderPayload, names::TOOL_DEFINITIONS, || {
            semconv::tool_definitions(&request.tools)
        });
    }
    p
}

/// A `pi.ai.provider.retry` event: the error's type from pi's vocabulary is safe, its text came
/// from the provider (content).
fn retry_payload(attempt: u32, delay: Duration, error: &ProviderError) -> Payload {
    let mut p = Payload::new()
        .safe(names::ATTEMPT, attempt)
        .safe(names::DELAY_MS, delay.as_millis() as u64)
        .safe(names::ERROR_TYPE, error.error_type())
        .content(ContentKind::ErrorText, names::ERROR_TEXT, error.to_string());
    if let Some(status) = error.status() {
        p = p.safe(names::STATUS_CODE, status);
    }
    p
}

fn finish(
    span: &Span,
    model: &ModelInfo,
    provider: &dyn Provider,
    result: Result<AttemptOutcome, ProviderError>,
    retries: u32,
    first_token: Option<Duration>,
) -> RequestOutcome {
    let (mut message, status, error) = match result {
        Ok(outcome) => (outcome.message, outcome.status, None),
        Err(error) => {
            let stop_reason = if error == ProviderError::Aborted { StopReason::Aborted } else { StopReason::Error };
            let message = AssistantMessage {
                content: Vec::new(),
                api: model.api.as_str().to_owned(),
                provider: provider.name().to_owned(),
                model: model.id.clone(),
                usage: Default::default(),
                stop_reason,
                error_message: Some(error.to_string()),
                timestamp: crate::time::now_millis(),
            };
            (message, error.status(), Some(error))
        }
    };
    model.price(&mut message.usage);
    let usage = message.usage;
    // Built once for the usage event and the span's end (shared: a clone is a reference).
    let mut usage_fields = None;
    record_event(names::PROVIDER_USAGE, || usage_fields.get_or_insert_with(|| usage_payload(&usage)).clone());
    span.record(|| {
        let mut p = usage_fields.take().unwrap_or_else(|| usage_payload(&usage));
        p = p
            .safe(names::STOP_REASON, message.stop_reason.as_str())
            .safe(names::RETRY_COUNT, retries)
            .safe(names::ABORTED, message.stop_reason == StopReason::Aborted)
            .safe(names::TIMEOUT, matches!(error, Some(ProviderError::Timeout(_))))
            .safe(names::RESPONSE_MODEL, response_model_of(model.catalogued, &model.id, &message.model))
            .content_with(ContentKind::Completion, names::COMPLETION_TEXT, || message.text())
            .content_with(ContentKind::Completion, names::OUTPUT_MESSAGES, || semconv::output_messages(&message));
        let thinking = message.thinking();
        if !thinking.is_empty() {
            p = p.content(ContentKind::Thinking, names::THINKING_TEXT, thinking);
        }
        if let Some(status) = status {
            p = p.safe(names::STATUS_CODE, status);
        }
        if let Some(ttft) = first_token {
            p = p.safe(names::TIME_TO_FIRST_TOKEN_MS, ttft.as_millis() as u64);
        }
        p
    });
    RequestOutcome { message, retries, error }
}

impl pi_observe_core::Outcome for RequestOutcome {
    fn error_info(&self) -> Option<pi_observe_core::ErrorInfo> {
        self.error.as_ref().map(ProviderError::error_info)
    }
}

/// The names of a model as the contract carries them, classified the same way for a live run and
/// for a replay (`pi export`): the API as recorded when it is one of upstream's API names; the
/// provider and model as named when pi's catalogue or a `models.json` has them (`catalogued`),
/// else `invalid` — a name only a user typed is content, which a sink capturing prompts also
/// gets (`requestedProvider`, `requestedModel`). `api` is `None` where the record has none.
pub fn model_names(api: Option<&str>, provider: &str, model: &str, catalogued: Catalogued) -> Payload {
    const INVALID: &str = "invalid";
    let mut p = Payload::new();
    if let Some(api) = api {
        let known = crate::model::UPSTREAM_API_NAMES.contains(&api);
        p = p.safe(names::API, if known { api.to_owned() } else { INVALID.to_owned() });
    }
    let (provider_ok, model_ok) = match catalogued {
        Catalogued::Model => (true, true),
        Catalogued::Provider => (true, false),
        Catalogued::Neither => (false, false),
    };
    p = p.safe(names::PROVIDER, if provider_ok { provider.to_owned() } else { INVALID.to_owned() });
    p = p.safe(names::MODEL, if model_ok { model.to_owned() } else { INVALID.to_owned() });
    if !provider_ok {
        p = p.content(ContentKind::Prompt, names::REQUESTED_PROVIDER, provider.to_owned());
    }
    if !model_ok {
        p = p.content(ContentKind::Prompt, names::REQUESTED_MODEL, model.to_owned());
    }
    p
}

/// The model a provider's response names, as the contract carries it (live and replayed alike):
/// itself when identifier-shaped and not a secret, else `invalid`.
pub fn response_model(model: &str) -> String {
    pi_observe_core::identifier_or_invalid(model)
}

/// [`response_model`] of a response to a request for the model `requested`: the requested id
/// itself, unchecked, when the response repeats it and it is catalogued — it is exported as safe
/// already ([`model_names`]).
pub fn response_model_of(catalogued: Catalogued, requested: &str, response: &str) -> String {
    if catalogued == Catalogued::Model && response == requested {
        return response.to_owned();
    }
    response_model(response)
}

/// The safe usage fields of the contract: the tokens, and the cost — or, when no price was known,
/// `cost.unknown` instead of costs (a zero would read as free).
pub fn usage_payload(usage: &crate::message::Usage) -> Payload {
    let tokens = Payload::new()
        .safe(names::INPUT_TOKENS, usage.input)
        .safe(names::OUTPUT_TOKENS, usage.output)
        .safe(names::CACHE_READ_TOKENS, usage.cache_read)
        .safe(names::CACHE_WRITE_TOKENS, usage.cache_write)
        .safe(names::TOTAL_TOKENS, usage.total_tokens);
    if usage.cost.unknown {
        return tokens.safe(names::COST_UNKNOWN, true);
    }
    tokens
        .safe(names::COST_TOTAL, usage.cost.total)
        .safe(names::COST_INPUT, usage.cost.input)
        .safe(names::COST_OUTPUT, usage.cost.output)
        .safe(names::COST_CACHE_READ, usage.cost.cache_read)
        .safe(names::COST_CACHE_WRITE, usage.cost.cache_write)
}

/// Builds the provider for a model: `faux` gets `faux`, others their HTTP client; a model on an
/// API pi has no client for is a configuration error naming it.
pub fn provider_for(model: &ModelInfo, http: &HttpConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    use crate::model::Api;
    if model.needs_login() {
        return Err(ProviderError::Config(format!(
            "{} needs a subscription login (OAuth), which pi does not offer",
            model.provider
        )));
    }
    Ok(match model.api {
        Api::Faux => Arc::new(FauxProvider::new()),
        Api::OpenAiCompletions => Arc::new(OpenAiProvider::new(http.clone(), &model.provider)?),
        Api::OpenAiResponses => Arc::new(ResponsesProvider::openai(http.clone(), &model.provider)?),
        Api::AzureOpenAiResponses => {
            Arc::new(ResponsesProvider::azure(http.clone(), &model.provider, model.base_url.as_deref())?)
        }
        Api::AnthropicMessages => Arc::new(AnthropicProvider::new(http.clone(), &model.provider)?),
        Api::GoogleGenerativeAi => Arc::new(GoogleProvider::new(http.clone(), &model.provider)?),
        Api::MistralConversations => Arc::new(MistralProvider::new(http.clone(), &model.provider)?),
        Api::BedrockConverseStream => Arc::new(BedrockProvider::new(http.clone(), &model.provider)?),
        Api::OpenAiCodexResponses | Api::GoogleGeminiCli => {
            return Err(ProviderError::Config(format!(
                "the {} API needs a subscription login (OAuth), which pi does not offer",
                model.api.as_str()
            )));
        }
        other => {
            return Err(ProviderError::Config(format!(
                "pi has no client for the {} API yet (it speaks {})",
                other.as_str(),
                Api::spoken_names().join(", ")
            )));
        }
    })
}
