//! Process extensions: an extension in any language, run as a child process that speaks a
//! versioned JSON-lines protocol on stdin/stdout (`docs/extension-protocol.md`).
//!
//! A [`ProcessExtension`] is started with [`ProcessExtension::start`] (the handshake tells pi its
//! name and the events it handles) and then added to an agent like any Rust extension: its
//! handlers follow the same chaining rules. Each call has a deadline ([`ProcessSpec::timeout`],
//! default 5 s). A crash, a missed deadline or a reply of the wrong shape is a failing handler —
//! `tool_call` then blocks the tool (fail closed), every other event goes on — and is counted;
//! a process that died is started again on the next call, at most
//! [`ProcessSpec::max_restarts`] times. It is stopped on `session_shutdown` (idempotent) or by
//! [`ProcessExtension::shutdown`]. Its stderr goes to a log file, never to pi's output.

mod child;
pub mod protocol;
mod provider;
mod tool;
mod ui;
pub mod wire;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::hooks::{self, Notify};
use super::{Extension, ExtensionApi, HookContext, HookError};
use child::Connection;
use protocol::{CommandReply, Request, ResourcesReply, TrustReply};
pub use protocol::{CommandSpec, FlagSpec, PROTOCOL_VERSION, ProviderSpec, Register, ShortcutSpec, ToolSpec};
pub use tool::{ProcessTool, TOOL_TIMEOUT};
pub use ui::{DIALOGS, ExtensionUi, UiAnswer, UiHandle};

/// The events an extension can register for: the hooks, then the notifications.
pub const EVENTS: &[&str] = &[
    "project_trust",
    "resources_discover",
    "input",
    "before_agent_start",
    "context",
    "before_provider_headers",
    "before_provider_request",
    "after_provider_response",
    "tool_call",
    "tool_result",
    "message_end",
    "session_before_compact",
    "session_before_tree",
    "session_before_switch",
    "session_before_fork",
    "session_start",
    "agent_start",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "agent_end",
    "agent_settled",
    "session_compact",
    "session_compact_failed",
    "session_tree",
    "session_shutdown",
    "model_select",
    "thinking_level_select",
    "user_bash",
];

const NOTIFICATIONS: &[Notify] = &[
    Notify::SessionStart,
    Notify::AgentStart,
    Notify::TurnStart,
    Notify::TurnEnd,
    Notify::MessageStart,
    Notify::MessageUpdate,
    Notify::ToolExecutionStart,
    Notify::ToolExecutionUpdate,
    Notify::ToolExecutionEnd,
    Notify::AgentEnd,
    Notify::AgentSettled,
    Notify::SessionCompact,
    Notify::SessionCompactFailed,
    Notify::SessionTree,
    Notify::ModelSelect,
    Notify::ThinkingLevelSelect,
];

/// How to run one extension.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program (an executable, or an interpreter such as `node`).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Where it was loaded from (shown in spans and messages).
    pub source: PathBuf,
    /// Its working directory (the agent's).
    pub cwd: PathBuf,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Longest wait for each reply.
    pub timeout: Duration,
    /// Longest wait for the handshake (starting an interpreter can take a while on a busy
    /// machine).
    pub start_timeout: Duration,
    /// How many times a process that died is started again.
    pub max_restarts: u32,
    /// Where its stderr goes (`None`: discarded).
    pub stderr_log: Option<PathBuf>,
    /// A user interface can answer questions (`ctx.hasUI`).
    pub has_ui: bool,
    /// Where its `ctx.ui` calls go (RPC's `extension_ui_request`, the interactive mode's
    /// dialogs); with one, `ctx.hasUI` is true.
    pub ui: Option<UiHandle>,
    /// Where what it asks the running mode to do goes ([`ExtensionAction`]); without it
    /// (print mode) such asks are dropped.
    pub actions: Option<ActionSink>,
    /// The models and credentials it may read (upstream's `ctx.modelRegistry`); without it,
    /// none.
    pub models: Option<ModelAccessHandle>,
    /// Where it was found, for telemetry: `global`, `project`, `settings`, `managed` or `flag`.
    pub origin: &'static str,
}

impl ProcessSpec {
    /// Default handler deadline.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
    /// Default handshake deadline.
    pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(10);
    /// Default restarts after a crash.
    pub const DEFAULT_MAX_RESTARTS: u32 = 3;

