//! The harness: prompt → turns → provider request → tool calls, persisted to the session and
//! traced as `pi.agent.prompt` → `pi.agent.turn` → `pi.ai.provider.request` / `pi.agent.tool_call`
//! → `pi.agent.session.append_entry`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_observe_core::{ContentKind, Outcome, Payload, Span, names, trace_operation, trace_operation_with};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::events::{AgentEvent, Delta};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage};
use crate::model::ModelInfo;
use crate::provider::{self, Provider, ProviderError, ProviderRequest, RetryPolicy, StreamEvent};
use crate::session::{ATTRIBUTION_CUSTOM_TYPE, EntryKind, SessionError, SessionWriter};
use crate::time::now_millis;
use crate::tools::{SessionEnv, ToolContext, ToolError, ToolRegistry};

/// Where a prompt came from (the `source` attribute of `pi.agent.prompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptSource {
    /// Typed by a user in an interactive UI.
    Interactive,
    /// Sent over RPC.
    Rpc,
    /// Injected by an extension.
    Extension,
    /// `pi -p`.
    Print,
}

impl PromptSource {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptSource::Interactive => "interactive",
            PromptSource::Rpc => "rpc",
            PromptSource::Extension => "extension",
            PromptSource::Print => "print",
        }
    }
}

/// Harness settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// System prompt.
    pub system_prompt: Option<String>,
    /// Turns per prompt before giving up.
    pub max_turns: usize,
    /// Run the tool calls of one turn concurrently (results still in source order).
    pub parallel_tools: bool,
    /// Reasoning level passed to the provider.
    pub reasoning: Option<String>,
    /// Give child processes `PI_*` and `TRACEPARENT` (off also strips inherited values).
    pub expose_session_environment: bool,
    /// Provider retry policy.
    pub retry: RetryPolicy,
    /// Prompt source.
    pub source: PromptSource,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system_prompt: Some(
                "You are pi, a coding agent. Use the tools to read, change and run code in the working directory."
                    .into(),
            ),
            max_turns: 32,
            parallel_tools: true,
            reasoning: None,
            expose_session_environment: true,
            retry: RetryPolicy::default(),
            source: PromptSource::Interactive,
        }
    }
}

/// Why a prompt could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// How a prompt ended.
#[derive(Debug, Clone)]
pub struct PromptResult {
    /// Why it stopped (`stop`, `toolUse` only if turns ran out, `error`, `aborted`, `length`).
    pub stop_reason: StopReason,
    /// The last assistant message.
    pub last_message: Option<AssistantMessage>,
    /// Usage of every request and tool in this prompt.
    pub usage: Usage,
    /// Turns run.
    pub turns: usize,
    /// The provider error that ended the prompt, if any.
    pub error: Option<ProviderError>,
}

impl Outcome for PromptResult {
    fn error_info(&self) -> Option<pi_observe_core::ErrorInfo> {
        self.error.as_ref().map(|e| pi_observe_core::ErrorInfo::new("ProviderError", e.to_string()))
    }
}

/// The agent: a model, tools, a conversation and (optionally) a session file.
pub struct Agent {
    provider: Arc<dyn Provider>,
    model: ModelInfo,
    tools: ToolRegistry,
    session: Option<Arc<Mutex<SessionWriter>>>,
    messages: Vec<Message>,
    config: AgentConfig,
    cwd: PathBuf,
    model_recorded: bool,
}

/// Receives agent events.
pub type AgentSink<'a> = &'a mut (dyn FnMut(AgentEvent) + Send);

