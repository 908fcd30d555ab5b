//! `pi observe status`: the resolved telemetry pipeline and where each value came from, the
//! last run's counters, and the spool.

use std::process::ExitCode;

use clap::Args;
use pi_observe::spool::Spool;
use serde_json::{Value, json};

use crate::cli::config::{Config, keys};
use crate::cli::run_state::{RunState, state_path};
use crate::cli::sinks::SinkArgs;
use crate::cli::sinks::SinkSetup;
use crate::cli::sinks::spool::{SPOOL_MAX_AGE_VAR, SPOOL_MAX_BYTES_VAR};
use crate::cli::{CliError, output};

/// `pi observe status` arguments: the sinks, as for a run.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// One JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sinks: SinkArgs,
}

/// The resolved sinks and spool, each value with its source (managed, flag, env, project,
/// global, default): `pi observe status` and `pi config` show this.
pub fn pipeline(setup: &SinkSetup, args: &SinkArgs, cfg: &Config) -> Value {
    let sinks = setup.statuses(args, cfg);
    let spool_config = setup.spool.as_ref().map(|(config, from)| {
        let (bytes, age) = (&keys::spool::MAX_BYTES, &keys::spool::MAX_AGE_DAYS);
        json!({
            "dir": config.dir.display().to_string(),
            "maxBytes": config.max_bytes,
            "maxAgeDays": config.max_age.as_secs_f64() / 86_400.0,
            "sources": {
                "dir": from.to_string(),
                "maxBytes": cfg.source(bytes, None, &[SPOOL_MAX_BYTES_VAR]).to_string(),
                "maxAgeDays": cfg.source(age, None, &[SPOOL_MAX_AGE_VAR]).to_string(),
            },
        })
    });
    json!({ "sinks": sinks, "spool": spool_config })
}

/// Prints the status (table or `--json`). Exit 0; a malformed state file is an error naming it.
pub fn run(args: &StatusArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks, None, cfg)?;
    let pipeline = pipeline(&setup, &args.sinks, cfg);
    let state_file = state_path();
    let last_run = match &state_file {
        Some(path) => RunState::load(path).map_err(CliError::Usage)?,
        None => None,
    };
    let spool = setup.spool.as_ref().map(|(config, _)| {
        let status = Spool::new(config.clone()).status();
        json!({
            "batches": status.batches,
            "items": status.items,
            "bytes": status.bytes,
            "oldest": status.oldest_ms.map(|ms| pi_observe::agent::time::iso8601(ms as i64)),
            "heldForCredentials": status.held,
            "unreadable": status.unreadable,
            "lastDeliveryError": last_run.as_ref().and_then(|r| r.spool.as_ref()).and_then(|s| s.last_delivery_error.clone()),
        })
    });
    let document = json!({
        "pipeline": pipeline,
        "stateFile": state_file.map(|p| p.display().to_string()),
        "lastRun": last_run,
        "spool": spool,
    });
    if args.json {
        output::line(document);
    } else {
        print_human(&document);
    }
    Ok(ExitCode::SUCCESS)
}

/// The document as indented `key  value` lines, one section per part.
fn print_human(document: &Value) {
    print_pipeline(&document["pipeline"]);
    section("spool contents", &document["spool"]);
    match &document["lastRun"] {
        Value::Null => output::line("last run\n  none recorded yet"),
        run => {
            output::line(format_args!(
                "last run ({} at {})",
                run["command"].as_str().unwrap_or_default(),
                run["finishedAt"].as_str().unwrap_or_default()
            ));
            let sinks = crate::cli::sinks::SINKS.iter().map(|k| k.name);
            for part in std::iter::once("hub").chain(sinks).chain(["spool"]) {
                if let Some(fields) = run[part].as_object() {
                    output::line(format_args!("  {part}"));
                    for (key, value) in fields {
                        output::line(format_args!("    {key:<24}{}", plain(value)));
                    }
                }
            }
        }
    }
}

/// The sinks and the spool of [`pipeline`], one indented block per sink.
pub fn print_pipeline(pipeline: &Value) {
    output::line("telemetry pipeline");
    let sinks = pipeline["sinks"].as_array().cloned().unwrap_or_default();
    if sinks.is_empty() {
        output::line(
            "  no remote or log sink configured (give --otlp, --sentry, --log-json, their variables or telemetry.sinks)",
        );
    }
    for sink in &sinks {
        output::line(format_args!("  {}", sink["sink"].as_str().unwrap_or_default()));
        let sources = &sink["sources"];
        if let Some(fields) = sink.as_object() {
            for (key, value) in in_order(fields).filter(|(k, _)| *k != "sink" && *k != "sources") {
                let from = sources[key].as_str().map(|s| format!("  ({s})")).unwrap_or_default();
                output::line(format_args!("    {key:<14}{}{from}", plain(value)));
            }
        }
    }
    section("spool", &pipeline["spool"]);
}

/// The order a person reads a sink's settings in; other keys follow alphabetically.
const READING_ORDER: [&str; 13] = [
    "endpoint",
    "protocol",
    "headers",
    "capture",
    "conventions",
    "sampler",
    "sampleRatio",
    "metrics",
    "metricDims",
    "logs",
    "environment",
    "release",
    "dir",
];

/// `fields` with the keys of [`READING_ORDER`] first.
fn in_order(fields: &serde_json::Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    let rank = |key: &str| READING_ORDER.iter().position(|k| *k == key).unwrap_or(READING_ORDER.len());
    let mut entries: Vec<(&String, &Value)> = fields.iter().collect();
    entries.sort_by_key(|(k, _)| rank(k));
    entries.into_iter()
}

pub fn section(title: &str, value: &Value) {
    output::line(title);
    match value.as_object() {
        None => output::line("  off"),
        Some(fields) => {
            let sources = &value["sources"];
            for (key, value) in in_order(fields).filter(|(k, _)| *k != "sources") {
                let from = sources[key].as_str().map(|s| format!("  ({s})")).unwrap_or_default();
                output::line(format_args!("  {key:<20}{}{from}", plain(value)));
            }
        }
    }
}

/// A JSON value as plain text: strings unquoted, lists joined, `null` as `-`.
pub fn plain(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "none".into(),
        Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
        Value::Object(map) if map.is_empty() => "none".into(),
        Value::Object(map) => map.iter().map(|(k, v)| format!("{k}={}", plain(v))).collect::<Vec<_>>().join(" "),
        other => other.to_string(),
    }
}
