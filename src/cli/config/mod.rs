//! The configuration layer: the managed policy, the global and (trusted) project settings files,
//! and the precedence every command resolves a value with:
//!
//! **managed policy > flags > environment > project settings > global settings > defaults**
//!
//! [`Config::load`] reads the files once per command, before anything else happens: a
//! malformed managed file stops `pi` (fail closed), a malformed settings file is a usage error
//! naming `FILE:LINE:COL` or the key path, unknown keys are warned about once each. The
//! project's `.pi/` resources are read only when [`trust::decide`] says so. Each value's
//! origin is a [`Source`], shown by `pi config` and `pi observe status`.

pub mod keys;
pub mod managed;
pub mod telemetry;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use std::sync::Mutex;

use crate::cli::settings::trust::{self, TrustDecision, TrustReason, TrustStore};
use crate::cli::settings::{Scope, Settings, SettingsFile};

pub use managed::Policy;

use super::{CliError, output, paths};

/// Where a value came from, in precedence order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Source {
    /// The managed policy file.
    Managed(PathBuf),
    /// A command-line flag.
    Flag(&'static str),
    /// An environment variable.
    Env(String),
    /// The project's `.pi/settings.json`.
    Project(PathBuf),
    /// `~/.pi/agent/settings.json`.
    Global(PathBuf),
    /// Built in.
    #[default]
    Default,
}

/// One setting, as data: its key path (what messages and `pi config` name) and how to read it
/// out of one file's typed sections. Declared next to the code that uses it:
///
/// ```ignore
/// const ENDPOINT: Key<String> = Key {
///     path: &["telemetry", "sinks", "otlp", "endpoint"],
///     read: |file| file.sink::<Settings>("otlp")?.endpoint.clone(),
/// };
/// ```
pub struct Key<T: 'static> {
    /// The dotted path, as a list of object keys.
    pub path: &'static [&'static str],
    /// The value one file sets (`None`: not set there; `null` is not set).
    pub read: fn(&SettingsFile) -> Option<T>,
}

impl<T> Key<T> {
    /// `a.b.c`.
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }
}

/// One value as [`Config::pick`] found it, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Picked<T> {
    /// What was found.
    pub value: Given<T>,
    /// Where it came from.
    pub source: Source,
    /// The key it was found for, dotted.
    key: String,
}

/// A value by its layer: typed from a file, or still text from a variable.
#[derive(Debug, Clone, PartialEq)]
pub enum Given<T> {
    /// The managed policy's or a settings file's value, typed (checked when the file was read).
    Set(T),
    /// The flag the caller named was given: its value is the caller's.
    Flag,
    /// A variable's text, for the caller to parse.
    Var(String),
}

impl<T> Picked<T> {
    /// What to name when the value is wrong: the flag, the variable, or the file and the key
    /// path.
    pub fn culprit(&self) -> String {
        match &self.source {
            Source::Flag(flag) => (*flag).to_owned(),
            Source::Env(var) => var.clone(),
            Source::Default => self.key.clone(),
            file => format!("{}: {}", file.file(), self.key),
        }
    }

    /// The value from a file or the managed policy (`None` when a flag or a variable won).
    pub fn set(self) -> Option<T> {
        match self.value {
            Given::Set(value) => Some(value),
            Given::Flag | Given::Var(_) => None,
        }
    }
}

impl<T: std::fmt::Display> Picked<T> {
    /// The value as text, for messages.
    pub fn text(&self) -> String {
        match &self.value {
            Given::Set(value) => value.to_string(),
            Given::Flag => String::new(),
            Given::Var(text) => text.clone(),
        }
    }
}

