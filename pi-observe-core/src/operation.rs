//! `trace_operation`: one timed operation, paired start and end/error records, whatever happens.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::clock::Tick;
use crate::context::{self, ObsContext, Scoped};
use crate::event::{ErrorInfo, EventKind, ObsEvent, Timestamp};
use crate::hub::any_interest;
use crate::ids::{SpanId, TraceId};
use crate::names;
use crate::payload::{Payload, PayloadSource};
use crate::running::Running;
use crate::shared::{SpanInner, SpanState, Status};
use crate::span::{Span, build_payload};
use crate::traceparent::TraceParent;

/// How an operation's result maps to the end/error record.
///
/// Implemented for `Result<T, E: Display>` (an `Err` emits `error` with the error's type name
/// and message) and `()`. Implement it for your own result types.
pub trait Outcome {
    /// `Some` when the operation failed.
    fn error_info(&self) -> Option<ErrorInfo>;
}

impl<T, E: fmt::Display + 'static> Outcome for Result<T, E> {
    fn error_info(&self) -> Option<ErrorInfo> {
        self.as_ref().err().map(|e| ErrorInfo::new(error_type_name::<E>(), e.to_string()))
    }
}

impl Outcome for () {
    fn error_info(&self) -> Option<ErrorInfo> {
        None
    }
}

/// The last path segment of a type name, without generics (`std::io::Error` → `Error`,
/// `my::HttpError` → `HttpError`); boxed trait objects read as `Error`.
fn error_type_name<E: ?Sized>() -> String {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    let last = base.rsplit("::").next().unwrap_or(base);
    match last {
        "Box" | "Arc" | "Rc" | "" => "Error".to_owned(),
        other => other.to_owned(),
    }
}

enum Settlement {
    Returned(Option<ErrorInfo>),
    Panicked(ErrorInfo),
    Cancelled,
}

impl SpanInner {
    fn settle(&self, how: Settlement) {
        if self.shed {
            // Settled once (its guard is taken); the subscribers count it as dropped.
            self.hub.shed_operation();
            return;
        }
        let cancelled = matches!(how, Settlement::Cancelled);
        let slot = self.running.load(Relaxed);
        // The end record is built under the lock, its payload taken straight into it, in the
        // `Option` the hub delivers it from (each move of a record is a copy).
        let mut event = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.settled {
                return;
            }
            state.settled = true;
            let explicit = state.status.take();
            let error = match how {
                Settlement::Returned(automatic) => match explicit {
                    Some(Status::Ok) => None,
                    Some(Status::Error(error)) => Some(error),
                    None => automatic,
                },
                Settlement::Panicked(error) => Some(error),
                Settlement::Cancelled => {
                    Some(ErrorInfo::new(names::ERROR_CANCELLED, "operation dropped before it completed"))
                }
            };
            // Never before the start (a counter read on another core may lag by a few cycles).
            let ended = Tick::now().max(self.started);
            let elapsed = ended.since(self.started);
            Some(ObsEvent {
                kind: if error.is_some() { EventKind::Error } else { EventKind::End },
                name: self.name.clone(),
                trace_id: self.trace_id,
                span_id: Some(self.span_id),
                parent_span_id: self.parent,
                timestamp: ended.timestamp(),
                duration: Some(elapsed),
                context: self.attribution.clone(),
                payload: std::mem::take(&mut state.payload),
                error,
                captured: 0,
                start_skipped: self.start_skipped.load(Relaxed),
            })
        };
        if slot != Running::NONE {
            self.hub.inner.running.remove(slot);
        }
        if cancelled && let Some(event) = &mut event {
            event.payload.insert(names::ABORTED, true, crate::Class::Safe);
        }
        self.hub.emit_from(&mut event);
    }

    /// This operation's start record, carrying `payload`.
    fn start_record(&self, payload: Payload) -> ObsEvent {
        ObsEvent {
            kind: EventKind::Start,
            name: self.name.clone(),
            trace_id: self.trace_id,
            span_id: Some(self.span_id),
            parent_span_id: self.parent,
            timestamp: self.started.timestamp(),
            duration: None,
            context: self.attribution.clone(),
            payload,
            error: None,
            captured: 0,
            start_skipped: false,
        }
    }

    /// The start record of this operation, with the payload it has now, if it is still running
    /// and its start was not delivered; with `delivered`, its later records say it was. Under
    /// the state lock, as settling reads the flag: an end never says "delivered" about a start
    /// that was not.
    pub(crate) fn undelivered_start(&self, delivered: bool) -> Option<ObsEvent> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.settled || !self.start_skipped.load(Relaxed) {
            return None;
        }
        if delivered {
            self.start_skipped.store(false, Relaxed);
        }
        Some(self.start_record(state.payload.clone()))
    }
}

