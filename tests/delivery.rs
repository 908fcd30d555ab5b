//! Nothing lost, nothing silent: what OTLP could not deliver is spooled on disk, quickly, and
//! delivered exactly once by a later run or `pi observe flush` — against a real loopback
//! receiver that is down, stalled, refusing credentials, or up.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use pi_observe::core::EventKind;
use pi_observe::otel::testing::{Answer, Receiver};
use support::{events, faux_script, pi, scratch};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `pi` with its agent directory (and so its default spool) inside `dir`.
fn pi_in(dir: &Path) -> Command {
    let mut cmd = pi();
    cmd.env("PI_CODING_AGENT_DIR", dir.join("agent")).env_remove("PI_SPOOL_DIR");
    cmd
}

/// `pi -p` with the faux tool script, exporting to `endpoint`; its events go to `events`.
fn run(dir: &Path, endpoint: &str, events: &Path, extra: &[&str]) -> Output {
    pi_in(dir)
        .args(["-p", "check the project", "--provider", "faux", "--no-session", "--otlp", endpoint])
        .flag("--cwd", dir)
        .flag("--faux-script", faux_script(dir))
        .flag("--events-jsonl", events)
        .args(extra)
        .output()
        .unwrap()
}

fn spool_dir(dir: &Path) -> PathBuf {
    dir.join("agent/spool")
}

fn batches(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(spool_dir(dir))
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "batch")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// The spooled batches of traces (the receiver always accepts metrics).
fn trace_batches(dir: &Path) -> usize {
    let is_traces = |p: &PathBuf| {
        let bytes = std::fs::read(p).unwrap();
        let header = &bytes[..bytes.iter().position(|b| *b == b'\n').unwrap()];
        String::from_utf8_lossy(header).contains("\"signal\":\"traces\"")
    };
    batches(dir).iter().filter(|p| is_traces(p)).count()
}

/// The span ids a run's events file started.
fn started(events_file: &Path) -> BTreeSet<String> {
    events(events_file).iter().filter(|e| e.kind == EventKind::Start).map(|e| e.span_id.unwrap().to_string()).collect()
}

fn received_ids(receiver: &Receiver) -> Vec<String> {
    receiver.spans().iter().map(|s| hex(&s.span_id)).collect()
}

/// The receiver got exactly the spans `want`, each once (`why` when one came twice).
fn assert_each_once(receiver: &Receiver, want: &BTreeSet<String>, why: &str) {
    let got = received_ids(receiver);
    assert_eq!(&got.iter().cloned().collect::<BTreeSet<_>>(), want);
    assert_eq!(got.len(), want.len(), "{why}");
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that the command's stderr says `text` (showing all of it when it does not).
fn said(out: &Output, text: &str) {
    assert!(stderr(out).contains(text), "{}", stderr(out));
}

fn flush(dir: &Path, endpoint: &str) -> Output {
    pi_in(dir).args(["observe", "flush", "--otlp", endpoint]).output().unwrap()
}

#[test]
fn collector_down_spools_every_span_and_a_flush_delivers_them_once_with_their_ids() {
    let d = scratch("spool-down");
    let endpoint = Receiver::down_endpoint();
    let ev = d.join("events.jsonl");
    let out = run(&d, &endpoint, &ev, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let spans = started(&ev);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("0 spans delivered, {} spooled for the next run, 0 not delivered", spans.len())),
        "{err}"
    );
    assert!(!batches(&d).is_empty());

    let receiver = Receiver::start_at(&endpoint, vec![]);
    let out = flush(&d, &endpoint);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(report.contains(&format!("({} items)", spans.len() + 1)), "spans + one metrics request: {report}");
    let base = endpoint.trim_end_matches("/v1/traces");
    assert!(report.starts_with(&format!("otlp {base}/v1/{{traces,metrics,logs}}: ")), "every signal named: {report}");
    let got = received_ids(&receiver);
    assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), spans, "the original span ids");
    assert_eq!(got.len(), spans.len(), "each span once");
    assert!(batches(&d).is_empty(), "delivered batches leave the spool");
    assert_eq!(receiver.metrics.lock().unwrap().len(), 1, "the metrics request was spooled too");

    // Nothing left: a second flush sends nothing.
    let out = flush(&d, &endpoint);
    assert!(out.status.success());
    assert_eq!(received_ids(&receiver).len(), spans.len());
}

