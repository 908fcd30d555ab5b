//! Observation never changes the outcome: panicking subscribers, redactors and payload builders
//! are isolated and counted, and the operation's result is exactly what it would have been.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pi_observe_core::testing::silence_expected_panics;
use pi_observe_core::testing::{CaptureSubscriber, assert_paired};
use pi_observe_core::{
    ContentKind, ContentPolicy, DropReason, FieldRef, ObsEvent, Observability, Payload, Redaction, Subscriber,
    SubscriberError, names, trace_operation,
};

#[derive(Debug, PartialEq)]
struct Denied(u32);

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "denied {}", self.0)
    }
}

async fn workload() -> (Result<u32, Denied>, Result<u32, Denied>) {
    let ok = trace_operation(
        names::AGENT_PROMPT,
        || Payload::new().content(ContentKind::Prompt, names::PROMPT_TEXT, "hello"),
        async {
            trace_operation(names::AGENT_TURN, (), async { Ok::<_, Denied>(()) }).await.ok();
            Ok(41 + 1)
        },
    )
    .await;
    let err = trace_operation(names::AGENT_TOOL_CALL, (), async { Err(Denied(7)) }).await;
    (ok, err)
}

fn run(hub: &Observability) -> (Result<u32, Denied>, Result<u32, Denied>) {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(hub.scope(workload()))
}

#[test]
fn a_panicking_subscriber_and_redactor_change_nothing_and_are_counted() {
    silence_expected_panics(&["subscriber bug", "redactor bug", "shutdown bug"]);
    let baseline = run(&Observability::new());

    let hub = Observability::with_policy(
        ContentPolicy::default()
            .capture(ContentKind::Prompt)
            .redactor(|_: FieldRef<'_>, _: &str| -> Redaction { panic!("redactor bug") }),
    );
    let panics = Arc::new(AtomicUsize::new(0));
    let seen = panics.clone();
    let _bad = hub.subscribe(move |_: &ObsEvent| {
        seen.fetch_add(1, Ordering::SeqCst);
        panic!("subscriber bug");
    });
    let (capture, _good) = CaptureSubscriber::attach(&hub);
    let observed = run(&hub);

    assert_eq!(observed, baseline, "telemetry failures changed the result");
    let events = capture.take();
    assert_paired(&events);
    assert_eq!(events.len(), 6, "the healthy subscriber still got every event");
    let prompt_start = &events[0];
    assert!(prompt_start.payload.get(names::PROMPT_TEXT).is_none(), "failing redactor must fail closed");

    let stats = hub.stats();
    assert_eq!(stats.subscriber_panics, 6);
    assert_eq!(stats.dropped(DropReason::SubscriberPanic), 6);
    assert_eq!(stats.emitted, 6);
    assert_eq!(stats.delivered, 6);
    // The redactor ran for the prompt field on the start and on the end record.
    assert_eq!(stats.redactor_failures, 2);
    assert_eq!(panics.load(Ordering::SeqCst), 6);
}

struct Stuck;

impl Subscriber for Stuck {
    fn on_event(&self, _: &ObsEvent) {}
    fn flush(&self, timeout: Duration) -> Result<(), SubscriberError> {
        // Honours the deadline it is given, then reports it could not finish.
        std::thread::sleep(timeout.min(Duration::from_millis(20)));
        Err(SubscriberError::Timeout)
    }
    fn shutdown(&self, _: Duration) -> Result<(), SubscriberError> {
        panic!("shutdown bug")
    }
}

#[test]
fn flush_and_shutdown_failures_are_reported_and_counted_not_raised() {
    silence_expected_panics(&["subscriber bug", "redactor bug", "shutdown bug"]);
    let hub = Observability::new();
    let _sub = hub.subscribe(Stuck);
    assert_eq!(hub.flush(Duration::from_millis(5)), Err(SubscriberError::Timeout));
    assert_eq!(hub.shutdown(Duration::from_millis(5)), Err(SubscriberError::Panicked));
    let stats = hub.stats();
    assert_eq!((stats.subscriber_errors, stats.subscriber_panics), (1, 1));
}

#[test]
fn events_emitted_from_inside_a_subscriber_are_dropped_not_looped() {
    silence_expected_panics(&["subscriber bug", "redactor bug", "shutdown bug"]);
    let hub = Observability::new();
    let inner = hub.clone();
    let _echo = hub.subscribe(move |event: &ObsEvent| {
        // A subscriber that (wrongly) emits: without the guard this would recurse forever.
        inner.emit(event.clone());
    });
    let (capture, _c) = CaptureSubscriber::attach(&hub);
    let out = tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(hub.scope(trace_operation(
        "loop",
        (),
        async { Ok::<_, Denied>(1) },
    )));
    assert_eq!(out, Ok(1));
    assert_eq!(capture.len(), 2);
    assert_eq!(hub.stats().dropped(DropReason::Reentrant), 2);
}
