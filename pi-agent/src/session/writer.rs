//! Appending to a session file.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use pi_observe_core::{Payload, names, record_event, trace_operation_sync};

use super::entry::{Entry, EntryKind, SessionHeader, new_entry_id, new_session_id};
use super::reader::{SessionError, read_session};
use crate::time::{iso8601, now_millis};

/// An open session file; every append is one line, written with one `write` call.
#[derive(Debug)]
pub struct SessionWriter {
    path: PathBuf,
    file: File,
    header: SessionHeader,
    /// The header id as telemetry carries it (checked when the file was read).
    exported_id: String,
    leaf: Option<String>,
    entries: Vec<Entry>,
    recovered: Option<RecoveredTail>,
    migrated_from: Option<u32>,
    unknown_lines: Vec<usize>,
}

/// A torn last line found when a session was reopened: moved to a side file before appending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredTail {
    /// 1-based line number it had in the session.
    pub line: usize,
    /// Its bytes, now in this file (next to the session).
    pub saved_to: PathBuf,
}

impl SessionWriter {
    /// Creates a new session file (fails if it exists).
    pub fn create(path: &Path, cwd: &Path) -> Result<Self, SessionError> {
        let header = SessionHeader {
            kind: "session".into(),
            version: 3,
            id: new_session_id(),
            timestamp: iso8601(now_millis()),
            cwd: cwd.display().to_string(),
            parent_session: None,
        };
        pi_observe_core::create_private_parent(path).map_err(|e| SessionError::io(path, e))?;
        let file = pi_observe_core::private_file_options()
            .append(true)
            .create_new(true)
            .open(path)
            .map_err(|e| SessionError::io(path, e))?;
        let mut writer = SessionWriter {
            path: path.to_owned(),
            file,
            exported_id: pi_observe_core::id_or_invalid(&header.id),
            header,
            leaf: None,
            entries: Vec::new(),
            recovered: None,
            migrated_from: None,
            unknown_lines: Vec::new(),
        };
        let line = serde_json::to_string(&writer.header).map_err(|e| SessionError::encode(path, e))?;
        writer.write_line(&line)?;
        Ok(writer)
    }

    /// Opens an existing session for appending (leaf = last entry), or creates it if missing.
    /// A torn last line is first moved to a side file (`<session>.torn-<millis>`, see
    /// [`SessionWriter::recovered_tail`]) and cut off, so the next append starts on a fresh line
    /// and no byte is destroyed.
    pub fn open_or_create(path: &Path, cwd: &Path) -> Result<Self, SessionError> {
        if std::fs::symlink_metadata(path).is_err() {
            return Self::create(path, cwd);
        }
        let session = read_session(path)?;
        let mut recovered = None;
        if let Some(torn) = session.torn_tail {
            let saved_to = save_torn_tail(path, torn.offset)?;
            recovered = Some(RecoveredTail { line: torn.line, saved_to });
        }
        // A file in an older format is written back as v3 first, as upstream pi does: every
        // field kept, atomically (a crash leaves the old file or the new one, never half).
        if let Some(lines) = session.migrated_lines() {
            let tmp = path.with_extension(format!("jsonl.migrate-{}", std::process::id()));
            let mut text = lines.join("\n");
            text.push('\n');
            let written =
                pi_observe_core::write_private(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(SessionError::io(path, e));
            }
        }
        let mut file = OpenOptions::new().append(true).open(path).map_err(|e| SessionError::io(path, e))?;
        if session.migrated_from.is_none() {
            if let Some(torn) = session.torn_tail {
                file.set_len(torn.offset).map_err(|e| SessionError::io(path, e))?;
            }
            if session.needs_newline {
                file.write_all(b"\n").map_err(|e| SessionError::io(path, e))?;
            }
        }
        let leaf = session.entries.last().map(|e| e.id.clone());
        Ok(SessionWriter {
            path: path.to_owned(),
            file,
            exported_id: session.exported_id,
            header: session.header,
            leaf,
            entries: session.entries,
            recovered,
            migrated_from: session.migrated_from,
            unknown_lines: session.unknown_lines,
        })
    }

    /// The format version the file had when it was opened, when older than 3 (it was then
    /// written back as v3, every field kept).
    pub fn migrated_from(&self) -> Option<u32> {
        self.migrated_from
    }

    /// Line numbers of the entries this version does not understand (kept as written).
    pub fn unknown_lines(&self) -> &[usize] {
        &self.unknown_lines
    }

    /// The torn last line moved aside when this session was reopened, if there was one.
    pub fn recovered_tail(&self) -> Option<&RecoveredTail> {
        self.recovered.as_ref()
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.header.id
    }

