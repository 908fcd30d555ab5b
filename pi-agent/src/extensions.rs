//! Extensions: the agent's control plane, with upstream pi's hook semantics.
//!
//! An [`Extension`] is a Rust value with a name. When it is added to an agent it registers
//! handlers through an [`ExtensionApi`]: `api.on(hooks::ToolCall, |event, ctx| async move { … })`.
//! Handlers run in registration order (extensions in the order they were added), one at a time,
//! and each run is traced as a `pi.agent.hook` span carrying the hook name, the extension name and
//! the outcome (`completed`, `transformed`, `blocked`, `handled`, `cancelled` or `failed`), so the
//! latency extensions add is visible next to the provider and tool spans.
//!
//! What a handler's result means depends on the hook (as in pi's `hooks.md` and
//! `extensions.md`):
//!
//! | hook | result | chaining |
//! |---|---|---|
//! | [`hooks::Input`] | [`InputAction`] | transforms chain; the first `Handled` wins and the agent does not start |
//! | [`hooks::BeforeAgentStart`] | [`BeforeAgentStartResult`] | injected messages are collected; the system prompt chains |
//! | [`hooks::Context`] | replacement messages | each handler sees the previous replacement (a copy) |
//! | [`hooks::BeforeProviderHeaders`] | [`HeaderPatch`] (`Some` sets, `None` deletes) | patches chain; run once per request, reused by its retries |
//! | [`hooks::BeforeProviderRequest`] | replacement payload | chains; the last payload is sent |
//! | [`hooks::AfterProviderResponse`] | — | observation: status and headers before the body is read |
//! | [`hooks::ToolCall`] | [`ToolCallResult`] | input changes are seen by later handlers and the tool; the first block wins; a failing handler blocks |
//! | [`hooks::ToolResult`] | [`ToolResultPatch`] | partial patches accumulate; later handlers see earlier patches |
//! | [`hooks::MessageEnd`] | replacement message | chains; a replacement with another role is rejected (reported, not persisted) |
//! | [`hooks::SessionBeforeCompact`], [`hooks::SessionBeforeTree`] | [`BeforeResult`] | the first cancel wins, else the last result |
//! | [`hooks::Notify`] | — | notifications (`session_start`, `agent_start`, `turn_start`, …) |
//!
//! A handler that returns an error or panics is reported ([`HookFailure`], with the extension's
//! name) and the agent continues as if that handler had returned nothing — except for
//! `tool_call`, where a failing handler blocks the tool.

use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use pi_observe_core::{Payload, Span, names, trace_operation_with};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::AgentEvent;
use crate::harness::PromptSource;
use crate::message::{ContentBlock, Message, UserContent};
use crate::model::ModelInfo;
use crate::session::{Entry, SessionWriter};

/// An error a handler returns; any `Display` error converts into it.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// What a handler returns: `Ok(None)` = no opinion.
pub type HookResult<T> = Result<Option<T>, HookError>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One hook: its name and the types of its event and result. The values in [`hooks`] are the
/// hooks an extension can register for.
pub trait Hook: Copy + Send + Sync + 'static {
    /// What handlers receive (each handler gets its own copy).
    type Event: Clone + Send + 'static;
    /// What handlers may return.
    type Output: Send + 'static;
    /// The upstream event name, e.g. `tool_call`.
    fn name(self) -> &'static str;
}

/// An extension: a name and the handlers it registers.
pub trait Extension: Send + Sync + 'static {
    /// Shown in hook spans and in error reports.
    fn name(&self) -> &str;
    /// Registers handlers (called once, when the extension is added to an agent).
    fn register(&self, api: &mut ExtensionApi<'_>);
}

