//! OTel adapter costs, each against peers in the same run (see BENCHMARKS.md):
//!
//! - `span/*`: what the instrumented thread pays for one operation with 3 attributes:
//!   hub → `OtelSubscriber` (pairing, conversion and export happen on the worker thread) vs a raw
//!   `opentelemetry_sdk` span through a `BatchSpanProcessor` vs `tracing` + `tracing-opentelemetry`
//!   on the same SDK pipeline. All three do the same export work: OTLP/HTTP protobuf to one
//!   loopback sink. Producers are free-running, so each side's queue may fill: the spans each
//!   side dropped are printed next to the timings (a side that drops mostly times its
//!   queue-full path).
//! - `span_paced/*`: the same operations in bursts of [`common::PACE`], each followed by an untimed
//!   flush, so neither side ever drops: the cost of an operation that is kept. (The
//!   `span_ratio` bench runs the same two sides in alternating blocks, for a ratio this
//!   machine's load swings do not skew.)
//! - `export/*`: throughput of the whole pipeline for a burst of operations, from the first
//!   record to the last byte acknowledged by the loopback sink (`flush`): hub → `OtelSubscriber`
//!   (our OTLP/HTTP exporter) vs the raw SDK (`BatchSpanProcessor` → `opentelemetry-otlp`'s
//!   HTTP/protobuf `SpanExporter`, blocking reqwest client). Same spans (the peer sets the six
//!   attributes and the CLIENT kind our converter produces), same sink, same batch size; both
//!   pipelines must report zero drops or the numbers are void.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;

use common::{
    paced, peer_provider, pi_pipeline, report_drops, run_ready, sdk_operation, sink, time_pi_operations,
    time_sdk_operations,
};
use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::KeyValue;
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use pi_observe_core::{ContentPolicy, Observability, Payload, names, trace_operation};
use pi_observe_otel::{OtelSubscriber, OtlpConfig};
use tracing_subscriber::layer::SubscriberExt;

/// Unsubscribes, shuts the adapter down (up to 5 s) and prints what it kept and dropped.
fn shut_down_and_report(name: &str, subscription: pi_observe_core::Subscription, otel: &OtelSubscriber) {
    drop(subscription);
    let _ = pi_observe_core::Subscriber::shutdown(otel, std::time::Duration::from_secs(5));
    let stats = otel.stats();
    report_drops(name, stats.spans_started, stats.spans_started - stats.spans_dropped());
}

fn spans(c: &mut Criterion) {
    let mut group = c.benchmark_group("span");
    let endpoint = sink();

    let (hub, otel, subscription) = pi_pipeline(&endpoint);
    // The hub is entered once per sample, as an application enters it once per task, like the
    // peers' tracer that is created once: what is timed is the operation itself.
    group.bench_function("pi_hub_to_otel_adapter", |b| b.iter_custom(|iters| time_pi_operations(&hub, iters)));
    shut_down_and_report("span/pi_hub_to_otel_adapter", subscription, &otel);

    let (provider, exported) = peer_provider(&endpoint);
    let tracer = provider.tracer("bench");
    let mut created = 0u64;
    group.bench_function("raw_sdk_batch_processor", |b| {
        b.iter(|| {
            created += 1;
            sdk_operation(&tracer)
        })
    });

    let _ = provider.shutdown();
    report_drops("span/raw_sdk_batch_processor", created, exported.load(std::sync::atomic::Ordering::Relaxed));

    let (provider, exported) = peer_provider(&endpoint);
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench-tracing"));
    let subscriber = tracing_subscriber::registry().with(layer);
    let mut created = 0u64;
    tracing::subscriber::with_default(subscriber, || {
        group.bench_function("tracing_opentelemetry", |b| {
            b.iter(|| {
                created += 1;
                tracing::info_span!("pi.ai.provider.request", provider = "faux", model = "faux-1", turn_index = 3)
                    .in_scope(|| {
                        black_box(());
                    })
            })
        });
    });
    let _ = provider.shutdown();
    report_drops("span/tracing_opentelemetry", created, exported.load(std::sync::atomic::Ordering::Relaxed));
    group.finish();
}

/// Operations per measured burst: below both queues' capacity (ours 8,192 records, one per span,
/// the SDK's 2,048 spans), so nothing is dropped and both export everything.
const BURST: u64 = 1_000;

