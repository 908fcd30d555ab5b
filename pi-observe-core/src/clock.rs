//! The records' clock: one read per start, end or point event; wall time is derived from an
//! anchor (the wall clock read once per process), so timestamps never go backwards within a
//! process and `end - start` is the measured duration.
//!
//! A process that stamps many records reads the CPU's cycle counter, scaled to nanoseconds
//! ([`quanta`]): about a third of a `clock_gettime` where we measured (BENCHMARKS.md, session
//! 29). The counter's scale is measured against the monotonic clock over
//! [`CALIBRATION_WINDOW`] on a thread of its own, once [`CALIBRATE_AFTER`] monotonic reads have
//! been made: a short run (a few hundred operations) never pays for it. (`quanta`'s own scale,
//! taken over about half a millisecond, was 0.12 % off on a loaded machine: a second of drift
//! every fourteen minutes.) Until it is ready, where the machine has no
//! usable counter, and for good once the counter is seen going backwards (a machine resumed
//! from sleep), reads are the monotonic clock's. Both give nanoseconds since the anchor: one
//! timeline.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::event::Timestamp;

/// A reading of the records' clock: nanoseconds since the process's anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Tick(u64);

impl Tick {
    /// Now.
    #[inline]
    pub(crate) fn now() -> Tick {
        if let Some(counter) = COUNTER.get()
            && !COUNTER_BACKWARDS.load(Relaxed)
        {
            let raw = counter.clock.raw();
            // One core's counter may lag another's by a few cycles (the time is then the
            // pairing's); one far behind has been reset.
            if raw.saturating_add(LAG_CYCLES) >= counter.raw {
                return Tick(counter.at.saturating_add(counter.nanos_since_pairing(raw)));
            }
            COUNTER_BACKWARDS.store(true, Relaxed);
        }
        count_monotonic_read();
        Tick::of(Instant::now())
    }

    /// The anchor itself: the reading of a record that needs no clock (a shed operation's).
    pub(crate) fn anchor() -> Tick {
        Tick(0)
    }

    /// The reading of a monotonic instant.
    pub(crate) fn of(instant: Instant) -> Tick {
        Tick(u64::try_from(instant.saturating_duration_since(anchor().mono).as_nanos()).unwrap_or(u64::MAX))
    }

    /// Its wall-clock time.
    #[inline]
    pub(crate) fn timestamp(self) -> Timestamp {
        Timestamp::from_unix_nanos(anchor().wall.saturating_add(self.0))
    }

    /// The time from `earlier` to this reading (zero if `earlier` is later).
    #[inline]
    pub(crate) fn since(self, earlier: Tick) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// The wall clock and the monotonic clock, read once.
struct Anchor {
    wall: u64,
    mono: Instant,
}

fn anchor() -> &'static Anchor {
    static ANCHOR: OnceLock<Anchor> = OnceLock::new();
    ANCHOR.get_or_init(|| {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Anchor { wall, mono: Instant::now() }
    })
}

/// The calibrated counter, and one reading of it paired with the monotonic clock's.
struct Counter {
    clock: quanta::Clock,
    /// The paired reading: the counter's `raw` was the records' clock's `at`.
    raw: u64,
    at: u64,
    /// Nanoseconds per counter cycle, times 2³².
    scale: u64,
}

impl Counter {
    /// Nanoseconds from the paired reading to the counter's `raw` (zero before it).
    #[inline]
    fn nanos_since_pairing(&self, raw: u64) -> u64 {
        let cycles = u128::from(raw.saturating_sub(self.raw));
        u64::try_from((cycles * u128::from(self.scale)) >> 32).unwrap_or(u64::MAX)
    }
}

static COUNTER: OnceLock<Counter> = OnceLock::new();
/// A counter further behind its pairing than this (~0.1 ms at a few GHz) has gone backwards.
const LAG_CYCLES: u64 = 1 << 18;
static COUNTER_BACKWARDS: AtomicBool = AtomicBool::new(false);

