//! The OTLP sink: traces, metrics and logs to a collector or backend (`--otlp`,
//! `OTEL_EXPORTER_OTLP_*`, `telemetry.sinks.otlp`), through `pi-observe-otel`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe::core::{ProbeOutcome, TraceId};
use pi_observe::otel::names::env;
use pi_observe::otel::{Conventions, OtelSubscriber, OtlpConfig, Protocol, WireCapture, url_without_secrets};
use pi_observe::spool::Spool;

use serde::Serialize;
use serde_json::{Value, json};

use super::exit;
use super::sink::{
    Attach, Attached, CanaryReader, Delivered, Health, Resolve, Resolved, Running, Sink, SinkKind, SinkState, Sources,
    Subscribed, no_flags,
};
use crate::cli::CliError;
use crate::cli::config::keys::sampler;
use crate::cli::output;
use crate::cli::settings::check;

mod settings;

use settings::key;

/// The OTLP sink in the list of sinks (`SINKS`).
pub const KIND: SinkKind = SinkKind {
    name: "otlp",
    remote: true,
    pins: Some(&settings::key::ENDPOINT),
    flags: no_flags,
    settings: Some(check::<settings::Settings>),
    resolve,
};

fn resolve(from: &Resolve<'_>) -> Resolved {
    let Some(mut config) = settings::resolve(&from.args.otlp, from.cfg)? else { return Ok(None) };
    config.spool = from.spool()?;
    Ok(Some(Box::new(OtlpSink { config })))
}

struct OtlpSink {
    config: OtlpConfig,
}

impl Sink for OtlpSink {
    fn status(&self, sources: &Sources<'_>) -> Option<Value> {
        Some(status(&self.config, sources))
    }

    fn flush_deadline(&self) -> Option<Duration> {
        self.config.timeout
    }

    fn without_metrics(&mut self) {
        self.config.metrics = Some(false);
    }

    fn for_backfill(&mut self) {
        self.config.check_receiver_first = true;
    }

    fn probe(&self, trace: TraceId) -> Result<Vec<ProbeOutcome>, CliError> {
        Ok(pi_observe::otel::probe(&self.config, trace)?)
    }

    fn deliver_spooled(&self, deadline: Instant) -> Result<Option<Delivered>, CliError> {
        let Some(spool) = self.config.spool.clone().map(Spool::new) else { return Ok(None) };
        let result = pi_observe::otel::deliver_spooled(&self.config, &spool, deadline)?;
        Ok(Some(Delivered { destination: destinations(&self.config), result, stats: spool.stats() }))
    }

    fn canary(&mut self, _dir: &Path) -> Option<CanaryReader> {
        let capture = WireCapture::default();
        self.config.capture = Some(capture.clone());
        self.config.spool = None;
        Some(Box::new(move || capture.requests().into_iter().map(|r| r.body).collect()))
    }

    /// Run off the agent's threads with the other such sinks: its `on_event` only queues, but
    /// on the agent's thread each record then cost a copy, a lock and now and then a wake-up of
    /// the worker, run cold between the agent's own work; on the sinks' thread they come in
    /// batches (ADR 0025).
    fn attach(self: Box<Self>, _to: &Attach<'_>) -> Result<Option<Attached>, CliError> {
        let otel = OtelSubscriber::new(self.config).map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(Some(Attached {
            subscription: Subscribed::OffThread(otel.clone(), "--otlp"),
            running: Some(Arc::new(RunningOtlp(otel))),
        }))
    }
}

/// `; metrics: 2 exports delivered, 1 spooled` — a signal's own counts on the exit line (nothing
/// when it sent nothing).
fn signal_note(name: &str, counts: &pi_observe::otel::SignalCounts) -> String {
    signal_summary(counts).map(|summary| format!("; {name}: {summary}")).unwrap_or_default()
}

/// `2 exports delivered, 1 spooled`, or `not taken by this backend` when the receiver said so;
/// `None` when the signal sent nothing.
fn signal_summary(counts: &pi_observe::otel::SignalCounts) -> Option<String> {
    if counts.unsupported {
        return Some("not taken by this backend".into());
    }
    if !counts.any() {
        return None;
    }
    let plural = if counts.delivered == 1 { "" } else { "s" };
    let mut summary = format!("{} export{plural} delivered", counts.delivered);
    if counts.spooled > 0 {
        summary.push_str(&format!(", {} spooled", counts.spooled));
    }
    if counts.not_delivered > 0 {
        summary.push_str(&format!(", {} not delivered", counts.not_delivered));
    }
    Some(summary)
}