/// An extension made of a name and a registration closure.
///
/// ```
/// use pi_agent::extensions::{extension, hooks, ToolCallResult};
///
/// let gate = extension("no-rm", |api| {
///     api.on(hooks::ToolCall, |event, _ctx| async move {
///         let command = event.input["command"].as_str().unwrap_or_default().to_owned();
///         Ok(command.contains("rm -rf").then(|| ToolCallResult::block("rm -rf is not allowed")))
///     });
/// });
/// # let _ = gate;
/// ```
pub fn extension(
    name: impl Into<String>,
    register: impl Fn(&mut ExtensionApi<'_>) + Send + Sync + 'static,
) -> impl Extension {
    struct FnExtension<F> {
        name: String,
        register: F,
    }
    impl<F: Fn(&mut ExtensionApi<'_>) + Send + Sync + 'static> Extension for FnExtension<F> {
        fn name(&self) -> &str {
            &self.name
        }
        fn register(&self, api: &mut ExtensionApi<'_>) {
            (self.register)(api)
        }
    }
    FnExtension { name: name.into(), register }
}

/// Registration surface handed to [`Extension::register`]; every handler registered through it
/// carries the extension's name.
pub struct ExtensionApi<'a> {
    hooks: &'a mut Hooks,
    extension: Arc<str>,
}

impl ExtensionApi<'_> {
    /// The extension being registered.
    pub fn extension_name(&self) -> &str {
        &self.extension
    }

    /// Registers `handler` for `hook`. Handlers of one hook run in registration order.
    pub fn on<H, F, Fut>(&mut self, hook: H, handler: F)
    where
        H: Hook,
        F: Fn(H::Event, HookContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HookResult<H::Output>> + Send + 'static,
    {
        let handler: Handler<H> = Arc::new(move |event, ctx| Box::pin(handler(event, ctx)));
        self.hooks
            .handlers
            .entry(hook.name())
            .or_default()
            .push(Registered { extension: self.extension.clone(), handler: Box::new(handler) });
    }
}

type Handler<H> =
    Arc<dyn Fn(<H as Hook>::Event, HookContext) -> BoxFuture<HookResult<<H as Hook>::Output>> + Send + Sync>;

struct Registered {
    extension: Arc<str>,
    /// A `Handler<H>` for the hook it is filed under.
    handler: Box<dyn Any + Send + Sync>,
}

/// What handlers can see of the agent: session and model facades, UI presence, cancellation.
#[derive(Clone)]
pub struct HookContext {
    /// True when a user interface can ask questions (`false` in print and JSON mode).
    pub has_ui: bool,
    /// Fires when the current prompt is aborted; use it for nested work.
    pub cancel: CancellationToken,
    /// The agent's working directory.
    pub cwd: PathBuf,
    /// Read-only view of the session.
    pub session: SessionFacade,
    /// The active model.
    pub model: ModelInfo,
}

impl fmt::Debug for HookContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookContext").field("has_ui", &self.has_ui).field("model", &self.model.id).finish()
    }
}

/// Read-only access to the session an agent writes.
#[derive(Clone, Default)]
pub struct SessionFacade(pub(crate) Option<Arc<Mutex<SessionWriter>>>);

impl SessionFacade {
    fn with<T>(&self, f: impl FnOnce(&SessionWriter) -> T) -> Option<T> {
        self.0.as_ref().map(|s| f(&s.lock().unwrap_or_else(|e| e.into_inner())))
    }

    /// The session id (`None` without a session).
    pub fn id(&self) -> Option<String> {
        self.with(|s| s.id().to_owned())
    }

    /// The session file.
    pub fn file(&self) -> Option<PathBuf> {
        self.with(|s| s.path().to_owned())
    }

    /// The current leaf entry id.
    pub fn leaf_id(&self) -> Option<String> {
        self.with(|s| s.leaf().map(str::to_owned)).flatten()
    }

    /// A copy of every entry.
    pub fn entries(&self) -> Vec<Entry> {
        self.with(|s| s.entries().to_vec()).unwrap_or_default()
    }
}

/// A handler that failed: which extension, which hook, what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    /// The extension's name.
    pub extension: String,
    /// The hook.
    pub hook: String,
    /// The error (or panic) message.
    pub error: String,
}

