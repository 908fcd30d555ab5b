//! When spans leave: the run's first ones 100 ms after the first is paired, the rest on the
//! schedule.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_core::{ContentPolicy, Observability, Payload, names, trace_operation_sync};
use pi_observe_otel::testing::Receiver;
use pi_observe_otel::{OtelSubscriber, OtlpConfig};

/// Polls `done` every few milliseconds until it holds or `within` has passed.
fn eventually(within: Duration, done: impl Fn() -> bool) -> bool {
    let until = Instant::now() + within;
    while !done() {
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn the_first_spans_leave_early_and_the_rest_wait_for_the_schedule() {
    let receiver = Receiver::start(vec![]);
    // A schedule no test waits for: only the early first export can deliver before shutdown.
    let config = OtlpConfig {
        traces_endpoint: Some(receiver.endpoint.clone()),
        schedule_delay: Some(Duration::from_secs(600)),
        metrics: Some(false),
        ..OtlpConfig::default()
    };
    let hub = Observability::new();
    let otel = OtelSubscriber::new(config).unwrap();
    let _subscription = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let span = |turn: i64| {
        hub.in_scope(|| {
            trace_operation_sync(names::AGENT_TURN, || Payload::new().safe(names::TURN_INDEX, turn), |_| ())
        })
    };

    span(0);
    assert!(eventually(Duration::from_secs(10), || otel.stats().spans_exported == 1), "{:?}", otel.stats());
    assert_eq!(receiver.spans().len(), 1);

    // Later spans wait for the schedule (here: the shutdown), in one request.
    span(1);
    span(2);
    pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(10)).unwrap();
    assert_eq!(otel.stats().spans_exported, 3);
    assert_eq!(*receiver.attempts.lock().unwrap(), 2, "one early request, one at shutdown");
}