/// The sink's resolved values and their sources.
fn status(c: &OtlpConfig, sources: &Sources<'_>) -> Value {
    let a = sources.args;
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
    let sampler = std::env::var(env::TRACES_SAMPLER)
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| sources.cfg.find(&sampler::NAME).map(|(name, _)| name.as_str().to_owned()));
    let dims = c.metric_dims.clone().unwrap_or_else(|| vec![pi_observe::core::names::CTX_ORG_ID.to_owned()]);
    json!({
        "sink": "otlp",
        "endpoint": url_without_secrets(&c.endpoint()),
        "protocol": protocol,
        "headers": c.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        "capture": super::sink::captured(sources.policy),
        "conventions": conventions,
        "sampler": sampler.unwrap_or_else(|| "always_on".into()),
        "sampleRatio": c.sample_ratio.unwrap_or(1.0),
        "metrics": c.metrics.unwrap_or(true),
        "metricDims": dims,
        "logs": c.logs.unwrap_or(false),
        "pinned": sources.cfg.pinned(&key::ENDPOINT).is_some(),
        "sources": {
            "endpoint": sources.of(&key::ENDPOINT, endpoint_flag, &[env::TRACES_ENDPOINT, env::ENDPOINT]),
            "protocol": sources.of(&key::PROTOCOL, a.otlp.otlp_protocol.as_ref().map(|_| "--otlp-protocol"), &[env::TRACES_PROTOCOL, env::PROTOCOL]),
            "headers": sources.of(&key::HEADERS, (!a.otlp.otlp_header.is_empty()).then_some("--otlp-header"), &[env::TRACES_HEADERS, env::HEADERS]),
            "capture": sources.capture.clone(),
            "conventions": sources.of(&key::CONVENTIONS, a.otlp.conventions.as_ref().map(|_| "--conventions"), &[]),
            "sampler": sources.of(&sampler::NAME, None, &[env::TRACES_SAMPLER]),
            "sampleRatio": sources.of(&sampler::ARG, None, &[env::TRACES_SAMPLER_ARG]),
            "metrics": sources.of(&key::METRICS, None, &[env::METRICS_EXPORTER]),
            "metricDims": sources.of(&key::METRIC_DIMS, (!a.otlp.metric_dims.is_empty()).then_some("--metric-dims"), &[]),
            "logs": sources.of(&key::LOGS, a.otlp.otlp_logs.then_some("--otlp-logs"), &[env::LOGS_EXPORTER]),
        },
    })
}

/// Where the sink delivers spooled batches of every signal, without secrets: the gRPC
/// collector address, or the HTTP URLs of traces, metrics and logs (`…/v1/{traces,metrics,logs}`
/// when they share a base).
fn destinations(otlp: &OtlpConfig) -> String {
    let traces = url_without_secrets(&otlp.endpoint());
    if otlp.protocol == Some(Protocol::Grpc) {
        return traces;
    }
    let (metrics, logs) = (url_without_secrets(&otlp.metrics_endpoint()), url_without_secrets(&otlp.logs_endpoint()));
    match traces.strip_suffix("/v1/traces") {
        Some(base) if metrics == format!("{base}/v1/metrics") && logs == format!("{base}/v1/logs") => {
            format!("{base}/v1/{{traces,metrics,logs}}")
        }
        _ => format!("{traces}, {metrics}, {logs}"),
    }
}

/// The attached sink.
struct RunningOtlp(Arc<OtelSubscriber>);

impl Running for RunningOtlp {
    fn health(&self, health: &mut Health) {
        let stats = self.0.stats();
        health.exported += stats.spans_exported;
        health.dropped += stats.spans_dropped();
        health.spooled += stats.spans_spooled;
        health.last_error = health.last_error.take().or(stats.last_error);
    }

    /// Each trace id (with a link from `PI_TRACE_URL_TEMPLATE`), the delivery totals and each
    /// export diagnostic.
    fn report(&self, traces: &[TraceId], _deadline: Duration) {
        let (otel, stats) = (&self.0, self.0.stats());
        let template = super::trace_link::trace_url_template().ok().flatten();
        for trace in traces {
            let link = template.as_ref().map(|t| format!(" {}", t.to(trace))).unwrap_or_default();
            output::error(format_args!("pi: trace {trace}{link}"));
        }
        let not_delivered = stats.spans_dropped();
        let spooled = match (stats.spans_spooled, otel.spool_stats()) {
            (0, _) | (_, None) => String::new(),
            (n, Some(spool)) => exit::spooled_note(n, spool.gone_items.get("traces").copied().unwrap_or(0)),
        };
        let why = if not_delivered > 0 || stats.spans_spooled > 0 { stats.last_error.as_deref() } else { None };
        let others: String =
            [("metrics", &stats.metrics), ("logs", &stats.logs)].iter().map(|(n, c)| signal_note(n, c)).collect();
        output::error(format_args!(
            "pi: otlp: {} spans delivered{spooled}, {not_delivered} not delivered{}{others}",
            stats.spans_exported,
            why.map(|w| format!(" (last error: {w})")).unwrap_or_default(),
        ));
        exit::report_from_spool("otlp", &stats.from_spool);
        let spool_diagnostics = otel.spool_stats().map(|s| s.diagnostics).unwrap_or_default();
        exit::warnings(stats.diagnostics.into_iter().chain(spool_diagnostics));
    }

    fn state(&self) -> SinkState {
        let stats = self.0.stats();
        SinkState::remote(Counters::of(&stats), self.0.spool_stats(), &stats.from_spool)
    }
}

/// The sink's counters in the state file, in spans.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Counters {
    spans_started: u64,
    delivered: u64,
    spooled: u64,
    sampled_out: u64,
    dropped: std::collections::BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    delivered_from_spool: u64,
    /// What became of the metrics exports (absent when none were sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<String>,
    /// What became of the logs exports.
    #[serde(skip_serializing_if = "Option::is_none")]
    logs: Option<String>,
}

impl Counters {
    fn of(stats: &pi_observe::otel::ExportStats) -> Self {
        let dropped = [
            ("queue_full", stats.dropped_queue_full),
            ("export_failed", stats.dropped_failed),
            ("rejected", stats.dropped_rejected),
            ("unauthorized", stats.dropped_unauthorized),
            ("shutdown", stats.dropped_shutdown),
        ];
        Counters {
            spans_started: stats.spans_started,
            delivered: stats.spans_exported,
            spooled: stats.spans_spooled,
            sampled_out: stats.spans_sampled_out,
            dropped: dropped.into_iter().filter(|(_, n)| *n > 0).collect(),
            last_error: stats.last_error.clone(),
            delivered_from_spool: stats.from_spool.delivered_items,
            metrics: signal_summary(&stats.metrics),
            logs: signal_summary(&stats.logs),
        }
    }
}
