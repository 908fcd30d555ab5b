//! Attributed usage of a session file read as a stream: blocks of whole lines, each line parsed
//! only for what the report needs (ids, type, model, attribution, usage — message content is
//! skipped unread), optionally on several threads, then folded in file order through the entry
//! tree. Memory is bounded by the number of entries, not the file size. Gives the same rows as
//! [`attributed_usage`](super::attributed_usage) over [`read_session`](super::read_session).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::reader::{SessionError, TornTail};
use super::report::AttributedUsage;

mod blocks;
mod json;
mod line;
mod usage;
use blocks::{block_reader, branch_targets, expected_entries, fold_blocks};
use line::{Billed, Change, Parsed, ParsedLine};

/// What a scan met besides the rows it reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanSummary {
    /// A torn last line (a crash mid-append), skipped.
    pub torn_tail: Option<TornTail>,
    /// Entries that carry usage pi could not read (a shape this version does not know): their
    /// tokens and cost are missing from the rows.
    pub unreadable_usage: usize,
}

/// What is in force on a branch: attribution and model (shared until they change).
#[derive(Debug, Default)]
struct State {
    attribution: Arc<super::report::Attribution>,
    model: Option<Arc<str>>,
}

/// Streams `path`, calling `each` with every usage-carrying entry, attributed through the entry
/// tree. A torn last line (a crash mid-append) is skipped and returned; any other bad line is an
/// error naming it.
pub fn scan_usage(path: &Path, each: impl FnMut(AttributedUsage)) -> Result<ScanSummary, SessionError> {
    scan_usage_counting(path, &AtomicU64::new(0), 1, each)
}

/// [`scan_usage`] that adds the bytes it has read to `read` as it goes (for a progress display on
/// another thread) and, with `threads` > 1, parses blocks of lines on that many threads while one
/// more folds them in file order — the rows and errors are the same as with one thread.
pub fn scan_usage_counting(
    path: &Path,
    read: &AtomicU64,
    threads: usize,
    each: impl FnMut(AttributedUsage),
) -> Result<ScanSummary, SessionError> {
    scan_blocks(path, read, (threads, BLOCK_BYTES, MAX_KEPT_ENTRIES), each)
}

/// The entries whose branch state the map keeps, at most (≈ 30 bytes each with the map's spare
/// room: 30 MiB); a file expected to hold more is read in two passes and the map keeps only
/// branch points, so memory does not grow with the entry count.
const MAX_KEPT_ENTRIES: u64 = 1 << 20;

/// Lines are handed to parser threads in blocks of this many bytes, completed to a whole line.
const BLOCK_BYTES: usize = 1 << 20;

fn scan_blocks(
    path: &Path,
    read: &AtomicU64,
    (threads, block_bytes, max_kept): (usize, usize, u64),
    each: impl FnMut(AttributedUsage),
) -> Result<ScanSummary, SessionError> {
    let file = std::fs::File::open(path).map_err(|e| SessionError::io(path, e))?;
    let metadata = file.metadata().map_err(|e| SessionError::io(path, e))?;
    if !metadata.is_file() {
        return Err(SessionError::NotAFile { path: path.display().to_string() });
    }
    let mut fold = Fold::new(path, each);
    fold.file_bytes = metadata.len();
    // A file of more entries than the map holds in its budget is read twice: first for the
    // entries some later entry branches from (all the map then keeps), then for its rows.
    if expected_entries(&file, metadata.len()) > max_kept {
        fold.targets = Some(branch_targets(path, block_bytes)?);
    }
    let next_block = block_reader(file, block_bytes, read);
    let torn_tail = fold_blocks(&mut fold, next_block, threads)?;
    Ok(ScanSummary { torn_tail, unreadable_usage: fold.unreadable_usage })
}

