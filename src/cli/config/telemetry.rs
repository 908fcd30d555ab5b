//! Reading the `telemetry` section: sinks, capture, redaction, sampler, spool and attribution,
//! from the managed policy and the settings files (flags and environment are applied by the
//! resolvers in `cli::sinks` and `cli::attribution`, which call these for the file layers).

use std::collections::BTreeMap;

use crate::cli::settings::{SettingsFile, expand_vars};
use pi_observe::core::ContentKind;

use super::{Config, Key, Source};
use crate::cli::CliError;

/// `telemetry.sinks.NAME.FIELD`.
pub fn sink_key<'a>(name: &'a str, field: &'a str) -> [&'a str; 4] {
    ["telemetry", "sinks", name, field]
}

/// Headers as a settings file writes them: name → value (`null`: empty).
pub type Headers = BTreeMap<String, Option<String>>;

/// A value error naming the file and the key path, as a usage error.
pub fn bad(file: &SettingsFile, key: &[&str], expected: impl Into<String>) -> CliError {
    CliError::Usage(file.value_error(key, expected).to_string())
}

impl Config {
    /// The managed file, when it sets `destination` (the key that says where a sink sends:
    /// its `endpoint`, `dsn` or `path`): the sink is pinned.
    pub fn pinned(&self, destination: &Key<String>) -> Option<&SettingsFile> {
        self.managed_sets(destination)
    }

    /// True when the settings files (or the managed policy, setting `destination`) turn sink
    /// `name` on: a file has its section and the most binding `enabled` is not `false` (a project
    /// can turn off a global sink).
    pub fn sink_in_files(&self, name: &str, destination: &Key<String>) -> bool {
        if self.pinned(destination).is_some() {
            return true;
        }
        let files = self.settings.files();
        files.iter().any(|file| file.sink_section(name).is_some())
            && files.iter().find_map(|file| file.sink_section(name)?.enabled()) != Some(false)
    }

    /// The text at `key` from the managed file, else from the settings files, with `${VAR}`
    /// expanded; an unset variable is an error naming the key path.
    pub fn text(&self, key: &Key<String>) -> Result<Option<(String, Source)>, CliError> {
        let Some((raw, file)) = self.find(key) else { return Ok(None) };
        let text = expand_vars(&raw, |name| std::env::var(name).ok()).map_err(|why| bad(file, key.path, why))?;
        Ok(Some((text, Source::of(file))))
    }

    /// The headers at `key` (name → value) from the managed file (`from_managed`) or the most
    /// binding settings file, `${VAR}` expanded, each checked.
    pub fn headers(&self, key: &Key<Headers>, from_managed: bool) -> Result<Vec<(String, String)>, CliError> {
        let found = match &self.managed {
            Some(file) if from_managed => (key.read)(file).map(|headers| (headers, file)),
            _ if from_managed => None,
            _ => self.settings.files().iter().find_map(|file| (key.read)(file).map(|headers| (headers, file))),
        };
        let Some((map, file)) = found else { return Ok(Vec::new()) };
        let mut headers = Vec::new();
        for (name, raw) in map {
            let path: Vec<&str> = key.path.iter().copied().chain([name.as_str()]).collect();
            let raw = raw.unwrap_or_default();
            let value = expand_vars(&raw, |var| std::env::var(var).ok()).map_err(|why| bad(file, &path, why))?;
            pi_observe::otel::check_header(&name, &value).map_err(|why| bad(file, &path, why))?;
            headers.push((name, value));
        }
        Ok(headers)
    }

    /// The content kinds sink `name`'s `capture` in `file` names (`all` allowed).
    pub fn kinds_in(file: &SettingsFile, name: &str) -> Result<Option<Vec<ContentKind>>, CliError> {
        let Some(list) = file.sink_section(name).and_then(|section| section.capture()) else { return Ok(None) };
        let mut kinds = Vec::new();
        for word in list {
            match word.trim() {
                "all" => kinds.extend(ContentKind::ALL),
                other => kinds.push(ContentKind::parse(other).ok_or_else(|| {
                    let known: Vec<_> = ContentKind::ALL.iter().map(|k| k.as_str()).collect();
                    let why = format!("unknown content kind {other:?} (expected {} or all)", known.join(", "));
                    bad(file, &sink_key(name, "capture"), why)
                })?),
            }
        }
        Ok(Some(kinds))
    }

    /// Sink `name`'s `capture` from the settings files (the most binding file that has it).
    pub fn capture_in_files(&self, name: &str) -> Result<Option<(Vec<ContentKind>, Source)>, CliError> {
        let has = |file: &&SettingsFile| file.sink_section(name).and_then(|s| s.capture()).is_some();
        let Some(file) = self.settings.files().iter().find(has) else { return Ok(None) };
        Ok(Config::kinds_in(file, name)?.map(|kinds| (kinds, Source::of(file))))
    }

    /// Sink `name`'s capture cap from the managed policy.
    pub fn capture_cap(&self, name: &str) -> Result<Option<Vec<ContentKind>>, CliError> {
        match &self.managed {
            Some(file) => Config::kinds_in(file, name),
            None => Ok(None),
        }
    }

    /// Every `telemetry.redact` rule of every file (managed ones cannot be removed; a user's
    /// files add to each other rather than replace, so a project cannot drop a global rule).
    pub fn redact_rules(&self) -> Vec<(String, Source)> {
        let mut rules = Vec::new();
        for file in self.managed.iter().chain(self.settings.files()) {
            let listed = file.doc.telemetry.as_ref().and_then(|t| t.redact.as_ref());
            rules.extend(listed.into_iter().flatten().map(|rule| (rule.clone(), Source::of(file))));
        }
        rules
    }
}
