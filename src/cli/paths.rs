//! Where pi keeps its files: the agent directory (`PI_CODING_AGENT_DIR`, else
//! `~/.pi/agent`, as upstream pi) and what lives in it.

use std::path::PathBuf;

/// Variable that moves the agent directory (upstream pi's name).
pub const AGENT_DIR_VAR: &str = "PI_CODING_AGENT_DIR";

/// The agent directory: `PI_CODING_AGENT_DIR` (a leading `~/` is the home directory), else
/// `$HOME/.pi/agent`; `None` when neither is set.
pub fn agent_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    match std::env::var_os(AGENT_DIR_VAR).filter(|d| !d.is_empty()) {
        Some(dir) => Some(expand_home(PathBuf::from(dir), home.as_ref())),
        None => home.map(|h| h.join(".pi").join("agent")),
    }
}

/// An error naming `culprit` when `dir` cannot be a directory pi creates files in: it, or the
/// nearest of its ancestors that exists, is not a directory.
pub fn check_dir(culprit: &str, dir: &std::path::Path) -> Result<(), String> {
    let existing = dir.ancestors().find(|a| std::fs::symlink_metadata(a).is_ok());
    match existing.map(|a| (a, std::fs::metadata(a))) {
        Some((at, Ok(meta))) if !meta.is_dir() => {
            if at == dir {
                Err(format!("{culprit}: {} is not a directory", dir.display()))
            } else {
                Err(format!("{culprit}: {} cannot be a directory ({} is a file)", dir.display(), at.display()))
            }
        }
        _ => Ok(()),
    }
}

/// `~/x` → `$HOME/x`; anything else unchanged.
pub fn expand_home(path: PathBuf, home: Option<&PathBuf>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path,
    }
}
