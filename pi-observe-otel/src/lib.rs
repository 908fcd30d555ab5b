//! Turns pi-observe events into OpenTelemetry traces over OTLP.
//!
//! - [`convert`]: pure mapping of contract records to `SpanData` (ids and times exactly as in
//!   the records; `pi.*` attributes, GenAI or OpenInference conventions; attribution);
//! - [`OtlpConfig`]: configuration from code, the `OTEL_*` environment, or both (code wins);
//! - [`OtelSubscriber`]: the subscriber — `on_event` only enqueues (bounded); a worker thread
//!   pairs records into spans, batches and exports over OTLP/HTTP (protobuf or JSON, gzip),
//!   retrying with backoff and `Retry-After`, stopping on 401/403, counting every drop.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
pub mod convert;
mod export;
pub mod logs;
pub mod metrics;
pub mod names;
mod pipeline;
mod probe;
mod self_metrics;
mod spool;
mod stats;
#[cfg(feature = "testing")]
pub mod testing;
mod wire;

pub use config::{
    CapturedRequest, ConfigError, OtlpConfig, Protocol, SignalSettings, TracesExporter, WireCapture, check_header,
    check_url, sampler_setting, signal_url, traces_url_base, url_without_secrets,
};
pub use convert::Conventions;
pub use pipeline::OtelSubscriber;
pub use probe::{PROBE_SPAN, probe};
pub use spool::deliver_spooled;
pub use stats::{ExportStats, SignalCounts};
