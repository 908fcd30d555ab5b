//! Writers for tests of code that logs (feature `testing`): one that keeps what it is given, and
//! one that blocks like a stuck pipe until it is released.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};

/// Keeps everything written; clones share it.
#[derive(Debug, Clone, Default)]
pub struct MemoryWriter(Arc<Mutex<Vec<u8>>>);

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for MemoryWriter {
    type Writer = MemoryWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

impl MemoryWriter {
    /// What was written so far, as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }

    /// Forgets what was written.
    pub fn clear(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Write for MemoryWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer whose every write waits until [`GatedWriter::open`] is called; clones share the gate.
#[derive(Debug, Clone, Default)]
pub struct GatedWriter(Arc<(Mutex<bool>, Condvar)>);

impl GatedWriter {
    /// Lets every waiting and later write through.
    pub fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap_or_else(|p| p.into_inner()) = true;
        changed.notify_all();
    }
}

impl Write for GatedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap_or_else(|p| p.into_inner());
        while !*open {
            open = changed.wait(open).unwrap_or_else(|p| p.into_inner());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lines the `pi_observe` bridge wrote straight into the installed JSON log's writer.
pub(crate) static DIRECT_LINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many lines the `pi_observe` bridge has written straight into the JSON log that
/// `init_json_logging` installed (not through `tracing`).
pub fn direct_lines() -> u64 {
    DIRECT_LINES.load(std::sync::atomic::Ordering::Relaxed)
}