fn panic_info(panic: &(dyn Any + Send)) -> ErrorInfo {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_owned());
    ErrorInfo::new(names::ERROR_PANIC, message)
}

/// Starts an operation in the current context: ids, `start` record, child context.
/// `None` when nobody listens.
fn begin(name: Cow<'static, str>, payload: impl PayloadSource) -> Option<(Arc<SpanInner>, ObsContext)> {
    if !any_interest() {
        return None;
    }
    // The parent is read in place: only what the span and its child context keep is cloned.
    context::with_current(|parent| begin_under(parent, name, payload))
}

fn begin_under(
    parent: &ObsContext,
    name: Cow<'static, str>,
    payload: impl PayloadSource,
) -> Option<(Arc<SpanInner>, ObsContext)> {
    let hub = parent.hub();
    if !hub.has_subscribers() {
        return None;
    }
    let plan = hub.plan(&name);
    let trace_id = parent.trace_id.unwrap_or_else(TraceId::random);
    let span_id = SpanId::random();
    let remote_parent = parent.span_id.is_some() && parent.span.is_none();
    // A shed operation (every subscriber would drop its records) keeps its ids, so that its
    // children keep their parent, and builds no payload, reads no clock and emits no record.
    let emits_start = !plan.shed && (remote_parent || plan.start);
    let started = if plan.shed { Tick::anchor() } else { Tick::now() };
    // The payload is built inside the span's initializer, not moved there through locals: it
    // is a few hundred bytes, and each move is a copy on the caller's thread.
    let mut inner = Arc::new(SpanInner {
        hub: hub.clone(),
        name,
        trace_id,
        span_id,
        parent: parent.span_id,
        attribution: parent.attribution.clone(),
        started,
        state: Mutex::new(SpanState {
            settled: false,
            payload: if plan.shed { Payload::new() } else { build_payload(hub, payload) },
            status: None,
        }),
        running: AtomicU64::new(Running::NONE),
        start_skipped: AtomicBool::new(!emits_start),
        shed: plan.shed,
    });
    if remote_parent
        && !plan.shed
        && let Some(fresh) = Arc::get_mut(&mut inner)
    {
        // A remote parent: say whether the caller sampled the trace (parent-based samplers).
        let sampled = parent.trace_flags & TraceParent::SAMPLED != 0;
        let kept = &mut fresh.state.get_mut().unwrap_or_else(|e| e.into_inner()).payload;
        kept.insert(names::PARENT_SAMPLED, sampled, crate::Class::Safe);
    }
    // The start record is emitted unless no subscriber needs it; a remote parent's sampling
    // decision always is. (Without one, the operation goes on the hub's running list only if
    // it waits: `OpGuard::waiting`.)
    if emits_start {
        let payload = inner.state.lock().unwrap_or_else(|e| e.into_inner()).payload.clone();
        hub.emit(inner.start_record(payload));
    }
    let trace_flags = if parent.trace_id.is_some() { parent.trace_flags } else { TraceParent::SAMPLED };
    let child = ObsContext {
        trace_id: Some(trace_id),
        span_id: Some(span_id),
        span: Some(inner.clone()),
        trace_flags,
        attribution: parent.attribution.clone(),
        // Its span knows the hub (see `ObsContext::hub`): one reference fewer to take and drop.
        hub: None,
    };
    Some((inner, child))
}

/// Settles the span when the operation ends; emits `Cancelled` if dropped unsettled.
#[derive(Default)]
struct OpGuard(Option<Arc<SpanInner>>);

impl OpGuard {
    /// The operation waits (its poll returned `Pending`, or it runs on a thread of its own): if
    /// its start was skipped it goes on the hub's running list, so that a shutdown while it
    /// waits still reports it. One that completes in its first poll is never listed — it can
    /// only be running at a shutdown during that poll.
    fn waiting(&self) {
        if let Some(inner) = &self.0
            && !inner.shed
            && inner.start_skipped.load(Relaxed)
            && inner.running.load(Relaxed) == Running::NONE
        {
            inner.running.store(inner.hub.inner.running.insert(inner), Relaxed);
        }
    }

