//! The hub ([`Observability`]): subscribers, policies, delivery and self-telemetry.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use crate::attribution::Attribution;
use crate::context::{self, ObsContext, Scoped};
use crate::delivery::{self, DeliveringGuard, Subscribers, Tally};
use crate::event::ObsEvent;
use crate::policy::ContentPolicy;
use crate::shared::{Entry, HubInner, Observability};
use crate::stats::{DropReason, Stats, StatsSnapshot};
use crate::subscriber::{Starts, Subscriber, SubscriberError};
use crate::traceparent::TraceParent;

/// Live subscriptions across every hub in the process. When zero, instrumentation skips context
/// lookups and payload building entirely: one relaxed load.
static INTEREST: AtomicUsize = AtomicUsize::new(0);

/// True when any hub in the process has a subscriber (one relaxed atomic load).
#[inline]
pub(crate) fn any_interest() -> bool {
    INTEREST.load(Relaxed) != 0
}

/// How an operation starting now is recorded ([`Observability::plan`]).
pub(crate) struct Plan {
    /// Some subscriber needs its start record.
    pub(crate) start: bool,
    /// Every subscriber is saturated: the operation is shed.
    pub(crate) shed: bool,
}

/// What [`Observability::enter`] sets for a future; unset parts are inherited.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    attribution: Option<Attribution>,
    remote: Option<TraceParent>,
}

impl Scope {
    /// Sets nothing: the hub only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Merges `attribution` into the attribution in force (its keys win).
    pub fn attribution(mut self, attribution: impl Into<Attribution>) -> Self {
        self.attribution = Some(attribution.into());
        self
    }

    /// Makes the scope a child of an incoming W3C `traceparent` header (e.g. the `TRACEPARENT`
    /// variable of a parent process); an absent or malformed value leaves the trace as it is.
    pub fn traceparent(mut self, header: Option<&str>) -> Self {
        self.remote = header.and_then(TraceParent::parse).or(self.remote);
        self
    }

    /// Makes the scope a child of `parent`.
    pub fn remote_parent(mut self, parent: TraceParent) -> Self {
        self.remote = Some(parent);
        self
    }
}

/// A hub handle that does not keep the hub alive; see [`Observability::downgrade`].
#[derive(Debug, Clone, Default)]
pub struct WeakObservability(std::sync::Weak<HubInner>);

impl WeakObservability {
    /// The hub, while it is alive.
    pub fn upgrade(&self) -> Option<Observability> {
        self.0.upgrade().map(|inner| Observability { inner })
    }
}

/// Where a subscriber records what it drops: the hub it was subscribed to, learned in
/// [`Subscriber::on_subscribe`] (the first hub wins) and held weakly. Cheap to clone and share
/// with a worker thread; recording before subscription or after the hub is gone does nothing.
#[derive(Debug, Clone, Default)]
pub struct HubSlot(Arc<OnceLock<(WeakObservability, Arc<Stats>)>>);

impl HubSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers `hub` (keeps the first one).
    pub fn set(&self, hub: &Observability) {
        let _ = self.0.set((hub.downgrade(), hub.inner.stats.clone()));
    }

    /// The hub, if subscribed and alive.
    pub fn hub(&self) -> Option<Observability> {
        self.0.get().and_then(|(hub, _)| hub.upgrade())
    }

    /// Counts `count` records dropped for `reason` on the hub (one relaxed add: a full queue's
    /// drop path stays cheap). Counts after the hub is gone are lost with it.
    pub fn record_dropped(&self, reason: DropReason, count: u64) {
        if let Some((_, stats)) = self.0.get() {
            stats.drop_events(reason, count);
        }
    }

    /// Counts a panic of a subscriber that was handling a record off the hub's delivery path
    /// (a [`crate::Background`] worker), as the hub counts one on it.
    pub(crate) fn count_panic(&self) {
        if let Some((_, stats)) = self.0.get() {
            stats.subscriber_panics.fetch_add(1, Relaxed);
            stats.drop_events(DropReason::SubscriberPanic, 1);
        }
    }
}

impl Default for Observability {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Observability {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Observability {
    /// A hub whose subscribers get the default (safe-only) policy unless they bring their own.
    pub fn new() -> Self {
        Self::with_policy(ContentPolicy::default())
    }

