//! `pi observe test` for Sentry: one probe transaction, sent once.

use std::time::{Duration, Instant};

use sentry::Envelope;
use sentry::types::Dsn;

use super::{SPOOL_SINK, Target, client, send};

/// Sends one probe transaction (`pi.observe.probe`, in `trace_id`) to `dsn`'s project, once,
/// and says what came back. Blocks the calling thread (which may be inside an async runtime).
pub(crate) fn probe(dsn: &Dsn, timeout: Duration, trace_id: pi_observe_core::TraceId) -> pi_observe_core::ProbeOutcome {
    use sentry::protocol::{Context, TraceContext, Transaction};
    let target = Target::new(dsn, None, timeout);
    let now = std::time::SystemTime::now();
    let trace = TraceContext {
        trace_id: crate::convert::trace_id(trace_id),
        span_id: crate::convert::span_id(pi_observe_core::SpanId::random()),
        op: Some(PROBE_NAME.into()),
        ..Default::default()
    };
    let transaction = Transaction {
        name: Some(PROBE_NAME.into()),
        start_timestamp: now,
        timestamp: Some(now),
        contexts: [("trace".to_owned(), Context::Trace(Box::new(trace)))].into_iter().collect(),
        ..Default::default()
    };
    let mut body = Vec::new();
    let _ = Envelope::from(transaction).to_writer(&mut body);
    let mut outcome = pi_observe_core::ProbeOutcome {
        sink: SPOOL_SINK.into(),
        signal: "envelope".into(),
        endpoint: target.url.clone(),
        protocol: "sentry".into(),
        ..Default::default()
    };
    let started = Instant::now();
    let answer = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok()?;
                let client = client(&target.url, timeout).ok()?;
                Some(runtime.block_on(send(&client, &target, body)))
            })
            .join()
            .ok()
            .flatten()
    });
    outcome.latency = started.elapsed();
    match answer {
        Some(Ok(status)) => {
            outcome.reachable = true;
            outcome.status = Some(format!("HTTP {status}"));
            outcome.accepted = (200..300).contains(&status);
            outcome.auth_accepted = match status {
                401 | 403 => Some(false),
                200..=299 => Some(true),
                _ => None,
            };
            if !outcome.accepted {
                outcome.error = Some(format!("HTTP {status} from {}", target.url));
            }
        }
        Some(Err(why)) => outcome.error = Some(why),
        None => outcome.error = Some("cannot start the HTTP client".into()),
    }
    outcome
}

/// The probe transaction's name and op.
pub(crate) const PROBE_NAME: &str = "pi.observe.probe";
