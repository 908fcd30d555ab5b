//! The records' clock: one read per start, end or point event; wall time is derived from an
//! anchor (the wall clock read once per process), so timestamps never go backwards within a
//! process and `end - start` is the measured duration.
//!
//! A process that stamps many records reads the CPU's cycle counter, scaled to nanoseconds
//! ([`quanta`]): about a third of a `clock_gettime` where we measured (BENCHMARKS.md, session
//! 29). The counter's scale is calibrated against the monotonic clock — half a millisecond of
//! CPU — on a thread of its own, once [`CALIBRATE_AFTER`] monotonic reads have been made: a short
//! run (a few hundred operations) never pays for it. Until it is ready, where the machine has no
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
                return Tick(counter.at.saturating_add(counter.clock.delta_as_nanos(counter.raw, raw)));
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
    raw: u64,
    at: u64,
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

fn calibrate_now() {
    let clock = quanta::Clock::new();
    let raw = clock.raw();
    let at = Tick::of(Instant::now()).0;
    let _ = COUNTER.set(Counter { clock, raw, at });
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
