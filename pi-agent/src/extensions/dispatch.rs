//! [`Hooks`]: every extension's handlers, and the chaining rules that run them.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use pi_observe_core::{Payload, Span, names, trace_operation_with};
use serde_json::Value;

use crate::events::AgentEvent;
use crate::message::{Message, UserContent};

use super::*;
/// The handlers of every extension added to an agent, and the chaining rules that run them.
#[derive(Default)]
pub struct Hooks {
    pub(super) handlers: HashMap<&'static str, Vec<Registered>>,
    extensions: Vec<String>,
    failures: Mutex<Vec<HookFailure>>,
    /// Where extensions' `pi.appendEntry` calls wait for the agent to write them.
    pub(super) entry_sources: Vec<EntrySource>,
}

/// What extensions asked of the agent outside their handlers' replies, taken once each.
pub type EntrySource = Arc<dyn Fn() -> Vec<ExtensionRequest> + Send + Sync>;

/// A request of an extension, applied at the agent's next write (a prompt's start, a turn's
/// end, the session's end).
#[derive(Clone)]
pub enum ExtensionRequest {
    /// A session entry: `custom` (`appendEntry`), `session_info` (`setSessionName`), `label`.
    Entry(Box<crate::session::EntryKind>),
    /// Only these tools are offered and run from now on (`setActiveTools`).
    ActiveTools(Vec<String>),
    /// A message for the model (`sendMessage`): a `custom_message` entry, in the context from
    /// then on.
    Message(InjectedMessage),
    /// Tools registered after start (upstream's `registerTool` at any time): offered and run
    /// from then on, replacing a tool of the same name.
    Tools(Vec<Arc<dyn crate::tools::Tool>>),
}

impl fmt::Debug for ExtensionRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtensionRequest::Entry(entry) => f.debug_tuple("Entry").field(entry).finish(),
            ExtensionRequest::ActiveTools(names) => f.debug_tuple("ActiveTools").field(names).finish(),
            ExtensionRequest::Message(message) => f.debug_tuple("Message").field(message).finish(),
            ExtensionRequest::Tools(tools) => {
                f.debug_tuple("Tools").field(&tools.iter().map(|t| t.name()).collect::<Vec<_>>()).finish()
            }
        }
    }
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
    Timeout,
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
            Outcome::Timeout => "timeout",
        }
    }
}

impl Hooks {
    /// No extensions.
    pub fn new() -> Self {
        Self::default()
    }

    /// What extensions asked since the last call, in their order.
    pub fn take_requests(&self) -> Vec<ExtensionRequest> {
        self.entry_sources.iter().flat_map(|source| source()).collect()
    }

    /// Registers an extension's handlers after those already added.
    pub fn add(&mut self, extension: &dyn Extension) {
        let name: Arc<str> = Arc::from(extension.name());
        self.extensions.push(name.to_string());
        // The name is the extension's text: telemetry carries it only if identifier-shaped.
        let exported = Arc::from(pi_observe_core::identifier_or_invalid(&name));
        extension.register(&mut ExtensionApi { hooks: self, extension: name, exported, origin: extension.origin() });
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
            let exported = entry.exported.clone();
            let origin = entry.origin;
            let payload = || {
                Payload::new()
                    .safe(names::HOOK_NAME, hook.name())
                    .safe(names::EXTENSION_NAME, exported.to_string())
                    .safe(names::EXTENSION_ORIGIN, origin)
            };
            let call = AssertUnwindSafe(async { handler(event(), ctx.clone()).await }).catch_unwind();
            let step = &mut step;
            let stop = trace_operation_with(names::AGENT_HOOK, payload, |span: Span| async move {
                let mut timed_out = false;
                let result = match call.await {
                    Ok(Ok(output)) => Ok(output),
                    Ok(Err(error)) => {
                        timed_out = error.is::<HandlerTimeout>();
                        Err(error.to_string())
                    }
                    Err(panic) => Err(panic_message(panic.as_ref())),
                };
                if let Err(error) = &result {
                    self.fail(&entry.extension, hook.name(), error.clone());
                    span.set_error(names::ERROR_HOOK_FAILED, error.clone());
                }
                let (outcome, stop) = step(&entry.extension, result);
                let outcome = if timed_out && outcome == Outcome::Failed { Outcome::Timeout } else { outcome };
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

    /// A chain whose handlers each replace a part of the event (`set`); returns the event as
    /// the last one left it.
    async fn replacing<H: Hook>(
        &self,
        hook: H,
        ctx: &HookContext,
        event: H::Event,
        set: impl Fn(&mut H::Event, H::Output),
    ) -> H::Event
    where
        H::Event: Clone,
    {
        let current = Mutex::new(event);
        let apply = |_: &str, output| {
            set(&mut lock(&current), output);
            (Outcome::Transformed, false)
        };
        self.chain(hook, ctx, || lock(&current).clone(), apply).await;
        into_inner(current)
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
        let event = ContextEvent { messages };
        self.replacing(hooks::Context, ctx, event, |event, messages| event.messages = messages).await.messages
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
        let event = ProviderRequestEvent { payload };
        self.replacing(hooks::BeforeProviderRequest, ctx, event, |event, payload| event.payload = payload).await.payload
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

    /// `user_bash`: the first handler that ran the command in pi's place gives its result
    /// (`None`: pi runs it).
    pub async fn user_bash(&self, event: UserBashEvent, ctx: &HookContext) -> Option<UserBashResult> {
        let mut ran = None;
        self.chain(
            hooks::UserBash,
            ctx,
            || event.clone(),
            |_extension, result| {
                ran = Some(result);
                (Outcome::Transformed, true)
            },
        )
        .await;
        ran
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
