//! A backfill's question to its receiver ([`crate::OtlpConfig::check_receiver_first`]): an empty
//! traces export, sent on a thread of its own as the subscriber starts, while the caller is still
//! reading what it will export. The worker waits for the answer only when it has a first payload
//! to send — a full batch, a flush or the exit; by then the question has usually been answered,
//! or has waited the whole time the run took to get there — and only as long as the link
//! deserves ([`question_patience`]), counted from when it was asked.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::config::OtlpConfig;
use crate::export::{Delivery, Exporter};
use crate::stats::Counters;

/// The least an unanswered question is waited for, from when it was asked.
const LEAST_QUESTION_PATIENCE: Duration = Duration::from_millis(25);

/// How long the worker may wait for the answer to the question, from when it was asked: as a
/// first answer ([`super::answer_patience`]), but at least `LEAST_QUESTION_PATIENCE` rather than
/// a first batch's 100 ms — there is no batch to ingest, and the run's own work went on while
/// the question waited.
fn question_patience(connect_time: Option<Duration>) -> Duration {
    super::answer_patience(connect_time, LEAST_QUESTION_PATIENCE)
}

/// The question, as the asking thread and the worker share it.
pub(super) struct Question {
    asked_at: Instant,
    state: Mutex<Asked>,
    changed: Condvar,
}

#[derive(Default)]
struct Asked {
    /// How long a TCP connection to the receiver took, probed once the question has waited the
    /// least patience (`Some(None)`: no connection within a second).
    connect_time: Option<Option<Duration>>,
    /// The answer and how long it took.
    answer: Option<(Delivery, Duration)>,
}

impl Question {
    /// Sends the question from a thread of its own, with an exporter of its own for `config`
    /// (sharing the receiver's link state, so a refused connection is known to the worker).
    /// `None` when no thread could be started: the first batch is then the question.
    pub(super) fn ask(config: &OtlpConfig, counters: &Arc<Counters>) -> Option<Arc<Question>> {
        let question =
            Arc::new(Question { asked_at: Instant::now(), state: Mutex::default(), changed: Condvar::new() });
        let (config, counters, asking) = (config.clone(), counters.clone(), question.clone());
        let spawned = std::thread::Builder::new().name("pi-observe-otlp-question".into()).spawn(move || {
            let answer = match (Exporter::new(&config, &config.resource()), crate::spool::runtime()) {
                (Ok(mut exporter), Ok(runtime)) => {
                    exporter.link = counters.link.clone();
                    exporter.max_retries = 0;
                    let deadline = asking.asked_at + config.timeout.unwrap_or(Duration::from_secs(10));
                    runtime.block_on(asking.send(&exporter, &counters, deadline))
                }
                // Not asked (the worker built the same exporter and runtime already, so this
                // does not happen): the first batch is the question, as without one.
                _ => Some(Delivery::Rejected("the receiver could not be asked".into())),
            };
            // Unanswered (cut by the shutdown or the deadline), the worker's patience decides.
            if let Some(answer) = answer {
                asking.publish(|asked| asked.answer = Some((answer, asking.asked_at.elapsed())));
            }
        });
        spawned.ok().map(|_| question)
    }

    /// Sends the question until `deadline` or the shutdown's deadline, probing the connection
    /// time once the least patience has passed without an answer.
    async fn send(&self, exporter: &Exporter, counters: &Counters, deadline: Instant) -> Option<Delivery> {
        let question = exporter.empty_traces();
        let probe = async {
            tokio::time::sleep_until((self.asked_at + LEAST_QUESTION_PATIENCE).into()).await;
            let connect_time = exporter.connect_time().await;
            self.publish(|asked| asked.connect_time = Some(connect_time));
            std::future::pending::<()>().await;
        };
        let shutdown = counters.hurried_until(|c| *c.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner()));
        tokio::select! {
            delivery = exporter.send(&question, deadline) => Some(delivery),
            () = probe => None,
            () = shutdown => None,
        }
    }

    fn publish(&self, change: impl FnOnce(&mut Asked)) {
        change(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()));
        self.changed.notify_all();
    }

    /// Waits for the answer and how long it took, until the patience for the link runs out (or,
    /// while exiting, the shutdown's deadline, if that comes first). `None`: no answer in time.
    pub(super) fn answer(&self, counters: &Counters) -> Option<(Delivery, Duration)> {
        let exit_by = if counters.link.closing.load(Relaxed) {
            *counters.shutdown_deadline.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            None
        };
        let mut asked = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(answer) = asked.answer.take() {
                return Some(answer);
            }
            // Until the connection time is known, the longest patience it could give.
            let patience = question_patience(asked.connect_time.unwrap_or(None));
            let by = exit_by.map_or(self.asked_at + patience, |exit| exit.min(self.asked_at + patience));
            let now = Instant::now();
            if now >= by {
                return None;
            }
            asked = self.changed.wait_timeout(asked, by - now).map(|(a, _)| a).unwrap_or_else(|e| e.into_inner().0);
        }
    }
}