    /// The session id as telemetry carries it: the id when it is shaped like one, else
    /// `invalid` (a file's header is outside text; see [`pi_observe_core::id_or_invalid`]).
    pub fn exported_id(&self) -> &str {
        &self.exported_id
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current leaf entry id.
    pub fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// Moves the leaf to an existing entry (or to the start with `None`): the next append
    /// becomes its child, starting a new branch.
    pub fn set_leaf(&mut self, id: Option<&str>) -> Result<(), SessionError> {
        if let Some(id) = id
            && !self.entries.iter().any(|e| e.id == id)
        {
            return Err(SessionError::UnknownEntry { path: self.path.display().to_string(), id: id.to_owned() });
        }
        self.leaf = id.map(str::to_owned);
        Ok(())
    }

    /// The entries from the first one down to `leaf` (the current branch for the leaf).
    pub fn branch(&self, leaf: Option<&str>) -> Vec<&Entry> {
        let by_id: std::collections::HashMap<&str, &Entry> = self.entries.iter().map(|e| (e.id.as_str(), e)).collect();
        let mut path = Vec::new();
        let mut next = leaf;
        while let Some(id) = next {
            let Some(entry) = by_id.get(id) else { break };
            path.push(*entry);
            next = entry.parent_id.as_deref();
            if path.len() > self.entries.len() {
                break; // a cycle in a hand-edited file: stop rather than loop
            }
        }
        path.reverse();
        path
    }

    /// Every entry written or loaded, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Appends an entry as a child of the current leaf and makes it the leaf; returns its id.
    /// Traced as a `pi.agent.session.append_entry` event on the current operation, or (storage
    /// as spans, [`super::trace_storage_as_spans`]) as a span with a `pi.session.write` child.
    pub fn append(&mut self, kind: EntryKind) -> Result<String, SessionError> {
        let entry_type = kind.type_name();
        if !super::storage_spans() {
            let entry =
                Entry { id: new_entry_id(), parent_id: self.leaf.clone(), timestamp: iso8601(now_millis()), kind };
            let line = serde_json::to_string(&entry).map_err(|e| SessionError::encode(&self.path, e))?;
            self.write_line(&line)?;
            record_event(names::AGENT_SESSION_APPEND_ENTRY, || {
                Payload::new().safe(names::ENTRY_TYPE, entry_type).safe(names::BYTES, line.len() + 1)
            });
            let id = entry.id.clone();
            self.leaf = Some(id.clone());
            self.entries.push(entry);
            return Ok(id);
        }
        trace_operation_sync(
            names::AGENT_SESSION_APPEND_ENTRY,
            || Payload::new().safe(names::ENTRY_TYPE, entry_type),
            |_| {
                let entry =
                    Entry { id: new_entry_id(), parent_id: self.leaf.clone(), timestamp: iso8601(now_millis()), kind };
                let line = serde_json::to_string(&entry).map_err(|e| SessionError::encode(&self.path, e))?;
                trace_operation_sync(
                    names::SESSION_WRITE,
                    || Payload::new().safe(names::BYTES, line.len() + 1).safe(names::ENTRY_COUNT, 1),
                    |_| self.write_line(&line),
                )?;
                let id = entry.id.clone();
                self.leaf = Some(id.clone());
                self.entries.push(entry);
                Ok(id)
            },
        )
    }

    /// A new session at `path` (which must not exist) holding this session's branch up to
    /// `entry_id` — the same entries with the same ids — whose header names this file as its
    /// `parentSession` (upstream's fork). Its leaf is `entry_id`.
    pub fn fork(&self, entry_id: &str, path: &Path, cwd: &Path) -> Result<SessionWriter, SessionError> {
        if !self.entries.iter().any(|e| e.id == entry_id) {
            return Err(SessionError::UnknownEntry { path: self.path.display().to_string(), id: entry_id.to_owned() });
        }
        let branch: Vec<Entry> = self.branch(Some(entry_id)).into_iter().cloned().collect();
        let mut fork = SessionWriter::create(path, cwd)?;
        fork.header.parent_session = Some(self.path.display().to_string());
        // The header was written by `create`; write it again with the parent, atomically.
        let header = serde_json::to_string(&fork.header).map_err(|e| SessionError::encode(path, e))?;
        let mut text = header;
        text.push('\n');
        for entry in &branch {
            text.push_str(&serde_json::to_string(entry).map_err(|e| SessionError::encode(path, e))?);
            text.push('\n');
        }
        let tmp = path.with_extension(format!("jsonl.fork-{}", std::process::id()));
        pi_observe_core::write_private(&tmp, text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| SessionError::io(path, e))?;
        fork.file = OpenOptions::new().append(true).open(path).map_err(|e| SessionError::io(path, e))?;
        fork.leaf = Some(entry_id.to_owned());
        fork.entries = branch;
        Ok(fork)
    }

    /// The session this one was forked from, if any.
    pub fn parent_session(&self) -> Option<&str> {
        self.header.parent_session.as_deref()
    }

    /// Appends one whole line, or nothing: a write cut short (ENOSPC mid-line) is cut back to
    /// the file's length before it, so the file never ends in half a line.
    fn write_line(&mut self, line: &str) -> Result<(), SessionError> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let before = self.file.metadata().map(|m| m.len());
        let written = pi_observe_core::append_whole(|| self.file.write_all(&buf).and_then(|()| self.file.flush()));
        if let (Err(_), Ok(before)) = (&written, before) {
            let _ = self.file.set_len(before);
        }
        written.map_err(|e| SessionError::io(&self.path, e))
    }
}

/// Copies the bytes of `path` from `offset` to a new side file next to it (synced), and returns
/// the side file's path.
fn save_torn_tail(path: &Path, offset: u64) -> Result<PathBuf, SessionError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut tail = Vec::new();
    let mut source = File::open(path).map_err(|e| SessionError::io(path, e))?;
    source.seek(SeekFrom::Start(offset)).map_err(|e| SessionError::io(path, e))?;
    source.read_to_end(&mut tail).map_err(|e| SessionError::io(path, e))?;
    let stamp = now_millis();
    let mut attempt = 0u32;
    let (side, mut out) = loop {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(if attempt == 0 { format!(".torn-{stamp}") } else { format!(".torn-{stamp}-{attempt}") });
        let side = path.with_file_name(name);
        match pi_observe_core::private_file_options().write(true).create_new(true).open(&side) {
            Ok(file) => break (side, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 1000 => attempt += 1,
            Err(e) => return Err(SessionError::io(&side, e)),
        }
    };
    out.write_all(&tail).and_then(|()| out.sync_all()).map_err(|e| SessionError::io(&side, e))?;
    Ok(side)
}