    /// Runs `program` from `source` in `cwd` with the defaults.
    pub fn new(program: impl Into<PathBuf>, source: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> ProcessSpec {
        ProcessSpec {
            program: program.into(),
            args: Vec::new(),
            source: source.into(),
            cwd: cwd.into(),
            env: Vec::new(),
            timeout: Self::DEFAULT_TIMEOUT,
            start_timeout: Self::DEFAULT_START_TIMEOUT,
            max_restarts: Self::DEFAULT_MAX_RESTARTS,
            stderr_log: None,
            has_ui: false,
            ui: None,
            actions: None,
            models: None,
            origin: "flag",
        }
    }
}

/// Where a compaction an extension asked for reports its outcome.
pub type CompactDone = tokio::sync::oneshot::Sender<Result<Value, String>>;

/// What an extension asks the mode pi runs in to do, between jobs (upstream's `ctx.compact`,
/// `ctx.shutdown`, `ctx.reload`, and `pi.sendUserMessage` outside a command).
#[derive(Debug)]
pub enum ExtensionAction {
    /// Compact the session now, with these instructions; `done` hears how it went (upstream's
    /// `onComplete` / `onError`).
    Compact {
        /// What the summary should focus on.
        instructions: Option<String>,
        /// Told the compaction's result (`summary`, `firstKeptEntryId`, `tokensBefore`,
        /// `details`), or why there was none.
        done: Option<CompactDone>,
    },
    /// Finish the running job and end pi.
    Shutdown,
    /// Reload extensions, skills, prompts and settings.
    Reload,
    /// Run this as a user prompt after the running job.
    Prompt {
        /// The text.
        text: String,
    },
    /// Ask the model again without a new user message (upstream's `sendMessage` with
    /// `triggerTurn`: the extension's message is the context's latest).
    Resume,
    /// Abort the running prompt now (upstream's `ctx.abort()`), not after it.
    Abort,
    /// Start a fresh session (upstream's `ctx.newSession`); `done` hears whether it did
    /// (an extension's `session_before_switch` may cancel).
    NewSession {
        /// Told the new session once it started, `None` when it did not.
        done: Option<SessionDone>,
    },
    /// Fork before this user message (upstream's `ctx.fork`); `done` hears whether it did.
    Fork {
        /// The user message's entry id (with `at`: any entry).
        entry_id: String,
        /// At the entry itself (upstream's `position: "at"`), not before it.
        at: bool,
        /// Told `true` once the forked session started.
        done: Option<SessionDone>,
    },
    /// Continue another session file (upstream's `ctx.switchSession`).
    SwitchSession {
        /// Its path.
        path: String,
        /// Told `true` once it is the session.
        done: Option<SessionDone>,
    },
    /// Move to another point of the session tree (upstream's `ctx.navigateTree`).
    NavigateTree {
        /// The entry to continue from.
        target: String,
        /// Summarize the branch left.
        summarize: bool,
        /// Told `true` once the leaf moved.
        done: Option<SessionDone>,
    },
    /// Use this model from the next request (upstream's `pi.setModel`).
    SetModel {
        /// Its provider.
        provider: String,
        /// Its id.
        id: String,
    },
    /// Use this thinking level (upstream's `pi.setThinkingLevel`).
    SetThinkingLevel {
        /// `off` … `xhigh`.
        level: String,
    },
}

/// Where a session action (new, fork, switch, navigate) tells the extension how it went: the
/// session then in use (`sessionFile`, `sessionId`), or `None` when nothing changed.
pub type SessionDone = tokio::sync::oneshot::Sender<Option<Value>>;

impl ExtensionAction {
    /// Where an action that replaces or moves the session (new, fork, switch, navigate) tells
    /// whether it did.
    pub fn session_done(&mut self) -> Option<&mut Option<SessionDone>> {
        match self {
            ExtensionAction::NewSession { done }
            | ExtensionAction::Fork { done, .. }
            | ExtensionAction::SwitchSession { done, .. }
            | ExtensionAction::NavigateTree { done, .. } => Some(done),
            _ => None,
        }
    }

