//! The HTTP transport: one sender thread behind a bounded queue that counts what the server
//! accepted and what it did not, so the exit summary says delivered or not, truthfully.
//! Nothing is retried now: a refused connection or an error status is known at once, and a
//! silent server costs at most the request timeout per envelope, bounded by the caller's flush
//! deadline. With a spool, an envelope that failed for a reason that may pass (no connection,
//! timeout, 408/429/5xx) — or was still queued when shutdown's patience ran out — is written to
//! it for a later run, and earlier runs' envelopes are delivered in the background.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pi_observe_spool::{Attempt, BatchMeta, Spool, SpoolDelivery};
use sentry::types::Dsn;
use sentry::{Envelope, Transport, TransportFactory, TransportOptions};

mod capture;
mod probe;
mod spooled;

pub use capture::EnvelopeCapture;
pub(crate) use probe::probe;
pub(crate) use spooled::deliver_spooled;
use spooled::drain_in_background;

/// The sink name spooled envelopes carry.
const SPOOL_SINK: &str = "sentry";

/// After an envelope failed, later ones go straight to the spool for this long.
const DEGRADED_FOR: Duration = Duration::from_secs(30);

/// Default number of envelopes waiting to be sent.
const DEFAULT_CAPACITY: usize = 30;

/// In a backfill, how long the server may take to answer the run's first envelope before it is
/// taken as stalled (a loopback server: [`LOOPBACK_FIRST_ANSWER_PATIENCE`]).
pub const FIRST_ANSWER_PATIENCE: Duration = Duration::from_secs(1);

/// In a backfill, the first answer's patience for a server on this machine: its round trip is
/// nil, and an envelope takes it milliseconds.
const LOOPBACK_FIRST_ANSWER_PATIENCE: Duration = Duration::from_millis(100);

/// Delivery outcomes, in envelopes (one per transaction or error event).
#[derive(Debug, Default)]
pub(crate) struct DeliveryCounters {
    pub(crate) delivered: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped_queue_full: AtomicU64,
    /// Envelopes written to the spool instead.
    pub(crate) spooled: AtomicU64,
    last_error: Mutex<Option<String>>,
    /// What this process delivered from the spool.
    pub(crate) from_spool: Mutex<SpoolDelivery>,
}

impl DeliveryCounters {
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn failed(&self, why: String) {
        self.failed.fetch_add(1, Relaxed);
        self.note(why);
    }

    fn note(&self, why: String) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// Builds [`HttpTransport`]s that report into shared counters.
pub(crate) struct CountingHttp {
    pub(crate) timeout: Duration,
    pub(crate) counters: Arc<DeliveryCounters>,
    pub(crate) spool: Option<Arc<Spool>>,
    pub(crate) exit_patience: Duration,
    /// A backfill ([`crate::SentryConfig::backfill`]).
    pub(crate) backfill: bool,
    /// Where the subscriber finds the transport built.
    pub(crate) handle: Arc<TransportHandle>,
}

impl TransportFactory for CountingHttp {
    fn create_transport_with_options(&self, options: TransportOptions) -> Arc<dyn Transport> {
        let transport = Arc::new(HttpTransport::start(&options, self));
        *self.handle.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(&transport));
        transport
    }
}

/// Work that becomes a serialized envelope on the sender thread (a transaction assembled from a
/// trace's records), so the thread that ended the trace does not pay for building and
/// serializing it.
pub(crate) type Deferred = Box<dyn FnOnce() -> Option<Vec<u8>> + Send>;

/// What the sender thread is given.
enum Outgoing {
    Ready(Box<Envelope>),
    Deferred(Deferred),
}

/// The subscriber's way to pi's HTTP transport once the client has built it.
#[derive(Default)]
pub(crate) struct TransportHandle(Mutex<Option<std::sync::Weak<HttpTransport>>>);

impl TransportHandle {
    /// Queues `build` for the sender thread, counted like any envelope; gives it back when pi's
    /// transport is not in use (a configured transport) or is gone (the client closed).
    pub(crate) fn send_deferred(&self, build: Deferred) -> Result<(), Deferred> {
        let transport = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(std::sync::Weak::upgrade);
        match transport {
            Some(transport) => {
                transport.enqueue(Outgoing::Deferred(build));
                Ok(())
            }
            None => Err(build),
        }
    }
}

/// Shutdown's news for the sender thread: from when on an envelope is spooled, not waited for.
#[derive(Default)]
struct Closing {
    deadline: Mutex<Option<Instant>>,
    begun: tokio::sync::Notify,
}

impl Closing {
    fn begin(&self, deadline: Instant) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = Some(deadline);
        self.begun.notify_waiters();
    }

    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves when shutdown has begun and its patience has run out.
    async fn expired(&self) {
        loop {
            let begun = self.begun.notified();
            tokio::pin!(begun);
            begun.as_mut().enable();
            if let Some(deadline) = self.deadline() {
                tokio::time::sleep_until(deadline.into()).await;
                return;
            }
            begun.await;
        }
    }
}

