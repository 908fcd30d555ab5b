//! The core conformance suite against the `tracing` bridge: the scenarios run on several threads,
//! so this binary installs one global JSON subscriber writing to a buffer, and the fixture reads
//! the lines back into contract records.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use pi_observe_core::Subscriber;
use pi_observe_core::testing::{RecordedSpan, conformance, spans_from_events};
use pi_observe_log::{SpanLevel, TracingSubscriber, json_subscriber};
use support::{Buffer, event_from_line};
use tracing_subscriber::EnvFilter;

struct LogFixture(Buffer);

impl conformance::ConformanceFixture for LogFixture {
    fn subscriber(&mut self) -> Arc<dyn Subscriber> {
        self.0.clear();
        Arc::new(TracingSubscriber::new().span_level(SpanLevel::Info))
    }

    fn finished_spans(&mut self) -> Vec<RecordedSpan> {
        let events: Vec<_> = support::lines(&self.0).iter().map(event_from_line).collect();
        spans_from_events(&events)
    }
}

#[test]
fn the_tracing_bridge_passes_the_conformance_suite() {
    let buffer = Buffer::default();
    tracing::subscriber::set_global_default(json_subscriber(buffer.clone(), EnvFilter::new("pi_observe=trace")))
        .unwrap();
    conformance::run_all(|| Box::new(LogFixture(buffer.clone())));
}
