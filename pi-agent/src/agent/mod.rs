//! The agent loop: prompt → turns → provider request → tool calls, persisted to the session and
//! traced as `pi.agent.prompt` → `pi.agent.turn` → `pi.ai.provider.request` / `pi.agent.tool_call`
//! → `pi.agent.session.append_entry`.

mod compact;
mod navigation;
mod prompt;
mod queue;
mod switch;
mod tools;
mod turn;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_observe_core::Outcome;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::compaction::{self, CompactionSettings};
use crate::events::AgentEvent;
pub use crate::extensions::PromptSource;
use crate::extensions::{Extension, HookContext, Hooks, SessionFacade};
use crate::message::{AssistantMessage, Message, StopReason, Usage};
use crate::model::ModelInfo;
use crate::provider::{Provider, ProviderError, RetryPolicy};
use crate::session::{ATTRIBUTION_CUSTOM_TYPE, EntryKind, SessionError, SessionWriter};
use crate::tools::ToolRegistry;
pub use queue::{MessageQueue, Pending, QueueKind, QueueMode};
pub use switch::SwitchReason;

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
    /// Images were attached for a model whose input is text only.
    #[error("{model} takes no images (its input is text only)")]
    ImagesNotSupported {
        /// `provider/id`.
        model: String,
    },
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
    /// The text of the user message navigated to (the leaf went to its parent): for the editor.
    pub editor_text: Option<String>,
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
    queue: MessageQueue,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("model", &self.model.id)
            .field("tools", &self.tools)
            .field("session", &self.session_id())
            .field("messages", &self.messages.len())
            .field("extensions", &self.hooks.extensions())
            .finish_non_exhaustive()
    }
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
            queue: MessageQueue::default(),
        }
    }

    /// Skills and prompt templates for `/skill:name` and `/name` input (expanded after the
    /// `input` hook, before `before_agent_start`); skills are also listed in the system prompt.
    pub fn set_resources(&mut self, resources: crate::resources::Resources) {
        self.resources = resources;
    }

    /// The skills and prompt templates.
    pub fn resources(&self) -> &crate::resources::Resources {
        &self.resources
    }

    /// Adds an extension: its handlers run after those of extensions added before it.
    pub fn add_extension(&mut self, extension: &dyn Extension) {
        // The hooks are shared only with tasks of a running prompt, and prompts borrow the
        // agent mutably, so this is the only owner here.
        if let Some(hooks) = Arc::get_mut(&mut self.hooks) {
            hooks.add(extension);
        }
    }

    /// Replaces every extension (upstream's `/reload`: call [`Agent::shutdown`] first, then
    /// [`Agent::restart_session`] with reason `reload`).
    pub fn replace_extensions(&mut self, extensions: &[&dyn Extension]) {
        let mut hooks = Hooks::new();
        for extension in extensions {
            hooks.add(*extension);
        }
        self.hooks = Arc::new(hooks);
    }

    /// Replaces the tools.
    pub fn set_tools(&mut self, tools: ToolRegistry) {
        self.tools = tools;
    }

    /// Emits `session_start` again with `reason` (after a reload; the session is the same).
    pub async fn restart_session(&mut self, reason: &'static str, on_event: AgentSink<'_>) {
        self.session_started = false;
        self.start_session_because(reason, None, on_event).await;
    }

    /// The extensions added, in order.
    pub fn extensions(&self) -> &[String] {
        self.hooks.extensions()
    }

    pub(super) fn hook_context(&self, cancel: &CancellationToken) -> HookContext {
        HookContext {
            has_ui: self.config.has_ui,
            cancel: cancel.clone(),
            cwd: self.cwd.clone(),
            session: SessionFacade(self.session.clone()),
            model: self.model.clone(),
            tools: Arc::new((self.tools.all(), self.tools.active_names())),
            system_prompt: None,
            thinking_level: self.config.reasoning.clone(),
            context_tokens: self.context_tokens(),
            pending_messages: self.has_pending_messages(),
        }
    }

    /// Sends an event to the sink and to the extensions' notification handlers, then reports
    /// handler failures.
    pub(super) async fn emit(&self, event: AgentEvent, ctx: &HookContext, on_event: AgentSink<'_>) {
        self.hooks.notify(&event, ctx).await;
        on_event(event);
        report_failures(&self.hooks, on_event);
    }

    /// Runs the `message_end` chain on a finalized message, then reports it.
    pub(super) async fn finalize(&self, message: Message, ctx: &HookContext, on_event: AgentSink<'_>) -> Message {
        let message = self.hooks.message_end(message, ctx).await;
        on_event(AgentEvent::MessageEnd { message: message.clone() });
        report_failures(&self.hooks, on_event);
        message
    }

    /// Emits `session_start` with reason `startup` (once, before the first prompt).
    pub async fn start_session(&mut self, on_event: AgentSink<'_>) {
        self.start_session_because("startup", None, on_event).await;
    }

    /// Emits `session_start` with upstream's `reason` (`startup`, `reload`, `new`, `resume`,
    /// `fork`) and the session it replaced (once per agent).
    pub async fn start_session_because(
        &mut self,
        reason: &'static str,
        previous_session_file: Option<String>,
        on_event: AgentSink<'_>,
    ) {
        if self.session_started {
            return;
        }
        self.session_started = true;
        let ctx = self.hook_context(&CancellationToken::new());
        let event = AgentEvent::SessionStart { session_id: self.session_id(), reason, previous_session_file };
        self.emit(event, &ctx, on_event).await;
    }

    /// Emits `session_shutdown`; call once when the agent is done.
    pub async fn shutdown(&mut self, on_event: AgentSink<'_>) {
        let ctx = self.hook_context(&CancellationToken::new());
        self.emit(AgentEvent::SessionShutdown, &ctx, on_event).await;
        // What extensions asked to keep, written even at the end (a failed write cannot be
        // reported any more: the session is over).
        let _ = self.append_extension_entries();
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The session id, if there is a session.
    pub fn session_id(&self) -> Option<String> {
        self.session.as_ref().map(|s| lock(s).id().to_owned())
    }

    /// The session id as telemetry carries it ([`SessionWriter::exported_id`]).
    pub fn exported_session_id(&self) -> Option<String> {
        self.session.as_ref().map(|s| lock(s).exported_id().to_owned())
    }

    /// The session file, if there is a session.
    pub fn session_file(&self) -> Option<String> {
        self.session.as_ref().map(|s| lock(s).path().display().to_string())
    }

    /// Reads the session (entries, tree, leaf), if there is one.
    pub fn with_session<R>(&self, f: impl FnOnce(&SessionWriter) -> R) -> Option<R> {
        self.session.as_ref().map(|s| f(&lock(s)))
    }

    /// The queues of messages typed while a prompt runs (clones share them).
    pub fn queue(&self) -> MessageQueue {
        self.queue.clone()
    }

    /// The model in use.
    pub fn model(&self) -> &ModelInfo {
        &self.model
    }

    /// The provider in use.
    pub fn provider(&self) -> Arc<dyn Provider> {
        self.provider.clone()
    }

    /// Switches the model (and its provider) for the next request; the session records the
    /// change with the next prompt. A thinking level is kept only for a model that reasons.
    pub fn set_model(&mut self, provider: Arc<dyn Provider>, model: ModelInfo) {
        if !model.reasoning {
            self.config.reasoning = None;
        }
        self.provider = provider;
        self.model = model;
        self.model_recorded = false;
    }

    /// [`Agent::set_model`], then upstream's `model_select` to the extensions and `on_event`
    /// (`source`: `set`, `cycle` or `restore`).
    pub async fn select_model(
        &mut self,
        provider: Arc<dyn Provider>,
        model: ModelInfo,
        source: &'static str,
        on_event: AgentSink<'_>,
    ) {
        let previous = self.model.clone();
        self.set_model(provider, model);
        let event = AgentEvent::ModelSelect {
            model: Box::new(self.model.clone()),
            previous_model: Some(Box::new(previous)),
            source,
        };
        let ctx = self.hook_context(&CancellationToken::new());
        self.emit(event, &ctx, on_event).await;
    }

    /// Sets the thinking level (`None`: off), then upstream's `thinking_level_select` when it
    /// changed.
    pub async fn select_thinking_level(&mut self, level: Option<String>, on_event: AgentSink<'_>) {
        let name = |level: &Option<String>| level.clone().unwrap_or_else(|| "off".into());
        let previous_level = name(&self.config.reasoning);
        self.config.reasoning = level;
        let level = name(&self.config.reasoning);
        if level != previous_level {
            let ctx = self.hook_context(&CancellationToken::new());
            self.emit(AgentEvent::ThinkingLevelSelect { level, previous_level }, &ctx, on_event).await;
        }
    }

    /// The harness settings in force.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Changes the harness settings (thinking level, compaction, retry, prompt source…) for the
    /// next prompt.
    pub fn config_mut(&mut self) -> &mut AgentConfig {
        &mut self.config
    }

    /// Tokens and cost of the whole session: every entry that carries usage (assistant
    /// messages, tool results, compactions, branch summaries) on any branch, as `pi report`
    /// counts them; without a session file, the conversation's messages.
    pub fn session_usage(&self) -> Usage {
        let mut total = Usage::default();
        match &self.session {
            Some(session) => {
                for entry in lock(session).entries() {
                    if let Some(usage) = entry.kind.usage() {
                        total.add(usage);
                    }
                }
            }
            None => {
                for message in &self.messages {
                    if let Some(usage) = message.usage() {
                        total.add(usage);
                    }
                }
            }
        }
        total
    }

    /// Messages the user queued (steering, follow-ups) are waiting.
    pub(super) fn has_pending_messages(&self) -> bool {
        let pending = self.queue.pending();
        !pending.steering.is_empty() || !pending.follow_up.is_empty()
    }

    /// Context tokens of the conversation as the next request would send it (the last
    /// provider-reported usage plus estimates for what came after).
    pub fn context_tokens(&self) -> u64 {
        compaction::context_tokens(&self.messages, self.trust_usage_from)
    }

    /// Runs a shell command the user typed (`!cmd`, RPC `bash`) in the working directory with
    /// the session environment, and records it as upstream's `bashExecution` message: persisted,
    /// and part of the context of the next request — unless `exclude_from_context` (`!!cmd`).
    /// `cancel` kills its process group.
    pub async fn run_bash(
        &mut self,
        (command, exclude_from_context): (&str, bool),
        cancel: &CancellationToken,
    ) -> Result<crate::message::BashExecutionMessage, AgentError> {
        // An extension may run it in pi's place (upstream's `user_bash`: over SSH, sandboxed…).
        let event = crate::extensions::UserBashEvent {
            command: command.to_owned(),
            exclude_from_context,
            cwd: self.cwd.display().to_string(),
        };
        let ran = self.hooks.user_bash(event, &self.hook_context(cancel)).await;
        let ctx = self.tool_context(cancel);
        let (output, exit_code, cancelled, truncated) = match ran {
            Some(r) => (r.output, r.exit_code, r.cancelled, r.truncated),
            None => match crate::tools::bash::run(command, &ctx, None).await {
                Ok(done) => (done.output, done.code.map(i64::from), false, done.truncated),
                Err(crate::tools::ToolError::Aborted) => (String::new(), None, true, false),
                Err(e) => (e.to_string(), None, false, false),
            },
        };
        let execution = crate::message::BashExecutionMessage {
            command: command.to_owned(),
            output,
            exit_code,
            cancelled,
            truncated,
            full_output_path: None,
            exclude_from_context: exclude_from_context.then_some(true),
            timestamp: crate::time::now_millis(),
        };
        let message = Message::BashExecution(execution.clone());
        self.append(EntryKind::Message { message: message.clone() })?;
        self.messages.push(message);
        Ok(execution)
    }

    /// Names the session (upstream's `session_info` entry).
    pub fn set_session_name(&mut self, name: &str) -> Result<(), AgentError> {
        self.append(EntryKind::SessionInfo { name: name.to_owned() })?;
        Ok(())
    }

    /// Labels an entry (upstream's `label` entry); `None` removes its label.
    pub fn set_label(&mut self, target_id: &str, label: Option<&str>) -> Result<(), AgentError> {
        self.append(EntryKind::Label { target_id: target_id.to_owned(), label: label.map(str::to_owned) })?;
        Ok(())
    }

    /// The session's display name (the latest `session_info` entry).
    pub fn session_name(&self) -> Option<String> {
        self.with_session(|s| {
            s.entries().iter().rev().find_map(|e| match &e.kind {
                EntryKind::SessionInfo { name } => Some(name.clone()),
                _ => None,
            })
        })
        .flatten()
    }

    /// True when the latest attribution entry on the current branch is not empty.
    pub(super) fn branch_attributed(&self) -> bool {
        let Some(session) = &self.session else { return false };
        let session = lock(session);
        let branch = session.branch(session.leaf());
        let last = branch.iter().rev().find_map(|e| match &e.kind {
            EntryKind::Custom { custom_type, data } if custom_type == ATTRIBUTION_CUSTOM_TYPE => Some(data),
            _ => None,
        });
        last.and_then(Value::as_object).is_some_and(|map| !map.is_empty())
    }

    pub(super) fn append(&self, kind: EntryKind) -> Result<(), SessionError> {
        match &self.session {
            Some(session) => lock(session).append(kind).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Applies what extensions asked since the last write, in their order — entries
    /// (`pi.appendEntry`, `setSessionName`, `setLabel`) written, `setActiveTools` taken — at a
    /// prompt's start, a turn's end and the session's end; long-lived modes also after each of
    /// their jobs (an extension command's entries are in the session when it returns).
    pub fn append_extension_entries(&mut self) -> Result<(), SessionError> {
        for request in self.hooks.take_requests() {
            match request {
                crate::extensions::ExtensionRequest::Entry(entry) => self.append(*entry)?,
                crate::extensions::ExtensionRequest::ActiveTools(names) => {
                    self.tools = std::mem::take(&mut self.tools).with_active(&names);
                }
                crate::extensions::ExtensionRequest::Tools(tools) => {
                    let names: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
                    let mut active = self.tools.active_names();
                    active.extend(names.iter().filter(|n| !active.contains(n)).cloned().collect::<Vec<_>>());
                    let registry = tools.into_iter().fold(std::mem::take(&mut self.tools), |r, t| r.with_override(t));
                    self.tools = registry.with_active(&active);
                }
                crate::extensions::ExtensionRequest::Message(message) => {
                    self.append(crate::extensions::injected_entry(&message))?;
                    self.messages.push(crate::extensions::injected_as_user(&message));
                }
            }
        }
        Ok(())
    }
}

/// Sends handler failures to the sink as `extension_error` events.
fn report_failures(hooks: &Hooks, on_event: AgentSink<'_>) {
    for failure in hooks.take_failures() {
        on_event(AgentEvent::ExtensionError { extension: failure.extension, hook: failure.hook, error: failure.error });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
