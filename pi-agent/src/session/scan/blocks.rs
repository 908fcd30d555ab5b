//! Reading a session file in blocks of whole lines for the scan: the reader (straight into
//! recycled buffers), the parallel parse folded in file order, and the first pass of a two-pass
//! scan (the branch points).

use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use super::line::{ParsedLine, Recent, ids, parse_block};
use super::{Fold, SessionError, TornTail};
use crate::session::report::AttributedUsage;

/// How many entries a file of `bytes` holds, judged by its first 64 KiB's lines.
pub(super) fn expected_entries(file: &std::fs::File, bytes: u64) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; 64 * 1024];
    let got = file.read_at(&mut head, 0).unwrap_or(0);
    let lines = memchr::memchr_iter(b'\n', &head[..got]).count().max(1) as u64;
    bytes / (got as u64 / lines).max(1)
}

/// A reader of blocks of whole lines from `file`, each at least `block_bytes` long (but the
/// last), straight into the buffer it is given (no buffer in between to copy out of); the part
/// line at a block's end is carried to the front of the next one. Buffers come back from the
/// parsers: at most a few are ever made, so memory stays flat and no block's pages are faulted
/// in afresh. Adds what it hands out to `read`.
pub(super) fn block_reader(
    mut file: std::fs::File,
    block_bytes: usize,
    read: &AtomicU64,
) -> impl FnMut(Vec<u8>) -> std::io::Result<Option<Vec<u8>>> + Send + '_ {
    let mut carry = Vec::new();
    move |mut block: Vec<u8>| {
        block.clear();
        block.reserve(block_bytes + carry.len() + 4096);
        block.append(&mut carry);
        loop {
            let before = block.len();
            (&mut file).take(block_bytes as u64).read_to_end(&mut block)?;
            // The file ended: the block takes all of it (an unterminated last line too).
            if block.len() - before < block_bytes {
                break;
            }
            // A whole number of lines: the rest starts the next block. No line end in what was
            // read: read on (a line longer than a block).
            if let Some(last) = memchr::memrchr(b'\n', &block[before..]) {
                carry.extend_from_slice(&block[before + last + 1..]);
                block.truncate(before + last + 1);
                break;
            }
        }
        read.fetch_add(block.len() as u64, Ordering::Relaxed);
        Ok((!block.is_empty()).then_some(block))
    }
}

/// The first of two passes over a file with many entries: the ids some entry names as its
/// parent without being the entry just before it — the branch points, the only entries whose
/// state a later line can ask for out of order. Lines it cannot read are left to the second
/// pass to report.
pub(super) fn branch_targets(path: &Path, block_bytes: usize) -> Result<std::collections::HashSet<u64>, SessionError> {
    let file = std::fs::File::open(path).map_err(|e| SessionError::io(path, e))?;
    let ignored = AtomicU64::new(0);
    let mut next_block = block_reader(file, block_bytes, &ignored);
    let (mut targets, mut previous, mut buffer) = (std::collections::HashSet::new(), None, Vec::new());
    while let Some(block) = next_block(buffer).map_err(|e| SessionError::io(path, e))? {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &block).chain(std::iter::once(block.len())) {
            let line = &block[start..end];
            start = end + 1;
            let Some((Some(id), parent)) = ids(line) else { continue };
            if let Some(parent) = parent.filter(|p| Some(*p) != previous) {
                targets.insert(parent);
            }
            previous = Some(id);
        }
        buffer = block;
    }
    Ok(targets)
}

