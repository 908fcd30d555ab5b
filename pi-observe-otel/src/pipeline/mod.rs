//! The OTel subscriber: a bounded queue in front of a worker thread that pairs records into
//! spans, batches them and exports them. `on_event` never blocks and never does I/O.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use pi_observe_core::{DropReason, EventKind, HubSlot, ObsEvent, Observability, Starts, Subscriber, SubscriberError};
use pi_observe_spool::Spool;

use crate::config::{ConfigError, OtlpConfig};
use crate::export::Exporter;
use crate::stats::Counters;
use crate::stats::ExportStats;

mod question;
mod ship;
mod worker;

use worker::Worker;

/// Most spans kept open at once; starts beyond it are dropped (a runaway would otherwise grow
/// without bound).
const MAX_OPEN_SPANS: usize = 100_000;

/// With a spool, how long shutdown gives the receiver before spooling what is left.
const DEFAULT_EXIT_PATIENCE: Duration = Duration::from_millis(200);

/// With a spool, how long a flush lets the receiver take to answer its first export of the run
/// (connection, TLS and a batch included) before taking it as stalled and spooling.
const FIRST_ANSWER_PATIENCE: Duration = Duration::from_secs(1);

/// With a spool, the least an export waits for the receiver's first answer of the run.
const LEAST_FIRST_ANSWER_PATIENCE: Duration = Duration::from_millis(100);

/// How long to wait for a receiver's first answer before taking it as stalled: fifty connection
/// round trips (`connect_time`; a TLS handshake and a request take a few), at least `least`, at
/// most a second (and a second when no connection could be timed). An export waits at least
/// [`LEAST_FIRST_ANSWER_PATIENCE`] (the batch spooled, later ones too while degraded); a
/// backfill's question less ([`question`]).
fn answer_patience(connect_time: Option<Duration>, least: Duration) -> Duration {
    connect_time.map_or(FIRST_ANSWER_PATIENCE, |rtt| (rtt * 50).clamp(least, FIRST_ANSWER_PATIENCE))
}

/// With a spool, the least a flush waits for an answer once the receiver has answered (then: four
/// times its slowest answer this run).
const MIN_ANSWER_PATIENCE: Duration = Duration::from_millis(250);

/// With a spool, retries per batch (100 + 200 ms of backoff) before it is spooled.
const SPOOLED_MAX_RETRIES: u32 = 2;

/// After a batch failed for good, later batches go straight to the spool for this long instead
/// of each waiting out its retries against a receiver that is down; doubled after each failure
/// in a row, up to `MAX_DEGRADED_FOR`.
const DEGRADED_FOR: Duration = Duration::from_secs(30);
const MAX_DEGRADED_FOR: Duration = Duration::from_secs(300);

/// A shutdown asked of the worker and not yet waited for.
struct PendingShutdown {
    /// When the caller stops waiting.
    deadline: Instant,
    /// When the worker stops exporting; the background spool delivery gets no longer either, so
    /// a stalled receiver costs the exit one patience, not two.
    worker_deadline: Instant,
    /// Says the worker stopped.
    done: mpsc::Receiver<()>,
}

/// Requests to the worker other than records.
enum Control {
    Flush(SyncSender<()>),
    Shutdown(Instant, SyncSender<()>),
}

/// The queue between `on_event` and the worker: a plain locked `Vec` that only wakes the worker
/// when a batch is full or a control request arrives (no syscall per record).
struct Queue {
    state: Mutex<QueueState>,
    /// The queue was full when last looked at: records are dropped without taking the lock
    /// until the worker takes the queue's records (a burst's drops cost no lock each).
    full: AtomicBool,
    wake: Condvar,
    capacity: usize,
    wake_at: usize,
}

#[derive(Default)]
struct QueueState {
    records: Vec<ObsEvent>,
    control: Vec<Control>,
    closed: bool,
    /// The worker waits with nothing queued (the next record wakes it).
    worker_idle: bool,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Exports contract events as OTLP spans. Subscribe it to a hub; call [`Subscriber::shutdown`]
/// (or the hub's) before exit to flush within a deadline.
pub struct OtelSubscriber {
    queue: Arc<Queue>,
    counters: Arc<Counters>,
    hub: HubSlot,
    disabled: bool,
    /// OTLP logs are on: every record is a log record, starts included.
    logs: bool,
    spool: Option<Arc<Spool>>,
    exit_patience: Duration,
    /// Says when the background delivery of earlier runs' batches is done.
    draining: Mutex<Option<mpsc::Receiver<()>>>,
    /// A shutdown begun ([`Subscriber::begin_shutdown`]) and not yet waited for.
    pending_shutdown: Mutex<Option<PendingShutdown>>,
}

impl std::fmt::Debug for OtelSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtelSubscriber").field("stats", &self.stats()).finish()
    }
}

