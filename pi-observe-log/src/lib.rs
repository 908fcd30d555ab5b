//! Turns pi-observe events into structured logs.
//!
//! Built so far: [`JsonlFileSink`], the canonical raw contract-event log — one JSON line per
//! event (the design-note form of [`pi_observe_core::ObsEvent`]), written by a background thread
//! behind a bounded queue so `on_event` never blocks. The `tracing` bridge and JSON-lines
//! logging setup come with the log adapter issue.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod jsonl;

pub use jsonl::JsonlFileSink;
