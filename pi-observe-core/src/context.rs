//! The attribution context and the current trace position, carried along async chains.
//!
//! The current [`ObsContext`] lives in a `tokio::task_local!` for async code, with a thread-local
//! fallback for synchronous code ([`run_with_context_sync`], [`ObsContext::wrap`]). Lookups read
//! the thread-local first: it is only ever set by a synchronous scope, which is always the
//! innermost one on its thread while it runs, and every async scope clears it while it polls.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;

use crate::attribution::Attribution;
use crate::ids::{SpanId, TraceId};
use crate::shared::{Observability, SpanInner};
use crate::traceparent::TraceParent;

/// Where the current code is in a trace, who it is attributed to, and which hub receives its
/// events (upstream pi's `PiObservabilityContext`, `docs/design/contract.md`).
#[derive(Clone, Default)]
pub struct ObsContext {
    pub(crate) trace_id: Option<TraceId>,
    pub(crate) span_id: Option<SpanId>,
    pub(crate) span: Option<Arc<SpanInner>>,
    pub(crate) trace_flags: u8,
    pub(crate) attribution: Attribution,
    pub(crate) hub: Option<Observability>,
}

impl fmt::Debug for ObsContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObsContext")
            .field("trace_id", &self.trace_id)
            .field("span_id", &self.span_id)
            .field("attribution", &self.attribution)
            .field("explicit_hub", &self.hub.is_some())
            .finish()
    }
}

impl ObsContext {
    /// An empty context: no trace, no attribution, the global hub.
    pub fn new() -> Self {
        Self::default()
    }

    /// The trace the current code belongs to, if any.
    pub fn trace_id(&self) -> Option<TraceId> {
        self.trace_id
    }

    /// The current span (a local operation or an adopted remote parent), if any.
    pub fn span_id(&self) -> Option<SpanId> {
        self.span_id
    }

    /// The attribution context in force.
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The hub events go to: the one set by a scope, else the current operation's (an
    /// operation's own context names no hub: its span knows it), else
    /// [`Observability::global`].
    pub fn hub(&self) -> &Observability {
        match (&self.hub, &self.span) {
            (Some(hub), _) => hub,
            (None, Some(span)) => &span.hub,
            (None, None) => Observability::global(),
        }
    }

    /// The W3C `traceparent` for outgoing requests and child processes, when there is a trace.
    pub fn traceparent(&self) -> Option<TraceParent> {
        Some(TraceParent::new(self.trace_id?, self.span_id?, self.trace_flags))
    }

    /// This context with `attribution` merged in (its keys win).
    pub fn with_attribution(mut self, attribution: &Attribution) -> Self {
        self.attribution = self.attribution.merged(attribution);
        self
    }

    /// This context as the child of a remote parent: the next operation started under it joins
    /// the parent's trace with the parent's span id as its `parentSpanId`.
    pub fn with_remote_parent(mut self, parent: TraceParent) -> Self {
        self.trace_id = Some(parent.trace_id);
        self.span_id = Some(parent.parent_id);
        self.span = None;
        self.trace_flags = parent.flags;
        self
    }

    /// This context sending events to `hub`.
    pub fn with_hub(mut self, hub: Observability) -> Self {
        self.hub = Some(hub);
        self
    }

    /// Runs `fut` with exactly this context as the current one: a context captured elsewhere
    /// (what [`spawn`] and [`ContextExt::in_current_context`] use to cross task boundaries).
    pub fn scope<F: Future>(self, fut: F) -> Scoped<F> {
        Scoped::new(Patch::Fixed(self), fut)
    }

    /// Runs synchronous `f` with this context as the current one on this thread.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        let _guard = SyncGuard::enter(Some(self.clone()));
        f()
    }

    /// [`ObsContext::in_scope`] without cloning the context.
    pub(crate) fn in_scope_owned<R>(self, f: impl FnOnce() -> R) -> R {
        let _guard = SyncGuard::enter(Some(self));
        f()
    }

    /// Wraps a closure so that it runs under this context, wherever it is called (for
    /// `std::thread::spawn`, `spawn_blocking`, thread pools).
    pub fn wrap<R>(self, f: impl FnOnce() -> R) -> impl FnOnce() -> R {
        move || self.in_scope(f)
    }
}

tokio::task_local! {
    static TASK_CONTEXT: ObsContext;
}

thread_local! {
    static SYNC_CONTEXT: RefCell<Option<ObsContext>> = const { RefCell::new(None) };
}

/// Restores the previous thread-local context when dropped (also on panic).
struct SyncGuard {
    previous: Option<ObsContext>,
}

