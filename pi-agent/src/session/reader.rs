//! Reading session files.

use std::path::Path;

use pi_observe_core::{Payload, names, trace_operation_sync};

use super::entry::{Entry, SessionHeader};
use crate::message::Usage;

/// Why a session could not be read or written. Messages name the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// I/O failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The path exists but is not a regular file (a directory, FIFO, device).
    #[error("{path}: not a regular file")]
    NotAFile {
        /// The path.
        path: String,
    },
    /// A line is not a valid entry.
    #[error("{path}:{line}: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The file has no session header.
    #[error("{path}: not a session file (no header line)")]
    NoHeader {
        /// The file.
        path: String,
    },
    /// No entry has this id.
    #[error("{path}: no entry with id {id}")]
    UnknownEntry {
        /// The file.
        path: String,
        /// The id asked for.
        id: String,
    },
    /// An entry could not be encoded.
    #[error("{path}: cannot encode entry: {source}")]
    Encode {
        /// The file.
        path: String,
        /// The error.
        source: serde_json::Error,
    },
}

impl SessionError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        SessionError::Io { path: path.display().to_string(), source }
    }

    pub(crate) fn encode(path: &Path, source: serde_json::Error) -> Self {
        SessionError::Encode { path: path.display().to_string(), source }
    }
}

/// A loaded session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The header.
    pub header: SessionHeader,
    /// Entries in file order.
    pub entries: Vec<Entry>,
    /// The last line, when it was torn (no newline, not JSON: a crash mid-append) and skipped.
    pub torn_tail: Option<TornTail>,
    /// The last (complete) line has no trailing newline; the next append must add one first.
    pub needs_newline: bool,
}

/// A torn last line: where it starts and its line number, so callers can say what was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset of the line (the length of the intact prefix).
    pub offset: u64,
    /// 1-based line number.
    pub line: usize,
}

/// Token and cost totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SessionTotals {
    /// Summed usage.
    pub usage: Usage,
    /// Assistant messages counted.
    pub assistant_messages: usize,
}

impl Session {
    /// Totals over assistant messages, tool results with usage, compactions and branch summaries,
    /// each counted exactly once.
    pub fn totals(&self) -> SessionTotals {
        let mut totals = SessionTotals::default();
        for entry in &self.entries {
            if let Some(usage) = entry.kind.usage() {
                totals.usage.add(usage);
            }
            if matches!(&entry.kind, super::EntryKind::Message { message: crate::message::Message::Assistant(_) }) {
                totals.assistant_messages += 1;
            }
        }
        totals
    }
}

/// Reads a session file. A torn final line (no trailing newline and not valid JSON: a crash
/// mid-append) is skipped and reported in [`Session::torn_tail`]; any other bad line is an error
/// naming the line. Only regular files are read (a FIFO or device would block or never end).
pub fn read_session(path: &Path) -> Result<Session, SessionError> {
    trace_operation_sync(names::SESSION_READ, (), |span| {
        let meta = std::fs::metadata(path).map_err(|e| SessionError::io(path, e))?;
        if !meta.is_file() {
            return Err(SessionError::NotAFile { path: path.display().to_string() });
        }
        let bytes = std::fs::read(path).map_err(|e| SessionError::io(path, e))?;
        let session = parse(path, &bytes)?;
        span.record(Payload::new().safe(names::BYTES, bytes.len()).safe(names::ENTRY_COUNT, session.entries.len()));
        Ok(session)
    })
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Session, SessionError> {
    let shown = path.display().to_string();
    let corrupt = |line: usize, reason: String| SessionError::Corrupt { path: shown.clone(), line, reason };
    let mut header: Option<SessionHeader> = None;
    let mut entries = Vec::new();
    let mut torn_tail = None;
    let mut offset = 0usize;
    let mut number = 0usize;
    while offset < bytes.len() {
        number += 1;
        let (line, terminated) = match bytes[offset..].iter().position(|b| *b == b'\n') {
            Some(end) => (&bytes[offset..offset + end], true),
            None => (&bytes[offset..], false),
        };
        let start = offset;
        offset += line.len() + usize::from(terminated);
        let text = match std::str::from_utf8(line) {
            Ok(text) => text.trim(),
            Err(_) if !terminated => {
                torn_tail = Some(TornTail { offset: start as u64, line: number });
                break;
            }
            Err(e) => return Err(corrupt(number, format!("not UTF-8 ({e})"))),
        };
        if text.is_empty() {
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(text) {
            Ok(value) => value,
            Err(_) if !terminated => {
                torn_tail = Some(TornTail { offset: start as u64, line: number });
                break;
            }
            Err(e) => return Err(corrupt(number, format!("not JSON ({e})"))),
        };
        if header.is_none() {
            if value.get("type").and_then(|t| t.as_str()) != Some("session") {
                return Err(SessionError::NoHeader { path: shown });
            }
            header = Some(serde_json::from_value(value).map_err(|e| corrupt(number, format!("bad header ({e})")))?);
            continue;
        }
        let entry: Entry = serde_json::from_value(value).map_err(|e| corrupt(number, format!("bad entry ({e})")))?;
        entries.push(entry);
    }
    let header = header.ok_or(SessionError::NoHeader { path: shown })?;
    let needs_newline = torn_tail.is_none() && bytes.last().is_some_and(|b| *b != b'\n');
    Ok(Session { header, entries, torn_tail, needs_newline })
}