fn export(c: &mut Criterion) {
    let mut group = c.benchmark_group("export");
    group.throughput(criterion::Throughput::Elements(BURST));
    let endpoint = sink();

    let hub = Observability::new();
    let config = OtlpConfig {
        traces_endpoint: Some(endpoint.clone()),
        metrics: Some(false),
        max_export_batch_size: Some(512),
        ..Default::default()
    };
    let otel = OtelSubscriber::new(config).unwrap();
    let subscription = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let payload =
        || Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1").safe(names::TURN_INDEX, 3);
    group.bench_function("pi_hub_to_otlp_http", |b| {
        b.iter(|| {
            for _ in 0..BURST {
                let _ =
                    run_ready(hub.scope(trace_operation(names::PROVIDER_REQUEST, payload, async {
                        Ok::<_, std::fmt::Error>(1)
                    })));
            }
            pi_observe_core::Subscriber::flush(otel.as_ref(), std::time::Duration::from_secs(30)).unwrap();
        })
    });
    drop(subscription);
    let stats = otel.stats();
    assert_eq!(stats.spans_dropped(), 0, "our pipeline dropped spans: {stats:?}");
    let _ = pi_observe_core::Subscriber::shutdown(otel.as_ref(), std::time::Duration::from_secs(5));

    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().with_endpoint(&endpoint).build().unwrap();
    let counted = CountingExporter { inner: exporter, spans: Default::default() };
    let spans = counted.spans.clone();
    let processor = BatchSpanProcessor::builder(counted)
        .with_batch_config(
            opentelemetry_sdk::trace::BatchConfigBuilder::default().with_max_export_batch_size(512).build(),
        )
        .build();
    let provider = SdkTracerProvider::builder().with_span_processor(processor).build();
    let tracer = provider.tracer("bench");
    let mut bursts = 0u64;
    group.bench_function("raw_sdk_otlp_http_exporter", |b| {
        b.iter(|| {
            bursts += 1;
            for _ in 0..BURST {
                // The attributes and kind our converter produces for this operation (GenAI
                // profile), so both sides encode the same spans.
                let builder =
                    tracer.span_builder("pi.ai.provider.request").with_kind(opentelemetry::trace::SpanKind::Client);
                let cx = opentelemetry::Context::current_with_span(builder.start(&tracer));
                let _guard = cx.clone().attach();
                cx.span().set_attributes([
                    KeyValue::new("pi.provider", "faux"),
                    KeyValue::new("pi.model", "faux-1"),
                    KeyValue::new("pi.turnIndex", 3),
                    KeyValue::new("gen_ai.operation.name", "chat"),
                    KeyValue::new("gen_ai.provider.name", "faux"),
                    KeyValue::new("gen_ai.request.model", "faux-1"),
                ]);
                cx.span().end();
            }
            provider.force_flush().unwrap();
        })
    });
    let exported = spans.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(exported, bursts * BURST, "the SDK pipeline dropped spans");
    let _ = provider.shutdown();
    group.finish();
}

/// Counts what the SDK exporter was handed, so a run with drops is caught.
#[derive(Debug)]
struct CountingExporter {
    inner: opentelemetry_otlp::SpanExporter,
    spans: Arc<std::sync::atomic::AtomicU64>,
}

impl SpanExporter for CountingExporter {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        self.spans.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.inner.export(batch)
    }
}

fn spans_paced(c: &mut Criterion) {
    let mut group = c.benchmark_group("span_paced");
    let endpoint = sink();
    let (hub, otel, subscription) = pi_pipeline(&endpoint);
    group.bench_function("pi_hub_to_otel_adapter", |b| {
        b.iter_custom(|iters| {
            paced(
                iters,
                |n| time_pi_operations(&hub, n),
                || pi_observe_core::Subscriber::flush(otel.as_ref(), std::time::Duration::from_secs(30)).unwrap(),
            )
        })
    });
    shut_down_and_report("span_paced/pi_hub_to_otel_adapter", subscription, &otel);

    let (provider, exported) = peer_provider(&endpoint);
    let tracer = provider.tracer("bench");
    let mut created = 0u64;
    group.bench_function("raw_sdk_batch_processor", |b| {
        b.iter_custom(|iters| {
            created += iters;
            paced(iters, |n| time_sdk_operations(&tracer, n), || provider.force_flush().unwrap())
        })
    });
    let _ = provider.shutdown();
    report_drops("span_paced/raw_sdk_batch_processor", created, exported.load(std::sync::atomic::Ordering::Relaxed));
    group.finish();
}

criterion_group!(benches, spans, spans_paced, export);
criterion_main!(benches);