impl fmt::Display for HookFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "extension {} failed in {}: {}", self.extension, self.hook, self.error)
    }
}

/// The hooks, their events and their results.
pub mod hooks {
    use super::*;

    macro_rules! hook {
        ($(#[$doc:meta])* $ty:ident, $name:literal, $event:ty, $output:ty) => {
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub struct $ty;
            impl Hook for $ty {
                type Event = $event;
                type Output = $output;
                fn name(self) -> &'static str {
                    $name
                }
            }
        };
    }

    hook!(
        /// `input`: raw user input, before skill/template expansion.
        Input, "input", InputEvent, InputAction
    );
    hook!(
        /// `before_agent_start`: inject messages, chain the system prompt.
        BeforeAgentStart, "before_agent_start", BeforeAgentStartEvent, BeforeAgentStartResult
    );
    hook!(
        /// `context`: replace the messages sent for this provider call.
        Context, "context", ContextEvent, Vec<Message>
    );
    hook!(
        /// `before_provider_headers`: patch the request headers.
        BeforeProviderHeaders, "before_provider_headers", ProviderHeadersEvent, HeaderPatch
    );
    hook!(
        /// `before_provider_request`: replace the provider payload.
        BeforeProviderRequest, "before_provider_request", ProviderRequestEvent, Value
    );
    hook!(
        /// `after_provider_response`: status and headers, before the body is read.
        AfterProviderResponse, "after_provider_response", ProviderResponseEvent, ()
    );
    hook!(
        /// `tool_call`: block a tool or change its input.
        ToolCall, "tool_call", ToolCallEvent, ToolCallResult
    );
    hook!(
        /// `tool_result`: patch a tool's result.
        ToolResult, "tool_result", ToolResultEvent, ToolResultPatch
    );
    hook!(
        /// `message_end`: replace a finalized message before it is persisted.
        MessageEnd, "message_end", MessageEndEvent, Message
    );
    hook!(
        /// `session_before_compact`: cancel a compaction or supply its summary.
        SessionBeforeCompact, "session_before_compact", BeforeCompactEvent, BeforeResult
    );
    hook!(
        /// `session_before_tree`: cancel a branch navigation or supply its summary.
        SessionBeforeTree, "session_before_tree", BeforeTreeEvent, BeforeResult
    );

