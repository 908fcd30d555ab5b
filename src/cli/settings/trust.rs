//! Project trust: a project's own settings, skills, prompt templates and extensions (its `.pi/`
//! folder) load only when the user has trusted the project, because they come with the code and
//! can run commands (`userIdCommand`, extensions) or redirect telemetry.
//!
//! Decisions live in `<agent dir>/trusted-projects.json`; trusting a folder trusts everything
//! below it. [`decide`] is the one place a run decides, before any project resource is read; a
//! [`TrustHook`] (the extension host's `project_trust` event) can answer for folders the store
//! says nothing about, and the managed policy can forbid project resources outright.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::file::{SettingsError, parse_object};

/// The trust file's name in the agent directory.
pub const TRUST_FILE: &str = "trusted-projects.json";

/// A project's resources, relative to the project folder, in the order they are checked.
pub const PROJECT_RESOURCES: &[&str] =
    &[".pi/settings.json", ".pi/skills", ".pi/prompts", ".pi/extensions", ".pi/SYSTEM.md", ".pi/APPEND_SYSTEM.md"];

/// One trusted folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustEntry {
    /// When it was trusted (RFC 3339, UTC).
    pub trusted_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    version: u32,
    projects: BTreeMap<String, TrustEntry>,
}

/// The trust decisions on disk.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    file: TrustFile,
}

impl TrustStore {
    /// Reads the store at `path` (empty when the file does not exist). A malformed file is an
    /// error naming it, never "trusted".
    pub fn load(path: &Path) -> Result<TrustStore, SettingsError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustStore {
                    path: path.to_owned(),
                    file: TrustFile { version: 1, ..TrustFile::default() },
                });
            }
            Err(source) => return Err(SettingsError::Read { path: path.to_owned(), source }),
        };
        let object = parse_object(&text, path)?;
        let file: TrustFile = serde_json::from_value(serde_json::Value::Object(object)).map_err(|e| {
            SettingsError::Value { path: path.to_owned(), key: "projects".into(), expected: e.to_string() }
        })?;
        Ok(TrustStore { path: path.to_owned(), file })
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The trusted folder that covers `dir` (itself or an ancestor), if any.
    pub fn trusted_root(&self, dir: &Path) -> Option<PathBuf> {
        let dir = canonical(dir);
        dir.ancestors().find(|a| self.file.projects.contains_key(&a.display().to_string())).map(Path::to_owned)
    }

    /// Trusts `dir` (and everything below it); returns the folder as stored.
    pub fn trust(&mut self, dir: &Path, now: String) -> PathBuf {
        let dir = canonical(dir);
        self.file.projects.insert(dir.display().to_string(), TrustEntry { trusted_at: now });
        dir
    }

    /// Forgets the decision for `dir`; `false` when there was none for exactly that folder.
    pub fn revoke(&mut self, dir: &Path) -> bool {
        self.file.projects.remove(&canonical(dir).display().to_string()).is_some()
    }

    /// Writes the store atomically (temporary file, then rename), creating its folder.
    pub fn save(&self) -> std::io::Result<()> {
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut text = serde_json::to_string_pretty(&self.file).map_err(std::io::Error::other)?;
        text.push('\n');
        let tmp = self.path.with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, &self.path)
    }
}

/// `dir` with symlinks and `..` resolved when it exists, else as given.
fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned())
}

/// Why a project's resources load or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustReason {
    /// The project has no `.pi/` resources: nothing to decide.
    NothingToLoad,
    /// This folder, or one above it, was trusted with `pi trust`.
    Trusted(PathBuf),
    /// An extension's `project_trust` handler trusted it for this run.
    Hook,
    /// Nobody trusted it.
    Untrusted,
    /// The managed policy forbids project resources (`policy.allowProjectResources: false`).
    Forbidden,
}

/// The decision for one project, made once per run before any project resource is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustDecision {
    /// The project folder (the working directory).
    pub project: PathBuf,
    /// The project resources that exist (see [`PROJECT_RESOURCES`]).
    pub resources: Vec<PathBuf>,
    /// Load them?
    pub trusted: bool,
    /// Why.
    pub reason: TrustReason,
}

/// Answers the trust question for a project the store says nothing about: `Some(true)` trusts
/// it for this run, `Some(false)` or `None` leaves it untrusted. The extension host will put
/// upstream's `project_trust` event here (only global and `-e` extensions take part).
pub type TrustHook<'a> = &'a mut dyn FnMut(&Path, &[PathBuf]) -> Option<bool>;

/// Decides whether `project`'s own resources load: forbidden by policy → no; nothing to load →
/// yes (vacuously); trusted in `store` → yes; else the hook's answer.
pub fn decide(project: &Path, store: &TrustStore, policy_allows: bool, hook: Option<TrustHook<'_>>) -> TrustDecision {
    let resources: Vec<PathBuf> = PROJECT_RESOURCES.iter().map(|r| project.join(r)).filter(|p| p.exists()).collect();
    let (trusted, reason) = if resources.is_empty() {
        (true, TrustReason::NothingToLoad)
    } else if !policy_allows {
        (false, TrustReason::Forbidden)
    } else if let Some(root) = store.trusted_root(project) {
        (true, TrustReason::Trusted(root))
    } else if hook.and_then(|h| h(project, &resources)) == Some(true) {
        (true, TrustReason::Hook)
    } else {
        (false, TrustReason::Untrusted)
    };
    TrustDecision { project: project.to_owned(), resources, trusted, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_covers_subfolders_survives_a_reload_and_revokes() {
        let home = std::env::temp_dir().join(format!("pi-trust-{}", std::process::id()));
        let project = home.join("repo");
        std::fs::create_dir_all(project.join("sub/.pi")).unwrap();
        std::fs::write(project.join("sub/.pi/settings.json"), "{}").unwrap();
        let path = home.join("agent").join(TRUST_FILE);
        let mut store = TrustStore::load(&path).unwrap();
        let sub = project.join("sub");
        let untrusted = decide(&sub, &store, true, None);
        assert_eq!((untrusted.trusted, &untrusted.reason), (false, &TrustReason::Untrusted));
        assert_eq!(untrusted.resources, [sub.join(".pi/settings.json")]);
        let mut yes = |_: &Path, _: &[PathBuf]| Some(true);
        assert_eq!(decide(&sub, &store, true, Some(&mut yes)).reason, TrustReason::Hook);

        store.trust(&project, "2026-12-03T00:00:00Z".into());
        store.save().unwrap();
        let store = TrustStore::load(&path).unwrap();
        let root = std::fs::canonicalize(&project).unwrap();
        assert_eq!(decide(&sub, &store, true, None).reason, TrustReason::Trusted(root));
        assert_eq!(decide(&sub, &store, false, None).reason, TrustReason::Forbidden);
        assert_eq!(decide(&home, &store, true, None).reason, TrustReason::NothingToLoad);

        let mut store = store;
        assert!(!store.revoke(&sub), "sub itself was never trusted");
        assert!(store.revoke(&project));
        assert!(!decide(&sub, &store, true, None).trusted);
        std::fs::write(&path, "{\"projects\": 3").unwrap();
        assert!(TrustStore::load(&path).unwrap_err().to_string().contains(":1:"));
        std::fs::remove_dir_all(&home).unwrap();
    }
}
