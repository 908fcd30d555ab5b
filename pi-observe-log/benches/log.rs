//! One contract operation (start and end records, a tool call with its usual payload) through the
//! `tracing` bridge into a JSON-lines subscriber writing to a sink that discards: pi's
//! [`json_subscriber`] against the same bridge into `tracing-subscriber`'s own JSON formatter
//! (`fmt().json().flatten_event(true)`, what `json_subscriber` was before), in the same run.
//! `cargo bench -p pi-observe-log --bench log`

#![allow(missing_docs, clippy::unwrap_used)]

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

/// A provider request as the agent records it (two dozen fields, attribution).
fn provider_request(hub: &Observability) {
    let attribution = pi_observe_core::Attribution::new().with("userId", "alice").with("orgId", "acme");
    hub.in_scope(|| {
        pi_observe_core::run_with_context_sync(&attribution, || {
            trace_operation_sync(
                names::PROVIDER_REQUEST,
                Payload::new()
                    .safe(names::API, "openai-completions")
                    .safe(names::PROVIDER, "openai")
                    .safe(names::MODEL, "gpt-4o-mini")
                    .safe(names::SESSION_ID, "0b8f3c7e-6a55-4f0e-9d52-3f1f2d8c9a10")
                    .safe("reasoningLevel", "medium")
                    .safe("callKind", "turn"),
                |span| {
                    span.record(|| {
                        Payload::new()
                            .safe(names::STOP_REASON, "toolUse")
                            .safe("httpStatus", 200)
                            .safe("retryCount", 0)
                            .safe(names::INPUT_TOKENS, 1834)
                            .safe(names::OUTPUT_TOKENS, 211)
                            .safe(names::CACHE_READ_TOKENS, 1024)
                            .safe(names::CACHE_WRITE_TOKENS, 0)
                            .safe("totalTokens", 3069)
                            .safe("costTotal", 0.000712)
                            .safe("costInput", 0.000275)
                            .safe("costOutput", 0.000127)
                            .safe("aborted", false)
                            .safe("timeToFirstTokenMs", 412.5)
                            .safe(names::RESPONSE_MODEL, "gpt-4o-mini-2024-07-18")
                    })
                },
            )
        })
    });
}

fn bench(c: &mut Criterion) {
    let hub = Observability::new();
    let _subscription = hub.subscribe(TracingSubscriber::new().span_level(SpanLevel::Info));
    let mut group = c.benchmark_group("log");
    let ours = tracing::Dispatch::new(json_subscriber(std::io::sink, EnvFilter::new("info")));
    tracing::dispatcher::with_default(&ours, || {
        group.bench_function("pi_json_subscriber", |b| b.iter(|| operation(&hub)));
        group.bench_function("pi_json_subscriber_provider_request", |b| b.iter(|| provider_request(&hub)));
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
        group.bench_function("tracing_subscriber_json", |b| b.iter(|| operation(&hub)));
        group.bench_function("tracing_subscriber_json_provider_request", |b| b.iter(|| provider_request(&hub)));
    });
    // What the bridge costs before any formatting: every record filtered out by the subscriber.
    let off = tracing::Dispatch::new(json_subscriber(std::io::sink, EnvFilter::new("off")));
    tracing::dispatcher::with_default(&off, || {
        group.bench_function("bridge_filtered_out", |b| b.iter(|| operation(&hub)))
    });
    group.finish();
}

/// A subscriber that does nothing: the cost of the operation itself.
struct Noop;

impl pi_observe_core::Subscriber for Noop {
    fn on_event(&self, _: &pi_observe_core::ObsEvent) {}
}

/// The raw contract-event file (`--events-jsonl`): what one provider request costs the calling
/// thread with the file sink subscribed (its lines written by the sink's own thread), against
/// the same operation delivered to a subscriber that does nothing.
fn jsonl(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("pi-log-bench-{}", std::process::id()));
    let hub = Observability::new();
    let sink = pi_observe_log::JsonlFileSink::create(&dir.join("events.jsonl"), 1 << 16).unwrap();
    let _subscription = hub.subscribe_arc(sink.clone(), std::sync::Arc::new(Default::default()));
    let mut group = c.benchmark_group("jsonl");
    group.bench_function("provider_request", |b| {
        b.iter_custom(|iters| {
            let mut took = std::time::Duration::ZERO;
            // Bursts the buffer takes whole; the writer catches up (untimed) between them.
            for chunk in (0..iters).collect::<Vec<_>>().chunks(2_000) {
                let started = std::time::Instant::now();
                for _ in chunk {
                    provider_request(&hub);
                }
                took += started.elapsed();
                pi_observe_core::Subscriber::flush(sink.as_ref(), std::time::Duration::from_secs(30)).unwrap();
            }
            took
        })
    });
    drop(_subscription);
    let _noop = hub.subscribe(Noop);
    group.bench_function("provider_request_noop_subscriber", |b| b.iter(|| provider_request(&hub)));
    group.finish();
    let (written, lost) = sink.counts();
    assert_eq!(lost, 0, "{written} written");
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench, jsonl);
criterion_main!(benches);
