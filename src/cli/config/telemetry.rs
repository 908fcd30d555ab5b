//! Reading the `telemetry` section: sinks, capture, redaction, sampler, spool and attribution,
//! from the managed policy and the settings files (flags and environment are applied by the
//! resolvers in `cli::sinks` and `cli::attribution`, which call these for the file layers).

use crate::cli::settings::{SettingsFile, expand_vars};
use pi_observe::core::ContentKind;
use serde_json::Value;

use super::{Config, Source};
use crate::cli::CliError;

/// `telemetry.sinks.NAME.FIELD`.
pub fn sink_key<'a>(name: &'a str, field: &'a str) -> [&'a str; 4] {
    ["telemetry", "sinks", name, field]
}

/// A value error naming the file and the key path, as a usage error.
pub fn bad(file: &SettingsFile, key: &[&str], expected: impl Into<String>) -> CliError {
    CliError::Usage(file.value_error(key, expected).to_string())
}

impl Config {
    /// The managed file, when it sets `telemetry.sinks.NAME.DESTINATION` (the key that says
    /// where sink `name` sends: `endpoint`, `dsn`, `path`): the sink is pinned.
    pub fn pinned(&self, name: &str, destination: &str) -> Option<&SettingsFile> {
        self.managed_get(&sink_key(name, destination)).map(|(_, file)| file)
    }

    /// True when the settings files (or the managed policy) turn sink `name` on: its section
    /// is there and its `enabled` is not `false` (a project can turn off a global sink).
    pub fn sink_in_files(&self, name: &str, destination: &str) -> bool {
        if self.pinned(name, destination).is_some() {
            return true;
        }
        let section = ["telemetry", "sinks", name];
        self.settings.get(&section).is_some_and(|f| f.value.is_object())
            && self.settings.bool(&sink_key(name, "enabled")) != Some(false)
    }

    /// A string at `key` from the managed file, else from the settings files, with `${VAR}`
    /// expanded; an unset variable is an error naming the key path.
    pub fn text(&self, key: &[&str]) -> Result<Option<(String, Source)>, CliError> {
        let found = match self.managed_get(key) {
            Some((value, file)) => Some((value, file)),
            None => self.settings.get(key).map(|f| (f.value, f.file)),
        };
        let Some((value, file)) = found else { return Ok(None) };
        let Some(raw) = value.as_str() else { return Ok(None) };
        let text = expand_vars(raw, |name| std::env::var(name).ok()).map_err(|why| bad(file, key, why))?;
        Ok(Some((text, Source::of(file))))
    }

    /// The headers at `key` (an object of name → value), managed first, `${VAR}` expanded.
    pub fn headers(&self, key: &[&str], from_managed: bool) -> Result<Vec<(String, String)>, CliError> {
        let found =
            if from_managed { self.managed_get(key) } else { self.settings.get(key).map(|f| (f.value, f.file)) };
        let Some((Value::Object(map), file)) = found else { return Ok(Vec::new()) };
        let mut headers = Vec::new();
        for (name, value) in map {
            let mut path = key.to_vec();
            path.push(name);
            let raw = value.as_str().unwrap_or_default();
            let value = expand_vars(raw, |var| std::env::var(var).ok()).map_err(|why| bad(file, &path, why))?;
            pi_observe::otel::check_header(name, &value).map_err(|why| bad(file, &path, why))?;
            headers.push((name.clone(), value));
        }
        Ok(headers)
    }

    /// The content kinds a list at `key` of `file` names (`all` allowed).
    pub fn kinds_in(file: &SettingsFile, key: &[&str]) -> Result<Option<Vec<ContentKind>>, CliError> {
        let Some(list) = file.get(key).and_then(Value::as_array) else { return Ok(None) };
        let mut kinds = Vec::new();
        for word in list.iter().filter_map(Value::as_str) {
            match word.trim() {
                "all" => kinds.extend(ContentKind::ALL),
                other => kinds.push(ContentKind::parse(other).ok_or_else(|| {
                    let known: Vec<_> = ContentKind::ALL.iter().map(|k| k.as_str()).collect();
                    bad(file, key, format!("unknown content kind {other:?} (expected {} or all)", known.join(", ")))
                })?),
            }
        }
        Ok(Some(kinds))
    }

    /// Sink `name`'s `capture` from the settings files (the most binding file that has it).
    pub fn capture_in_files(&self, name: &str) -> Result<Option<(Vec<ContentKind>, Source)>, CliError> {
        let key = sink_key(name, "capture");
        let Some(found) = self.settings.get(&key) else { return Ok(None) };
        Ok(Config::kinds_in(found.file, &key)?.map(|kinds| (kinds, Source::of(found.file))))
    }

    /// Sink `name`'s capture cap from the managed policy.
    pub fn capture_cap(&self, name: &str) -> Result<Option<Vec<ContentKind>>, CliError> {
        match &self.managed {
            Some(file) => Config::kinds_in(file, &sink_key(name, "capture")),
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
