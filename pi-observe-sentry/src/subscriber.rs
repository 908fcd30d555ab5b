//! The Sentry subscriber: buffers each trace's spans and sends the trace as one transaction when
//! its root settles; `error` records become error events, `event` records breadcrumbs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use pi_observe_core::{
    DropReason, EventKind, HubSlot, ObsEvent, Observability, SpanId, Subscriber, SubscriberError, TraceId,
};
use sentry::protocol::Breadcrumb;

use crate::config::{ConfigError, SentryConfig};
use crate::convert::{self, SpanRecords, TransactionParts};

/// Traces buffered at once; a new trace beyond this is dropped (counted).
const MAX_OPEN_TRACES: usize = 1024;
/// Spans kept per trace; more are dropped (counted).
const MAX_SPANS_PER_TRACE: usize = 1000;
/// Breadcrumbs kept per trace (the newest win), like Sentry's default `max_breadcrumbs`.
const MAX_BREADCRUMBS: usize = 100;

struct TraceBuffer {
    root: Option<SpanId>,
    /// The spans in the order they started (those in `written` are no longer in `spans`).
    order: Vec<SpanId>,
    /// The spans still open, and the root.
    spans: HashMap<SpanId, SpanRecords>,
    /// The root's descendants that ended, written as the transaction's spans as they ended
    /// ([`convert::write_span`]): the transaction at the root's end only joins them.
    written: Vec<u8>,
    /// How many spans `written` holds.
    written_spans: usize,
    /// The point events of the trace, as breadcrumbs.
    breadcrumbs: convert::Breadcrumbs,
}

impl Default for TraceBuffer {
    fn default() -> Self {
        TraceBuffer {
            root: None,
            order: Vec::new(),
            spans: HashMap::new(),
            written: Vec::new(),
            written_spans: 0,
            breadcrumbs: convert::Breadcrumbs::new(MAX_BREADCRUMBS),
        }
    }
}

/// What the subscriber sent and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentryStats {
    /// Transactions handed to the Sentry client.
    pub transactions: u64,
    /// Error events handed to the Sentry client.
    pub errors: u64,
    /// Envelopes (transactions and error events) the server accepted (2xx).
    pub delivered: u64,
    /// Envelopes that did not reach the server: refused connection, timeout, error status, or a
    /// full queue.
    pub not_delivered: u64,
    /// Envelopes written to the spool for a later run instead (not in `not_delivered`).
    pub spooled: u64,
    /// What this process delivered from the spool (envelopes earlier runs could not deliver).
    pub from_spool: pi_observe_spool::SpoolDelivery,
    /// Why the last envelope that was not delivered (or was spooled) failed.
    pub last_error: Option<String>,
    /// Traces not sent because of the sample rate.
    pub sampled_out: u64,
    /// Spans dropped because too many traces or spans were open.
    pub spans_dropped: u64,
}

#[derive(Default)]
struct Counters {
    transactions: AtomicU64,
    errors: AtomicU64,
    sampled_out: AtomicU64,
    spans_dropped: AtomicU64,
}

/// Sends contract events to Sentry. `pi.agent.prompt` (any root operation) becomes a
/// transaction whose spans are its descendants at their true depth, with the contract's trace
/// id, span ids, parents and timestamps; ops follow Sentry's AI agent monitoring
/// (`gen_ai.invoke_agent`, `gen_ai.chat`, `gen_ai.execute_tool`). `error` records become error
/// events linked to the trace (with the breadcrumbs so far), `event` records breadcrumbs, the
/// attribution context the Sentry user (`userId`) and tags.
///
/// `on_event` never blocks on I/O: each span is written as it ends, and the transaction (the root
/// and those spans joined) is built on the transport's sender thread and queued there.
pub struct SentrySubscriber {
    client: Arc<sentry::Client>,
    config: SentryConfig,
    traces: Mutex<HashMap<TraceId, TraceBuffer>>,
    counters: Counters,
    delivery: Arc<crate::transport::DeliveryCounters>,
    spool: Option<Arc<pi_observe_spool::Spool>>,
    hub: HubSlot,
    /// The client closed in time (its transport thread has ended).
    closed: AtomicBool,
    /// Pi's transport, which builds transactions on its sender thread.
    transport: Arc<crate::transport::TransportHandle>,
}

impl std::fmt::Debug for SentrySubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentrySubscriber").field("stats", &self.stats()).finish()
    }
}

impl SentrySubscriber {
    /// A subscriber sending to `config.dsn`; drops are also counted on the hub it is
    /// subscribed to.
    pub fn new(config: SentryConfig) -> Result<Arc<Self>, ConfigError> {
        let delivery = Arc::new(crate::transport::DeliveryCounters::default());
        let spool = config.spool.clone().map(|c| Arc::new(pi_observe_spool::Spool::new(c)));
        let transport = Arc::new(crate::transport::TransportHandle::default());
        let client = Arc::new(sentry::Client::from_config(config.client_options(
            delivery.clone(),
            spool.clone(),
            transport.clone(),
        )?));
        Ok(Arc::new(SentrySubscriber {
            client,
            config,
            spool,
            traces: Mutex::new(HashMap::new()),
            counters: Counters::default(),
            delivery,
            hub: HubSlot::new(),
            closed: AtomicBool::new(false),
            transport,
        }))
    }