    fn finish(&mut self, how: Settlement) {
        if let Some(inner) = self.0.take() {
            inner.settle(how);
        }
    }
}

impl Drop for OpGuard {
    fn drop(&mut self) {
        self.finish(Settlement::Cancelled);
    }
}

pin_project! {
    /// Each stage holds the future (or the closure that makes it) once.
    #[project = BodyProj]
    enum Body<P, C, F> {
        Init { init: Option<(P, C)> },
        Plain { #[pin] fut: F },
        // One task-local scope for the whole operation: `make` runs at its first poll, inside it.
        Traced { #[pin] fut: Scoped<Lazy<C, F>> },
    }
}

pin_project! {
    /// `make(span)` called at the first poll, then the future it returned.
    #[project = LazyProj]
    enum Lazy<C, F> {
        Make { make: Option<(C, Span)> },
        Running { #[pin] fut: F },
    }
}

impl<C: FnOnce(Span) -> F, F: Future> Future for Lazy<C, F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if let LazyProj::Make { make } = self.as_mut().project() {
            let Some((make, span)) = make.take() else { return Poll::Pending };
            self.set(Lazy::Running { fut: make(span) });
        }
        match self.project() {
            LazyProj::Running { fut } => fut.poll(cx),
            // Unreachable: replaced by `Running` above.
            LazyProj::Make { .. } => Poll::Pending,
        }
    }
}

pin_project! {
    /// The future returned by [`trace_operation`] and [`trace_operation_with`].
    #[must_use = "futures do nothing unless polled"]
    pub struct Operation<P, C, F: Future> {
        name: Cow<'static, str>,
        // Declared before `guard`: when dropped, children settle before their parent.
        #[pin]
        body: Body<P, C, F>,
        guard: OpGuard,
    }
}

/// Runs `fut` as one operation, following the contract (`docs/design/contract.md`; upstream pi's `traceOperation`): reads the current
/// context, creates a trace id if there is none, a new span id, uses the current span as parent,
/// emits `start`, runs `fut` under the child context, and emits `end` or `error` when it settles:
/// `error` for an `Err` result, for a panic (which is then resumed) and, named `Cancelled` with
/// `aborted=true`, when the future is dropped before completing.
///
/// `payload` is a [`Payload`], `()` or a closure returning one; it is built only when someone
/// listens. With no subscriber anywhere the cost is one relaxed atomic load per poll-start.
///
/// ```
/// use pi_observe_core::{names, trace_operation, Payload};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let text = trace_operation(
///     names::PROVIDER_REQUEST,
///     || Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1"),
///     async { Ok::<_, std::io::Error>("hello".to_string()) },
/// )
/// .await
/// .unwrap();
/// assert_eq!(text, "hello");
/// # });
/// ```
pub fn trace_operation<P, F>(
    name: impl Into<Cow<'static, str>>,
    payload: P,
    fut: F,
) -> Operation<P, impl FnOnce(Span) -> F, F>
where
    P: PayloadSource,
    F: Future,
    F::Output: Outcome,
{
    trace_operation_with(name, payload, move |_span| fut)
}

/// Like [`trace_operation`], but `make` receives the operation's [`Span`] to record attributes
/// merged into the end record, point events, or an explicit status. `make` runs exactly once, at
/// the first poll, inside the child context.
pub fn trace_operation_with<P, C, F>(name: impl Into<Cow<'static, str>>, payload: P, make: C) -> Operation<P, C, F>
where
    P: PayloadSource,
    C: FnOnce(Span) -> F,
    F: Future,
    F::Output: Outcome,
{
    Operation { name: name.into(), body: Body::Init { init: Some((payload, make)) }, guard: OpGuard(None) }
}

impl<P, C, F> Future for Operation<P, C, F>
where
    P: PayloadSource,
    C: FnOnce(Span) -> F,
    F: Future,
    F::Output: Outcome,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        if let BodyProj::Init { init } = this.body.as_mut().project() {
            let Some((payload, make)) = init.take() else { return Poll::Pending };
            match begin(this.name.clone(), payload) {
                None => this.body.set(Body::Plain { fut: make(Span::none()) }),
                Some((inner, child)) => {
                    let span = Span(Some(inner.clone()));
                    *this.guard = OpGuard(Some(inner));
                    this.body.set(Body::Traced { fut: child.scope(Lazy::Make { make: Some((make, span)) }) });
                }
            }
        }
        match this.body.project() {
            BodyProj::Plain { fut } => fut.poll(cx),
            BodyProj::Traced { mut fut } => match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                Ok(Poll::Pending) => {
                    this.guard.waiting();
                    Poll::Pending
                }
                Ok(Poll::Ready(output)) => {
                    this.guard.finish(Settlement::Returned(output.error_info()));
                    Poll::Ready(output)
                }
                Err(panic) => {
                    this.guard.finish(Settlement::Panicked(panic_info(panic.as_ref())));
                    resume_unwind(panic)
                }
            },
            // Unreachable: `Init` is replaced above.
            BodyProj::Init { .. } => Poll::Pending,
        }
    }
}

