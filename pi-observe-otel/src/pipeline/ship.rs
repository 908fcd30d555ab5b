//! How the worker sends what it built: each export cut short by a stalled receiver, a flush or
//! the shutdown; what fails for a reason that may pass spooled; each outcome counted.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Instant, SystemTime};

use pi_observe_core::DropReason;

use super::worker::{Batch, Worker};
use super::{DEGRADED_FOR, LEAST_FIRST_ANSWER_PATIENCE, MAX_DEGRADED_FOR, answer_patience};
use crate::export::{Delivery, Payload, Shipped};

impl Worker {
    /// Takes the answer to the backfill's question, waiting for it as long as the link deserves:
    /// answered, the receiver's answer time is known; not answered in time (or refused), the
    /// receiver is taken as down for a while and the batches go straight to the spool.
    pub(super) fn settle_question(&mut self) {
        let Some(question) = self.question.take() else { return };
        match question.answer(&self.counters) {
            Some((Delivery::Exported, took)) => {
                let took = took.as_micros().min(u128::from(u64::MAX)) as u64;
                self.counters.slowest_answer_micros.fetch_max(took.max(1), Relaxed);
            }
            Some((Delivery::Failed(why), _)) => self.degrade(why),
            None => self.degrade("no answer to the run's first export in time: taken as stalled".into()),
            // Refused for what it says (auth, format), or not asked: the batches will say it.
            Some(_) => {}
        }
    }

    /// The receiver failed for good (`why`): batches go straight to the spool for a while,
    /// twice as long after each failure in a row.
    pub(super) fn degrade(&mut self, why: String) {
        self.degraded_until = Some(Instant::now() + self.degraded_for);
        self.degraded_for = (self.degraded_for * 2).min(MAX_DEGRADED_FOR);
        self.degraded_why = Some(why);
    }

