//! The adapter conformance suite: backend-neutral cases that any subscriber (OTel, Sentry, log,
//! …) runs against itself, porting the intent of upstream pi's telemetry conformance suite —
//! single admission, result and error identity, status rules, attribute merging, event ordering,
//! inert post-settlement calls, nested and concurrent parentage, cancellation, attribution, and
//! passivity under bad payloads and by-default privacy.
//!
//! An adapter provides a [`ConformanceFixture`]: a fresh subscriber, and a way to read back what
//! it exported as [`RecordedSpan`]s keyed by contract payload keys.
//!
//! ```
//! use std::sync::Arc;
//! use pi_observe_core::testing::{conformance, spans_from_events, CaptureSubscriber, RecordedSpan};
//! use pi_observe_core::Subscriber;
//!
//! struct Reference(CaptureSubscriber);
//! impl conformance::ConformanceFixture for Reference {
//!     fn subscriber(&mut self) -> Arc<dyn Subscriber> { Arc::new(self.0.clone()) }
//!     fn finished_spans(&mut self) -> Vec<RecordedSpan> { spans_from_events(&self.0.events()) }
//! }
//! conformance::run_all(|| Box::new(Reference(CaptureSubscriber::new())));
//! ```

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::tree::{RecordedSpan, span_named};
use crate::attribution::Attribution;
use crate::context::spawn;
use crate::event::ErrorInfo;
use crate::names;
use crate::operation::{trace_operation, trace_operation_with};
use crate::payload::{ContentKind, Payload, Value};
use crate::policy::ContentPolicy;
use crate::shared::{Observability, Status};
use crate::span::Span;
use crate::subscriber::Subscriber;

/// What an adapter provides to run the suite against itself.
pub trait ConformanceFixture {
    /// The subscriber under test. Called once per case, on a fresh fixture.
    fn subscriber(&mut self) -> Arc<dyn Subscriber>;
    /// After the scenario ran and the hub was flushed and shut down: the spans the backend
    /// received, normalized. Attribute keys are the contract's payload keys; the attribution
    /// context goes in [`RecordedSpan::context`].
    fn finished_spans(&mut self) -> Vec<RecordedSpan>;
}

/// One conformance case.
#[derive(Debug)]
pub struct Case {
    /// Group, e.g. `results`.
    pub group: &'static str,
    /// Case name, a sentence.
    pub name: &'static str,
    run: fn(&mut dyn ConformanceFixture) -> Result<(), String>,
}

impl Case {
    /// Runs the case on `fixture`.
    pub fn run(&self, fixture: &mut dyn ConformanceFixture) -> Result<(), String> {
        (self.run)(fixture)
    }
}

/// Every case.
pub fn cases() -> Vec<Case> {
    macro_rules! case {
        ($group:literal, $name:ident) => {
            Case { group: $group, name: stringify!($name), run: $name }
        };
    }
    vec![
        case!("admission", callback_runs_exactly_once),
        case!("results", ok_result_is_returned_unchanged_and_the_span_is_ok),
        case!("results", err_result_is_returned_unchanged_and_the_span_is_an_error),
        case!("results", panic_is_resumed_and_the_span_is_an_error),
        case!("status", explicit_status_overrides_the_result_and_last_write_wins),
        case!("attributes", end_attributes_merge_over_start_attributes),
        case!("events", point_events_keep_their_order_and_times_inside_the_span),
        case!("settlement", calls_after_settlement_are_inert),
        case!("settlement", dropped_operation_ends_as_a_cancelled_error),
        case!("parentage", nested_operations_form_one_tree),
        case!("parentage", concurrent_siblings_keep_their_own_children),
        case!("attribution", attribution_context_is_on_every_span),
        case!("passivity", panicking_payload_builders_do_not_change_the_result),
        case!("passivity", odd_values_do_not_break_the_subscriber),
        case!("privacy", content_and_secrets_never_reach_a_default_policy_sink),
    ]
}

