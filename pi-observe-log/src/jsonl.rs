//! The raw contract-event JSONL file sink.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use pi_observe_core::{DropReason, HubSlot, ObsEvent, Observability, Subscriber, SubscriberError};

use crate::batched::{BatchedWriter, KEPT_LINE_CAPACITY, Pushed};

/// Appends every event it receives to a file as one JSON line. `on_event` serializes and
/// appends to a bounded in-memory buffer that a background thread writes out in batches
/// ([`BatchedWriter`]); a full buffer drops the event and counts it on the hub
/// ([`DropReason::QueueFull`]). Write errors are counted as [`DropReason::ExportFailed`]. The
/// file only ever receives whole lines.
pub struct JsonlFileSink {
    path: PathBuf,
    writer: Arc<BatchedWriter>,
    hub: HubSlot,
    /// Failed lines already reported to the hub.
    reported_failed: AtomicU64,
}

impl std::fmt::Debug for JsonlFileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlFileSink").field("path", &self.path).finish()
    }
}

impl JsonlFileSink {
    /// Default buffer capacity, in events of about 512 bytes.
    pub const DEFAULT_CAPACITY: usize = 8192;

    /// Opens (creating or appending to) `path`, buffering at most about `capacity` events;
    /// drops are also counted on the hub it is subscribed to.
    pub fn create(path: &Path, capacity: usize) -> std::io::Result<Arc<Self>> {
        pi_observe_core::create_private_parent(path)?;
        let file = pi_observe_core::private_file_options().create(true).append(true).open(path)?;
        let writer = BatchedWriter::start(file, capacity.max(1).saturating_mul(512))?;
        Ok(Arc::new(JsonlFileSink {
            path: path.to_owned(),
            writer,
            hub: HubSlot::new(),
            reported_failed: AtomicU64::new(0),
        }))
    }

    /// Records written so far, and records that were not (buffer full, write error, after
    /// shutdown), for an honest summary at exit.
    pub fn counts(&self) -> (u64, u64) {
        let counts = self.writer.counts();
        (counts.written, counts.dropped + counts.failed)
    }

    /// Why the last write to the file failed, if one did (`disk full (…)` for ENOSPC).
    pub fn last_error(&self) -> Option<String> {
        self.writer.last_error()
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reports write errors seen since the last call to the hub.
    fn report_failed(&self) {
        let failed = self.writer.counts().failed;
        let before = self.reported_failed.swap(failed, Relaxed);
        if failed > before {
            self.hub.record_dropped(DropReason::ExportFailed, failed - before);
        }
    }
}

impl Subscriber for JsonlFileSink {
    fn on_subscribe(&self, hub: &Observability) {
        self.hub.set(hub);
    }

    fn on_event(&self, event: &ObsEvent) {
        thread_local! {
            /// The line being built, reused: one record costs no allocation of its own.
            static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        let pushed = LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                // Serializing plain data into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *line, event);
                let pushed = self.writer.push_line(&line);
                if line.capacity() > KEPT_LINE_CAPACITY {
                    *line = Vec::new();
                }
                pushed
            }
            Err(_) => self.writer.push_line(event.to_json().as_bytes()),
        });
        match pushed {
            Pushed::Taken => {}
            Pushed::Full => self.hub.record_dropped(DropReason::QueueFull, 1),
            Pushed::Closed => self.hub.record_dropped(DropReason::Shutdown, 1),
        }
    }

    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let flushed = self.writer.flush(timeout);
        self.report_failed();
        if flushed { Ok(()) } else { Err(SubscriberError::Timeout) }
    }

    fn begin_shutdown(&self, _timeout: Duration) -> bool {
        self.writer.begin_close();
        true
    }

    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let closed = self.writer.close(timeout);
        self.report_failed();
        if closed { Ok(()) } else { Err(SubscriberError::Timeout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pi_observe_core::{Payload, trace_operation_sync};

    #[test]
    fn every_event_becomes_one_parseable_line() {
        let dir = std::env::temp_dir().join(format!("pi-jsonl-{}", pi_observe_core::SpanId::random()));
        let path = dir.join("events.jsonl");
        let hub = Observability::new();
        let sink = JsonlFileSink::create(&path, 16).unwrap();
        let _sub = hub.subscribe_arc(sink.clone(), Arc::new(Default::default()));
        hub.in_scope(|| {
            for _ in 0..3 {
                trace_operation_sync("op", Payload::new().safe("n", 1), |_| ());
            }
        });
        hub.shutdown(Duration::from_secs(5)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<ObsEvent> = text.lines().map(|l| ObsEvent::from_json(l).unwrap()).collect();
        assert_eq!(events.len(), 6);
        pi_observe_core::testing::assert_paired(&events);
        assert_eq!(sink.counts(), (6, 0));
        // After shutdown, events are refused and counted, not written.
        hub.in_scope(|| trace_operation_sync("late", (), |_| ()));
        assert_eq!(hub.stats().dropped(DropReason::Shutdown), 2);
        assert_eq!(sink.counts(), (6, 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
