//! Hub behaviour: subscriptions, laziness when nobody listens, explicit vs global hubs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pi_observe_core::testing::CaptureSubscriber;
use pi_observe_core::testing::silence_expected_panics;
use pi_observe_core::{
    ObsEvent, Observability, Payload, Span, names, record, record_event, trace_operation, trace_operation_sync,
};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn payloads_are_not_built_when_the_hub_has_no_subscriber() {
    silence_expected_panics(&["sync boom"]);
    let hub = Observability::new();
    let builds = Arc::new(AtomicUsize::new(0));
    let counter = builds.clone();
    let out = block_on(hub.scope(trace_operation(
        "quiet",
        move || {
            counter.fetch_add(1, Ordering::SeqCst);
            Payload::new()
        },
        async {
            record(|| -> Payload { unreachable!("record payload built with nobody listening") });
            record_event("e", || -> Payload { unreachable!("event payload built with nobody listening") });
            assert!(!Span::current().is_recording());
            Ok::<_, std::io::Error>(5)
        },
    )));
    assert_eq!(out.unwrap(), 5);
    assert_eq!(builds.load(Ordering::SeqCst), 0);
    assert_eq!(hub.stats().emitted, 0);
}

#[test]
fn dropping_or_cancelling_the_subscription_unsubscribes() {
    silence_expected_panics(&["sync boom"]);
    let hub = Observability::new();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let sub = hub.subscribe(move |_: &ObsEvent| {
        c.fetch_add(1, Ordering::SeqCst);
    });
    assert!(hub.has_subscribers());
    hub.in_scope(|| trace_operation_sync("one", (), |_| ()));
    assert_eq!(count.load(Ordering::SeqCst), 2);
    drop(sub);
    assert!(!hub.has_subscribers());
    hub.in_scope(|| trace_operation_sync("two", (), |_| ()));
    assert_eq!(count.load(Ordering::SeqCst), 2);

    let (capture, sub) = CaptureSubscriber::attach(&hub);
    sub.cancel();
    hub.in_scope(|| trace_operation_sync("three", (), |_| ()));
    assert!(capture.is_empty());
}

#[test]
fn explicit_hubs_do_not_see_each_others_events() {
    silence_expected_panics(&["sync boom"]);
    let (a, b) = (Observability::new(), Observability::new());
    let (cap_a, _sa) = CaptureSubscriber::attach(&a);
    let (cap_b, _sb) = CaptureSubscriber::attach(&b);
    block_on(a.scope(trace_operation("on.a", (), async { Ok::<_, std::io::Error>(()) }))).unwrap();
    b.in_scope(|| trace_operation_sync("on.b", (), |_| ()));
    let names_a: Vec<_> = cap_a.take().into_iter().map(|e| e.name).collect();
    let names_b: Vec<_> = cap_b.take().into_iter().map(|e| e.name).collect();
    assert_eq!(names_a, ["on.a", "on.a"]);
    assert_eq!(names_b, ["on.b", "on.b"]);
}

#[test]
fn sync_operations_pair_and_nest_under_async_ones() {
    silence_expected_panics(&["sync boom"]);
    let hub = Observability::new();
    let (capture, _s) = CaptureSubscriber::attach(&hub);
    block_on(hub.scope(trace_operation(names::AGENT_TOOL_CALL, (), async {
        trace_operation_sync(names::SESSION_WRITE, Payload::new().safe(names::BYTES, 10), |span| {
            span.record(Payload::new().safe(names::ENTRY_COUNT, 1));
            Ok::<_, std::io::Error>(())
        })
    })))
    .unwrap();
    let spans = pi_observe_core::testing::assert_paired(&capture.take());
    let write = pi_observe_core::testing::span_named(&spans, names::SESSION_WRITE);
    let tool = pi_observe_core::testing::span_named(&spans, names::AGENT_TOOL_CALL);
    assert_eq!(write.parent_span_id, Some(tool.span_id));
    assert_eq!(write.attributes.len(), 2);
}

