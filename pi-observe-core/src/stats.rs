//! Self-telemetry: what the pipeline did with the events it was given.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Why an event (or a batch of them) did not reach its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// A subscriber panicked while handling it.
    SubscriberPanic,
    /// It was emitted from inside a subscriber on the same thread (a feedback loop).
    Reentrant,
    /// An adapter's bounded queue was full.
    QueueFull,
    /// An exporter gave up after retries (network, 5xx, timeout).
    ExportFailed,
    /// The receiver refused it (4xx other than throttling, 401/403).
    Rejected,
    /// It was still queued when shutdown's deadline passed.
    Shutdown,
}

impl DropReason {
    /// Every reason, in declaration order.
    pub const ALL: [DropReason; 6] = [
        DropReason::SubscriberPanic,
        DropReason::Reentrant,
        DropReason::QueueFull,
        DropReason::ExportFailed,
        DropReason::Rejected,
        DropReason::Shutdown,
    ];

    /// snake_case name, used as a metric attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::SubscriberPanic => "subscriber_panic",
            DropReason::Reentrant => "reentrant",
            DropReason::QueueFull => "queue_full",
            DropReason::ExportFailed => "export_failed",
            DropReason::Rejected => "rejected",
            DropReason::Shutdown => "shutdown",
        }
    }
}

/// Live counters of one hub (all relaxed atomics).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) emitted: AtomicU64,
    pub(crate) delivered: AtomicU64,
    pub(crate) dropped: [AtomicU64; DropReason::ALL.len()],
    pub(crate) subscriber_panics: AtomicU64,
    pub(crate) subscriber_errors: AtomicU64,
    pub(crate) payload_failures: AtomicU64,
    pub(crate) fields_withheld: AtomicU64,
    pub(crate) fields_redacted: AtomicU64,
    pub(crate) fields_dropped: AtomicU64,
    pub(crate) fields_truncated: AtomicU64,
    pub(crate) redactor_failures: AtomicU64,
}

impl Stats {
    pub(crate) fn drop_events(&self, reason: DropReason, count: u64) {
        self.dropped[reason as usize].fetch_add(count, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let mut dropped = [0; DropReason::ALL.len()];
        for (slot, counter) in dropped.iter_mut().zip(&self.dropped) {
            *slot = counter.load(Relaxed);
        }
        StatsSnapshot {
            emitted: self.emitted.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dropped,
            subscriber_panics: self.subscriber_panics.load(Relaxed),
            subscriber_errors: self.subscriber_errors.load(Relaxed),
            payload_failures: self.payload_failures.load(Relaxed),
            fields_withheld: self.fields_withheld.load(Relaxed),
            fields_redacted: self.fields_redacted.load(Relaxed),
            fields_dropped: self.fields_dropped.load(Relaxed),
            fields_truncated: self.fields_truncated.load(Relaxed),
            redactor_failures: self.redactor_failures.load(Relaxed),
        }
    }
}

/// A point-in-time copy of a hub's counters ([`crate::Observability::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Events emitted while at least one subscriber listened.
    pub emitted: u64,
    /// Successful `on_event` calls (one event delivered to two subscribers counts twice).
    pub delivered: u64,
    dropped: [u64; DropReason::ALL.len()],
    /// Subscriber calls (`on_event`, `flush`, `shutdown`) that panicked.
    pub subscriber_panics: u64,
    /// `flush`/`shutdown` calls that returned an error.
    pub subscriber_errors: u64,
    /// Payload builders (closures) that panicked; the operation ran with an empty payload.
    pub payload_failures: u64,
    /// Content and secret fields not exported because the policy does not capture them.
    pub fields_withheld: u64,
    /// Captured fields whose value the secret scrubber or a redactor changed.
    pub fields_redacted: u64,
    /// Captured fields that a redactor dropped, or that were dropped because a redactor failed.
    pub fields_dropped: u64,
    /// Fields (and error messages) cut to the size limit.
    pub fields_truncated: u64,
    /// Redactor calls that returned an error or panicked (the field was dropped: fail closed).
    pub redactor_failures: u64,
}

impl StatsSnapshot {
    /// Events dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason as usize]
    }

    /// Events dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().sum()
    }
}

impl fmt::Display for StatsSnapshot {
    /// The multi-line report printed by `pi observe status`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "events emitted      {}", self.emitted)?;
        writeln!(f, "events delivered    {}", self.delivered)?;
        writeln!(f, "events dropped      {}", self.dropped_total())?;
        for reason in DropReason::ALL {
            let n = self.dropped(reason);
            if n > 0 {
                writeln!(f, "  {:<18}{n}", reason.as_str())?;
            }
        }
        writeln!(f, "subscriber panics   {}", self.subscriber_panics)?;
        writeln!(f, "subscriber errors   {}", self.subscriber_errors)?;
        writeln!(f, "payload failures    {}", self.payload_failures)?;
        writeln!(f, "fields withheld     {}", self.fields_withheld)?;
        writeln!(f, "fields redacted     {}", self.fields_redacted)?;
        writeln!(f, "fields dropped      {}", self.fields_dropped)?;
        writeln!(f, "fields truncated    {}", self.fields_truncated)?;
        write!(f, "redactor failures   {}", self.redactor_failures)
    }
}