/// Reads every block through `fold`, parsing on `threads` threads (this one among them);
/// stops at a torn tail.
pub(super) fn fold_blocks(
    fold: &mut Fold<'_, impl FnMut(AttributedUsage)>,
    next_block: impl FnMut(Vec<u8>) -> std::io::Result<Option<Vec<u8>>> + Send,
    threads: usize,
) -> Result<Option<TornTail>, SessionError> {
    let path = fold.path;
    // Each thread reads its own next block (taking turns at the file) and parses it while the
    // bytes are still in its core's cache. This thread also folds the blocks in file order as
    // they become ready, so no thread waits only to fold.
    let reader = std::sync::Mutex::new(Reader { next_block, seq: 0, failed: None });
    let folded = std::thread::scope(|scope| {
        let (parsed_tx, parsed) = std::sync::mpsc::sync_channel::<(usize, Vec<ParsedLine>)>(threads);
        for _ in 1..threads {
            let (reader, parsed_tx) = (&reader, parsed_tx.clone());
            scope.spawn(move || {
                let (mut recent, mut buffer) = (Recent::default(), Vec::new());
                // Ends at the end of the file, at a read error, or when the fold stopped early
                // and hung up. The lock is held while reading a block, never while parsing one.
                loop {
                    // Not in the loop's condition: the guard would live through the parsing.
                    let next = reader.lock().unwrap_or_else(|e| e.into_inner()).next(buffer);
                    let Some((seq, block)) = next else { break };
                    if parsed_tx.send((seq, parse_block(&block, &mut recent))).is_err() {
                        break;
                    }
                    buffer = block;
                }
            });
        }
        drop(parsed_tx);
        fold_in_order(&reader, parsed, fold, threads)
    });
    match folded? {
        Some(torn) => Ok(Some(torn)),
        None => match reader.into_inner().unwrap_or_else(|e| e.into_inner()).failed {
            Some(e) => Err(SessionError::io(path, e)),
            None => fold.finish(),
        },
    }
}

/// The file's blocks handed out in turn, numbered in file order; the first read error stops it.
struct Reader<F> {
    next_block: F,
    seq: usize,
    failed: Option<std::io::Error>,
}

impl<F: FnMut(Vec<u8>) -> std::io::Result<Option<Vec<u8>>>> Reader<F> {
    /// The next block, read into `buffer`, and its number; `None` at the end or after an error.
    fn next(&mut self, buffer: Vec<u8>) -> Option<(usize, Vec<u8>)> {
        if self.failed.is_some() {
            return None;
        }
        match (self.next_block)(buffer) {
            Ok(Some(block)) => {
                self.seq += 1;
                Some((self.seq - 1, block))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = Some(e);
                None
            }
        }
    }
}

/// Folds every block in file order as soon as it and all before it are parsed — by this thread
/// or by the others (`parsed`) — reading and parsing blocks itself while the next one is not
/// ready; returns (hanging up on the others) at the first torn tail or error.
fn fold_in_order(
    reader: &std::sync::Mutex<Reader<impl FnMut(Vec<u8>) -> std::io::Result<Option<Vec<u8>>>>>,
    parsed: std::sync::mpsc::Receiver<(usize, Vec<ParsedLine>)>,
    fold: &mut Fold<'_, impl FnMut(AttributedUsage)>,
    threads: usize,
) -> Result<Option<TornTail>, SessionError> {
    let (mut waiting, mut next) = (std::collections::BTreeMap::new(), 0);
    let (mut recent, mut buffer, mut reading) = (Recent::default(), Some(Vec::new()), true);
    loop {
        while let Some(lines) = waiting.remove(&next) {
            if let Some(torn) = fold.block(lines)? {
                return Ok(Some(torn));
            }
            next += 1;
        }
        waiting.extend(parsed.try_iter());
        if waiting.contains_key(&next) {
            continue;
        }
        // Parse a block here rather than wait, unless enough are parsed ahead already.
        if reading && waiting.len() < threads {
            let block = buffer.take().and_then(|b| reader.lock().unwrap_or_else(|e| e.into_inner()).next(b));
            match block {
                Some((seq, block)) => {
                    waiting.insert(seq, parse_block(&block, &mut recent));
                    buffer = Some(block);
                }
                None => reading = false,
            }
            continue;
        }
        // Wait for the next block from another thread. The channel closes once they have all
        // met the file's end: every block has then been folded (a thread that panicked
        // instead is reported by the scope).
        let Ok((seq, lines)) = parsed.recv() else { return Ok(None) };
        waiting.insert(seq, lines);
    }
}
