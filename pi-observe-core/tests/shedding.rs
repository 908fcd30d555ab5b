//! Shedding: an operation that starts while every subscriber is saturated records nothing,
//! keeps its ids for its children, and is counted by each subscriber.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pi_observe_core::testing::silence_expected_panics;
use pi_observe_core::{ObsEvent, Observability, Payload, Span, Subscriber, names, record, trace_operation};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

/// A subscriber whose queue is full while `saturated` is set.
#[derive(Default)]
struct Gate {
    saturated: AtomicBool,
    shed: AtomicUsize,
    panic_on_shed: bool,
    seen: Mutex<Vec<ObsEvent>>,
}

#[derive(Clone, Default)]
struct Shared(Arc<Gate>);

impl Subscriber for Shared {
    fn on_event(&self, event: &ObsEvent) {
        self.0.seen.lock().unwrap().push(event.clone());
    }

    fn saturated(&self) -> bool {
        self.0.saturated.load(Ordering::SeqCst)
    }

    fn on_shed(&self) {
        self.0.shed.fetch_add(1, Ordering::SeqCst);
        assert!(!self.0.panic_on_shed, "shed boom");
    }
}

#[test]
fn an_operation_started_while_every_subscriber_is_saturated_is_shed_and_its_children_keep_their_parent() {
    let hub = Observability::new();
    let gate = Shared::default();
    let _subscription = hub.subscribe(gate.clone());
    gate.0.saturated.store(true, Ordering::SeqCst);
    let builds = Arc::new(AtomicUsize::new(0));
    let counter = builds.clone();
    let (outer, out) = block_on(hub.scope(trace_operation(
        names::PROVIDER_REQUEST,
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Payload::new().safe(names::MODEL, "m")
        },
        async {
            let outer = Span::current();
            assert!(!outer.is_recording(), "a shed operation records nothing");
            record(|| -> Payload { unreachable!("a shed operation builds no payload") });
            // The queue drains while it runs: what starts now is recorded, under its parent.
            gate.0.saturated.store(false, Ordering::SeqCst);
            let inner = trace_operation(names::AGENT_TOOL_CALL, Payload::new(), async { Ok::<_, std::fmt::Error>(2) });
            Ok::<_, std::fmt::Error>((outer, inner.await.unwrap()))
        },
    )))
    .unwrap();
    assert_eq!(out, 2);
    assert_eq!(builds.load(Ordering::SeqCst), 0, "the shed operation's payload was built");
    assert_eq!(gate.0.shed.load(Ordering::SeqCst), 1);
    let seen = gate.0.seen.lock().unwrap();
    assert!(seen.iter().all(|e| e.name == names::AGENT_TOOL_CALL), "a shed operation emitted a record: {seen:?}");
    assert_eq!(seen.len(), 2, "the child's start and end");
    for record in seen.iter() {
        assert_eq!(record.trace_id, outer.trace_id().unwrap());
        assert_eq!(record.parent_span_id, outer.span_id());
    }
}

#[test]
fn nothing_is_shed_while_one_subscriber_has_room_and_a_panicking_count_is_contained() {
    silence_expected_panics(&["shed boom"]);
    let hub = Observability::new();
    let full = Shared(Arc::new(Gate { panic_on_shed: true, ..Gate::default() }));
    let open = Shared::default();
    let _a = hub.subscribe(full.clone());
    let b = hub.subscribe(open.clone());
    full.0.saturated.store(true, Ordering::SeqCst);
    let op = || trace_operation("pi.op", Payload::new().safe("k", 1), async { Ok::<_, std::fmt::Error>(7) });
    assert_eq!(block_on(hub.scope(op())).unwrap(), 7);
    // One subscriber has room: recorded, and both get the records (the full one drops them itself).
    assert_eq!(full.0.shed.load(Ordering::SeqCst), 0);
    assert_eq!(open.0.seen.lock().unwrap().len(), 2);
    assert_eq!(full.0.seen.lock().unwrap().len(), 2);

    // Alone and saturated, the operation is shed; its count panicking changes nothing for it.
    drop(b);
    assert_eq!(block_on(hub.scope(op())).unwrap(), 7);
    assert_eq!(full.0.shed.load(Ordering::SeqCst), 1);
    assert_eq!(full.0.seen.lock().unwrap().len(), 2);
    assert_eq!(hub.stats().subscriber_panics, 1);
}
