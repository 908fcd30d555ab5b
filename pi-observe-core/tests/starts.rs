//! Subscribers that need only some start records (`Subscriber::starts`): one record per
//! operation, and the running ones still reported when the subscriber leaves or the hub
//! shuts down.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use pi_observe_core::testing::{CaptureSubscriber, spans_from_events};
use pi_observe_core::{
    EventKind, ObsEvent, Observability, Payload, Span, Starts, Subscriber, names, trace_operation, trace_operation_sync,
};

/// A capture that needs the starts of prompts only.
#[derive(Clone, Default)]
struct PromptStartsOnly(CaptureSubscriber);

impl Subscriber for PromptStartsOnly {
    fn on_event(&self, event: &ObsEvent) {
        self.0.on_event(event)
    }

    fn starts(&self) -> Starts {
        Starts::Only(&[names::AGENT_PROMPT])
    }
}

fn kinds(events: &[ObsEvent]) -> Vec<(&str, &str, bool)> {
    events.iter().map(|e| (e.name.as_ref(), e.kind.as_str(), e.start_skipped())).collect()
}

/// A prompt with one tool call inside, the tool call with a point event.
fn prompt_with_a_tool_call(hub: &Observability) {
    hub.in_scope(|| {
        trace_operation_sync(names::AGENT_PROMPT, Payload::new().safe(names::MODEL, "m"), |_| {
            trace_operation_sync(names::AGENT_TOOL_CALL, Payload::new().safe(names::TOOL_NAME, "bash"), |span| {
                span.add_event("pi.test.progress", Payload::new().safe("step", 1));
                span.record(Payload::new().safe("exitCode", 0));
            })
        })
    })
}

#[test]
fn operations_not_named_reach_such_a_subscriber_as_their_end_record_alone() {
    let hub = Observability::new();
    let only = PromptStartsOnly::default();
    let _s = hub.subscribe(only.clone());
    prompt_with_a_tool_call(&hub);
    let events = only.0.take();
    assert_eq!(
        kinds(&events),
        [
            ("pi.agent.prompt", "start", false),
            ("pi.test.progress", "event", true),
            ("pi.agent.tool_call", "end", true),
            ("pi.agent.prompt", "end", false),
        ]
    );
    // The end alone carries what the start would have: parent, start payload, start time.
    let (prompt, tool) = (&events[0], &events[2]);
    assert_eq!(tool.parent_span_id, prompt.span_id);
    assert_eq!(tool.payload.get(names::TOOL_NAME).and_then(|v| v.as_str()), Some("bash"));
    assert!(tool.start_time() >= prompt.timestamp && tool.start_time() <= tool.timestamp);
    assert_eq!(tool.start_time().saturating_add(tool.duration.unwrap()), tool.timestamp);
    let spans = pi_observe_core::testing::assert_paired(&events);
    assert_eq!(spans, spans_from_events(&events));
    let call = spans.iter().find(|s| s.name == names::AGENT_TOOL_CALL).unwrap();
    assert_eq!((call.events.len(), call.parent_span_id), (1, prompt.span_id));
    assert_eq!(call.start, tool.start_time());
}

#[test]
fn one_subscriber_that_needs_every_start_gets_them_all_and_so_does_everyone() {
    let hub = Observability::new();
    let only = PromptStartsOnly::default();
    let _s = hub.subscribe(only.clone());
    let (all, _t) = CaptureSubscriber::attach(&hub);
    prompt_with_a_tool_call(&hub);
    let expected = [
        ("pi.agent.prompt", "start", false),
        ("pi.agent.tool_call", "start", false),
        ("pi.test.progress", "event", false),
        ("pi.agent.tool_call", "end", false),
        ("pi.agent.prompt", "end", false),
    ];
    assert_eq!(kinds(&all.take()), expected);
    assert_eq!(kinds(&only.0.take()), expected);
}

#[test]
fn an_operation_under_a_remote_parent_always_emits_its_start() {
    let hub = Observability::new();
    let only = PromptStartsOnly::default();
    let _s = hub.subscribe(only.clone());
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let run = hub.scope(pi_observe_core::run_with_traceparent(Some(tp), async {
        trace_operation(names::AGENT_TOOL_CALL, (), async { Ok::<_, std::io::Error>(()) }).await
    }));
    assert!(matches!(poll_once(pin!(run)), Poll::Ready(Ok(()))));
    let events = only.0.take();
    assert_eq!(kinds(&events), [("pi.agent.tool_call", "start", false), ("pi.agent.tool_call", "end", false)]);
    assert_eq!(events[0].payload.get(names::PARENT_SAMPLED).and_then(|v| v.as_bool()), Some(false));
}

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

