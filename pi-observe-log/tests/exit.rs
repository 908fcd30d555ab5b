//! A process that ends with `exit_between_appends` while its writer thread is busy leaves a
//! file of whole lines: the exit waits for the write under way (Linux would otherwise stop the
//! write at a page boundary and keep the part written).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use pi_observe_log::{BatchedWriter, Pushed};

/// Set in the child process: the file it writes.
const CHILD: &str = "PI_OBSERVE_LOG_EXIT_CHILD";
/// The child's exit code.
const EXITED: i32 = 3;
/// Each line spans many pages and is no divisor of a page or folio size.
const LINE_BYTES: usize = 250_000;

#[test]
fn exiting_between_appends_leaves_every_line_whole() {
    if let Some(path) = std::env::var_os(CHILD) {
        write_until_exit(Path::new(&path));
    }
    let dir = std::env::temp_dir().join(format!("pi-log-exit-{}", pi_observe_core::SpanId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    for round in 0..5 {
        let path = dir.join(format!("lines-{round}.jsonl"));
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "exiting_between_appends_leaves_every_line_whole", "--nocapture", "--test-threads=1"])
            .env(CHILD, &path)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(EXITED), "round {round}");
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() >= 4 * LINE_BYTES, "round {round}: only {} bytes written", bytes.len());
        assert!(bytes.ends_with(b"\n"), "round {round}: the last of {} bytes is not a line's end", bytes.len());
        for (i, line) in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()).enumerate() {
            assert_eq!(line.len(), LINE_BYTES - 1, "round {round}: line {} is torn", i + 1);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Keeps the writer thread writing big batches, and exits once the file holds a few lines.
fn write_until_exit(path: &Path) -> ! {
    let file = std::fs::File::create(path).unwrap();
    let writer = BatchedWriter::start(file, 64 * LINE_BYTES).unwrap();
    let feeding = writer.clone();
    std::thread::spawn(move || {
        let mut line = vec![b'x'; LINE_BYTES - 1];
        line.push(b'\n');
        loop {
            if feeding.push_line(&line) == Pushed::Full {
                feeding.flush(Duration::from_secs(10));
            }
        }
    });
    while std::fs::metadata(path).map_or(0, |m| m.len()) < 4 * LINE_BYTES as u64 {
        std::thread::yield_now();
    }
    pi_observe_core::exit_between_appends(EXITED, Duration::from_secs(10))
}
