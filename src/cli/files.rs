//! The files a command writes: none may be the session it reads, another output, or an
//! existing session.

use std::path::{Path, PathBuf};

use super::CliError;

/// What identifies a file: device and inode when it exists, else its canonical directory and name.
#[derive(PartialEq, Eq)]
enum FileIdentity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata(path) {
        return Some(FileIdentity::Inode(meta.dev(), meta.ino()));
    }
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => dir.canonicalize().ok()?,
        None => std::env::current_dir().ok()?,
    };
    Some(FileIdentity::Path(dir.join(path.file_name()?)))
}

/// Refuses an output file that is one of the `inputs` (a session) or another output: writing it
/// would corrupt the session or interleave two streams. Each pair is (flag, path).
pub fn check_outputs(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<(), CliError> {
    let known: Vec<(&str, &Path, Option<FileIdentity>)> =
        inputs.iter().chain(outputs).map(|(flag, path)| (*flag, *path, file_identity(path))).collect();
    for (i, (flag, path, id)) in known.iter().enumerate().skip(inputs.len()) {
        let Some(id) = id else { continue };
        if let Some((other, _, _)) = known[..i].iter().find(|(_, _, other)| other.as_ref() == Some(id)) {
            return Err(CliError::Usage(format!(
                "{flag}: {} is the same file as {other}; give another file",
                path.display()
            )));
        }
        if is_session_file(path) {
            return Err(CliError::Usage(format!("{flag}: {} is a session file; give another file", path.display())));
        }
    }
    Ok(())
}

/// True when `path` exists and its first line is a session header (appending events would
/// corrupt that session).
fn is_session_file(path: &Path) -> bool {
    use std::io::{BufRead, Read};
    let Ok(file) = std::fs::File::open(path) else { return false };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut first = Vec::new();
    let mut reader = std::io::BufReader::new(file.take(64 * 1024));
    if reader.read_until(b'\n', &mut first).is_err() {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(&first)
        .is_ok_and(|header| header.get("type").and_then(|t| t.as_str()) == Some("session"))
}
