//! A line writer for hot paths: callers append whole lines to a bounded in-memory buffer; one
//! thread per process — shared by every [`BatchedWriter`] (the events file and the JSON log of a
//! run) — writes the buffers out in batches. A caller never makes a system call or wakes a
//! thread for an ordinary line (the per-line wake-up and `write` of a channel-fed writer were
//! the larger part of a log sink's cost), and the output only ever receives whole lines.
//!
//! The thread sleeps until a line comes while nothing waits; it then writes, and stays up for
//! [`INTERVAL`]: lines that come meanwhile need no wake-up and are written when it ends, with
//! every other writer's (one wake-up per interval for all of them, none while nothing is
//! logged). It also writes at once when [`BATCH_BYTES`] wait in one buffer, and when a flush
//! or a close asks. A line waits at most [`INTERVAL`] in memory. One output that blocks (a
//! stuck pipe) holds up the others' writes too; their lines then wait in their own buffers, and
//! are dropped and counted once those are full, as that output's are.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Bytes waiting in one buffer that make the writer thread write at once.
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
    thread: Arc<WriterThread>,
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
    /// A writer for `out`, written by the process's writer thread (started with the first
    /// writer); at most `capacity` bytes wait in memory (beyond that, lines are dropped and
    /// counted).
    pub fn start(out: impl Write + Send + 'static, capacity: usize) -> std::io::Result<Arc<Self>> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            done: Condvar::new(),
            capacity: capacity.max(1),
            written: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let thread = WriterThread::get()?;
        thread.lock().added.push(Output { shared: shared.clone(), out: Box::new(out), batch: Vec::new() });
        Ok(Arc::new(BatchedWriter { shared, thread }))
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
        let was = state.buffer.len();
        state.buffer.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            state.buffer.push(b'\n');
        }
        state.lines += 1;
        let filled = was < BATCH_BYTES && state.buffer.len() >= BATCH_BYTES;
        drop(state);
        if filled {
            self.thread.signal();
        } else if was == 0 {
            self.thread.signal_if_asleep();
        }
        Pushed::Taken
    }

    /// Waits (at most `timeout`) until every line appended before the call is written. `false`
    /// on timeout.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let ticket = self.request_write();
        let mut state = self.shared.lock();
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
        self.request_write();
    }

    /// Asks the writer thread for one more write of what is buffered; its ticket.
    fn request_write(&self) -> u64 {
        let ticket = {
            let mut state = self.shared.lock();
            state.requested += 1;
            state.requested
        };
        self.thread.signal();
        ticket
    }

    /// Starts closing without waiting: the writer thread writes what is buffered and lets go
    /// of the output; later lines are dropped. [`BatchedWriter::close`] waits for it.
    pub fn begin_close(&self) {
        self.close_ticket();
    }

    /// The flush request that closing made (made now if closing had not begun).
    fn close_ticket(&self) -> u64 {
        let ticket = {
            let mut state = self.shared.lock();
            if let Some(ticket) = state.close_ticket {
                return ticket;
            }
            state.requested += 1;
            state.closed = true;
            state.close_ticket = Some(state.requested);
            state.requested
        };
        self.thread.signal();
        ticket
    }

    /// Writes what is buffered (within `timeout`) and lets go of the output; later lines are
    /// dropped. `false` on timeout.
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
        // What is buffered is still written; then the thread lets go of the output.
        self.shared.lock().closed = true;
        self.thread.signal();
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

/// The process's writer thread: what wakes it, and the writers started since it last looked.
#[derive(Default)]
struct WriterThread {
    state: Mutex<ThreadState>,
    wake: Condvar,
}

#[derive(Default)]
struct ThreadState {
    /// Writers started since the thread last looked.
    added: Vec<Output>,
    /// A write was asked for (a full batch, a flush, a close, a line while it slept).
    signalled: bool,
    /// It sleeps with nothing waiting and no time set: the next line appended wakes it.
    asleep: bool,
}

/// One writer's output, held by the writer thread, with its half of the double buffer.
struct Output {
    shared: Arc<Shared>,
    out: Box<dyn Write + Send>,
    batch: Vec<u8>,
}

impl WriterThread {
    /// The process's writer thread, started on first use (a failed start is tried again by the
    /// next writer).
    fn get() -> std::io::Result<Arc<WriterThread>> {
        static THREAD: Mutex<Option<Arc<WriterThread>>> = Mutex::new(None);
        let mut slot = THREAD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(thread) = &*slot {
            return Ok(thread.clone());
        }
        let thread = Arc::new(WriterThread::default());
        let running = thread.clone();
        // Never joined: it sleeps while no line waits, for the life of the process.
        pi_observe_core::spawn_telemetry_thread("pi-lines", move || running.run())?;
        *slot = Some(thread.clone());
        Ok(thread)
    }

