//! [`Background`]: a subscriber whose work runs on a thread of its own.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::delivery::DeliveringGuard;
use crate::event::{EventKind, ObsEvent};
use crate::hub::HubSlot;
use crate::shared::Observability;
use crate::stats::DropReason;
use crate::subscriber::{Starts, Subscriber, SubscriberError};
use crate::telemetry_thread::spawn_telemetry_thread;

/// How long records may wait once the first of a burst is queued: the worker hands them over
/// in batches, so a burst costs the emitting thread no wake-up per record, and the subscribers
/// run seldom and long rather than often and cold (ADR 0025: 50 ms cost ~2 ms less CPU than
/// 10 ms in the 32-turn all-sinks run).
const HAND_OVER_EVERY: Duration = Duration::from_millis(50);

/// Runs another subscriber on a thread of its own: the emitting thread only queues each
/// record (no formatting, serializing or locking of the subscriber's state there), and the
/// worker hands the records to the subscriber in order, in batches.
///
/// For a subscriber whose `on_event` does real work on the emitting thread — a log formatter, a
/// sink that builds transactions — so that the agent's threads do not pay for it. The queue
/// holds at most `capacity` records; what comes while it is full is dropped and counted
/// ([`DropReason::QueueFull`]), as is what comes after shutdown ([`DropReason::Shutdown`]). A
/// panic of the subscriber on the worker is caught and counted like one on the emitting thread.
/// [`Subscriber::flush`] and [`Subscriber::shutdown`] first hand over every record queued before
/// them, then call the subscriber's own within what is left of the deadline. Records reach the
/// subscriber up to [`Background`]'s hand-over interval (50 ms) after they were emitted; the end
/// of a root operation (a trace finished) is handed over at once, with everything before it.
///
/// The subscriber runs on another thread: one that reads thread-local state of the emitting
/// thread (a scoped `tracing` dispatcher, say) must not be wrapped.
///
/// The worker runs at a lower scheduling priority than the threads that emit
/// ([`spawn_telemetry_thread`]).
///
/// [`Background::spawn_many`] runs several subscribers on one such thread: each record is
/// queued once (one copy on the emitting thread, not one per subscriber), and each hand-over
/// goes to one of them after another.
///
/// ```
/// use pi_observe_core::{Background, ObsEvent, Observability, Payload, trace_operation_sync};
/// use std::sync::{Arc, Mutex};
/// let hub = Observability::new();
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let names = seen.clone();
/// let printer = move |e: &ObsEvent| names.lock().unwrap().push(e.name.to_string());
/// let _sub = hub.subscribe(Background::spawn(Arc::new(printer), "doc-printer", 1024).unwrap());
/// hub.in_scope(|| trace_operation_sync("pi.test", Payload::new, |_| ()));
/// hub.flush(std::time::Duration::from_secs(5)).unwrap();
/// assert_eq!(*seen.lock().unwrap(), ["pi.test", "pi.test"]);
/// ```
pub struct Background {
    queue: Arc<Queue>,
    inners: Inners,
    hub: HubSlot,
    /// The worker's answer to the shutdown [`Subscriber::begin_shutdown`] asked for.
    shutting_down: Mutex<Option<Receiver<Result<(), SubscriberError>>>>,
}

struct Queue {
    state: Mutex<State>,
    wake: Condvar,
    /// The queue was full when last looked at: records are dropped without taking the lock
    /// until the worker takes what is queued.
    full: AtomicBool,
    capacity: usize,
    /// This many records waiting wake the worker at once.
    wake_at: usize,
    /// Records not queued: the queue was full, or shutdown had begun.
    dropped: AtomicU64,
    /// Records handed to a subscriber so far, one per record and subscriber.
    handed: AtomicU64,
}

#[derive(Default)]
struct State {
    records: Vec<ObsEvent>,
    control: Vec<Control>,
    closed: bool,
    /// The worker waits with nothing queued: the next record wakes it.
    idle: bool,
    /// A root operation's end is queued: the worker was woken to hand it over now.
    hurry: bool,
}