    /// A hub with this default policy for [`Observability::subscribe`].
    pub fn with_policy(policy: ContentPolicy) -> Self {
        let generation = delivery::next_generation();
        Observability {
            inner: Arc::new(HubInner {
                active: AtomicUsize::new(0),
                reading_payloads: AtomicUsize::new(0),
                next_id: AtomicU64::new(1),
                id: delivery::next_generation(),
                generation: AtomicU64::new(generation),
                subscribers: RwLock::new(Subscribers { generation, entries: Arc::from(Vec::new()) }),
                shards: Default::default(),
                default_policy: Arc::new(policy),
                stats: Arc::default(),
                running: Default::default(),
            }),
        }
    }

    /// The process-wide hub, used when no scope names another.
    pub fn global() -> &'static Observability {
        static GLOBAL: OnceLock<Observability> = OnceLock::new();
        GLOBAL.get_or_init(Observability::new)
    }

    /// The hub of the current scope, else the global one.
    pub fn current() -> Observability {
        context::with_current(|ctx| ctx.hub().clone())
    }

    /// The current context (upstream pi's `getContext()`).
    pub fn context(&self) -> ObsContext {
        context::current()
    }

    /// The one entry to a scope: runs `fut` on this hub with what `scope` sets — attribution
    /// merged into the current one, an incoming remote parent — in a single task-local scope.
    /// Everything `scope` leaves unset is inherited from where `fut` is first polled.
    ///
    /// ```
    /// use pi_observe_core::{Attribution, Observability, Scope, current};
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let hub = Observability::new();
    /// let scope = Scope::new()
    ///     .attribution(Attribution::new().with("userId", "alice"))
    ///     .traceparent(Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
    /// let seen = hub.enter(scope, async { current() }).await;
    /// assert_eq!(seen.attribution().get("userId"), Some("alice"));
    /// assert_eq!(seen.trace_id().unwrap().to_string(), "0af7651916cd43dd8448eb211c80319c");
    /// assert!(seen.hub() == &hub);
    /// # });
    /// ```
    pub fn enter<F: Future>(&self, scope: Scope, fut: F) -> Scoped<F> {
        Scoped::derive(fut, scope.attribution, Some(self.clone()), scope.remote)
    }

    /// Shorthand for [`Observability::enter`] with only an attribution (the common case of a
    /// request handler that knows who it serves).
    pub fn run_with_context<F: Future>(&self, attribution: impl Into<Attribution>, fut: F) -> Scoped<F> {
        self.enter(Scope::new().attribution(attribution), fut)
    }

    /// Shorthand for [`Observability::enter`] with nothing but the hub: keeps the attribution
    /// and trace position in force where `fut` is first polled (tests, background work).
    pub fn scope<F: Future>(&self, fut: F) -> Scoped<F> {
        self.enter(Scope::new(), fut)
    }

    /// A handle that does not keep the hub alive (what a subscriber keeps of the hub it is
    /// subscribed to: the hub owns its subscribers, not the other way round).
    pub fn downgrade(&self) -> WeakObservability {
        WeakObservability(Arc::downgrade(&self.inner))
    }

    /// Runs synchronous `f` on this hub.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        context::current().with_hub(self.clone()).in_scope(f)
    }

    /// True when at least one subscriber listens (one relaxed atomic load).
    #[inline]
    pub fn has_subscribers(&self) -> bool {
        self.inner.active.load(Relaxed) != 0
    }

    /// Adds a subscriber under the hub's default policy. Dropping the returned handle
    /// unsubscribes it.
    pub fn subscribe(&self, subscriber: impl Subscriber) -> Subscription {
        self.subscribe_arc(Arc::new(subscriber), self.inner.default_policy.clone())
    }

    /// Adds a subscriber with its own policy (narrower or wider than the hub's default).
    pub fn subscribe_with_policy(&self, subscriber: impl Subscriber, policy: ContentPolicy) -> Subscription {
        self.subscribe_arc(Arc::new(subscriber), Arc::new(policy))
    }

    /// Adds a shared subscriber with a shared policy; subscribers sharing one `Arc` policy share
    /// one redaction pass per event.
    pub fn subscribe_arc(&self, subscriber: Arc<dyn Subscriber>, policy: Arc<ContentPolicy>) -> Subscription {
        // Outside the lock: a subscriber may look at the hub when it learns it.
        let told = catch_unwind(AssertUnwindSafe(|| subscriber.on_subscribe(self)));
        if told.is_err() {
            self.inner.stats.subscriber_panics.fetch_add(1, Relaxed);
        }
        let id = self.inner.next_id.fetch_add(1, Relaxed);
        let reads_payloads = catch_unwind(AssertUnwindSafe(|| subscriber.wants_payloads())).unwrap_or(true);
        let starts = catch_unwind(AssertUnwindSafe(|| subscriber.starts())).unwrap_or(Starts::All);
        let mut entries = self.inner.subscribers.write().unwrap_or_else(|e| e.into_inner());
        let mut list = entries.entries.to_vec();
        list.push(Entry { id, subscriber, policy, reads_payloads, starts });
        self.replace_entries(&mut entries, list);
        if reads_payloads {
            self.inner.reading_payloads.fetch_add(1, Relaxed);
        }
        self.inner.active.fetch_add(1, Relaxed);
        INTEREST.fetch_add(1, Relaxed);
        Subscription { hub: Some(self.clone()), id }
    }

