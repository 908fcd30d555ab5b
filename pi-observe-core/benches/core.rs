//! Core costs, each measured against a peer in the same run (see BENCHMARKS.md):
//!
//! - `idle/*`: emitting a point event with nobody listening vs a disabled `tracing::info!`
//!   (no tracing subscriber installed). Goal: ≤ 1.5× the tracing peer.
//! - `operation/*`: one `trace_operation` around a ready future with no subscriber, and with a
//!   no-op subscriber (ids, context, start + end records, default policy).

#![allow(missing_docs)]

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group, criterion_main};
use pi_observe_core::{ObsEvent, Observability, Payload, names, record_event, trace_operation};

/// Polls a future that completes without waiting (no runtime in the measurement).
fn run_ready<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("benchmark future was not ready"),
    }
}

fn idle(c: &mut Criterion) {
    let mut group = c.benchmark_group("idle");
    group.bench_function("pi_record_event_no_subscriber", |b| {
        b.iter(|| {
            record_event(names::PROVIDER_FIRST_TOKEN, || {
                Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, black_box(12))
            })
        })
    });
    group.bench_function("tracing_info_disabled", |b| {
        b.iter(|| tracing::info!(time_to_first_token_ms = black_box(12), "pi.ai.provider.first_token"))
    });
    let hub = Observability::new();
    group.bench_function("pi_hub_emit_with_no_subscriber", |b| {
        b.iter(|| {
            hub.emit_with(|| ObsEvent::new(pi_observe_core::EventKind::Event, "x", pi_observe_core::TraceId::random()))
        })
    });
    group.finish();
}

fn operation(c: &mut Criterion) {
    let mut group = c.benchmark_group("operation");
    let payload =
        || Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1").safe(names::TURN_INDEX, 3);
    group.bench_function("trace_operation_no_subscriber", |b| {
        b.iter(|| run_ready(trace_operation(names::PROVIDER_REQUEST, payload, async { Ok::<_, std::fmt::Error>(1) })))
    });
    let hub = Observability::new();
    let _subscription = hub.subscribe(|event: &ObsEvent| {
        black_box(event);
    });
    // The hub is entered once per sample, as an application enters it once per task.
    group.bench_function("trace_operation_noop_subscriber", |b| {
        b.iter_custom(|iters| {
            pi_observe_core::testing::time_operations(&hub, iters, || {
                trace_operation(names::PROVIDER_REQUEST, payload, async { Ok::<_, std::fmt::Error>(1) })
            })
        })
    });
    group.bench_function("plain_future_peer", |b| {
        b.iter(|| run_ready(async { Ok::<_, std::fmt::Error>(black_box(1)) }))
    });
    group.finish();
}

criterion_group!(benches, idle, operation);
criterion_main!(benches);