#[test]
fn the_next_run_delivers_earlier_batches_in_the_background_alongside_its_own() {
    let d = scratch("spool-next-run");
    let endpoint = Receiver::down_endpoint();
    let first = d.join("first.jsonl");
    assert!(run(&d, &endpoint, &first, &[]).status.success());
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let second = d.join("second.jsonl");
    let out = run(&d, &endpoint, &second, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The background delivery may still be running when the second run exits (it stops after
    // its current batch, so the first run's metrics batch may wait); the rest is delivered by
    // the next one. Flush what is left once.
    let want: BTreeSet<String> = started(&first).union(&started(&second)).cloned().collect();
    if received_ids(&receiver).len() < want.len() || !batches(&d).is_empty() {
        assert!(flush(&d, &endpoint).status.success());
    }
    assert_each_once(&receiver, &want, "each span exactly once");
    assert!(batches(&d).is_empty());
}

#[test]
fn two_flushes_started_together_deliver_each_batch_exactly_once() {
    let d = scratch("spool-two");
    let endpoint = Receiver::down_endpoint();
    let mut want = BTreeSet::new();
    for i in 0..6 {
        let ev = d.join(format!("run{i}.jsonl"));
        assert!(run(&d, &endpoint, &ev, &[]).status.success());
        want.extend(started(&ev));
    }
    assert!(batches(&d).len() >= 12);
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let children: Vec<_> = (0..2)
        .map(|_| {
            pi_in(&d)
                .args(["observe", "flush", "--otlp", &endpoint])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        assert!(child.wait_with_output().unwrap().status.success());
    }
    assert_each_once(&receiver, &want, "no batch delivered twice");
    assert!(batches(&d).is_empty());
}

#[test]
fn a_stalled_collector_does_not_hold_the_exit_and_its_batches_are_spooled() {
    let d = scratch("spool-stall");
    let receiver = Receiver::start(vec![Answer::Stall; 8]);
    let ev = d.join("events.jsonl");
    let started_at = Instant::now();
    // The flush deadline (5 s) would be waited out without a spool.
    let out = run(&d, &receiver.endpoint, &ev, &[]);
    let took = started_at.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(took < Duration::from_secs(4), "exit waited for a stalled collector: {took:?}");
    let spans = started(&ev);
    said(&out, &format!("{} spooled for the next run", spans.len()));
    assert!(!batches(&d).is_empty());
}

#[test]
fn credentials_refused_keep_the_batches_until_the_headers_change() {
    let d = scratch("spool-401");
    let endpoint = Receiver::down_endpoint();
    let ev = d.join("events.jsonl");
    assert!(run(&d, &endpoint, &ev, &["--otlp-header", "authorization=Bearer old"]).status.success());
    let spooled = trace_batches(&d);
    assert!(spooled > 0);
    // Each spooled trace batch is refused once; after that the receiver accepts everything.
    let receiver = Receiver::start_at(&endpoint, vec![Answer::Status(401, None); spooled]);
    let flush_with = |token: &str| {
        pi_in(&d)
            .args(["observe", "flush", "--otlp", &endpoint, "--otlp-header", &format!("authorization=Bearer {token}")])
            .output()
            .unwrap()
    };
    let out = flush_with("old");
    assert!(String::from_utf8_lossy(&out.stdout).contains("held for other credentials"), "{out:?}");
    assert_eq!(trace_batches(&d), spooled, "refused batches stay");
    let tried = *receiver.attempts.lock().unwrap();
    // Same credentials: not even tried again.
    flush_with("old");
    assert_eq!(tried, spooled);
    assert_eq!(*receiver.attempts.lock().unwrap(), tried);
    // New credentials: delivered.
    let out = flush_with("new");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(received_ids(&receiver).len(), started(&ev).len());
    assert!(receiver.requests().iter().all(|r| r.header("authorization") == Some("Bearer new")));
    assert!(batches(&d).is_empty());
}

#[test]
fn no_spool_drops_and_counts_as_before() {
    let d = scratch("spool-off");
    let endpoint = Receiver::down_endpoint();
    let ev = d.join("events.jsonl");
    let out = run(&d, &endpoint, &ev, &["--no-spool"]);
    assert!(out.status.success());
    let n = started(&ev).len();
    said(&out, &format!("0 spans delivered, {n} not delivered"));
    assert!(!spool_dir(&d).exists());
}

#[test]
fn a_spool_dir_flag_moves_the_spool() {
    let d = scratch("spool-flag");
    let endpoint = Receiver::down_endpoint();
    let elsewhere = d.join("elsewhere");
    let out = run(&d, &endpoint, &d.join("e.jsonl"), &["--spool-dir", elsewhere.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(std::fs::read_dir(&elsewhere).unwrap().count() > 0);
    assert!(!spool_dir(&d).exists());
}

#[test]
fn sentry_envelopes_are_spooled_while_sentry_is_down_and_flushed_with_their_trace_ids() {
    use pi_observe::sentry::testing::EnvelopeEndpoint;
    let d = scratch("spool-sentry");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dsn = format!("http://public@127.0.0.1:{port}/1");
    let ev = d.join("events.jsonl");
    let out = pi_in(&d)
        .args(["-p", "hi", "--no-session", "--tools", "none", "--sentry", &dsn, "--events-jsonl"])
        .arg(&ev)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    said(&out, "1 transactions, 0 error events: 0 delivered, 1 spooled for the next run, 0 not delivered");
    let trace = events(&ev)[0].trace_id.to_string();

    let endpoint = EnvelopeEndpoint::start_at(port);
    let out = pi_in(&d).args(["observe", "flush", "--sentry", &dsn]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 batches delivered (1 items)"), "{out:?}");
    let transactions: Vec<_> = endpoint.items().into_iter().filter(|(kind, _)| kind == "transaction").collect();
    assert_eq!(transactions.len(), 1);
    assert_eq!(transactions[0].1["contexts"]["trace"]["trace_id"], trace.as_str());
    assert!(batches(&d).is_empty());
}

/// `pi export --sentry` is a backfill: its replay waits for room in Sentry's queue (30 envelopes)
/// instead of dropping, so every prompt's transaction arrives; a server that takes connections
/// and never answers is taken as stalled after its first envelope, and the rest is spooled.
#[test]
fn export_to_sentry_delivers_every_transaction_or_spools_it() {
    use pi_observe::sentry::testing::EnvelopeEndpoint;
    let d = scratch("export-sentry");
    let sessions = session(&d, 200);
    let endpoint = EnvelopeEndpoint::start();
    let out = pi_in(&d).arg("export").arg(&sessions).args(["--sentry", &endpoint.dsn()]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    said(&out, "200 transactions, 0 error events: 200 delivered, 0 not delivered");
    assert_eq!(endpoint.items().iter().filter(|(kind, _)| kind == "transaction").count(), 200);

    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dsn = format!("http://public@127.0.0.1:{}/1", silent.local_addr().unwrap().port());
    let started_at = Instant::now();
    let out = pi_in(&d).arg("export").arg(&sessions).args(["--sentry", &dsn]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    said(&out, "200 transactions, 0 error events: 0 delivered, 200 spooled for the next run, 0 not delivered");
    said(&out, "taken as stalled");
    // Waiting out the request timeout (10 s) per envelope, or the flushes' 5 s deadlines, would
    // take far longer.
    assert!(started_at.elapsed() < Duration::from_secs(10), "export took {:?}", started_at.elapsed());
    assert_eq!(batches(&d).len(), 200);
}

/// A Sentry envelope endpoint on loopback that takes `delay` to answer each request (200, kept
/// alive); returns its DSN and the count of requests answered.
fn slow_sentry(delay: Duration) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dsn = format!("http://public@{}/1", listener.local_addr().unwrap());
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let count = count.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut length = 0;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    // The receiver's own pace: what a remote server's round trip costs.
                    std::thread::sleep(delay);
                    count.fetch_add(1, Relaxed);
                    if stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    (dsn, answered)
}

/// A backfill into a collector and a Sentry slower than the replay: the replay waits for Sentry
/// (its pacing flushes repeated while the sinks' queue goes down), so the sinks' shared queue
/// never overflows — every span reaches the collector and every transaction Sentry. (Without
/// the repeat, each pacing flush gave up after the flush deadline, 400 ms here, and the queue
/// overflowed: records dropped for both.)
#[test]
fn a_backfill_waits_for_a_slow_sentry_and_the_collector_still_gets_every_span() {
    let d = scratch("export-slow-sentry");
    let sessions = session(&d, 2000);
    let receiver = Receiver::start(vec![]);
    let (dsn, answered) = slow_sentry(Duration::from_millis(3));
    let out = pi_in(&d)
        .arg("export")
        .arg(&sessions)
        .args(["--otlp", &receiver.endpoint, "--sentry", &dsn])
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "400")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    said(&out, "6000 spans delivered, 0 not delivered");
    said(&out, "2000 transactions, 0 error events: 2000 delivered, 0 not delivered");
    assert!(!stderr(&out).contains("did not keep up"), "the replay waited: {}", stderr(&out));
    assert_eq!(answered.load(std::sync::atomic::Ordering::Relaxed), 2000);
}

/// A session of `prompts` user/assistant exchanges (each one trace when exported).
fn session(dir: &Path, prompts: usize) -> PathBuf {
    let path = dir.join("big.jsonl");
    let mut out = String::from(
        r#"{"type":"session","version":3,"id":"s-big","timestamp":"2026-12-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    out.push('\n');
    let mut parent = serde_json::Value::Null;
    for i in 0..prompts {
        let (u, a) = (format!("u{i:06}"), format!("a{i:06}"));
        let user = serde_json::json!({"type": "message", "id": u, "parentId": parent,
            "timestamp": "2026-12-01T10:00:00.000Z", "message": {"role": "user", "content": "hello", "timestamp": 1}});
        let assistant = serde_json::json!({"type": "message", "id": a, "parentId": u,
            "timestamp": "2026-12-01T10:00:01.000Z", "message": {"role": "assistant",
            "content": [{"type": "text", "text": "hi"}], "api": "faux", "provider": "faux", "model": "faux-1",
            "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 12,
                      "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0, "cacheWrite": 0, "total": 0.0}},
            "stopReason": "stop", "timestamp": 2}});
        out.push_str(&format!("{user}\n{assistant}\n"));
        parent = serde_json::Value::String(a);
    }
    std::fs::write(&path, out).unwrap();
    path
}

/// `pi export` against a receiver that takes connections and never answers: every span
/// spooled, the receiver tried once.
#[test]
fn export_against_a_stalled_collector_spools_instead_of_waiting_out_every_flush() {
    let d = scratch("spool-export");
    let stalled = Receiver::start(vec![Answer::Stall; 64]);
    let sessions = session(&d, 1200);
    let ev = d.join("events.jsonl");
    let started_at = Instant::now();
    let out = pi_in(&d)
        .arg("export")
        .arg(&sessions)
        .args(["--otlp", &stalled.endpoint, "--events-jsonl"])
        .arg(&ev)
        .output()
        .unwrap();
    let took = started_at.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    let spans = started(&ev);
    assert!(spans.len() > 2048, "several flushes: {}", spans.len());
    let summary = format!("0 spans delivered, {} spooled for the next run, 0 not delivered", spans.len());
    said(&out, &summary);
    // Before the spool, every flush waited its 5 s deadline for the stalled receiver.
    assert!(took < Duration::from_secs(15), "export took {took:?}");
    // A backfill asks the receiver with an empty export while it reads the sessions: unanswered,
    // no batch is even tried.
    assert_eq!(*stalled.attempts.lock().unwrap(), 1, "one question, no batch sent: {}", stderr(&out));
    said(&out, "taken as stalled");
    drop(stalled);

    // Delivered later, exactly once, with the replay's ids.
    let receiver = Receiver::start(vec![]);
    let out = pi_in(&d).args(["observe", "flush", "--otlp", &receiver.endpoint]).output().unwrap();
    // The batches name the stalled endpoint, not this one: nothing to deliver here.
    assert!(String::from_utf8_lossy(&out.stdout).contains("still spooled"), "{out:?}");
    assert!(received_ids(&receiver).is_empty());
}

#[test]
fn a_spooling_process_killed_midway_leaves_only_whole_batches() {
    let d = scratch("spool-kill");
    let sessions = session(&d, 3000);
    let endpoint = Receiver::down_endpoint();
    let mut child = pi_in(&d)
        .arg("export")
        .arg(&sessions)
        .args(["--otlp", &endpoint])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as it has spooled a batch, while it writes the next ones.
    let spool = spool_dir(&d);
    let started_at = Instant::now();
    while batches(&d).is_empty() {
        assert!(started_at.elapsed() < Duration::from_secs(60), "nothing was spooled");
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let store = pi_observe::spool::Spool::new(pi_observe::spool::SpoolConfig::new(&spool));
    let pending = store.pending(|_| true);
    assert!(!pending.is_empty());
    for batch in &pending {
        let claimed = store.claim(batch).expect("every listed batch is whole");
        assert_eq!(claimed.meta.url, endpoint);
    }
    assert_eq!(store.stats().unreadable, 0, "{:?}", store.stats().diagnostics);
    assert_eq!(store.status().unreadable, 0);
}

#[test]
fn the_spool_cap_removes_the_oldest_batches_and_counts_them() {
    let d = scratch("spool-cap");
    let endpoint = Receiver::down_endpoint();
    for i in 0..4 {
        let out = pi_in(&d)
            .args(["-p", "hi", "--no-session", "--tools", "none", "--otlp", &endpoint, "--events-jsonl"])
            .arg(d.join(format!("e{i}.jsonl")))
            .env("PI_SPOOL_MAX_BYTES", "6000")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let total: u64 = batches(&d).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(total <= 6000, "{total} bytes kept");
    let out = pi_in(&d)
        .args(["observe", "status", "--json", "--otlp", &endpoint])
        .env("PI_SPOOL_MAX_BYTES", "6000")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(doc["lastRun"]["spool"]["droppedFull"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(doc["pipeline"]["spool"]["maxBytes"], 6000);
    assert_eq!(doc["pipeline"]["spool"]["sources"]["maxBytes"], "env PI_SPOOL_MAX_BYTES");
    // A malformed cap is named.
    let out = pi_in(&d).args(["-p", "hi", "--otlp", &endpoint]).env("PI_SPOOL_MAX_BYTES", "lots").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    said(&out, "PI_SPOOL_MAX_BYTES: \"lots\"");
}

#[test]
fn a_torn_spool_file_is_skipped_counted_and_named_once() {
    let d = scratch("spool-torn");
    let endpoint = Receiver::down_endpoint();
    assert!(run(&d, &endpoint, &d.join("e.jsonl"), &[]).status.success());
    let files = batches(&d);
    let torn = &files[0];
    let bytes = std::fs::read(torn).unwrap();
    std::fs::write(torn, &bytes[..bytes.len() - 3]).unwrap();
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let first = flush(&d, &endpoint);
    assert!(first.status.success(), "{first:?}");
    let named = stderr(&first);
    assert!(named.contains(&torn.display().to_string()) && named.contains("torn"), "{named}");
    assert_eq!(batches(&d).len(), 0, "the rest delivered, the torn one set aside");
    assert!(!receiver.requests().is_empty() || !receiver.metrics.lock().unwrap().is_empty());
    let second = flush(&d, &endpoint);
    assert!(!stderr(&second).contains("torn"), "named once: {}", stderr(&second));
    let status = pi_in(&d).args(["observe", "status", "--json", "--otlp", &endpoint]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["spool"]["unreadable"], 1, "{doc}");
}

#[test]
fn the_next_run_delivers_earlier_sentry_envelopes_in_the_background() {
    use pi_observe::sentry::testing::EnvelopeEndpoint;
    let d = scratch("spool-sentry-next");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dsn = format!("http://public@127.0.0.1:{port}/1");
    let prompt = |events: &str| {
        pi_in(&d)
            .args(["-p", "hi", "--no-session", "--tools", "none", "--sentry", &dsn, "--events-jsonl"])
            .arg(d.join(events))
            .output()
            .unwrap()
    };
    assert!(prompt("first.jsonl").status.success());
    assert_eq!(batches(&d).len(), 1);
    let endpoint = EnvelopeEndpoint::start_at(port);
    let out = prompt("second.jsonl");
    assert!(out.status.success(), "{}", stderr(&out));
    if !batches(&d).is_empty() {
        // Still in flight when the second run exited: the flush finishes the job.
        assert!(pi_in(&d).args(["observe", "flush", "--sentry", &dsn]).output().unwrap().status.success());
    }
    let traces: BTreeSet<String> = endpoint
        .items()
        .into_iter()
        .filter(|(kind, _)| kind == "transaction")
        .map(|(_, t)| t["contexts"]["trace"]["trace_id"].as_str().unwrap().to_owned())
        .collect();
    let want: BTreeSet<String> =
        ["first.jsonl", "second.jsonl"].iter().map(|f| events(&d.join(f))[0].trace_id.to_string()).collect();
    assert_eq!(traces, want);
    assert_eq!(
        endpoint.items().iter().filter(|(kind, _)| kind == "transaction").count(),
        2,
        "each transaction exactly once"
    );
    assert!(batches(&d).is_empty());
}

#[test]
fn batches_past_the_age_cap_are_not_delivered_but_removed_and_counted() {
    let d = scratch("spool-age");
    let endpoint = Receiver::down_endpoint();
    assert!(run(&d, &endpoint, &d.join("e.jsonl"), &[]).status.success());
    // Make every spooled batch look eight days old (the name carries its creation time).
    for path in batches(&d) {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let (_, rest) = name.split_once('-').unwrap();
        let old = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
            - 8 * 86_400_000;
        std::fs::rename(&path, path.with_file_name(format!("{old:013}-{rest}"))).unwrap();
    }
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let out = flush(&d, &endpoint);
    assert!(out.status.success(), "{out:?}");
    assert!(receiver.spans().is_empty(), "expired batches are not delivered");
    assert!(batches(&d).is_empty(), "they are removed");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(report.contains("batches removed past the age cap, 0 over the size cap"), "{report}");
}

#[test]
fn two_runs_started_together_deliver_the_earlier_batches_once() {
    let d = scratch("spool-two-runs");
    let endpoint = Receiver::down_endpoint();
    let mut want = BTreeSet::new();
    for i in 0..4 {
        let ev = d.join(format!("down{i}.jsonl"));
        assert!(run(&d, &endpoint, &ev, &[]).status.success());
        want.extend(started(&ev));
    }
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let children: Vec<_> = (0..2)
        .map(|i| {
            pi_in(&d)
                .args(["-p", "again", "--provider", "faux", "--no-session", "--tools", "none", "--otlp", &endpoint])
                .flag("--events-jsonl", d.join(format!("up{i}.jsonl")))
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        assert!(child.wait_with_output().unwrap().status.success());
    }
    for i in 0..2 {
        want.extend(started(&d.join(format!("up{i}.jsonl"))));
    }
    if !batches(&d).is_empty() {
        assert!(flush(&d, &endpoint).status.success());
    }
    assert_each_once(&receiver, &want, "no span delivered twice");
}