/// Runs every case, each on a fresh fixture from `make`; panics listing every failure.
pub fn run_all(mut make: impl FnMut() -> Box<dyn ConformanceFixture>) {
    let failures: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            let mut fixture = make();
            case.run(fixture.as_mut()).err().map(|why| format!("{}::{}: {why}", case.group, case.name))
        })
        .collect();
    assert!(failures.is_empty(), "conformance failures:\n{}", failures.join("\n"));
}

/// Runs `body` on a fresh hub with the fixture subscribed (default policy), on a current-thread
/// runtime; then flushes, shuts down and unsubscribes, and returns the body's output and spans.
fn scenario<F: Future>(
    fixture: &mut dyn ConformanceFixture,
    body: impl FnOnce() -> F,
) -> Result<(F::Output, Vec<RecordedSpan>), String> {
    let hub = Observability::new();
    let subscription = hub.subscribe_arc(fixture.subscriber(), Arc::new(ContentPolicy::default()));
    let runtime =
        tokio::runtime::Builder::new_current_thread().build().map_err(|e| format!("cannot build a runtime: {e}"))?;
    let output = runtime.block_on(hub.scope(body()));
    drop(runtime);
    let _ = hub.flush(Duration::from_secs(10));
    let _ = hub.shutdown(Duration::from_secs(10));
    subscription.cancel();
    let stats = hub.stats();
    ensure(stats.subscriber_panics == 0, format!("the subscriber panicked {} times", stats.subscriber_panics))?;
    Ok((output, fixture.finished_spans()))
}

fn ensure(condition: bool, why: impl Into<String>) -> Result<(), String> {
    if condition { Ok(()) } else { Err(why.into()) }
}

fn find<'a>(spans: &'a [RecordedSpan], name: &str) -> Result<&'a RecordedSpan, String> {
    let matching = spans.iter().filter(|s| s.name == name).count();
    ensure(matching == 1, format!("expected one span named {name}, found {matching} in {spans:?}"))?;
    Ok(span_named(spans, name))
}

#[derive(Debug, PartialEq)]
struct TestError(&'static str);

impl std::fmt::Display for TestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

type Res<T> = Result<T, TestError>;

fn callback_runs_exactly_once(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let (_, spans) = scenario(fx, || {
        trace_operation_with("conf.once", (), move |_span| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Res::Ok(()) }
        })
    })?;
    ensure(calls.load(Ordering::SeqCst) == 1, "callback did not run exactly once")?;
    ensure(spans.len() == 1, format!("expected 1 span, got {}", spans.len()))
}

fn ok_result_is_returned_unchanged_and_the_span_is_ok(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (out, spans) = scenario(fx, || trace_operation("conf.ok", (), async { Res::Ok(vec![1, 2, 3]) }))?;
    ensure(out == Ok(vec![1, 2, 3]), format!("result changed: {out:?}"))?;
    let span = find(&spans, "conf.ok")?;
    ensure(span.error.is_none(), format!("ok span has an error: {:?}", span.error))?;
    ensure(span.end.is_some_and(|end| end >= span.start), "ok span has no valid end time")
}

fn err_result_is_returned_unchanged_and_the_span_is_an_error(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (out, spans) = scenario(fx, || trace_operation("conf.err", (), async { Res::<()>::Err(TestError("nope")) }))?;
    ensure(out == Err(TestError("nope")), format!("error changed: {out:?}"))?;
    let span = find(&spans, "conf.err")?;
    let error = span.error.as_ref().ok_or("err span has no error")?;
    ensure(error.name == "TestError", format!("error name {:?}", error.name))?;
    // Errors are content: with the default policy only the type leaves.
    ensure(error.message.is_empty(), format!("error text exported by default: {:?}", error.message))
}