#[test]
fn sync_operation_panic_is_recorded_then_resumed() {
    silence_expected_panics(&["sync boom"]);
    let hub = Observability::new();
    let capture = CaptureSubscriber::new();
    let _s = hub.subscribe_with_policy(capture.clone(), error_text());
    let caught = std::panic::catch_unwind(|| {
        hub.in_scope(|| trace_operation_sync("boom", (), |_| -> () { panic!("sync boom") }))
    });
    assert!(caught.is_err());
    let events = capture.take();
    assert_eq!(events[1].error.as_ref().unwrap().message, "sync boom");
}

#[test]
fn a_panic_while_making_the_body_is_recorded_inside_the_operation_then_resumed() {
    silence_expected_panics(&["make boom", "sync boom"]);
    let hub = Observability::new();
    let capture = CaptureSubscriber::new();
    let _s = hub.subscribe_with_policy(capture.clone(), error_text());
    let caught = std::panic::catch_unwind(|| {
        block_on(hub.scope(pi_observe_core::trace_operation_with("outer", (), |outer: Span| async move {
            pi_observe_core::trace_operation_with("made", (), |span: Span| {
                // `make` runs inside the new operation's context.
                assert_eq!(Span::current().span_id(), span.span_id());
                assert_ne!(span.span_id(), outer.span_id());
                panic!("make boom");
                #[allow(unreachable_code)]
                async {
                    Ok::<_, std::io::Error>(())
                }
            })
            .await
        })))
    });
    assert!(caught.is_err());
    let events = capture.take();
    let names: Vec<_> = events.iter().map(|e| (e.name.as_ref(), e.kind.as_str())).collect();
    assert_eq!(names, [("outer", "start"), ("made", "start"), ("made", "error"), ("outer", "error")]);
    assert_eq!(events[2].error.as_ref().unwrap().message, "make boom");
    assert_eq!(events[1].parent_span_id, events[0].span_id);
}

