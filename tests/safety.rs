//! "Safe by default", checked the way a careful user would: canaries and real-format secrets
//! planted in the prompt, a file, the environment, shell output, tool errors and provider error
//! bodies, with every sink on at once; sixty-odd bad inputs that must each get one line and a
//! non-zero exit before anything is touched; signals during a tool run and during streaming; and
//! the regressions the audit of issue 12 found (report on odd ids, torn last lines, a dead
//! collector at exit).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pi_observe::core::testing::{SecretSample, placements, secret_samples};
use pi_observe::core::{EventKind, ObsEvent};
use pi_observe::otel::testing::Receiver;
use pi_observe::sentry::testing::EnvelopeEndpoint;

/// The binary under test; `PI_SAFETY_BIN` points the same checks at another build (how the
/// audit's findings were shown to fail on the commit before the fix).
fn pi() -> Command {
    let binary = std::env::var_os("PI_SAFETY_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into());
    let mut cmd = Command::new(binary);
    for (var, _) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if name.starts_with("OTEL_") || name.starts_with("SENTRY_") || name.starts_with("PI_") {
            cmd.env_remove(&var);
        }
    }
    for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TRACEPARENT", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    // Its own agent directory: nothing is spooled into the real `~/.pi/agent`.
    let agent = std::env::temp_dir().join(format!("pi-safety-agent-{}", pi_observe::core::SpanId::random()));
    cmd.env("PI_CODING_AGENT_DIR", agent);
    cmd
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-safety-{name}-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn write_json(path: &Path, value: &serde_json::Value) {
    std::fs::write(path, value.to_string()).unwrap();
}

/// Every line of `path` is a whole JSON value (nothing torn, nothing half-written).
fn assert_whole_lines(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    assert!(bytes.is_empty() || bytes.ends_with(b"\n"), "{}: last line is not whole", path.display());
    let text = String::from_utf8(bytes).unwrap();
    for (i, line) in text.lines().enumerate() {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("{}:{}: not a whole JSON line ({e})", path.display(), i + 1));
    }
    text.lines().count()
}

// ---- Canaries through every sink -------------------------------------------------------------

/// Plain content canaries, one per place content comes from.
const PROMPT: &str = "CANARYprompt4a1";
const SHELL: &str = "CANARYshell7c2";
const FILE: &str = "CANARYfile9e3";
const ENV: &str = "CANARYenv2b4";
const RETRY: &str = "CANARYretry5d5";
const PATH: &str = "CANARYpath6f6";
const FINAL: &str = "CANARYfinal8a7";
const CANARIES: [&str; 7] = [PROMPT, SHELL, FILE, ENV, RETRY, PATH, FINAL];

/// What each sink received in one run, as text.
struct Sinks {
    events: String,
    log: String,
    json: String,
    otlp: String,
    sentry: String,
}

