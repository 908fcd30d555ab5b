//! A receiver that does not answer — silent, its backlog full, or asked first by a backfill —
//! is taken as stalled without waiting out a deadline, and what was meant for it is spooled.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "support/workload.rs"]
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_core::{ContentPolicy, Observability};
use pi_observe_otel::testing::{Answer, Receiver};
use pi_observe_otel::{OtelSubscriber, OtlpConfig};
use workload::{config, workload};

/// Runs `run` against an OTLP subscriber with a spool (in a fresh folder, batches of four, its
/// own export timeout `timeout`) sending to a receiver that accepts connections and never
/// answers; then asserts that every span went to the spool after one attempt — the receiver taken
/// as stalled, the batches after the first spooled without trying.
fn against_a_stalled_receiver(timeout: Duration, run: impl FnOnce(&Observability, &Arc<OtelSubscriber>)) {
    against_a_stalled_receiver_asked(timeout, false, run)
}

/// [`against_a_stalled_receiver`], the receiver asked first (a backfill) when `ask_first`.
fn against_a_stalled_receiver_asked(
    timeout: Duration,
    ask_first: bool,
    run: impl FnOnce(&Observability, &Arc<OtelSubscriber>),
) {
    let stall = Receiver::start(vec![Answer::Stall; 8]);
    let stats = spooling_to(&stall.endpoint, timeout, ask_first, run);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    assert_eq!(*stall.attempts.lock().unwrap(), 1, "one attempt; the rest went straight to the spool");
}

/// Runs `run` against an OTLP subscriber sending to `endpoint` with a spool (in a fresh folder,
/// removed after; batches of four, its own export timeout `timeout`), the receiver asked first
/// when `ask_first`; then shuts it down and returns its counts.
fn spooling_to(
    endpoint: &str,
    timeout: Duration,
    ask_first: bool,
    run: impl FnOnce(&Observability, &Arc<OtelSubscriber>),
) -> pi_observe_otel::ExportStats {
    let dir = std::env::temp_dir().join(format!("pi-otel-stalled-spool-{}", pi_observe_core::SpanId::random()));
    let hub = Observability::new();
    let cfg = OtlpConfig {
        metrics: Some(false),
        timeout: Some(timeout),
        max_export_batch_size: Some(4),
        spool: Some(pi_observe_spool::SpoolConfig::new(&dir)),
        check_receiver_first: ask_first,
        ..config(endpoint)
    };
    let otel = OtelSubscriber::new(cfg).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    run(&hub, &otel);
    let _ = pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(1));
    let _ = std::fs::remove_dir_all(&dir);
    otel.stats()
}

/// The workload, flushed with a deadline far off: only taking the receiver as stalled returns
/// the flush early.
fn workload_then_flush(hub: &Observability, otel: &Arc<OtelSubscriber>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(hub.scope(workload()));
    let flushed = Instant::now();
    pi_observe_core::Subscriber::flush(otel.as_ref(), Duration::from_secs(20)).unwrap();
    assert!(flushed.elapsed() < Duration::from_secs(10), "waited out the deadline: {:?}", flushed.elapsed());
}

/// A loopback receiver's round trip is nil: it is never probed with a connection of its own. A
/// silent one sees the question's connection and nothing else — the batches spooled.
#[test]
fn a_silent_loopback_receiver_is_not_probed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((stream, peer)) = listener.accept() {
            held.push(stream);
            if accepted_tx.send(peer).is_err() {
                return;
            }
        }
    });
    let stats = spooling_to(&format!("http://{addr}/v1/traces"), Duration::from_secs(30), true, workload_then_flush);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    // Connections are accepted in the order they were made: once a last one of ours is in,
    // every connection the subscriber made has been counted.
    let marker = std::net::TcpStream::connect(addr).unwrap().local_addr().unwrap();
    let connections = accepted.iter().take_while(|peer| *peer != marker).count();
    assert_eq!(connections, 1, "the question's connection only");
}

/// A loopback receiver whose backlog is full never takes a connection (the kernel drops the
/// SYN; the client tries again only after a second): a backfill spools everything. (How soon —
/// at the 25 ms floor rather than after the second a probe waited — is measured by
/// `scripts/bench-export-down`, "backlog full"; that no probe is made at all,
/// by `a_silent_loopback_receiver_is_not_probed`.)
#[test]
fn a_backfill_to_a_loopback_receiver_whose_backlog_is_full_spools() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.listen(0).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    // Fill the backlog: connections complete until it is full.
    let mut fillers = Vec::new();
    while let Ok(stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
        fillers.push(stream);
        assert!(fillers.len() < 64, "the backlog does not fill");
    }
    let stats = spooling_to(&format!("http://{addr}/v1/traces"), Duration::from_secs(30), true, workload_then_flush);
    assert!(stats.spans_started > 0);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    drop(listener);
}

/// With a spool, a receiver that takes connections and never answers the run's first export is
/// taken as stalled while the run goes on — no flush asked, the export's own timeout far off:
/// the batches are spooled (a loopback connection takes well under 2 ms, so the first answer's
/// patience is its 100 ms floor).
#[test]
fn a_silent_receiver_is_taken_as_stalled_during_the_run() {
    against_a_stalled_receiver(Duration::from_secs(60), |hub, otel| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(hub.scope(workload()));
        let began = Instant::now();
        loop {
            let stats = otel.stats();
            if stats.spans_spooled > 0 && stats.spans_spooled == stats.spans_started {
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(30), "not spooled: {stats:?}");
            std::thread::yield_now();
        }
    });
}

/// With a spool, a flush does not wait out its whole deadline for a receiver that accepted the
/// connection and never answers: past the first-answer patience the export is cut, the batch
/// spooled, and the batches after it go straight to the spool.
#[test]
fn a_flush_with_a_spool_takes_a_silent_receiver_as_stalled() {
    against_a_stalled_receiver(Duration::from_secs(30), |hub, otel| {
        for _ in 0..3 {
            workload_then_flush(hub, otel);
        }
    });
}

/// A backfill asks the receiver with an empty export as it starts; unanswered, the first flush
/// takes it as stalled and every batch goes to the spool — the question the only request sent.
#[test]
fn a_backfill_whose_question_goes_unanswered_spools_every_batch() {
    against_a_stalled_receiver_asked(Duration::from_secs(30), true, |hub, otel| {
        for _ in 0..3 {
            workload_then_flush(hub, otel);
        }
    });
}

/// A backfill that ends before a batch was due settles its question at the exit with the
/// question's own patience, not the exit's: a silent receiver costs the exit no more than it
/// costs a longer backfill, and every span goes to the spool after the one question.
#[test]
fn a_short_backfill_does_not_wait_the_exits_patience_for_its_question() {
    let stall = Receiver::start(vec![Answer::Stall; 4]);
    let dir = std::env::temp_dir().join(format!("pi-otel-short-backfill-{}", pi_observe_core::SpanId::random()));
    let hub = Observability::new();
    let cfg = OtlpConfig {
        metrics: Some(false),
        spool: Some(pi_observe_spool::SpoolConfig::new(&dir)),
        check_receiver_first: true,
        exit_patience: Some(Duration::from_secs(60)),
        ..config(&stall.endpoint)
    };
    let otel = OtelSubscriber::new(cfg).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(hub.scope(workload()));
    let began = Instant::now();
    pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(60)).unwrap();
    // Waiting the exit's patience would take the whole minute.
    assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
    let stats = otel.stats();
    assert!(stats.spans_started > 0);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    assert_eq!(*stall.attempts.lock().unwrap(), 1, "the question only");
    let _ = std::fs::remove_dir_all(&dir);
}