impl Agent {
    /// An agent. With a session, its messages are loaded as the conversation so far.
    pub fn new(
        provider: Arc<dyn Provider>,
        model: ModelInfo,
        tools: ToolRegistry,
        session: Option<SessionWriter>,
        config: AgentConfig,
        cwd: PathBuf,
    ) -> Self {
        let messages = session
            .as_ref()
            .map(|s| {
                s.entries()
                    .iter()
                    .filter_map(|e| match &e.kind {
                        EntryKind::Message { message } => Some(message.clone()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let model_recorded = session.as_ref().is_some_and(|s| {
            s.entries().iter().rev().find_map(|e| match &e.kind {
                EntryKind::ModelChange { provider, model_id } => {
                    Some(provider == &model.provider && model_id == &model.id)
                }
                _ => None,
            }) == Some(true)
        });
        Agent {
            provider,
            model,
            tools,
            session: session.map(|s| Arc::new(Mutex::new(s))),
            messages,
            config,
            cwd,
            model_recorded,
        }
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The session id, if there is a session.
    pub fn session_id(&self) -> Option<String> {
        self.session.as_ref().map(|s| lock(s).id().to_owned())
    }

    fn session_file(&self) -> Option<String> {
        self.session.as_ref().map(|s| lock(s).path().display().to_string())
    }

    fn append(&self, kind: EntryKind) -> Result<(), SessionError> {
        match &self.session {
            Some(session) => lock(session).append(kind).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Runs one prompt to completion (or abort), as a `pi.agent.prompt` operation.
    pub async fn prompt(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        let session_id = self.session_id();
        let (provider, model, source) = (self.model.provider.clone(), self.model.id.clone(), self.config.source);
        let payload = move || {
            let mut p = Payload::new()
                .safe(names::PROVIDER, provider)
                .safe(names::MODEL, model)
                .safe(names::PROMPT_LENGTH, text.chars().count())
                .safe(names::IMAGE_COUNT, 0)
                .safe(names::SOURCE, source.as_str())
                .content(ContentKind::Prompt, names::PROMPT_TEXT, text);
            if let Some(id) = session_id {
                p = p.safe(names::SESSION_ID, id);
            }
            p
        };
        let text = text.to_owned();
        trace_operation_with(names::AGENT_PROMPT, payload, move |span: Span| async move {
            let result = self.run_prompt(text, cancel, on_event).await;
            if let Ok(result) = &result {
                span.record(|| {
                    provider::usage_payload(&result.usage)
                        .safe(names::STOP_REASON, result.stop_reason.as_str())
                        .safe(names::ABORTED, result.stop_reason == StopReason::Aborted)
                        .safe("turns", result.turns)
                });
                if let Some(error) = result.error_info() {
                    span.set_status(pi_observe_core::Status::Error(error));
                }
            }
            result
        })
        .await
    }

    async fn run_prompt(
        &mut self,
        text: String,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        on_event(AgentEvent::AgentStart);
        if !self.model_recorded {
            self.append(EntryKind::ModelChange {
                provider: self.model.provider.clone(),
                model_id: self.model.id.clone(),
            })?;
            self.model_recorded = true;
        }
        let attribution = pi_observe_core::current().attribution().clone();
        if !attribution.is_empty() {
            let data: serde_json::Map<String, Value> =
                attribution.iter().map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect();
            self.append(EntryKind::Custom { custom_type: ATTRIBUTION_CUSTOM_TYPE.into(), data: Value::Object(data) })?;
        }
        let user = Message::user(text);
        on_event(AgentEvent::MessageStart { role: "user".into() });
        self.append(EntryKind::Message { message: user.clone() })?;
        self.messages.push(user.clone());
        on_event(AgentEvent::MessageEnd { message: user });

        let mut result = PromptResult {
            stop_reason: StopReason::Stop,
            last_message: None,
            usage: Usage::default(),
            turns: 0,
            error: None,
        };
        for turn_index in 0..self.config.max_turns {
            result.turns = turn_index + 1;
            let turn = trace_operation(
                names::AGENT_TURN,
                Payload::new().safe(names::TURN_INDEX, turn_index),
                self.run_turn(turn_index, cancel, &mut *on_event),
            )
            .await?;
            result.usage.add(&turn.usage);
            result.stop_reason = turn.message.stop_reason;
            result.error = turn.error;
            result.last_message = Some(turn.message);
            if !turn.continue_loop {
                break;
            }
        }
        if cancel.is_cancelled() {
            result.stop_reason = StopReason::Aborted;
        }
        on_event(AgentEvent::AgentEnd { stop_reason: result.stop_reason, usage: result.usage });
        Ok(result)
    }

    async fn run_turn(
        &mut self,
        turn_index: usize,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<TurnResult, AgentError> {
        on_event(AgentEvent::TurnStart { turn_index });
        let request = ProviderRequest {
            model: self.model.clone(),
            system_prompt: self.config.system_prompt.clone(),
            messages: self.messages.clone(),
            tools: self.tools.specs(),
            reasoning: self.config.reasoning.clone(),
            session_id: self.session_id(),
        };
        on_event(AgentEvent::MessageStart { role: "assistant".into() });
        let mut forward = |event: StreamEvent| {
            let delta = match event {
                StreamEvent::TextDelta(text) => Delta::Text { text },
                StreamEvent::ThinkingDelta(text) => Delta::Thinking { text },
                StreamEvent::ToolCallStart { id, name, .. } => {
                    Delta::ToolCallStart { tool_call_id: id, tool_name: name }
                }
                StreamEvent::ToolCallDelta { index, delta } => Delta::ToolCallArgs { index, text: delta },
                StreamEvent::Start | StreamEvent::ToolCallEnd { .. } | StreamEvent::Done { .. } => return,
            };
            on_event(AgentEvent::MessageUpdate { delta });
        };
        let outcome =
            provider::request(self.provider.as_ref(), &request, &self.config.retry, cancel, &mut forward).await;
        let message = outcome.message;
        self.append(EntryKind::Message { message: Message::Assistant(message.clone()) })?;
        self.messages.push(Message::Assistant(message.clone()));
        on_event(AgentEvent::MessageEnd { message: Message::Assistant(message.clone()) });
        let mut usage = message.usage;

        let calls = message.tool_calls();
        let continue_loop = message.stop_reason == StopReason::ToolUse && !calls.is_empty();
        if continue_loop {
            let results = self.run_tools(calls, cancel, &mut *on_event).await?;
            for result in results {
                if let Some(u) = &result.usage {
                    usage.add(u);
                }
                let message = Message::ToolResult(result);
                on_event(AgentEvent::MessageStart { role: "toolResult".into() });
                self.messages.push(message.clone());
                on_event(AgentEvent::MessageEnd { message });
            }
        }
        on_event(AgentEvent::TurnEnd { turn_index });
        let aborted = cancel.is_cancelled();
        Ok(TurnResult { message, usage, continue_loop: continue_loop && !aborted, error: outcome.error })
    }

    /// Executes the calls (concurrently unless configured otherwise), each as a
    /// `pi.agent.tool_call` that appends its result to the session in source order.
    async fn run_tools(
        &self,
        calls: Vec<(String, String, Value)>,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<Vec<ToolResultMessage>, AgentError> {
        let ctx = ToolContext {
            cwd: self.cwd.clone(),
            cancel: cancel.clone(),
            env: SessionEnv {
                expose: self.config.expose_session_environment,
                session_id: self.session_id(),
                session_file: self.session_file(),
                provider: self.model.provider.clone(),
                model: self.model.id.clone(),
                reasoning: self.config.reasoning.clone(),
            },
        };
        for (id, name, args) in &calls {
            on_event(AgentEvent::ToolExecutionStart {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
            });
        }
        let order = Arc::new(AppendOrder::default());
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut handles = Vec::new();
        for (position, (id, name, args)) in calls.into_iter().enumerate() {
            let job = ToolJob {
                position,
                id,
                name,
                args,
                tools: self.tools.clone(),
                ctx: ctx.clone(),
                session: self.session.clone(),
                order: order.clone(),
                done: done_tx.clone(),
            };
            if self.config.parallel_tools {
                handles.push(pi_observe_core::spawn(job.run()));
            } else {
                let result = job.run().await;
                handles.push(pi_observe_core::spawn(async move { result }));
            }
        }
        drop(done_tx);
        while let Some((id, name, is_error)) = done_rx.recv().await {
            on_event(AgentEvent::ToolExecutionEnd { tool_call_id: id, tool_name: name, is_error });
        }
        let mut results = Vec::with_capacity(handles.len());
        for handle in handles {
            match handle.await {
                Ok(result) => results.push(result?),
                Err(join) => {
                    // A tool task panicked: report it to the model as an error result.
                    results.push(ToolResultMessage {
                        tool_call_id: String::new(),
                        tool_name: String::new(),
                        content: vec![ContentBlock::text(format!("tool crashed: {join}"))],
                        details: None,
                        usage: None,
                        is_error: true,
                        timestamp: now_millis(),
                    });
                }
            }
        }
        Ok(results)
    }
}

struct TurnResult {
    message: AssistantMessage,
    usage: Usage,
    continue_loop: bool,
    error: Option<ProviderError>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lets concurrently running tool calls append their results in source order.
#[derive(Default)]
struct AppendOrder {
    next: Mutex<usize>,
    turn: Notify,
}

impl AppendOrder {
    async fn wait_for(&self, position: usize) {
        loop {
            let notified = self.turn.notified();
            if *lock(&self.next) == position {
                return;
            }
            notified.await;
        }
    }

    fn done(&self, position: usize) {
        *lock(&self.next) = position + 1;
        self.turn.notify_waiters();
    }
}

struct ToolJob {
    position: usize,
    id: String,
    name: String,
    args: Value,
    tools: ToolRegistry,
    ctx: ToolContext,
    session: Option<Arc<Mutex<SessionWriter>>>,
    order: Arc<AppendOrder>,
    done: mpsc::UnboundedSender<(String, String, bool)>,
}

impl ToolJob {
    async fn run(self) -> Result<ToolResultMessage, AgentError> {
        let ToolJob { position, id, name, args, tools, ctx, session, order, done } = self;
        let (id, name, args) = (&id, &name, &args);
        let payload = || {
            Payload::new().safe(names::TOOL_NAME, name.clone()).safe(names::TOOL_CALL_ID, id.clone()).content(
                ContentKind::ToolArgs,
                names::TOOL_ARGS,
                args.to_string(),
            )
        };
        trace_operation_with(names::AGENT_TOOL_CALL, payload, move |span: Span| async move {
            let outcome = match tools.get(name) {
                Some(tool) => tool.execute(args, &ctx).await,
                None => Err(ToolError::UnknownTool(name.clone())),
            };
            let (text, details, is_error) = match outcome {
                Ok(out) => (out.content, out.details, false),
                Err(error) => (error.to_string(), None, true),
            };
            span.record(|| {
                Payload::new().safe(names::IS_ERROR, is_error).safe(names::RESULT_BYTES, text.len()).content(
                    ContentKind::ToolResult,
                    names::TOOL_RESULT,
                    text.clone(),
                )
            });
            if is_error {
                span.set_error("ToolError", first_line(&text));
            }
            let _ = done.send((id.clone(), name.clone(), is_error));
            let result = ToolResultMessage {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                content: vec![ContentBlock::text(text)],
                details,
                usage: None,
                is_error,
                timestamp: now_millis(),
            };
            order.wait_for(position).await;
            let appended = match &session {
                Some(session) => lock(session)
                    .append(EntryKind::Message { message: Message::ToolResult(result.clone()) })
                    .map(|_| ()),
                None => Ok(()),
            };
            order.done(position);
            appended?;
            Ok(result)
        })
        .await
    }
}

/// The first line of a message, for error summaries.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
