//! The harness: prompt → turns → provider request → tool calls, persisted to the session and
//! traced as `pi.agent.prompt` → `pi.agent.turn` → `pi.ai.provider.request` / `pi.agent.tool_call`
//! → `pi.agent.session.append_entry`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_observe_core::{ContentKind, Outcome, Payload, Span, names, trace_operation, trace_operation_with};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::compaction::{self, CompactionReason, CompactionSettings};
use crate::events::{AgentEvent, Delta};
use crate::extensions::{
    BeforeAgentStartEvent, Extension, HookContext, Hooks, InputEvent, InputOutcome, ProviderHeadersEvent,
    ProviderResponseEvent, SessionFacade, ToolCallEvent, ToolResultEvent,
};
use crate::message::{AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage};
use crate::model::ModelInfo;
use crate::provider::{self, Provider, ProviderError, ProviderRequest, RequestControl, RetryPolicy, StreamEvent};
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
    /// A user interface can answer extension questions (`false` in print and JSON mode).
    pub has_ui: bool,
    /// Automatic compaction.
    pub compaction: CompactionSettings,
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
            has_ui: false,
            compaction: CompactionSettings::default(),
        }
    }
}

/// Why a prompt could not run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The session could not be written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Branch navigation needs a session.
    #[error("branch navigation needs a session")]
    NoSession,
}

/// How a branch navigation ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Navigation {
    /// The leaf moved.
    pub moved: bool,
    /// The extension that cancelled the move.
    pub cancelled_by: Option<String>,
    /// Entries on the abandoned branch.
    pub abandoned_entries: usize,
    /// The branch summary written, and the usage of the call that wrote it (none when an
    /// extension supplied it).
    pub summary: Option<(String, Option<Usage>)>,
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
    /// The extension whose `input` handler handled the prompt (the agent did not start).
    pub handled_by: Option<String>,
}

