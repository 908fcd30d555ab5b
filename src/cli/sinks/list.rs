//! The list of sinks: one line per sink.

use super::sink::SinkKind;
use super::{events, json, log, otlp, sentry};

/// Every sink, in the order `pi observe status` lists them and the exit lines speak.
pub const SINKS: &[SinkKind] = &[otlp::KIND, sentry::KIND, log::KIND, events::KIND, json::KIND];
