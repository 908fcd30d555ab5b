//! The spool directory: atomic writes, limits, listing, claims.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::batch::{self, BatchMeta};

/// Suffix of a batch waiting for delivery.
const BATCH: &str = ".batch";
/// Suffix of a file set aside because it could not be read.
const UNREADABLE: &str = ".unreadable";
/// Temporary files older than this were left by a process that died while spooling.
const STALE_TMP: Duration = Duration::from_secs(3600);
/// Longest header line read when listing.
const MAX_HEADER: u64 = 64 * 1024;

/// Where the spool lives and how much it may hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolConfig {
    /// The spool directory (created on the first write, mode 0700).
    pub dir: PathBuf,
    /// Most bytes kept; past it the oldest batches are removed (default 64 MiB).
    pub max_bytes: u64,
    /// Oldest batch kept (default 7 days).
    pub max_age: Duration,
    /// The content kinds the writing sink captures now (`prompt`, …), stamped on every batch it
    /// writes.
    pub capture: Vec<String>,
    /// The most content a batch may hold to be delivered (a managed policy's capture cap for
    /// the delivering sink): a batch spooled under a wider capture is removed and counted,
    /// never sent. `None` = no cap.
    pub capture_cap: Option<Vec<String>>,
}

impl SpoolConfig {
    /// Default size cap: 64 MiB.
    pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;
    /// Default age cap: 7 days.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

    /// A spool in `dir` with the default limits.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SpoolConfig {
            dir: dir.into(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_age: Self::DEFAULT_MAX_AGE,
            capture: Vec::new(),
            capture_cap: None,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    spooled_batches: AtomicU64,
    spooled_items: AtomicU64,
    spooled_bytes: AtomicU64,
    delivered_batches: AtomicU64,
    delivered_items: AtomicU64,
    rejected_batches: AtomicU64,
    rejected_items: AtomicU64,
    full_batches: AtomicU64,
    full_items: AtomicU64,
    expired_batches: AtomicU64,
    expired_items: AtomicU64,
    over_cap_batches: AtomicU64,
    over_cap_items: AtomicU64,
    unreadable: AtomicU64,
    write_failed: AtomicU64,
}

/// What this process did with the spool. Items are the sinks' units (spans, envelopes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpoolStats {
    /// Batches written to the spool.
    pub spooled_batches: u64,
    /// Items in them.
    pub spooled_items: u64,
    /// Bytes written (headers included).
    pub spooled_bytes: u64,
    /// Spooled batches delivered and removed.
    pub delivered_batches: u64,
    /// Items in them.
    pub delivered_items: u64,
    /// Spooled batches the receiver refused for good (4xx other than 401/403/408/429), removed.
    pub rejected_batches: u64,
    /// Items in them.
    pub rejected_items: u64,
    /// Batches removed because the spool was over its size cap (oldest first).
    pub dropped_full_batches: u64,
    /// Items in them.
    pub dropped_full_items: u64,
    /// Batches removed because they were older than the age cap.
    pub dropped_expired_batches: u64,
    /// Items in them.
    pub dropped_expired_items: u64,
    /// Batches removed unsent because they were spooled under a wider capture than the
    /// policy in force allows ([`SpoolConfig::capture_cap`]).
    pub dropped_over_cap_batches: u64,
    /// Items in them.
    pub dropped_over_cap_items: u64,
    /// Files found torn or unreadable (set aside, each named once in `diagnostics`).
    pub unreadable: u64,
    /// Batches that could not be written (disk full, no permission); their items are lost.
    pub write_failed: u64,
    /// Of the batches this process spooled, those no longer in the spool folder although this
    /// process did not remove them (another run delivered them, or someone removed them):
    /// items per signal (`traces`, `metrics`, `logs`, `envelope`). "Spooled for the next run"
    /// is true only of the rest.
    pub gone_items: std::collections::BTreeMap<String, u64>,
    /// One line per problem worth telling the user.
    pub diagnostics: Vec<String>,
}

/// What the spool holds now (all processes' batches).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpoolStatus {
    /// Batches waiting.
    pub batches: u64,
    /// Items in them.
    pub items: u64,
    /// Bytes on disk (batches and set-aside files).
    pub bytes: u64,
    /// When the oldest waiting batch was spooled (ms since the Unix epoch).
    pub oldest_ms: Option<u64>,
    /// Batches waiting for other credentials (refused with 401/403).
    pub held: u64,
    /// Files set aside as unreadable.
    pub unreadable: u64,
}