#[test]
fn point_events_outside_an_operation_still_carry_trace_and_context() {
    silence_expected_panics(&["sync boom"]);
    let hub = Observability::new();
    let (capture, _s) = CaptureSubscriber::attach(&hub);
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    block_on(hub.scope(pi_observe_core::run_with_traceparent(Some(tp), async {
        record_event(names::AGENT_QUEUE_UPDATE, Payload::new().safe(names::QUEUE_LENGTH, 2));
        trace_operation(names::AGENT_PROMPT, (), async { Ok::<_, std::io::Error>(()) }).await
    })))
    .unwrap();
    let events = capture.take();
    assert_eq!(events[0].trace_id.to_string(), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(events[0].span_id.unwrap().to_string(), "b7ad6b7169203331");
    // The prompt root becomes the child of the adopted remote parent.
    assert_eq!(events[1].parent_span_id.unwrap().to_string(), "b7ad6b7169203331");
    assert_eq!(events[1].trace_id, events[0].trace_id);
    pi_observe_core::testing::assert_paired_allowing_remote(&events);
}

/// Records how each event arrived: by reference (`on_event`) or handed over (`on_owned_event`).
#[derive(Default)]
struct HowDelivered {
    seen: std::sync::Mutex<Vec<(&'static str, Option<String>)>>,
}

impl pi_observe_core::Subscriber for HowDelivered {
    fn on_event(&self, event: &ObsEvent) {
        let prompt = event.payload.get("prompt").map(|v| v.to_string());
        self.seen.lock().unwrap().push(("ref", prompt));
    }

    fn on_owned_event(&self, event: ObsEvent) {
        let prompt = event.payload.get("prompt").map(|v| v.to_string());
        self.seen.lock().unwrap().push(("owned", prompt));
    }
}

#[test]
fn each_policy_redacts_once_and_its_last_subscriber_keeps_the_copy() {
    use pi_observe_core::{ContentKind, ContentPolicy};
    let hub = Observability::new();
    let wide = Arc::new(ContentPolicy::default().capture(ContentKind::Prompt));
    let narrow = Arc::new(ContentPolicy::default());
    let subs: Vec<Arc<HowDelivered>> = (0..4).map(|_| Arc::new(HowDelivered::default())).collect();
    // Policies in subscription order: wide, narrow, wide, narrow — groups interleave.
    let _subscriptions: Vec<_> = subs
        .iter()
        .zip([&wide, &narrow, &wide, &narrow])
        .map(|(s, p)| hub.subscribe_arc(s.clone(), Arc::clone(p)))
        .collect();
    let panicky = hub.subscribe_arc(
        Arc::new(|_: &ObsEvent| panic!("subscriber boom")),
        Arc::new(ContentPolicy::default().capture_all()),
    );
    silence_expected_panics(&["subscriber boom"]);
    hub.in_scope(|| {
        trace_operation_sync("op", || Payload::new().content(ContentKind::Prompt, "prompt", "hello"), |_| ())
    });
    drop(panicky);
    let seen: Vec<_> = subs.iter().map(|s| std::mem::take(&mut *s.seen.lock().unwrap())).collect();
    let hello = Some("hello".to_owned());
    // Two records (start, end) each.
    assert_eq!(seen[0], vec![("ref", hello.clone()); 2]);
    assert_eq!(seen[1], vec![("ref", None); 2]);
    assert_eq!(seen[2], vec![("owned", hello.clone()); 2]);
    assert_eq!(seen[3], vec![("owned", None); 2]);
    let stats = hub.stats();
    assert_eq!((stats.emitted, stats.delivered, stats.subscriber_panics), (2, 8, 2));
}

/// A policy that captures error text (panic messages are error text).
fn error_text() -> pi_observe_core::ContentPolicy {
    pi_observe_core::ContentPolicy::default().capture(pi_observe_core::ContentKind::ErrorText)
}

#[test]
fn a_subscriber_learns_its_hub_on_subscribe_and_does_not_keep_it_alive() {
    struct Counting(pi_observe_core::HubSlot);
    impl pi_observe_core::Subscriber for Counting {
        fn on_subscribe(&self, hub: &Observability) {
            self.0.set(hub);
        }
        fn on_event(&self, _: &pi_observe_core::ObsEvent) {
            self.0.record_dropped(pi_observe_core::DropReason::QueueFull, 1);
        }
    }
    let slot = pi_observe_core::HubSlot::new();
    let hub = Observability::new();
    let subscription = hub.subscribe(Counting(slot.clone()));
    assert!(slot.hub().is_some_and(|known| known == hub));
    hub.in_scope(|| trace_operation_sync("op", (), |_| ()));
    assert_eq!(hub.stats().dropped(pi_observe_core::DropReason::QueueFull), 2, "start and end counted");
    let weak = hub.downgrade();
    drop(hub);
    assert!(weak.upgrade().is_some(), "the subscription still holds its hub");
    drop(subscription);
    assert!(weak.upgrade().is_none(), "the subscriber did not keep the hub alive");
    assert!(slot.hub().is_none());
}

#[test]
fn costly_content_is_built_only_when_a_subscriber_captures_its_kind() {
    use pi_observe_core::{ContentKind, ContentPolicy};
    let run = |policy: ContentPolicy| {
        let hub = Observability::new();
        let (capture, _sub) = CaptureSubscriber::attach_with(&hub, policy);
        let builds = Arc::new(AtomicUsize::new(0));
        let counter = builds.clone();
        let payload = move || {
            Payload::new().content_with(ContentKind::ProviderPayload, "conversation", || {
                counter.fetch_add(1, Ordering::SeqCst);
                "the whole conversation"
            })
        };
        block_on(hub.scope(trace_operation("req", payload, async { Ok::<_, std::io::Error>(()) }))).unwrap();
        let fields: Vec<String> = capture
            .take()
            .iter()
            .flat_map(|e| e.payload.iter().map(|f| f.key.to_string()).collect::<Vec<_>>())
            .collect();
        (builds.load(Ordering::SeqCst), fields)
    };
    let (built, fields) = run(ContentPolicy::default());
    assert_eq!(built, 0, "nobody captures provider payloads");
    assert!(!fields.contains(&"conversation".to_owned()));
    let (built, fields) = run(ContentPolicy::default().capture(ContentKind::ProviderPayload));
    assert_eq!(built, 1);
    assert!(fields.contains(&"conversation".to_owned()));
}

/// Logs each shutdown step with the thread it ran on.
struct Finisher {
    name: &'static str,
    own_threads: bool,
    log: Arc<std::sync::Mutex<Vec<(String, std::thread::ThreadId)>>>,
}

impl pi_observe_core::Subscriber for Finisher {
    fn on_event(&self, _: &ObsEvent) {}
    fn begin_shutdown(&self, _: std::time::Duration) -> bool {
        self.log.lock().unwrap().push((format!("begin {}", self.name), std::thread::current().id()));
        self.own_threads
    }
    fn shutdown(&self, _: std::time::Duration) -> Result<(), pi_observe_core::SubscriberError> {
        self.log.lock().unwrap().push((format!("shutdown {}", self.name), std::thread::current().id()));
        Ok(())
    }
}

#[test]
fn shutdown_begins_every_subscriber_before_waiting_and_waits_on_the_callers_thread() {
    let hub = Observability::new();
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    let finisher = |name, own_threads| Finisher { name, own_threads, log: log.clone() };
    let _a = hub.subscribe(finisher("exporter", true));
    let _b = hub.subscribe(finisher("writer", true));
    hub.shutdown(std::time::Duration::from_secs(1)).unwrap();
    let here = std::thread::current().id();
    let steps: Vec<String> = log.lock().unwrap().iter().map(|(step, _)| step.clone()).collect();
    assert_eq!(steps, ["begin exporter", "begin writer", "shutdown exporter", "shutdown writer"]);
    assert!(log.lock().unwrap().iter().all(|(_, thread)| *thread == here), "no thread of the hub's when all began");

    // Subscribers that did not begin are still shut down — side by side, on threads of the hub's.
    let hub = Observability::new();
    log.lock().unwrap().clear();
    let _a = hub.subscribe(finisher("exporter", true));
    let _b = hub.subscribe(finisher("plain one", false));
    let _c = hub.subscribe(finisher("plain two", false));
    hub.shutdown(std::time::Duration::from_secs(1)).unwrap();
    let log = log.lock().unwrap();
    let begins = log.iter().take_while(|(step, _)| step.starts_with("begin")).count();
    assert_eq!(begins, 3, "{log:?}");
    let shut: Vec<&(String, std::thread::ThreadId)> =
        log.iter().filter(|(step, _)| step.starts_with("shutdown")).collect();
    assert_eq!(shut.len(), 3, "{log:?}");
    for (step, thread) in shut {
        assert_eq!(*thread == here, step == "shutdown exporter", "{step} ran on the wrong thread");
    }
}

#[test]
fn payloads_are_not_built_when_no_subscriber_reads_them() {
    use pi_observe_core::WithoutPayloads;
    let hub = Observability::new();
    let built = Arc::new(AtomicUsize::new(0));
    let run = |hub: &Observability| {
        let built = built.clone();
        hub.in_scope(|| {
            pi_observe_core::trace_operation_sync(
                "pi.test",
                move || {
                    built.fetch_add(1, Ordering::SeqCst);
                    pi_observe_core::Payload::new().safe("k", 1)
                },
                |_| (),
            )
        });
    };
    let names = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = names.clone();
    let ids_only = hub.subscribe(WithoutPayloads(move |e: &ObsEvent| seen.lock().unwrap().push(e.name.to_string())));
    assert!(!hub.wants_payloads());
    run(&hub);
    assert_eq!(built.load(Ordering::SeqCst), 0, "nobody reads payloads: none is built");
    assert_eq!(names.lock().unwrap().len(), 2, "the observer still sees start and end");
    // A subscriber that reads payloads: they are built again, and stop when it leaves.
    let reader = hub.subscribe(|_: &ObsEvent| {});
    assert!(hub.wants_payloads());
    run(&hub);
    assert_eq!(built.load(Ordering::SeqCst), 1);
    drop(reader);
    assert!(!hub.wants_payloads());
    run(&hub);
    assert_eq!(built.load(Ordering::SeqCst), 1);
    drop(ids_only);
}

#[test]
fn every_policy_group_gets_each_record_and_a_payload_free_one_gets_it_without_fields() {
    use pi_observe_core::{ContentPolicy, WithoutPayloads};
    let hub = Observability::new();
    type Seen = Arc<std::sync::Mutex<Vec<(String, usize)>>>;
    let watch = |seen: &Seen| {
        let seen = seen.clone();
        move |e: &ObsEvent| seen.lock().unwrap().push((e.name.to_string(), e.payload.len()))
    };
    let (first, readers, last) = (Seen::default(), Seen::default(), Seen::default());
    // Three groups: payload-free, then readers under their own policy, then payload-free again.
    let _first = hub.subscribe(WithoutPayloads(watch(&first)));
    let policy = Arc::new(ContentPolicy::safe_only());
    let _a = hub.subscribe_arc(Arc::new(watch(&readers)), policy.clone());
    let _b = hub.subscribe_arc(Arc::new(watch(&readers)), policy);
    let _last = hub.subscribe(WithoutPayloads(watch(&last)));
    hub.in_scope(|| trace_operation_sync("pi.test", || pi_observe_core::Payload::new().safe("k", 1), |_| ()));
    let names = |seen: &Seen| seen.lock().unwrap().iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&first), ["pi.test", "pi.test"]);
    assert_eq!(names(&last), ["pi.test", "pi.test"]);
    assert_eq!(names(&readers).len(), 4, "both readers see start and end");
    assert!(readers.lock().unwrap().iter().all(|(_, fields)| *fields == 1), "{readers:?}");
    assert!(first.lock().unwrap().iter().chain(last.lock().unwrap().iter()).all(|(_, fields)| *fields == 0));
    assert_eq!(hub.stats().delivered, 8);
}