impl Outcome for PromptResult {
    fn error_info(&self) -> Option<pi_observe_core::ErrorInfo> {
        self.error.as_ref().map(ProviderError::error_info)
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
    hooks: Arc<Hooks>,
    session_started: bool,
    resources: crate::resources::Resources,
    /// Assistant usage before this index describes a context replaced by a compaction.
    trust_usage_from: usize,
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
        let (messages, trust_usage_from) = match &session {
            Some(s) => compaction::context_from(s.branch(s.leaf())),
            None => (Vec::new(), 0),
        };
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
            hooks: Arc::new(Hooks::new()),
            session_started: false,
            resources: Default::default(),
            trust_usage_from,
        }
    }

    /// Skills and prompt templates for `/skill:name` and `/name` input (expanded after the
    /// `input` hook, before `before_agent_start`); skills are also listed in the system prompt.
    pub fn set_resources(&mut self, resources: crate::resources::Resources) {
        self.resources = resources;
    }

    /// Adds an extension: its handlers run after those of extensions added before it.
    pub fn add_extension(&mut self, extension: &dyn Extension) {
        // The hooks are shared only with tasks of a running prompt, and prompts borrow the
        // agent mutably, so this is the only owner here.
        if let Some(hooks) = Arc::get_mut(&mut self.hooks) {
            hooks.add(extension);
        }
    }

    /// The extensions added, in order.
    pub fn extensions(&self) -> &[String] {
        self.hooks.extensions()
    }

    fn hook_context(&self, cancel: &CancellationToken) -> HookContext {
        HookContext {
            has_ui: self.config.has_ui,
            cancel: cancel.clone(),
            cwd: self.cwd.clone(),
            session: SessionFacade(self.session.clone()),
            model: self.model.clone(),
        }
    }

    /// Sends an event to the sink and to the extensions' notification handlers, then reports
    /// handler failures.
    async fn emit(&self, event: AgentEvent, ctx: &HookContext, on_event: AgentSink<'_>) {
        self.hooks.notify(&event, ctx).await;
        on_event(event);
        report_failures(&self.hooks, on_event);
    }

    /// Runs the `message_end` chain on a finalized message, then reports it.
    async fn finalize(&self, message: Message, ctx: &HookContext, on_event: AgentSink<'_>) -> Message {
        let message = self.hooks.message_end(message, ctx).await;
        on_event(AgentEvent::MessageEnd { message: message.clone() });
        report_failures(&self.hooks, on_event);
        message
    }

    /// Emits `session_start` (once, before the first prompt).
    pub async fn start_session(&mut self, on_event: AgentSink<'_>) {
        if self.session_started {
            return;
        }
        self.session_started = true;
        let ctx = self.hook_context(&CancellationToken::new());
        self.emit(AgentEvent::SessionStart { session_id: self.session_id() }, &ctx, on_event).await;
    }

    /// Emits `session_shutdown`; call once when the agent is done.
    pub async fn shutdown(&mut self, on_event: AgentSink<'_>) {
        let ctx = self.hook_context(&CancellationToken::new());
        self.emit(AgentEvent::SessionShutdown, &ctx, on_event).await;
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

    /// True when the latest attribution entry on the current branch is not empty.
    fn branch_attributed(&self) -> bool {
        let Some(session) = &self.session else { return false };
        let session = lock(session);
        let branch = session.branch(session.leaf());
        let last = branch.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Custom { custom_type, data } if custom_type == ATTRIBUTION_CUSTOM_TYPE => Some(data),
            _ => None,
        });
        last.and_then(Value::as_object).is_some_and(|map| !map.is_empty())
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
                .content(ContentKind::Prompt, names::PROMPT_TEXT, text.to_owned());
            if let Some(id) = session_id {
                p = p.safe(names::SESSION_ID, id);
            }
            p
        };
        let text = text.to_owned();
        trace_operation_with(names::AGENT_PROMPT, payload, move |span: Span| async move {
            let result = self.run_prompt(text, cancel, on_event).await;
            if let Ok(PromptResult { handled_by: Some(extension), .. }) = &result {
                span.record(|| Payload::new().safe("handled", true).safe(names::EXTENSION_NAME, extension.clone()));
            }
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
        self.start_session(&mut *on_event).await;
        let ctx = self.hook_context(cancel);
        let mut result = PromptResult {
            stop_reason: StopReason::Stop,
            last_message: None,
            usage: Usage::default(),
            turns: 0,
            error: None,
            handled_by: None,
        };
        let input = InputEvent { text, images: 0, source: self.config.source };
        let text = match self.hooks.input(input, &ctx).await {
            InputOutcome::Continue(text) => text,
            InputOutcome::Handled { extension } => {
                report_failures(&self.hooks, on_event);
                result.handled_by = Some(extension);
                return Ok(result);
            }
        };
        report_failures(&self.hooks, on_event);
        if let Some(instructions) = manual_compaction(&text) {
            let compacted =
                self.run_compaction(CompactionReason::Manual, false, instructions, cancel, &ctx, on_event).await?;
            if let Some(usage) = compacted {
                result.usage.add(&usage);
            }
            return Ok(result);
        }
        let text = match self.resources.expand(&text) {
            Some(expansion) => expansion.text().to_owned(),
            None => text,
        };
        let skills = self.resources.system_prompt_section();
        let system_prompt = match &self.config.system_prompt {
            Some(prompt) => Some(format!("{prompt}{skills}")),
            None if !skills.is_empty() => Some(skills.trim_start().to_owned()),
            None => None,
        };
        let start = BeforeAgentStartEvent { prompt: text.clone(), system_prompt };
        let (injected, system_prompt) = self.hooks.before_agent_start(start, &ctx).await;
        report_failures(&self.hooks, on_event);

        self.emit(AgentEvent::AgentStart, &ctx, on_event).await;
        if !self.model_recorded {
            self.append(EntryKind::ModelChange {
                provider: self.model.provider.clone(),
                model_id: self.model.id.clone(),
            })?;
            self.model_recorded = true;
        }
        let attribution = pi_observe_core::current().attribution().clone();
        // An empty attribution is recorded too when the branch's last one named someone, so
        // this prompt's usage is not attributed to them (`pi report` reads it from the tree).
        if !attribution.is_empty() || self.branch_attributed() {
            let data: serde_json::Map<String, Value> =
                attribution.iter().map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect();
            self.append(EntryKind::Custom { custom_type: ATTRIBUTION_CUSTOM_TYPE.into(), data: Value::Object(data) })?;
        }
        self.emit(AgentEvent::MessageStart { role: "user".into() }, &ctx, on_event).await;
        let user = self.finalize(Message::user(text), &ctx, on_event).await;
        self.append(EntryKind::Message { message: user.clone() })?;
        self.messages.push(user);
        for message in &injected {
            self.append(crate::extensions::injected_entry(message))?;
            self.messages.push(crate::extensions::injected_as_user(message));
        }

        let mut overflow_retried = false;
        for turn_index in 0..self.config.max_turns {
            if self.over_threshold() {
                let compacted =
                    self.run_compaction(CompactionReason::Threshold, false, None, cancel, &ctx, on_event).await?;
                if let Some(usage) = compacted {
                    result.usage.add(&usage);
                }
            }
            result.turns = turn_index + 1;
            let retry_on_overflow = self.config.compaction.enabled && !overflow_retried;
            let turn = trace_operation(
                names::AGENT_TURN,
                Payload::new().safe(names::TURN_INDEX, turn_index),
                self.run_turn(turn_index, system_prompt.clone(), retry_on_overflow, cancel, &ctx, &mut *on_event),
            )
            .await?;
            if turn.overflowed {
                // The provider said the context is too long: compact, then retry the turn once.
                overflow_retried = true;
                let compacted =
                    self.run_compaction(CompactionReason::Overflow, true, None, cancel, &ctx, on_event).await?;
                if let Some(usage) = compacted {
                    result.usage.add(&usage);
                    continue;
                }
                // Compaction failed: the error stands, and is persisted like any other.
                self.append(EntryKind::Message { message: Message::Assistant(turn.message.clone()) })?;
                self.messages.push(Message::Assistant(turn.message.clone()));
            }
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
        self.emit(AgentEvent::AgentEnd { stop_reason: result.stop_reason, usage: result.usage }, &ctx, on_event).await;
        self.emit(AgentEvent::AgentSettled, &ctx, on_event).await;
        Ok(result)
    }

    async fn run_turn(
        &mut self,
        turn_index: usize,
        system_prompt: Option<String>,
        retry_on_overflow: bool,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<TurnResult, AgentError> {
        self.emit(AgentEvent::TurnStart { turn_index }, ctx, on_event).await;
        let messages = self.hooks.context(self.messages.clone(), ctx).await;
        report_failures(&self.hooks, on_event);
        let mut request = ProviderRequest {
            model: self.model.clone(),
            system_prompt,
            messages,
            tools: self.tools.specs(),
            reasoning: self.config.reasoning.clone(),
            session_id: self.session_id(),
            control: RequestControl::default(),
        };
        request.control = self.request_control(&request, ctx, on_event).await;
        self.emit(AgentEvent::MessageStart { role: "assistant".into() }, ctx, on_event).await;
        // Stream deltas go to the sink as they arrive and, in order, to `message_update`
        // handlers on this task while the request runs.
        let (updates_tx, mut updates_rx) = mpsc::unbounded_channel::<AgentEvent>();
        let wants_updates = self.hooks.has(crate::extensions::hooks::Notify::MessageUpdate);
        let sink: AgentSink<'_> = &mut *on_event;
        // Owns the sender: dropping it when the request is done ends the delivery loop.
        let mut forward = move |event: StreamEvent| {
            let delta = match event {
                StreamEvent::TextDelta(text) => Delta::Text { text },
                StreamEvent::ThinkingDelta(text) => Delta::Thinking { text },
                StreamEvent::ToolCallStart { id, name, .. } => {
                    Delta::ToolCallStart { tool_call_id: id, tool_name: name }
                }
                StreamEvent::ToolCallDelta { index, delta } => Delta::ToolCallArgs { index, text: delta },
                StreamEvent::Start | StreamEvent::ToolCallEnd { .. } | StreamEvent::Done { .. } => return,
            };
            let update = AgentEvent::MessageUpdate { delta };
            if wants_updates {
                let _ = updates_tx.send(update.clone());
            }
            sink(update);
        };
        let hooks = self.hooks.clone();
        let deliver_updates = async {
            while let Some(update) = updates_rx.recv().await {
                hooks.notify(&update, ctx).await;
            }
        };
        let requested = async {
            let outcome =
                provider::request(self.provider.as_ref(), &request, &self.config.retry, cancel, &mut forward).await;
            drop(forward);
            outcome
        };
        let (outcome, ()) = tokio::join!(requested, deliver_updates);
        report_failures(&self.hooks, on_event);
        let message = match self.finalize(Message::Assistant(outcome.message.clone()), ctx, on_event).await {
            Message::Assistant(message) => message,
            // `message_end` keeps roles.
            _ => outcome.message,
        };
        if retry_on_overflow && outcome.error.as_ref().is_some_and(compaction::is_context_overflow) {
            // Not persisted: the caller compacts and retries this turn (or persists it if it cannot).
            self.emit(AgentEvent::TurnEnd { turn_index }, ctx, on_event).await;
            let usage = message.usage;
            return Ok(TurnResult { message, usage, continue_loop: false, error: outcome.error, overflowed: true });
        }
        self.append(EntryKind::Message { message: Message::Assistant(message.clone()) })?;
        self.messages.push(Message::Assistant(message.clone()));
        let mut usage = message.usage;

        let calls = message.tool_calls();
        let continue_loop = message.stop_reason == StopReason::ToolUse && !calls.is_empty();
        if continue_loop {
            let results = self.run_tools(calls, cancel, ctx, &mut *on_event).await?;
            for result in results {
                if let Some(u) = &result.usage {
                    usage.add(u);
                }
                self.messages.push(Message::ToolResult(result));
            }
        }
        self.emit(AgentEvent::TurnEnd { turn_index }, ctx, on_event).await;
        let aborted = cancel.is_cancelled();
        Ok(TurnResult {
            message,
            usage,
            continue_loop: continue_loop && !aborted,
            error: outcome.error,
            overflowed: false,
        })
    }

    fn over_threshold(&self) -> bool {
        let settings = &self.config.compaction;
        settings.enabled
            && compaction::context_tokens(&self.messages, self.trust_usage_from)
                > self.model.context_window.saturating_sub(settings.reserve_tokens)
    }

    /// Compacts the conversation now (what `/compact [instructions]` does). Returns whether it
    /// compacted (not: cancelled by an extension, nothing old enough to summarize, or the
    /// summary request failed — each reported as `session_compact_failed`).
    pub async fn compact(
        &mut self,
        instructions: Option<&str>,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<bool, AgentError> {
        let ctx = self.hook_context(cancel);
        let compacted =
            self.run_compaction(CompactionReason::Manual, false, instructions, cancel, &ctx, on_event).await?;
        Ok(compacted.is_some())
    }

    /// One compaction as a `pi.agent.compaction` operation; `Some(summary usage)` when it
    /// compacted.
    async fn run_compaction(
        &mut self,
        reason: CompactionReason,
        will_retry: bool,
        instructions: Option<&str>,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Option<Usage>, AgentError> {
        let payload =
            || Payload::new().safe(names::COMPACTION_REASON, reason.as_str()).safe(names::WILL_RETRY, will_retry);
        trace_operation_with(names::AGENT_COMPACTION, payload, |span: Span| async move {
            let tokens_before = compaction::context_tokens(&self.messages, self.trust_usage_from);
            let (previous, start) = match self.messages.first().and_then(compaction::summary_of) {
                Some(previous) => (Some(previous), 1),
                None => (None, 0),
            };
            let cut = compaction::find_cut(&self.messages, self.config.compaction.keep_recent_tokens).max(start);
            let cut = if cut == start {
                // Everything counts as recent, yet compaction was asked for (or the context is
                // too big): keep only from the last message boundary.
                compaction::find_cut(&self.messages, 1).max(start)
            } else {
                cut
            };
            if cut <= start {
                return self
                    .compaction_failed(&span, reason, "nothing old enough to summarize".into(), ctx, on_event)
                    .await;
            }
            let to_summarize = self.messages[start..cut].to_vec();
            let kept = self.messages[cut..].to_vec();
            let before = crate::extensions::BeforeCompactEvent {
                reason: reason.as_str().into(),
                tokens_before,
                messages_to_summarize: to_summarize.clone(),
                kept_messages: kept.len(),
            };
            let decision = self.hooks.session_before(crate::extensions::hooks::SessionBeforeCompact, before, ctx).await;
            report_failures(&self.hooks, on_event);
            let (summary, usage, from_extension) = match decision {
                Some((extension, decision)) if decision.cancel => {
                    return self
                        .compaction_failed(&span, reason, format!("cancelled by extension {extension}"), ctx, on_event)
                        .await;
                }
                Some((_, crate::extensions::BeforeResult { summary: Some(summary), .. })) => (summary, None, true),
                _ => {
                    let conversation = compaction::serialize_conversation(&to_summarize);
                    let outcome = self.summarize(&conversation, previous.as_deref(), instructions, cancel).await;
                    if let Some(error) = outcome.error {
                        return self
                            .compaction_failed(&span, reason, format!("summary request failed: {error}"), ctx, on_event)
                            .await;
                    }
                    (outcome.message.text(), Some(outcome.message.usage), false)
                }
            };
            self.append(EntryKind::Compaction {
                summary: summary.clone(),
                first_kept_entry_id: None,
                tokens_before,
                usage,
                retained_tail: Some(kept.clone()),
                details: None,
                from_hook: from_extension.then_some(true),
            })?;
            self.messages = vec![compaction::summary_message(&summary)];
            self.messages.extend(kept);
            self.trust_usage_from = self.messages.len();
            let tokens_after = compaction::context_tokens(&self.messages, self.trust_usage_from);
            span.record(|| {
                let mut p = Payload::new()
                    .safe(names::TOKENS_BEFORE, tokens_before)
                    .safe(names::TOKENS_AFTER, tokens_after)
                    .safe("summarizedMessages", to_summarize.len())
                    .safe("fromExtension", from_extension)
                    .content(ContentKind::Completion, "summary", summary.clone());
                if let Some(usage) = &usage {
                    p.merge(provider::usage_payload(usage));
                }
                p
            });
            let event = AgentEvent::SessionCompact {
                reason: reason.as_str().into(),
                tokens_before,
                tokens_after,
                from_extension,
            };
            self.emit(event, ctx, on_event).await;
            Ok(Some(usage.unwrap_or_default()))
        })
        .await
    }

    /// Moves the session leaf to `target_id` (an earlier entry), optionally writing a summary of
    /// the abandoned branch as a `branch_summary` entry; the conversation continues from there.
    /// Runs `session_before_tree` (cancel, or supply the summary) and is traced as
    /// `pi.agent.branch_navigation` (with the summary request as a child).
    pub async fn navigate(
        &mut self,
        target_id: &str,
        summarize: bool,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<Navigation, AgentError> {
        let session = self.session.clone().ok_or(AgentError::NoSession)?;
        let ctx = self.hook_context(cancel);
        let payload = || Payload::new().safe("summarize", summarize).safe("targetId", target_id.to_owned());
        trace_operation_with(names::AGENT_BRANCH_NAVIGATION, payload, |span: Span| async move {
            let (old_leaf, abandoned) = {
                let writer = lock(&session);
                if !writer.entries().iter().any(|e| e.id == target_id) {
                    return Err(SessionError::UnknownEntry {
                        path: writer.path().display().to_string(),
                        id: target_id.to_owned(),
                    }
                    .into());
                }
                let keep: std::collections::HashSet<&str> =
                    writer.branch(Some(target_id)).iter().map(|e| e.id.as_str()).collect();
                let abandoned: Vec<crate::session::Entry> = writer
                    .branch(writer.leaf())
                    .into_iter()
                    .filter(|e| !keep.contains(e.id.as_str()))
                    .cloned()
                    .collect();
                (writer.leaf().map(str::to_owned), abandoned)
            };
            let mut navigation =
                Navigation { moved: false, cancelled_by: None, abandoned_entries: abandoned.len(), summary: None };
            let event = crate::extensions::BeforeTreeEvent {
                old_leaf_id: old_leaf.clone(),
                target_id: target_id.to_owned(),
                summarize,
            };
            let decision = self.hooks.session_before(crate::extensions::hooks::SessionBeforeTree, event, &ctx).await;
            report_failures(&self.hooks, on_event);
            let supplied = match decision {
                Some((extension, decision)) if decision.cancel => {
                    span.record(|| Payload::new().safe("cancelledBy", extension.clone()));
                    navigation.cancelled_by = Some(extension);
                    return Ok(navigation);
                }
                Some((_, decision)) => decision.summary,
                None => None,
            };
            let summary = match supplied {
                Some(summary) => Some((summary, None)),
                None if summarize && !abandoned.is_empty() => {
                    let (messages, _) = compaction::context_from(abandoned.iter());
                    let focus =
                        "Summarize the work done on this branch; the conversation goes back to an earlier point.";
                    let conversation = compaction::serialize_conversation(&messages);
                    let outcome = self.summarize(&conversation, None, Some(focus), cancel).await;
                    if let Some(error) = outcome.error {
                        span.set_error(names::ERROR_BRANCH_SUMMARY_FAILED, error.to_string());
                        return Ok(navigation);
                    }
                    Some((outcome.message.text(), Some(outcome.message.usage)))
                }
                None => None,
            };
            lock(&session).set_leaf(Some(target_id))?;
            if let Some((text, usage)) = &summary {
                let from_id = old_leaf.clone().unwrap_or_default();
                let from_hook = usage.is_none().then_some(true);
                let kind = EntryKind::BranchSummary {
                    from_id,
                    summary: text.clone(),
                    usage: *usage,
                    details: None,
                    from_hook,
                };
                lock(&session).append(kind)?;
            }
            let (messages, trust_usage_from) = {
                let writer = lock(&session);
                compaction::context_from(writer.branch(writer.leaf()))
            };
            self.messages = messages;
            self.trust_usage_from = trust_usage_from;
            navigation.moved = true;
            span.record(|| {
                let mut p = Payload::new()
                    .safe("abandonedEntries", navigation.abandoned_entries)
                    .safe("summarized", summary.is_some());
                if let Some((text, usage)) = &summary {
                    p = p.content(ContentKind::Completion, "summary", text.clone());
                    if let Some(usage) = usage {
                        p.merge(provider::usage_payload(usage));
                    }
                }
                p
            });
            navigation.summary = summary;
            let event = AgentEvent::SessionTree {
                old_leaf_id: old_leaf,
                new_leaf_id: lock(&session).leaf().map(str::to_owned),
                summarized: navigation.summary.is_some(),
            };
            self.emit(event, &ctx, on_event).await;
            Ok(navigation)
        })
        .await
    }

    /// One summarization request (compaction and branch summaries): the conversation as text,
    /// the previous summary if any, optional focus instructions; no tools.
    async fn summarize(
        &self,
        conversation: &str,
        previous: Option<&str>,
        instructions: Option<&str>,
        cancel: &CancellationToken,
    ) -> provider::RequestOutcome {
        let request = ProviderRequest {
            model: self.model.clone(),
            system_prompt: Some(compaction::SUMMARY_SYSTEM_PROMPT.into()),
            messages: vec![Message::user(compaction::summary_instructions(conversation, previous, instructions))],
            tools: Vec::new(),
            reasoning: None,
            session_id: None,
            control: RequestControl::default(),
        };
        provider::request(self.provider.as_ref(), &request, &self.config.retry, cancel, &mut |_| {}).await
    }

    /// Marks the compaction span failed and emits `session_compact_failed`.
    async fn compaction_failed(
        &self,
        span: &Span,
        reason: CompactionReason,
        error: String,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Option<Usage>, AgentError> {
        span.set_error(names::ERROR_COMPACTION_FAILED, error.clone());
        self.emit(AgentEvent::SessionCompactFailed { reason: reason.as_str().into(), error }, ctx, on_event).await;
        Ok(None)
    }

    /// Runs `before_provider_headers` and `before_provider_request` once for this request (its
    /// retries reuse the result) and wires `after_provider_response`.
    async fn request_control(
        &self,
        request: &ProviderRequest,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> RequestControl {
        use crate::extensions::hooks;
        let mut control = RequestControl::default();
        if self.hooks.has(hooks::BeforeProviderHeaders) {
            let event = ProviderHeadersEvent {
                provider: self.model.provider.clone(),
                model: self.model.id.clone(),
                headers: self.provider.default_headers().into_iter().collect(),
            };
            control.headers = self.hooks.before_provider_headers(event, ctx).await;
        }
        if self.hooks.has(hooks::BeforeProviderRequest) {
            let payload = self.provider.payload(request);
            control.payload = Some(self.hooks.before_provider_request(payload, ctx).await);
        }
        if self.hooks.has(hooks::AfterProviderResponse) {
            let (hooks, ctx) = (self.hooks.clone(), ctx.clone());
            control.on_response = Some(Arc::new(move |status, headers| {
                let (hooks, ctx) = (hooks.clone(), ctx.clone());
                Box::pin(
                    async move { hooks.after_provider_response(ProviderResponseEvent { status, headers }, &ctx).await },
                )
            }));
        }
        report_failures(&self.hooks, on_event);
        control
    }

    /// Executes the calls: first, in source order, `tool_execution_start` and the `tool_call`
    /// chain for each; then the tools run (concurrently unless configured otherwise), each as a
    /// `pi.agent.tool_call` that runs the `tool_result` chain and, in source order, emits
    /// `tool_execution_end`, runs `message_end` and appends its result to the session.
    async fn run_tools(
        &self,
        calls: Vec<(String, String, Value)>,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Vec<ToolResultMessage>, AgentError> {
        let tool_ctx = ToolContext {
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
            updates: None,
        };
        let mut prepared = Vec::with_capacity(calls.len());
        for (id, name, args) in calls {
            let start = AgentEvent::ToolExecutionStart {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
            };
            self.emit(start, ctx, on_event).await;
            let event = ToolCallEvent { tool_call_id: id.clone(), tool_name: name.clone(), input: args };
            let decision = self.hooks.tool_call(event, ctx).await;
            report_failures(&self.hooks, on_event);
            prepared.push((id, name, decision));
        }
        let order = Arc::new(AppendOrder::default());
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let mut handles = Vec::new();
        for (position, (id, name, decision)) in prepared.into_iter().enumerate() {
            let job = ToolJob {
                position,
                id,
                name,
                args: decision.input,
                blocked: decision.blocked,
                tools: self.tools.clone(),
                ctx: tool_ctx.clone(),
                hooks: self.hooks.clone(),
                hook_ctx: ctx.clone(),
                session: self.session.clone(),
                order: order.clone(),
                events: events_tx.clone(),
            };
            if self.config.parallel_tools {
                handles.push(pi_observe_core::spawn(job.run()));
            } else {
                let result = job.run().await;
                handles.push(pi_observe_core::spawn(async move { result }));
            }
        }
        drop(events_tx);
        while let Some(event) = events_rx.recv().await {
            on_event(event);
            report_failures(&self.hooks, on_event);
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

/// Sends handler failures to the sink as `extension_error` events.
fn report_failures(hooks: &Hooks, on_event: AgentSink<'_>) {
    for failure in hooks.take_failures() {
        on_event(AgentEvent::ExtensionError { extension: failure.extension, hook: failure.hook, error: failure.error });
    }
}

struct TurnResult {
    message: AssistantMessage,
    usage: Usage,
    continue_loop: bool,
    error: Option<ProviderError>,
    /// The provider rejected the context as too long and the message was not persisted.
    overflowed: bool,
}

/// `/compact [instructions]`: `Some(instructions)` (possibly empty → `None` inside).
fn manual_compaction(text: &str) -> Option<Option<&str>> {
    let rest = text.trim().strip_prefix("/compact")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(Some(rest.trim()).filter(|r| !r.is_empty()))
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
    blocked: Option<(String, String)>,
    tools: ToolRegistry,
    ctx: ToolContext,
    hooks: Arc<Hooks>,
    hook_ctx: HookContext,
    session: Option<Arc<Mutex<SessionWriter>>>,
    order: Arc<AppendOrder>,
    events: mpsc::UnboundedSender<AgentEvent>,
}

impl ToolJob {
    async fn run(self) -> Result<ToolResultMessage, AgentError> {
        let ToolJob { position, id, name, args, blocked, tools, ctx, hooks, hook_ctx, session, order, events } = self;
        let (id, name, args) = (&id, &name, &args);
        // The name the model asked for is safe only when it is a registered tool's.
        let registered = tools.get(name).map(|tool| (tool.name(), tool.output_kind()));
        let output_kind = registered.map_or(ContentKind::ToolResult, |(_, kind)| kind);
        let payload = || {
            let mut p = Payload::new()
                .safe(names::TOOL_NAME, registered.map_or(UNKNOWN_TOOL, |(name, _)| name))
                .safe(names::TOOL_CALL_ID, pi_observe_core::identifier_or_invalid(id))
                .content(ContentKind::ToolArgs, names::TOOL_ARGS, args.to_string());
            if registered.is_none() {
                p = p.content(ContentKind::ErrorText, REQUESTED_TOOL_NAME, name.clone());
            }
            p
        };
        trace_operation_with(names::AGENT_TOOL_CALL, payload, move |span: Span| async move {
            // Partial output goes out as `tool_execution_update` while the tool runs (these may
            // interleave across tools).
            let (updates_tx, mut updates_rx) = mpsc::unbounded_channel::<String>();
            let (tools, blocked_ref) = (&tools, &blocked);
            let execute = async move {
                let ctx = ToolContext { updates: Some(updates_tx), ..ctx };
                match blocked_ref {
                    Some((_, reason)) => (reason.clone(), None, true),
                    None => match tools.get(name) {
                        Some(tool) => match tool.execute(args, &ctx).await {
                            Ok(out) => (out.content, out.details, false),
                            Err(error) => (error.to_string(), None, true),
                        },
                        None => (ToolError::UnknownTool(name.clone()).to_string(), None, true),
                    },
                }
            };
            let forward_updates = async {
                while let Some(output) = updates_rx.recv().await {
                    let update =
                        AgentEvent::ToolExecutionUpdate { tool_call_id: id.clone(), tool_name: name.clone(), output };
                    hooks.notify(&update, &hook_ctx).await;
                    let _ = events.send(update);
                }
            };
            let ((text, details, is_error), ()) = tokio::join!(execute, forward_updates);
            let result = ToolResultEvent {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                input: args.clone(),
                content: vec![ContentBlock::text(text)],
                details,
                is_error,
            };
            let result = hooks.tool_result(result, &hook_ctx).await;
            let text = crate::message::joined_text(&result.content);
            span.record(|| {
                let mut p = Payload::new()
                    .safe(names::IS_ERROR, result.is_error)
                    .safe(names::RESULT_BYTES, text.len())
                    .safe(names::BLOCKED, blocked.is_some())
                    .content(output_kind, crate::tools::output_key(output_kind), text.clone());
                if let Some((extension, _)) = &blocked {
                    p = p.safe(names::BLOCKED_BY, extension.clone());
                }
                p
            });
            if result.is_error {
                let kind = match (&blocked, registered) {
                    (Some(_), _) => names::ERROR_BLOCKED,
                    (None, None) => names::ERROR_UNKNOWN_TOOL,
                    (None, Some(_)) => names::ERROR_TOOL,
                };
                // The text came from the tool (or an extension): error text, content.
                span.set_error(kind, first_line(&text));
            }
            let message = ToolResultMessage {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                content: result.content,
                details: result.details,
                usage: None,
                is_error: result.is_error,
                timestamp: now_millis(),
            };
            order.wait_for(position).await;
            // In source order: tool_execution_end, the result message's events, persistence.
            let notify = |event: AgentEvent| {
                let (hooks, hook_ctx, events) = (&hooks, &hook_ctx, &events);
                async move {
                    hooks.notify(&event, hook_ctx).await;
                    let _ = events.send(event);
                }
            };
            notify(AgentEvent::ToolExecutionEnd {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                is_error: message.is_error,
            })
            .await;
            notify(AgentEvent::MessageStart { role: "toolResult".into() }).await;
            let message = match hooks.message_end(Message::ToolResult(message.clone()), &hook_ctx).await {
                Message::ToolResult(replaced) => replaced,
                _ => message,
            };
            let _ = events.send(AgentEvent::MessageEnd { message: Message::ToolResult(message.clone()) });
            let appended = match &session {
                Some(session) => lock(session)
                    .append(EntryKind::Message { message: Message::ToolResult(message.clone()) })
                    .map(|_| ()),
                None => Ok(()),
            };
            order.done(position);
            appended?;
            Ok(message)
        })
        .await
    }
}

/// The safe tool name of a call to a tool that is not registered (the requested name is content).
const UNKNOWN_TOOL: &str = "unknown";
/// Error-text payload key of the tool name a model asked for that is not registered.
const REQUESTED_TOOL_NAME: &str = "requestedToolName";

/// The first line of a message, for error summaries.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
