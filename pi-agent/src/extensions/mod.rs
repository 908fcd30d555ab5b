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

mod dispatch;
mod events;
pub mod hooks;
pub mod process;

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::AgentEvent;
use crate::message::Message;
use crate::model::ModelInfo;
use crate::session::{Entry, SessionWriter};

pub use dispatch::{EntrySource, ExtensionRequest, Hooks};
pub(crate) use dispatch::{injected_as_user, injected_entry};
pub use events::*;

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
    /// Where it was loaded from, a fixed word for telemetry (`builtin` for a Rust value;
    /// process extensions say `global`, `project`, `settings`, `managed` or `flag`).
    fn origin(&self) -> &'static str {
        "builtin"
    }
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
    origin: &'static str,
    /// The name as telemetry may carry it (identifier-shaped, else `invalid`), computed once.
    exported: Arc<str>,
}

impl fmt::Debug for ExtensionApi<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExtensionApi").field("extension", &self.extension).finish_non_exhaustive()
    }
}

impl ExtensionApi<'_> {
    /// Where this extension's `pi.appendEntry` calls wait: the agent takes them and writes each
    /// as a `custom` session entry at its next write (a prompt's start, a turn's end, shutdown).
    pub fn custom_entries(&mut self, source: dispatch::EntrySource) {
        self.hooks.entry_sources.push(source);
    }

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
        self.hooks.handlers.entry(hook.name()).or_default().push(Registered {
            extension: self.extension.clone(),
            origin: self.origin,
            exported: self.exported.clone(),
            handler: Box::new(handler),
        });
    }
}

type Handler<H> =
    Arc<dyn Fn(<H as Hook>::Event, HookContext) -> BoxFuture<HookResult<<H as Hook>::Output>> + Send + Sync>;

struct Registered {
    extension: Arc<str>,
    /// Where the extension was loaded from ([`Extension::origin`]).
    origin: &'static str,
    /// The extension's name as exported (see [`ExtensionApi`]).
    exported: Arc<str>,
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
    /// The agent's tools: every `(name, description)` and the active names (upstream's
    /// `getAllTools` / `getActiveTools`).
    pub tools: Arc<ToolsView>,
    /// The system prompt of the running prompt, once `before_agent_start` has settled it
    /// (upstream's `ctx.getSystemPrompt()`); `None` outside a prompt or when there is none.
    pub system_prompt: Option<Arc<str>>,
    /// The thinking level (`None`: off).
    pub thinking_level: Option<String>,
    /// Context tokens as the next request would send them (upstream's `getContextUsage`).
    pub context_tokens: u64,
    /// Messages the user queued are waiting (upstream's `hasPendingMessages`).
    pub pending_messages: bool,
}

/// Every tool's `(name, description)`, and the active tools' names.
pub type ToolsView = (Vec<(String, String)>, Vec<String>);

impl HookContext {
    /// A context outside any session: no user interface, nothing to cancel, the temporary
    /// directory, an empty session, `model` (for running hooks directly: tests, benchmarks).
    pub fn detached(model: ModelInfo) -> HookContext {
        HookContext {
            has_ui: false,
            cancel: CancellationToken::new(),
            cwd: std::env::temp_dir(),
            session: SessionFacade::default(),
            model,
            tools: Arc::default(),
            system_prompt: None,
            thinking_level: None,
            context_tokens: 0,
            pending_messages: false,
        }
    }
}

impl fmt::Debug for HookContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookContext").field("has_ui", &self.has_ui).field("model", &self.model.id).finish()
    }
}

/// Read-only access to the session an agent writes.
#[derive(Debug, Clone, Default)]
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

/// The error a handler returns when it did not answer in time: its hook span's outcome is
/// `timeout` rather than `failed` (the chaining treats both as a failing handler).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HandlerTimeout(pub String);

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