enum Control {
    Flush(Instant, SyncSender<Result<(), SubscriberError>>),
    Shutdown(Instant, SyncSender<Result<(), SubscriberError>>),
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The subscribers a [`Background`] hands records to, in order.
type Inners = Arc<[Arc<dyn Subscriber>]>;

impl Background {
    /// Starts the worker thread (named `name`) for `inner`, with room for `capacity` records.
    pub fn spawn(inner: Arc<dyn Subscriber>, name: &str, capacity: usize) -> std::io::Result<Background> {
        Background::spawn_many(vec![inner], name, capacity)
    }

    /// Starts one worker thread (named `name`) for all of `inners`, with room for `capacity`
    /// records: each record is queued once; the records of each hand-over go to the subscribers
    /// in the order given, all of them to one before the next (put first the one whose output
    /// is most awaited), and the last one is given them to keep. They are subscribed as one,
    /// under one policy. A panic of one is counted and the others still get the record; `flush`
    /// and `shutdown` reach each of them in turn within the one deadline.
    pub fn spawn_many(inners: Vec<Arc<dyn Subscriber>>, name: &str, capacity: usize) -> std::io::Result<Background> {
        let inners: Inners = inners.into();
        let capacity = capacity.max(1);
        let queue = Arc::new(Queue {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            full: AtomicBool::new(false),
            capacity,
            wake_at: (capacity / 2).clamp(1, 256),
            dropped: AtomicU64::new(0),
            handed: AtomicU64::new(0),
        });
        let hub = HubSlot::new();
        let worker = Worker { queue: queue.clone(), inners: inners.clone(), hub: hub.clone() };
        // Not joined: once it has answered the shutdown, all that is left of it is returning, which
        // it does on its own (waiting for its exit cost a command's exit time; ADR 0013).
        spawn_telemetry_thread(name, move || worker.run())?;
        Ok(Background { queue, inners, hub, shutting_down: Mutex::new(None) })
    }

    /// Records handed to its subscribers so far (one per record and subscriber): a caller that
    /// waits for them can tell a slow subscriber, which moves it, from a stuck one.
    pub fn handed(&self) -> u64 {
        self.queue.handed.load(Relaxed)
    }

    /// Records its subscribers never got: the queue was full, or they came after shutdown
    /// began (each also counted on the hub, by reason). For an exit summary that says what a
    /// sink lost before the sink itself saw it.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Relaxed)
    }

    fn drop_one(&self, reason: DropReason) {
        self.queue.dropped.fetch_add(1, Relaxed);
        self.hub.record_dropped(reason, 1);
    }

    /// Queues `control` for the worker; false when the worker has stopped.
    fn control(&self, control: Control) -> bool {
        let mut state = self.queue.lock();
        if state.closed {
            return false;
        }
        if matches!(control, Control::Shutdown(..)) {
            state.closed = true;
        }
        state.control.push(control);
        self.queue.wake.notify_one();
        true
    }

    /// Asks the worker to hand over what is queued and shut the subscriber down by `deadline`.
    fn begin(&self, deadline: Instant) -> Option<Receiver<Result<(), SubscriberError>>> {
        let (ack, answer) = mpsc::sync_channel(1);
        self.control(Control::Shutdown(deadline, ack)).then_some(answer)
    }
}

/// Waits for the worker's answer until `deadline`.
fn answer(answer: &Receiver<Result<(), SubscriberError>>, deadline: Instant) -> Result<(), SubscriberError> {
    match answer.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(result) => result,
        Err(RecvTimeoutError::Timeout) => Err(SubscriberError::Timeout),
        Err(RecvTimeoutError::Disconnected) => Err(SubscriberError::Other("background worker stopped".into())),
    }
}

impl Subscriber for Background {
    fn on_subscribe(&self, hub: &Observability) {
        self.hub.set(hub);
        for inner in self.inners.iter() {
            inner.on_subscribe(hub);
        }
    }