/// An operation that waits forever once entered (its body is a pending future).
fn running_operation(hub: &Observability, recorded: i64) -> impl Future<Output = Result<(), std::io::Error>> {
    hub.scope(trace_operation(names::AGENT_TOOL_CALL, Payload::new().safe(names::TOOL_NAME, "bash"), async move {
        Span::current().record(Payload::new().safe("linesSoFar", recorded));
        std::future::pending::<()>().await;
        Ok(())
    }))
}

#[test]
fn a_shutdown_reports_the_operations_still_running_with_what_they_recorded() {
    let hub = Observability::new();
    let only = PromptStartsOnly::default();
    let _s = hub.subscribe(only.clone());
    let mut running = Box::pin(running_operation(&hub, 7));
    assert!(poll_once(running.as_mut()).is_pending());
    assert!(only.0.is_empty(), "no start record while it runs");

    hub.shutdown(std::time::Duration::from_secs(1)).unwrap();
    let events = only.0.take();
    assert_eq!(kinds(&events), [("pi.agent.tool_call", "start", false)]);
    assert_eq!(events[0].payload.get("linesSoFar").and_then(|v| v.as_i64()), Some(7));
    assert_eq!(events[0].payload.get(names::TOOL_NAME).and_then(|v| v.as_str()), Some("bash"));

    // Once reported, its end no longer says its start was skipped.
    drop(running);
    let events = only.0.take();
    assert_eq!(kinds(&events), [("pi.agent.tool_call", "error", false)]);
    hub.shutdown(std::time::Duration::from_secs(1)).unwrap();
    assert!(only.0.is_empty(), "what settled is not reported again");
}

#[test]
fn a_subscriber_that_leaves_hears_of_the_operations_still_running() {
    let hub = Observability::new();
    let leaving = PromptStartsOnly::default();
    let staying = PromptStartsOnly::default();
    let subscription = hub.subscribe(leaving.clone());
    let _s = hub.subscribe(staying.clone());
    let mut running = Box::pin(running_operation(&hub, 1));
    assert!(poll_once(running.as_mut()).is_pending());

    drop(subscription);
    assert_eq!(kinds(&leaving.0.take()), [("pi.agent.tool_call", "start", false)]);
    assert!(staying.0.is_empty());
    // For the subscriber that stays, the operation is still one it has not seen start.
    drop(running);
    let events = staying.0.take();
    assert_eq!(kinds(&events), [("pi.agent.tool_call", "error", true)]);
    assert_eq!(events[0].kind, EventKind::Error);
    assert!(leaving.0.is_empty());
}

#[test]
fn a_synchronous_operation_blocking_its_thread_is_reported_by_a_shutdown() {
    let hub = Observability::new();
    let only = PromptStartsOnly::default();
    let _s = hub.subscribe(only.clone());
    let (entered, wait_entered) = std::sync::mpsc::channel();
    let (release, wait_release) = std::sync::mpsc::channel::<()>();
    let worker_hub = hub.clone();
    let worker = std::thread::spawn(move || {
        worker_hub.in_scope(|| {
            trace_operation_sync(names::AGENT_TOOL_CALL, (), |_| {
                entered.send(()).unwrap();
                wait_release.recv().unwrap();
            })
        })
    });
    wait_entered.recv().unwrap();
    hub.shutdown(std::time::Duration::from_secs(1)).unwrap();
    assert_eq!(kinds(&only.0.take()), [("pi.agent.tool_call", "start", false)]);
    release.send(()).unwrap();
    worker.join().unwrap();
    assert_eq!(kinds(&only.0.take()), [("pi.agent.tool_call", "end", false)]);
}

#[test]
fn an_end_without_a_start_still_breaks_the_pairing_unless_its_start_was_skipped() {
    pi_observe_core::testing::silence_expected_panics(&["ends a span that never started"]);
    let mut end = ObsEvent::new(EventKind::End, names::AGENT_TOOL_CALL, pi_observe_core::TraceId::random());
    end.span_id = Some(pi_observe_core::SpanId::random());
    end.duration = Some(std::time::Duration::from_millis(3));
    let lone = std::panic::catch_unwind(|| pi_observe_core::testing::assert_paired(std::slice::from_ref(&end)));
    assert!(lone.is_err(), "an end nobody started is still an error");
}