    /// What this process did with the spool (`None` without one).
    pub fn spool_stats(&self) -> Option<pi_observe_spool::SpoolStats> {
        self.spool.as_ref().map(|s| s.stats())
    }

    /// Counts so far.
    pub fn stats(&self) -> SentryStats {
        let c = &self.counters;
        SentryStats {
            transactions: c.transactions.load(Relaxed),
            errors: c.errors.load(Relaxed),
            delivered: self.delivery.delivered.load(Relaxed),
            not_delivered: self.delivery.failed.load(Relaxed) + self.delivery.dropped_queue_full.load(Relaxed),
            spooled: self.delivery.spooled.load(Relaxed),
            from_spool: self.delivery.from_spool.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            last_error: self.delivery.last_error(),
            sampled_out: c.sampled_out.load(Relaxed),
            spans_dropped: c.spans_dropped.load(Relaxed),
        }
    }

    fn sampled(&self, trace: TraceId) -> bool {
        let rate = self.config.traces_sample_rate.unwrap_or(1.0);
        if rate >= 1.0 {
            return true;
        }
        let bytes = trace.to_bytes();
        let head =
            u64::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]]);
        (head as f64 / u64::MAX as f64) < rate
    }

    fn drop_spans(&self, count: u64) {
        self.counters.spans_dropped.fetch_add(count, Relaxed);
        self.hub.record_dropped(DropReason::QueueFull, count);
    }

    /// Sends the traces still open as they are, their open spans marked incomplete.
    fn send_open_traces(&self) {
        let open: Vec<(TraceId, TraceBuffer)> = self.traces.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        let now = SystemTime::now();
        for (trace, buffer) in open {
            self.send_trace(trace, buffer, now);
        }
    }

    /// Sends a finished (or, at shutdown, still open) trace as a transaction: assembled and
    /// serialized on the transport's sender thread when pi's transport is in use, here otherwise.
    fn send_trace(&self, trace: TraceId, buffer: TraceBuffer, cut_at: SystemTime) {
        if !buffer.root.is_some_and(|id| buffer.spans.contains_key(&id)) {
            return;
        }
        if !self.sampled(trace) {
            self.counters.sampled_out.fetch_add(1, Relaxed);
            return;
        }
        let config = &self.config;
        let (tag_keys, environment, release) =
            (config.tag_keys.clone(), config.environment.clone(), config.release.clone());
        let build: crate::transport::Deferred = Box::new(move || {
            let root = buffer.root.and_then(|id| buffer.spans.get(&id))?;
            let children: Vec<&SpanRecords> = buffer
                .order
                .iter()
                .filter(|id| Some(**id) != buffer.root)
                .filter_map(|id| buffer.spans.get(id))
                .collect();
            let parts = TransactionParts {
                root,
                written: &buffer.written,
                children,
                breadcrumbs: &buffer.breadcrumbs,
                tag_keys: tag_keys.as_deref(),
                environment: environment.as_deref(),
                release: release.as_deref(),
                cut_at,
            };
            convert::transaction_bytes(&parts).and_then(|(id, body)| raw_envelope("transaction", &id, body))
        });
        self.counters.transactions.fetch_add(1, Relaxed);
        if let Err(build) = self.transport.send_deferred(build) {
            // A transport supplied in the configuration: built here and handed to the client.
            match build().map(sentry::Envelope::from_bytes_raw) {
                Some(Ok(envelope)) => self.client.send_envelope(envelope),
                _ => {
                    self.counters.transactions.fetch_sub(1, Relaxed);
                }
            }
        }
    }

    fn send_error(&self, record: &ObsEvent, breadcrumbs: &[Breadcrumb]) {
        let event = convert::error_event(
            record,
            breadcrumbs,
            self.config.tag_keys.as_deref(),
            self.config.environment.as_deref(),
            self.config.release.as_deref(),
        );
        self.client.capture_event(event, None);
        self.counters.errors.fetch_add(1, Relaxed);
    }
}

/// The bytes of one envelope with one item of `kind` and its serialized `payload`, in the
/// payload's own buffer (the typed transaction has no breadcrumbs field, so transactions are sent
/// as raw items). The headers go in front of the payload where it is: a transaction is ~100 KB,
/// and a second buffer for it cost the exit fresh pages and a copy.
fn raw_envelope(kind: &str, event_id: &str, mut payload: Vec<u8>) -> Option<Vec<u8>> {
    let mut headers = Vec::with_capacity(128);
    serde_json::to_writer(&mut headers, &serde_json::json!({ "event_id": event_id })).ok()?;
    headers.push(b'\n');
    serde_json::to_writer(&mut headers, &serde_json::json!({ "type": kind, "length": payload.len() })).ok()?;
    headers.push(b'\n');
    payload.push(b'\n');
    payload.splice(0..0, headers);
    Some(payload)
}

