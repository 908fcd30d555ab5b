//! Settings files in upstream pi's places and shapes: `~/.pi/agent/settings.json` (global) and
//! `<project>/.pi/settings.json` (project; read only for a trusted project, see [`trust`]),
//! plus the administrator's managed policy file, which uses the same keys.
//!
//! Files are layered, not merged into one value: [`Settings::get`] looks a key path up in each
//! file from the most binding down, so nested objects merge key by key (as upstream's deep
//! merge) and every value knows which file it came from. Known keys are type-checked when a
//! file is read ([`SettingsError::Value`] names the key path); unknown keys are kept as written
//! and listed in [`SettingsFile::unknown`] for one warning each.
//!
//! ```text
//! use crate::cli::settings::{Scope, Settings, SettingsFile};
//! use std::path::Path;
//!
//! let global = SettingsFile::parse(r#"{"compaction":{"enabled":true,"reserveTokens":16384}}"#,
//!     Path::new("global.json"), Scope::Global)?;
//! let project = SettingsFile::parse(r#"{"compaction":{"reserveTokens":8192}}"#,
//!     Path::new("project.json"), Scope::Project)?;
//! let settings = Settings::new(vec![global, project]);
//! assert_eq!(settings.get(&["compaction", "reserveTokens"]).unwrap().value, 8192);
//! assert_eq!(settings.bool(&["compaction", "enabled"]), Some(true));
//! assert_eq!(settings.get(&["compaction", "enabled"]).unwrap().file.scope, Scope::Global);
//! ```

mod extensions;
mod file;
mod schema;
pub mod trust;

use serde_json::Value;

pub(crate) use extensions::{Extensions, OnLoadError};
pub use file::{Scope, SettingsFile, expand_vars};
pub(crate) use schema::sink_section;
pub(crate) use schema::{
    Attribution, Compaction, Count, Number, Policy, Retry, SamplerName, SettingsDoc, Spool, TraceDetail,
};
pub use schema::{Ratio, SinkCheck, SinkSection, check, declare_sinks};

/// The settings file name, in the agent directory and in a project's `.pi/`.
pub const SETTINGS_FILE: &str = "settings.json";

/// A value and the file it came from.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// The value as written.
    pub value: &'a Value,
    /// The file that set it.
    pub file: &'a SettingsFile,
}

/// Settings files layered by [`Scope`]: a key is taken from the most binding file that has it.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    files: Vec<SettingsFile>,
}

impl Settings {
    /// Layers `files` (any order; sorted by scope, most binding first).
    pub fn new(mut files: Vec<SettingsFile>) -> Settings {
        files.sort_by_key(|f| f.scope);
        Settings { files }
    }

    /// The files, most binding first.
    pub fn files(&self) -> &[SettingsFile] {
        &self.files
    }

    /// The file of `scope`, if it was read.
    pub fn file(&self, scope: Scope) -> Option<&SettingsFile> {
        self.files.iter().find(|f| f.scope == scope)
    }

    /// The value at `key` from the most binding file that sets it (`null` counts as unset).
    pub fn get(&self, key: &[&str]) -> Option<Found<'_>> {
        self.files.iter().find_map(|file| file.get(key).filter(|v| !v.is_null()).map(|value| Found { value, file }))
    }

    /// A value read through the typed sections (`read` picks it out of one file's), from the
    /// most binding file that sets it, with that file.
    pub(crate) fn typed<T>(&self, read: impl Fn(&SettingsDoc) -> Option<T>) -> Option<(T, &SettingsFile)> {
        self.files.iter().find_map(|file| read(&file.doc).map(|value| (value, file)))
    }

    /// The keys of the object at `key` across all files (each once, most binding file's order
    /// first).
    pub fn keys(&self, key: &[&str]) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for file in &self.files {
            if let Some(object) = file.get(key).and_then(Value::as_object) {
                for k in object.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
        }
        keys
    }

    /// Every effective leaf (a value that is not an object), with its dotted path and the file
    /// it came from, in key order: what `pi config` prints.
    pub fn leaves(&self) -> Vec<(String, Found<'_>)> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn collect<'a>(&'a self, path: &mut Vec<String>, out: &mut Vec<(String, Found<'a>)>) {
        let key: Vec<&str> = path.iter().map(String::as_str).collect();
        let keys = if path.is_empty() {
            let mut keys: Vec<String> = Vec::new();
            for file in &self.files {
                keys.extend(file.value.keys().filter(|k| !keys.contains(k)).cloned().collect::<Vec<_>>());
            }
            keys
        } else {
            match self.get(&key) {
                Some(found) if !found.value.is_object() => {
                    out.push((key.join("."), found));
                    return;
                }
                Some(_) => self.keys(&key),
                None => return,
            }
        };
        for k in keys {
            path.push(k);
            self.collect(path, out);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn file(json: &str, scope: Scope) -> SettingsFile {
        SettingsFile::parse(json, Path::new(scope.as_str()), scope).unwrap()
    }

    #[test]
    fn the_most_binding_file_wins_key_by_key_and_lists_replace() {
        let settings = Settings::new(vec![
            file(
                r#"{"skills":["g"],"telemetry":{"sinks":{"otlp":{"endpoint":"http://g","logs":true}}}}"#,
                Scope::Global,
            ),
            file(r#"{"skills":["p"],"telemetry":{"sinks":{"otlp":{"endpoint":"http://p"}}}}"#, Scope::Project),
        ]);
        assert_eq!(settings.get(&["skills"]).unwrap().value, &serde_json::json!(["p"]), "lists replace");
        let value = |key: &[&str]| settings.get(key).map(|found| found.value.clone());
        assert_eq!(value(&["telemetry", "sinks", "otlp", "endpoint"]), Some(serde_json::json!("http://p")));
        assert_eq!(value(&["telemetry", "sinks", "otlp", "logs"]), Some(serde_json::json!(true)));
        let leaves: Vec<(String, Scope)> = settings.leaves().into_iter().map(|(k, f)| (k, f.file.scope)).collect();
        assert_eq!(
            leaves,
            [
                ("skills".to_owned(), Scope::Project),
                ("telemetry.sinks.otlp.endpoint".to_owned(), Scope::Project),
                ("telemetry.sinks.otlp.logs".to_owned(), Scope::Global),
            ]
        );
    }

    #[test]
    fn null_means_unset() {
        let settings = Settings::new(vec![
            file(r#"{"defaultModel":"g"}"#, Scope::Global),
            file(r#"{"defaultModel":null}"#, Scope::Project),
        ]);
        assert_eq!(settings.get(&["defaultModel"]).unwrap().value, "g");
        assert_eq!(settings.typed(|doc| doc.default_model.clone()).unwrap().0, "g");
    }
}
