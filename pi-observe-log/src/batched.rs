//! A line writer for hot paths: callers append whole lines to a bounded in-memory buffer; one
//! background thread writes the buffer out in batches — when [`BATCH_BYTES`] are waiting, when
//! asked to flush, and at least every [`INTERVAL`]. A caller never makes a system call or wakes
//! a thread for an ordinary line (the per-line wake-up and `write` of a channel-fed writer were
//! the larger part of a log sink's cost), and the output only ever receives whole lines.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes waiting that make the writer thread write at once.
pub const BATCH_BYTES: usize = 64 * 1024;
/// Largest line buffer a formatting thread keeps between lines (a captured transcript can make
/// one line large; that memory is not kept).
pub(crate) const KEPT_LINE_CAPACITY: usize = 64 * 1024;
/// Longest time a line waits in memory.
pub const INTERVAL: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    buffer: Vec<u8>,
    lines: u64,
    /// Flush requests made and served (the writer serves all made before it took the buffer).
    requested: u64,
    served: u64,
    closed: bool,
    /// The flush request closing made, once closing began.
    close_ticket: Option<u64>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer thread.
    wake: Condvar,
    /// Wakes flush callers.
    done: Condvar,
    capacity: usize,
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    /// Why the last write failed (`disk full`, or the I/O error).
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A bounded, batching line writer in front of `out` (a file, stderr). Cheap to share: clones
/// of the [`Arc`] append to one buffer.
pub struct BatchedWriter {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for BatchedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchedWriter").field("counts", &self.counts()).finish()
    }
}

/// What [`BatchedWriter::push_line`] did with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// It will be written.
    Taken,
    /// Dropped: the buffer is full.
    Full,
    /// Dropped: the writer is closed.
    Closed,
}

/// What became of the lines given to a [`BatchedWriter`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineCounts {
    /// Written to the output.
    pub written: u64,
    /// Not taken: the buffer was full, or the writer was closed.
    pub dropped: u64,
    /// Taken but the output refused them (a write error).
    pub failed: u64,
}

impl BatchedWriter {
    /// Starts the writer thread for `out`; at most `capacity` bytes wait in memory (beyond
    /// that, lines are dropped and counted).
    pub fn start(out: impl Write + Send + 'static, capacity: usize, name: &str) -> std::io::Result<Arc<Self>> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            done: Condvar::new(),
            capacity: capacity.max(1),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let worker_shared = shared.clone();
        // Not joined: once it has written what closing asked for it ends on its own (waiting for
        // its exit cost a command's exit ~0.1–0.3 ms; ADR 0013).
        pi_observe_core::spawn_telemetry_thread(name, move || write_loop(out, &worker_shared))?;
        Ok(Arc::new(BatchedWriter { shared }))
    }

    /// Appends `line` (a newline is added unless it ends with one), or says why it was
    /// dropped (and counted).
    pub fn push_line(&self, line: &[u8]) -> Pushed {
        let mut state = self.shared.lock();
        let needed = line.len() + usize::from(!line.ends_with(b"\n"));
        let refused = if state.closed {
            Pushed::Closed
        } else if state.buffer.len() + needed > self.shared.capacity {
            Pushed::Full
        } else {
            Pushed::Taken
        };
        if refused != Pushed::Taken {
            drop(state);
            self.shared.dropped.fetch_add(1, Relaxed);
            return refused;
        }
        let was_small = state.buffer.len() < BATCH_BYTES;
        state.buffer.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            state.buffer.push(b'\n');
        }
        state.lines += 1;
        if was_small && state.buffer.len() >= BATCH_BYTES {
            self.shared.wake.notify_one();
        }
        Pushed::Taken
    }

    /// Waits (at most `timeout`) until every line appended before the call is written. `false`
    /// on timeout.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.request_write();
        let ticket = state.requested;
        while state.served < ticket && !(state.closed && state.buffer.is_empty()) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.shared.done.wait_timeout(state, left).map(|(s, _)| s).unwrap_or_else(|e| e.into_inner().0);
        }
        true
    }

    /// Asks the writer thread to write what is buffered now, without waiting for it: a
    /// [`BatchedWriter::flush`] that returns at once.
    pub fn flush_soon(&self) {
        drop(self.request_write());
    }

    /// Asks the writer thread for one more write of what is buffered (its ticket is the
    /// returned state's `requested`).
    fn request_write(&self) -> MutexGuard<'_, State> {
        let mut state = self.shared.lock();
        state.requested += 1;
        self.shared.wake.notify_one();
        state
    }

    /// Starts closing without waiting: the writer thread writes what is buffered and stops;
    /// later lines are dropped. [`BatchedWriter::close`] waits for it.
    pub fn begin_close(&self) {
        self.close_ticket();
    }

    /// The flush request that closing made (made now if closing had not begun).
    fn close_ticket(&self) -> u64 {
        let mut state = self.shared.lock();
        if let Some(ticket) = state.close_ticket {
            return ticket;
        }
        state.requested += 1;
        state.closed = true;
        state.close_ticket = Some(state.requested);
        self.shared.wake.notify_one();
        state.requested
    }

    /// Writes what is buffered (within `timeout`) and stops the writer thread, which ends on its
    /// own once it has (not waited for); later lines are dropped. `false` on timeout.
    pub fn close(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let ticket = self.close_ticket();
        let mut state = self.shared.lock();
        while state.served < ticket {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.shared.done.wait_timeout(state, left).map(|(s, _)| s).unwrap_or_else(|e| e.into_inner().0);
        }
        true
    }

    /// Why the last write to the output failed, if one did: `disk full` for ENOSPC (and
    /// EDQUOT), else the I/O error.
    pub fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lines written, dropped and failed so far.
    pub fn counts(&self) -> LineCounts {
        LineCounts {
            written: self.shared.written.load(Relaxed),
            dropped: self.shared.dropped.load(Relaxed),
            failed: self.shared.failed.load(Relaxed),
        }
    }
}

