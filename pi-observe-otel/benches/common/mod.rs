//! What the OTel benches share: the loopback OTLP sink, both pipelines (ours and the SDK's
//! batch processor with an exporter doing the same work), one operation on each, and the paced
//! loop.

// Each bench target uses part of this module.
#![allow(dead_code, clippy::print_stderr)]

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use opentelemetry::KeyValue;
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use pi_observe_core::{ContentPolicy, Observability, Payload, names, trace_operation};
use pi_observe_otel::{OtelSubscriber, OtlpConfig};

/// The peers' exporter does the same work as ours: OTLP protobuf encoding and an HTTP POST to
/// the same loopback sink (on a runtime of its own, as the SDK's batch thread has none).
#[derive(Debug)]
pub struct OtlpHttpPeer {
    /// Spans handed to this exporter (the rest were dropped by the batch processor).
    pub exported: Arc<std::sync::atomic::AtomicU64>,
    endpoint: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    resource: opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema,
}

impl OtlpHttpPeer {
    fn new(endpoint: &str) -> Self {
        OtlpHttpPeer {
            exported: Arc::default(),
            endpoint: endpoint.to_owned(),
            client: reqwest::Client::new(),
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
            resource: (&opentelemetry_sdk::Resource::builder_empty().build()).into(),
        }
    }
}

impl SpanExporter for OtlpHttpPeer {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        use prost::Message;
        self.exported.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let request = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
            resource_spans: opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope(
                batch,
                &self.resource,
            ),
        };
        let body = request.encode_to_vec();
        let sent = self.runtime.block_on(
            self.client.post(&self.endpoint).header("content-type", "application/x-protobuf").body(body).send(),
        );
        std::future::ready(
            sent.map(|_| ()).map_err(|e| opentelemetry_sdk::error::OTelSdkError::InternalFailure(e.to_string())),
        )
    }
}

pub fn run_ready<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("not ready"),
    }
}

/// A loopback HTTP sink that answers 200 to everything, on its own thread.
pub fn sink() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                let mut pending = Vec::new();
                loop {
                    let n = match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                            .unwrap_or(0);
                        if pending.len() < end + 4 + len {
                            break;
                        }
                        pending.drain(..end + 4 + len);
                        if stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}/v1/traces")
}

/// A hub with an `OtelSubscriber` exporting to `endpoint`.
pub fn pi_pipeline(endpoint: &str) -> (Observability, Arc<OtelSubscriber>, pi_observe_core::Subscription) {
    let hub = Observability::new();
    let config = OtlpConfig { traces_endpoint: Some(endpoint.to_owned()), ..Default::default() };
    let otel = OtelSubscriber::new(config).unwrap();
    let subscription = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    (hub, otel, subscription)
}

/// Times `n` traced provider requests (3 attributes) on `hub`, entered once: what is timed is
/// the operation itself, as the peers' tracer is created once.
pub fn time_pi_operations(hub: &Observability, n: u64) -> std::time::Duration {
    let payload =
        || Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1").safe(names::TURN_INDEX, 3);
    pi_observe_core::testing::time_operations(hub, n, || {
        trace_operation(names::PROVIDER_REQUEST, payload, async { Ok::<_, std::fmt::Error>(1) })
    })
}

/// The same operation on the raw SDK: a span with the same 3 attributes.
pub fn sdk_operation(tracer: &opentelemetry_sdk::trace::SdkTracer) {
    tracer.in_span("pi.ai.provider.request", |cx| {
        cx.span().set_attributes([
            KeyValue::new("pi.provider", "faux"),
            KeyValue::new("pi.model", "faux-1"),
            KeyValue::new("pi.turnIndex", 3),
        ]);
    })
}

/// Times `n` of [`sdk_operation`] on `tracer`: the SDK's side of [`time_pi_operations`].
pub fn time_sdk_operations(tracer: &opentelemetry_sdk::trace::SdkTracer, n: u64) -> std::time::Duration {
    let started = std::time::Instant::now();
    for _ in 0..n {
        sdk_operation(tracer);
    }
    started.elapsed()
}

/// An SDK pipeline (batch processor → [`OtlpHttpPeer`]) and the count of spans it exported.
pub fn peer_provider(endpoint: &str) -> (SdkTracerProvider, Arc<std::sync::atomic::AtomicU64>) {
    let peer = OtlpHttpPeer::new(endpoint);
    let exported = peer.exported.clone();
    (SdkTracerProvider::builder().with_span_processor(BatchSpanProcessor::builder(peer).build()).build(), exported)
}

/// Prints how many of the `created` spans a side did not export (its queue was full).
pub fn report_drops(bench: &str, created: u64, exported: u64) {
    let dropped = created.saturating_sub(exported);
    let share = if created == 0 { 0.0 } else { dropped as f64 * 100.0 / created as f64 };
    eprintln!("{bench}: {dropped} of {created} spans dropped ({share:.1} %)");
}

/// Operations per timed burst in `span_paced/*` and `span_ratio`: well below both queues (ours
/// 8,192 records, one per span; the SDK's 2,048 spans), so nothing is dropped.
pub const PACE: u64 = 1_000;

/// Times `iters` operations in bursts of at most [`PACE`], calling `flush` (untimed) after each.
pub fn paced(
    iters: u64,
    mut burst: impl FnMut(u64) -> std::time::Duration,
    mut flush: impl FnMut(),
) -> std::time::Duration {
    let (mut left, mut total) = (iters, std::time::Duration::ZERO);
    while left > 0 {
        let n = left.min(PACE);
        total += burst(n);
        flush();
        left -= n;
    }
    total
}