impl OtelSubscriber {
    /// Starts the worker. Drops and export failures are also counted on the hub it is
    /// subscribed to.
    pub fn new(config: OtlpConfig) -> Result<Arc<Self>, ConfigError> {
        Self::start(config, None)
    }

    /// Like [`OtelSubscriber::new`], but spans go to an `opentelemetry_sdk` span exporter (the
    /// SDK's in-memory or stdout exporter, `opentelemetry-otlp`, a vendor exporter) instead of
    /// this crate's OTLP client. Pairing, conversion, batching, sampling, drop counting and the
    /// shutdown deadline are the same; metrics and logs, when on, still go over OTLP. The
    /// exporter gets the resource (`service.name`, `OTEL_RESOURCE_ATTRIBUTES`) through
    /// `set_resource`.
    pub fn with_span_exporter<E>(config: OtlpConfig, mut exporter: E) -> Result<Arc<Self>, ConfigError>
    where
        E: opentelemetry_sdk::trace::SpanExporter + Send + Sync + 'static,
    {
        exporter.set_resource(&config.resource());
        Self::start(config, Some(Box::new(exporter)))
    }

    fn start(
        config: OtlpConfig,
        sdk: Option<Box<dyn crate::export::SdkSpanExporter>>,
    ) -> Result<Arc<Self>, ConfigError> {
        let hub = HubSlot::new();
        let counters = Arc::new(Counters::default());
        let capacity = config.max_queue_size.unwrap_or(8192);
        let batch_size = config.max_export_batch_size.unwrap_or(512);
        let queue = Arc::new(Queue {
            state: Mutex::new(QueueState {
                records: Vec::with_capacity(batch_size.min(capacity)),
                ..QueueState::default()
            }),
            full: AtomicBool::new(false),
            wake: Condvar::new(),
            capacity,
            // Half the queue: a burst costs the producer one wake-up, not one per batch, and
            // the other half absorbs what comes while the worker takes the first.
            wake_at: (capacity / 2).max(batch_size.min(capacity)).max(1),
        });
        let disabled = config.disabled;
        let spool = config.spool.clone().map(|c| Arc::new(Spool::new(c)));
        let mut draining = None;
        if !disabled {
            let mut exporter = Exporter::new(&config, &config.resource())?;
            exporter.sdk = sdk;
            exporter.link = counters.link.clone();
            if spool.is_some() {
                // What is not delivered is kept, so a batch does not wait out long retries.
                exporter.max_retries = exporter.max_retries.min(SPOOLED_MAX_RETRIES);
            }
            if let Some(spool) = &spool {
                draining = crate::spool::drain_in_background(&config, spool.clone(), counters.clone());
            }
            let question = if config.check_receiver_first && spool.is_some() && exporter.sends_over_network() {
                question::Question::ask(&config, &counters)
            } else {
                None
            };
            let parts = worker::Parts {
                queue: queue.clone(),
                counters: counters.clone(),
                hub: hub.clone(),
                spool: spool.clone(),
            };
            let state = Worker::new(&config, exporter, parts, batch_size, question);
            // Not joined: see `wait_for_shutdown`.
            pi_observe_core::spawn_telemetry_thread("pi-observe-otlp", move || state.run()).map_err(|e| {
                ConfigError { setting: "OTLP exporter".into(), message: format!("cannot start worker: {e}") }
            })?;
        }
        let exit_patience = config.exit_patience.unwrap_or(DEFAULT_EXIT_PATIENCE);
        Ok(Arc::new(OtelSubscriber {
            queue,
            counters,
            hub,
            disabled,
            logs: config.logs.unwrap_or(false),
            spool,
            exit_patience,
            draining: Mutex::new(draining),
            pending_shutdown: Mutex::new(None),
        }))
    }

    /// Counts a record the full queue could not take. A lost opening record loses its span; a
    /// lost end after a start leaves the span to be exported as incomplete.
    fn drop_queue_full(&self, opens: bool) {
        if opens {
            self.counters.dropped_queue_full.fetch_add(1, Relaxed);
        }
        self.hub.record_dropped(DropReason::QueueFull, 1);
    }