    fn unsubscribe(&self, id: u64) {
        // The subscriber hears of the operations still running that it has not seen start.
        if let Some(leaving) = self.snapshot().iter().find(|e| e.id == id) {
            self.announce_running(Some(leaving));
        }
        let mut entries = self.inner.subscribers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(gone) = entries.entries.iter().find(|e| e.id == id) {
            if gone.reads_payloads {
                self.inner.reading_payloads.fetch_sub(1, Relaxed);
            }
            let list: Vec<Entry> = entries.entries.iter().filter(|e| e.id != id).cloned().collect();
            self.replace_entries(&mut entries, list);
            self.inner.active.fetch_sub(1, Relaxed);
            INTEREST.fetch_sub(1, Relaxed);
        }
        drop(entries);
        // This thread lets go of the subscriber now; others at their next emit on this hub.
        delivery::forget(&self.inner);
    }

    /// Installs a new subscriber list under a new generation (the write lock is held).
    fn replace_entries(&self, current: &mut Subscribers, list: Vec<Entry>) {
        let generation = delivery::next_generation();
        *current = Subscribers { generation, entries: Arc::from(list) };
        self.inner.generation.store(generation, std::sync::atomic::Ordering::Release);
    }

    fn snapshot(&self) -> Arc<[Entry]> {
        self.inner.subscribers.read().unwrap_or_else(|e| e.into_inner()).entries.clone()
    }

    /// True when some subscriber reads payloads; when none does, emitters skip building them
    /// (one relaxed load).
    pub fn wants_payloads(&self) -> bool {
        self.inner.reading_payloads.load(Relaxed) != 0
    }

    /// How an operation named `name` starting now is recorded: it emits its start record
    /// unless every subscriber needs only some starts ([`Starts::Only`]) and none of them names
    /// it; it is shed when every subscriber is saturated ([`Subscriber::saturated`]).
    pub(crate) fn plan(&self, name: &str) -> Plan {
        let plan = |entries: &[Entry]| Plan {
            start: entries.iter().any(|entry| match entry.starts {
                Starts::All => true,
                Starts::Only(names) => names.contains(&name),
            }),
            shed: !entries.is_empty() && entries.iter().all(|entry| entry.subscriber.saturated()),
        };
        delivery::with_entries(&self.inner, plan).unwrap_or_else(|| plan(&self.snapshot()))
    }

    /// Tells every subscriber that one operation was shed ([`Subscriber::on_shed`]); a panic
    /// is caught and counted.
    pub(crate) fn shed_operation(&self) {
        let tell = |entries: &[Entry]| {
            for entry in entries {
                if catch_unwind(AssertUnwindSafe(|| entry.subscriber.on_shed())).is_err() {
                    self.inner.stats.subscriber_panics.fetch_add(1, Relaxed);
                }
            }
        };
        if delivery::with_entries(&self.inner, tell).is_none() {
            tell(&self.snapshot());
        }
    }

    /// Delivers a start record for each operation running without having emitted one: to
    /// `only`, or to every subscriber (which then hear of it as started: its later records
    /// no longer say [`ObsEvent::start_skipped`]).
    fn announce_running(&self, only: Option<&Entry>) {
        let stats = &self.inner.stats;
        for span in self.inner.running.snapshot() {
            let Some(start) = span.undelivered_start(only.is_none()) else { continue };
            match only {
                Some(entry) => {
                    let mut start = start;
                    entry.policy.apply_in_place(&mut start, stats);
                    self.deliver(entry, &Tally::Hub(stats), |s| s.on_owned_event(start));
                }
                None => self.emit(start),
            }
        }
    }

    /// True when some subscriber's policy captures `kind`, so content of that kind that is
    /// costly to build is only built when it can leave ([`crate::Payload::content_with`]).
    pub fn captures(&self, kind: crate::ContentKind) -> bool {
        self.snapshot().iter().any(|entry| entry.policy.captures(kind))
    }