    /// Reads `{"type":"action","action":"compact"|"shutdown"|"reload"|"prompt",…}`.
    pub fn parse(value: &Value) -> Option<ExtensionAction> {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        Some(match value.get("action")?.as_str()? {
            "compact" => ExtensionAction::Compact { instructions: text("instructions"), done: None },
            "shutdown" => ExtensionAction::Shutdown,
            "reload" => ExtensionAction::Reload,
            "resume" => ExtensionAction::Resume,
            "abort" => ExtensionAction::Abort,
            "new_session" => ExtensionAction::NewSession { done: None },
            "fork" => ExtensionAction::Fork {
                entry_id: text("entryId")?,
                at: text("position").as_deref() == Some("at"),
                done: None,
            },
            "switch_session" => ExtensionAction::SwitchSession { path: text("path")?, done: None },
            "navigate_tree" => ExtensionAction::NavigateTree {
                target: text("targetId")?,
                summarize: value.get("summarize").and_then(Value::as_bool).unwrap_or(false),
                done: None,
            },
            "prompt" => ExtensionAction::Prompt { text: text("text")? },
            "set_model" => ExtensionAction::SetModel { provider: text("provider")?, id: text("id")? },
            "set_thinking_level" => ExtensionAction::SetThinkingLevel { level: text("level")? },
            _ => return None,
        })
    }
}

/// A model as extensions get it (`ctx.model`, `ctx.modelRegistry`): upstream's `Model` shape,
/// with zero prices where none is known (pi's own usage is still billed as unknown).
pub fn model_wire(model: &crate::model::ModelInfo) -> Value {
    let mut wire = json!({
        "id": model.id,
        "name": model.name.as_deref().unwrap_or(&model.id),
        "api": model.api.as_str(),
        "provider": model.provider,
        "baseUrl": model.base_url,
        "reasoning": model.reasoning,
        "input": model.input,
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
        "cost": model.cost.unwrap_or_default(),
    });
    if let Some(compat) = &model.compat {
        wire["compat"] = compat.clone();
    }
    wire
}

/// What extensions may know of the models (upstream's `ctx.modelRegistry`): the table, and the
/// credentials pi would send to a model's server — the user's own extensions call models with
/// them (`complete(ctx.model, …)` of upstream's `pi-ai`).
pub trait ModelAccess: Send + Sync {
    /// Every model, in upstream's `Model` shape (an array).
    fn models(&self) -> Value;
    /// The API key (if any) and headers for `provider`'s `model`; `Err` says why there are none.
    fn credentials(&self, provider: &str, model: &str) -> Result<Credentials, String>;
}

/// An API key (if any) and the headers to send with it.
pub type Credentials = (Option<String>, Vec<(String, String)>);

/// A shared [`ModelAccess`] for a [`ProcessSpec`].
#[derive(Clone)]
pub struct ModelAccessHandle(pub Arc<dyn ModelAccess>);

impl std::fmt::Debug for ModelAccessHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelAccessHandle")
    }
}

/// What carries out `ctx.abort()` the moment it comes, when the mode has set it
/// ([`on_abort`]); without it, aborts go with the other actions.
static ABORT: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>> = std::sync::OnceLock::new();

/// Makes `abort` carry out every extension's `ctx.abort()` at once (a mode whose actions wait
/// for the running job, such as RPC's driver, sets it).
pub fn on_abort(abort: impl Fn() + Send + Sync + 'static) {
    let _ = ABORT.set(Box::new(abort));
}

/// Where extensions' [`ExtensionAction`]s go.
pub type ActionSink = tokio::sync::mpsc::UnboundedSender<ExtensionAction>;

/// Why an extension could not be started.
#[derive(Debug, thiserror::Error)]
#[error("extension {source_path}: {why}")]
pub struct ProcessError {
    /// Where it was loaded from.
    pub source_path: String,
    /// What went wrong.
    pub why: String,
}

/// A running process extension (a cheap handle; clones share the process).
#[derive(Clone)]
pub struct ProcessExtension {
    inner: Arc<Inner>,
}

struct Inner {
    spec: ProcessSpec,
    register: Register,
    /// Its `pi.appendEntry` calls, until the agent takes them.
    entries: child::Entries,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    restarts: AtomicU32,
    failures: AtomicU64,
    stopped: AtomicBool,
}

impl std::fmt::Debug for ProcessExtension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessExtension")
            .field("name", &self.inner.register.name)
            .field("source", &self.inner.spec.source)
            .finish_non_exhaustive()
    }
}

impl ProcessExtension {
    /// Starts the process and completes the handshake.
    pub async fn start(spec: ProcessSpec) -> Result<ProcessExtension, ProcessError> {
        let entries = child::Entries::default();
        let connection = Connection::start(&spec, spec.has_ui || spec.ui.is_some(), entries.clone())
            .await
            .map_err(|why| ProcessError { source_path: spec.source.display().to_string(), why })?;
        let register = connection.register.clone();
        Ok(ProcessExtension {
            inner: Arc::new(Inner {
                spec,
                register,
                connection: tokio::sync::Mutex::new(Some(Arc::new(connection))),
                entries,
                restarts: AtomicU32::new(0),
                failures: AtomicU64::new(0),
                stopped: AtomicBool::new(false),
            }),
        })
    }

