//! One side of P2 alone, for reading the calling thread's own work: bursts of [`PACE`]
//! operations, each flushed untimed (as `span_ratio`'s paced blocks), the per-operation time of
//! every burst, printed as p5 / p25 / p50 / p75. `PI_BENCH_SIDE` picks the side (`pi`, the
//! default, or `sdk`), `PI_BENCH_BURSTS` the bursts (default 300). Run it pinned to read the
//! caller's work without the hand-over to the export thread on the other core:
//!
//! ```text
//! cargo bench -p pi-observe-otel --bench span_alone --no-run
//! taskset -c 0 target/release/deps/span_alone-<hash>        # pi
//! PI_BENCH_SIDE=sdk taskset -c 0 target/release/deps/span_alone-<hash>
//! ```
//!
//! Figures from different builds are comparable only in one sitting, alternating the builds.

#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::{PACE, peer_provider, pi_pipeline, sink, time_pi_operations, time_sdk_operations};
use opentelemetry::trace::TracerProvider;
use pi_observe_core::Subscriber;

fn main() {
    let side = std::env::var("PI_BENCH_SIDE").unwrap_or_else(|_| "pi".to_owned());
    let bursts: usize =
        std::env::var("PI_BENCH_BURSTS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(300);
    let endpoint = sink();
    let (hub, otel, subscription) = pi_pipeline(&endpoint);
    let (provider, _) = peer_provider(&endpoint);
    let tracer = provider.tracer("bench");
    let mut per_op: Vec<f64> = (0..bursts)
        .map(|_| {
            let elapsed = if side == "sdk" {
                let elapsed = time_sdk_operations(&tracer, PACE);
                provider.force_flush().unwrap();
                elapsed
            } else {
                let elapsed = time_pi_operations(&hub, PACE);
                otel.flush(Duration::from_secs(30)).unwrap();
                elapsed
            };
            elapsed.as_nanos() as f64 / PACE as f64
        })
        .collect();
    per_op.sort_by(f64::total_cmp);
    let at = |q: f64| per_op[((per_op.len() - 1) as f64 * q).round() as usize];
    println!(
        "span_alone/{side}: {bursts} bursts of {PACE}, ns per operation: p5 {:.0}, p25 {:.0}, p50 {:.0}, p75 {:.0}",
        at(0.05),
        at(0.25),
        at(0.5),
        at(0.75)
    );
    drop(subscription);
    let _ = otel.shutdown(Duration::from_secs(5));
    let _ = provider.shutdown();
}
