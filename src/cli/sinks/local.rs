//! What the local file sinks (`log`, `events`) share: where their path comes from, and their
//! entry in `pi observe status`.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use super::sink::Sources;

/// The key of a file sink's settings that names its file (and, in the managed policy, pins it).
pub const DESTINATION: &str = "path";
use crate::cli::CliError;
use crate::cli::config::Config;
use crate::cli::config::telemetry::{bad, sink_key};

/// `telemetry.sinks.log` and `telemetry.sinks.events`.
#[derive(Deserialize)]
#[allow(dead_code)] // the fields are the schema: deserializing checks them
pub struct Settings {
    enabled: Option<bool>,
    path: Option<String>,
    capture: Option<Vec<String>>,
}

/// The sink's file: the managed policy's path (pinned: the flag is ignored, said once), else
/// the flag (an empty `--log-json` value means stderr), else the settings files' path when the
/// sink is on there.
pub fn path(cfg: &Config, name: &str, flag_name: &str, flag: Option<PathBuf>) -> Result<Option<PathBuf>, CliError> {
    let key = sink_key(name, "path");
    if let Some(managed) = cfg.pinned(name, DESTINATION) {
        if flag.is_some() {
            cfg.notice(format!(
                "the managed policy {} pins the {name} sink: {flag_name} ignored",
                managed.path.display()
            ));
        }
        return Ok(cfg.path_setting(&key).map(|(path, _)| path));
    }
    if flag.is_some() {
        return Ok(flag);
    }
    if !cfg.sink_in_files(name, DESTINATION) {
        return Ok(None);
    }
    match cfg.path_setting(&key) {
        Some((path, _)) => Ok(Some(path)),
        None => {
            let found = cfg.settings.get(&["telemetry", "sinks", name]).map(|f| f.file);
            Err(match found {
                Some(file) => bad(file, &key, "expected a file path (the sink is on)"),
                None => CliError::Usage(format!("telemetry.sinks.{name}.path: expected a file path")),
            })
        }
    }
}

/// The sink's entry in `pi observe status`: its file (`""`: stderr), capture, and their sources
/// (`flag` when the file was given by it).
pub fn status(name: &str, target: &str, flag: Option<&'static str>, sources: &Sources<'_>) -> Value {
    json!({
        "sink": name,
        "endpoint": if target.is_empty() { "stderr" } else { target },
        "protocol": "json lines",
        "capture": super::sink::captured(sources.policy),
        "pinned": sources.cfg.pinned(name, DESTINATION).is_some(),
        "sources": {
            "endpoint": sources.of(&sink_key(name, "path"), flag, &[]),
            "capture": sources.capture,
        },
    })
}

/// Reads a canary's file (empty when the sink wrote nothing).
pub fn read(path: PathBuf) -> super::sink::CanaryReader {
    Box::new(move || vec![std::fs::read(&path).unwrap_or_default()])
}