    /// A UI answers its `ctx.ui` questions.
    fn has_ui(&self) -> bool {
        self.inner.spec.has_ui || self.inner.spec.ui.is_some()
    }

    /// What it registered.
    pub fn registration(&self) -> &Register {
        &self.inner.register
    }

    /// Where it was loaded from.
    pub fn source(&self) -> &Path {
        &self.inner.spec.source
    }

    /// Handler calls that failed (crash, timeout, malformed reply, error reply).
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// Times the process was started again after dying.
    pub fn restarts(&self) -> u32 {
        self.inner.restarts.load(Ordering::Relaxed)
    }

    /// Stops the process (`shutdown`, then a kill after a grace period). Idempotent; later calls
    /// fail at once.
    pub async fn shutdown(&self) {
        if self.inner.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(connection) = self.inner.connection.lock().await.take() {
            connection.stop(Duration::from_millis(500)).await;
        }
    }

    /// The tools it registered, ready for a [`ToolRegistry`](crate::tools::ToolRegistry).
    pub fn tools(&self) -> Vec<std::sync::Arc<dyn crate::tools::Tool>> {
        let tools = self.inner.register.tools.iter();
        tools
            .map(|spec| std::sync::Arc::new(ProcessTool { extension: self.clone(), spec: spec.clone() }) as _)
            .collect()
    }

    /// Sends `message` and waits for the reply, starting the process again first if it died
    /// (within the restart budget).
    async fn request(&self, message: Value) -> Result<Value, HookError> {
        self.request_within(message, self.inner.spec.timeout).await
    }

    /// [`ProcessExtension::request`] with its own deadline.
    pub(crate) async fn request_within(&self, message: Value, timeout: Duration) -> Result<Value, HookError> {
        self.request_streaming(message, timeout, None).await
    }

