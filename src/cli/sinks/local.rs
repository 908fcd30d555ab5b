//! What the local file sinks (`log`, `events`) share: where their path comes from, and their
//! entry in `pi observe status`.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use super::sink::Sources;
use crate::cli::CliError;
use crate::cli::config::telemetry::bad;
use crate::cli::config::{Config, Key};
use crate::cli::settings::{SettingsFile, sink_section};

/// `telemetry.sinks.log` and `telemetry.sinks.events`.
#[derive(Debug, Deserialize)]
pub struct Settings {
    enabled: Option<bool>,
    path: Option<String>,
    capture: Option<Vec<String>>,
}

sink_section!(Settings);

/// The `path` of file sink `name` in `file`: what a file sink's path [`Key`] reads.
pub fn path_in(file: &SettingsFile, name: &str) -> Option<String> {
    file.sink::<Settings>(name)?.path.clone()
}

/// The sink's file: the managed policy's `key` (pinned: the flag is ignored, said once), else
/// the flag (its name and value; an empty `--log-json` value means stderr), else the settings
/// files' path when sink `name` is on there.
pub fn path(
    cfg: &Config,
    name: &str,
    key: &Key<String>,
    (flag_name, flag): (&str, Option<PathBuf>),
) -> Result<Option<PathBuf>, CliError> {
    if let Some(managed) = cfg.pinned(key) {
        if flag.is_some() {
            cfg.notice(format!(
                "the managed policy {} pins the {name} sink: {flag_name} ignored",
                managed.path.display()
            ));
        }
        return Ok(cfg.path_setting(key).map(|(path, _)| path));
    }
    if flag.is_some() {
        return Ok(flag);
    }
    if !cfg.sink_in_files(name, key) {
        return Ok(None);
    }
    match cfg.path_setting(key) {
        Some((path, _)) => Ok(Some(path)),
        None => {
            let found = cfg.settings.files().iter().find(|file| file.sink_section(name).is_some());
            Err(match found {
                Some(file) => bad(file, key.path, "expected a file path (the sink is on)"),
                None => CliError::Usage(format!("{}: expected a file path", key.dotted())),
            })
        }
    }
}

/// The sink's entry in `pi observe status`: its file (`""`: stderr), capture, and their sources
/// (`flag` when the file was given by it).
pub fn status(
    (name, key): (&str, &Key<String>),
    target: &str,
    flag: Option<&'static str>,
    sources: &Sources<'_>,
) -> Value {
    json!({
        "sink": name,
        "endpoint": if target.is_empty() { "stderr" } else { target },
        "protocol": "json lines",
        "capture": super::sink::captured(sources.policy),
        "pinned": sources.cfg.pinned(key).is_some(),
        "sources": {
            "endpoint": sources.of(key, flag, &[]),
            "capture": sources.capture,
        },
    })
}

/// Reads a canary's file (empty when the sink wrote nothing).
pub fn read(path: PathBuf) -> super::sink::CanaryReader {
    Box::new(move || vec![std::fs::read(&path).unwrap_or_default()])
}
