//! Files that hold content (sessions, event logs, extension logs) are private to their owner:
//! created `0600` in directories created `0700`, whatever the umask (a umask only removes
//! bits). Files and directories that already exist keep their modes.
//!
//! Files that must hold whole lines (sessions, event and log files, `--mode json` on a redirected
//! stdout) are appended to inside [`append_whole`], and a process that must end at once does so
//! through [`exit_between_appends`], never in the middle of one.

use std::fs::{DirBuilder, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

/// Open options that create a file only its owner can read and write (`0600` on Unix); add
/// `append`, `create` or `create_new` as needed.
pub fn private_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Writes `contents` to `path` (created `0600`, or truncated if it exists) and syncs it: the
/// temporary file of an atomic replace.
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut file = private_file_options().write(true).create(true).truncate(true).open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Creates `dir` and its missing parents, each new one only its owner can enter (`0700` on
/// Unix).
pub fn create_private_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the parent directory of `path` (if it has one) with [`create_private_dir_all`].
pub fn create_private_parent(path: &Path) -> io::Result<()> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => create_private_dir_all(dir),
        None => Ok(()),
    }
}

/// The appends under way to files that must hold whole lines (sessions, event and log files).
static APPENDS: AppendGate = AppendGate(RwLock::new(()));

/// Runs `append` — one write of whole lines to a file that must never end in half a line —
/// so that [`exit_between_appends`] cannot end the process in the middle of it. Exiting while
/// another thread is inside `write(2)` is not enough: Linux stops a write at a page boundary
/// once a fatal signal is pending, and the file keeps the part written.
pub fn append_whole<R>(append: impl FnOnce() -> R) -> R {
    APPENDS.append(append)
}

/// Ends the process with `code` between appends: waits (at most `patience`, for a write to a
/// hung disk) for the [`append_whole`] calls under way, and lets none start after. A second
/// Ctrl+C ends pi this way, at once yet with every file it writes whole.
pub fn exit_between_appends(code: i32, patience: Duration) -> ! {
    APPENDS.close(patience);
    std::process::exit(code)
}

/// Appends hold it shared; closing takes it for good.
struct AppendGate(RwLock<()>);

impl AppendGate {
    fn append<R>(&self, append: impl FnOnce() -> R) -> R {
        let _under_way = self.0.read().unwrap_or_else(PoisonError::into_inner);
        append()
    }

    /// Waits (at most `patience`) until no append is under way, then holds every later one
    /// back for good; `false` if the wait ran out (the waiting thread takes the gate when it
    /// can, and keeps it).
    fn close(&'static self, patience: Duration) -> bool {
        let (closed, done) = std::sync::mpsc::channel();
        let waiting = std::thread::Builder::new().name("pi-exit".into()).spawn(move || {
            std::mem::forget(self.0.write().unwrap_or_else(PoisonError::into_inner));
            let _ = closed.send(());
        });
        waiting.is_ok() && done.recv_timeout(patience).is_ok()
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn new_files_and_dirs_are_private_even_with_an_open_umask() {
        let root = std::env::temp_dir().join(format!("pi-private-{}", crate::SpanId::random()));
        let file = root.join("a/b/f.jsonl");
        create_private_parent(&file).unwrap();
        private_file_options().append(true).create(true).open(&file).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&root.join("a/b")), 0o700);
        assert_eq!(mode(&root.join("a")), 0o700);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn closing_waits_for_the_append_under_way_and_holds_back_later_ones() {
        static BUSY: AppendGate = AppendGate(RwLock::new(()));
        let (entered, in_append) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        let appending = std::thread::spawn(move || {
            BUSY.append(|| {
                entered.send(()).unwrap();
                finished.recv().unwrap();
            })
        });
        in_append.recv().unwrap();
        assert!(!BUSY.close(Duration::from_millis(20)), "closed during an append");
        finish.send(()).unwrap();
        appending.join().unwrap();

        static IDLE: AppendGate = AppendGate(RwLock::new(()));
        IDLE.append(|| ());
        assert!(IDLE.close(Duration::from_secs(10)));
        assert!(IDLE.0.try_read().is_err(), "an append could begin after closing");
    }
}