    /// [`ProcessExtension::request_within`], its `stream` lines handed to `events`.
    pub(crate) async fn request_streaming(
        &self,
        message: Value,
        timeout: Duration,
        events: Option<tokio::sync::mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, HookError> {
        let inner = &self.inner;
        let fail = |why: String| -> HookError {
            inner.failures.fetch_add(1, Ordering::Relaxed);
            if why.starts_with("no reply within") { Box::new(super::HandlerTimeout(why)) } else { why.into() }
        };
        if inner.stopped.load(Ordering::SeqCst) {
            return Err(fail("stopped".into()));
        }
        let connection = {
            let mut slot = inner.connection.lock().await;
            match slot.as_ref().filter(|c| !c.is_closed()) {
                Some(c) => c.clone(),
                None => {
                    let restarts = inner.restarts.load(Ordering::Relaxed);
                    if restarts >= inner.spec.max_restarts {
                        return Err(fail(format!("stopped after {restarts} restarts")));
                    }
                    inner.restarts.fetch_add(1, Ordering::Relaxed);
                    let c = Arc::new(
                        Connection::start(
                            &inner.spec,
                            inner.spec.has_ui || inner.spec.ui.is_some(),
                            inner.entries.clone(),
                        )
                        .await
                        .map_err(fail)?,
                    );
                    *slot = Some(c.clone());
                    c
                }
            }
        };
        match connection.request_streaming(message, timeout, events).await {
            Ok(value) => Ok(value),
            Err(why) => {
                if why.starts_with("no reply") {
                    // It may be stuck: the next call starts a fresh one.
                    connection.kill();
                }
                Err(fail(why))
            }
        }
    }

    /// Runs its command `/name args`: `(text to show, prompt to run instead)`, each optional.
    /// `None` when it registered no such command. `more`: what else its ctx carries (`commands`:
    /// every slash command, for `pi.getCommands()`; `model`: see [`model_wire`]).
    pub async fn command(
        &self,
        name: &str,
        args: &str,
        (cwd, session_file, more): (&Path, Option<&str>, &Value),
    ) -> Option<Result<(Option<String>, Option<String>), HookError>> {
        if !self.inner.register.commands.iter().any(|c| c.name == name) {
            return None;
        }
        let ctx = self.user_ctx(cwd, session_file, more);
        let message = Request::Command { name, args, ctx }.to_json();
        Some(self.request_within(message, tool::TOOL_TIMEOUT).await.map(|reply| {
            let reply: CommandReply = serde_json::from_value(reply).unwrap_or_default();
            (reply.text, reply.prompt)
        }))
    }

    /// The ctx of what the user started (a command, a shortcut): `more` merged in.
    fn user_ctx(&self, cwd: &Path, session_file: Option<&str>, more: &Value) -> Value {
        let mut ctx = json!({"hasUI": self.has_ui(), "cwd": cwd, "sessionFile": session_file});
        if let (Some(ctx), Some(more)) = (ctx.as_object_mut(), more.as_object()) {
            ctx.extend(more.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        ctx
    }

    /// Runs its handler of shortcut `key`; `None` when it registered none for that key.
    pub async fn shortcut(
        &self,
        key: &str,
        (cwd, session_file, more): (&Path, Option<&str>, &Value),
    ) -> Option<Result<(), HookError>> {
        if !self.inner.register.shortcuts.iter().any(|s| s.key == key) {
            return None;
        }
        let ctx = self.user_ctx(cwd, session_file, more);
        let message = Request::Shortcut { key, ctx }.to_json();
        Some(self.request_within(message, tool::TOOL_TIMEOUT).await.map(|_| ()))
    }

    /// True when it registered for `event`.
    pub fn handles(&self, event: &str) -> bool {
        self.inner.register.events.iter().any(|e| e == event)
    }

    /// Upstream's `project_trust`, before a project's resources load: `Some(true)` trusts the
    /// project, `Some(false)` refuses it, `None` is undecided (or the extension does not take
    /// part, or failed). The second value is `remember` (keep the decision).
    pub async fn project_trust(&self, project: &Path) -> (Option<bool>, bool) {
        if !self.handles("project_trust") {
            return (None, false);
        }
        let ctx = json!({"hasUI": self.has_ui(), "cwd": project, "mode": "print"});
        let payload = json!({"type": "project_trust", "cwd": project});
        let message = Request::Event { event: "project_trust", payload, ctx }.to_json();
        let Ok(reply) = self.request(message).await else { return (None, false) };
        let reply: TrustReply = serde_json::from_value(reply).unwrap_or_default();
        match reply.trusted.as_deref() {
            Some("yes") => (Some(true), reply.remember),
            Some("no") => (Some(false), reply.remember),
            _ => (None, false),
        }
    }

    /// Upstream's `resources_discover`: the skill and prompt-template folders the extension adds.
    pub async fn resources_discover(&self, cwd: &Path, reason: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
        if !self.handles("resources_discover") {
            return (Vec::new(), Vec::new());
        }
        let payload = json!({"type": "resources_discover", "cwd": cwd, "reason": reason});
        let ctx = json!({"hasUI": self.has_ui(), "cwd": cwd});
        let message = Request::Event { event: "resources_discover", payload, ctx }.to_json();
        let Ok(reply) = self.request(message).await else { return (Vec::new(), Vec::new()) };
        let reply: ResourcesReply = serde_json::from_value(reply).unwrap_or_default();
        let paths = |list: Vec<String>| -> Vec<PathBuf> { list.iter().map(|p| cwd.join(p)).collect() };
        (paths(reply.skill_paths), paths(reply.prompt_paths))
    }

    /// Calls the handler for `event`.
    async fn call(&self, event: &str, payload: Value, ctx: &HookContext) -> Result<Value, HookError> {
        let mut wire = json!({
            "hasUI": ctx.has_ui || self.has_ui(),
            "cwd": ctx.cwd,
            "sessionId": ctx.session.id(),
            "sessionFile": ctx.session.file(),
            "model": model_wire(&ctx.model),
            "thinkingLevel": ctx.thinking_level.as_deref().unwrap_or("off"),
            "contextTokens": ctx.context_tokens,
            "pendingMessages": ctx.pending_messages,
        });
        // The tools where extensions look them up (not on every streamed event).
        if matches!(event, "session_start" | "before_agent_start" | "agent_start" | "turn_start") {
            let (all, active) = &*ctx.tools;
            wire["tools"] =
                all.iter().map(|(name, description)| json!({"name": name, "description": description})).collect();
            wire["activeTools"] = json!(active);
        }
        // The system prompt where a prompt starts and each turn (the host keeps the latest).
        if matches!(event, "agent_start" | "turn_start") {
            wire["systemPrompt"] = json!(ctx.system_prompt.as_deref().unwrap_or_default());
        }
        let ctx = wire;
        self.request(Request::Event { event, payload, ctx }.to_json()).await
    }
}

/// Registers a handler that sends the event as `to_json` makes it and reads the reply with
/// `from_json`.
/// Registers, for each `(hook, name, to_json, from_json)` the process asked for, a handler that
/// sends the event as `to_json` makes it and reads the reply with `from_json`.
macro_rules! forward {
    ($api:expr, $this:expr, $wants:expr, [$(($hook:expr, $name:literal, $to_json:path, $from_json:path)),+ $(,)?]) => {
        $(
            if $wants($name) {
                let this = $this.clone();
                $api.on($hook, move |event, ctx| {
                    let this = this.clone();
                    async move {
                        let reply = this.call($name, $to_json(&event), &ctx).await?;
                        $from_json(&reply).map_err(|why| HookError::from(format!("reply to {}: {why}", $name)))
                    }
                });
            }
        )+
    };
}

impl Extension for ProcessExtension {
    fn name(&self) -> &str {
        &self.inner.register.name
    }

    fn origin(&self) -> &'static str {
        self.inner.spec.origin
    }

    fn register(&self, api: &mut ExtensionApi<'_>) {
        let (entries, this) = (self.inner.entries.clone(), self.clone());
        api.custom_entries(Arc::new(move || {
            let pending = std::mem::take(&mut *entries.lock().unwrap_or_else(|e| e.into_inner()));
            let tool = |spec| Arc::new(ProcessTool { extension: this.clone(), spec }) as Arc<dyn crate::tools::Tool>;
            pending
                .into_iter()
                .map(|p| match p {
                    child::Asked::Request(request) => request,
                    child::Asked::Tools(specs) => {
                        crate::extensions::ExtensionRequest::Tools(specs.into_iter().map(tool).collect())
                    }
                })
                .collect()
        }));
        let events = &self.inner.register.events;
        let wants = |name: &str| events.iter().any(|e| e == name);
        #[rustfmt::skip]
        forward!(api, self, wants, [
            (hooks::Input, "input", wire::input, wire::input_action),
            (hooks::BeforeAgentStart, "before_agent_start", wire::before_agent_start, wire::before_agent_start_result),
            (hooks::Context, "context", wire::context, wire::context_result),
            (hooks::BeforeProviderHeaders, "before_provider_headers", wire::provider_headers, wire::header_patch),
            (hooks::BeforeProviderRequest, "before_provider_request", wire::provider_request, wire::request_payload),
            (hooks::AfterProviderResponse, "after_provider_response", wire::provider_response, ignore),
            (hooks::ToolCall, "tool_call", wire::tool_call, wire::tool_call_result),
            (hooks::ToolResult, "tool_result", wire::tool_result, wire::tool_result_patch),
            (hooks::MessageEnd, "message_end", wire::message_end, wire::message_replacement),
            (hooks::SessionBeforeCompact, "session_before_compact", wire::before_compact, wire::before_result),
            (hooks::SessionBeforeTree, "session_before_tree", wire::before_tree, wire::before_result),
            (hooks::SessionBeforeSwitch, "session_before_switch", wire::before_switch, wire::before_result),
            (hooks::SessionBeforeFork, "session_before_fork", wire::before_fork, wire::before_result),
            (hooks::UserBash, "user_bash", wire::user_bash, wire::user_bash_result),
        ]);
        for notify in NOTIFICATIONS.iter().copied().filter(|n| wants(super::Hook::name(*n))) {
            let this = self.clone();
            api.on(notify, move |event, ctx| {
                let this = this.clone();
                async move {
                    this.call(super::Hook::name(notify), wire::notification(&event), &ctx).await?;
                    Ok(None)
                }
            });
        }
        // Always: the process stops with the session (after its own handler, if it has one).
        let this = self.clone();
        let forward_shutdown = wants("session_shutdown");
        api.on(Notify::SessionShutdown, move |event, ctx| {
            let this = this.clone();
            async move {
                let result = if forward_shutdown {
                    this.call("session_shutdown", wire::notification(&event), &ctx).await.map(|_| None)
                } else {
                    Ok(None)
                };
                this.shutdown().await;
                result
            }
        });
    }
}

fn ignore(_: &Value) -> Result<Option<()>, wire::WireError> {
    Ok(None)
}