impl Sinks {
    fn all(&self) -> [(&'static str, &str); 5] {
        [
            ("events", &self.events),
            ("log", &self.log),
            ("json", &self.json),
            ("otlp", &self.otlp),
            ("sentry", &self.sentry),
        ]
    }
}

/// The workspace: a file of secrets (env dump and line-start placements) and a faux script whose
/// provider errors carry JSON-escaped secrets, whose bash command prints a file and the
/// environment and fails, and whose read calls hit that file and a missing path.
fn canary_workspace(d: &Path, samples: &[SecretSample]) -> PathBuf {
    let mut file = format!("NOTE={FILE}\n");
    for sample in samples {
        file.push_str(&format!("{}\n{}\n", sample.env_line, sample.text));
    }
    std::fs::write(d.join("secrets.env"), file).unwrap();
    let escaped: String = samples.iter().map(|s| placements(s)[2].1.clone()).collect::<Vec<_>>().join(" ");
    let script = d.join("script.json");
    write_json(
        &script,
        &serde_json::json!([
            {"error": {"status": 503, "message": format!("{RETRY} upstream busy {escaped}"), "retryAfterSecs": 0}},
            {"text": "Looking.", "tools": [
                {"name": "bash", "arguments": {"command": format!("printf '{SHELL}\\n'; cat secrets.env; env | grep -E '^(CANARY_ENV|DB_PASSWORD)='; exit 3")}},
                {"name": "read", "arguments": {"path": "secrets.env"}},
                {"name": "read", "arguments": {"path": format!("missing-{PATH}/x.txt")}}
            ]},
            {"error": {"status": 400, "message": format!("{FINAL} bad request {escaped}")}}
        ]),
    );
    script
}

fn run_with_every_sink(d: &Path, script: &Path, prompt: &str, capture: &[&str]) -> Sinks {
    let receiver = Receiver::start(vec![]);
    let sentry = EnvelopeEndpoint::start();
    let (events, log) = (d.join("events.jsonl"), d.join("log.jsonl"));
    let _ = std::fs::remove_file(&events);
    let _ = std::fs::remove_file(&log);
    let mut cmd = pi();
    cmd.args(["-p", prompt, "--provider", "faux", "--no-session", "--user", "alice", "--mode", "json"])
        .arg("--cwd")
        .arg(d)
        .arg("--faux-script")
        .arg(script)
        .arg("--events-jsonl")
        .arg(&events)
        .arg("--log-json")
        .arg(&log)
        .args(["--otlp", &receiver.endpoint, "--otlp-logs", "--sentry", &sentry.dsn()])
        .env("CANARY_ENV", ENV)
        .env("DB_PASSWORD", "hunter2CanaryEnvDb");
    for value in capture {
        cmd.args(["--capture", value]);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = text(&out);
    // The final provider error ends the prompt: exit 1, after every sink was flushed.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // `--mode json` prints agent events (the program's output) and contract events (the sink).
    let json = stdout.lines().filter(|l| l.contains("\"traceId\"")).collect::<Vec<_>>().join("\n");
    let otlp = format!(
        "{:?}\n{:?}\n{:?}",
        receiver.requests().iter().map(|r| &r.request).collect::<Vec<_>>(),
        receiver.metrics.lock().unwrap(),
        receiver.logs.lock().unwrap()
    );
    let sentry_bodies = sentry.requests().iter().map(|(_, body)| String::from_utf8_lossy(body).into_owned()).collect();
    Sinks {
        events: std::fs::read_to_string(&events).unwrap(),
        log: std::fs::read_to_string(&log).unwrap(),
        json,
        otlp,
        sentry: sentry_bodies,
    }
}

fn assert_no_secret(run: &str, sinks: &Sinks, samples: &[SecretSample]) {
    for (sink, dump) in sinks.all() {
        assert!(!dump.is_empty(), "{run}: sink {sink} received nothing");
        for sample in samples {
            assert!(!dump.contains(&sample.secret), "{run}: {} secret reached {sink}", sample.format);
        }
        assert!(!dump.contains("hunter2CanaryEnvDb"), "{run}: DB_PASSWORD from the environment reached {sink}");
    }
}

/// No known secret in any sink, and every canary in a sink exactly when `expected(sink)`.
fn assert_canaries(run: &str, sinks: &Sinks, samples: &[SecretSample], expected: impl Fn(&str) -> bool) {
    assert_no_secret(run, sinks, samples);
    for (sink, dump) in sinks.all() {
        for canary in CANARIES {
            assert_eq!(dump.contains(canary), expected(sink), "{run}: {canary} in {sink}");
        }
    }
}

/// A canary workspace and the prompt that carries a canary and every secret mid-line.
fn canary_setup(name: &str) -> (PathBuf, PathBuf, String, Vec<SecretSample>) {
    let d = scratch(name);
    let samples = secret_samples();
    let script = canary_workspace(&d, &samples);
    let mid_line: Vec<String> = samples.iter().map(|s| placements(s)[0].1.clone()).collect();
    let prompt = format!("{PROMPT} please look at secrets.env. {}", mid_line.join(" "));
    (d, script, prompt, samples)
}

#[test]
fn by_default_no_content_and_no_error_text_reaches_any_sink() {
    let (d, script, prompt, samples) = canary_setup("canary-default");
    let sinks = run_with_every_sink(&d, &script, &prompt, &[]);
    assert_canaries("default", &sinks, &samples, |_| false);
    for (sink, dump) in sinks.all() {
        assert!(!dump.contains(&d.display().to_string()), "default: a path under the workspace reached {sink}");
    }
    // The error types and numbers still arrive.
    assert!(sinks.events.contains(r#""errorType":"HttpStatus""#), "{}", sinks.events);
    assert!(sinks.events.contains(r#""error":{"name":"ToolError"}"#), "{}", sinks.events);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_bare_capture_reaches_only_local_sinks_and_known_secrets_reach_none() {
    let (d, script, prompt, samples) = canary_setup("canary-local");
    let sinks = run_with_every_sink(&d, &script, &prompt, &["all"]);
    assert_canaries("--capture all", &sinks, &samples, |sink| matches!(sink, "events" | "log" | "json"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn named_remote_sinks_get_content_but_never_a_known_secret() {
    let (d, script, prompt, samples) = canary_setup("canary-remote");
    let sinks = run_with_every_sink(&d, &script, &prompt, &["all=all"]);
    assert_canaries("--capture all=all", &sinks, &samples, |_| true);
    // One kind for one sink: shell output to OTLP only.
    let sinks = run_with_every_sink(&d, &script, &prompt, &["otlp=shell_output"]);
    assert!(sinks.otlp.contains(SHELL), "otlp=shell_output: shell output missing from OTLP");
    for other in [PROMPT, RETRY, PATH, FINAL] {
        assert!(!sinks.otlp.contains(other), "otlp=shell_output: {other} (not shell output) reached OTLP");
    }
    for (sink, dump) in sinks.all().into_iter().filter(|(sink, _)| *sink != "otlp") {
        assert!(!dump.contains(SHELL), "otlp=shell_output: shell output reached {sink}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn narrow_capture_kinds_capture_bash_output_and_read_results_on_their_own() {
    let (d, script, prompt, _) = canary_setup("canary-kinds");
    for (kind, key, present, absent) in [
        ("shell_output", "\"shellOutput\"", SHELL, FILE),
        ("file_contents", "\"fileContent\"", FILE, SHELL),
        ("error_text", "\"errorText\"", RETRY, PROMPT),
    ] {
        let sinks = run_with_every_sink(&d, &script, &prompt, &[kind]);
        assert!(sinks.events.contains(key), "--capture {kind}: no {key} field");
        assert!(sinks.events.contains(present), "--capture {kind}: {present} missing");
        assert!(!sinks.events.contains("\"toolResult\""), "--capture {kind} also captured tool_result");
        if kind != "error_text" {
            // Error text (the failing bash command's first line) is a kind of its own.
            assert!(!sinks.events.contains(RETRY), "--capture {kind} also captured error text");
        }
        assert!(!sinks.events.contains(absent) || kind == "shell_output", "--capture {kind}: {absent} leaked");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

// ---- Bad input -------------------------------------------------------------------------------

struct Case {
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    culprit: &'static str,
}

fn case(args: &[&str], culprit: &'static str) -> Case {
    Case { args: args.iter().map(OsString::from).collect(), env: vec![], culprit }
}

fn env_case(args: &[&str], var: &'static str, value: impl Into<OsString>, culprit: &'static str) -> Case {
    Case { args: args.iter().map(OsString::from).collect(), env: vec![(var, value.into())], culprit }
}

#[test]
fn bad_input_gets_one_line_naming_the_culprit_a_nonzero_exit_and_touches_nothing() {
    let d = scratch("bad");
    // An existing session every `-p` case points at: it must stay byte-identical.
    let session = d.join("session.jsonl");
    let out = pi().args(["-p", "hello", "--tools", "none", "--user", "alice"]).arg("--session").arg(&session).output();
    assert!(out.unwrap().status.success());
    let before = std::fs::read(&session).unwrap();
    let corrupt = d.join("corrupt.jsonl");
    let corrupt_text =
        "{\"type\":\"session\",\"version\":3,\"id\":\"x\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n{oops\n{\"also\":1}\n";
    std::fs::write(&corrupt, corrupt_text).unwrap();
    let bad_script = d.join("bad-script.json");
    std::fs::write(&bad_script, "[{\"txt\": 1}]").unwrap();
    let fifo = d.join("fifo.jsonl");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::write(d.join("a-file"), "not a directory").unwrap();
    let s = session.to_str().unwrap().to_owned();
    fn with_otlp<'a>(rest: &[&'a str]) -> Vec<&'a str> {
        [&["-p", "x", "--otlp", "http://127.0.0.1:9"][..], rest].concat()
    }
    let long = "u".repeat(300);
    let huge = "u".repeat(100_000);
    let wide = r"\w{150}";
    let wider = r"[a-z]\w{150}";

    let cases = vec![
        case(&["--frobnicate"], "--frobnicate"),
        case(&[], "--mode rpc"),
        case(&["--mode", "rpc", "-p", "x"], "--mode rpc"),
        case(&["--mode", "json"], "--mode json"),
        case(&["-p", ""], "-p"),
        case(&["-p", "   "], "-p"),
        case(&["-p", "x", "--mode", "yaml"], "--mode"),
        case(&["-p", "x", "--capture", "prompts,bogus"], "--capture"),
        case(&["-p", "x", "--capture", "bogus=prompt"], "--capture"),
        case(&["-p", "x", "--capture", "otlp="], "--capture"),
        case(&["-p", "x", "--capture", ","], "--capture"),
        case(&["-p", "x", "--capture", ""], "--capture"),
        case(&["-p", "x", "--context", "novalue"], "--context"),
        case(&["-p", "x", "--context", "=v"], "--context"),
        case(&["-p", "x", "--context", &format!("team={long}")], "--context"),
        case(&["-p", "x", "--context", "team=a\u{7}b"], "--context"),
        case(&["-p", "x", "--context", &format!("{long}=v")], "--context"),
        case(&["-p", "x", "--user", &huge], "--user"),
        case(&["-p", "x", "--user", "alice\nbob"], "--user"),
        case(&["-p", "x", "--org", "acme\u{1b}[31m"], "--org"),
        env_case(&["-p", "x"], "PI_USER_ID", long.clone(), "PI_USER_ID"),
        env_case(&["-p", "x"], "PI_ORG_ID", OsString::from_vec(b"acme\xff".to_vec()), "PI_ORG_ID"),
        env_case(&["-p", "x"], "PI_ORG_ID", "acme\rx", "PI_ORG_ID"),
        case(&["-p", "x", "--base-url", "ftp://h"], "--base-url"),
        case(&["-p", "x", "--base-url", "http://"], "--base-url"),
        case(&["-p", "x", "--base-url", "http://[::1"], "--base-url"),
        case(&["-p", "x", "--base-url", "http://h:99999/v1"], "--base-url"),
        case(&["-p", "x", "--tools", "read,teleport"], "--tools"),
        case(&["-p", "x", "--tools", ",,,"], "--tools"),
        case(&["-p", "x", "--tools", ""], "--tools"),
        case(&["-p", "x", "--redact", "("], "--redact"),
        case(&["-p", "x", "--redact", ""], "--redact"),
        case(&["-p", "x", "--redact", "a*"], "--redact"),
        case(&["-p", "x", "--redact", "^"], "--redact"),
        case(&["-p", "x", "--redact", wide, "--redact", wider], "--redact"),
        case(&["-p", "x", "--session", corrupt.to_str().unwrap()], "corrupt.jsonl:2"),
        case(&["-p", "x", "--session", "/dev/zero"], "--session"),
        case(&["-p", "x", "--session", fifo.to_str().unwrap()], "--session"),
        case(&["-p", "x", "--session", d.to_str().unwrap()], "--session"),
        case(&["-p", "x", "--session", &s, "--no-session"], "--session"),
        env_case(&["-p", "x", "--no-session"], "PI_FAUX_SCRIPT", bad_script.clone(), "--faux-script"),
        case(&["-p", "x", "--faux-script", "missing.json"], "--faux-script"),
        case(&["-p", "x", "--provider", "nonesuch"], "--provider"),
        case(&["-p", "x", "--model", "no-such-model"], "--model"),
        case(&["-p", "x", "--models-file", "missing.json"], "--models-file"),
        case(&["-p", "x", "--cwd", "missing-dir"], "--cwd"),
        case(&["-p", "x", "--skills", "missing-dir"], "--skills"),
        case(&["-p", "x", "--skills", "a-file"], "--skills"),
        case(&["-p", "x", "--prompt-templates", "missing-dir"], "--prompt-templates"),
        case(&["-p", "x", "--otlp", "http://"], "--otlp"),
        case(&["-p", "x", "--otlp", "http://[::1"], "--otlp"),
        case(&["-p", "x", "--otlp", "http://127.0.0.1:99999"], "--otlp"),
        case(&["-p", "x", "--otlp", "ftp://collector"], "--otlp"),
        case(&with_otlp(&["--otlp-header", "bad name=v"]), "--otlp-header"),
        case(&with_otlp(&["--otlp-header", "k=line\nbreak"]), "--otlp-header"),
        case(&with_otlp(&["--otlp-protocol", "carrier-pigeon"]), "--otlp-protocol"),
        case(&with_otlp(&["--conventions", "fancy"]), "--conventions"),
        case(&with_otlp(&["--service-name", ""]), "--service-name"),
        case(&with_otlp(&["--metric-dims", ",,,"]), "--metric-dims"),
        case(&with_otlp(&["--metric-dims", "org id"]), "--metric-dims"),
        case(&with_otlp(&["--metric-dims", "none,orgId"]), "--metric-dims"),
        case(&["-p", "x", "--metric-dims", "orgId"], "--metric-dims"),
        case(&["-p", "x", "--otlp-logs"], "--otlp-logs"),
        case(&["-p", "x", "--service-name", "pi"], "--service-name"),
        env_case(&with_otlp(&[]), "OTEL_EXPORTER_OTLP_HEADERS", "k=%zz", "OTEL_EXPORTER_OTLP_HEADERS"),
        env_case(&with_otlp(&[]), "OTEL_EXPORTER_OTLP_HEADERS", "k=50%", "OTEL_EXPORTER_OTLP_HEADERS"),
        env_case(&with_otlp(&[]), "OTEL_EXPORTER_OTLP_HEADERS", "bad name=v", "OTEL_EXPORTER_OTLP_HEADERS"),
        env_case(&with_otlp(&[]), "OTEL_EXPORTER_OTLP_HEADERS", "k=a%0Ab", "OTEL_EXPORTER_OTLP_HEADERS"),
        env_case(&with_otlp(&[]), "OTEL_EXPORTER_OTLP_TIMEOUT", "soon", "OTEL_EXPORTER_OTLP_TIMEOUT"),
        env_case(&["-p", "x"], "OTEL_EXPORTER_OTLP_ENDPOINT", "http://", "OTEL_EXPORTER_OTLP_ENDPOINT"),
        env_case(&["-p", "x"], "PI_TRACE_URL_TEMPLATE", "http://jaeger/trace/", "PI_TRACE_URL_TEMPLATE"),
        env_case(&["-p", "x"], "SENTRY_DSN", "not a dsn", "SENTRY_DSN"),
        case(&["-p", "x", "--sentry", "not a dsn"], "--sentry"),
        case(&["-p", "x", "--events-jsonl", &s, "--session", &s], "--events-jsonl"),
        case(&["-p", "x", "--log-json", &s, "--session", &s], "--log-json"),
        case(&["-p", "x", "--events-jsonl", "out.jsonl", "--log-json", "out.jsonl"], "--log-json"),
        case(&["-p", "x", "--events-jsonl", corrupt.to_str().unwrap()], "--events-jsonl"),
        case(&["report", "--by", ","], "--by"),
        case(&["report", "--by", "day,fort night"], "--by"),
        case(&["report", "--format", "xml"], "--format"),
        case(&["report", "missing-dir"], "missing-dir"),
        case(&["report", "/dev/zero"], "/dev/zero"),
        case(&["export", &s], "nothing to export to"),
        case(&["export", &s, "--events-jsonl", &s], "--events-jsonl"),
        case(&["demo", "--capture", "bogus"], "--capture"),
    ];
    assert!(cases.len() >= 60, "{} cases", cases.len());
    for Case { args, env, culprit } in cases {
        let mut cmd = pi();
        cmd.args(&args).current_dir(&d).env("RUST_BACKTRACE", "1");
        let session_given = args.iter().any(|a| a == "--session" || a == "--no-session");
        if args.first().is_some_and(|a| a == "-p") && !session_given {
            cmd.arg("--session").arg(&session);
        }
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let (stdout, stderr) = text(&out);
        let shown = format!("{args:?} {env:?}");
        assert!(!stderr.contains("panicked"), "{shown}: panic: {stderr}");
        assert!(matches!(out.status.code(), Some(1..=2)), "{shown}: exit {:?}: {stderr}", out.status.code());
        assert_eq!(stderr.trim_end().lines().count(), 1, "{shown}: not one line: {stderr}");
        assert!(stderr.contains(culprit), "{shown}: {stderr:?} does not name {culprit}");
        assert!(stdout.is_empty(), "{shown}: work started: {stdout}");
        assert_eq!(std::fs::read(&session).unwrap(), before, "{shown}: the session changed");
    }
    assert_eq!(std::fs::read_to_string(&corrupt).unwrap(), corrupt_text, "a bad session file is left untouched");
    assert!(!d.join("out.jsonl").exists(), "no output file was created for a refused run");
    std::fs::remove_dir_all(&d).unwrap();
}

// ---- Signals ---------------------------------------------------------------------------------

fn signal(child: &Child, name: &str) {
    assert!(Command::new("kill").args([&format!("-{name}"), &child.id().to_string()]).status().unwrap().success());
}

/// Polls (no fixed sleeps) until `done` holds, for at most 20 s.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alive(pid: &str) -> bool {
    // A zombie has exited already; only a running or sleeping process is an orphan.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
}

/// Starts `pi -p` running a bash tool whose background and foreground children record their
/// pids, and waits until both run.
fn start_tool_run(d: &Path, extra: &[&str]) -> (Child, Vec<String>) {
    let script = d.join("script.json");
    write_json(
        &script,
        &serde_json::json!([
            {"tools": [{"name": "bash", "arguments": {"command": "sleep 311 & echo $! > pids; sleep 312 & echo $! >> pids; wait"}}]},
            {"text": "never reached"}
        ]),
    );
    let _ = std::fs::remove_file(d.join("pids"));
    let child = pi()
        .args(["-p", "run the slow command", "--provider", "faux"])
        .arg("--cwd")
        .arg(d)
        .arg("--faux-script")
        .arg(&script)
        .arg("--session")
        .arg(d.join("session.jsonl"))
        .arg("--events-jsonl")
        .arg(d.join("events.jsonl"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pids = d.join("pids");
    wait_for("both children", || std::fs::read_to_string(&pids).is_ok_and(|p| p.lines().count() == 2));
    let pids = std::fs::read_to_string(&pids).unwrap().lines().map(str::to_owned).collect();
    (child, pids)
}

fn assert_flushed_and_whole(d: &Path) {
    assert_whole_lines(&d.join("session.jsonl"));
    assert_whole_lines(&d.join("events.jsonl"));
    let events: Vec<ObsEvent> = std::fs::read_to_string(d.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| ObsEvent::from_json(l).unwrap())
        .collect();
    // Every operation was closed and written: the records were flushed, not lost in a buffer.
    pi_observe::core::testing::assert_paired(&events);
    let root = events.iter().find(|e| e.name == "pi.agent.prompt" && e.kind != EventKind::Start);
    assert!(root.is_some(), "the prompt's end record was flushed");
}

#[test]
fn sigint_sigterm_and_sighup_during_a_tool_abort_kill_the_process_group_and_flush() {
    for (name, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let d = scratch(&format!("signal-{name}"));
        let (child, pids) = start_tool_run(&d, &[]);
        signal(&child, name);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + number), "SIG{name}: {stderr}");
        assert!(stderr.contains(&format!("aborted by SIG{name}")), "{stderr}");
        for pid in &pids {
            wait_for(&format!("child {pid} to be gone after SIG{name}"), || !alive(pid));
        }
        assert_flushed_and_whole(&d);
        // The aborted tool call is in the session as an error result.
        let session = std::fs::read_to_string(d.join("session.jsonl")).unwrap();
        assert!(session.lines().last().unwrap().contains("\"toolResult\""), "{session}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn a_second_signal_exits_at_once_with_whole_lines_on_disk() {
    let d = scratch("signal-twice");
    // A collector that never answers would hold the flush for its whole deadline.
    let stalled = Receiver::start(vec![pi_observe::otel::testing::Answer::Stall; 10]);
    let (child, pids) = start_tool_run(&d, &["--otlp", &stalled.endpoint]);
    signal(&child, "TERM");
    let session = d.join("session.jsonl");
    wait_for("the aborted tool result", || {
        std::fs::read_to_string(&session).is_ok_and(|s| s.lines().last().is_some_and(|l| l.contains("toolResult")))
    });
    signal(&child, "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    for pid in &pids {
        wait_for("children to be gone", || !alive(pid));
    }
    assert_whole_lines(&session);
    assert_whole_lines(&d.join("events.jsonl"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// An OpenAI-compatible server that sends one chunk of a streamed answer, tells the test, and
/// then never sends more.
fn stalling_stream_server() -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let (streaming, started) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let chunk = r#"data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#;
        write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{chunk}\n\n").unwrap();
        stream.flush().unwrap();
        streaming.send(()).unwrap();
        // Hold the connection open until the client goes away.
        let _ = reader.read_to_end(&mut Vec::new());
    });
    (base, started)
}

#[test]
fn a_signal_during_streaming_aborts_the_request_and_flushes() {
    for (name, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let d = scratch(&format!("stream-{name}"));
        let (base, streaming) = stalling_stream_server();
        let child = pi()
            .args(["-p", "say hello", "--model", "local", "--tools", "none", "--base-url", &base])
            .arg("--session")
            .arg(d.join("session.jsonl"))
            .arg("--events-jsonl")
            .arg(d.join("events.jsonl"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        streaming.recv_timeout(Duration::from_secs(20)).unwrap();
        signal(&child, name);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(128 + number), "{}", String::from_utf8_lossy(&out.stderr));
        assert_flushed_and_whole(&d);
        let session = std::fs::read_to_string(d.join("session.jsonl")).unwrap();
        assert!(session.lines().last().unwrap().contains(r#""stopReason":"aborted""#), "{session}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

// ---- Regressions -----------------------------------------------------------------------------

/// A session made by `pi -p` for `alice`, with `alice` then replaced by `user_id` (JSON-escaped).
fn session_for(d: &Path, name: &str, user_id: &str) -> PathBuf {
    let path = d.join(name);
    let out = pi().args(["-p", "hello", "--tools", "none", "--user", "alice"]).arg("--session").arg(&path).output();
    assert!(out.unwrap().status.success());
    let escaped = serde_json::to_string(user_id).unwrap();
    let text = std::fs::read_to_string(&path).unwrap().replace("\"alice\"", &escaped);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn report_never_panics_on_huge_or_multi_line_ids_and_keeps_rows_whole() {
    let d = scratch("report-ids");
    session_for(&d, "huge.jsonl", &"x".repeat(70_000));
    session_for(&d, "newline.jsonl", "eve\nmallory,\"quoted\"\r");
    for format in ["table", "csv", "json"] {
        let out = pi().args(["report", "--by", "user", "--format", format]).arg(&d).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{format}: {stderr}");
        match format {
            // Header, two users, total: four lines, each cell clamped and escaped.
            "table" => {
                assert_eq!(stdout.lines().count(), 4, "{stdout}");
                assert!(stdout.lines().all(|l| l.chars().count() < 200), "{stdout}");
                assert!(stdout.contains(r"eve\nmallory"), "{stdout}");
            }
            "csv" => {
                let mut reader = csv::Reader::from_reader(stdout.as_bytes());
                let users: Vec<String> = reader.records().map(|r| r.unwrap()[0].to_owned()).collect();
                assert_eq!(users.len(), 2, "{stdout}");
                assert!(users.contains(&"eve\nmallory,\"quoted\"\r".to_owned()), "{users:?}");
                assert!(users.contains(&"x".repeat(70_000)));
            }
            _ => {
                let rows: Vec<serde_json::Value> = serde_json::from_str(&stdout).unwrap();
                assert_eq!(rows.len(), 2);
            }
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_torn_last_line_is_named_by_report_and_export_and_moved_aside_on_resume() {
    let d = scratch("torn");
    let session = session_for(&d, "s.jsonl", "alice");
    let lines = std::fs::read_to_string(&session).unwrap().lines().count();
    let torn = r#"{"id":"deadbeef","parentId":"x","type":"mess"#;
    std::fs::OpenOptions::new().append(true).open(&session).unwrap().write_all(torn.as_bytes()).unwrap();
    let expected = format!("{}:{}: torn last line skipped", session.display(), lines + 1);

    let out = pi().arg("report").arg(&session).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out).1.contains(&expected), "{}", text(&out).1);
    let out = pi().arg("export").arg(&session).arg("--events-jsonl").arg(d.join("replay.jsonl")).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out).1.contains(&expected), "{}", text(&out).1);
    assert!(std::fs::read_to_string(&session).unwrap().ends_with(torn), "report and export only read");

    // Resuming: the partial line goes to a side file named on stderr, then the session continues.
    let out = pi().args(["-p", "again", "--tools", "none"]).arg("--session").arg(&session).output().unwrap();
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    let moved = stderr.lines().find(|l| l.contains("torn last line moved to ")).unwrap_or_else(|| panic!("{stderr}"));
    let side = moved.rsplit("moved to ").next().unwrap();
    assert_eq!(std::fs::read_to_string(side).unwrap(), torn, "the torn bytes are kept");
    assert!(assert_whole_lines(&session) > lines);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_dead_collector_and_a_closed_sentry_port_cost_no_wait_and_are_reported() {
    let d = scratch("dead");
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let started = Instant::now();
    let out = pi()
        .args(["-p", "hi", "--no-session", "--tools", "none"])
        .args(["--otlp", &Receiver::down_endpoint(), "--sentry", &format!("http://k@127.0.0.1:{closed}/1")])
        .arg("--events-jsonl")
        .arg(d.join("events.jsonl"))
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stderr = text(&out).1;
    assert!(out.status.success(), "{stderr}");
    let starts = std::fs::read_to_string(d.join("events.jsonl")).unwrap().matches(r#""type":"start""#).count();
    let spooled = format!("pi: otlp: 0 spans delivered, {starts} spooled for the next run, 0 not delivered");
    assert!(stderr.contains(&spooled), "{stderr}");
    let spooled =
        "pi: sentry: 1 transactions, 0 error events: 0 delivered, 1 spooled for the next run, 0 not delivered";
    assert!(stderr.contains(spooled), "{stderr}");
    assert_eq!(stderr.matches("Connection refused").count(), 2, "{stderr}");
    // Not a speed goal but the behaviour: a refused connection is final at exit, so no retry
    // backoff and no 5 s flush deadline is spent on it (measured: ~0.1 s).
    assert!(elapsed < Duration::from_secs(3), "exit took {elapsed:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_events_file_that_cannot_be_written_is_reported_and_changes_nothing_else() {
    let out =
        pi().args(["-p", "hi", "--no-session", "--tools", "none", "--events-jsonl", "/dev/full"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "telemetry never changes the outcome: {stderr}");
    assert!(stdout.contains("(faux)"), "{stdout}");
    let line = stderr.lines().find(|l| l.starts_with("pi: events-jsonl: ")).unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.starts_with("pi: events-jsonl: 0 records written, ") && line.contains("not written (/dev/full: disk full")
    );
}
