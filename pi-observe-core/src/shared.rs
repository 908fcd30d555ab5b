//! The state shared behind a hub handle ([`Observability`]) and an open span (`SpanInner`): the
//! types the task-local context stores. What they do is in `hub` and `operation`; keeping the
//! types here lets the context hold them without depending on either.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, RwLock};

use crate::attribution::Attribution;
use crate::clock::Tick;
use crate::delivery::{Shards, Subscribers};
use crate::event::ErrorInfo;
use crate::ids::{SpanId, TraceId};
use crate::payload::Payload;
use crate::policy::ContentPolicy;
use crate::stats::Stats;
use crate::subscriber::Subscriber;

/// An event hub (upstream pi's `PiObservability`; see `docs/design/contract.md`).
///
/// There is one process-wide hub ([`Observability::global`]) and any number of explicit ones
/// (cheap to clone: one `Arc`). Code runs "on" a hub through [`Observability::enter`] (or its
/// shorthands [`Observability::scope`] and [`Observability::run_with_context`]); instrumentation
/// inside emits to it, so tests can run in parallel, each on its own hub, without sharing
/// globals.
///
/// ```
/// use pi_observe_core::{names, trace_operation, Attribution, Observability, Payload};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let hub = Observability::new();
/// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// let sink = seen.clone();
/// let _subscription = hub.subscribe(move |e: &pi_observe_core::ObsEvent| {
///     sink.lock().unwrap().push(format!("{} {}", e.kind.as_str(), e.name));
/// });
/// let user = Attribution::new().with("userId", "u1").with("orgId", "acme");
/// let answer = hub
///     .run_with_context(user, trace_operation(names::AGENT_PROMPT, Payload::new(), async {
///         Ok::<_, std::io::Error>(42)
///     }))
///     .await;
/// assert_eq!(answer.unwrap(), 42);
/// assert_eq!(*seen.lock().unwrap(), ["start pi.agent.prompt", "end pi.agent.prompt"]);
/// # });
/// ```
#[derive(Clone)]
pub struct Observability {
    pub(crate) inner: Arc<HubInner>,
}

pub(crate) struct HubInner {
    pub(crate) active: AtomicUsize,
    /// Active subscribers that read payloads ([`Subscriber::wants_payloads`]).
    pub(crate) reading_payloads: AtomicUsize,
    pub(crate) next_id: AtomicU64,
    /// Unique in the process (from the generation counter).
    pub(crate) id: u64,
    /// The generation of `subscribers`, readable without the lock ([`crate::delivery`]).
    pub(crate) generation: AtomicU64,
    pub(crate) subscribers: RwLock<Subscribers>,
    /// Each emitting thread's delivery counters.
    pub(crate) shards: Shards,
    pub(crate) default_policy: Arc<ContentPolicy>,
    /// Shared with the [`crate::HubSlot`]s of its subscribers (drops are counted without
    /// reaching the hub).
    pub(crate) stats: Arc<Stats>,
    /// Operations running without having emitted their start record.
    pub(crate) running: crate::running::Running,
}

#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) subscriber: Arc<dyn Subscriber>,
    pub(crate) policy: Arc<ContentPolicy>,
    pub(crate) reads_payloads: bool,
    pub(crate) starts: crate::Starts,
}

impl fmt::Debug for Observability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observability")
            .field("subscribers", &self.inner.active.load(Relaxed))
            .field("default_policy", &self.inner.default_policy)
            .finish()
    }
}

// A hub stays consistent if a panic unwinds past it: counters are atomics, the subscriber list
// is swapped whole and its lock ignores poisoning, and subscriber panics are caught.
impl std::panic::UnwindSafe for Observability {}
impl std::panic::RefUnwindSafe for Observability {}

/// An operation's explicit status, set through `Span::set_status`; it overrides the status
/// derived from the result (not a panic or a cancellation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Report success even if the result was an `Err`.
    Ok,
    /// Report this error even if the result was `Ok`.
    Error(ErrorInfo),
}

/// An open span: where it is in its trace, and what its end record will carry.
pub(crate) struct SpanInner {
    pub(crate) hub: Observability,
    pub(crate) name: Cow<'static, str>,
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) parent: Option<SpanId>,
    pub(crate) attribution: Attribution,
    /// When it started (its start record's timestamp).
    pub(crate) started: Tick,
    pub(crate) state: Mutex<SpanState>,
    /// Its place in the hub's list of operations whose start was not emitted
    /// ([`crate::running::Running::NONE`] when its start was emitted).
    pub(crate) running: std::sync::atomic::AtomicU64,
    /// Its start record was not delivered (yet: a shutdown delivers those of running
    /// operations), so its other records say [`crate::ObsEvent::start_skipped`].
    pub(crate) start_skipped: std::sync::atomic::AtomicBool,
    /// Shed as it started ([`crate::Subscriber::saturated`]): it records nothing, and its
    /// `started` is not read.
    pub(crate) shed: bool,
}

pub(crate) struct SpanState {
    pub(crate) settled: bool,
    pub(crate) payload: Payload,
    pub(crate) status: Option<Status>,
}
