//! Sessions in pi's JSONL v3 format: a header line, then one entry per line forming a tree through
//! 8-hex `id` / `parentId`. Appends are one `write` of one line each; a torn last line (a crash
//! mid-append) is tolerated on read and never costs earlier entries.

mod entry;
mod reader;
mod replay;
mod report;
mod scan;
mod writer;

pub use entry::{
    ATTRIBUTION_CUSTOM_TYPE, Entry, EntryKind, SessionHeader, TRACE_CUSTOM_TYPE, new_entry_id, new_session_id,
};
pub use reader::{Session, SessionError, SessionTotals, TornTail, read_session};
pub use replay::{REPLAYED, replay};
pub use report::{AttributedUsage, Attribution, attributed_usage};
pub use scan::{ScanSummary, scan_usage, scan_usage_counting};
pub use writer::{RecoveredTail, SessionWriter};

use std::sync::atomic::{AtomicBool, Ordering};

/// Session storage as spans (see [`trace_storage_as_spans`]).
static STORAGE_SPANS: AtomicBool = AtomicBool::new(false);

/// How session storage shows in traces. By default (`false`) an entry written is a
/// `pi.agent.session.append_entry` event on the operation that wrote it (the tool call, the
/// turn, the prompt) and a file read is a `pi.session.read` event — no spans of their own, so a
/// one-turn prompt's trace shows the work, not the bookkeeping. `true` (`telemetry.traceDetail:
/// "storage"`) makes each a span again (`pi.agent.session.append_entry` with a
/// `pi.session.write` child; `pi.session.read`), with its timing. Process-wide.
pub fn trace_storage_as_spans(spans: bool) {
    STORAGE_SPANS.store(spans, Ordering::Relaxed);
}

fn storage_spans() -> bool {
    STORAGE_SPANS.load(Ordering::Relaxed)
}
