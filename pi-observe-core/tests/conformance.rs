//! The conformance suite against the reference recorder (the capture subscriber), so the suite
//! itself is known to pass on a correct subscriber before adapters run it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use pi_observe_core::Subscriber;
use pi_observe_core::testing::conformance::{self, ConformanceFixture};
use pi_observe_core::testing::silence_expected_panics;
use pi_observe_core::testing::{CaptureSubscriber, RecordedSpan, spans_from_events};

struct Reference(CaptureSubscriber);

impl ConformanceFixture for Reference {
    fn subscriber(&mut self) -> Arc<dyn Subscriber> {
        Arc::new(self.0.clone())
    }
    fn finished_spans(&mut self) -> Vec<RecordedSpan> {
        spans_from_events(&self.0.events())
    }
}

#[test]
fn reference_recorder_passes_every_conformance_case() {
    silence_expected_panics(&["conformance panic", "payload builder failed", "record failed", "event payload failed"]);
    conformance::run_all(|| Box::new(Reference(CaptureSubscriber::new())));
}

/// A subscriber that forgets every other span must fail the suite: the suite can fail.
struct Lossy(CaptureSubscriber);

impl ConformanceFixture for Lossy {
    fn subscriber(&mut self) -> Arc<dyn Subscriber> {
        Arc::new(self.0.clone())
    }
    fn finished_spans(&mut self) -> Vec<RecordedSpan> {
        let mut spans = spans_from_events(&self.0.events());
        for span in &mut spans {
            span.parent_span_id = None;
            span.attributes.clear();
            span.error = None;
        }
        spans
    }
}

#[test]
fn a_broken_adapter_fails_the_conformance_suite() {
    silence_expected_panics(&["conformance panic", "payload builder failed", "record failed", "event payload failed"]);
    let failures: Vec<_> = conformance::cases()
        .iter()
        .filter(|case| case.run(&mut Lossy(CaptureSubscriber::new())).is_err())
        .map(|case| case.name)
        .collect();
    for expected in [
        "err_result_is_returned_unchanged_and_the_span_is_an_error",
        "end_attributes_merge_over_start_attributes",
        "nested_operations_form_one_tree",
        "dropped_operation_ends_as_a_cancelled_error",
    ] {
        assert!(failures.contains(&expected), "{expected} did not fail: {failures:?}");
    }
}
