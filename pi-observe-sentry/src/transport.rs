//! The HTTP transport: one sender thread behind a bounded queue that counts what the server
//! accepted and what it did not, so the exit summary says delivered or not, truthfully.
//! Nothing is retried: a refused connection or an error status is known at once, and a silent
//! server costs at most the request timeout per envelope, bounded by the caller's flush deadline.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sentry::{Envelope, Transport, TransportFactory, TransportOptions};

/// Default number of envelopes waiting to be sent.
const DEFAULT_CAPACITY: usize = 30;

/// Delivery outcomes, in envelopes (one per transaction or error event).
#[derive(Debug, Default)]
pub(crate) struct DeliveryCounters {
    pub(crate) delivered: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) dropped_queue_full: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl DeliveryCounters {
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn failed(&self, why: String) {
        self.failed.fetch_add(1, Relaxed);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }
}

/// Builds [`HttpTransport`]s that report into shared counters.
pub(crate) struct CountingHttp {
    pub(crate) timeout: Duration,
    pub(crate) counters: Arc<DeliveryCounters>,
}

impl TransportFactory for CountingHttp {
    fn create_transport_with_options(&self, options: TransportOptions) -> Arc<dyn Transport> {
        Arc::new(HttpTransport::start(&options, self.timeout, self.counters.clone()))
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

struct HttpTransport {
    queue: Mutex<Option<SyncSender<Envelope>>>,
    pending: Arc<Pending>,
    counters: Arc<DeliveryCounters>,
}

struct Target {
    url: String,
    auth: String,
    timeout: Duration,
}

impl HttpTransport {
    fn start(options: &TransportOptions, timeout: Duration, counters: Arc<DeliveryCounters>) -> Self {
        let capacity = options.transport_channel_capacity.map_or(DEFAULT_CAPACITY, |c| c.get());
        let (queue, envelopes) = std::sync::mpsc::sync_channel(capacity);
        let pending = Arc::new(Pending::default());
        let target = Target {
            url: options.dsn.envelope_api_url().to_string(),
            auth: options.dsn.to_auth(Some(&options.user_agent)).to_string(),
            timeout,
        };
        let (worker_pending, worker_counters) = (pending.clone(), counters.clone());
        let started = std::thread::Builder::new()
            .name("pi-observe-sentry-send".into())
            .spawn(move || send_all(&target, &envelopes, &worker_pending, &worker_counters));
        // Without a sender thread every envelope counts as not delivered.
        let queue = started.is_ok().then_some(queue);
        HttpTransport { queue: Mutex::new(queue), pending, counters }
    }
}

impl Transport for HttpTransport {
    fn send_envelope(&self, envelope: Envelope) {
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let Some(queue) = queue.as_ref() else {
            self.counters.dropped_queue_full.fetch_add(1, Relaxed);
            return;
        };
        self.pending.add(1);
        match queue.try_send(envelope) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.pending.add(-1);
                self.counters.dropped_queue_full.fetch_add(1, Relaxed);
            }
        }
    }

    fn flush(&self, timeout: Duration) -> bool {
        self.pending.wait_zero(timeout)
    }

    fn shutdown(&self, timeout: Duration) -> bool {
        let flushed = self.pending.wait_zero(timeout);
        // Closing the queue ends the sender thread once it is idle.
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        flushed
    }
}

/// The sender thread: posts each envelope once and counts the answer.
fn send_all(target: &Target, envelopes: &Receiver<Envelope>, pending: &Pending, counters: &DeliveryCounters) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let client = reqwest::Client::builder()
        .connect_timeout(target.timeout.min(Duration::from_secs(5)))
        .timeout(target.timeout)
        .build();
    for envelope in envelopes {
        match (&runtime, &client) {
            (Ok(runtime), Ok(client)) => match runtime.block_on(post(client, target, &envelope)) {
                Ok(()) => {
                    counters.delivered.fetch_add(1, Relaxed);
                }
                Err(why) => counters.failed(why),
            },
            _ => counters.failed("cannot start the HTTP client".into()),
        }
        pending.add(-1);
    }
}

async fn post(client: &reqwest::Client, target: &Target, envelope: &Envelope) -> Result<(), String> {
    let mut body = Vec::new();
    envelope.to_writer(&mut body).map_err(|e| format!("cannot encode envelope: {e}"))?;
    let response = client
        .post(&target.url)
        .header("X-Sentry-Auth", &target.auth)
        .header("content-type", "application/x-sentry-envelope")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            let mut cause: &dyn std::error::Error = &e;
            while let Some(next) = cause.source() {
                cause = next;
            }
            format!("{}: {cause}", target.url)
        })?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("HTTP {} from {}", status.as_u16(), target.url)) }
}
