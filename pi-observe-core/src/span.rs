//! [`Span`]: the handle an operation's body gets, to add attributes, point events and status.

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::context;
use crate::event::{ErrorInfo, EventKind, ObsEvent, Timestamp};
use crate::hub::any_interest;
use crate::ids::{SpanId, TraceId};
use crate::payload::{Payload, PayloadSource};
use crate::shared::{Observability, SpanInner, Status};

/// A handle to a running operation, for adding attributes, point events and status.
///
/// Calls after the operation settled are ignored (inert), as are calls on [`Span::none`]
/// (what operations get when nobody listens). Payload closures are not called then.
#[derive(Clone, Default)]
pub struct Span(pub(crate) Option<Arc<SpanInner>>);

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(inner) => write!(f, "Span({} {}/{})", inner.name, inner.trace_id, inner.span_id),
            None => f.write_str("Span(none)"),
        }
    }
}

impl Span {
    /// A span that records nothing.
    pub fn none() -> Span {
        Span(None)
    }

    /// The innermost operation running in the current context.
    pub fn current() -> Span {
        if !any_interest() {
            return Span(None);
        }
        Span(context::with_current(|ctx| ctx.span.clone()))
    }

    /// True while the operation runs and someone listens (not when it was shed: every
    /// subscriber was saturated as it started, see [`crate::Subscriber::saturated`]).
    pub fn is_recording(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|inner| !inner.shed && !inner.state.lock().unwrap_or_else(|e| e.into_inner()).settled)
    }

    /// The trace id, when recording.
    pub fn trace_id(&self) -> Option<TraceId> {
        self.0.as_ref().map(|inner| inner.trace_id)
    }

    /// The span id, when recording.
    pub fn span_id(&self) -> Option<SpanId> {
        self.0.as_ref().map(|inner| inner.span_id)
    }

    /// Merges attributes into the end/error record (later values win).
    pub fn record(&self, payload: impl PayloadSource) {
        let Some(inner) = &self.0 else { return };
        if !self.is_recording() {
            return;
        }
        let payload = build_payload(&inner.hub, payload);
        let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if !state.settled {
            state.payload.merge(payload);
        }
    }

    /// Emits a point `event` record that belongs to this operation, stamped now.
    pub fn add_event(&self, name: impl Into<Cow<'static, str>>, payload: impl PayloadSource) {
        let Some(inner) = &self.0 else { return };
        if !self.is_recording() {
            return;
        }
        let payload = build_payload(&inner.hub, payload);
        inner.hub.emit(ObsEvent {
            kind: EventKind::Event,
            name: name.into(),
            trace_id: inner.trace_id,
            span_id: Some(inner.span_id),
            parent_span_id: None,
            timestamp: Timestamp::now(),
            duration: None,
            context: inner.attribution.clone(),
            payload,
            error: None,
            captured: 0,
            start_skipped: inner.start_skipped.load(Relaxed),
        });
    }

    /// Sets the status reported at the end (last write wins).
    pub fn set_status(&self, status: Status) {
        if let Some(inner) = &self.0 {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            if !state.settled {
                state.status = Some(status);
            }
        }
    }

    /// Shorthand for `set_status(Status::Error(..))`.
    pub fn set_error(&self, name: impl Into<String>, message: impl Into<String>) {
        self.set_status(Status::Error(ErrorInfo::new(name, message)));
    }
}

/// `payload` built, unless nobody reads payloads; a panic in it is caught and counted (empty).
pub(crate) fn build_payload(hub: &Observability, payload: impl PayloadSource) -> Payload {
    // Nobody reads payloads (only id and name observers listen): none is built.
    if !hub.wants_payloads() {
        return Payload::new();
    }
    catch_unwind(AssertUnwindSafe(|| payload.build())).unwrap_or_else(|_| {
        hub.record_payload_failure();
        Payload::new()
    })
}
