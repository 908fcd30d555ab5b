//! `pi observe status`: the resolved telemetry pipeline and where each value came from, the
//! last run's counters, and the spool.

use std::process::ExitCode;

use clap::Args;
use pi_observe::core::{ContentKind, ContentPolicy};
use pi_observe::otel::names::env;
use pi_observe::otel::{Conventions, Protocol, url_without_secrets};
use pi_observe::spool::Spool;
use serde_json::{Value, json};

use crate::cli::args::SinkArgs;
use crate::cli::config::Config;
use crate::cli::config::telemetry::sink_key;
use crate::cli::run_state::{RunState, state_path};
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

/// The content kinds `policy` captures.
fn captured(policy: &ContentPolicy) -> Vec<&'static str> {
    ContentKind::ALL.iter().filter(|k| policy.captures(**k)).map(|k| k.as_str()).collect()
}

/// The resolved sinks and spool, each value with its source (managed, flag, env, project,
/// global, default): `pi observe status` and `pi config` show this.
pub fn pipeline(setup: &SinkSetup, a: &SinkArgs, events: Option<&std::path::Path>, cfg: &Config) -> Value {
    let sources = Sources { cfg, args: a };
    let mut sinks = Vec::new();
    if let Some(c) = setup.otlp() {
        sinks.push(otlp_status(c, setup, &sources));
    }
    if let Some(c) = setup.sentry() {
        sinks.push(sentry_status(c, setup, &sources));
    }
    for (name, flag, target, policy) in [
        ("log", "--log-json", setup.log_target(), &setup.policies.log),
        ("events", "--events-jsonl", setup.events_target(), &setup.policies.events),
    ] {
        let Some(target) = target else { continue };
        let flagged = if name == "log" { a.log_json.is_some() } else { events.is_some() };
        sinks.push(json!({
            "sink": name,
            "endpoint": if target.is_empty() { "stderr".to_owned() } else { target },
            "protocol": "json lines",
            "capture": captured(policy),
            "pinned": cfg.pinned(name).is_some(),
            "sources": {
                "endpoint": sources.of(&sink_key(name, "path"), flagged.then_some(flag), &[]),
                "capture": sources.capture(name),
            },
        }));
    }
    let spool_config = setup.spool.as_ref().map(|(config, from)| {
        json!({
            "dir": config.dir.display().to_string(),
            "maxBytes": config.max_bytes,
            "maxAgeDays": config.max_age.as_secs_f64() / 86_400.0,
            "sources": {
                "dir": from.to_string(),
                "maxBytes": sources.of(&["telemetry", "spool", "maxBytes"], None, &[SPOOL_MAX_BYTES_VAR]),
                "maxAgeDays": sources.of(&["telemetry", "spool", "maxAgeDays"], None, &[SPOOL_MAX_AGE_VAR]),
            },
        })
    });
    json!({ "sinks": sinks, "spool": spool_config })
}

/// Where each value of a sink came from, for the status.
struct Sources<'a> {
    cfg: &'a Config,
    args: &'a SinkArgs,
}

impl Sources<'_> {
    /// The source of the setting `key`, given by `flag` when it was given, else by `vars`.
    fn of(&self, key: &[&str], flag: Option<&'static str>, vars: &[&str]) -> String {
        self.cfg.source(key, flag, vars).to_string()
    }

    /// The source of sink `name`'s capture, saying when the managed policy caps it.
    fn capture(&self, name: &str) -> String {
        let flagged = self.args.content.capture.iter().any(|c| crate::cli::sinks::capture::names_sink(c, name));
        let capped = self.cfg.capture_cap(name).ok().flatten().is_some();
        let from = self.of(&sink_key(name, "capture"), flagged.then_some("--capture"), &[]);
        if capped && !from.starts_with("managed") { format!("{from}, capped by the managed policy") } else { from }
    }
}

/// The OTLP sink's resolved values and their sources.
fn otlp_status(c: &pi_observe::otel::OtlpConfig, setup: &SinkSetup, sources: &Sources<'_>) -> Value {
    let (a, sink) = (sources.args, |field| sink_key("otlp", field));
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
    json!({
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
        "pinned": sources.cfg.pinned("otlp").is_some(),
        "sources": {
            "endpoint": sources.of(&sink("endpoint"), endpoint_flag, &[env::TRACES_ENDPOINT, env::ENDPOINT]),
            "protocol": sources.of(&sink("protocol"), a.otlp.otlp_protocol.as_ref().map(|_| "--otlp-protocol"), &[env::TRACES_PROTOCOL, env::PROTOCOL]),
            "headers": sources.of(&sink("headers"), (!a.otlp.otlp_header.is_empty()).then_some("--otlp-header"), &[env::TRACES_HEADERS, env::HEADERS]),
            "capture": sources.capture("otlp"),
            "conventions": sources.of(&sink("conventions"), a.otlp.conventions.as_ref().map(|_| "--conventions"), &[]),
            "sampler": sources.of(&["telemetry", "sampler", "name"], None, &[env::TRACES_SAMPLER]),
            "sampleRatio": sources.of(&["telemetry", "sampler", "arg"], None, &[env::TRACES_SAMPLER_ARG]),
            "metrics": sources.of(&sink("metrics"), None, &[env::METRICS_EXPORTER]),
            "metricDims": sources.of(&sink("metricDims"), (!a.otlp.metric_dims.is_empty()).then_some("--metric-dims"), &[]),
            "logs": sources.of(&sink("logs"), a.otlp.otlp_logs.then_some("--otlp-logs"), &[env::LOGS_EXPORTER]),
        },
    })
}

/// The Sentry sink's resolved values and their sources.
fn sentry_status(c: &pi_observe::sentry::SentryConfig, setup: &SinkSetup, sources: &Sources<'_>) -> Value {
    let sink = |field| sink_key("sentry", field);
    let dsn_flag = sources.args.sentry.as_deref().filter(|d| !d.trim().is_empty()).map(|_| "--sentry");
    json!({
        "sink": "sentry",
        "endpoint": c.envelope_url().map(|u| url_without_secrets(&u)),
        "protocol": "sentry envelope",
        "capture": captured(&setup.policies.sentry),
        "environment": c.environment,
        "release": c.release,
        "sampleRatio": c.traces_sample_rate.unwrap_or(1.0),
        "pinned": sources.cfg.pinned("sentry").is_some(),
        "sources": {
            "endpoint": sources.of(&sink("dsn"), dsn_flag, &["SENTRY_DSN"]),
            "capture": sources.capture("sentry"),
            "environment": sources.of(&sink("environment"), None, &["SENTRY_ENVIRONMENT"]),
            "release": sources.of(&sink("release"), None, &["SENTRY_RELEASE"]),
            "sampleRatio": sources.of(&sink("sampleRate"), None, &["SENTRY_TRACES_SAMPLE_RATE"]),
        },
    })
}

/// Prints the status (table or `--json`). Exit 0; a malformed state file is an error naming it.
pub fn run(args: &StatusArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks, None, cfg)?;
    let pipeline = pipeline(&setup, &args.sinks, None, cfg);
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
