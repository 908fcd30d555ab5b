//! Sessions in pi's JSONL v3 format: a header line, then one entry per line forming a tree through
//! 8-hex `id` / `parentId`. Appends are one `write` of one line each; a torn last line (a crash
//! mid-append) is tolerated on read and never costs earlier entries.

mod entry;
mod reader;
mod replay;
mod report;
mod scan;
mod writer;

pub use entry::{ATTRIBUTION_CUSTOM_TYPE, Entry, EntryKind, SessionHeader, new_entry_id, new_session_id};
pub use reader::{Session, SessionError, SessionTotals, TornTail, read_session};
pub use replay::{REPLAYED, replay};
pub use report::{AttributedUsage, attributed_usage};
pub use scan::{ScanSummary, scan_usage, scan_usage_counting};
pub use writer::{RecoveredTail, SessionWriter};