fn panic_is_resumed_and_the_span_is_an_error(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (joined, spans) = scenario(fx, || async {
        spawn(trace_operation("conf.panic", (), async {
            if std::hint::black_box(true) {
                panic!("conformance panic");
            }
            Res::Ok(())
        }))
        .await
    })?;
    ensure(joined.as_ref().is_err_and(|e| e.is_panic()), "the panic was not resumed")?;
    let span = find(&spans, "conf.panic")?;
    let error = span.error.as_ref().ok_or("panicked span has no error")?;
    ensure(error.name == names::ERROR_PANIC, format!("error name {:?}", error.name))?;
    ensure(!error.message.contains("conformance panic"), format!("panic text exported by default: {:?}", error.message))
}

fn explicit_status_overrides_the_result_and_last_write_wins(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || async {
        let _ = trace_operation_with("conf.status.error", (), |span: Span| async move {
            span.set_status(Status::Ok);
            span.set_error("Declined", "quota reached");
            Res::Ok(())
        })
        .await;
        let _ = trace_operation_with("conf.status.ok", (), |span: Span| async move {
            span.set_status(Status::Ok);
            Res::<()>::Err(TestError("expected"))
        })
        .await;
    })?;
    let error = find(&spans, "conf.status.error")?.error.clone();
    ensure(error == Some(ErrorInfo::new("Declined", "")), format!("status {error:?}"))?;
    let error = &find(&spans, "conf.status.ok")?.error;
    ensure(error.is_none(), format!("explicit ok ignored: {error:?}"))
}

fn end_attributes_merge_over_start_attributes(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || {
        trace_operation_with("conf.attrs", Payload::new().safe("a", 1).safe("b", 2), |span: Span| async move {
            span.record(Payload::new().safe("b", 3).safe("c", 4));
            span.record(|| Payload::new().safe("c", 5));
            Res::Ok(())
        })
    })?;
    let attrs = &find(&spans, "conf.attrs")?.attributes;
    for (key, want) in [("a", 1), ("b", 3), ("c", 5)] {
        ensure(attrs.get(key) == Some(&Value::I64(want)), format!("{key}: want {want}, got {:?}", attrs.get(key)))?;
    }
    Ok(())
}

fn point_events_keep_their_order_and_times_inside_the_span(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || {
        trace_operation_with("conf.events", (), |span: Span| async move {
            span.add_event("conf.first", Payload::new().safe("n", 1));
            tokio::task::yield_now().await;
            span.add_event("conf.second", Payload::new().safe("n", 2));
            Res::Ok(())
        })
    })?;
    let span = find(&spans, "conf.events")?;
    let names: Vec<_> = span.events.iter().map(|e| e.name.as_str()).collect();
    ensure(names == ["conf.first", "conf.second"], format!("events {names:?}"))?;
    ensure(span.events[1].attributes.get("n") == Some(&Value::I64(2)), "event attributes lost")?;
    let end = span.end.ok_or("span has no end")?;
    ensure(
        span.events.iter().all(|e| e.timestamp >= span.start && e.timestamp <= end)
            && span.events[0].timestamp <= span.events[1].timestamp,
        "event timestamps outside the span or out of order",
    )
}

fn calls_after_settlement_are_inert(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || async {
        let kept = Arc::new(std::sync::Mutex::new(Span::none()));
        let slot = kept.clone();
        let _ = trace_operation_with("conf.inert", Payload::new().safe("a", 1), move |span: Span| {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = span;
            async { Res::Ok(()) }
        })
        .await;
        let span = kept.lock().unwrap_or_else(|e| e.into_inner()).clone();
        span.record(Payload::new().safe("a", 2).safe("late", true));
        span.add_event("conf.late", ());
        span.set_error("Late", "too late");
    })?;
    let span = find(&spans, "conf.inert")?;
    ensure(span.attributes.get("a") == Some(&Value::I64(1)), "attribute changed after settlement")?;
    ensure(!span.attributes.contains_key("late"), "attribute added after settlement")?;
    ensure(span.events.is_empty(), "event added after settlement")?;
    ensure(span.error.is_none(), "status changed after settlement")
}