/// The in-order half of a scan: line numbers, the header rule, the entry tree and its states.
struct Fold<'p, F> {
    path: &'p Path,
    each: F,
    // Keyed by a 64-bit hash of the entry id (8 bytes an entry instead of a string).
    states: HashMap<u64, Rc<State>, BuildHasherDefault<PreHashed>>,
    /// Entries not yet in `states`, in file order: most entries follow the one before them
    /// (served by `last`), so the map is filled from here only when a line names another
    /// parent — appending is cheaper than inserting at a random place in a large map.
    pending: Vec<(u64, Rc<State>)>,
    /// The distinct states seen, by their hash: every entry's state is one of these, so memory
    /// follows how many (owner, model) pairs a file has, not how often they change.
    distinct: HashMap<u64, Vec<Rc<State>>>,
    header: bool,
    /// A v1 file: entries have no ids and each one follows the previous.
    linear: bool,
    previous: Option<u64>,
    number: usize,
    offset: u64,
    unreadable_usage: usize,
    /// The file's size: with the first block's lines, how many entries to make room for at once
    /// (the map is not grown, and copied, twenty times over).
    file_bytes: u64,
    /// In a two-pass scan, the entries other lines branch from: the map keeps only these, and
    /// the entry just before (`last`) serves the others.
    targets: Option<std::collections::HashSet<u64>>,
    last: Option<(u64, Rc<State>)>,
}

impl<'p, F: FnMut(AttributedUsage)> Fold<'p, F> {
    fn new(path: &'p Path, each: F) -> Self {
        Fold {
            path,
            each,
            states: HashMap::default(),
            pending: Vec::new(),
            distinct: HashMap::new(),
            header: false,
            linear: false,
            previous: None,
            number: 0,
            offset: 0,
            unreadable_usage: 0,
            file_bytes: 0,
            targets: None,
            last: None,
        }
    }

    fn block(&mut self, lines: Vec<ParsedLine>) -> Result<Option<TornTail>, SessionError> {
        if self.offset == 0 && !lines.is_empty() && self.targets.is_none() {
            let bytes: usize = lines.iter().map(|l| l.length).sum();
            let expected = self.file_bytes / (bytes / lines.len()).max(1) as u64;
            // At most 16 M entries' room ahead of time; a bigger file grows the list as it goes.
            self.pending.reserve(expected.min(1 << 24) as usize);
        }
        for line in lines {
            self.number += 1;
            let start = self.offset;
            self.offset += line.length as u64;
            let parsed = match line.parsed {
                Ok(Some(parsed)) => parsed,
                Ok(None) => continue,
                Err(_) if !line.terminated => return Ok(Some(TornTail { offset: start, line: self.number })),
                Err(reason) => return Err(self.corrupt(reason)),
            };
            self.entry(parsed)?;
        }
        Ok(None)
    }

    fn entry(&mut self, parsed: Parsed) -> Result<(), SessionError> {
        if !self.header {
            if !parsed.session_header {
                return Err(SessionError::NoHeader { path: self.path.display().to_string() });
            }
            self.header = true;
            self.linear = parsed.version.unwrap_or(1) < 2;
            return Ok(());
        }
        let ids = match (self.linear, parsed.ids) {
            (true, _) => Some((key(&format!("{:08x}", self.number)), self.previous)),
            (false, ids) => ids,
        };
        let Some((id, parent)) = ids else { return Err(self.corrupt("bad entry (no id)".into())) };
        self.previous = Some(id);
        let inherited = match (parent, &self.last) {
            (Some(p), Some((last, state))) if p == *last => state.clone(),
            (Some(p), _) => {
                // In file order, so a repeated id keeps its last state, as it would inserted.
                self.states.extend(self.pending.drain(..));
                self.states.get(&p).cloned().unwrap_or_default()
            }
            (None, _) => Rc::default(),
        };
        let state = apply(parsed.change, inherited.clone());
        let state = if Rc::ptr_eq(&state, &inherited) { state } else { self.intern(state) };
        self.unreadable_usage += usize::from(parsed.unreadable_usage);
        if let Some(billed) = parsed.billed {
            let Billed { usage, day, assistant } = *billed;
            (self.each)(AttributedUsage {
                day,
                attribution: state.attribution.clone(),
                model: state.model.as_deref().unwrap_or("unknown").to_owned(),
                usage,
                assistant_message: assistant,
            });
        }
        if self.targets.as_ref().is_none_or(|targets| targets.contains(&id)) {
            self.pending.push((id, state.clone()));
        }
        self.last = Some((id, state));
        Ok(())
    }