    fn lock(&self) -> MutexGuard<'_, ThreadState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the thread to write now. Called without a writer's lock held (the thread takes
    /// its own lock, then writers').
    fn signal(&self) {
        let mut state = self.lock();
        state.signalled = true;
        self.wake.notify_one();
    }

    /// Wakes the thread when it sleeps with nothing waiting (a line came into an empty buffer);
    /// when it is up, it writes the line when its interval ends.
    fn signal_if_asleep(&self) {
        let mut state = self.lock();
        if state.asleep {
            state.signalled = true;
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        let mut outputs: Vec<Output> = Vec::new();
        // Up until then after a write (lines come without a wake-up meanwhile); asleep when `None`.
        let mut up_until: Option<Instant> = None;
        loop {
            {
                let mut state = self.lock();
                loop {
                    outputs.append(&mut state.added);
                    if state.signalled {
                        break;
                    }
                    match up_until {
                        Some(until) => {
                            let left = until.saturating_duration_since(Instant::now());
                            if left.is_zero() {
                                break;
                            }
                            state = self
                                .wake
                                .wait_timeout(state, left)
                                .map(|(s, _)| s)
                                .unwrap_or_else(|e| e.into_inner().0);
                        }
                        // A line appended while the thread was up did not wake it: look once
                        // more (under this lock, so a line appended after the look finds it
                        // asleep and wakes it) before sleeping.
                        None if outputs.iter().any(Output::waiting) => break,
                        None => {
                            state.asleep = true;
                            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
                            state.asleep = false;
                        }
                    }
                }
                state.signalled = false;
            }
            let mut wrote = false;
            outputs.retain_mut(|output| {
                let (written, open) = output.write();
                wrote |= written;
                open
            });
            up_until = wrote.then(|| Instant::now() + INTERVAL);
        }
    }
}

impl Output {
    /// Lines wait, a flush does, or the writer is closed (the output is to be let go of).
    fn waiting(&self) -> bool {
        let state = self.shared.lock();
        !state.buffer.is_empty() || state.served < state.requested || state.closed
    }

    /// Writes what waits and serves the flushes asked before; whether it wrote, and whether
    /// the output stays open (not once closed with nothing left).
    fn write(&mut self) -> (bool, bool) {
        let (lines, served, closed) = {
            let mut state = self.shared.lock();
            // Swap buffers: both keep their capacity.
            std::mem::swap(&mut state.buffer, &mut self.batch);
            (std::mem::take(&mut state.lines), state.requested, state.closed)
        };
        let wrote = !self.batch.is_empty();
        if wrote {
            let out = &mut self.out;
            let batch = &self.batch;
            match pi_observe_core::append_whole(|| out.write_all(batch).and_then(|()| out.flush())) {
                Ok(()) => self.shared.written.fetch_add(lines, Relaxed),
                Err(e) => {
                    *self.shared.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(describe_io_error(&e));
                    self.shared.failed.fetch_add(lines, Relaxed)
                }
            };
            self.batch.clear();
        }
        let mut state = self.shared.lock();
        if served > state.served {
            state.served = served;
            self.shared.done.notify_all();
        }
        (wrote, !(closed && state.buffer.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{GatedWriter, MemoryWriter};

    #[test]
    fn lines_from_many_threads_arrive_whole_and_counted_after_a_flush() {
        let memory = MemoryWriter::default();
        let writer = BatchedWriter::start(memory.clone(), 1 << 20).unwrap();
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

    /// Polls `done` until it holds (at most ten seconds).
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_line_is_written_without_a_flush_whether_the_thread_slept_or_was_up() {
        let memory = MemoryWriter::default();
        let writer = BatchedWriter::start(memory.clone(), 1 << 20).unwrap();
        // Once the thread sleeps (nothing of this writer's or, in a while, of other tests'
        // waits), the first line wakes it.
        eventually("the writer thread sleeps", || writer.thread.lock().asleep);
        assert_eq!(writer.push_line(b"first"), Pushed::Taken);
        eventually("the first line", || memory.text() == "first\n");
        // Just after a write the thread is up: the next line is written when its interval ends.
        assert_eq!(writer.push_line(b"second"), Pushed::Taken);
        eventually("the second line", || memory.text() == "first\nsecond\n");
        assert_eq!(writer.counts(), LineCounts { written: 2, dropped: 0, failed: 0 });
    }

    #[test]
    fn writers_share_the_thread_but_each_is_counted_flushed_and_closed_alone() {
        let (a, b) = (MemoryWriter::default(), MemoryWriter::default());
        let (first, second) =
            (BatchedWriter::start(a.clone(), 1 << 20).unwrap(), BatchedWriter::start(b.clone(), 1 << 20).unwrap());
        for i in 0..100 {
            first.push_line(format!("a{i}").as_bytes());
            second.push_line(format!("b{i}").as_bytes());
        }
        assert!(first.close(Duration::from_secs(5)));
        assert_eq!(a.text().lines().count(), 100);
        assert_eq!(first.push_line(b"late"), Pushed::Closed);
        // The other writer goes on.
        assert_eq!(second.push_line(b"b100"), Pushed::Taken);
        assert!(second.flush(Duration::from_secs(5)));
        let lines: Vec<String> = b.text().lines().map(str::to_owned).collect();
        assert_eq!(lines, (0..=100).map(|i| format!("b{i}")).collect::<Vec<_>>());
        assert_eq!(first.counts(), LineCounts { written: 100, dropped: 1, failed: 0 });
        assert_eq!(second.counts(), LineCounts { written: 101, dropped: 0, failed: 0 });
        assert!(!a.text().contains('b') && !b.text().contains('a'));
    }

    #[test]
    fn a_full_buffer_drops_and_counts_instead_of_blocking() {
        let gate = GatedWriter::default();
        let writer = BatchedWriter::start(gate.clone(), 100).unwrap();
        let taken = (0..50).filter(|_| writer.push_line(b"0123456789") == Pushed::Taken).count();
        assert!(taken < 50, "{taken}");
        assert_eq!(writer.counts().dropped as usize, 50 - taken);
        gate.open();
        assert!(writer.close(Duration::from_secs(5)));
        assert_eq!(writer.counts().written as usize, taken);
    }
}