impl SyncGuard {
    fn enter(context: Option<ObsContext>) -> SyncGuard {
        let previous = SYNC_CONTEXT.try_with(|slot| slot.replace(context)).ok().flatten();
        SyncGuard { previous }
    }
}

impl Drop for SyncGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let _ = SYNC_CONTEXT.try_with(|slot| slot.replace(previous));
    }
}

/// How a [`Scoped`] future finds its context.
enum Patch {
    /// Exactly this context (captured when the future was made).
    Fixed(ObsContext),
    /// The context in force when the future is first polled, with these changes.
    Derive { attribution: Option<Attribution>, hub: Option<Observability>, remote: Option<TraceParent> },
}

impl Patch {
    fn resolve(self) -> ObsContext {
        match self {
            Patch::Fixed(ctx) => ctx,
            Patch::Derive { attribution, hub, remote } => {
                let mut ctx = current();
                if let Some(hub) = hub {
                    ctx.hub = Some(hub);
                }
                if let Some(attribution) = attribution {
                    ctx.attribution = ctx.attribution.merged(&attribution);
                }
                match remote {
                    Some(parent) => ctx.with_remote_parent(parent),
                    None => ctx,
                }
            }
        }
    }
}

pin_project! {
    /// A future running under an [`ObsContext`]; see [`ContextExt`], [`run_with_context`] and
    /// [`Observability::scope`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<F> {
        #[pin]
        state: ScopedState<F>,
    }
}

pin_project! {
    /// The future is held once: moved from `Pending` into the task-local scope at the first
    /// poll (it is not pinned before that).
    #[project = ScopedProj]
    enum ScopedState<F> {
        Pending { pending: Option<(Patch, F)> },
        Running { #[pin] fut: TaskLocalFuture<ObsContext, F> },
    }
}

impl<F> Scoped<F> {
    fn new(patch: Patch, fut: F) -> Self {
        Scoped { state: ScopedState::Pending { pending: Some((patch, fut)) } }
    }

    pub(crate) fn derive(
        fut: F,
        attribution: Option<Attribution>,
        hub: Option<Observability>,
        remote: Option<TraceParent>,
    ) -> Self {
        Scoped::new(Patch::Derive { attribution, hub, remote }, fut)
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut state = self.project().state;
        if let ScopedProj::Pending { pending } = state.as_mut().project() {
            let Some((patch, fut)) = pending.take() else { return Poll::Pending };
            state.set(ScopedState::Running { fut: TASK_CONTEXT.scope(patch.resolve(), fut) });
        }
        let ScopedProj::Running { fut: running } = state.project() else {
            // Unreachable: `Pending` becomes `Running` above.
            return Poll::Pending;
        };
        // A synchronous scope further out on this thread must not shadow our task-local.
        let sync_scope_active = SYNC_CONTEXT.try_with(|slot| slot.borrow().is_some()).unwrap_or(false);
        if sync_scope_active {
            let _guard = SyncGuard::enter(None);
            running.poll(cx)
        } else {
            running.poll(cx)
        }
    }
}

/// Calls `f` with the current context (cloning it only when it comes from a synchronous scope).
pub fn with_current<R>(f: impl FnOnce(&ObsContext) -> R) -> R {
    if let Some(ctx) = SYNC_CONTEXT.try_with(|slot| slot.borrow().clone()).ok().flatten() {
        return f(&ctx);
    }
    let mut f = Some(f);
    if let Ok(Some(result)) = TASK_CONTEXT.try_with(|ctx| f.take().map(|f| f(ctx))) {
        return result;
    }
    match f {
        Some(f) => f(empty_context()),
        // `f` is only taken when the task-local was readable, and then we returned above.
        None => unreachable!("context callback consumed without a result"),
    }
}

/// The current context (cheap: a few `Arc` clones).
pub fn current() -> ObsContext {
    with_current(ObsContext::clone)
}

fn empty_context() -> &'static ObsContext {
    static EMPTY: std::sync::OnceLock<ObsContext> = std::sync::OnceLock::new();
    EMPTY.get_or_init(ObsContext::default)
}

/// Runs `fut` with `attribution` merged into the attribution context (inner keys win), on the
/// hub and trace position in force where it is first polled. Upstream pi's `runWithPiContext`.
/// For code that does not hold a hub (library code adding attribution under whatever hub is
/// current); with a hub at hand, [`Observability::enter`] sets hub, attribution and remote
/// parent in one scope.
pub fn run_with_context<F: Future>(attribution: impl Into<Attribution>, fut: F) -> Scoped<F> {
    Scoped::derive(fut, Some(attribution.into()), None, None)
}