/// A subscriber that says when it is dropped.
struct DropFlag(Arc<AtomicUsize>, Arc<std::sync::atomic::AtomicBool>);

impl pi_observe_core::Subscriber for DropFlag {
    fn on_event(&self, _: &ObsEvent) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.1.store(true, Ordering::SeqCst);
    }
}

#[test]
fn threads_count_their_deliveries_and_let_go_of_an_unsubscribed_subscriber() {
    let hub = Observability::new();
    let (seen, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let sub = hub.subscribe(DropFlag(seen.clone(), dropped.clone()));
    let (_capture, _keep) = CaptureSubscriber::attach(&hub);
    let op = |hub: &Observability| hub.in_scope(|| trace_operation_sync("op", (), |_| ()));
    // Four threads (and this one) emit: every thread's counts are in the hub's totals. Each is
    // joined: the scope's own wait ends as their closures return, before their thread-locals
    // (the lists they used) are dropped.
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4).map(|_| scope.spawn(|| (0..25).for_each(|_| op(&hub)))).collect();
        threads.into_iter().for_each(|thread| thread.join().unwrap());
    });
    op(&hub);
    let stats = hub.stats();
    assert_eq!((stats.emitted, stats.delivered), (202, 404), "{stats:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 202);

    // A thread that emitted keeps the list it used until it emits again.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn({
        let hub = hub.clone();
        move || {
            op(&hub);
            wait.recv().unwrap();
            op(&hub);
        }
    });
    while hub.stats().emitted < 204 {
        std::thread::yield_now();
    }
    drop(sub);
    op(&hub);
    assert_eq!(seen.load(Ordering::SeqCst), 204, "nothing is delivered after the unsubscribe");
    assert!(!dropped.load(Ordering::SeqCst), "the other thread still holds the old list");
    go.send(()).unwrap();
    other.join().unwrap();
    assert!(dropped.load(Ordering::SeqCst), "let go of at that thread's next emit");
    assert_eq!(seen.load(Ordering::SeqCst), 204);
    assert_eq!(hub.stats().emitted, 208);
}

#[test]
fn the_unsubscribing_thread_lets_go_of_the_subscriber_at_once() {
    let hub = Observability::new();
    let (seen, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let sub = hub.subscribe(DropFlag(seen.clone(), dropped.clone()));
    hub.in_scope(|| trace_operation_sync("op", (), |_| ()));
    assert_eq!(seen.load(Ordering::SeqCst), 2);
    drop(sub);
    assert!(dropped.load(Ordering::SeqCst));
}
