//! The subscriber trait: where events go.

use std::fmt;
use std::time::Duration;

use crate::event::ObsEvent;

/// Receives every event of a hub, after the subscriber's content policy was applied.
///
/// `on_event` is called on the emitting thread and must not block: adapters put the event in a
/// bounded queue and do I/O elsewhere. A panic in any method is caught and counted by the hub;
/// it never reaches the operation that emitted the event.
///
/// Closures `Fn(&ObsEvent)` are subscribers.
pub trait Subscriber: Send + Sync + 'static {
    /// Handles one event.
    fn on_event(&self, event: &ObsEvent);

    /// Called once when the subscriber is subscribed to `hub` (model: `tracing-core`'s
    /// `Subscriber::on_register_dispatch`), before any event. Adapters that count what they
    /// drop keep the hub in a [`HubSlot`](crate::HubSlot), which holds it weakly: the hub owns its
    /// subscribers, so a subscriber must not own its hub.
    fn on_subscribe(&self, hub: &crate::Observability) {
        let _ = hub;
    }

    /// Whether this subscriber reads payloads. One that reads only names, kinds, ids, times and
    /// context (a trace-id collector, a counter) says `false`: when no subscriber of a hub reads
    /// payloads, emitters never build them and the hub never redacts them (the idle path holds
    /// with such observers attached). Default `true`.
    fn wants_payloads(&self) -> bool {
        true
    }

    /// Which `start` records this subscriber needs. Default [`Starts::All`].
    ///
    /// When every subscriber of a hub answers [`Starts::Only`], an operation not named there
    /// (and without a remote parent) emits no start record: it reaches subscribers as its end
    /// record alone ([`ObsEvent::start_skipped`] is true on it and on its point events), one
    /// record per operation instead of two. The hub lists such operations once they wait (an
    /// async one at its first `Pending`, a synchronous one as it starts) and delivers a start
    /// record for each one still listed when the subscriber is unsubscribed or the hub
    /// ([`crate::Observability::shutdown`]) shut down, so an exporter can still report them as
    /// unfinished.
    fn starts(&self) -> Starts {
        Starts::All
    }

    /// True while this subscriber would drop whatever it is handed (its queue is full). When
    /// every subscriber of a hub says so as an operation starts, the hub sheds the operation:
    /// it still runs under its own ids (its children keep their parent), but builds no
    /// payload, reads no clock and emits no record; each subscriber hears of it once, through
    /// [`Subscriber::on_shed`], and counts it as dropped. Under a burst no exporter keeps up
    /// with, the instrumented thread then pays little more than for an operation nobody
    /// listens to. Checked once per operation: keep it to an atomic load. Default `false`.
    fn saturated(&self) -> bool {
        false
    }

    /// One operation was shed while this subscriber (like every other) was
    /// [`saturated`](Subscriber::saturated): count it as one dropped for a full queue.
    fn on_shed(&self) {}

    /// Handles one event the subscriber may keep: the hub hands over its copy instead of a
    /// reference (adapters that queue events override this to keep it without cloning; the
    /// default calls [`Subscriber::on_event`]). Of the subscribers sharing one policy, the last
    /// one subscribed gets this call; the others get [`Subscriber::on_event`].
    fn on_owned_event(&self, event: ObsEvent) {
        self.on_event(&event)
    }

    /// [`Subscriber::on_owned_event`] for the event in `slot` (always `Some` when called): the
    /// hub calls this one, and the default takes the event out and calls `on_owned_event`. An
    /// adapter that moves the event into a queue may take it out itself, straight into the
    /// queue (an event is a few hundred bytes, and each move is a copy); what it leaves in the
    /// slot is dropped.
    fn on_owned_slot(&self, slot: &mut Option<ObsEvent>) {
        if let Some(event) = slot.take() {
            self.on_owned_event(event)
        }
    }

    /// Pushes out what is buffered, giving up after `timeout`.
    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let _ = timeout;
        Ok(())
    }

    /// Starts shutting down without waiting and says whether [`Subscriber::shutdown`] will now
    /// return promptly. A subscriber whose shutdown work runs on threads of its own (an
    /// exporter's worker, a file writer) starts that work here, with `timeout` as its deadline,
    /// and returns `true`: its `shutdown` then only waits for it. One with nothing to finish
    /// also returns `true`. The hub calls this on every subscriber before any `shutdown`, so
    /// such subscribers finish side by side with no thread of the hub's. The default starts
    /// nothing and returns `false`: the hub then runs `shutdown` on a thread of its own when
    /// several such subscribers must finish.
    fn begin_shutdown(&self, timeout: Duration) -> bool {
        let _ = timeout;
        false
    }

    /// Flushes and releases resources, within `timeout`. Events after shutdown may be ignored.
    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        self.flush(timeout)
    }
}

impl<F> Subscriber for F
where
    F: Fn(&ObsEvent) + Send + Sync + 'static,
{
    fn on_event(&self, event: &ObsEvent) {
        self(event)
    }

    /// A closure keeps nothing to finish.
    fn begin_shutdown(&self, _timeout: Duration) -> bool {
        true
    }
}

/// A closure subscriber that reads no payloads ([`Subscriber::wants_payloads`] is `false`): the
/// events it sees carry empty payloads whenever no other subscriber reads them.
///
/// ```
/// use pi_observe_core::{Observability, WithoutPayloads, trace_operation_sync};
/// let hub = Observability::new();
/// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// let names = seen.clone();
/// let _sub = hub.subscribe(WithoutPayloads(move |e: &pi_observe_core::ObsEvent| {
///     names.lock().unwrap().push((e.name.to_string(), e.payload.len()));
/// }));
/// hub.in_scope(|| trace_operation_sync("pi.test", || pi_observe_core::Payload::new().safe("k", 1), |_| ()));
/// assert_eq!(seen.lock().unwrap()[0], ("pi.test".to_owned(), 0));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct WithoutPayloads<F>(pub F);

impl<F> Subscriber for WithoutPayloads<F>
where
    F: Fn(&ObsEvent) + Send + Sync + 'static,
{
    fn on_event(&self, event: &ObsEvent) {
        (self.0)(event)
    }

    fn wants_payloads(&self) -> bool {
        false
    }

    fn begin_shutdown(&self, _timeout: Duration) -> bool {
        true
    }
}

/// Which `start` records a subscriber needs ([`Subscriber::starts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starts {
    /// Every operation's start record, as the operation starts.
    All,
    /// Only the start records of operations with these names, and of operations whose parent
    /// is remote (they carry the caller's sampling decision). The subscriber learns of the
    /// others from their end records ([`ObsEvent::start_skipped`]).
    Only(&'static [&'static str]),
}

/// A subscriber's `flush` or `shutdown` did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscriberError {
    /// The deadline passed with work still pending.
    Timeout,
    /// The subscriber panicked (caught by the hub).
    Panicked,
    /// Anything else, in one line.
    Other(String),
}

impl fmt::Display for SubscriberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubscriberError::Timeout => f.write_str("deadline passed before the subscriber finished"),
            SubscriberError::Panicked => f.write_str("subscriber panicked"),
            SubscriberError::Other(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for SubscriberError {}