    fn on_event(&self, event: &ObsEvent) {
        self.on_owned_event(event.clone());
    }

    fn on_owned_event(&self, event: ObsEvent) {
        if self.queue.full.load(Relaxed) {
            return self.drop_one(DropReason::QueueFull);
        }
        let mut state = self.queue.lock();
        if state.closed {
            drop(state);
            return self.drop_one(DropReason::Shutdown);
        }
        if state.records.len() >= self.queue.capacity {
            self.queue.full.store(true, Relaxed);
            drop(state);
            return self.drop_one(DropReason::QueueFull);
        }
        // The end of a root operation (a finished trace: what a sink that groups by trace sends)
        // is handed over at once, with what came before it; once per hand-over.
        let ends_root = matches!(event.kind, EventKind::End | EventKind::Error) && event.parent_span_id.is_none();
        state.records.push(event);
        let hurry = ends_root && !state.hurry;
        if hurry || state.records.len() == self.queue.wake_at || (state.records.len() == 1 && state.idle) {
            state.hurry |= hurry;
            state.idle = false;
            self.queue.wake.notify_one();
        }
    }

    fn wants_payloads(&self) -> bool {
        self.inners.iter().any(|inner| inner.wants_payloads())
    }

    /// What its subscribers need when they agree, else every start.
    fn starts(&self) -> Starts {
        let mut each = self.inners.iter().map(|inner| inner.starts());
        let first = each.next().unwrap_or(Starts::All);
        if each.all(|starts| starts == first) { first } else { Starts::All }
    }

    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let deadline = Instant::now() + timeout;
        let (ack, done) = mpsc::sync_channel(1);
        if !self.control(Control::Flush(deadline, ack)) {
            return Ok(());
        }
        answer(&done, deadline)
    }

    fn begin_shutdown(&self, timeout: Duration) -> bool {
        let begun = self.begin(Instant::now() + timeout);
        *self.shutting_down.lock().unwrap_or_else(|e| e.into_inner()) = begun;
        true
    }

    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let deadline = Instant::now() + timeout;
        let begun = self.shutting_down.lock().unwrap_or_else(|e| e.into_inner()).take();
        match begun.or_else(|| self.begin(deadline)) {
            Some(done) => answer(&done, deadline),
            None => Ok(()),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // Without a shutdown the worker still hands over what is queued, then ends.
        self.queue.lock().closed = true;
        self.queue.wake.notify_one();
    }
}

impl std::fmt::Debug for Background {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background").field("capacity", &self.queue.capacity).finish_non_exhaustive()
    }
}

/// The thread behind a [`Background`].
struct Worker {
    queue: Arc<Queue>,
    inners: Inners,
    hub: HubSlot,
}

