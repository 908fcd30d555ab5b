//! Session files on disk: finding them under files and folders (what `pi report`, `pi export`
//! and `--session ID` look through) and reading each with its problems said on stderr.

use std::path::{Path, PathBuf};

use pi_agent::session::{Session, SessionError, read_session};

use super::{CliError, output};

/// Session files under `path`: the file itself, or every `*.jsonl` below a directory (sorted;
/// marked as found by the scan).
fn session_files(path: &Path, out: &mut Vec<(PathBuf, bool)>) -> Result<(), CliError> {
    let meta = std::fs::metadata(path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    if meta.is_file() {
        out.push((path.to_owned(), false));
        return Ok(());
    }
    if !meta.is_dir() {
        return Err(CliError::Usage(format!("{}: not a session file or directory", path.display())));
    }
    let mut children: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .collect();
    children.sort();
    for child in children {
        if child.is_dir() {
            session_files(&child, out)?;
        } else if child.extension().is_some_and(|ext| ext == "jsonl") {
            out.push((child, true));
        }
    }
    Ok(())
}

/// The session files under `paths` (default `~/.pi/agent/sessions`), each marked as found by a
/// directory scan (`true`) or named (`false`).
pub fn session_files_of(paths: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>, CliError> {
    let roots = if paths.is_empty() {
        let agent = crate::cli::paths::agent_dir().ok_or_else(|| {
            CliError::Usage("no session path given and HOME is not set (give a file or directory)".into())
        })?;
        vec![agent.join("sessions")]
    } else {
        paths.to_vec()
    };
    let mut files = Vec::new();
    for root in &roots {
        session_files(root, &mut files)?;
    }
    Ok(files)
}

/// Calls `each` with every readable session under `paths`; an unreadable or corrupt one is a
/// line on stderr (`pi: <command>: <file>:<line>: …`) and counted. Other JSON-lines files met
/// while scanning a directory (event logs) are skipped silently. Returns the failures.
pub fn for_each_session(paths: &[PathBuf], command: &str, mut each: impl FnMut(Session)) -> Result<usize, CliError> {
    let mut failed = 0;
    for (file, scanned) in session_files_of(paths)? {
        match read_session(&file) {
            Ok(session) => {
                if let Some(torn) = session.torn_tail {
                    output::error(format_args!(
                        "pi: {command}: {}:{}: torn last line skipped",
                        file.display(),
                        torn.line
                    ));
                }
                if let Some(note) = unknown_note(&session.unknown_lines) {
                    output::error(format_args!("pi: {command}: {}: {note}", file.display()));
                }
                each(session)
            }
            Err(SessionError::NoHeader { .. }) if scanned => {}
            Err(e) => {
                output::error(format_args!("pi: {command}: {e}"));
                failed += 1;
            }
        }
    }
    Ok(failed)
}

/// "kept N entries this version does not understand (lines …)", when there are any.
pub fn unknown_note(lines: &[usize]) -> Option<String> {
    let (first, more) = lines.split_first()?;
    let mut shown: Vec<String> = std::iter::once(first).chain(more.iter().take(9)).map(|l| l.to_string()).collect();
    if lines.len() > 10 {
        shown.push("…".into());
    }
    let count = lines.len();
    let noun = if count == 1 { "entry" } else { "entries" };
    Some(format!("kept {count} {noun} this version does not understand, as written (line {})", shown.join(", ")))
}