/// Envelopes queued and not yet answered, with a condition to wait for zero.
#[derive(Default)]
struct Pending {
    count: Mutex<usize>,
    zero: Condvar,
}

impl Pending {
    fn add(&self, n: isize) {
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *count = count.saturating_add_signed(n);
        if *count == 0 {
            self.zero.notify_all();
        }
    }

    fn wait_zero(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut count = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *count > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            count = self.zero.wait_timeout(count, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

pub(crate) struct HttpTransport {
    queue: Mutex<Option<SyncSender<Outgoing>>>,
    pending: Arc<Pending>,
    counters: Arc<DeliveryCounters>,
    closing: Arc<Closing>,
    spooling: bool,
    exit_patience: Duration,
    /// A backfill: a full queue waits for room.
    backfill: bool,
    /// Says when the background delivery of earlier runs' envelopes is done.
    draining: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

/// Where envelopes go and how.
pub(crate) struct Target {
    url: String,
    auth: String,
    /// The fingerprint of the DSN's key (the credentials spooled envelopes wait on).
    credentials: String,
    timeout: Duration,
}

impl Target {
    pub(crate) fn new(dsn: &Dsn, user_agent: Option<&str>, timeout: Duration) -> Self {
        Target {
            url: dsn.envelope_api_url().to_string(),
            auth: dsn.to_auth(user_agent).to_string(),
            credentials: pi_observe_spool::fingerprint([("sentry_key", dsn.public_key())]),
            timeout,
        }
    }
}

/// What the sender thread works with.
struct Sender {
    target: Target,
    pending: Arc<Pending>,
    counters: Arc<DeliveryCounters>,
    closing: Arc<Closing>,
    spool: Option<Arc<Spool>>,
    /// In a backfill, how long the server may take to answer its first envelope.
    first_answer_patience: Option<Duration>,
}

impl HttpTransport {
    fn start(options: &TransportOptions, factory: &CountingHttp) -> Self {
        let capacity = options.transport_channel_capacity.map_or(DEFAULT_CAPACITY, |c| c.get());
        let (queue, envelopes) = std::sync::mpsc::sync_channel(capacity);
        let pending = Arc::new(Pending::default());
        let closing = Arc::new(Closing::default());
        let target = Target::new(&options.dsn, Some(&options.user_agent), factory.timeout);
        let first_answer_patience = factory.backfill.then(|| {
            if pi_observe_core::is_loopback_host(options.dsn.host()) {
                LOOPBACK_FIRST_ANSWER_PATIENCE
            } else {
                FIRST_ANSWER_PATIENCE
            }
        });
        let draining = factory.spool.as_ref().and_then(|spool| {
            let target = Target::new(&options.dsn, None, factory.timeout);
            drain_in_background(target, spool.clone(), &factory.counters, closing.clone())
        });
        let sender = Sender {
            target,
            pending: pending.clone(),
            counters: factory.counters.clone(),
            closing: closing.clone(),
            spool: factory.spool.clone(),
            first_answer_patience,
        };
        let started = pi_observe_core::spawn_telemetry_thread("pi-observe-sentry-send", move || sender.run(&envelopes));
        // Without a sender thread every envelope counts as not delivered.
        let queue = started.is_ok().then_some(queue);
        HttpTransport {
            queue: Mutex::new(queue),
            pending,
            counters: factory.counters.clone(),
            closing,
            spooling: factory.spool.is_some(),
            draining: Mutex::new(draining),
            exit_patience: factory.exit_patience,
            backfill: factory.backfill,
        }
    }
}

impl HttpTransport {
    /// Hands `item` to the sender thread without waiting; a full queue (or a closed transport)
    /// drops it and counts it. In a backfill a full queue waits for room: the sender always
    /// gets on (each envelope is answered, cut by the first answer's patience, the request
    /// timeout or the exit's, or skipped while the server is down).
    fn enqueue(&self, item: Outgoing) {
        let Some(queue) = self.queue.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            self.counters.dropped_queue_full.fetch_add(1, Relaxed);
            return;
        };
        self.pending.add(1);
        let sent = if self.backfill {
            queue.send(item).is_ok()
        } else {
            !matches!(queue.try_send(item), Err(TrySendError::Full(_) | TrySendError::Disconnected(_)))
        };
        if !sent {
            self.pending.add(-1);
            self.counters.dropped_queue_full.fetch_add(1, Relaxed);
        }
    }
}

impl Transport for HttpTransport {
    fn send_envelope(&self, envelope: Envelope) {
        self.enqueue(Outgoing::Ready(Box::new(envelope)));
    }

    fn flush(&self, timeout: Duration) -> bool {
        self.pending.wait_zero(timeout)
    }

    fn shutdown(&self, timeout: Duration) -> bool {
        let patience_ends = Instant::now() + self.exit_patience.min(timeout);
        if self.spooling {
            // What the server has not taken by then is spooled, not waited for.
            self.closing.begin(patience_ends);
        }
        let flushed = self.pending.wait_zero(timeout);
        // The background delivery stops after its current envelope: let it finish that one
        // within the same patience (a stalled server costs the exit one patience, not two), so an
        // envelope the server took is also removed from the spool.
        if let Some(draining) = self.draining.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = draining.recv_timeout(patience_ends.saturating_duration_since(Instant::now()));
        }
        // Closing the queue ends the sender thread once it is idle.
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        flushed
    }
}

impl Sender {
    /// Posts each envelope once and counts the answer; spools what failed for a reason that
    /// may pass.
    fn run(self, envelopes: &Receiver<Outgoing>) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
        let client = client(&self.target.url, self.target.timeout);
        let mut degraded_until: Option<Instant> = None;
        // Why the server was taken as down, for the envelopes that skip it.
        let mut degraded_why = String::new();
        // In a backfill, until the server has answered, an envelope waits at most the first
        // answer's patience.
        let mut first_answer = self.first_answer_patience;
        // Envelopes are skipped while the server is down when they are kept for later, or
        // when the caller must not wait for each one (a backfill).
        let may_skip = self.spool.is_some() || self.first_answer_patience.is_some();
        for item in envelopes {
            let encoded = match item {
                Outgoing::Ready(envelope) => {
                    let mut body = Vec::new();
                    envelope.to_writer(&mut body).map(|()| body).map_err(|e| format!("cannot encode envelope: {e}"))
                }
                Outgoing::Deferred(build) => build().ok_or_else(|| "cannot encode envelope".to_owned()),
            };
            // The body is shared, not copied, between the request and the spool.
            let body: Bytes = match encoded {
                Ok(body) => body.into(),
                Err(why) => {
                    self.counters.failed(why);
                    self.pending.add(-1);
                    continue;
                }
            };
            let skip = may_skip && degraded_until.is_some_and(|until| Instant::now() < until);
            let outcome = match (&runtime, &client) {
                _ if skip => Attempt::Failed(format!("receiver unavailable: {degraded_why}")),
                (Ok(runtime), Ok(client)) => runtime.block_on(async {
                    let stalled = async {
                        match first_answer {
                            Some(patience) => tokio::time::sleep(patience).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        outcome = post(client, &self.target, body.clone()) => outcome,
                        () = stalled => Attempt::Failed("no answer to the run's first envelope in time: taken as stalled".into()),
                        () = self.closing.expired() => Attempt::Failed("shutdown deadline passed".into()),
                    }
                }),
                _ => Attempt::Rejected("cannot start the HTTP client".into()),
            };
            if matches!(outcome, Attempt::Delivered | Attempt::Rejected(_) | Attempt::Unauthorized(_)) {
                first_answer = None;
            }
            match outcome {
                Attempt::Delivered => {
                    self.counters.delivered.fetch_add(1, Relaxed);
                    degraded_until = None;
                }
                Attempt::Failed(why) => {
                    if may_skip && self.closing.deadline().is_none() && !skip {
                        degraded_until = Some(Instant::now() + DEGRADED_FOR);
                        degraded_why.clone_from(&why);
                    }
                    self.spool_or_fail(&body, why);
                }
                Attempt::Rejected(why) | Attempt::Unauthorized(why) => self.counters.failed(why),
            }
            self.pending.add(-1);
        }
    }

    fn spool_or_fail(&self, body: &[u8], why: String) {
        let Some(spool) = &self.spool else { return self.counters.failed(why) };
        let meta = BatchMeta::new(SPOOL_SINK, "envelope", &self.target.url, "sentry", 1);
        match spool.write(&meta, body) {
            Ok(()) => {
                self.counters.spooled.fetch_add(1, Relaxed);
                self.counters.note(why);
            }
            Err(_) => self.counters.failed(why),
        }
    }
}

/// The HTTP client for `url`: for a plain `http://` DSN it trusts no certificate (loading the
/// system's roots costs milliseconds at every start and would never be used).
fn client(url: &str, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder().connect_timeout(timeout.min(Duration::from_secs(5))).timeout(timeout);
    if url.starts_with("http://") {
        builder = builder.tls_certs_only(Vec::new());
    }
    builder.build()
}

/// Posts one envelope: the status the server answered, or why there was no answer.
async fn send(client: &reqwest::Client, target: &Target, body: impl Into<reqwest::Body>) -> Result<u16, String> {
    let response = client
        .post(&target.url)
        .header("X-Sentry-Auth", &target.auth)
        .header("content-type", "application/x-sentry-envelope")
        .body(body)
        .send()
        .await;
    response.map(|r| r.status().as_u16()).map_err(|e| {
        let mut cause: &dyn std::error::Error = &e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        format!("{}: {cause}", target.url)
    })
}

/// Posts one envelope: delivered, or why not and whether trying later may help.
async fn post(client: &reqwest::Client, target: &Target, body: impl Into<reqwest::Body>) -> Attempt {
    let status = match send(client, target, body).await {
        Ok(status) => status,
        Err(why) => return Attempt::Failed(why),
    };
    let why = format!("HTTP {status} from {}", target.url);
    match status {
        200..=299 => Attempt::Delivered,
        401 | 403 => Attempt::Unauthorized(why),
        408 | 429 | 500..=599 => Attempt::Failed(why),
        _ => Attempt::Rejected(why),
    }
}
