//! Envelopes earlier runs spooled: delivered in the background when a transport starts, or now
//! (`pi observe flush`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_spool::{Attempt, BatchMeta, Spool, SpoolDelivery};
use sentry::types::Dsn;

use super::{Closing, DeliveryCounters, SPOOL_SINK, Target, client, post};

/// Delivers the envelopes `spool` holds for `target`, oldest first, until `deadline` or until
/// `stop` says so.
pub(super) fn drain(target: &Target, spool: &Spool, deadline: Instant, stop: &dyn Fn() -> bool) -> SpoolDelivery {
    let (Ok(runtime), Ok(client)) =
        (tokio::runtime::Builder::new_current_thread().enable_all().build(), client(&target.url, target.timeout))
    else {
        return SpoolDelivery { last_error: Some("cannot start the HTTP client".into()), ..SpoolDelivery::default() };
    };
    let ours = |m: &BatchMeta| m.sink == SPOOL_SINK && m.url == target.url;
    spool.deliver(ours, &target.credentials, deadline, stop, |claimed, left| {
        runtime.block_on(async {
            match tokio::time::timeout(left, post(&client, target, claimed.body.clone())).await {
                Ok(attempt) => attempt,
                Err(_) => Attempt::Failed(format!("{}: deadline passed", target.url)),
            }
        })
    })
}

/// Starts a thread delivering earlier runs' envelopes for `target`, when there are any; it stops
/// after its current envelope once shutdown begins, and says when it is done.
pub(super) fn drain_in_background(
    target: Target,
    spool: Arc<Spool>,
    counters: &Arc<DeliveryCounters>,
    closing: Arc<Closing>,
) -> Option<std::sync::mpsc::Receiver<()>> {
    // A look at the file names only: the start of every run pays nothing more.
    if !spool.has_batches() {
        return None;
    }
    let counters = counters.clone();
    let (done, finished) = std::sync::mpsc::channel();
    // Without the thread the envelopes simply wait for the next run.
    let spawned = std::thread::Builder::new().name("pi-observe-sentry-spool".into()).spawn(move || {
        let far = Instant::now() + Duration::from_secs(24 * 3600);
        let result = drain(&target, &spool, far, &|| closing.deadline().is_some());
        *counters.from_spool.lock().unwrap_or_else(|e| e.into_inner()) = result;
        let _ = done.send(());
    });
    spawned.ok().map(|_| finished)
}

/// Delivers what earlier runs spooled for `dsn`'s project now (`pi observe flush`), until
/// `deadline`. Blocks the calling thread (which may be inside an async runtime).
pub(crate) fn deliver_spooled(dsn: &Dsn, timeout: Duration, spool: &Spool, deadline: Instant) -> SpoolDelivery {
    let target = Target::new(dsn, None, timeout);
    std::thread::scope(|scope| {
        scope.spawn(|| drain(&target, spool, deadline, &|| false)).join().unwrap_or_else(|_| SpoolDelivery {
            last_error: Some("delivery thread failed".into()),
            ..SpoolDelivery::default()
        })
    })
}