/// Monotonic reads (at ~40–70 ns each) after which calibrating the counter (~0.6 ms of CPU, then
/// ~20 ns a read) has paid for itself.
const CALIBRATE_AFTER: u32 = 16_384;

/// Counts a monotonic read; the [`CALIBRATE_AFTER`]th starts calibrating the counter.
#[inline]
fn count_monotonic_read() {
    static READS: AtomicU32 = AtomicU32::new(0);
    if READS.load(Relaxed) < CALIBRATE_AFTER && READS.fetch_add(1, Relaxed) + 1 == CALIBRATE_AFTER {
        calibrate_soon();
    }
}

/// Calibrates the cycle counter on a thread of its own, once per process; reads switch to it
/// when it is ready (a few nanoseconds of difference at the switch, at most).
fn calibrate_soon() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        // Without a thread, reads stay on the monotonic clock.
        let _ = crate::spawn_telemetry_thread("pi-observe-clock", calibrate_now);
    });
}

/// How long the counter is watched against the monotonic clock to measure its scale: a pairing
/// is exact to a microsecond or so, which over 100 ms is ~10 ppm.
const CALIBRATION_WINDOW: Duration = Duration::from_millis(100);

fn calibrate_now() {
    let clock = quanta::Clock::new();
    let (raw0, at0) = paired(&clock);
    std::thread::sleep(CALIBRATION_WINDOW);
    let (raw, at) = paired(&clock);
    let (cycles, nanos) = (raw.saturating_sub(raw0), at.saturating_sub(at0));
    // A counter that did not move, or went backwards, is not one to read.
    if cycles == 0 || nanos == 0 {
        return;
    }
    let Ok(scale) = u64::try_from((u128::from(nanos) << 32) / u128::from(cycles)) else { return };
    let _ = COUNTER.set(Counter { clock, raw, at, scale });
}

/// A reading of the counter and the records' clock at the same moment: of a few tries, the one
/// whose two monotonic reads around the counter's are closest (the thread was not interrupted
/// between them), its time their midpoint.
fn paired(clock: &quanta::Clock) -> (u64, u64) {
    let once = || {
        let before = Instant::now();
        let raw = clock.raw();
        let width = before.elapsed();
        (width, raw, Tick::of(before).0.saturating_add(u64::try_from(width.as_nanos() / 2).unwrap_or(0)))
    };
    let first = once();
    let (_, raw, at) = (1..8).map(|_| once()).fold(first, |best, next| if next.0 < best.0 { next } else { best });
    (raw, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_reads_switch_to_the_counter_which_keeps_time_with_the_monotonic_clock() {
        for _ in 0..CALIBRATE_AFTER {
            Tick::now();
        }
        let waited = Instant::now();
        while COUNTER.get().is_none() {
            assert!(waited.elapsed() < Duration::from_secs(30), "the counter was not calibrated");
            std::thread::yield_now();
        }
        // Each counter read is bracketed by monotonic reads: a thread preempted in between
        // widens the bracket instead of failing the test.
        let bracketed = || {
            let before = Instant::now();
            let tick = Tick::now();
            (before, tick, Instant::now())
        };
        let (before, first, after) = bracketed();
        std::thread::sleep(Duration::from_millis(50));
        let (before2, second, after2) = bracketed();
        let counted = second.since(first);
        let (shortest, longest) = (before2 - after, after2 - before);
        // Calibrated to well under 0.1 % (we measured 0.5 ppm), plus a microsecond for the switch.
        let slack = longest / 1000 + Duration::from_micros(1);
        assert!(
            counted + slack >= shortest && counted <= longest + slack,
            "counter {counted:?}, monotonic between {shortest:?} and {longest:?}"
        );
        let mut last = Tick::now();
        for _ in 0..10_000 {
            let now = Tick::now();
            assert!(now >= last, "{now:?} < {last:?}");
            last = now;
        }
    }
}
