//! What the OTLP pipeline counts: its live counters (shared by the queue, the worker, the
//! exporter and the spool's background delivery) and the snapshot users read.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) started: AtomicU64,
    pub(crate) exported: AtomicU64,
    pub(crate) sampled_out: AtomicU64,
    pub(crate) dropped_queue_full: AtomicU64,
    pub(crate) dropped_failed: AtomicU64,
    pub(crate) dropped_rejected: AtomicU64,
    pub(crate) dropped_unauthorized: AtomicU64,
    pub(crate) dropped_shutdown: AtomicU64,
    pub(crate) spooled: AtomicU64,
    /// Batches and spans of earlier runs delivered from the spool by this process.
    pub(crate) from_spool: Mutex<pi_observe_spool::SpoolDelivery>,
    pub(crate) diagnostics: Mutex<Vec<String>>,
    /// Set by `shutdown`: no export may run past it, including one already in flight.
    pub(crate) shutdown_deadline: Mutex<Option<Instant>>,
    /// With a spool, set by `flush`: an export still running then is cut and spooled, so a
    /// stalled receiver cannot hold the caller (cleared when the flush is done).
    pub(crate) flush_by: Mutex<Option<Instant>>,
    /// The slowest export the receiver answered this run, in microseconds (0: none yet) — how
    /// long a flush with a spool lets an export run before taking the receiver as stalled.
    pub(crate) slowest_answer_micros: AtomicU64,
    /// Woken when `shutdown_deadline` or `flush_by` is set.
    pub(crate) hurry: tokio::sync::Notify,
    /// The exporter's view of its receiver (shared with it).
    pub(crate) link: Arc<crate::export::LinkState>,
    /// What became of the metrics and the logs exports (`[metrics, logs]`).
    pub(crate) signals: Mutex<[SignalCounts; 2]>,
}

/// What became of one signal's exports (requests, not items).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SignalCounts {
    /// Taken by the receiver.
    pub delivered: u64,
    /// Written to the spool for a later run.
    pub spooled: u64,
    /// Neither.
    pub not_delivered: u64,
    /// The receiver takes no such signal (HTTP 404/405/415, gRPC `Unimplemented`): not sent
    /// again this run.
    pub unsupported: bool,
}

impl SignalCounts {
    /// Anything was tried.
    pub fn any(&self) -> bool {
        self.delivered + self.spooled + self.not_delivered > 0 || self.unsupported
    }
}

/// What the exporter did, in spans. `spans_started = spans_exported + spans_spooled +
/// spans_dropped() + spans_sampled_out + spans still open`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Start records received.
    pub spans_started: u64,
    /// Spans accepted by the receiver.
    pub spans_exported: u64,
    /// Spans not kept by the sampler (or not exported at all: `OTEL_TRACES_EXPORTER=none`).
    pub spans_sampled_out: u64,
    /// Dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Dropped after retries failed (network, 5xx, 429, timeouts).
    pub dropped_failed: u64,
    /// Dropped because the receiver refused them (4xx).
    pub dropped_rejected: u64,
    /// Dropped because the receiver said 401/403 (export stopped).
    pub dropped_unauthorized: u64,
    /// Dropped because shutdown's deadline passed.
    pub dropped_shutdown: u64,
    /// Not delivered now but written to the spool, for a later run to deliver.
    pub spans_spooled: u64,
    /// What this process delivered from the spool (batches earlier runs could not deliver).
    pub from_spool: pi_observe_spool::SpoolDelivery,
    /// One line per distinct problem worth telling the user (e.g. 401 once).
    pub diagnostics: Vec<String>,
    /// Why the last batch that could not be delivered failed (e.g. connection refused).
    pub last_error: Option<String>,
    /// The metrics exports.
    pub metrics: SignalCounts,
    /// The logs exports.
    pub logs: SignalCounts,
}

impl Counters {
    /// Resolves once `by` names an instant and that instant has passed; `by` is asked now and
    /// again each time `hurry` is notified (a shutdown or a flush began).
    pub(crate) async fn hurried_until(&self, by: impl Fn(&Counters) -> Option<Instant>) {
        loop {
            let hurry = self.hurry.notified();
            tokio::pin!(hurry);
            hurry.as_mut().enable();
            if let Some(by) = by(self) {
                tokio::time::sleep_until(by.into()).await;
                return;
            }
            hurry.await;
        }
    }

    /// Counts one metrics (`at` 0) or logs (`at` 1) export; `true` when the signal must stop
    /// (credentials refused, or the backend takes no such signal — said once).
    pub(crate) fn count_signal(&self, at: usize, signal: &str, shipped: crate::export::Shipped) -> bool {
        use crate::export::{Delivery, Shipped};
        let mut signals = self.signals.lock().unwrap_or_else(|e| e.into_inner());
        let counts = &mut signals[at];
        match shipped {
            Shipped::Delivered => counts.delivered += 1,
            Shipped::Spooled => counts.spooled += 1,
            Shipped::Lost(Delivery::Unsupported(why)) => {
                counts.unsupported = true;
                drop(signals);
                self.unsupported(signal, &why);
                return true;
            }
            Shipped::Lost(Delivery::Unauthorized(why)) => {
                counts.not_delivered += 1;
                drop(signals);
                self.stopped(signal, &why);
                return true;
            }
            Shipped::Lost(_) => counts.not_delivered += 1,
        }
        false
    }

    /// Records that `signal` export stopped for good (401/403): one diagnostic line.
    pub(crate) fn stopped(&self, signal: &str, why: &str) {
        self.diagnostics
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(format!("OTLP {signal} export stopped: {why} (check the credentials in the OTLP headers)"));
    }

    /// The endpoint of `signal` answered that it takes no such signal (HTTP 404/405/415, gRPC
    /// `Unimplemented`): said once, with how to stop sending it; the other signals carry on.
    pub(crate) fn unsupported(&self, signal: &str, why: &str) {
        let off = match signal {
            "metrics" => "OTEL_METRICS_EXPORTER=none or telemetry.sinks.otlp.metrics: false",
            "logs" => "OTEL_LOGS_EXPORTER=none or telemetry.sinks.otlp.logs: false",
            _ => "OTEL_TRACES_EXPORTER=none, or the right traces endpoint",
        };
        self.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
            "OTLP {signal}: this backend takes no {signal} ({why}); not sent again this run (turn them off: {off})"
        ));
    }
}

impl ExportStats {
    /// All drops.
    pub fn spans_dropped(&self) -> u64 {
        self.dropped_queue_full
            + self.dropped_failed
            + self.dropped_rejected
            + self.dropped_unauthorized
            + self.dropped_shutdown
    }
}
