//! What sending one probe through a sink found (`pi observe test`): the same shape for every
//! adapter, so a tool can print or check them alike.

use std::time::Duration;

/// The outcome of one probe request to one sink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The sink (`otlp`, `sentry`).
    pub sink: String,
    /// What was sent (`traces`, `metrics`, `envelope`).
    pub signal: String,
    /// Where it went, without credentials.
    pub endpoint: String,
    /// How (`http/protobuf`, `http/json`, `grpc`, `sentry`).
    pub protocol: String,
    /// The receiver answered (any status).
    pub reachable: bool,
    /// Its answer (`HTTP 200`, `gRPC Unauthenticated`), when there was one.
    pub status: Option<String>,
    /// From sending to the answer (or to giving up).
    pub latency: Duration,
    /// `Some(false)` when the receiver refused the credentials (401/403, `UNAUTHENTICATED`,
    /// `PERMISSION_DENIED`); `None` without an answer.
    pub auth_accepted: Option<bool>,
    /// The receiver took the probe.
    pub accepted: bool,
    /// Why not, when it did not.
    pub error: Option<String>,
    /// The receiver answered that it takes no such signal (HTTP 404/405/415, gRPC
    /// `Unimplemented`): a trace-only backend asked for metrics. Not a failure of the sink.
    pub unsupported: bool,
}