impl Drop for BatchedWriter {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

/// An I/O error as the user should read it: `disk full` when the file system is out of space
/// or quota, else the error itself.
pub fn describe_io_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => format!("disk full ({e})"),
        _ => e.to_string(),
    }
}

fn write_loop(mut out: impl Write, shared: &Shared) {
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    loop {
        let (lines, served, closed) = {
            let mut state = shared.lock();
            let due = Instant::now() + INTERVAL;
            while state.buffer.len() < BATCH_BYTES && state.served == state.requested && !state.closed {
                let left = due.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = shared.wake.wait_timeout(state, left).map(|(s, _)| s).unwrap_or_else(|e| e.into_inner().0);
            }
            // Swap buffers: both keep their capacity.
            std::mem::swap(&mut state.buffer, &mut batch);
            (std::mem::take(&mut state.lines), state.requested, state.closed)
        };
        if !batch.is_empty() {
            match pi_observe_core::append_whole(|| out.write_all(&batch).and_then(|()| out.flush())) {
                Ok(()) => shared.written.fetch_add(lines, Relaxed),
                Err(e) => {
                    *shared.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(describe_io_error(&e));
                    shared.failed.fetch_add(lines, Relaxed)
                }
            };
            batch.clear();
        }
        let mut state = shared.lock();
        state.served = state.served.max(served);
        shared.done.notify_all();
        if closed && state.buffer.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{GatedWriter, MemoryWriter};

    #[test]
    fn lines_from_many_threads_arrive_whole_and_counted_after_a_flush() {
        let memory = MemoryWriter::default();
        let writer = BatchedWriter::start(memory.clone(), 1 << 20, "test-writer").unwrap();
        std::thread::scope(|s| {
            for t in 0..4 {
                let writer = writer.clone();
                s.spawn(move || {
                    for i in 0..500 {
                        assert_eq!(writer.push_line(format!("{{\"t\":{t},\"i\":{i}}}").as_bytes()), Pushed::Taken);
                    }
                });
            }
        });
        assert!(writer.flush(Duration::from_secs(5)));
        let text = memory.text();
        assert_eq!(text.lines().count(), 2000);
        assert!(text.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
        assert_eq!(writer.counts(), LineCounts { written: 2000, dropped: 0, failed: 0 });
        assert!(writer.close(Duration::from_secs(5)));
        assert_eq!(writer.push_line(b"late"), Pushed::Closed);
        assert_eq!(writer.counts().dropped, 1);
    }

    #[test]
    fn a_full_buffer_drops_and_counts_instead_of_blocking() {
        let gate = GatedWriter::default();
        let writer = BatchedWriter::start(gate.clone(), 100, "test-gate").unwrap();
        let taken = (0..50).filter(|_| writer.push_line(b"0123456789") == Pushed::Taken).count();
        assert!(taken < 50, "{taken}");
        assert_eq!(writer.counts().dropped as usize, 50 - taken);
        gate.open();
        assert!(writer.close(Duration::from_secs(5)));
        assert_eq!(writer.counts().written as usize, taken);
    }
}