    /// Builds the event with `make` and delivers it, only if someone listens.
    #[inline]
    pub fn emit_with(&self, make: impl FnOnce() -> ObsEvent) {
        if self.has_subscribers() {
            self.emit(make());
        }
    }

    /// Delivers one event: applies each distinct policy once, then calls every subscriber,
    /// catching and counting panics. Never blocks on I/O, never panics.
    #[inline]
    pub fn emit(&self, event: ObsEvent) {
        // Built in place by an inlined caller: the event is not copied to get here.
        self.emit_from(&mut Some(event));
    }

    /// [`Observability::emit`] of the event in `original` (built there by the caller: an event
    /// is a few hundred bytes, and each move of it is a copy).
    pub(crate) fn emit_from(&self, original: &mut Option<ObsEvent>) {
        if !self.has_subscribers() {
            return;
        }
        let stats = &self.inner.stats;
        if delivery::delivering() {
            stats.drop_events(DropReason::Reentrant, 1);
            return;
        }
        // Events are large: everything below takes the slot by reference, so the event is
        // moved once, into the subscriber that keeps it.
        let deliver = |entries: &[Entry], tally: Tally<'_>| self.deliver_all(entries, original, tally);
        if let Some(mut deliver) = delivery::with_subscribers(&self.inner, deliver) {
            deliver(&self.snapshot(), Tally::Hub(stats));
        }
    }

    /// [`Observability::emit`] of the event in `original` to `entries`, counting in `tally`.
    fn deliver_all(&self, entries: &[Entry], original: &mut Option<ObsEvent>, tally: Tally<'_>) {
        if entries.is_empty() {
            return;
        }
        let stats = &self.inner.stats;
        tally.emitted();
        let _delivering = DeliveringGuard::enter();
        // Subscribers sharing a policy share one redacted copy; the last subscriber of each
        // policy gets that copy to keep (`on_owned_event`), the others see it by reference. The
        // record itself goes to the last group with a subscriber that reads payloads (delivered
        // last); a group where none does gets a copy without the payload (no fields to copy).
        let opens_group = |k: usize| !entries[..k].iter().any(|e| Arc::ptr_eq(&e.policy, &entries[k].policy));
        let group_of = |k: usize| entries[k..].iter().filter(move |e| Arc::ptr_eq(&e.policy, &entries[k].policy));
        let reads_payloads = |k: usize| group_of(k).any(|e| e.reads_payloads);
        let groups = (0..entries.len()).filter(|&k| opens_group(k));
        let owner = groups.clone().rfind(|&k| reads_payloads(k)).or_else(|| groups.clone().next_back());
        for k in groups.filter(|&k| Some(k) != owner).chain(owner) {
            let mut copy;
            let slot = if Some(k) == owner {
                &mut *original
            } else {
                copy =
                    if reads_payloads(k) { original.clone() } else { original.as_ref().map(ObsEvent::without_payload) };
                &mut copy
            };
            let Some(redacted) = slot.as_mut() else { return };
            entries[k].policy.apply_in_place(redacted, stats);
            let mut group = group_of(k).peekable();
            while let Some(member) = group.next() {
                if group.peek().is_some() {
                    self.deliver(member, &tally, |s| slot.as_ref().map_or((), |e| s.on_event(e)));
                } else {
                    self.deliver(member, &tally, |s| s.on_owned_slot(slot));
                }
            }
        }
    }

    fn deliver(&self, entry: &Entry, tally: &Tally<'_>, call: impl FnOnce(&dyn Subscriber)) {
        let stats = &self.inner.stats;
        match catch_unwind(AssertUnwindSafe(|| call(entry.subscriber.as_ref()))) {
            Ok(()) => tally.delivered(),
            Err(_) => {
                stats.subscriber_panics.fetch_add(1, Relaxed);
                stats.drop_events(DropReason::SubscriberPanic, 1);
            }
        }
    }

    /// Records events an adapter dropped (queue full, export failed, …) in this hub's counters.
    pub fn record_dropped(&self, reason: DropReason, count: u64) {
        self.inner.stats.drop_events(reason, count);
    }

    /// Records that building a payload failed (the operation went on with an empty payload).
    pub(crate) fn record_payload_failure(&self) {
        self.inner.stats.payload_failures.fetch_add(1, Relaxed);
    }

    /// A copy of the self-telemetry counters.
    pub fn stats(&self) -> StatsSnapshot {
        let mut snapshot = self.inner.stats.snapshot();
        let (emitted, delivered) = self.inner.shards.totals();
        snapshot.emitted += emitted;
        snapshot.delivered += delivered;
        snapshot
    }