/// A batch waiting in the spool, as listed (not yet claimed).
#[derive(Debug, Clone)]
pub struct Pending {
    path: PathBuf,
    /// Where it was going.
    pub meta: BatchMeta,
}

/// A batch this process holds exclusively until it is [delivered](Spool::delivered),
/// [refused](Spool::refused), [rejected](Spool::rejected) or dropped (released for others).
#[derive(Debug)]
pub struct Claimed {
    /// Holds the lock for as long as the claim lives.
    _lock: File,
    path: PathBuf,
    /// Where it was going.
    pub meta: BatchMeta,
    /// The bytes to send.
    pub body: Vec<u8>,
}

/// A spool directory. Cheap to create: nothing touches the disk until a batch is written or
/// the spool is listed.
#[derive(Debug)]
pub struct Spool {
    config: SpoolConfig,
    counters: Counters,
    diagnostics: Mutex<Vec<String>>,
    /// The spool's size as of the last scan plus what this process wrote since, and when that
    /// scan was: a write only rescans the directory when the cap may be passed or the scan is
    /// old (other processes write too), not once per batch.
    estimate: Mutex<Option<(u64, Instant)>>,
    /// The batches this process wrote and has not removed itself: path → (signal, items).
    ours: Mutex<HashMap<PathBuf, (String, u64)>>,
}

/// Longest time a write trusts the size estimate instead of rescanning the directory.
const RESCAN: Duration = Duration::from_secs(60);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The creation time a batch file's name starts with.
fn created_of(name: &str) -> Option<u64> {
    name.split('-').next()?.parse().ok()
}

/// A directory entry of the spool.
struct Entry {
    path: PathBuf,
    name: String,
    size: u64,
    /// The older of the name's creation time and the file's modification time (Unix ms).
    created_ms: u64,
    unreadable: bool,
}

impl Spool {
    /// A spool with `config`'s directory and limits.
    pub fn new(config: SpoolConfig) -> Self {
        Spool {
            config,
            counters: Counters::default(),
            diagnostics: Mutex::default(),
            estimate: Mutex::default(),
            ours: Mutex::default(),
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &SpoolConfig {
        &self.config
    }

    /// Writes one batch atomically (temporary file, rename), then enforces the limits when the
    /// spool may be past them.
    /// A failure is counted and returned; nothing half-written is left under a batch name.
    ///
    /// The batch is not synced to the disk (ADR 0032): it outlives the process at once (a
    /// crash, a kill) and a power cut once the kernel writes it back, as the session it was
    /// made from does. A batch a power cut tore is set aside as unreadable, counted.
    pub fn write(&self, meta: &BatchMeta, body: &[u8]) -> io::Result<()> {
        let result = self.write_file(meta, body);
        match &result {
            Ok((bytes, path)) => {
                let mut ours = self.ours.lock().unwrap_or_else(|e| e.into_inner());
                ours.insert(path.clone(), (meta.signal.clone(), meta.items));
                drop(ours);
                let bytes = *bytes;
                self.counters.spooled_batches.fetch_add(1, Relaxed);
                self.counters.spooled_items.fetch_add(meta.items, Relaxed);
                self.counters.spooled_bytes.fetch_add(bytes, Relaxed);
                if self.may_be_past_limits(bytes) {
                    self.enforce_limits();
                }
            }
            Err(e) => {
                if self.counters.write_failed.fetch_add(1, Relaxed) == 0 {
                    self.note(format!("spool {}: cannot write a batch ({e})", self.config.dir.display()));
                }
            }
        }
        result.map(|_| ())
    }

    fn write_file(&self, meta: &BatchMeta, body: &[u8]) -> io::Result<(u64, PathBuf)> {
        let dir = &self.config.dir;
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir)?;
        let mut meta = meta.clone();
        if meta.created_ms == 0 {
            meta.created_ms = now_ms();
        }
        if meta.capture.is_none() {
            meta.capture = Some(self.config.capture.clone());
        }
        // Unique within the process across spools (the pid makes it unique across processes).
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Relaxed);
        let name = format!("{:013}-{}-{seq:06}{BATCH}", meta.created_ms, std::process::id());
        let tmp = dir.join(format!(".{name}.tmp"));
        let header = batch::header_line(&meta, body.len() as u64);
        let written = (|| {
            let mut file = private_file(&tmp)?;
            file.write_all(&header)?;
            file.write_all(body)?;
            fs::rename(&tmp, dir.join(&name))
        })();
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written?;
        Ok(((header.len() + body.len()) as u64, dir.join(&name)))
    }

