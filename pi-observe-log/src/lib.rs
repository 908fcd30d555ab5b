//! Turns pi-observe events into structured logs.
//!
//! - [`TracingSubscriber`]: every contract event as one `tracing` event (target `pi_observe`,
//!   level by kind, flat fields), so an application's existing `tracing` setup sees the agent.
//! - [`init_json_logging`]: a JSON-lines `tracing-subscriber` to stderr or a file through a
//!   bounded non-blocking writer, filtered by `PI_LOG` / `RUST_LOG`.
//! - [`JsonlFileSink`]: the canonical raw contract-event log — one JSON line per event (the
//!   design-note form of [`pi_observe_core::ObsEvent`]), written by a background thread behind a
//!   bounded queue so `on_event` never blocks.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batched;
mod bridge;
mod jsonl;
mod setup;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use batched::{BATCH_BYTES, BatchedWriter, INTERVAL, LineCounts, Pushed};
pub use bridge::{SpanLevel, TARGET, TracingSubscriber};
pub use jsonl::JsonlFileSink;
pub use setup::{
    JsonLogConfig, LogDestination, LogGuard, LogInitError, LogWriter, env_filter, init_json_logging, json_subscriber,
    non_blocking,
};
