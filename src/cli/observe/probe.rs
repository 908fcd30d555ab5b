//! `pi observe test`: one probe through each configured remote sink.

use std::process::ExitCode;

use clap::Args;
use pi_observe::core::{ProbeOutcome, TraceId};
use serde_json::json;

use crate::cli::config::Config;
use crate::cli::sinks::SinkArgs;
use crate::cli::sinks::SinkSetup;
use crate::cli::sinks::trace_link::trace_url_template;
use crate::cli::{CliError, output};

/// `pi observe test` arguments: the sinks, as for a run.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// One JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sinks: SinkArgs,
}

/// Probes each remote sink once: one line per request on stdout, then the probe's trace id
/// (linked through `PI_TRACE_URL_TEMPLATE`). Exit 1 when any sink did not take its probe.
pub fn run(args: &TestArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let setup = SinkSetup::resolve(&args.sinks, None, cfg)?;
    if !setup.has_remote() {
        return Err(CliError::Usage(
            "no remote sink to test: give --otlp or --sentry (or OTEL_EXPORTER_OTLP_ENDPOINT, SENTRY_DSN)".into(),
        ));
    }
    let template = trace_url_template()?;
    let trace = TraceId::random();
    let mut outcomes = Vec::new();
    for (_, sink) in setup.sinks() {
        outcomes.extend(sink.probe(trace)?);
    }
    let link = template.map(|t| t.to(&trace));
    if args.json {
        output::line(json!({
            "traceId": trace.to_string(),
            "traceUrl": link,
            "sinks": outcomes.iter().map(outcome_json).collect::<Vec<_>>(),
        }));
    } else {
        for o in &outcomes {
            output::line(outcome_line(o));
        }
        output::line(format_args!("probe trace {trace}{}", link.map(|l| format!(" {l}")).unwrap_or_default()));
    }
    // A signal the backend does not take (metrics on a trace-only backend) is said, not failed;
    // traces are what every sink must take.
    let fine = |o: &ProbeOutcome| o.accepted || (o.unsupported && o.signal != "traces");
    Ok(if outcomes.iter().all(fine) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn outcome_json(o: &ProbeOutcome) -> serde_json::Value {
    let mut out = json!({
        "sink": o.sink,
        "signal": o.signal,
        "endpoint": o.endpoint,
        "protocol": o.protocol,
        "reachable": o.reachable,
        "status": o.status,
        "latencyMs": o.latency.as_secs_f64() * 1000.0,
        "authAccepted": o.auth_accepted,
        "ok": o.accepted,
        "error": o.error,
    });
    if o.unsupported {
        out["unsupported"] = serde_json::Value::Bool(true);
    }
    out
}

fn outcome_line(o: &ProbeOutcome) -> String {
    let auth = match o.auth_accepted {
        Some(true) => "auth accepted",
        Some(false) => "auth REFUSED",
        None => "auth unknown",
    };
    format!(
        "{:<4} {:<7} {:<8} {}  {}  {}  {}  {:.0} ms  {auth}{}",
        match (o.accepted, o.unsupported) {
            (true, _) => "ok",
            (false, true) => "skip",
            (false, false) => "FAIL",
        },
        o.sink,
        o.signal,
        o.endpoint,
        o.protocol,
        if o.reachable { "reachable" } else { "unreachable" },
        o.status.as_deref().unwrap_or("no answer"),
        o.latency.as_secs_f64() * 1000.0,
        o.error.as_deref().map(|e| format!("  ({e})")).unwrap_or_default(),
    )
}
