//! The raw contract-event JSONL file sink.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pi_observe_core::{DropReason, HubSlot, ObsEvent, Observability, Subscriber, SubscriberError};

enum Message {
    Line(String),
    Flush(SyncSender<()>),
}

/// Appends every event it receives to a file as one JSON line. `on_event` only serializes and
/// enqueues (bounded); a full queue drops the event and counts it on the hub
/// ([`DropReason::QueueFull`]). Write errors are counted as [`DropReason::ExportFailed`].
pub struct JsonlFileSink {
    path: PathBuf,
    sender: Mutex<Option<SyncSender<Message>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    hub: HubSlot,
    counts: Arc<Counts>,
}

/// Records written to the file, and records that were not (queue full, write error, after
/// shutdown).
#[derive(Debug, Default)]
struct Counts {
    written: AtomicU64,
    not_written: AtomicU64,
}

impl std::fmt::Debug for JsonlFileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlFileSink").field("path", &self.path).finish()
    }
}

impl JsonlFileSink {
    /// Default queue capacity in events.
    pub const DEFAULT_CAPACITY: usize = 8192;

    /// Opens (creating or appending to) `path`; drops are also counted on the hub it is
    /// subscribed to.
    pub fn create(path: &Path, capacity: usize) -> std::io::Result<Arc<Self>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (sender, receiver) = mpsc::sync_channel(capacity.max(1));
        let (hub, counts) = (HubSlot::new(), Arc::new(Counts::default()));
        let worker_hub = hub.clone();
        let worker_counts = counts.clone();
        let worker = std::thread::Builder::new()
            .name("pi-observe-jsonl".into())
            .spawn(move || write_loop(file, receiver, &worker_hub, &worker_counts))?;
        Ok(Arc::new(JsonlFileSink {
            path: path.to_owned(),
            sender: Mutex::new(Some(sender)),
            worker: Mutex::new(Some(worker)),
            hub,
            counts,
        }))
    }

    /// Records written so far, and records that were not (queue full, write error, after
    /// shutdown), for an honest summary at exit.
    pub fn counts(&self) -> (u64, u64) {
        (self.counts.written.load(Relaxed), self.counts.not_written.load(Relaxed))
    }

    fn not_written(&self, reason: DropReason) {
        self.counts.not_written.fetch_add(1, Relaxed);
        self.hub.record_dropped(reason, 1);
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sender(&self) -> Option<SyncSender<Message>> {
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Largest batch of lines written with one `write_all`.
const BATCH_BYTES: usize = 64 * 1024;

/// Complete lines waiting to be written; the file only ever receives whole lines, so a process
/// killed at any moment leaves a file of whole lines.
struct Batch {
    bytes: Vec<u8>,
    lines: u64,
}

impl Batch {
    fn write(&mut self, file: &mut File, hub: &HubSlot, counts: &Counts) {
        if self.bytes.is_empty() {
            return;
        }
        if file.write_all(&self.bytes).is_ok() {
            counts.written.fetch_add(self.lines, Relaxed);
        } else {
            counts.not_written.fetch_add(self.lines, Relaxed);
            hub.record_dropped(DropReason::ExportFailed, self.lines);
        }
        self.bytes.clear();
        self.lines = 0;
    }
}

/// Writes what is queued as soon as the queue is momentarily empty (or a batch is full), so
/// records reach the file promptly and in whole lines.
fn write_loop(mut file: File, receiver: Receiver<Message>, hub: &HubSlot, counts: &Counts) {
    let mut batch = Batch { bytes: Vec::with_capacity(BATCH_BYTES), lines: 0 };
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line) => {
                    batch.bytes.extend_from_slice(line.as_bytes());
                    batch.bytes.push(b'\n');
                    batch.lines += 1;
                    if batch.bytes.len() >= BATCH_BYTES {
                        batch.write(&mut file, hub, counts);
                    }
                }
                Message::Flush(ack) => {
                    batch.write(&mut file, hub, counts);
                    let _ = ack.send(());
                }
            }
            next = receiver.try_recv().ok();
        }
        batch.write(&mut file, hub, counts);
    }
}

impl Subscriber for JsonlFileSink {
    fn on_subscribe(&self, hub: &Observability) {
        self.hub.set(hub);
    }

    fn on_event(&self, event: &ObsEvent) {
        let Some(sender) = self.sender() else {
            self.not_written(DropReason::Shutdown);
            return;
        };
        match sender.try_send(Message::Line(event.to_json())) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.not_written(DropReason::QueueFull),
            Err(TrySendError::Disconnected(_)) => self.not_written(DropReason::Shutdown),
        }
    }

    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let Some(sender) = self.sender() else { return Ok(()) };
        let (ack, done) = mpsc::sync_channel(1);
        let deadline = std::time::Instant::now() + timeout;
        // The queue may be full: retry the enqueue until the deadline without blocking forever.
        let mut message = Message::Flush(ack);
        loop {
            match sender.try_send(message) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => {
                    return Err(SubscriberError::Other("writer thread stopped".into()));
                }
                Err(TrySendError::Full(back)) => {
                    if std::time::Instant::now() >= deadline {
                        return Err(SubscriberError::Timeout);
                    }
                    message = back;
                    std::thread::yield_now();
                }
            }
        }
        match done.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
            Ok(()) => Ok(()),
            Err(RecvTimeoutError::Timeout) => Err(SubscriberError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(SubscriberError::Other("writer thread stopped".into())),
        }
    }

    fn shutdown(&self, timeout: Duration) -> Result<(), SubscriberError> {
        let flushed = self.flush(timeout);
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(worker) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            // The sender is gone, so the worker finishes its queue and exits.
            let _ = worker.join();
        }
        flushed
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