fn dropped_operation_ends_as_a_cancelled_error(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || async {
        let op = trace_operation("conf.cancelled", (), async {
            trace_operation("conf.cancelled.child", (), std::future::pending::<Res<()>>()).await
        });
        let mut op = Box::pin(op);
        // Poll once so both operations start, then drop them.
        let waker = std::task::Waker::noop();
        let _ = op.as_mut().poll(&mut std::task::Context::from_waker(waker));
        drop(op);
    })?;
    for name in ["conf.cancelled", "conf.cancelled.child"] {
        let span = find(&spans, name)?;
        let error = span.error.as_ref().ok_or(format!("{name} has no error"))?;
        ensure(error.name == names::ERROR_CANCELLED, format!("{name}: error name {:?}", error.name))?;
        ensure(span.attributes.get(names::ABORTED) == Some(&Value::Bool(true)), format!("{name}: aborted not set"))?;
    }
    Ok(())
}

fn nested_operations_form_one_tree(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || {
        trace_operation(names::AGENT_PROMPT, (), async {
            trace_operation(names::AGENT_TURN, (), async {
                trace_operation(names::PROVIDER_REQUEST, (), async { Res::Ok(()) }).await
            })
            .await
        })
    })?;
    let root = find(&spans, names::AGENT_PROMPT)?;
    let turn = find(&spans, names::AGENT_TURN)?;
    let request = find(&spans, names::PROVIDER_REQUEST)?;
    ensure(root.parent_span_id.is_none(), "root has a parent")?;
    ensure(turn.parent_span_id == Some(root.span_id), "turn not under prompt")?;
    ensure(request.parent_span_id == Some(turn.span_id), "request not under turn")?;
    ensure([turn, request].iter().all(|s| s.trace_id == root.trace_id), "trace id not shared down the tree")?;
    ensure(turn.start >= root.start && request.start >= turn.start, "child starts before parent")?;
    ensure(request.end <= turn.end && turn.end <= root.end, "child ends after parent")
}

fn concurrent_siblings_keep_their_own_children(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || {
        trace_operation("conf.parent", (), async {
            let mut handles = Vec::new();
            for i in 0..3i64 {
                handles.push(spawn(trace_operation("conf.sibling", Payload::new().safe("i", i), async move {
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                        trace_operation("conf.grandchild", Payload::new().safe("i", i), async {
                            tokio::task::yield_now().await;
                            Res::Ok(())
                        })
                        .await?;
                    }
                    Res::Ok(())
                })));
            }
            for handle in handles {
                let _ = handle.await;
            }
            Res::Ok(())
        })
    })?;
    let parent = find(&spans, "conf.parent")?;
    let siblings: Vec<_> = spans.iter().filter(|s| s.name == "conf.sibling").collect();
    ensure(siblings.len() == 3, format!("{} siblings", siblings.len()))?;
    for sibling in siblings {
        ensure(sibling.parent_span_id == Some(parent.span_id), "sibling not under parent")?;
        let children: Vec<_> = spans.iter().filter(|s| s.parent_span_id == Some(sibling.span_id)).collect();
        ensure(children.len() == 3, format!("sibling has {} children", children.len()))?;
        ensure(
            children.iter().all(|c| c.attributes.get("i") == sibling.attributes.get("i")),
            "a grandchild is under another task's sibling",
        )?;
    }
    Ok(())
}

