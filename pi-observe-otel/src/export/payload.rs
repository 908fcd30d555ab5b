//! One request's worth of telemetry, encoded once: the signal, the request body, its wire form.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// The sink name spooled OTLP batches carry.
/// The three OTLP signals.
#[derive(Clone, Copy)]
pub(super) enum Signal {
    Traces,
    Metrics,
    Logs,
}

impl Signal {
    pub(super) fn name(self) -> &'static str {
        match self {
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
            Signal::Logs => "logs",
        }
    }
}

/// The sink name spooled OTLP batches carry.
pub(crate) const SPOOL_SINK: &str = "otlp";

pub(super) enum Body {
    Traces(ExportTraceServiceRequest),
    Metrics(ExportMetricsServiceRequest),
    Logs(ExportLogsServiceRequest),
}

impl Body {
    pub(super) fn to_protobuf(&self) -> Vec<u8> {
        match self {
            Body::Traces(r) => r.encode_to_vec(),
            Body::Metrics(r) => r.encode_to_vec(),
            Body::Logs(r) => r.encode_to_vec(),
        }
    }

    pub(super) fn to_json(&self) -> Vec<u8> {
        match self {
            Body::Traces(r) => serde_json::to_vec(r).unwrap_or_default(),
            Body::Metrics(r) => serde_json::to_vec(r).unwrap_or_default(),
            Body::Logs(r) => serde_json::to_vec(r).unwrap_or_default(),
        }
    }

    pub(super) fn from_protobuf(signal: &str, bytes: &[u8]) -> Option<Body> {
        match signal {
            "traces" => ExportTraceServiceRequest::decode(bytes).ok().map(Body::Traces),
            "metrics" => ExportMetricsServiceRequest::decode(bytes).ok().map(Body::Metrics),
            "logs" => ExportLogsServiceRequest::decode(bytes).ok().map(Body::Logs),
            _ => None,
        }
    }
}

impl Payload {
    /// `traces`, `metrics` or `logs`.
    pub(crate) fn signal_name(&self) -> &'static str {
        self.signal.name()
    }
}

/// One request's worth of telemetry, encoded once: what is sent and, when it cannot be sent,
/// what is spooled.
pub(crate) struct Payload {
    pub(super) signal: Signal,
    /// Spans, log records or metric requests in it.
    pub(crate) items: u64,
    pub(super) wire: Wire,
}

pub(super) enum Wire {
    /// The HTTP body (protobuf or JSON, gzipped when configured).
    Http(Vec<u8>),
    /// The gRPC request message.
    Grpc(Body),
}