impl Worker {
    fn run(self) {
        // Records the subscriber emits while handling one are dropped as re-entrant, as on the
        // emitting thread (no feedback loop through the queue).
        let _delivering = DeliveringGuard::enter();
        // Double buffering: the queue's vector and this one swap places, keeping both capacities.
        let mut records = Vec::new();
        let mut hand_over_at: Option<Instant> = None;
        loop {
            let (controls, closed) = {
                let mut state = self.queue.lock();
                while state.records.len() < self.queue.wake_at
                    && state.control.is_empty()
                    && !state.closed
                    && !state.hurry
                {
                    if state.records.is_empty() {
                        state.idle = true;
                        hand_over_at = None;
                        state = self.queue.wake.wait(state).unwrap_or_else(|e| e.into_inner());
                        continue;
                    }
                    let now = Instant::now();
                    let at = *hand_over_at.get_or_insert(now + HAND_OVER_EVERY);
                    if now >= at {
                        break;
                    }
                    state = self
                        .queue
                        .wake
                        .wait_timeout(state, at - now)
                        .map(|(s, _)| s)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                state.idle = false;
                state.hurry = false;
                std::mem::swap(&mut state.records, &mut records);
                self.queue.full.store(false, Relaxed);
                (std::mem::take(&mut state.control), state.closed)
            };
            hand_over_at = None;
            self.deliver(&mut records);
            for control in controls {
                match control {
                    Control::Flush(deadline, ack) => {
                        // A flush whose caller has stopped waiting is not asked of the
                        // subscribers: with no time left it could only cut their work short (an
                        // exporter with a spool spools what it was sending).
                        let left = || deadline.saturating_duration_since(Instant::now());
                        let flushed = if left().is_zero() {
                            Err(SubscriberError::Timeout)
                        } else {
                            self.each(|inner| inner.flush(left()))
                        };
                        let _ = ack.send(flushed);
                    }
                    Control::Shutdown(deadline, ack) => {
                        let _ = ack.send(self.finish(deadline));
                        return;
                    }
                }
            }
            if closed && self.queue.lock().control.is_empty() {
                // Dropped without a shutdown: what was queued has been handed over.
                return;
            }
        }
    }

    /// Hands the `records` of one hand-over to each subscriber in turn, all of them to one
    /// before the next: the first has its share soonest (at the exit, the end of a trace that a
    /// sink still has to send). The last one keeps the records; `records` is left empty.
    fn deliver(&self, records: &mut Vec<ObsEvent>) {
        let Some((last, rest)) = self.inners.split_last() else { return records.clear() };
        for inner in rest {
            for event in records.iter() {
                self.call(inner, |inner| inner.on_event(event));
                self.queue.handed.fetch_add(1, Relaxed);
            }
        }
        for event in records.drain(..) {
            self.call(last, |inner| inner.on_owned_event(event));
            self.queue.handed.fetch_add(1, Relaxed);
        }
    }

    /// Shuts the subscribers down within `deadline`: each one's own worker first, then waiting
    /// for each.
    fn finish(&self, deadline: Instant) -> Result<(), SubscriberError> {
        let left = || deadline.saturating_duration_since(Instant::now());
        for inner in self.inners.iter() {
            self.call(inner, |inner| inner.begin_shutdown(left()));
        }
        self.each(|inner| inner.shutdown(left()))
    }

    /// Calls `f` on each subscriber in turn; the first failure (a panic counts as one).
    fn each(&self, f: impl Fn(&dyn Subscriber) -> Result<(), SubscriberError>) -> Result<(), SubscriberError> {
        let results: Vec<_> = self.inners.iter().map(|inner| self.call(inner, &f).unwrap_or_else(panicked)).collect();
        results.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }

    /// Calls one subscriber, counting a panic (`None`) as the hub counts one.
    fn call<R>(&self, inner: &Arc<dyn Subscriber>, f: impl FnOnce(&dyn Subscriber) -> R) -> Option<R> {
        let result = catch_unwind(AssertUnwindSafe(|| f(inner.as_ref())));
        if result.is_err() {
            self.hub.count_panic();
        }
        result.ok()
    }
}

fn panicked() -> Result<(), SubscriberError> {
    Err(SubscriberError::Other("subscriber panicked".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceId;
    use std::sync::atomic::AtomicUsize;

    fn record(hub: &Observability, name: &'static str) {
        hub.emit(ObsEvent::new(EventKind::Event, name, TraceId::random()));
    }

    /// The names an inner subscriber saw, in order.
    fn collector() -> (Arc<Mutex<Vec<String>>>, Arc<dyn Subscriber>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let names = seen.clone();
        (seen, Arc::new(move |e: &ObsEvent| names.lock().unwrap().push(e.name.to_string())))
    }

    #[test]
    fn records_reach_the_subscriber_in_order_by_a_flush_and_none_after_shutdown() {
        let hub = Observability::new();
        let (seen, inner) = collector();
        let _sub = hub.subscribe(Background::spawn(inner, "test-background", 64).unwrap());
        for name in ["pi.a", "pi.b", "pi.c"] {
            record(&hub, name);
        }
        hub.flush(Duration::from_secs(10)).unwrap();
        assert_eq!(*seen.lock().unwrap(), ["pi.a", "pi.b", "pi.c"]);
        record(&hub, "pi.d");
        hub.shutdown(Duration::from_secs(10)).unwrap();
        record(&hub, "pi.late");
        assert_eq!(*seen.lock().unwrap(), ["pi.a", "pi.b", "pi.c", "pi.d"]);
        assert_eq!(hub.stats().dropped(DropReason::Shutdown), 1);
    }

    #[test]
    fn a_panic_on_the_worker_is_counted_and_later_records_still_arrive() {
        let hub = Observability::new();
        let (seen, inner) = collector();
        let panicky = move |e: &ObsEvent| {
            assert_ne!(e.name, "pi.boom", "the subscriber fails on this record");
            inner.on_event(e);
        };
        let _sub = hub.subscribe(Background::spawn(Arc::new(panicky), "test-background", 64).unwrap());
        for name in ["pi.a", "pi.boom", "pi.b"] {
            record(&hub, name);
        }
        hub.flush(Duration::from_secs(10)).unwrap();
        assert_eq!(*seen.lock().unwrap(), ["pi.a", "pi.b"]);
        let stats = hub.stats();
        assert_eq!((stats.subscriber_panics, stats.dropped(DropReason::SubscriberPanic)), (1, 1));
    }

    #[test]
    fn several_subscribers_on_one_worker_each_get_every_record_though_one_panics() {
        let hub = Observability::new();
        let (first_seen, first) = collector();
        let (last_seen, last) = collector();
        let panicky = move |e: &ObsEvent| {
            assert_ne!(e.name, "pi.boom", "the first subscriber fails on this record");
            first.on_event(e);
        };
        let (flushes, flushed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counting: Arc<dyn Subscriber> = Arc::new(CountsFlushes(last, flushes.clone()));
        let background = Background::spawn_many(vec![Arc::new(panicky), counting], "test-background", 64).unwrap();
        let _sub = hub.subscribe(background);
        for name in ["pi.a", "pi.boom", "pi.b"] {
            record(&hub, name);
        }
        hub.flush(Duration::from_secs(10)).unwrap();
        flushed.store(flushes.load(Relaxed), Relaxed);
        assert_eq!(*first_seen.lock().unwrap(), ["pi.a", "pi.b"]);
        assert_eq!(*last_seen.lock().unwrap(), ["pi.a", "pi.boom", "pi.b"]);
        assert_eq!(hub.stats().subscriber_panics, 1);
        assert_eq!(flushed.load(Relaxed), 1, "a flush reaches every subscriber");
        hub.shutdown(Duration::from_secs(10)).unwrap();
        assert_eq!(flushes.load(Relaxed), 2, "so does the shutdown");
    }

    #[test]
    fn the_first_subscriber_gets_a_whole_hand_over_before_the_next_gets_any() {
        let hub = Observability::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (entered, inside) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let released = Mutex::new(released);
        let first_order = order.clone();
        // Holds the worker inside the first hand-over until the next records are queued.
        let first = move |e: &ObsEvent| {
            first_order.lock().unwrap().push(format!("remote {}", e.name));
            if e.name == "pi.gate" {
                entered.send(()).unwrap();
                released.lock().unwrap().recv().unwrap();
            }
        };
        let last_order = order.clone();
        let last = move |e: &ObsEvent| last_order.lock().unwrap().push(format!("file {}", e.name));
        let background = Background::spawn_many(vec![Arc::new(first), Arc::new(last)], "test-background", 64).unwrap();
        let _sub = hub.subscribe(background);
        record(&hub, "pi.gate");
        inside.recv_timeout(Duration::from_secs(10)).unwrap();
        record(&hub, "pi.a");
        record(&hub, "pi.b");
        release.send(()).unwrap();
        hub.flush(Duration::from_secs(10)).unwrap();
        let want = ["remote pi.gate", "file pi.gate", "remote pi.a", "remote pi.b", "file pi.a", "file pi.b"];
        assert_eq!(*order.lock().unwrap(), want);
    }

    /// A subscriber that counts its flushes and shutdowns.
    struct CountsFlushes(Arc<dyn Subscriber>, Arc<AtomicUsize>);

    impl Subscriber for CountsFlushes {
        fn on_event(&self, event: &ObsEvent) {
            self.0.on_event(event);
        }

        fn flush(&self, _timeout: Duration) -> Result<(), SubscriberError> {
            self.1.fetch_add(1, Relaxed);
            Ok(())
        }

        fn shutdown(&self, _timeout: Duration) -> Result<(), SubscriberError> {
            self.1.fetch_add(1, Relaxed);
            Ok(())
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_blocking_the_emitter() {
        let hub = Observability::new();
        let (release, wait) = mpsc::channel::<()>();
        let (entered, holding) = mpsc::channel::<()>();
        let held = Mutex::new((entered, wait));
        let (seen, inner) = collector();
        // The subscriber holds the worker on its first record until the test lets it go.
        let stuck = move |e: &ObsEvent| {
            if e.name == "pi.first" {
                let held = held.lock().unwrap();
                held.0.send(()).unwrap();
                let _ = held.1.recv();
            }
            inner.on_event(e);
        };
        let background = Arc::new(Background::spawn(Arc::new(stuck), "test-background", 4).unwrap());
        let _sub = hub.subscribe_arc(background.clone(), Arc::new(crate::ContentPolicy::default()));
        record(&hub, "pi.first");
        holding.recv_timeout(Duration::from_secs(10)).unwrap();
        // The worker holds "pi.first"; the queue has room for 4 of these 10.
        for _ in 0..10 {
            record(&hub, "pi.next");
        }
        release.send(()).unwrap();
        hub.flush(Duration::from_secs(10)).unwrap();
        let dropped = hub.stats().dropped(DropReason::QueueFull);
        assert_eq!(dropped, 6);
        assert_eq!(background.dropped(), 6, "the background says what it dropped too");
        assert_eq!(seen.lock().unwrap().len(), 5);
    }

    #[test]
    fn records_emitted_by_the_subscriber_on_its_worker_are_dropped_as_reentrant() {
        let hub = Observability::new();
        let (seen, inner) = collector();
        let weak = hub.downgrade();
        let echo = move |e: &ObsEvent| {
            if let Some(hub) = weak.upgrade() {
                record(&hub, "pi.echo");
            }
            inner.on_event(e);
        };
        let _sub = hub.subscribe(Background::spawn(Arc::new(echo), "test-background", 64).unwrap());
        record(&hub, "pi.a");
        hub.flush(Duration::from_secs(10)).unwrap();
        assert_eq!(*seen.lock().unwrap(), ["pi.a"]);
        assert_eq!(hub.stats().dropped(DropReason::Reentrant), 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_worker_runs_below_the_emitting_threads_priority() {
        let (_seen, inner) = collector();
        let hub = Observability::new();
        let _sub = hub.subscribe(Background::spawn(inner, "test-nice", 64).unwrap());
        // The worker lowers its priority as it starts: look it up by name until it has.
        let nice_of_worker = || {
            std::fs::read_dir("/proc/self/task").unwrap().flatten().find_map(|task| {
                let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
                (comm.trim() == "test-nice").then_some(())?;
                let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
                // Field 19 is the nice value; the name (field 2) has no spaces here.
                stat.split_whitespace().nth(18)?.parse::<i32>().ok()
            })
        };
        let started = Instant::now();
        while nice_of_worker() != Some(10) && started.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        assert_eq!(nice_of_worker(), Some(10));
        let this_thread = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        assert_eq!(this_thread.split_whitespace().nth(18), Some("0"), "the emitting thread keeps its priority");
    }
}