fn attribution_context_is_on_every_span(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (_, spans) = scenario(fx, || async {
        let alice = Attribution::new().with(names::CTX_USER_ID, "alice").with(names::CTX_ORG_ID, "acme");
        let bob = Attribution::new().with(names::CTX_USER_ID, "bob").with(names::CTX_ORG_ID, "globex");
        let a = spawn(crate::run_with_context(
            alice,
            trace_operation("conf.user", (), async {
                tokio::task::yield_now().await;
                trace_operation("conf.user.child", (), async { Res::Ok(()) }).await
            }),
        ));
        let b = spawn(crate::run_with_context(
            bob,
            trace_operation("conf.user", (), async {
                tokio::task::yield_now().await;
                trace_operation("conf.user.child", (), async { Res::Ok(()) }).await
            }),
        ));
        let _ = (a.await, b.await);
    })?;
    ensure(spans.len() == 4, format!("{} spans", spans.len()))?;
    for span in &spans {
        let user = span.context.get(names::CTX_USER_ID).map(String::as_str);
        let org = span.context.get(names::CTX_ORG_ID).map(String::as_str);
        ensure(
            matches!((user, org), (Some("alice"), Some("acme")) | (Some("bob"), Some("globex"))),
            format!("{} has context {:?}", span.name, span.context),
        )?;
        if let Some(parent) = spans.iter().find(|p| Some(p.span_id) == span.parent_span_id) {
            ensure(parent.context == span.context, "child attributed to another user than its parent")?;
        }
    }
    Ok(())
}

fn panicking_payload_builders_do_not_change_the_result(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let (out, spans) = scenario(fx, || {
        trace_operation_with(
            "conf.bad_payload",
            || -> Payload { panic!("payload builder failed") },
            |span: Span| async move {
                span.record(|| -> Payload { panic!("record failed") });
                span.add_event("conf.bad_event", || -> Payload { panic!("event payload failed") });
                Res::Ok(7)
            },
        )
    })?;
    ensure(out == Ok(7), format!("result changed: {out:?}"))?;
    let span = find(&spans, "conf.bad_payload")?;
    ensure(span.error.is_none(), "a payload failure turned into an operation error")
}

fn odd_values_do_not_break_the_subscriber(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    let odd = || {
        Payload::new()
            .safe("nan", f64::NAN)
            .safe("inf", f64::INFINITY)
            .safe("neg", i64::MIN)
            .safe("empty", "")
            .safe("long", "x".repeat(100_000))
            .safe("unicode.ключ.🔑", "значение\u{0}\u{202e}")
            .safe("empty_array", Vec::<String>::new())
            .safe("floats", vec![f64::NAN, 1.5])
    };
    let (out, spans) = scenario(fx, || {
        trace_operation_with("", odd, move |span: Span| async move {
            span.record(odd);
            span.add_event("", odd);
            Res::Ok(())
        })
    })?;
    ensure(out.is_ok(), "result changed")?;
    ensure(spans.len() == 1, format!("expected the odd span to be exported, got {} spans", spans.len()))
}

fn content_and_secrets_never_reach_a_default_policy_sink(fx: &mut dyn ConformanceFixture) -> Result<(), String> {
    const CANARY: &str = "CANARY-7f3a9c";
    let (_, spans) = scenario(fx, || {
        trace_operation_with(
            names::PROVIDER_REQUEST,
            || {
                ContentKind::ALL
                    .into_iter()
                    .fold(Payload::new().safe(names::MODEL, "m"), |p, kind| {
                        p.content(kind, format!("content_{kind}"), format!("{CANARY} {kind}"))
                    })
                    .secret(names::API_KEY, CANARY)
            },
            |span: Span| async move {
                span.record(Payload::new().content(ContentKind::Completion, "late_completion", CANARY));
                span.set_error("ToolError", format!("{CANARY} failed in /home/alice"));
                span.add_event(
                    names::PROVIDER_FIRST_TOKEN,
                    Payload::new().content(ContentKind::Completion, "delta", CANARY),
                );
                Res::Ok(())
            },
        )
    })?;
    let dump = format!("{spans:?}");
    ensure(!dump.contains(CANARY), format!("canary content reached the sink: {dump}"))?;
    let span = find(&spans, names::PROVIDER_REQUEST)?;
    ensure(
        span.error.as_ref().is_some_and(|e| e.name == "ToolError"),
        format!("error type missing: {:?}", span.error),
    )?;
    ensure(span.attributes.get(names::MODEL) == Some(&Value::from("m")), "safe field missing")
}
