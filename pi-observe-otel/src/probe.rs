//! `pi observe test` for OTLP: one probe span and one metric point, each sent once.

use std::time::SystemTime;

use opentelemetry::InstrumentationScope;
use pi_observe_core::{EventKind, ObsEvent, ProbeOutcome, SpanId, Timestamp, TraceId};

use crate::config::{ConfigError, OtlpConfig};
use crate::convert::span_data;
use crate::export::{Attempt, Exporter, Payload};
use crate::metrics::{Aggregator, metric_names};

/// The probe span's name.
pub const PROBE_SPAN: &str = "pi.observe.probe";

/// Sends one probe span (a root named [`PROBE_SPAN`] in `trace_id`) and, when metrics are on,
/// one metric point ([`metric_names::PROBE`]) to `config`'s receiver — each one request, no
/// retries — and says what came back. Blocks the calling thread (which may be inside an async
/// runtime).
pub fn probe(config: &OtlpConfig, trace_id: TraceId) -> Result<Vec<ProbeOutcome>, ConfigError> {
    let resource = config.resource();
    let exporter = Exporter::new(config, &resource)?;
    let scope = InstrumentationScope::builder("pi-observe")
        .with_version(env!("CARGO_PKG_VERSION"))
        .with_schema_url(config.schema_url())
        .build();
    let mut start = ObsEvent::new(EventKind::Start, PROBE_SPAN, trace_id);
    start.span_id = Some(SpanId::random());
    let mut end = start.clone();
    end.kind = EventKind::End;
    end.timestamp = Timestamp::now();
    let mut payloads = Vec::new();
    if let Some(span) = span_data(&start, Some(&end), &[], SystemTime::now(), config.conventions, &scope) {
        payloads.push(exporter.traces_payload(vec![span]));
    }
    if config.metrics.unwrap_or(true) {
        let mut metrics = Aggregator::with_limit(Vec::new(), 1);
        metrics.set(metric_names::PROBE, Vec::new(), 1.0);
        if let Some(request) = metrics.request(&exporter.proto_resource(), SystemTime::now()) {
            payloads.push(exporter.metrics_payload(request));
        }
    }
    // A thread of its own: the caller may be inside an async runtime.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| ConfigError::new("OTLP exporter", format!("cannot start the export runtime: {e}")))?;
                Ok(payloads.iter().map(|p| outcome(&exporter, p, &runtime)).collect())
            })
            .join()
            .unwrap_or_else(|_| Err(ConfigError::new("OTLP probe", "probe thread failed")))
    })
}

fn outcome(exporter: &Exporter, payload: &Payload, runtime: &tokio::runtime::Runtime) -> ProbeOutcome {
    let (attempt, status, latency) = runtime.block_on(exporter.probe(payload));
    let answered = status.is_some();
    let unsupported = matches!(attempt, Attempt::Unsupported(_));
    let (accepted, auth_accepted, error) = match attempt {
        Attempt::Done => (true, Some(true), None),
        Attempt::Unauthorized(why) => (false, Some(false), Some(why)),
        Attempt::Unsupported(why) => {
            let signal = payload.signal_name();
            let off = if signal == "metrics" { "OTEL_METRICS_EXPORTER=none" } else { "OTEL_LOGS_EXPORTER=none" };
            (false, None, Some(format!("{why}: this backend takes no {signal}; {off} stops sending them")))
        }
        Attempt::Reject(why) | Attempt::Retry { why, .. } => (false, None, Some(why)),
    };
    ProbeOutcome {
        sink: "otlp".into(),
        signal: payload.signal_name().into(),
        endpoint: exporter.url_of(payload),
        protocol: exporter.protocol_of(payload).into(),
        reachable: answered,
        status,
        latency,
        auth_accepted,
        accepted,
        error,
        unsupported,
    }
}