    /// Notifications: handlers observe, their results are ignored.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Notify {
        /// `session_start`: the agent's session is ready (before the first prompt).
        SessionStart,
        /// `agent_start`.
        AgentStart,
        /// `turn_start`.
        TurnStart,
        /// `turn_end`.
        TurnEnd,
        /// `message_start`.
        MessageStart,
        /// `message_update` (assistant stream deltas).
        MessageUpdate,
        /// `tool_execution_start`.
        ToolExecutionStart,
        /// `tool_execution_update`.
        ToolExecutionUpdate,
        /// `tool_execution_end`.
        ToolExecutionEnd,
        /// `agent_end`.
        AgentEnd,
        /// `agent_settled`: the prompt is over and everything it wrote is persisted.
        AgentSettled,
        /// `session_compact`.
        SessionCompact,
        /// `session_compact_failed`.
        SessionCompactFailed,
        /// `session_tree`: the session leaf moved.
        SessionTree,
        /// `session_shutdown`.
        SessionShutdown,
    }

    impl Hook for Notify {
        type Event = AgentEvent;
        type Output = ();
        fn name(self) -> &'static str {
            match self {
                Notify::SessionStart => "session_start",
                Notify::AgentStart => "agent_start",
                Notify::TurnStart => "turn_start",
                Notify::TurnEnd => "turn_end",
                Notify::MessageStart => "message_start",
                Notify::MessageUpdate => "message_update",
                Notify::ToolExecutionStart => "tool_execution_start",
                Notify::ToolExecutionUpdate => "tool_execution_update",
                Notify::ToolExecutionEnd => "tool_execution_end",
                Notify::AgentEnd => "agent_end",
                Notify::AgentSettled => "agent_settled",
                Notify::SessionCompact => "session_compact",
                Notify::SessionCompactFailed => "session_compact_failed",
                Notify::SessionTree => "session_tree",
                Notify::SessionShutdown => "session_shutdown",
            }
        }
    }

    impl Notify {
        /// The notification an agent event is delivered as (`message_end` is not one: its
        /// handlers run as the [`MessageEnd`] chain before the message is persisted).
        pub fn of(event: &AgentEvent) -> Option<Notify> {
            Some(match event {
                AgentEvent::SessionStart { .. } => Notify::SessionStart,
                AgentEvent::AgentStart => Notify::AgentStart,
                AgentEvent::TurnStart { .. } => Notify::TurnStart,
                AgentEvent::TurnEnd { .. } => Notify::TurnEnd,
                AgentEvent::MessageStart { .. } => Notify::MessageStart,
                AgentEvent::MessageUpdate { .. } => Notify::MessageUpdate,
                AgentEvent::ToolExecutionStart { .. } => Notify::ToolExecutionStart,
                AgentEvent::ToolExecutionUpdate { .. } => Notify::ToolExecutionUpdate,
                AgentEvent::ToolExecutionEnd { .. } => Notify::ToolExecutionEnd,
                AgentEvent::AgentEnd { .. } => Notify::AgentEnd,
                AgentEvent::AgentSettled => Notify::AgentSettled,
                AgentEvent::SessionShutdown => Notify::SessionShutdown,
                AgentEvent::SessionCompact { .. } => Notify::SessionCompact,
                AgentEvent::SessionCompactFailed { .. } => Notify::SessionCompactFailed,
                AgentEvent::SessionTree { .. } => Notify::SessionTree,
                AgentEvent::MessageEnd { .. } | AgentEvent::ExtensionError { .. } => return None,
            })
        }
    }
}

/// `input` event.
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeAgentStartEvent {
    /// The prompt (after expansion).
    pub prompt: String,
    /// The system prompt so far (earlier handlers' changes included).
    pub system_prompt: Option<String>,
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
#[derive(Debug, Clone, PartialEq)]
pub struct ContextEvent {
    /// The messages.
    pub messages: Vec<Message>,
}

/// Header changes: `Some(value)` sets, `None` deletes. Names are case-insensitive.
pub type HeaderPatch = BTreeMap<String, Option<String>>;

/// `before_provider_headers` event.
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRequestEvent {
    /// The provider-specific request body (earlier replacements applied).
    pub payload: Value,
}

/// `after_provider_response` event.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderResponseEvent {
    /// HTTP status.
    pub status: u16,
    /// Response headers, lowercase names.
    pub headers: Vec<(String, String)>,
}

/// `tool_call` event.
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, PartialEq)]
pub struct MessageEndEvent {
    /// The message (earlier replacements applied).
    pub message: Message,
}

/// `session_before_compact` event.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeCompactEvent {
    /// `manual`, `threshold` or `overflow`.
    pub reason: String,
    /// Context tokens before.
    pub tokens_before: u64,
    /// The messages that would be summarized.
    pub messages_to_summarize: Vec<Message>,
    /// Messages kept verbatim.
    pub kept_messages: usize,
}

/// `session_before_tree` event.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeTreeEvent {
    /// Leaf before the move.
    pub old_leaf_id: Option<String>,
    /// Entry to move to.
    pub target_id: String,
    /// A summary of the abandoned branch was asked for.
    pub summarize: bool,
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

/// The handlers of every extension added to an agent, and the chaining rules that run them.
#[derive(Default)]
pub struct Hooks {
    handlers: HashMap<&'static str, Vec<Registered>>,
    extensions: Vec<String>,
    failures: Mutex<Vec<HookFailure>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks").field("extensions", &self.extensions).finish()
    }
}