    /// The state equal to `state` seen before, else `state` (kept from now on).
    fn intern(&mut self, state: Rc<State>) -> Rc<State> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        state.attribution.hash(&mut hasher);
        state.model.hash(&mut hasher);
        let same = self.distinct.entry(hasher.finish()).or_default();
        match same.iter().find(|s| s.attribution == state.attribution && s.model == state.model) {
            Some(seen) => seen.clone(),
            None => {
                same.push(state.clone());
                state
            }
        }
    }

    fn corrupt(&self, reason: String) -> SessionError {
        SessionError::Corrupt { path: self.path.display().to_string(), line: self.number, reason }
    }

    fn finish(&self) -> Result<Option<TornTail>, SessionError> {
        if !self.header {
            return Err(SessionError::NoHeader { path: self.path.display().to_string() });
        }
        Ok(None)
    }
}

/// The states map's hasher: its keys are already hashes ([`key`]), so they are used as they are.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; fold anything else in rather than ignore it.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// A stable 64-bit key for an entry id (collisions are astronomically unlikely for the ids of
/// one session).
fn key(id: &str) -> u64 {
    use std::hash::BuildHasher;
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id)
}

/// The state after a change; unchanged state is shared, not copied (most entries keep the
/// branch's model and owner).
fn apply(change: Change, inherited: Rc<State>) -> Rc<State> {
    match change {
        Change::Keep => inherited,
        Change::Attribution(attribution) if *inherited.attribution == *attribution => inherited,
        Change::Attribution(attribution) => Rc::new(State { attribution, model: inherited.model.clone() }),
        Change::Model(model) if inherited.model.as_deref() == Some(&*model) => inherited,
        Change::Model(model) => Rc::new(State { attribution: inherited.attribution.clone(), model: Some(model) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ATTRIBUTION_CUSTOM_TYPE;

    /// A session of `turns` prompts by alternating users, on two branches, as JSON lines.
    fn session_text(turns: usize) -> String {
        let mut text =
            String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n\n");
        let mut parent = String::from("null");
        for turn in 0..turns {
            let user = ["alice", "bob"][turn % 2];
            let (a, m) = (format!("a{turn}"), format!("m{turn}"));
            text += &format!(
                "{{\"type\":\"custom\",\"id\":\"{a}\",\"parentId\":{parent},\"customType\":\"{ATTRIBUTION_CUSTOM_TYPE}\",\"data\":{{\"userId\":\"{user}\"}}}}\n"
            );
            text += &format!(
                "{{\"type\":\"message\",\"id\":\"{m}\",\"parentId\":\"{a}\",\"timestamp\":\"2026-12-0{}T00:00:00Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}],\"provider\":\"p\",\"model\":\"m{}\",\"usage\":{{\"input\":{turn},\"output\":1,\"cacheRead\":0,\"cacheWrite\":0,\"totalTokens\":{},\"cost\":{{\"input\":0,\"output\":0,\"cacheRead\":0,\"cacheWrite\":0,\"total\":0.5}}}}}}}}\n",
                1 + turn % 3,
                "x".repeat(turn % 50),
                turn % 4,
                turn + 1
            );
            // Every third prompt branches from the first one instead of the last.
            parent = if turn % 3 == 2 { "\"m0\"".into() } else { format!("\"{m}\"") };
        }
        text
    }

    fn scan(
        path: &Path,
        threads: usize,
        block_bytes: usize,
    ) -> (Result<Option<TornTail>, String>, Vec<AttributedUsage>, u64) {
        let (mut rows, read) = (Vec::new(), AtomicU64::new(0));
        let result = scan_blocks(path, &read, (threads, block_bytes, MAX_KEPT_ENTRIES), |row| rows.push(row))
            .map(|summary| summary.torn_tail)
            .map_err(|e| e.to_string());
        (result, rows, read.into_inner())
    }

    #[test]
    fn parallel_blocks_give_the_rows_and_errors_of_one_thread() {
        let dir = std::env::temp_dir().join(format!("pi-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let whole = session_text(300);
        let cases = [
            (whole.clone(), "Ok(None)"),
            (format!("{whole}{{\"type\":\"message\",\"id\":\"torn"), "line: 603"),
            (whole.replacen("{\"type\":\"custom\",\"id\":\"a7\"", "{oops", 1), "s.jsonl:17: not a session entry"),
            (whole.replacen("\"id\":\"m9\",", "", 1), "s.jsonl:22: bad entry (no id)"),
            (whole.lines().skip(2).collect::<Vec<_>>().join("\n"), "not a session file (no header line)"),
        ];
        for (text, says) in cases {
            std::fs::write(&path, &text).unwrap();
            let (expected, rows, read) = scan(&path, 1, 1 << 20);
            assert!(format!("{expected:?}").contains(says), "{expected:?} should say {says}");
            assert_eq!(read, text.len() as u64);
            for (threads, block) in [(2, 1), (2, 97), (3, 4096), (1, 64)] {
                let (got, got_rows, got_read) = scan(&path, threads, block);
                assert_eq!(got, expected, "{threads} threads, {block}-byte blocks");
                if expected.is_ok() {
                    assert_eq!(got_rows, rows, "{threads} threads, {block}-byte blocks");
                }
                assert!(got_read <= text.len() as u64);
            }
            if let Ok(None) = expected {
                assert_eq!(rows.len(), 300);
                assert_eq!(rows.iter().filter(|r| r.user() == Some("bob")).count(), 150);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Owners change at every prompt here (alice, bob, alice…) and models cycle through four:
    /// the states kept are the distinct (owner, model) pairs, not one per change.
    #[test]
    fn states_are_kept_once_however_often_they_change() {
        let text = session_text(400);
        let mut fold = Fold::new(Path::new("s.jsonl"), |_| {});
        assert!(fold.block(line::parse_block(text.as_bytes(), &mut line::Recent::default())).unwrap().is_none());
        let kept: usize = fold.distinct.values().map(Vec::len).sum();
        // Owner-only states (before a prompt's reply) and owner + model: at most 2 + 2 × 4.
        assert!(kept <= 10, "{kept} states kept for 800 entries");
        assert_eq!(fold.states.len() + fold.pending.len(), 800);
    }

    /// A file of more entries than the map's budget is read twice and the map keeps only branch
    /// points: the rows are those of one pass (every third prompt here branches from the first).
    #[test]
    fn a_two_pass_scan_keeps_only_branch_points_and_gives_the_same_rows() {
        let dir = std::env::temp_dir().join(format!("pi-scan-two-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        std::fs::write(&path, session_text(300)).unwrap();
        let rows = |max_kept: u64, threads: usize| {
            let (mut rows, read) = (Vec::new(), AtomicU64::new(0));
            scan_blocks(&path, &read, (threads, 4096, max_kept), |row| rows.push(row)).unwrap();
            rows.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>()
        };
        let one_pass = rows(MAX_KEPT_ENTRIES, 1);
        assert_eq!(one_pass.len(), 300);
        assert_eq!(rows(0, 1), one_pass);
        assert_eq!(rows(0, 3), one_pass);
        assert_eq!(branch_targets(&path, 97).unwrap(), [key("m0")].into_iter().collect());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