    /// `deadline`, or shutdown's if that is earlier.
    pub(super) fn cut_off(&self, deadline: Instant) -> Instant {
        let cut_off = *self.counters.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner());
        cut_off.map_or(deadline, |d| deadline.min(d))
    }

    /// Runs one export, cut short when shutdown's deadline (or, with a spool, a flush's) passes
    /// — at once when shutting down and the receiver refuses connections: it will not come back
    /// before the exit.
    pub(super) fn attempt(
        &self,
        runtime: &tokio::runtime::Runtime,
        (deadline, first_answer): (Instant, bool),
        export: impl std::future::Future<Output = Delivery>,
    ) -> Delivery {
        let counters = &self.counters;
        let started = Instant::now();
        runtime.block_on(async {
            // Before the receiver's first answer of the run (with a spool), a stalled receiver
            // is told from a slow one by how long a connection to it takes, probed once (while
            // the export goes on) if the export outlasts the least patience.
            let stalled = async {
                if !first_answer {
                    return std::future::pending().await;
                }
                // A receiver that answers within the least patience never costs a probe.
                tokio::time::sleep_until((started + LEAST_FIRST_ANSWER_PATIENCE).min(deadline).into())
                    .await;
                let connect_time = match self.connect_time.get() {
                    Some(known) => known,
                    None => {
                        let probed = self.exporter.connect_time().await;
                        self.connect_time.set(Some(probed));
                        probed
                    }
                };
                let by = started + answer_patience(connect_time, LEAST_FIRST_ANSWER_PATIENCE);
                tokio::time::sleep_until(by.min(deadline).into()).await;
                // While exiting, the exit's own patience (200 ms by default) decides instead:
                // a last batch is not cut sooner than before.
                if counters.link.closing.load(Relaxed) {
                    std::future::pending::<()>().await;
                }
            };
            let cut = counters.hurried_until(|c| {
                let shutdown = *c.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner());
                if shutdown.is_some() && c.link.unreachable.load(Relaxed) {
                    return Some(Instant::now());
                }
                let flush_by = *c.flush_by.lock().unwrap_or_else(|e| e.into_inner());
                shutdown.into_iter().chain(flush_by).min().map(|by| by.min(deadline))
            });
            tokio::select! {
                delivery = export => delivery,
                () = stalled => Delivery::Failed("no answer to the run's first export in time: taken as stalled".into()),
                () = cut => Delivery::Failed(if counters.link.unreachable.load(Relaxed) {
                    "not sent at the exit: the receiver refused connections".into()
                } else {
                    "shutdown deadline passed".into()
                }),
            }
        })
    }

    /// Sends `payload` until `deadline` (cut short when shutdown's deadline passes); what fails
    /// with a retryable outcome is spooled when there is a spool.
    pub(super) fn ship(&mut self, runtime: &tokio::runtime::Runtime, payload: &Payload, deadline: Instant) -> Shipped {
        self.settle_question();
        let deadline = self.cut_off(deadline);
        let link = &self.counters.link;
        // A receiver that failed recently, or refuses connections while we exit, is not tried.
        let skip = self.spool.is_some()
            && (self.degraded_until.is_some_and(|until| Instant::now() < until)
                || (link.closing.load(Relaxed) && link.unreachable.load(Relaxed)));
        let first_answer = self.spool.is_some() && self.counters.slowest_answer_micros.load(Relaxed) == 0;
        let started = Instant::now();
        let delivery = if skip {
            Delivery::Failed(match &self.degraded_why {
                Some(why) => format!("receiver unavailable: {why}"),
                None => "receiver unavailable".into(),
            })
        } else {
            self.attempt(runtime, (deadline, first_answer), self.exporter.send(payload, deadline))
        };
        match delivery {
            Delivery::Exported => {
                let took = started.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
                self.counters.slowest_answer_micros.fetch_max(took.max(1), Relaxed);
                self.degraded_until = None;
                self.degraded_for = DEGRADED_FOR;
                Shipped::Delivered
            }
            Delivery::Failed(why) => {
                self.exporter.note_unsent(payload, &why);
                if self.spool.is_none() {
                    return Shipped::Lost(Delivery::Failed(why));
                }
                if !skip && !self.counters.link.closing.load(Relaxed) {
                    self.degrade(why.clone());
                }
                let Some(spool) = &self.spool else { return Shipped::Lost(Delivery::Failed(why)) };
                let (meta, body) = self.exporter.spool_batch(payload);
                match spool.write(&meta, &body) {
                    Ok(()) => Shipped::Spooled,
                    Err(_) => Shipped::Lost(Delivery::Failed(why)),
                }
            }
            other => Shipped::Lost(other),
        }
    }

    pub(super) fn export_metrics(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        if self.metrics_stopped {
            return;
        }
        let c = &self.counters;
        let spans = [
            ("exported", c.exported.load(Relaxed)),
            ("spooled", c.spooled.load(Relaxed)),
            ("dropped.queue_full", c.dropped_queue_full.load(Relaxed)),
            ("dropped.export_failed", c.dropped_failed.load(Relaxed)),
            ("dropped.rejected", c.dropped_rejected.load(Relaxed)),
            ("dropped.unauthorized", c.dropped_unauthorized.load(Relaxed)),
            ("dropped.shutdown", c.dropped_shutdown.load(Relaxed)),
        ];
        let hub = self.hub.hub().map(|h| h.stats());
        let spool = self.spool.as_ref().map(|s| s.stats());
        let from_spool = c.from_spool.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(metrics) = &mut self.metrics else { return };
        for (name, attrs, value) in crate::self_metrics::points(hub.as_ref(), &spans, spool.as_ref(), &from_spool) {
            metrics.set(name, attrs, value);
        }
        let Some(request) = metrics.request(&self.exporter.proto_resource(), SystemTime::now()) else { return };
        let payload = self.exporter.metrics_payload(request);
        let shipped = self.ship(runtime, &payload, deadline);
        self.metrics_stopped = self.counters.count_signal(0, "metrics", shipped);
    }

    pub(super) fn export(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        self.export_logs(runtime, deadline);
        self.export_spans(runtime, deadline);
    }

    pub(super) fn export_logs(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        let Some(logs) = &mut self.logs else { return };
        if logs.is_empty() {
            return;
        }
        let records = std::mem::take(logs);
        if self.logs_stopped {
            return;
        }
        let payload = self.exporter.logs_payload(records);
        let shipped = self.ship(runtime, &payload, deadline);
        self.logs_stopped = self.counters.count_signal(1, "logs", shipped);
    }

    pub(super) fn export_spans(&mut self, runtime: &tokio::runtime::Runtime, deadline: Instant) {
        if self.batch.is_empty() {
            return;
        }
        let spans = self.batch.take();
        self.sent_spans = true;
        let n = spans.len() as u64;
        if self.stopped {
            self.counters.dropped_unauthorized.fetch_add(n, Relaxed);
            self.hub.record_dropped(DropReason::Rejected, n);
            return;
        }
        let deadline = self.cut_off(deadline);
        let delivery = match spans {
            Batch::Sdk(spans) => self.attempt(runtime, (deadline, false), self.exporter.export_sdk(spans, deadline)),
            Batch::Wire(_) | Batch::Encoded(_) => {
                let payload = match spans {
                    Batch::Encoded(spans) => self.exporter.traces_payload_encoded(&spans, &self.scope),
                    Batch::Wire(spans) => self.exporter.traces_payload_wire(spans, &self.scope),
                    Batch::Sdk(_) => unreachable!("matched above"),
                };
                match self.ship(runtime, &payload, deadline) {
                    Shipped::Delivered => Delivery::Exported,
                    Shipped::Spooled => {
                        self.counters.spooled.fetch_add(n, Relaxed);
                        return;
                    }
                    Shipped::Lost(delivery) => delivery,
                }
            }
        };
        match delivery {
            Delivery::Exported => {
                // A receiver may take the request but reject some spans (`partial_success`).
                let rejected = self.counters.link.partially_rejected.swap(0, Relaxed).min(n);
                self.counters.exported.fetch_add(n - rejected, Relaxed);
                if rejected > 0 {
                    self.counters.dropped_rejected.fetch_add(rejected, Relaxed);
                    self.hub.record_dropped(DropReason::Rejected, rejected);
                }
            }
            Delivery::Failed(_) if Instant::now() >= deadline => {
                self.counters.dropped_shutdown.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Shutdown, n);
            }
            Delivery::Failed(_) => {
                self.counters.dropped_failed.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::ExportFailed, n);
            }
            Delivery::Rejected(_) => {
                self.counters.dropped_rejected.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
            }
            Delivery::Unauthorized(why) => {
                self.stopped = true;
                self.counters.dropped_unauthorized.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
                self.counters.stopped("traces", &why);
            }
            Delivery::Unsupported(why) => {
                self.stopped = true;
                self.counters.dropped_rejected.fetch_add(n, Relaxed);
                self.hub.record_dropped(DropReason::Rejected, n);
                self.counters.unsupported("traces", &why);
            }
        }
    }
}
