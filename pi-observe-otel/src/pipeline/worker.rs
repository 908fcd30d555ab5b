//! The export worker: pairs records into spans, samples, batches, exports (or spools) them,
//! and aggregates metrics — on its own thread with a current-thread runtime.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::InstrumentationScope;
use opentelemetry_sdk::trace::SpanData;
use pi_observe_core::{DropReason, EventKind, HubSlot, ObsEvent, SpanId};
use pi_observe_spool::Spool;

use super::question::Question;
use super::{Control, Counters, DEGRADED_FOR, MAX_OPEN_SPANS, Queue};
use crate::convert::{Conventions, proto_span, span_data, span_parts};
use crate::export::Exporter;
use crate::metrics::Aggregator;
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;

/// How long records wait before the worker pairs them (it exports on its own schedule).
const DRAIN_INTERVAL: Duration = Duration::from_millis(100);

pub(super) struct Worker {
    pub(super) queue: Arc<Queue>,
    pub(super) exporter: Exporter,
    pub(super) counters: Arc<Counters>,
    pub(super) hub: HubSlot,
    pub(super) conventions: Conventions,
    pub(super) scope: InstrumentationScope,
    pub(super) batch_size: usize,
    pub(super) delay: Duration,
    pub(super) timeout: Duration,
    pub(super) sample_ratio: f64,
    pub(super) parent_based: bool,
    /// Parent-based samplers: the remote parent's sampled flag per trace, while its root is open.
    pub(super) parent_decisions: HashMap<pi_observe_core::TraceId, bool>,
    pub(super) open: HashMap<SpanId, (ObsEvent, Vec<ObsEvent>), BuildHasherDefault<IdHasher>>,
    /// Point events of spans whose start was skipped ([`ObsEvent::start_skipped`]), until the
    /// span's end (or, at shutdown, its start) comes.
    pub(super) early_events: HashMap<SpanId, Vec<ObsEvent>, BuildHasherDefault<IdHasher>>,
    /// The session id of each open prompt trace, put on every span of the trace
    /// (`gen_ai.conversation.id`: backends group sessions by it on every span, not the root).
    pub(super) conversations: HashMap<pi_observe_core::TraceId, pi_observe_core::Value>,
    pub(super) batch: Batch,
    /// Whether a batch of spans was sent yet. The first goes `DRAIN_INTERVAL` after the run's
    /// first span was paired (`first_spans_at`: with what ended meanwhile), not on the schedule:
    /// the connection, and whether the receiver answers, is then known early in the run, and the
    /// exit's export reuses that connection.
    pub(super) sent_spans: bool,
    pub(super) first_spans_at: Option<Instant>,
    pub(super) stopped: bool,
    pub(super) metrics: Option<Aggregator>,
    pub(super) metric_interval: Duration,
    pub(super) metrics_stopped: bool,
    /// Log records waiting for the next batch; `None` when logs are off.
    pub(super) logs: Option<Vec<opentelemetry_proto::tonic::logs::v1::LogRecord>>,
    pub(super) logs_stopped: bool,
    pub(super) spool: Option<Arc<Spool>>,
    /// `OTEL_TRACES_EXPORTER=none`: spans are not built (counted as sampled out).
    pub(super) traces_off: bool,
    /// Until when batches are spooled without trying (the receiver failed recently).
    pub(super) degraded_until: Option<Instant>,
    /// How long the next failure keeps the receiver from being tried.
    pub(super) degraded_for: Duration,
    /// Why the receiver is not being tried.
    pub(super) degraded_why: Option<String>,
    /// With a spool: how long a TCP connection to the receiver took, probed once when an
    /// export has waited the least patience for the run's first answer (`Some(None)`: no
    /// connection within a second).
    pub(super) connect_time: std::cell::Cell<Option<Option<Duration>>>,
    /// With a spool, the receiver asked with an empty export as the subscriber started
    /// ([`crate::OtlpConfig::check_receiver_first`]), its answer awaited before the first payload.
    pub(super) question: Option<Arc<Question>>,
}

/// Finished spans waiting for the next export, in the form their exporter takes: `SpanData`
/// for an SDK exporter, OTLP protobuf spans for ours (built once, not converted twice).
pub(super) enum Batch {
    Sdk(Vec<SpanData>),
    Wire(Vec<ProtoSpan>),
    /// OTLP/HTTP protobuf: spans encoded as they are paired (`crate::wire`).
    Encoded(crate::wire::EncodedSpans),
}

