//! `pi observe status`: the resolved telemetry pipeline and where each value came from, the
//! last run's counters, and the spool.

use std::process::ExitCode;

use clap::Args;
use pi_observe::core::{ContentKind, ContentPolicy};
use pi_observe::otel::names::env;
use pi_observe::otel::{Conventions, Protocol, url_without_secrets};
use pi_observe::spool::Spool;
use serde_json::{Value, json};

use super::state::{RunState, state_path};
use crate::cli::args::SinkArgs;
use crate::cli::sinks::SinkSetup;
use crate::cli::sinks::config::{SPOOL_MAX_AGE_VAR, SPOOL_MAX_BYTES_VAR};
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

/// Where a value came from: the first of `flag` (when given) and the set variables, else
/// `default`.
fn source(flag: Option<&str>, vars: &[&str]) -> String {
    if let Some(flag) = flag {
        return format!("flag {flag}");
    }
    vars.iter().find(|v| crate::cli::setup::env_set(v)).map_or_else(|| "default".to_owned(), |v| format!("env {v}"))
}

/// The content kinds `policy` captures.
fn captured(policy: &ContentPolicy) -> Vec<&'static str> {
    ContentKind::ALL.iter().filter(|k| policy.captures(**k)).map(|k| k.as_str()).collect()
}

/// Prints the status (table or `--json`). Exit 0; a malformed state file is an error naming it.
pub fn run(args: &StatusArgs) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks)?;
    let a = &args.sinks;
    let capture_source = source((!a.content.capture.is_empty()).then_some("--capture"), &[]);
    let mut sinks = Vec::new();
    if let Some(c) = setup.otlp() {
        let endpoint_flag = a.otlp.otlp.as_deref().filter(|e| !e.trim().is_empty()).map(|_| "--otlp");
        let protocol = match c.protocol {
            Some(Protocol::Grpc) => "grpc",
            Some(Protocol::HttpJson) => "http/json",
            _ => "http/protobuf",
        };
        let conventions = match c.conventions {
            Conventions::GenAi => "genai",
            Conventions::OpenInference => "openinference",
            Conventions::Both => "both",
        };
        let sampler = std::env::var(env::TRACES_SAMPLER).ok().filter(|s| !s.trim().is_empty());
        let dims = c.metric_dims.clone().unwrap_or_else(|| vec![pi_observe::core::names::CTX_ORG_ID.to_owned()]);
        sinks.push(json!({
            "sink": "otlp",
            "endpoint": url_without_secrets(&c.endpoint()),
            "protocol": protocol,
            "headers": c.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            "capture": captured(&setup.policies.otlp),
            "conventions": conventions,
            "sampler": sampler.unwrap_or_else(|| "always_on".into()),
            "sampleRatio": c.sample_ratio.unwrap_or(1.0),
            "metrics": c.metrics.unwrap_or(true),
            "metricDims": dims,
            "logs": c.logs.unwrap_or(false),
            "sources": {
                "endpoint": source(endpoint_flag, &[env::TRACES_ENDPOINT, env::ENDPOINT]),
                "protocol": source(a.otlp.otlp_protocol.as_ref().map(|_| "--otlp-protocol"), &[env::TRACES_PROTOCOL, env::PROTOCOL]),
                "headers": source((!a.otlp.otlp_header.is_empty()).then_some("--otlp-header"), &[env::TRACES_HEADERS, env::HEADERS]),
                "capture": capture_source,
                "conventions": source(a.otlp.conventions.as_ref().map(|_| "--conventions"), &[]),
                "sampler": source(None, &[env::TRACES_SAMPLER]),
                "metricDims": source((!a.otlp.metric_dims.is_empty()).then_some("--metric-dims"), &[]),
                "logs": source(a.otlp.otlp_logs.then_some("--otlp-logs"), &[env::LOGS_EXPORTER]),
            },
        }));
    }
    if let Some(c) = setup.sentry() {
        let dsn_flag = a.sentry.as_deref().filter(|d| !d.trim().is_empty()).map(|_| "--sentry");
        sinks.push(json!({
            "sink": "sentry",
            "endpoint": c.envelope_url().map(|u| url_without_secrets(&u)),
            "protocol": "sentry envelope",
            "capture": captured(&setup.policies.sentry),
            "environment": c.environment,
            "release": c.release,
            "sampleRatio": c.traces_sample_rate.unwrap_or(1.0),
            "sources": {
                "endpoint": source(dsn_flag, &["SENTRY_DSN"]),
                "capture": capture_source,
                "sampleRatio": source(None, &["SENTRY_TRACES_SAMPLE_RATE"]),
            },
        }));
    }
    if let Some(target) = &a.log_json {
        sinks.push(json!({
            "sink": "log",
            "endpoint": if target.is_empty() { "stderr".to_owned() } else { target.clone() },
            "protocol": "json lines",
            "capture": captured(&setup.policies.log),
            "sources": { "endpoint": "flag --log-json", "capture": capture_source },
        }));
    }
    let spool_config = setup.spool.as_ref().map(|(config, from)| {
        json!({
            "dir": config.dir.display().to_string(),
            "maxBytes": config.max_bytes,
            "maxAgeDays": config.max_age.as_secs_f64() / 86_400.0,
            "sources": {
                "dir": from,
                "maxBytes": source(None, &[SPOOL_MAX_BYTES_VAR]),
                "maxAgeDays": source(None, &[SPOOL_MAX_AGE_VAR]),
            },
        })
    });
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
        "pipeline": { "sinks": sinks, "spool": spool_config },
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
    output::line("telemetry pipeline");
    let sinks = document["pipeline"]["sinks"].as_array().cloned().unwrap_or_default();
    if sinks.is_empty() {
        output::line("  no remote or log sink configured (give --otlp, --sentry, --log-json or their variables)");
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
    section("spool", &document["pipeline"]["spool"]);
    section("spool contents", &document["spool"]);
    match &document["lastRun"] {
        Value::Null => output::line("last run\n  none recorded yet"),
        run => {
            output::line(format_args!(
                "last run ({} at {})",
                run["command"].as_str().unwrap_or_default(),
                run["finishedAt"].as_str().unwrap_or_default()
            ));
            for part in ["hub", "otlp", "sentry", "spool"] {
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

fn section(title: &str, value: &Value) {
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
fn plain(value: &Value) -> String {
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
