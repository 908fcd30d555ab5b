//! One contract operation (start and end records, a tool call with its usual payload) through the
//! `tracing` bridge into a JSON-lines subscriber writing to a sink that discards: pi's
//! [`json_subscriber`] against the same bridge into `tracing-subscriber`'s own JSON formatter
//! (`fmt().json().flatten_event(true)`, what `json_subscriber` was before), in the same run.
//! `cargo bench -p pi-observe-log --bench log`

#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use pi_observe_core::{Observability, Payload, names, trace_operation_sync};
use pi_observe_log::{SpanLevel, TracingSubscriber, json_subscriber};
use tracing_subscriber::EnvFilter;

fn operation(hub: &Observability) {
    hub.in_scope(|| {
        trace_operation_sync(
            names::AGENT_TOOL_CALL,
            Payload::new()
                .safe(names::TOOL_NAME, "read")
                .safe(names::TOOL_CALL_ID, "call_0_1")
                .safe("blocked", false)
                .safe("resultBytes", 640),
            |span| span.record(|| Payload::new().safe("isError", false)),
        )
    });
}

fn bench(c: &mut Criterion) {
    let hub = Observability::new();
    let _subscription = hub.subscribe(TracingSubscriber::new().span_level(SpanLevel::Info));
    let mut group = c.benchmark_group("log");
    let ours = tracing::Dispatch::new(json_subscriber(std::io::sink, EnvFilter::new("info")));
    tracing::dispatcher::with_default(&ours, || {
        group.bench_function("pi_json_subscriber", |b| b.iter(|| operation(&hub)))
    });
    let peer = tracing::Dispatch::new(
        tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::sink)
            .with_env_filter(EnvFilter::new("info"))
            .finish(),
    );
    tracing::dispatcher::with_default(&peer, || {
        group.bench_function("tracing_subscriber_json", |b| b.iter(|| operation(&hub)))
    });
    // What the bridge costs before any formatting: every record filtered out by the subscriber.
    let off = tracing::Dispatch::new(json_subscriber(std::io::sink, EnvFilter::new("off")));
    tracing::dispatcher::with_default(&off, || {
        group.bench_function("bridge_filtered_out", |b| b.iter(|| operation(&hub)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