impl Batch {
    pub(super) fn len(&self) -> usize {
        match self {
            Batch::Sdk(spans) => spans.len(),
            Batch::Wire(spans) => spans.len(),
            Batch::Encoded(spans) => spans.len(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds the span of `start` (settled by `end`, or incomplete at `now`).
    fn push(
        &mut self,
        start: &ObsEvent,
        end: Option<&ObsEvent>,
        events: &[ObsEvent],
        now: SystemTime,
        conventions: Conventions,
        scope: &InstrumentationScope,
    ) {
        match self {
            Batch::Sdk(spans) => spans.extend(span_data(start, end, events, now, conventions, scope)),
            Batch::Wire(spans) => {
                let latest = scope.schema_url() == Some(crate::names::SCHEMA_URL_LATEST);
                spans.extend(span_parts(start, end, events, now, conventions, latest).map(proto_span));
            }
            Batch::Encoded(spans) => {
                let latest = scope.schema_url() == Some(crate::names::SCHEMA_URL_LATEST);
                spans.push(start, end, events, now, conventions, latest);
            }
        }
    }

    /// The spans so far, leaving an empty batch of the same form.
    pub(super) fn take(&mut self) -> Batch {
        match self {
            Batch::Sdk(spans) => Batch::Sdk(std::mem::take(spans)),
            Batch::Wire(spans) => Batch::Wire(std::mem::take(spans)),
            Batch::Encoded(spans) => Batch::Encoded(spans.take()),
        }
    }
}

/// What the worker shares with its subscriber.
pub(super) struct Parts {
    pub(super) queue: Arc<Queue>,
    pub(super) counters: Arc<Counters>,
    pub(super) hub: HubSlot,
    pub(super) spool: Option<Arc<Spool>>,
}

impl Worker {
    /// The worker for `config`, exporting with `exporter` in batches of `batch_size`; `question`:
    /// the backfill's question, already asked.
    pub(super) fn new(
        config: &crate::config::OtlpConfig,
        exporter: Exporter,
        Parts { queue, counters, hub, spool }: Parts,
        batch_size: usize,
        question: Option<Arc<Question>>,
    ) -> Worker {
        let batch = if exporter.sdk.is_some() {
            Batch::Sdk(Vec::new())
        } else if exporter.traces_as_protobuf_bytes() {
            Batch::Encoded(crate::wire::EncodedSpans::default())
        } else {
            Batch::Wire(Vec::new())
        };
        Worker {
            queue,
            exporter,
            counters,
            hub,
            conventions: config.conventions,
            scope: InstrumentationScope::builder("pi-observe")
                .with_version(env!("CARGO_PKG_VERSION"))
                .with_schema_url(config.schema_url())
                .build(),
            batch_size,
            delay: config.schedule_delay.unwrap_or(Duration::from_secs(1)),
            timeout: config.timeout.unwrap_or(Duration::from_secs(10)),
            sample_ratio: config.sample_ratio.unwrap_or(1.0),
            parent_based: config.parent_based.unwrap_or(false),
            parent_decisions: HashMap::new(),
            metrics: config.metrics.unwrap_or(true).then(|| {
                let limit = config.metric_cardinality_limit.unwrap_or(crate::metrics::DEFAULT_CARDINALITY_LIMIT);
                Aggregator::with_limit(config.dims(), limit).delta(config.metric_temporality.unwrap_or_default())
            }),
            metric_interval: config.metric_interval.unwrap_or(Duration::from_secs(10)),
            metrics_stopped: false,
            logs: config.logs.unwrap_or(false).then(Vec::new),
            logs_stopped: false,
            open: HashMap::default(),
            early_events: HashMap::default(),
            conversations: HashMap::new(),
            batch,
            sent_spans: false,
            first_spans_at: None,
            stopped: false,
            spool,
            traces_off: config.traces_exporter == Some(crate::config::TracesExporter::None),
            degraded_until: None,
            degraded_for: DEGRADED_FOR,
            degraded_why: None,
            connect_time: std::cell::Cell::new(None),
            question,
        }
    }

    pub(super) fn run(mut self) {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
            self.counters
                .diagnostics
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push("OTLP: cannot start the export runtime".into());
            return;
        };
        let mut next_export = Instant::now() + self.delay;
        let mut next_metrics = Instant::now() + self.metric_interval;
        // Double buffering: the queue's vector and this one swap places, so both keep their
        // capacity and `on_event` does not reallocate once they have grown.
        let mut records = Vec::with_capacity(self.queue.wake_at);
        let mut next_drain = Instant::now();
        loop {
            let due = next_export.min(next_metrics).min(self.first_export_due().unwrap_or(next_export));
            let (controls, closed) = self.take_waiting(&mut records, due, next_drain);
            next_drain = Instant::now() + DRAIN_INTERVAL;
            for event in records.drain(..) {
                self.record(event);
                if self.batch.len() >= self.batch_size {
                    self.export(&runtime, Instant::now() + self.timeout);
                }
            }
            if !self.sent_spans && self.first_spans_at.is_none() && !self.batch.is_empty() {
                self.first_spans_at = Some(Instant::now());
            }
            let now = Instant::now();
            if now >= next_export || self.first_export_due().is_some_and(|due| now >= due) {
                self.export(&runtime, now + self.timeout);
                next_export = Instant::now() + self.delay;
            }
            if now >= next_metrics {
                self.export_metrics(&runtime, now + self.timeout);
                next_metrics = Instant::now() + self.metric_interval;
            }
            for control in controls {
                match control {
                    Control::Flush(ack) => {
                        self.export(&runtime, Instant::now() + self.timeout);
                        let _ = ack.send(());
                        *self.counters.flush_by.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    }
                    Control::Shutdown(deadline, ack) => {
                        self.finish(&runtime, deadline);
                        if let Some(sdk) = &self.exporter.sdk {
                            let _ = sdk.shutdown(deadline.saturating_duration_since(Instant::now()));
                        }
                        let _ = ack.send(());
                        return;
                    }
                }
            }
            if closed {
                // Dropped without shutdown: export what is left within the usual timeout.
                self.finish(&runtime, Instant::now() + self.timeout);
                return;
            }
        }
    }

    /// Waits until there is work — half the queue filled, a control request, the closing, `due`
    /// (the next export of spans or metrics), or `drain` while records wait — then swaps the
    /// waiting records into `records` (empty) and takes the control requests and the closing.
    fn take_waiting(&self, records: &mut Vec<ObsEvent>, due: Instant, drain: Instant) -> (Vec<Control>, bool) {
        let mut state = self.queue.lock();
        while state.records.len() < self.queue.wake_at && state.control.is_empty() && !state.closed {
            let now = Instant::now();
            // Records waiting are paired (and encoded) every `DRAIN_INTERVAL`, so that little
            // is left for the exit; with none, the first one wakes the worker.
            let idle = state.records.is_empty();
            let wake = if idle { due } else { due.min(drain) };
            if now >= wake {
                break;
            }
            state.worker_idle = idle;
            state =
                self.queue.wake.wait_timeout(state, wake - now).map(|(s, _)| s).unwrap_or_else(|e| e.into_inner().0);
        }
        state.worker_idle = false;
        std::mem::swap(&mut state.records, records);
        self.queue.full.store(false, Relaxed);
        (std::mem::take(&mut state.control), state.closed)
    }

    /// When the run's first spans are due to leave, while none has been sent.
    fn first_export_due(&self) -> Option<Instant> {
        self.first_spans_at.filter(|_| !self.sent_spans).map(|paired| paired + DRAIN_INTERVAL)
    }

    /// Exports open spans (as incomplete), the last batch and the metrics, within `deadline`.
    fn finish(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        let mut leftover = std::mem::take(&mut self.queue.lock().records);
        for event in leftover.drain(..) {
            self.record(event);
        }
        let now = SystemTime::now();
        for (_, (start, events)) in std::mem::take(&mut self.open) {
            self.batch.push(&start, None, &events, now, self.conventions, &self.scope);
        }
        self.export(runtime, deadline);
        self.export_metrics(runtime, deadline);
        // Freed only now: the queue's buffer has room for half the queue (~1.4 MB by default),
        // and giving that back to the system before the last requests delayed them.
        drop(leftover);
    }

    /// Keeps a trace when the low 8 bytes of its id fall under the ratio (deterministic per trace).
    fn sampled(&self, event: &ObsEvent) -> bool {
        if let Some(decision) = self.parent_decisions.get(&event.trace_id) {
            return *decision;
        }
        if self.sample_ratio >= 1.0 {
            return true;
        }
        let bytes = event.trace_id.to_bytes();
        let mut low = [0u8; 8];
        low.copy_from_slice(&bytes[8..]);
        (u64::from_be_bytes(low) as f64) < self.sample_ratio * u64::MAX as f64
    }

    /// Parent-based sampling: the remote parent's sampled flag named by a root (`Some`), which
    /// decides for its whole trace while the root is open.
    fn parent_flag(&self, event: &ObsEvent) -> Option<bool> {
        if !self.parent_based {
            return None;
        }
        event.payload.get(pi_observe_core::names::PARENT_SAMPLED).and_then(pi_observe_core::Value::as_bool)
    }

    fn record(&mut self, event: ObsEvent) {
        let parent_flag = self.parent_flag(&event);
        if let Some(sampled) = parent_flag.filter(|_| event.kind == EventKind::Start)
            && self.parent_decisions.len() < MAX_OPEN_SPANS
        {
            self.parent_decisions.insert(event.trace_id, sampled);
        }
        let forget = parent_flag.is_some() && matches!(event.kind, EventKind::End | EventKind::Error);
        let trace = event.trace_id;
        self.record_sampled(event);
        if forget {
            self.parent_decisions.remove(&trace);
        }
    }

    fn record_sampled(&mut self, event: ObsEvent) {
        if self.logs.is_some()
            && self.sampled(&event)
            && let Some(logs) = &mut self.logs
        {
            logs.push(crate::logs::log_record(&event));
        }
        let Some(span) = event.span_id else { return };
        match event.kind {
            EventKind::Start => {
                let events = self.early_events.remove(&span).unwrap_or_default();
                if self.keeps_span(&event) {
                    let session = event.payload.get(pi_observe_core::names::SESSION_ID);
                    if let Some(id) = session.filter(|_| event.name == pi_observe_core::names::AGENT_PROMPT)
                        && self.conversations.len() < MAX_OPEN_SPANS
                    {
                        self.conversations.insert(event.trace_id, id.clone());
                    }
                    self.open.insert(span, (event, events));
                }
            }
            EventKind::End | EventKind::Error => {
                if let Some(metrics) = &mut self.metrics {
                    metrics.record_span(&event);
                }
                let mut event = event;
                self.carry_conversation(&mut event);
                if let Some((start, events)) = self.open.remove(&span) {
                    self.batch.push(&start, Some(&event), &events, SystemTime::now(), self.conventions, &self.scope);
                } else if event.start_skipped() {
                    // The end alone opens and settles its span.
                    let events = self.early_events.remove(&span).unwrap_or_default();
                    if self.keeps_span(&event) {
                        self.batch.push(
                            &event,
                            Some(&event),
                            &events,
                            SystemTime::now(),
                            self.conventions,
                            &self.scope,
                        );
                    }
                }
            }
            EventKind::Event => {
                if let Some((_, events)) = self.open.get_mut(&span) {
                    events.push(event);
                } else if event.start_skipped() && self.early_events.len() < MAX_OPEN_SPANS {
                    self.early_events.entry(span).or_default().push(event);
                }
            }
        }
    }

    /// Whether the span opened by `event` (its start, or its end when the start was skipped)
    /// is exported: counted as sampled out, or dropped when too many are open, otherwise.
    fn keeps_span(&self, event: &ObsEvent) -> bool {
        if self.traces_off || !self.sampled(event) {
            self.counters.sampled_out.fetch_add(1, Relaxed);
            false
        } else if event.kind == EventKind::Start && self.open.len() >= MAX_OPEN_SPANS {
            self.counters.dropped_queue_full.fetch_add(1, Relaxed);
            self.hub.record_dropped(DropReason::QueueFull, 1);
            false
        } else {
            true
        }
    }

    /// Adds the session id of the record's prompt to a record that lacks one; forgets it when
    /// the prompt ends.
    fn carry_conversation(&mut self, event: &mut ObsEvent) {
        use pi_observe_core::names::{AGENT_PROMPT, SESSION_ID};
        if event.payload.get(SESSION_ID).is_none()
            && let Some(id) = self.conversations.get(&event.trace_id)
        {
            event.payload.insert(SESSION_ID, id.clone(), pi_observe_core::Class::Safe);
        }
        if event.name == AGENT_PROMPT {
            self.conversations.remove(&event.trace_id);
        }
    }
}

/// Hashes span ids, which are already uniformly random: folds their bytes into a `u64` instead
/// of running SipHash over them.
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = self.0.rotate_left(5) ^ u64::from_le_bytes(word);
        }
    }
}