/// Synchronous [`trace_operation_with`]: runs `f` as one operation on this thread.
pub fn trace_operation_sync<P, R>(name: impl Into<Cow<'static, str>>, payload: P, f: impl FnOnce(&Span) -> R) -> R
where
    P: PayloadSource,
    R: Outcome,
{
    let Some((inner, child)) = begin(name.into(), payload) else {
        return f(&Span::none());
    };
    let mut guard = OpGuard(Some(inner.clone()));
    // It may block this thread for as long as it likes.
    guard.waiting();
    let span = Span(Some(inner));
    match catch_unwind(AssertUnwindSafe(|| child.in_scope_owned(|| f(&span)))) {
        Ok(output) => {
            guard.finish(Settlement::Returned(output.error_info()));
            output
        }
        Err(panic) => {
            guard.finish(Settlement::Panicked(panic_info(panic.as_ref())));
            resume_unwind(panic)
        }
    }
}

/// Merges attributes into the end record of the innermost running operation (no-op outside one).
#[inline]
pub fn record(payload: impl PayloadSource) {
    if any_interest() {
        Span::current().record(payload);
    }
}

/// Emits a point `event` record in the current context: attached to the innermost running
/// operation if there is one, else to the current trace (or a new one). The payload is built
/// only when someone listens.
#[inline]
pub fn record_event(name: impl Into<Cow<'static, str>>, payload: impl PayloadSource) {
    if any_interest() {
        record_event_slow(name.into(), payload);
    }
}

#[inline(never)]
fn record_event_slow(name: Cow<'static, str>, payload: impl PayloadSource) {
    let ctx = context::current();
    if let Some(inner) = &ctx.span {
        return Span(Some(inner.clone())).add_event(name, payload);
    }
    let hub = ctx.hub();
    if !hub.has_subscribers() {
        return;
    }
    let payload = build_payload(hub, payload);
    hub.emit(ObsEvent {
        kind: EventKind::Event,
        name,
        trace_id: ctx.trace_id.unwrap_or_else(TraceId::random),
        span_id: ctx.span_id,
        parent_span_id: None,
        timestamp: Timestamp::now(),
        duration: None,
        context: ctx.attribution.clone(),
        payload,
        error: None,
        captured: 0,
        start_skipped: false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_type_names_are_short() {
        assert_eq!(error_type_name::<std::io::Error>(), "Error");
        assert_eq!(error_type_name::<std::fmt::Error>(), "Error");
        assert_eq!(error_type_name::<std::num::ParseIntError>(), "ParseIntError");
        assert_eq!(error_type_name::<Box<dyn std::error::Error>>(), "Error");
        assert_eq!(error_type_name::<String>(), "String");
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;

    /// A future whose state is `N` bytes.
    async fn big<const N: usize>() -> Result<usize, std::fmt::Error> {
        let buf = [7u8; N];
        std::future::ready(()).await;
        Ok(std::hint::black_box(&buf).len())
    }

    /// Each wrapper holds the wrapped future once (they held it 2–3 times, so nesting grew the
    /// state geometrically: 3× for one operation, 9× for two).
    #[test]
    fn wrappers_hold_the_future_once() {
        let inner = std::mem::size_of_val(&big::<4096>());
        let op = std::mem::size_of_val(&trace_operation("op", (), big::<4096>()));
        let scoped = std::mem::size_of_val(&crate::Observability::new().scope(big::<4096>()));
        let nested = std::mem::size_of_val(&trace_operation("outer", (), async {
            trace_operation("inner", (), big::<4096>()).await
        }));
        assert!(op < inner + 512, "trace_operation: {op} bytes around a {inner}-byte future");
        assert!(scoped < inner + 256, "scope: {scoped} bytes around a {inner}-byte future");
        assert!(nested < inner + 1024, "nested operations: {nested} bytes around a {inner}-byte future");
    }
}