    /// A snapshot of the export counters.
    pub fn stats(&self) -> ExportStats {
        let c = &self.counters;
        let [metrics, logs] = *c.signals.lock().unwrap_or_else(|e| e.into_inner());
        ExportStats {
            spans_started: c.started.load(Relaxed),
            spans_exported: c.exported.load(Relaxed),
            spans_sampled_out: c.sampled_out.load(Relaxed),
            dropped_queue_full: c.dropped_queue_full.load(Relaxed),
            dropped_failed: c.dropped_failed.load(Relaxed),
            dropped_rejected: c.dropped_rejected.load(Relaxed),
            dropped_unauthorized: c.dropped_unauthorized.load(Relaxed),
            dropped_shutdown: c.dropped_shutdown.load(Relaxed),
            spans_spooled: c.spooled.load(Relaxed),
            from_spool: c.from_spool.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            diagnostics: c.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            last_error: c.link.last_error(),
            metrics,
            logs,
        }
    }

    /// What this process did with the spool (`None` without one): batches written, delivered
    /// from earlier runs, removed by the limits, files found unreadable.
    pub fn spool_stats(&self) -> Option<pi_observe_spool::SpoolStats> {
        self.spool.as_ref().map(|s| s.stats())
    }

    /// Asks the worker to export what it has and stop; `None` when it was asked already.
    fn begin_shutdown_now(&self, timeout: Duration) -> Option<PendingShutdown> {
        let deadline = Instant::now() + timeout;
        // The worker stops exporting a little before the caller stops waiting, so its counts are
        // final when the wait returns.
        let mut worker_deadline = deadline - (timeout / 10).min(Duration::from_millis(50));
        if self.spool.is_some() {
            // What the receiver has not taken by then is spooled, not waited for.
            worker_deadline = worker_deadline.min(Instant::now() + self.exit_patience);
        }
        *self.counters.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner()) = Some(worker_deadline);
        self.counters.link.closing.store(true, Relaxed);
        self.counters.hurry.notify_waiters();
        let (ack, done) = mpsc::sync_channel(1);
        self.control(Control::Shutdown(worker_deadline, ack)).then_some(PendingShutdown {
            deadline,
            worker_deadline,
            done,
        })
    }

    /// Waits (until the shutdown's deadline) for the worker to stop.
    fn wait_for_shutdown(&self, pending: PendingShutdown) -> Result<(), SubscriberError> {
        let PendingShutdown { deadline, worker_deadline, done } = pending;
        // Once it has answered, all that is left of the worker is returning (its runtime and
        // connections dropped), which it does on its own: not waited for (a command's exit is
        // that much shorter; ADR 0013).
        let result = done.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        // The background delivery stops after its current batch: let it finish that one (within
        // the worker's patience), so a batch the receiver took is also removed from the spool.
        if let Some(draining) = self.draining.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = draining.recv_timeout(worker_deadline.saturating_duration_since(Instant::now()));
        }
        // On timeout the worker is left to finish on its own; the caller is not held.
        result.map_err(|_| SubscriberError::Timeout)
    }

    /// Hands a control request to the worker. After shutdown it is a no-op (`false`).
    fn control(&self, message: Control) -> bool {
        let mut state = self.queue.lock();
        if state.closed {
            return false;
        }
        if matches!(message, Control::Shutdown(..)) {
            state.closed = true;
            // Records that come now are dropped as late, not as overflow.
            self.queue.full.store(false, Relaxed);
        }
        state.control.push(message);
        self.queue.wake.notify_one();
        true
    }
}

impl Drop for OtelSubscriber {
    fn drop(&mut self) {
        // Without an explicit shutdown the worker still ends: it exports what it has and exits.
        self.queue.lock().closed = true;
        self.queue.wake.notify_one();
    }
}

impl Subscriber for OtelSubscriber {
    fn on_subscribe(&self, hub: &Observability) {
        self.hub.set(hub);
    }

    fn on_event(&self, event: &ObsEvent) {
        self.on_owned_event(event.clone());
    }

    /// A span is paired on the worker thread from its end record alone (start time, parent and
    /// start payload are all on it), so the only starts needed are prompts' (their session id
    /// goes on every span of the prompt's trace) — unless OTLP logs are on, which log every
    /// record. Operations still running at shutdown are announced by the hub and exported
    /// as incomplete, as before.
    fn starts(&self) -> Starts {
        if self.logs { Starts::All } else { Starts::Only(&[pi_observe_core::names::AGENT_PROMPT]) }
    }

