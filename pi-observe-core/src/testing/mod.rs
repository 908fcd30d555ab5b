//! The test kit (feature `testing`): a capture subscriber, span-tree assertions and the adapter
//! conformance suite. Used by this crate's own tests and by every adapter crate.
//!
//! Helpers here panic with a descriptive message when an assertion fails, like `assert!`.

pub mod conformance;
mod secrets;
mod tree;

use std::sync::{Arc, Mutex};

pub use crate::canary::{SecretSample, secret_samples};
pub use secrets::placements;
pub use tree::{
    RecordedEvent, RecordedSpan, assert_paired, assert_paired_allowing_remote, span_named, spans_from_events,
};

use crate::event::ObsEvent;
use crate::hub::Subscription;
use crate::shared::Observability;
use crate::subscriber::Subscriber;

/// Keeps panics whose message contains one of `markers` out of the test output (tests that
/// panic on purpose to check isolation); every other panic is reported by the previous hook.
/// Installed once per process; later calls add nothing.
pub fn silence_expected_panics(markers: &'static [&'static str]) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            if !markers.iter().any(|m| message.contains(m)) {
                previous(info);
            }
        }));
    });
}

/// A subscriber that keeps every event it receives, in order.
#[derive(Debug, Clone, Default)]
pub struct CaptureSubscriber {
    events: Arc<Mutex<Vec<ObsEvent>>>,
}

impl CaptureSubscriber {
    /// An empty capture.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribes a new capture to `hub` (default policy).
    pub fn attach(hub: &Observability) -> (CaptureSubscriber, Subscription) {
        let capture = CaptureSubscriber::new();
        let subscription = hub.subscribe(capture.clone());
        (capture, subscription)
    }

    /// Subscribes a new capture to `hub` with `policy` (e.g. one that captures error text).
    pub fn attach_with(hub: &Observability, policy: crate::ContentPolicy) -> (CaptureSubscriber, Subscription) {
        let capture = CaptureSubscriber::new();
        let subscription = hub.subscribe_with_policy(capture.clone(), policy);
        (capture, subscription)
    }

    /// Removes and returns everything captured so far.
    pub fn take(&self) -> Vec<ObsEvent> {
        std::mem::take(&mut *self.lock())
    }

    /// A copy of everything captured so far.
    pub fn events(&self) -> Vec<ObsEvent> {
        self.lock().clone()
    }

    /// Number of events captured so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing was captured.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ObsEvent>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Subscriber for CaptureSubscriber {
    fn on_event(&self, event: &ObsEvent) {
        self.lock().push(event.clone());
    }
}

/// Runs `iters` operations made by `op` one after another inside one scope of `hub`, on this
/// thread, and returns the time they took — for benchmarks of the operation itself (an
/// application enters its hub once per task, not once per operation). The operations must
/// complete without waiting (ready futures); one that does not panics.
pub fn time_operations<F: std::future::Future>(
    hub: &Observability,
    iters: u64,
    mut op: impl FnMut() -> F,
) -> std::time::Duration {
    let timed = hub.scope(async move {
        let started = std::time::Instant::now();
        for _ in 0..iters {
            std::hint::black_box(op().await);
        }
        started.elapsed()
    });
    let mut timed = std::pin::pin!(timed);
    match timed.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(elapsed) => elapsed,
        std::task::Poll::Pending => panic!("time_operations: an operation did not complete without waiting"),
    }
}
