//! Delivering what earlier runs spooled: in the background when a subscriber starts, or now
//! ([`deliver_spooled`], behind `pi observe flush`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use pi_observe_spool::{Attempt, Spool, SpoolDelivery};

use crate::config::{ConfigError, OtlpConfig};
use crate::export::{Delivery, Exporter};
use crate::stats::Counters;

/// Delivers the batches in `spool` that were going to `config`'s endpoints (same transport),
/// oldest first, until `deadline`. One try per batch; the first batch that fails for a
/// retryable reason ends the pass (the receiver is down). Batches being delivered by another
/// process are skipped: each batch is delivered once. Blocks the calling thread (it may be
/// inside an async runtime: the work runs on a thread of its own).
pub fn deliver_spooled(config: &OtlpConfig, spool: &Spool, deadline: Instant) -> Result<SpoolDelivery, ConfigError> {
    let exporter = Exporter::new(config, &config.resource())?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = runtime()?;
                Ok(drain(&exporter, spool, &runtime, deadline, &|| false))
            })
            .join()
            .unwrap_or_else(|_| Err(ConfigError::new("OTLP spool", "delivery thread failed")))
    })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ConfigError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConfigError::new("OTLP exporter", format!("cannot start the export runtime: {e}")))
}

/// Starts a thread that delivers earlier runs' batches for `config`, when there are any; it
/// stops after its current batch when the subscriber shuts down (what it has not delivered stays
/// spooled), records what it did in `counters`, and says so on the returned channel.
pub(crate) fn drain_in_background(
    config: &OtlpConfig,
    spool: Arc<Spool>,
    counters: Arc<Counters>,
) -> Option<mpsc::Receiver<()>> {
    // A look at the file names only: the start of every run pays nothing more.
    if !spool.has_batches() {
        return None;
    }
    let config = config.clone();
    let (done, finished) = mpsc::channel();
    let spawned = std::thread::Builder::new().name("pi-observe-otlp-spool".into()).spawn(move || {
        // The worker built the same exporter already: this cannot fail for a reason it did not.
        if let (Ok(exporter), Ok(runtime)) = (Exporter::new(&config, &config.resource()), runtime()) {
            let stop = || counters.link.closing.load(Relaxed);
            let far = Instant::now() + Duration::from_secs(24 * 3600);
            let result = drain(&exporter, &spool, &runtime, far, &stop);
            *counters.from_spool.lock().unwrap_or_else(|e| e.into_inner()) = result;
        }
        let _ = done.send(());
    });
    // Without the thread the batches simply wait for the next run.
    spawned.ok().map(|_| finished)
}

fn drain(
    exporter: &Exporter,
    spool: &Spool,
    runtime: &tokio::runtime::Runtime,
    deadline: Instant,
    stop: &dyn Fn() -> bool,
) -> SpoolDelivery {
    spool.deliver(
        |m| exporter.accepts(m),
        &exporter.credentials(),
        deadline,
        stop,
        |claimed, left| match runtime.block_on(exporter.send_spooled(
            &claimed.meta,
            &claimed.body,
            exporter.timeout().min(left),
        )) {
            Delivery::Exported => Attempt::Delivered,
            Delivery::Unauthorized(why) => Attempt::Unauthorized(why),
            Delivery::Rejected(why) | Delivery::Unsupported(why) => Attempt::Rejected(why),
            Delivery::Failed(why) => Attempt::Failed(why),
        },
    )
}