    /// The spool's files, oldest first; stale temporary files are removed on the way.
    fn entries(&self) -> Vec<Entry> {
        let Ok(read) = fs::read_dir(&self.config.dir) else { return Vec::new() };
        let mut entries = Vec::new();
        for entry in read.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(metadata) = entry.metadata() else { continue };
            if !metadata.is_file() {
                continue;
            }
            if name.starts_with('.') && name.ends_with(".tmp") {
                let stale = metadata.modified().ok().and_then(|m| m.elapsed().ok()).is_some_and(|age| age > STALE_TMP);
                if stale {
                    let _ = fs::remove_file(entry.path());
                }
                continue;
            }
            let unreadable = name.ends_with(UNREADABLE);
            if !name.ends_with(BATCH) && !unreadable {
                continue;
            }
            // A batch is as old as the older of its name's time and its file's modification
            // time: a file aged by hand (or copied with its times) counts against the age cap too.
            let modified_ms = metadata
                .modified()
                .ok()
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let created_ms = created_of(&name).into_iter().chain(modified_ms).min().unwrap_or(0);
            entries.push(Entry { path: entry.path(), name, size: metadata.len(), created_ms, unreadable });
        }
        entries.sort_by(|a, b| (a.created_ms, &a.name).cmp(&(b.created_ms, &b.name)));
        entries
    }

    /// Adds `written` bytes to the estimate; true when the directory should be scanned.
    fn may_be_past_limits(&self, written: u64) -> bool {
        let mut estimate = self.estimate.lock().unwrap_or_else(|e| e.into_inner());
        match estimate.as_mut() {
            Some((total, at)) if at.elapsed() < RESCAN && *total + written <= self.config.max_bytes => {
                *total += written;
                false
            }
            _ => true,
        }
    }

    /// Removes batches past the age cap, then the oldest until the spool fits its size cap.
    /// Batches another process is delivering are left alone.
    pub fn enforce_limits(&self) {
        let now = now_ms();
        let max_age = self.config.max_age.as_millis() as u64;
        let mut total: u64 = 0;
        let mut kept = Vec::new();
        for entry in self.entries() {
            if now.saturating_sub(entry.created_ms) > max_age
                && let Some(items) = remove_unclaimed(&entry)
            {
                self.forget(&entry.path);
                if !entry.unreadable {
                    self.counters.expired_batches.fetch_add(1, Relaxed);
                    self.counters.expired_items.fetch_add(items, Relaxed);
                }
                continue;
            }
            total += entry.size;
            kept.push(entry);
        }
        for entry in kept {
            if total <= self.config.max_bytes {
                break;
            }
            if let Some(items) = remove_unclaimed(&entry) {
                self.forget(&entry.path);
                total -= entry.size;
                if !entry.unreadable {
                    self.counters.full_batches.fetch_add(1, Relaxed);
                    self.counters.full_items.fetch_add(items, Relaxed);
                }
            }
        }
        *self.estimate.lock().unwrap_or_else(|e| e.into_inner()) = Some((total, Instant::now()));
    }

    /// True when any batch waits, from the file names alone (no file is opened): the cheap
    /// check a sink makes at start-up before it starts a delivery thread.
    pub fn has_batches(&self) -> bool {
        std::fs::read_dir(&self.config.dir)
            .is_ok_and(|entries| entries.flatten().any(|e| e.file_name().to_string_lossy().ends_with(BATCH)))
    }

    /// The waiting batches `accept` wants, oldest first. Files that cannot be read are set
    /// aside and counted (and named once in [`SpoolStats::diagnostics`]).
    pub fn pending(&self, accept: impl Fn(&BatchMeta) -> bool) -> Vec<Pending> {
        let mut out = Vec::new();
        for entry in self.entries().into_iter().filter(|e| !e.unreadable) {
            match read_header(&entry.path, entry.size) {
                Ok(Some(meta)) => {
                    if accept(&meta) {
                        out.push(Pending { path: entry.path, meta });
                    }
                }
                Ok(None) => {} // gone meanwhile: another process delivered it
                Err(why) => self.set_aside(&entry.path, &why),
            }
        }
        out
    }

    /// Takes `pending` for this process, without waiting: `None` when another process holds it
    /// or has already delivered it (or it turned out unreadable: set aside and counted).
    pub fn claim(&self, pending: &Pending) -> Option<Claimed> {
        let mut file = OpenOptions::new().read(true).write(true).open(&pending.path).ok()?;
        file.try_lock().ok()?;
        // Delivered and removed by another process between our listing and our lock.
        if !still_linked(&file) {
            return None;
        }
        let mut bytes = Vec::new();
        if let Err(e) = file.read_to_end(&mut bytes) {
            self.set_aside(&pending.path, &format!("cannot read ({e})"));
            return None;
        }
        match batch::parse(&bytes) {
            Ok((meta, body)) => {
                let body = body.to_vec();
                Some(Claimed { _lock: file, path: pending.path.clone(), meta, body })
            }
            Err(why) => {
                self.set_aside(&pending.path, &why);
                None
            }
        }
    }

    /// The receiver accepted `claimed`: it is removed.
    pub fn delivered(&self, claimed: Claimed) {
        self.forget(&claimed.path);
        if fs::remove_file(&claimed.path).is_ok() {
            self.counters.delivered_batches.fetch_add(1, Relaxed);
            self.counters.delivered_items.fetch_add(claimed.meta.items, Relaxed);
        }
    }

    /// `claimed` holds more content than the capture cap in force allows: it is removed unsent
    /// and counted.
    pub fn over_cap(&self, claimed: Claimed) {
        self.forget(&claimed.path);
        if fs::remove_file(&claimed.path).is_ok() {
            self.counters.over_cap_batches.fetch_add(1, Relaxed);
            self.counters.over_cap_items.fetch_add(claimed.meta.items, Relaxed);
            if self.counters.over_cap_batches.load(Relaxed) == 1 {
                self.note(format!(
                    "spool {}: batches spooled under a wider capture than the policy now allows were removed unsent",
                    self.config.dir.display()
                ));
            }
        }
    }

    /// The receiver refused `claimed` for good (a 4xx that retrying cannot fix): it is removed
    /// and counted.
    pub fn rejected(&self, claimed: Claimed) {
        self.forget(&claimed.path);
        if fs::remove_file(&claimed.path).is_ok() {
            self.counters.rejected_batches.fetch_add(1, Relaxed);
            self.counters.rejected_items.fetch_add(claimed.meta.items, Relaxed);
        }
    }

    /// The receiver refused the credentials whose [`fingerprint`](crate::fingerprint) is
    /// `credentials` (401/403): the batch stays, marked to wait until they change.
    pub fn refused(&self, claimed: Claimed, credentials: &str) -> io::Result<()> {
        let mut meta = claimed.meta.clone();
        meta.auth_refused = Some(credentials.to_owned());
        let name = claimed.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = self.config.dir.join(format!(".{name}.tmp"));
        let result = (|| {
            let mut file = private_file(&tmp)?;
            file.write_all(&batch::header_line(&meta, claimed.body.len() as u64))?;
            file.write_all(&claimed.body)?;
            // Synced, unlike a new batch (ADR 0032): it replaces one the disk may hold already,
            // which a power cut must not tear.
            file.sync_all()?;
            // Replacing the file unlinks the locked one: a process that listed it sees that.
            fs::rename(&tmp, &claimed.path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        drop(claimed);
        result
    }

    /// What the spool holds now.
    pub fn status(&self) -> SpoolStatus {
        let mut status = SpoolStatus::default();
        for entry in self.entries() {
            status.bytes += entry.size;
            if entry.unreadable {
                status.unreadable += 1;
                continue;
            }
            let Ok(Some(meta)) = read_header(&entry.path, entry.size) else {
                status.unreadable += 1;
                continue;
            };
            status.batches += 1;
            status.items += meta.items;
            status.held += u64::from(meta.auth_refused.is_some());
            let created = entry.created_ms.min(meta.created_ms);
            status.oldest_ms = Some(status.oldest_ms.map_or(created, |o| o.min(created)));
        }
        status
    }

    /// This process's counts so far, with every diagnostic noted (each problem once).
    pub fn stats(&self) -> SpoolStats {
        let c = &self.counters;
        SpoolStats {
            spooled_batches: c.spooled_batches.load(Relaxed),
            spooled_items: c.spooled_items.load(Relaxed),
            spooled_bytes: c.spooled_bytes.load(Relaxed),
            delivered_batches: c.delivered_batches.load(Relaxed),
            delivered_items: c.delivered_items.load(Relaxed),
            rejected_batches: c.rejected_batches.load(Relaxed),
            rejected_items: c.rejected_items.load(Relaxed),
            dropped_full_batches: c.full_batches.load(Relaxed),
            dropped_full_items: c.full_items.load(Relaxed),
            dropped_expired_batches: c.expired_batches.load(Relaxed),
            dropped_expired_items: c.expired_items.load(Relaxed),
            dropped_over_cap_batches: c.over_cap_batches.load(Relaxed),
            dropped_over_cap_items: c.over_cap_items.load(Relaxed),
            unreadable: c.unreadable.load(Relaxed),
            write_failed: c.write_failed.load(Relaxed),
            gone_items: self.gone_items(),
            diagnostics: self.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// This process removed the batch at `path` itself (it is accounted for elsewhere).
    fn forget(&self, path: &Path) {
        self.ours.lock().unwrap_or_else(|e| e.into_inner()).remove(path);
    }

    /// Items per signal of the batches this process wrote that are gone though it did not
    /// remove them.
    fn gone_items(&self) -> std::collections::BTreeMap<String, u64> {
        let ours = self.ours.lock().unwrap_or_else(|e| e.into_inner());
        let mut gone = std::collections::BTreeMap::new();
        for (path, (signal, items)) in ours.iter() {
            if fs::symlink_metadata(path).is_err() {
                *gone.entry(signal.clone()).or_insert(0) += items;
            }
        }
        gone
    }

    fn note(&self, line: String) {
        self.diagnostics.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    /// Renames an unreadable batch to `*.unreadable` (so it is named once, not on every run),
    /// counts it and notes why.
    fn set_aside(&self, path: &Path, why: &str) {
        let aside = path.with_extension(UNREADABLE.trim_start_matches('.'));
        if fs::rename(path, &aside).is_ok() {
            self.counters.unreadable.fetch_add(1, Relaxed);
            self.note(format!("spool: {}: {why}; set aside as {}", path.display(), aside.display()));
        }
    }
}

/// A new file only the owner can read, failing if the name exists.
fn private_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

#[cfg(unix)]
fn still_linked(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata().is_ok_and(|m| m.nlink() > 0)
}

#[cfg(not(unix))]
fn still_linked(_: &File) -> bool {
    true
}

/// The meta of the batch at `path` (`None` when it is gone), checking the body length against
/// the file size; `Err` says why it is unreadable.
fn read_header(path: &Path, size: u64) -> Result<Option<BatchMeta>, String> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open ({e})")),
    };
    let mut line = Vec::new();
    BufReader::new(file.take(MAX_HEADER)).read_until(b'\n', &mut line).map_err(|e| format!("cannot read ({e})"))?;
    let header_len = line.len() as u64;
    // Parse the header alone against the length the file should have.
    let body_len = size.saturating_sub(header_len);
    let (meta, _) = batch::parse_header(&line, body_len)?;
    Ok(Some(meta))
}

/// Removes an entry nobody holds, returning the items it had (0 when unreadable); `None` when
/// another process holds it.
fn remove_unclaimed(entry: &Entry) -> Option<u64> {
    let file = File::open(&entry.path).ok()?;
    file.try_lock().ok()?;
    let items =
        if entry.unreadable { 0 } else { read_header(&entry.path, entry.size).ok().flatten().map_or(0, |m| m.items) };
    fs::remove_file(&entry.path).ok()?;
    Some(items)
}
