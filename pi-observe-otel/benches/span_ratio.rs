//! P2 as one figure: what the instrumented thread pays for one operation, pi (hub →
//! `OtelSubscriber`) against the raw SDK span through a `BatchSpanProcessor` — the sides of
//! `otel`'s `span_paced/*` and `span/*` — run in alternating blocks, so that both sides see the
//! same machine. (Run one after the other, as criterion runs them, a load swing of a few
//! seconds on a shared two-core machine moves one side's figure by 30 % and the ratio with it.)
//!
//! - Paced: a block is [`BLOCK_BURSTS`] bursts of [`PACE`] operations, each followed by an
//!   untimed flush, so neither side drops; its figure is its median burst.
//! - Free-running: a block is [`FREE_OPS`] operations with no flush in between (queues fill and
//!   the rest is dropped, as in `span/*`), timed whole, then flushed untimed so that the next
//!   block starts empty; the spans each side dropped are counted, and the spans each kept per
//!   millisecond of its producer's time (a faster producer drops a larger share).
//!
//! Rounds alternate which side goes first; one warm-up round is discarded. Printed: each side's
//! median block (ns per operation), the ratio of the medians and the spread of the rounds' own
//! ratios. `PI_BENCH_ROUNDS` sets the rounds (default 21).

#![allow(missing_docs, clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::{PACE, peer_provider, pi_pipeline, sink, time_pi_operations, time_sdk_operations};
use opentelemetry::trace::TracerProvider;
use pi_observe_core::Subscriber;

/// Bursts in one paced block.
const BLOCK_BURSTS: usize = 15;
/// Operations in one free-running block: far beyond both queues (ours 8,192 records, one per
/// span; the SDK's 2,048 spans), so most take the queue-full path, as in `span/*`.
const FREE_OPS: u64 = 100_000;

fn ns_per_op(elapsed: Duration, ops: u64) -> f64 {
    elapsed.as_nanos() as f64 / ops as f64
}

fn median(values: &mut [f64]) -> f64 {
    quantile(values, 0.5)
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// Each side's block figures, one per round.
#[derive(Default)]
struct Rounds {
    pi: Vec<f64>,
    sdk: Vec<f64>,
}

impl Rounds {
    /// Runs one warm-up round and `rounds` measured ones, alternating which side goes first.
    fn run(rounds: usize, mut pi: impl FnMut() -> f64, mut sdk: impl FnMut() -> f64) -> Rounds {
        let (_, _) = (pi(), sdk());
        let mut out = Rounds::default();
        for round in 0..rounds {
            let (p, s) = if round % 2 == 0 {
                let p = pi();
                (p, sdk())
            } else {
                let s = sdk();
                (pi(), s)
            };
            out.pi.push(p);
            out.sdk.push(s);
        }
        out
    }

    fn report(mut self, name: &str, drops: &str) {
        let mut ratios: Vec<f64> = self.pi.iter().zip(&self.sdk).map(|(p, s)| p / s).collect();
        let (pi, sdk) = (median(&mut self.pi), median(&mut self.sdk));
        println!(
            "span_ratio/{name}: pi {pi:.0} ns, SDK {sdk:.0} ns per operation (median of {} blocks each) \
             → {:.2}× the SDK (rounds' own ratios p25–p75 {:.2}–{:.2}×); {drops}",
            self.pi.len(),
            pi / sdk,
            quantile(&mut ratios, 0.25),
            quantile(&mut ratios, 0.75),
        );
    }
}

/// `dropped of created (share)`.
fn drop_share(dropped: u64, created: u64) -> String {
    let share = if created == 0 { 0.0 } else { dropped as f64 * 100.0 / created as f64 };
    format!("{dropped} of {created} ({share:.1} %)")
}

fn main() {
    let rounds = std::env::var("PI_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(21);
    let endpoint = sink();
    let (hub, otel, subscription) = pi_pipeline(&endpoint);
    let (provider, exported) = peer_provider(&endpoint);
    let tracer = provider.tracer("bench");
    let flush_pi = || otel.flush(Duration::from_secs(30)).unwrap();
    let flush_sdk = || provider.force_flush().unwrap();
    let sdk_ops = |n: u64| time_sdk_operations(&tracer, n);
    // What each side created and exported so far: (pi started, pi dropped, SDK created, SDK exported).
    let mut sdk_created = 0u64;
    let counts = |sdk_created: u64| {
        let stats = otel.stats();
        (stats.spans_started, stats.spans_dropped(), sdk_created, exported.load(std::sync::atomic::Ordering::Relaxed))
    };
    let drops_since = |before: (u64, u64, u64, u64), after: (u64, u64, u64, u64)| {
        format!(
            "dropped: pi {}, SDK {}",
            drop_share(after.1 - before.1, after.0 - before.0),
            drop_share((after.2 - before.2) - (after.3 - before.3), after.2 - before.2)
        )
    };

    let before = counts(sdk_created);
    let sdk_created_paced = std::cell::Cell::new(0u64);
    let paced = Rounds::run(
        rounds,
        || {
            let mut bursts: Vec<f64> = (0..BLOCK_BURSTS)
                .map(|_| {
                    let elapsed = time_pi_operations(&hub, PACE);
                    flush_pi();
                    ns_per_op(elapsed, PACE)
                })
                .collect();
            median(&mut bursts)
        },
        || {
            let mut bursts: Vec<f64> = (0..BLOCK_BURSTS)
                .map(|_| {
                    let elapsed = sdk_ops(PACE);
                    sdk_created_paced.set(sdk_created_paced.get() + PACE);
                    flush_sdk();
                    ns_per_op(elapsed, PACE)
                })
                .collect();
            median(&mut bursts)
        },
    );
    sdk_created += sdk_created_paced.get();
    paced.report("paced", &drops_since(before, counts(sdk_created)));

    let before = counts(sdk_created);
    let sdk_created_free = std::cell::Cell::new(0u64);
    // Each side's timed total: a faster producer drops a larger share of what it makes, so the
    // spans each side kept per second of its producer's time are printed too.
    let (pi_timed, sdk_timed) = (std::cell::Cell::new(Duration::ZERO), std::cell::Cell::new(Duration::ZERO));
    let free = Rounds::run(
        rounds,
        || {
            let elapsed = time_pi_operations(&hub, FREE_OPS);
            pi_timed.set(pi_timed.get() + elapsed);
            flush_pi();
            ns_per_op(elapsed, FREE_OPS)
        },
        || {
            let elapsed = sdk_ops(FREE_OPS);
            sdk_timed.set(sdk_timed.get() + elapsed);
            sdk_created_free.set(sdk_created_free.get() + FREE_OPS);
            flush_sdk();
            ns_per_op(elapsed, FREE_OPS)
        },
    );
    sdk_created += sdk_created_free.get();
    let after = counts(sdk_created);
    let kept_per_ms = |kept: u64, timed: Duration| kept as f64 / timed.as_secs_f64() / 1000.0;
    let kept = format!(
        "{}; kept per ms of producer time: pi {:.0}, SDK {:.0}",
        drops_since(before, after),
        kept_per_ms((after.0 - before.0) - (after.1 - before.1), pi_timed.get()),
        kept_per_ms(after.3 - before.3, sdk_timed.get()),
    );
    free.report("free_running", &kept);

    drop(subscription);
    let _ = otel.shutdown(Duration::from_secs(5));
    let _ = provider.shutdown();
}