impl Subscriber for SentrySubscriber {
    fn on_subscribe(&self, hub: &Observability) {
        self.hub.set(hub);
    }

    fn on_event(&self, event: &ObsEvent) {
        let Some(span) = event.span_id else { return };
        let mut traces = self.traces.lock().unwrap_or_else(|e| e.into_inner());
        match event.kind {
            EventKind::Start => {
                if !traces.contains_key(&event.trace_id) && traces.len() >= MAX_OPEN_TRACES {
                    drop(traces);
                    return self.drop_spans(1);
                }
                let buffer = traces.entry(event.trace_id).or_default();
                if buffer.spans.len() + buffer.written_spans >= MAX_SPANS_PER_TRACE {
                    drop(traces);
                    return self.drop_spans(1);
                }
                let parent_known = event.parent_span_id.is_some_and(|p| buffer.spans.contains_key(&p));
                if buffer.root.is_none() && !parent_known {
                    buffer.root = Some(span);
                }
                buffer.order.push(span);
                buffer.spans.insert(span, SpanRecords { start: event.clone(), end: None });
            }
            EventKind::End | EventKind::Error => {
                let Some(buffer) = traces.get_mut(&event.trace_id) else { return };
                if buffer.root != Some(span) && self.sampled(event.trace_id) {
                    // A descendant that ended: written now, not when its root ends (in `pi` this
                    // runs on the sink's own thread, and the root's end is on the exit's path).
                    if let Some(mut records) = buffer.spans.remove(&span) {
                        records.end = Some(event.clone());
                        if convert::write_span(&mut buffer.written, &records) {
                            buffer.written_spans += 1;
                        }
                    }
                } else if let Some(records) = buffer.spans.get_mut(&span) {
                    records.end = Some(event.clone());
                }
                let breadcrumbs: Vec<Breadcrumb> =
                    if event.kind == EventKind::Error { buffer.breadcrumbs.to_vec() } else { Vec::new() };
                let finished = (buffer.root == Some(span)).then(|| traces.remove(&event.trace_id)).flatten();
                drop(traces);
                if event.kind == EventKind::Error {
                    self.send_error(event, &breadcrumbs);
                }
                if let Some(buffer) = finished {
                    self.send_trace(event.trace_id, buffer, event.timestamp.to_system_time());
                }
            }
            EventKind::Event => {
                if let Some(buffer) = traces.get_mut(&event.trace_id) {
                    buffer.breadcrumbs.push(event);
                }
            }
        }
    }

    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        match within(timeout, &self.client, move |client| client.flush(Some(timeout))) {
            Some(true) => Ok(()),
            _ => Err(SubscriberError::Timeout),
        }
    }

    fn begin_shutdown(&self, _timeout: Duration) -> bool {
        self.send_open_traces();
        // Pi's transport has been delivering since each transaction was queued, and its
        // shutdown never blocks past the timeout it is given: `shutdown` waits for it on the
        // caller's thread. A transport supplied in the configuration promises neither.
        self.config.transport.is_none()
    }

    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        self.send_open_traces();
        let closed = if self.config.transport.is_none() {
            self.client.close(Some(timeout))
        } else {
            within(timeout, &self.client, move |client| client.close(Some(timeout))) == Some(true)
        };
        if closed {
            self.closed.store(true, Relaxed);
            Ok(())
        } else {
            Err(SubscriberError::Timeout)
        }
    }
}

/// Runs `f` on a helper thread and waits at most `deadline`: the client's flush (and a
/// configured transport's close) can block past their own timeout when the transport queue is
/// full of uploads to a silent server. On a timeout the helper is left to finish on its own.
fn within<T: Send + 'static>(
    deadline: Duration,
    client: &Arc<sentry::Client>,
    f: impl FnOnce(&sentry::Client) -> T + Send + 'static,
) -> Option<T> {
    let (done, result) = std::sync::mpsc::sync_channel(1);
    let client = client.clone();
    std::thread::Builder::new()
        .name("pi-observe-sentry".into())
        .spawn(move || {
            let _ = done.send(f(&client));
        })
        .ok()?;
    result.recv_timeout(deadline).ok()
}

impl Drop for SentrySubscriber {
    fn drop(&mut self) {
        if self.closed.load(Relaxed) {
            // Closed in time: its transport thread has ended, nothing to wait for.
            return;
        }
        // Dropping the last client handle joins its transport thread, which may be stuck on a
        // silent server: let that happen off the caller's thread.
        let client = self.client.clone();
        let _ = std::thread::Builder::new().name("pi-observe-sentry-drop".into()).spawn(move || drop(client));
    }
}
