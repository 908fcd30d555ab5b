//! One settings file: read, parsed, checked against the schema, its unknown keys listed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::schema::{self, Checked};

/// Which file a setting came from. Ordered from the most to the least binding:
/// `Managed` overrides flags and environment; `Project` overrides `Global`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// The administrator's policy (`/etc/pi/managed-settings.json`).
    Managed,
    /// `<project>/.pi/settings.json` (trusted projects only).
    Project,
    /// `~/.pi/agent/settings.json`.
    Global,
}

impl Scope {
    /// `managed`, `project` or `global`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Managed => "managed",
            Scope::Project => "project",
            Scope::Global => "global",
        }
    }
}

/// Why a settings file cannot be used. Each message is one line that names the file; a syntax
/// error names the line and column, a wrong value names the key path.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The file exists but cannot be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not JSON (or not a JSON object at the top).
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A known key holds a value of the wrong type or outside its allowed values.
    #[error("{}: {key}: {expected}", path.display())]
    Value {
        /// The file.
        path: PathBuf,
        /// Dotted key path, e.g. `telemetry.sinks.otlp.endpoint`.
        key: String,
        /// What was expected, e.g. `expected a URL`.
        expected: String,
    },
}

/// One parsed settings file.
#[derive(Debug, Clone)]
pub struct SettingsFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Which layer it is.
    pub scope: Scope,
    /// The whole object, unknown keys included (they are kept, never dropped).
    pub value: Map<String, Value>,
    /// Its known sections as types.
    pub(crate) doc: schema::SettingsDoc,
    /// `telemetry.sinks`: each sink's settings as that sink's type.
    sinks: schema::SinkSections,
    /// Dotted paths of the keys this version of pi does not know.
    pub unknown: Vec<String>,
}

impl SettingsFile {
    /// Reads `path`; `Ok(None)` when it does not exist.
    pub fn load(path: &Path, scope: Scope) -> Result<Option<SettingsFile>, SettingsError> {
        // Only a regular file is read: a FIFO would block forever, a device never end.
        if let Ok(meta) = std::fs::metadata(path)
            && !meta.is_file()
        {
            let source = std::io::Error::other("not a regular file");
            return Err(SettingsError::Read { path: path.to_owned(), source });
        }
        match std::fs::read_to_string(path) {
            Ok(text) => SettingsFile::parse(&text, path, scope).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(SettingsError::Read { path: path.to_owned(), source }),
        }
    }

    /// Parses `text` as the file at `path`: JSON syntax, then the types of the known keys.
    pub fn parse(text: &str, path: &Path, scope: Scope) -> Result<SettingsFile, SettingsError> {
        let value = parse_object(text, path)?;
        let Checked { doc, sinks, unknown } = schema::check_settings(&value, scope == Scope::Managed)
            .map_err(|(key, expected)| SettingsError::Value { path: path.to_owned(), key, expected })?;
        Ok(SettingsFile { path: path.to_owned(), scope, value, doc, sinks, unknown })
    }

    /// Sink `name`'s settings (`telemetry.sinks.NAME`), when this file has them.
    pub fn sink_section(&self, name: &str) -> Option<&dyn schema::SinkSection> {
        self.sinks.get(name)
    }

    /// Sink `name`'s settings as its own type `T` (the type it declared with
    /// [`check`](schema::check)), when this file has them.
    pub fn sink<T: schema::SinkSection>(&self, name: &str) -> Option<&T> {
        let section: &dyn std::any::Any = self.sinks.get(name)?;
        section.downcast_ref()
    }

    /// The value at `key` (a path of object keys).
    pub fn get(&self, key: &[&str]) -> Option<&Value> {
        let (first, rest) = key.split_first()?;
        rest.iter().try_fold(self.value.get(*first)?, |v, k| v.as_object()?.get(*k))
    }

    /// A wrong value under `key`, as an error naming this file.
    pub fn value_error(&self, key: &[&str], expected: impl Into<String>) -> SettingsError {
        SettingsError::Value { path: self.path.clone(), key: key.join("."), expected: expected.into() }
    }
}

/// `text` as a JSON object; anything else is a one-line error with the line and column.
pub fn parse_object(text: &str, path: &Path) -> Result<Map<String, Value>, SettingsError> {
    let syntax = |line: usize, column: usize, message: String| SettingsError::Syntax {
        path: path.to_owned(),
        line: line.max(1),
        column: column.max(1),
        message,
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(syntax(1, 1, format!("expected a JSON object, found {}", schema::describe(&other)))),
        Err(e) => {
            // serde_json appends " at line L column C"; the position goes in front instead.
            let message = e.to_string();
            let message = message.split(" at line ").next().unwrap_or(&message).to_owned();
            Err(syntax(e.line(), e.column(), message))
        }
    }
}

/// Replaces each `${NAME}` in `text` with the variable's value from `lookup`, so secrets can
/// stay out of settings files. `$${` is a literal `${`. An unset or empty variable is an error
/// naming it.
pub fn expand_vars(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        if rest[..at].ends_with('$') {
            out.push_str(&rest[..at - 1]);
            out.push_str("${");
            rest = &rest[at + 2..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let end = after.find('}').ok_or_else(|| format!("{:?} has an unclosed ${{", text))?;
        let name = &after[..end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("${{{name}}} is not a variable name"));
        }
        match lookup(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(&value),
            None => return Err(format!("${{{name}}} is not set")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let err = SettingsFile::parse("{\n  \"defaultModel\": \"x\",\n  oops\n}", Path::new("s.json"), Scope::Global)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "s.json:3:3: key must be a string");
        let err = SettingsFile::parse("[1]", Path::new("s.json"), Scope::Global).unwrap_err().to_string();
        assert_eq!(err, "s.json:1:1: expected a JSON object, found an array");
    }

    #[test]
    fn variables_expand_and_unset_ones_are_named() {
        let lookup = |n: &str| (n == "TOKEN").then(|| "s3cr3t".to_owned());
        assert_eq!(expand_vars("Bearer ${TOKEN}", lookup).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand_vars("a $${TOKEN} b", lookup).unwrap(), "a ${TOKEN} b");
        assert_eq!(expand_vars("${NOPE}", lookup).unwrap_err(), "${NOPE} is not set");
        assert!(expand_vars("${TOKEN", lookup).is_err());
        assert_eq!(expand_vars("plain", lookup).unwrap(), "plain");
    }
}