/// Synchronous counterpart of [`run_with_context`], for code that is not async (a thread-local
/// scope instead of the task-local).
pub fn run_with_context_sync<R>(attribution: impl Borrow<Attribution>, f: impl FnOnce() -> R) -> R {
    current().with_attribution(attribution.borrow()).in_scope(f)
}

/// Runs `fut` as the child of an incoming W3C `traceparent` (e.g. the `TRACEPARENT` env var of a
/// parent process). A malformed or absent value is ignored: `fut` then starts its own trace.
/// For code that does not hold a hub; with one, use [`Observability::enter`] with
/// [`Scope::traceparent`](crate::Scope::traceparent).
pub fn run_with_traceparent<F: Future>(traceparent: Option<&str>, fut: F) -> Scoped<F> {
    Scoped::derive(fut, None, None, traceparent.and_then(TraceParent::parse))
}

/// Futures that keep the current context across `tokio::spawn`, which does not inherit
/// task-locals.
pub trait ContextExt: Future + Sized {
    /// Captures the current context now; the future runs under it wherever it is polled.
    fn in_current_context(self) -> Scoped<Self> {
        current().scope(self)
    }

    /// Runs the future under `ctx`.
    fn in_context(self, ctx: ObsContext) -> Scoped<Self> {
        ctx.scope(self)
    }
}

impl<F: Future> ContextExt for F {}

/// `tokio::spawn` that keeps the current context (attribution, trace position, hub).
/// Must be called from within a tokio runtime, like `tokio::spawn`.
pub fn spawn<F>(fut: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(fut.in_current_context())
}

/// `tokio::task::spawn_blocking` that keeps the current context.
pub fn spawn_blocking<F, R>(f: F) -> tokio::task::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    tokio::task::spawn_blocking(current().wrap(f))
}

/// `std::thread::spawn` that keeps the current context.
pub fn spawn_thread<F, R>(f: F) -> std::thread::JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    std::thread::spawn(current().wrap(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(pairs: &[(&str, &str)]) -> Attribution {
        pairs.iter().copied().collect()
    }

    #[test]
    fn nested_contexts_merge_and_inner_keys_shadow() {
        let outer = attrs(&[("userId", "u1"), ("orgId", "acme")]);
        let inner = attrs(&[("userId", "u2"), ("teamId", "t")]);
        let seen = run_with_context_sync(&outer, || run_with_context_sync(&inner, || current().attribution().clone()));
        assert_eq!(seen, attrs(&[("userId", "u2"), ("orgId", "acme"), ("teamId", "t")]));
        assert!(current().attribution().is_empty(), "scope leaked past its end");
    }

    #[test]
    fn async_scope_wins_over_an_enclosing_sync_scope_inside_block_on() {
        let outer = attrs(&[("userId", "sync")]);
        let seen = run_with_context_sync(&outer, || {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(run_with_context(attrs(&[("userId", "async")]), async { current() }))
        });
        assert_eq!(seen.attribution().get("userId"), Some("async"));
    }

    #[test]
    fn nested_async_contexts_merge_and_restore() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let (inner, after) = rt.block_on(run_with_context(attrs(&[("userId", "u1"), ("orgId", "o")]), async {
            let inner = run_with_context(attrs(&[("userId", "u2")]), async { current().attribution().clone() }).await;
            (inner, current().attribution().clone())
        }));
        assert_eq!(inner, attrs(&[("userId", "u2"), ("orgId", "o")]));
        assert_eq!(after, attrs(&[("userId", "u1"), ("orgId", "o")]));
    }

    #[test]
    fn malformed_traceparent_is_ignored_and_a_valid_one_is_adopted() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let ctx = rt.block_on(run_with_traceparent(Some("garbage"), async { current() }));
        assert!(ctx.trace_id().is_none());
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let ctx = rt.block_on(run_with_traceparent(Some(tp), async { current() }));
        assert_eq!(ctx.trace_id().unwrap().to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(ctx.span_id().unwrap().to_string(), "b7ad6b7169203331");
        assert_eq!(ctx.traceparent().unwrap().to_string(), tp);
    }

    #[test]
    fn spawned_thread_keeps_attribution() {
        let seen = run_with_context_sync(attrs(&[("userId", "u9")]), || {
            spawn_thread(|| current().attribution().get("userId").map(str::to_owned))
        })
        .join()
        .unwrap();
        assert_eq!(seen.as_deref(), Some("u9"));
    }
}
