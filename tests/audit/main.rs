//! The outside audit's second round (issue 24): each test is named after the item it covers and
//! runs `pi` the way a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // test helpers

// The workspace's shared test support (this test is a folder: `tests/audit/`).
#[path = "../support/mod.rs"]
mod support;

mod counts;
mod errors;
mod privacy;
mod signals;

use std::path::Path;
use std::process::Command;

use pi_observe::otel::testing::Receiver;
use pi_observe::sentry::testing::EnvelopeEndpoint;
use support::{faux_script, pi, scratch};

/// Runs `cmd` with every sink on (events file, `--log-json` file, OTLP with logs to a loopback
/// receiver, Sentry to a loopback envelope endpoint) and returns its exit code and everything
/// the sinks received, as one text to search.
fn with_every_sink(mut cmd: Command, d: &Path, json_mode: bool) -> (Option<i32>, String, String) {
    let receiver = Receiver::start(vec![]);
    let sentry = EnvelopeEndpoint::start();
    let (events, log) = (d.join("sink-events.jsonl"), d.join("sink-log.jsonl"));
    let _ = std::fs::remove_file(&events);
    let _ = std::fs::remove_file(&log);
    cmd.arg("--events-jsonl").arg(&events).arg("--log-json").arg(&log);
    cmd.args(["--otlp", &receiver.endpoint, "--otlp-logs", "--sentry", &sentry.dsn()]);
    if json_mode {
        cmd.args(["--mode", "json"]);
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut dump = String::new();
    dump.push_str(&std::fs::read_to_string(&events).unwrap_or_default());
    dump.push_str(&std::fs::read_to_string(&log).unwrap_or_default());
    // `--mode json` prints agent events (the program's output) and contract events (the sink).
    for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("\"traceId\"")) {
        dump.push_str(line);
    }
    dump.push_str(&format!(
        "{:?}\n{:?}\n{:?}",
        receiver.requests().iter().map(|r| &r.request).collect::<Vec<_>>(),
        receiver.metrics.lock().unwrap(),
        receiver.logs.lock().unwrap()
    ));
    for (_, body) in sentry.requests() {
        dump.push_str(&String::from_utf8_lossy(&body));
    }
    (out.status.code(), dump, stderr)
}

/// `pi` with its agent directory (and so its default spool) inside `dir`.
fn pi_in(dir: &Path) -> Command {
    let mut cmd = pi();
    cmd.env("PI_CODING_AGENT_DIR", dir.join("agent"));
    cmd
}

fn spooled_batches(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("agent/spool"))
        .map(|r| r.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "batch")).count())
        .unwrap_or(0)
}

/// Runs `cmd` (stdin closed) and returns (exit code, stderr), with [`exit_of`]'s hang guard.
fn finished(mut cmd: Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, _) = exit_of(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (code, err)
}

/// Waits for `child` (a 60 s hang guard, not a timing assert): its exit code and how long it
/// took.
fn exit_of(child: &mut std::process::Child) -> (Option<i32>, std::time::Duration) {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), start.elapsed());
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("pi kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

fn print_run(d: &Path) -> Command {
    let mut cmd = pi_in(d);
    cmd.args(["-p", "hi", "--provider", "faux"]).arg("--cwd").arg(d);
    cmd
}

/// The number before `what` on the line of `stderr` that starts with `prefix`.
fn count_before(stderr: &str, prefix: &str, what: &str) -> Option<u64> {
    let line = stderr.lines().find(|l| l.starts_with(prefix))?;
    let at = line.find(what)?;
    line[..at].trim_end().rsplit([' ', '(']).next()?.parse().ok()
}
