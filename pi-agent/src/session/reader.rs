//! Reading session files.

use std::path::Path;

use pi_observe_core::{Payload, names, record_event, trace_operation_sync};

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
    /// The file system is full (ENOSPC, or out of quota): the line being appended was not
    /// kept, every whole line before it is.
    #[error("{path}: disk full ({source}); the session keeps every whole line written before")]
    DiskFull {
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
        let path = path.display().to_string();
        match source.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                SessionError::DiskFull { path, source }
            }
            _ => SessionError::Io { path, source },
        }
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
    /// The format version the file was written in, when older than 3: its entries were
    /// migrated in memory as upstream pi does (v1 → v2 gives each entry an id and links it to
    /// the previous one; v2 → v3 renames the `hookMessage` role to `custom`). The file is
    /// unchanged until [`Session::migrated_lines`] are written back (a resume does that).
    pub migrated_from: Option<u32>,
    /// Line numbers (1-based) of entries this version does not understand, kept as written.
    pub unknown_lines: Vec<usize>,
    /// The migrated objects, every field kept, when the file was migrated.
    migrated: Option<Vec<serde_json::Value>>,
    /// The header id as telemetry may carry it, checked when the file was read: a file's id
    /// is outside text, so one not shaped like an id reads `invalid` ([`id_or_invalid`]).
    ///
    /// [`id_or_invalid`]: pi_observe_core::id_or_invalid
    pub exported_id: String,
}

/// The current session format version.
pub const SESSION_VERSION: u32 = 3;

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
/// Traced as a `pi.session.read` event (on the current operation, if any), or as a span with
/// storage as spans ([`super::trace_storage_as_spans`]).
pub fn read_session(path: &Path) -> Result<Session, SessionError> {
    if !super::storage_spans() {
        let (session, bytes) = read_file(path)?;
        record_event(names::SESSION_READ, || read_payload(&session, bytes));
        return Ok(session);
    }
    trace_operation_sync(names::SESSION_READ, (), |span| {
        let (session, bytes) = read_file(path)?;
        span.record(read_payload(&session, bytes));
        Ok(session)
    })
}

/// The session at `path` and its size in bytes.
fn read_file(path: &Path) -> Result<(Session, usize), SessionError> {
    let meta = std::fs::metadata(path).map_err(|e| SessionError::io(path, e))?;
    if !meta.is_file() {
        return Err(SessionError::NotAFile { path: path.display().to_string() });
    }
    let bytes = std::fs::read(path).map_err(|e| SessionError::io(path, e))?;
    Ok((parse(path, &bytes)?, bytes.len()))
}

/// What a read records: its size, entries, unknown entries, and the format it was migrated from.
fn read_payload(session: &Session, bytes: usize) -> Payload {
    let mut payload = Payload::new()
        .safe(names::BYTES, bytes)
        .safe(names::ENTRY_COUNT, session.entries.len())
        .safe(names::UNKNOWN_ENTRY_COUNT, session.unknown_lines.len());
    if let Some(version) = session.migrated_from {
        payload = payload.safe(names::MIGRATED_FROM_VERSION, version);
    }
    payload
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Session, SessionError> {
    let shown = path.display().to_string();
    let corrupt = |line: usize, reason: String| SessionError::Corrupt { path: shown.clone(), line, reason };
    let mut header: Option<SessionHeader> = None;
    let mut values: Vec<(usize, serde_json::Value)> = Vec::new();
    let mut raw_header = serde_json::Value::Null;
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
            header =
                Some(serde_json::from_value(value.clone()).map_err(|e| corrupt(number, format!("bad header ({e})")))?);
            raw_header = value;
            continue;
        }
        if !value.is_object() {
            return Err(corrupt(number, "not a JSON object".into()));
        }
        values.push((number, value));
    }
    let mut header = header.ok_or(SessionError::NoHeader { path: shown })?;
    let migrated_from = (header.version < SESSION_VERSION).then_some(header.version);
    if migrated_from.is_some() {
        migrate(header.version, &mut values);
        header.version = SESSION_VERSION;
    }
    let migrated = migrated_from.map(|_| {
        raw_header["version"] = serde_json::Value::from(SESSION_VERSION);
        std::iter::once(raw_header).chain(values.iter().map(|(_, v)| v.clone())).collect()
    });
    let mut unknown_lines = Vec::new();
    let entries: Vec<Entry> = values
        .into_iter()
        .map(|(number, value)| {
            let entry = Entry::from_value(value);
            if entry.is_unknown() {
                unknown_lines.push(number);
            }
            entry
        })
        .collect();
    let needs_newline = torn_tail.is_none() && bytes.last().is_some_and(|b| *b != b'\n');
    let exported_id = pi_observe_core::id_or_invalid(&header.id);
    Ok(Session { header, entries, torn_tail, needs_newline, migrated_from, unknown_lines, migrated, exported_id })
}

/// Upstream pi's migrations, on the JSON objects (so fields this version does not know are
/// carried over untouched). v1 → v2: each entry gets an id (`00000001`, … in file order:
/// deterministic, so replaying an old file twice gives the same trace ids) and the previous
/// entry as parent; a compaction's `firstKeptEntryIndex` (a line index, the header being 0)
/// becomes `firstKeptEntryId`. v2 → v3: the `hookMessage` role becomes `custom`.
fn migrate(version: u32, values: &mut [(usize, serde_json::Value)]) {
    use serde_json::Value;
    if version < 2 {
        let ids: Vec<String> = (1..=values.len()).map(|i| format!("{i:08x}")).collect();
        for (i, (_, value)) in values.iter_mut().enumerate() {
            let Some(object) = value.as_object_mut() else { continue };
            object.insert("id".into(), Value::String(ids[i].clone()));
            object.insert("parentId".into(), if i == 0 { Value::Null } else { Value::String(ids[i - 1].clone()) });
            if object.get("type").and_then(Value::as_str) == Some("compaction")
                && let Some(index) = object.remove("firstKeptEntryIndex").and_then(|v| v.as_u64())
                && let Some(id) = usize::try_from(index).ok().and_then(|n| n.checked_sub(1)).and_then(|n| ids.get(n))
            {
                object.insert("firstKeptEntryId".into(), Value::String(id.clone()));
            }
        }
    }
    for (_, value) in values.iter_mut() {
        if value.get("type").and_then(Value::as_str) == Some("message")
            && let Some(message) = value.get_mut("message").and_then(Value::as_object_mut)
            && message.get("role").and_then(Value::as_str) == Some("hookMessage")
        {
            message.insert("role".into(), Value::String("custom".into()));
        }
    }
}

impl Session {
    /// A session made in memory (nothing migrated, nothing unknown).
    pub fn from_parts(header: SessionHeader, entries: Vec<Entry>) -> Session {
        Session {
            exported_id: pi_observe_core::id_or_invalid(&header.id),
            header,
            entries,
            torn_tail: None,
            needs_newline: false,
            migrated_from: None,
            unknown_lines: Vec::new(),
            migrated: None,
        }
    }

    /// A migrated file's lines as format v3 (header first, every field kept), for writing it
    /// back; `None` when the file needed no migration.
    pub fn migrated_lines(&self) -> Option<Vec<String>> {
        Some(self.migrated.as_ref()?.iter().map(|v| v.to_string()).collect())
    }
}
