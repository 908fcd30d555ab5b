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
use super::{Control, Counters, DEGRADED_FOR, MAX_DEGRADED_FOR, MAX_OPEN_SPANS, Queue, first_answer_patience};
use crate::convert::{Conventions, proto_span, span_data, span_parts};
use crate::export::Shipped;
use crate::export::{Delivery, Exporter, Payload};
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
    /// The session id of each open prompt trace, put on every span of the trace
    /// (`gen_ai.conversation.id`: backends group sessions by it on every span, not the root).
    pub(super) conversations: HashMap<pi_observe_core::TraceId, pi_observe_core::Value>,
    pub(super) batch: Batch,
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

    fn is_empty(&self) -> bool {
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
    fn take(&mut self) -> Batch {
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
            conversations: HashMap::new(),
            batch,
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
            let (controls, closed) = {
                let mut state = self.queue.lock();
                while state.records.len() < self.queue.wake_at && state.control.is_empty() && !state.closed {
                    let now = Instant::now();
                    // Records waiting are paired (and encoded) every `DRAIN_INTERVAL`, so that
                    // little is left for the exit; with none, the first one wakes the worker.
                    let drain = if state.records.is_empty() { None } else { Some(next_drain) };
                    let wake = next_export.min(next_metrics).min(drain.unwrap_or(next_export));
                    if now >= wake {
                        break;
                    }
                    state.worker_idle = drain.is_none();
                    state = self
                        .queue
                        .wake
                        .wait_timeout(state, wake - now)
                        .map(|(s, _)| s)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                state.worker_idle = false;
                std::mem::swap(&mut state.records, &mut records);
                (std::mem::take(&mut state.control), state.closed)
            };
            next_drain = Instant::now() + DRAIN_INTERVAL;
            for event in records.drain(..) {
                self.record(event);
                if self.batch.len() >= self.batch_size {
                    self.export(&runtime, Instant::now() + self.timeout);
                }
            }
            let now = Instant::now();
            if now >= next_export {
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

    /// Takes the answer to the backfill's question, waiting for it as long as the link deserves:
    /// answered, the receiver's answer time is known; not answered in time (or refused), the
    /// receiver is taken as down for a while and the batches go straight to the spool.
    fn settle_question(&mut self) {
        let Some(question) = self.question.take() else { return };
        match question.answer(&self.counters) {
            Some((Delivery::Exported, took)) => {
                let took = took.as_micros().min(u128::from(u64::MAX)) as u64;
                self.counters.slowest_answer_micros.fetch_max(took.max(1), Relaxed);
            }
            Some((Delivery::Failed(why), _)) => self.degrade(why),
            None => self.degrade("no answer to the run's first export in time: taken as stalled".into()),
            // Refused for what it says (auth, format), or not asked: the batches will say it.
            Some(_) => {}
        }
    }

    /// The receiver failed for good (`why`): batches go straight to the spool for a while,
    /// twice as long after each failure in a row.
    fn degrade(&mut self, why: String) {
        self.degraded_until = Some(Instant::now() + self.degraded_for);
        self.degraded_for = (self.degraded_for * 2).min(MAX_DEGRADED_FOR);
        self.degraded_why = Some(why);
    }

    /// Exports open spans (as incomplete), the last batch and the metrics, within `deadline`.
    fn finish(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        let leftover = std::mem::take(&mut self.queue.lock().records);
        for event in leftover {
            self.record(event);
        }
        let now = SystemTime::now();
        for (_, (start, events)) in std::mem::take(&mut self.open) {
            self.batch.push(&start, None, &events, now, self.conventions, &self.scope);
        }
        self.export(runtime, deadline);
        self.export_metrics(runtime, deadline);
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
                if self.traces_off || !self.sampled(&event) {
                    self.counters.sampled_out.fetch_add(1, Relaxed);
                } else if self.open.len() >= MAX_OPEN_SPANS {
                    self.counters.dropped_queue_full.fetch_add(1, Relaxed);
                    self.hub.record_dropped(DropReason::QueueFull, 1);
                } else {
                    let session = event.payload.get(pi_observe_core::names::SESSION_ID);
                    if let Some(id) = session.filter(|_| event.name == pi_observe_core::names::AGENT_PROMPT)
                        && self.conversations.len() < MAX_OPEN_SPANS
                    {
                        self.conversations.insert(event.trace_id, id.clone());
                    }
                    self.open.insert(span, (event, Vec::new()));
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
                }
            }
            EventKind::Event => {
                if let Some((_, events)) = self.open.get_mut(&span) {
                    events.push(event);
                }
            }
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

    /// `deadline`, or shutdown's if that is earlier.
    fn cut_off(&self, deadline: Instant) -> Instant {
        let cut_off = *self.counters.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner());
        cut_off.map_or(deadline, |d| deadline.min(d))
    }

    /// Runs one export, cut short when shutdown's deadline (or, with a spool, a flush's) passes
    /// — at once when shutting down and the receiver refuses connections: it will not come back
    /// before the exit.
    fn attempt(
        &self,
        runtime: &tokio::runtime::Runtime,
        (deadline, first_answer): (Instant, bool),
        export: impl std::future::Future<Output = Delivery>,
    ) -> Delivery {
        let counters = &self.counters;
        let started = Instant::now();
        runtime.block_on(async {
            // Before the receiver's first answer of the run (with a spool), a stalled receiver
            // is told from a slow one by how long a connection to it takes, probed once (while
            // the export goes on) if the export outlasts the least patience.
            let stalled = async {
                if !first_answer {
                    return std::future::pending().await;
                }
                // A receiver that answers within the least patience never costs a probe.
                tokio::time::sleep_until((started + first_answer_patience(Some(Duration::ZERO))).min(deadline).into())
                    .await;
                let connect_time = match self.connect_time.get() {
                    Some(known) => known,
                    None => {
                        let probed = self.exporter.connect_time().await;
                        self.connect_time.set(Some(probed));
                        probed
                    }
                };
                let by = started + first_answer_patience(connect_time);
                tokio::time::sleep_until(by.min(deadline).into()).await;
                // While exiting, the exit's own patience (200 ms by default) decides instead:
                // a last batch is not cut sooner than before.
                if counters.link.closing.load(Relaxed) {
                    std::future::pending::<()>().await;
                }
            };
            let cut = async {
                loop {
                    let hurry = counters.hurry.notified();
                    tokio::pin!(hurry);
                    hurry.as_mut().enable();
                    let shutdown = *counters.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner());
                    if shutdown.is_some() && counters.link.unreachable.load(Relaxed) {
                        return;
                    }
                    let flush_by = *counters.flush_by.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(by) = shutdown.into_iter().chain(flush_by).min() {
                        tokio::time::sleep_until(by.min(deadline).into()).await;
                        return;
                    }
                    hurry.await;
                }
            };
            tokio::select! {
                delivery = export => delivery,
                () = stalled => Delivery::Failed("no answer to the run's first export in time: taken as stalled".into()),
                () = cut => Delivery::Failed(if counters.link.unreachable.load(Relaxed) {
                    "not sent at the exit: the receiver refused connections".into()
                } else {
                    "shutdown deadline passed".into()
                }),
            }
        })
    }

    /// Sends `payload` until `deadline` (cut short when shutdown's deadline passes); what fails
    /// with a retryable outcome is spooled when there is a spool.
    fn ship(&mut self, runtime: &tokio::runtime::Runtime, payload: &Payload, deadline: Instant) -> Shipped {
        self.settle_question();
        let deadline = self.cut_off(deadline);
        let link = &self.counters.link;
        // A receiver that failed recently, or refuses connections while we exit, is not tried.
        let skip = self.spool.is_some()
            && (self.degraded_until.is_some_and(|until| Instant::now() < until)
                || (link.closing.load(Relaxed) && link.unreachable.load(Relaxed)));
        let first_answer = self.spool.is_some() && self.counters.slowest_answer_micros.load(Relaxed) == 0;
        let started = Instant::now();
        let delivery = if skip {
            Delivery::Failed(match &self.degraded_why {
                Some(why) => format!("receiver unavailable: {why}"),
                None => "receiver unavailable".into(),
            })
        } else {
            self.attempt(runtime, (deadline, first_answer), self.exporter.send(payload, deadline))
        };
        match delivery {
            Delivery::Exported => {
                let took = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
                self.counters.slowest_answer_micros.fetch_max(took.max(1), Relaxed);
                self.degraded_until = None;
                self.degraded_for = DEGRADED_FOR;
                Shipped::Delivered
            }
            Delivery::Failed(why) => {
                self.exporter.note_unsent(payload, &why);
                if self.spool.is_none() {
                    return Shipped::Lost(Delivery::Failed(why));
                }
                if !skip && !self.counters.link.closing.load(Relaxed) {
                    self.degrade(why.clone());
                }
                let Some(spool) = &self.spool else { return Shipped::Lost(Delivery::Failed(why)) };
                let (meta, body) = self.exporter.spool_batch(payload);
                match spool.write(&meta, &body) {
                    Ok(()) => Shipped::Spooled,
                    Err(_) => Shipped::Lost(Delivery::Failed(why)),
                }
            }
            other => Shipped::Lost(other),
        }
    }

    fn export_metrics(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        if self.metrics_stopped {
            return;
        }
        let c = &self.counters;
        let spans = [
            ("exported", c.exported.load(Relaxed)),
            ("spooled", c.spooled.load(Relaxed)),
            ("dropped.queue_full", c.dropped_queue_full.load(Relaxed)),
            ("dropped.export_failed", c.dropped_failed.load(Relaxed)),
            ("dropped.rejected", c.dropped_rejected.load(Relaxed)),
            ("dropped.unauthorized", c.dropped_unauthorized.load(Relaxed)),
            ("dropped.shutdown", c.dropped_shutdown.load(Relaxed)),
        ];
        let hub = self.hub.hub().map(|h| h.stats());
        let spool = self.spool.as_ref().map(|s| s.stats());
        let from_spool = c.from_spool.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(metrics) = &mut self.metrics else { return };
        for (name, attrs, value) in crate::self_metrics::points(hub.as_ref(), &spans, spool.as_ref(), &from_spool) {
            metrics.set(name, attrs, value);
        }
        let Some(request) = metrics.request(&self.exporter.proto_resource(), SystemTime::now()) else { return };
        let payload = self.exporter.metrics_payload(request);
        let shipped = self.ship(runtime, &payload, deadline);
        self.metrics_stopped = self.counters.count_signal(0, "metrics", shipped);
    }

    fn export(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        self.export_logs(runtime, deadline);
        self.export_spans(runtime, deadline);
    }

    fn export_logs(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        let Some(logs) = &mut self.logs else { return };
        if logs.is_empty() {
            return;
        }
        let records = std::mem::take(logs);
        if self.logs_stopped {
            return;
        }
        let payload = self.exporter.logs_payload(records);
        let shipped = self.ship(runtime, &payload, deadline);
        self.logs_stopped = self.counters.count_signal(1, "logs", shipped);
    }

    fn export_spans(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        if self.batch.is_empty() {
            return;
        }
        let spans = self.batch.take();
        let n = spans.len() as u64;
        if self.stopped {
            self.counters.dropped_unauthorized.fetch_add(n, Relaxed);
            self.hub.record_dropped(DropReason::Rejected, n);
            return;
        }
        let deadline = self.cut_off(deadline);
        let delivery = match spans {
            Batch::Sdk(spans) => self.attempt(runtime, (deadline, false), self.exporter.export_sdk(spans, deadline)),
            Batch::Wire(_) | Batch::Encoded(_) => {
                let payload = match spans {
                    Batch::Encoded(spans) => self.exporter.traces_payload_encoded(&spans, &self.scope),
                    Batch::Wire(spans) => self.exporter.traces_payload_wire(spans, &self.scope),
                    Batch::Sdk(_) => unreachable!("matched above"),
                };
                match self.ship(runtime, &payload, deadline) {
                    Shipped::Delivered => Delivery::Exported,
                    Shipped::Spooled => {
                        self.counters.spooled.fetch_add(n, Relaxed);
                        return;
                    }
                    Shipped::Lost(delivery) => delivery,
                }
            }
        };
        match delivery {
            Delivery::Exported => {
                // A receiver may take the request but reject some spans (`partial_success`).
                let rejected = self.counters.link.partially_rejected.swap(0, Relaxed).min(n);
                self.counters.exported.fetch_add(n - rejected, Relaxed);
                if rejected > 0 {
                    self.counters.dropped_rejected.fetch_add(rejected, Relaxed);
                    self.hub.record_dropped(DropReason::Rejected, rejected);
                }
            }
            Delivery::Failed(_) if Instant::now() >= deadline => {
                self.counters.dropped_shutdown.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Shutdown, n);
            }
            Delivery::Failed(_) => {
                self.counters.dropped_failed.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::ExportFailed, n);
            }
            Delivery::Rejected(_) => {
                self.counters.dropped_rejected.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
            }
            Delivery::Unauthorized(why) => {
                self.stopped = true;
                self.counters.dropped_unauthorized.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
                self.counters.stopped("traces", &why);
            }
            Delivery::Unsupported(why) => {
                self.stopped = true;
                self.counters.dropped_rejected.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
                self.counters.unsupported("traces", &why);
            }
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