    /// Flushes every subscriber within one overall deadline. Returns the first failure; every
    /// failure is counted.
    pub fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        self.for_each_until(timeout, |sub, left| sub.flush(left))
    }

    /// Shuts every subscriber down within one overall deadline (subscriptions stay registered;
    /// drop them to stop delivery). Subscribers that finish on threads of their own start first
    /// ([`Subscriber::begin_shutdown`]) and are then waited for in turn; the others are shut
    /// down side by side as in [`Observability::flush`].
    pub fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let deadline = Instant::now() + timeout;
        self.announce_running(None);
        let stats = &self.inner.stats;
        let snapshot = self.snapshot();
        let (begun, rest): (Vec<&Entry>, Vec<&Entry>) = snapshot.iter().partition(|entry| {
            catch_unwind(AssertUnwindSafe(|| entry.subscriber.begin_shutdown(timeout))).unwrap_or_else(|_| {
                stats.subscriber_panics.fetch_add(1, Relaxed);
                false
            })
        });
        let call = |sub: &dyn Subscriber, left: Duration| sub.shutdown(left);
        let mut results = self.each_until(deadline, &rest, call);
        results.extend(begun.iter().map(|entry| self.call_one(deadline, entry, &call)));
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// Calls `call` on every subscriber with the time left until `timeout`. Several
    /// subscribers are flushed or shut down side by side (one short-lived thread each), so one
    /// slow exporter neither delays the others nor eats their share of the deadline.
    fn for_each_until(
        &self,
        timeout: Duration,
        call: impl Fn(&dyn Subscriber, Duration) -> Result<(), SubscriberError> + Sync,
    ) -> Result<(), SubscriberError> {
        let snapshot = self.snapshot();
        let entries: Vec<&Entry> = snapshot.iter().collect();
        let results = self.each_until(Instant::now() + timeout, &entries, call);
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// [`Observability::for_each_until`] on `entries`: one of them on this thread, several side
    /// by side.
    fn each_until(
        &self,
        deadline: Instant,
        entries: &[&Entry],
        call: impl Fn(&dyn Subscriber, Duration) -> Result<(), SubscriberError> + Sync,
    ) -> Vec<Result<(), SubscriberError>> {
        let one = |entry: &Entry| self.call_one(deadline, entry, &call);
        match entries {
            [] => Vec::new(),
            [only] => vec![one(only)],
            many => std::thread::scope(|scope| {
                let handles: Vec<_> = many
                    .iter()
                    .map(|entry| {
                        std::thread::Builder::new().name("pi-observe-finish".into()).spawn_scoped(scope, || one(entry))
                    })
                    .collect();
                // A thread that could not start: that subscriber is called here instead.
                handles
                    .into_iter()
                    .zip(many)
                    .map(|(handle, entry)| match handle {
                        Ok(handle) => handle.join().unwrap_or(Err(SubscriberError::Panicked)),
                        Err(_) => one(entry),
                    })
                    .collect()
            }),
        }
    }

    /// `call` on one subscriber with the time left until `deadline`; a panic or failure is
    /// counted.
    fn call_one(
        &self,
        deadline: Instant,
        entry: &Entry,
        call: &(impl Fn(&dyn Subscriber, Duration) -> Result<(), SubscriberError> + Sync),
    ) -> Result<(), SubscriberError> {
        let stats = &self.inner.stats;
        let left = deadline.saturating_duration_since(Instant::now());
        let result = catch_unwind(AssertUnwindSafe(|| call(entry.subscriber.as_ref(), left))).unwrap_or_else(|_| {
            stats.subscriber_panics.fetch_add(1, Relaxed);
            Err(SubscriberError::Panicked)
        });
        if let Err(error) = &result
            && *error != SubscriberError::Panicked
        {
            stats.subscriber_errors.fetch_add(1, Relaxed);
        }
        result
    }
}

/// A live subscription; dropping it (or calling [`Subscription::cancel`]) unsubscribes.
#[must_use = "dropping a Subscription unsubscribes immediately"]
pub struct Subscription {
    hub: Option<Observability>,
    id: u64,
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}

impl Subscription {
    /// Unsubscribes now.
    pub fn cancel(mut self) {
        if let Some(hub) = self.hub.take() {
            hub.unsubscribe(self.id);
        }
    }

    /// Keeps the subscriber registered for the rest of the process.
    pub fn forever(mut self) {
        self.hub = None;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.take() {
            hub.unsubscribe(self.id);
        }
    }
}