/// The variable's value, when it is set and not blank.
fn env_value(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// True when the variable is set and not empty.
pub fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

impl Source {
    /// The source of a value read from `file`.
    pub fn of(file: &SettingsFile) -> Source {
        match file.scope {
            Scope::Managed => Source::Managed(file.path.clone()),
            Scope::Project => Source::Project(file.path.clone()),
            Scope::Global => Source::Global(file.path.clone()),
        }
    }

    /// The file a settings source names, or the source itself (flag, variable, default), for
    /// messages.
    pub fn file(&self) -> String {
        match self {
            Source::Managed(p) | Source::Project(p) | Source::Global(p) => p.display().to_string(),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Managed(p) => write!(f, "managed {}", p.display()),
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(var) => write!(f, "env {var}"),
            Source::Project(p) => write!(f, "project {}", p.display()),
            Source::Global(p) => write!(f, "global {}", p.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// The files a command runs with.
#[derive(Debug)]
pub struct Config {
    /// `~/.pi/agent` (or `PI_CODING_AGENT_DIR`).
    pub agent_dir: Option<PathBuf>,
    /// The managed policy, when there is one.
    pub managed: Option<SettingsFile>,
    /// Global and (when trusted) project settings, project first.
    pub settings: Settings,
    /// Whether the project's own resources load.
    pub trust: TrustDecision,
    notices: Mutex<BTreeSet<String>>,
}

impl Config {
    /// Reads the managed policy, the global settings, the trust store and — when the project
    /// at `project` is trusted — its settings. Unknown keys are warned about here, once each.
    pub fn load(project: &Path) -> Result<Config, CliError> {
        Config::load_with(project, None)
    }

    /// [`Config::load`] after an extension's `project_trust` handler trusted the project (for
    /// this run, or — with `remember` — in the trust store too). The policy still wins.
    pub fn load_trusted_by_extension(project: &Path, remember: bool) -> Result<Config, CliError> {
        if remember && let Some(dir) = paths::agent_dir() {
            let path = dir.join(trust::TRUST_FILE);
            let mut store = TrustStore::load(&path).map_err(|e| CliError::Usage(e.to_string()))?;
            store.trust(project, pi_agent::time::iso8601(pi_agent::time::now_millis()));
            store.save().map_err(|e| CliError::Failure(format!("{}: {e}", path.display())))?;
        }
        let mut yes = |_: &Path, _: &[PathBuf]| Some(true);
        Config::load_with(project, Some(&mut yes))
    }

    fn load_with(project: &Path, hook: Option<trust::TrustHook<'_>>) -> Result<Config, CliError> {
        let managed = managed::load()?;
        let agent_dir = paths::agent_dir();
        if let Some(dir) = &agent_dir {
            let culprit = if std::env::var_os(paths::AGENT_DIR_VAR).is_some_and(|v| !v.is_empty()) {
                paths::AGENT_DIR_VAR
            } else {
                "the agent directory (~/.pi/agent)"
            };
            paths::check_dir(culprit, dir).map_err(CliError::Usage)?;
        }
        let read = |path: PathBuf, scope| SettingsFile::load(&path, scope).map_err(|e| CliError::Usage(e.to_string()));
        let global = agent_dir
            .as_ref()
            .map(|d| read(d.join(crate::cli::settings::SETTINGS_FILE), Scope::Global))
            .transpose()?
            .flatten();
        // Without a home there is no store: nothing is trusted.
        let store_path = agent_dir.as_ref().map_or_else(PathBuf::new, |d| d.join(trust::TRUST_FILE));
        let store = TrustStore::load(&store_path).map_err(|e| CliError::Usage(e.to_string()))?;
        let policy_allows = Policy { file: managed.as_ref() }.allows_project_resources();
        // The one decision point; an extension's `project_trust` answer comes in as the hook.
        let trust = trust::decide(project, &store, policy_allows, hook);
        let project_file = if trust.trusted {
            read(project.join(".pi").join(crate::cli::settings::SETTINGS_FILE), Scope::Project)?
        } else {
            None
        };
        let config = Config {
            agent_dir,
            managed,
            settings: Settings::new(global.into_iter().chain(project_file).collect()),
            trust,
            notices: Mutex::new(BTreeSet::new()),
        };
        for file in config.managed.iter().chain(config.settings.files()) {
            for key in &file.unknown {
                config.notice(format!("warning: {}: unknown setting {key:?} (kept, not used)", file.path.display()));
            }
        }
        config.announce_overrides();
        Ok(config)
    }

    /// Says once for each user setting the managed policy overrides. Lists the policy adds to
    /// (`telemetry.redact`, `attribution.required`) and capture lists it caps are not
    /// overridden: the capture cap is reported where it removes something.
    fn announce_overrides(&self) {
        let Some(managed) = &self.managed else { return };
        for file in self.settings.files() {
            for (key, found) in Settings::new(vec![file.clone()]).leaves() {
                let path: Vec<&str> = key.split('.').collect();
                let additive = key == "telemetry.redact"
                    || key == "telemetry.attribution.required"
                    || (path.len() == 4 && path[1] == "sinks" && path[3] == "capture");
                // The policy's value at this key, or at any object above it that is not an object.
                let overridden = (1..=path.len())
                    .find_map(|n| managed.get(&path[..n]).filter(|v| n == path.len() || !v.is_object()));
                if overridden.is_some_and(|v| !additive && v != found.value && !v.is_null()) {
                    self.notice(format!(
                        "the managed policy {} sets {key}: the value in {} is not used",
                        managed.path.display(),
                        file.path.display()
                    ));
                }
            }
        }
    }

    /// Says once on stderr that the project's resources were not loaded, when that is so.
    pub fn announce_trust(&self) {
        let shown: Vec<String> = self
            .trust
            .resources
            .iter()
            .map(|p| p.strip_prefix(&self.trust.project).unwrap_or(p).display().to_string())
            .collect();
        match self.trust.reason {
            TrustReason::Untrusted => self.notice(format!(
                "project {} is not trusted: running with global configuration only ({} not loaded; `pi trust` loads them)",
                self.trust.project.display(),
                shown.join(", ")
            )),
            TrustReason::Forbidden => self.notice(format!(
                "the managed policy forbids project resources: {} not loaded",
                shown.join(", ")
            )),
            _ => {}
        }
    }

    /// Prints `pi: MESSAGE` on stderr, once per distinct message per run.
    pub fn notice(&self, message: String) {
        let mut seen = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        if seen.insert(message.clone()) {
            output::error(format_args!("pi: {message}"));
        }
    }

    /// The managed policy's powers.
    pub fn policy(&self) -> Policy<'_> {
        Policy { file: self.managed.as_ref() }
    }

    /// The value `read` finds in the most binding file that sets it (the managed policy, then
    /// the project's file, then the global one), with that file.
    pub fn find_with<T>(&self, read: impl Fn(&SettingsFile) -> Option<T>) -> Option<(T, &SettingsFile)> {
        self.managed.iter().chain(self.settings.files()).find_map(|file| read(file).map(|value| (value, file)))
    }

    /// The value of `key` in the most binding file that sets it, with that file.
    pub fn find<T>(&self, key: &Key<T>) -> Option<(T, &SettingsFile)> {
        self.find_with(key.read)
    }

    /// The managed policy, when it sets `key`.
    pub fn managed_sets<T>(&self, key: &Key<T>) -> Option<&SettingsFile> {
        self.managed.as_ref().filter(|file| (key.read)(file).is_some())
    }

    /// A value read through the typed sections (`read` picks it out of one file's): the managed
    /// policy's, else the most binding settings file's.
    pub fn typed<T>(&self, read: impl Fn(&crate::cli::settings::SettingsDoc) -> Option<T>) -> Option<T> {
        self.find_with(|file| read(&file.doc)).map(|(value, _)| value)
    }

    /// The value of `key` by the one precedence rule: the managed policy (binding: a `flag` or
    /// variable it overrides is said once on stderr), then `flag` (the name of a flag that was
    /// given: its value is the caller's), then the first of `vars` that is set, then the
    /// project's file, then the global one. `None`: the default applies.
    pub fn pick<T>(&self, key: &Key<T>, flag: Option<&'static str>, vars: &[&str]) -> Option<Picked<T>> {
        let picked = self.layer(key.dotted(), key.read, flag, vars)?;
        if let Source::Managed(file) = &picked.source {
            let var = vars.iter().copied().find(|v| env_value(v).is_some());
            let overridden: Vec<&str> = flag.into_iter().chain(var).collect();
            if !overridden.is_empty() {
                self.notice(format!(
                    "the managed policy {} sets {}: {} ignored",
                    file.display(),
                    key.dotted(),
                    overridden.join(", ")
                ));
            }
        }
        Some(picked)
    }

    /// [`Config::pick`] without saying anything: the layer that sets `key` (read by `read`).
    fn layer<T>(
        &self,
        key: String,
        read: impl Fn(&SettingsFile) -> Option<T>,
        flag: Option<&'static str>,
        vars: &[&str],
    ) -> Option<Picked<T>> {
        let picked = |value, source| Some(Picked { value, source, key });
        if let Some(file) = &self.managed
            && let Some(value) = read(file)
        {
            return picked(Given::Set(value), Source::of(file));
        }
        if let Some(name) = flag {
            return picked(Given::Flag, Source::Flag(name));
        }
        if let Some((name, value)) = vars.iter().find_map(|v| env_value(v).map(|x| (*v, x))) {
            return picked(Given::Var(value), Source::Env(name.to_owned()));
        }
        let (value, file) = self.settings.files().iter().find_map(|file| read(file).map(|v| (v, file)))?;
        picked(Given::Set(value), Source::of(file))
    }

    /// The source of `key`'s value, resolved as [`Config::pick`] resolves it (`flag`: the name
    /// of the flag, when it was given), or the default.
    pub fn source<T>(&self, key: &Key<T>, flag: Option<&'static str>, vars: &[&str]) -> Source {
        self.layer(key.dotted(), key.read, flag, vars).map_or(Source::Default, |picked| picked.source)
    }

    /// The source of sink `name`'s `capture` list (`flag`: a `--capture` flag named the sink).
    pub fn capture_source(&self, name: &str, flag: bool) -> Source {
        let read = |file: &SettingsFile| file.sink_section(name)?.capture().map(|_| ());
        let key = format!("telemetry.sinks.{name}.capture");
        self.layer(key, read, flag.then_some("--capture"), &[]).map_or(Source::Default, |picked| picked.source)
    }

    /// A path setting: `~/` is the home directory and a relative path is relative to the
    /// folder of the file that set it (upstream: the agent directory for global settings, the
    /// project's `.pi/` for project settings).
    pub fn path_of(file: &SettingsFile, raw: &str) -> PathBuf {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let path = paths::expand_home(PathBuf::from(raw), home.as_ref());
        match file.path.parent() {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        }
    }

    /// The path at `key` from the most binding settings file (managed first), resolved.
    pub fn path_setting(&self, key: &Key<String>) -> Option<(PathBuf, Source)> {
        self.find(key).map(|(raw, file)| (Config::path_of(file, &raw), Source::of(file)))
    }
}