    /// Full until the worker takes what is queued: the hub then sheds operations as they start
    /// instead of building records this subscriber would drop.
    fn saturated(&self) -> bool {
        self.queue.full.load(Relaxed)
    }

    /// Counted as the span's opening record dropped for a full queue would be.
    fn on_shed(&self) {
        self.counters.started.fetch_add(1, Relaxed);
        self.drop_queue_full(true);
    }

    fn on_owned_event(&self, event: ObsEvent) {
        self.on_owned_slot(&mut Some(event));
    }

    fn on_owned_slot(&self, slot: &mut Option<ObsEvent>) {
        let Some(event) = slot.as_ref() else { return };
        if self.disabled {
            return;
        }
        // The record that opens a span: its start, or its end when its start was skipped.
        let opens = match event.kind {
            EventKind::Start => true,
            EventKind::End | EventKind::Error => event.start_skipped(),
            EventKind::Event => false,
        };
        if opens {
            self.counters.started.fetch_add(1, Relaxed);
        }
        if self.queue.full.load(Relaxed) {
            return self.drop_queue_full(opens);
        }
        let mut state = self.queue.lock();
        if state.closed {
            drop(state);
            if opens {
                self.counters.dropped_shutdown.fetch_add(1, Relaxed);
            }
            self.hub.record_dropped(DropReason::Shutdown, 1);
            return;
        }
        if state.records.len() >= self.queue.capacity {
            self.queue.full.store(true, Relaxed);
            drop(state);
            return self.drop_queue_full(opens);
        }
        // Taken out of the hub's slot straight into the queue.
        state.records.extend(slot.take());
        // A full batch wakes the worker; so does the first record after it went idle, so that
        // it pairs what comes in as it comes (`DRAIN_INTERVAL`) instead of all of it at exit.
        if state.records.len() == self.queue.wake_at || (state.records.len() == 1 && state.worker_idle) {
            state.worker_idle = false;
            self.queue.wake.notify_one();
        }
    }

    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let deadline = Instant::now() + timeout;
        if self.spool.is_some() {
            // A receiver slower than it has been this run (or, before its first answer, than
            // a connection and a first batch take) is taken as stalled: what it has not taken
            // then is spooled rather than waited for.
            let slowest = Duration::from_micros(self.counters.slowest_answer_micros.load(Relaxed));
            let patience =
                if slowest.is_zero() { FIRST_ANSWER_PATIENCE } else { (slowest * 4).max(MIN_ANSWER_PATIENCE) };
            let by = (deadline - (timeout / 10).min(Duration::from_millis(50))).min(Instant::now() + patience);
            // A receiver that has answered this run keeps at least the least patience however
            // little time the flush has (a flush that reaches this subscriber late, after the
            // ones before it took their share): the flush still returns at its deadline, but
            // the export in flight is not cut and spooled for that.
            let by = if slowest.is_zero() { by } else { by.max(Instant::now() + MIN_ANSWER_PATIENCE) };
            *self.counters.flush_by.lock().unwrap_or_else(|e| e.into_inner()) = Some(by);
            self.counters.hurry.notify_waiters();
        }
        let (ack, done) = mpsc::sync_channel(1);
        if !self.control(Control::Flush(ack)) {
            return Ok(());
        }
        done.recv_timeout(deadline.saturating_duration_since(Instant::now())).map_err(|e| match e {
            RecvTimeoutError::Timeout => SubscriberError::Timeout,
            RecvTimeoutError::Disconnected => SubscriberError::Other("OTLP worker stopped".into()),
        })
    }

    fn begin_shutdown(&self, timeout: Duration) -> bool {
        let pending = self.begin_shutdown_now(timeout);
        *self.pending_shutdown.lock().unwrap_or_else(|e| e.into_inner()) = pending;
        true
    }

    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let begun = self.pending_shutdown.lock().unwrap_or_else(|e| e.into_inner()).take();
        match begun.or_else(|| self.begin_shutdown_now(timeout)) {
            Some(pending) => self.wait_for_shutdown(pending),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answers_patience_follows_the_connection_time() {
        let ms = Duration::from_millis;
        for least in [LEAST_FIRST_ANSWER_PATIENCE, ms(25)] {
            let patience = |rtt| answer_patience(rtt, least);
            assert_eq!(patience(Some(Duration::from_micros(80))), least, "loopback: the floor");
            assert_eq!(patience(Some(ms(8))), ms(400), "fifty round trips");
            assert_eq!(patience(Some(ms(90))), ms(1000), "at most a second");
            assert_eq!(patience(None), ms(1000), "no connection timed");
        }
    }
}