/// Span outcome of one handler run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Completed,
    Transformed,
    Blocked,
    Handled,
    Cancelled,
    Failed,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Transformed => "transformed",
            Outcome::Blocked => "blocked",
            Outcome::Handled => "handled",
            Outcome::Cancelled => "cancelled",
            Outcome::Failed => "failed",
        }
    }
}

impl Hooks {
    /// No extensions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers an extension's handlers after those already added.
    pub fn add(&mut self, extension: &dyn Extension) {
        let name: Arc<str> = Arc::from(extension.name());
        self.extensions.push(name.to_string());
        extension.register(&mut ExtensionApi { hooks: self, extension: name });
    }

    /// Names of the extensions added, in order.
    pub fn extensions(&self) -> &[String] {
        &self.extensions
    }

    /// True when some handler listens to `hook`.
    pub fn has<H: Hook>(&self, hook: H) -> bool {
        self.handlers.get(hook.name()).is_some_and(|h| !h.is_empty())
    }

    /// Failures since the last call (each is also on its hook span).
    pub fn take_failures(&self) -> Vec<HookFailure> {
        std::mem::take(&mut *self.failures.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn fail(&self, extension: &str, hook: &str, error: String) {
        self.failures.lock().unwrap_or_else(|e| e.into_inner()).push(HookFailure {
            extension: extension.to_owned(),
            hook: hook.to_owned(),
            error,
        });
    }

    /// Runs every handler of `hook` in order. `step` sees each handler's result (`Err` = the
    /// handler failed, already reported) and says the span outcome and whether to stop.
    async fn run<H: Hook>(
        &self,
        hook: H,
        ctx: &HookContext,
        mut event: impl FnMut() -> H::Event,
        mut step: impl FnMut(&str, Result<Option<H::Output>, String>) -> (Outcome, bool),
    ) {
        let Some(registered) = self.handlers.get(hook.name()) else { return };
        for entry in registered {
            let Some(handler) = entry.handler.downcast_ref::<Handler<H>>() else { continue };
            let extension = entry.extension.clone();
            let payload = || {
                Payload::new().safe(names::HOOK_NAME, hook.name()).safe(names::EXTENSION_NAME, extension.to_string())
            };
            let call = AssertUnwindSafe(async { handler(event(), ctx.clone()).await }).catch_unwind();
            let step = &mut step;
            let stop = trace_operation_with(names::AGENT_HOOK, payload, |span: Span| async move {
                let result = match call.await {
                    Ok(Ok(output)) => Ok(output),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(panic) => Err(panic_message(panic.as_ref())),
                };
                if let Err(error) = &result {
                    self.fail(&entry.extension, hook.name(), error.clone());
                    span.set_error(names::ERROR_HOOK_FAILED, error.clone());
                }
                let (outcome, stop) = step(&entry.extension, result);
                span.record(|| Payload::new().safe(names::HOOK_OUTCOME, outcome.as_str()));
                Ok::<bool, std::convert::Infallible>(stop)
            })
            .await;
            if stop == Ok(true) {
                return;
            }
        }
    }

    /// [`Hooks::run`] for the usual rules: no result = `completed`, a failure = `failed` (the
    /// chain goes on), a result goes to `apply`.
    async fn chain<H: Hook>(
        &self,
        hook: H,
        ctx: &HookContext,
        event: impl FnMut() -> H::Event,
        mut apply: impl FnMut(&str, H::Output) -> (Outcome, bool),
    ) {
        self.run(hook, ctx, event, |extension, result| match result {
            Ok(Some(output)) => apply(extension, output),
            Ok(None) => (Outcome::Completed, false),
            Err(_) => (Outcome::Failed, false),
        })
        .await;
    }

    /// `input`: transforms chain, the first `Handled` wins.
    pub async fn input(&self, event: InputEvent, ctx: &HookContext) -> InputOutcome {
        let current = Mutex::new(event);
        let mut handled = None;
        self.chain(
            hooks::Input,
            ctx,
            || lock(&current).clone(),
            |extension, action| match action {
                InputAction::Transform { text } => {
                    lock(&current).text = text;
                    (Outcome::Transformed, false)
                }
                InputAction::Handled => {
                    handled = Some(extension.to_owned());
                    (Outcome::Handled, true)
                }
                InputAction::Continue => (Outcome::Completed, false),
            },
        )
        .await;
        match handled {
            Some(extension) => InputOutcome::Handled { extension },
            None => InputOutcome::Continue(into_inner(current).text),
        }
    }

    /// `before_agent_start`: injected messages collected, system prompt chained.
    pub async fn before_agent_start(
        &self,
        event: BeforeAgentStartEvent,
        ctx: &HookContext,
    ) -> (Vec<InjectedMessage>, Option<String>) {
        let current = Mutex::new(event);
        let mut messages = Vec::new();
        self.chain(
            hooks::BeforeAgentStart,
            ctx,
            || lock(&current).clone(),
            |_, result| {
                let changed = !result.messages.is_empty() || result.system_prompt.is_some();
                messages.extend(result.messages);
                if let Some(prompt) = result.system_prompt {
                    lock(&current).system_prompt = Some(prompt);
                }
                (if changed { Outcome::Transformed } else { Outcome::Completed }, false)
            },
        )
        .await;
        (messages, into_inner(current).system_prompt)
    }

    /// `context`: each handler may replace the messages; the last replacement is sent.
    pub async fn context(&self, messages: Vec<Message>, ctx: &HookContext) -> Vec<Message> {
        let current = Mutex::new(ContextEvent { messages });
        self.chain(
            hooks::Context,
            ctx,
            || lock(&current).clone(),
            |_, messages| {
                lock(&current).messages = messages;
                (Outcome::Transformed, false)
            },
        )
        .await;
        into_inner(current).messages
    }

    /// `before_provider_headers`: patches chain; returns the combined patch (lowercase names).
    pub async fn before_provider_headers(&self, event: ProviderHeadersEvent, ctx: &HookContext) -> HeaderPatch {
        let current = Mutex::new(event);
        let mut combined = HeaderPatch::new();
        self.chain(
            hooks::BeforeProviderHeaders,
            ctx,
            || lock(&current).clone(),
            |_, patch| {
                let mut event = lock(&current);
                for (name, value) in patch {
                    let name = name.to_ascii_lowercase();
                    match &value {
                        Some(v) => event.headers.insert(name.clone(), v.clone()),
                        None => event.headers.remove(&name),
                    };
                    combined.insert(name, value);
                }
                (Outcome::Transformed, false)
            },
        )
        .await;
        combined
    }

    /// `before_provider_request`: replacements chain; returns the payload to send.
    pub async fn before_provider_request(&self, payload: Value, ctx: &HookContext) -> Value {
        let current = Mutex::new(ProviderRequestEvent { payload });
        self.chain(
            hooks::BeforeProviderRequest,
            ctx,
            || lock(&current).clone(),
            |_, payload| {
                lock(&current).payload = payload;
                (Outcome::Transformed, false)
            },
        )
        .await;
        into_inner(current).payload
    }

    /// `after_provider_response`: observation.
    pub async fn after_provider_response(&self, event: ProviderResponseEvent, ctx: &HookContext) {
        self.run(hooks::AfterProviderResponse, ctx, || event.clone(), observed).await;
    }

    /// `tool_call`: input changes chain, the first block wins, a failing handler blocks.
    pub async fn tool_call(&self, event: ToolCallEvent, ctx: &HookContext) -> ToolCallDecision {
        let current = Mutex::new(event);
        let mut blocked = None;
        self.run(
            hooks::ToolCall,
            ctx,
            || lock(&current).clone(),
            |extension, result| match result {
                Ok(Some(result)) => {
                    let changed = result.input.is_some();
                    if let Some(input) = result.input {
                        lock(&current).input = input;
                    }
                    if result.block {
                        let reason = result.reason.unwrap_or_else(|| format!("blocked by extension {extension}"));
                        blocked = Some((extension.to_owned(), reason));
                        (Outcome::Blocked, true)
                    } else {
                        (if changed { Outcome::Transformed } else { Outcome::Completed }, false)
                    }
                }
                Ok(None) => (Outcome::Completed, false),
                Err(error) => {
                    blocked = Some((extension.to_owned(), format!("extension {extension} failed: {error}")));
                    (Outcome::Failed, true)
                }
            },
        )
        .await;
        ToolCallDecision { input: into_inner(current).input, blocked }
    }

    /// `tool_result`: partial patches accumulate.
    pub async fn tool_result(&self, event: ToolResultEvent, ctx: &HookContext) -> ToolResultEvent {
        let current = Mutex::new(event);
        self.chain(
            hooks::ToolResult,
            ctx,
            || lock(&current).clone(),
            |_, patch| {
                let mut event = lock(&current);
                if let Some(content) = patch.content {
                    event.content = content;
                }
                if let Some(details) = patch.details {
                    event.details = Some(details);
                }
                if let Some(is_error) = patch.is_error {
                    event.is_error = is_error;
                }
                (Outcome::Transformed, false)
            },
        )
        .await;
        into_inner(current)
    }

    /// `message_end`: replacements chain; one that changes the role is rejected (reported as a
    /// failure of that extension) and the message stays as it was before it.
    pub async fn message_end(&self, message: Message, ctx: &HookContext) -> Message {
        let role = message.role();
        let current = Mutex::new(MessageEndEvent { message });
        let mut rejected = Vec::new();
        self.chain(
            hooks::MessageEnd,
            ctx,
            || lock(&current).clone(),
            |extension, replacement| {
                if replacement.role() == role {
                    lock(&current).message = replacement;
                    return (Outcome::Transformed, false);
                }
                let error = format!("replacement changes the message role from {role} to {}", replacement.role());
                rejected.push((extension.to_owned(), error));
                (Outcome::Failed, false)
            },
        )
        .await;
        for (extension, error) in rejected {
            self.fail(&extension, hooks::MessageEnd.name(), error);
        }
        into_inner(current).message
    }

    /// `session_before_compact` / `session_before_tree`: the first cancel wins, else the last
    /// result. Returns the result and the extension that gave it.
    pub async fn session_before<H>(&self, hook: H, event: H::Event, ctx: &HookContext) -> Option<(String, BeforeResult)>
    where
        H: Hook<Output = BeforeResult>,
    {
        let mut last = None;
        self.chain(
            hook,
            ctx,
            || event.clone(),
            |extension, result| {
                let cancel = result.cancel;
                last = Some((extension.to_owned(), result));
                if cancel { (Outcome::Cancelled, true) } else { (Outcome::Transformed, false) }
            },
        )
        .await;
        last
    }

    /// Delivers a notification to its handlers.
    pub async fn notify(&self, event: &AgentEvent, ctx: &HookContext) {
        let Some(kind) = hooks::Notify::of(event) else { return };
        if self.has(kind) {
            self.run(kind, ctx, || event.clone(), observed).await;
        }
    }
}

fn observed(_: &str, result: Result<Option<()>, String>) -> (Outcome, bool) {
    (if result.is_ok() { Outcome::Completed } else { Outcome::Failed }, false)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn into_inner<T>(m: Mutex<T>) -> T {
    m.into_inner().unwrap_or_else(|e| e.into_inner())
}

fn panic_message(panic: &(dyn Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_owned());
    format!("panicked: {text}")
}

/// An injected message as the user-role message the model sees.
pub(crate) fn injected_as_user(message: &InjectedMessage) -> Message {
    Message::user(message.content.clone())
}

/// An injected message as its `custom_message` session entry.
pub(crate) fn injected_entry(message: &InjectedMessage) -> crate::session::EntryKind {
    crate::session::EntryKind::CustomMessage {
        custom_type: message.custom_type.clone(),
        content: UserContent::Text(message.content.clone()),
        display: message.display,
        details: None,
    }
}
