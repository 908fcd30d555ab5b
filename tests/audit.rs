//! The outside audit's second round (issue 24): each test is named after the item it covers and
//! runs `pi` the way a user would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // test helpers

mod support;

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

#[test]
fn item_15_metrics_and_logs_carry_the_schema_url_on_resource_and_scope() {
    let d = scratch("audit-schema");
    let receiver = Receiver::start(vec![]);
    let out = pi()
        .args(["-p", "check", "--provider", "faux", "--no-session", "--otlp-logs", "--otlp", &receiver.endpoint])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(faux_script(&d))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let schema = pi_observe::otel::names::SCHEMA_URL;
    let metrics = receiver.metrics.lock().unwrap().clone();
    assert!(!metrics.is_empty(), "no metrics request");
    for request in &metrics {
        for resource in &request.resource_metrics {
            assert_eq!(resource.schema_url, schema);
            assert!(resource.scope_metrics.iter().all(|s| s.schema_url == schema));
        }
    }
    let logs = receiver.logs.lock().unwrap().clone();
    assert!(!logs.is_empty(), "no logs request");
    for request in &logs {
        for resource in &request.resource_logs {
            assert_eq!(resource.schema_url, schema);
            assert!(resource.scope_logs.iter().all(|s| s.schema_url == schema));
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// An upstream-shaped `models.json` of `providers` providers with `per` models each.
fn big_models_json(providers: usize, per: usize) -> String {
    let mut out = String::from("{\"providers\": {");
    for p in 0..providers {
        if p > 0 {
            out.push(',');
        }
        out.push_str(&format!(
            "\"prov{p}\": {{\"baseUrl\": \"http://127.0.0.1:9/v1\", \"api\": \"openai-completions\", \"models\": ["
        ));
        for m in 0..per {
            if m > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"id\": \"model-{p}-{m}\", \"name\": \"Model {p}/{m} with a longer display name\", \"contextWindow\": 128000, \"maxTokens\": 8192, \"cost\": {{\"input\": 1.5, \"output\": 6, \"cacheRead\": 0.1, \"cacheWrite\": 2}}}}"
            ));
        }
        out.push_str("]}");
    }
    out.push_str("}}");
    out
}

#[test]
fn item_13_a_20_mb_models_json_loads_in_linear_time() {
    // 20,000 providers of 1 model and 1 provider of 100,000 models (each file ≈ 20 MB): the old
    // registry scanned every model per model added (minutes); a hang guard, not a timing assert.
    for (providers, per) in [(100_000, 1), (1, 100_000)] {
        let d = scratch("audit-models");
        let agent = d.join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        let json = big_models_json(providers, per);
        assert!(json.len() > 15_000_000, "{} bytes", json.len());
        std::fs::write(agent.join("models.json"), json).unwrap();
        let mut child = pi()
            .env("PI_CODING_AGENT_DIR", &agent)
            .args(["-p", "hi", "--provider", "faux", "--no-session"])
            .arg("--cwd")
            .arg(&d)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("pi did not finish loading a 20 MB models.json ({providers} providers × {per})");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(status.success(), "{providers}×{per}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn item_14_upstream_usage_without_total_tokens_is_counted_and_unreadable_usage_is_named() {
    let d = scratch("audit-usage");
    let header = r#"{"type":"session","version":3,"id":"0a1b2c3d-1111-2222-3333-444455556666","timestamp":"2025-10-01T10:00:00.000Z","cwd":"/tmp"}"#;
    let user = r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2025-10-01T10:00:01.000Z","message":{"role":"user","content":"Hello","timestamp":1}}"#;
    // Older upstream files: usage without `totalTokens`.
    let old = r#"{"type":"message","id":"b1b2c3d4","parentId":"a1b2c3d4","timestamp":"2025-10-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1000,"output":200,"cacheRead":50,"cacheWrite":0,"cost":{"input":0.003,"output":0.003,"cacheRead":0.000015,"cacheWrite":0,"total":0.006015}},"stopReason":"stop","timestamp":2}}"#;
    let file = d.join("old.jsonl");
    std::fs::write(&file, format!("{header}\n{user}\n{old}\n")).unwrap();
    let out = pi().args(["report", "--format", "json"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["totalTokens"], 1250, "{rows}");
    assert!((rows[0]["costUsd"].as_f64().unwrap() - 0.006015).abs() < 1e-9, "{rows}");

    // Usage pi cannot read: named with a count, the report exits 1 unless --allow-partial.
    let strange = r#"{"type":"message","id":"c1b2c3d4","parentId":"b1b2c3d4","timestamp":"2025-10-01T10:00:03.000Z","message":{"role":"assistant","content":[],"provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":"many"},"stopReason":"stop","timestamp":3}}"#;
    let partial = d.join("partial.jsonl");
    std::fs::write(&partial, format!("{header}\n{user}\n{old}\n{strange}\n")).unwrap();
    let out = pi().args(["report"]).arg(&partial).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("partial.jsonl: 1 entries with usage"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1250"), "the readable entries are still reported");
    let out = pi().args(["report", "--allow-partial"]).arg(&partial).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_dir_all(&d).unwrap();
}

#[cfg(unix)]
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn item_6_session_files_event_files_logs_and_extension_logs_are_private_whatever_the_umask() {
    let d = scratch("audit-private");
    let agent = d.join("agent");
    let extension = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extensions/gate.sh");
    // `umask 0` first: every file the run creates would be world-readable if pi relied on it.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 0; exec \"$0\" \"$@\"")
        .arg(pi().get_program())
        .envs(pi().get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env("PI_CODING_AGENT_DIR", &agent)
        .args(["-p", "check", "--provider", "faux"])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(faux_script(&d))
        .arg("--session")
        .arg(d.join("new/sessions/s.jsonl"))
        .arg("--events-jsonl")
        .arg(d.join("new/events/e.jsonl"))
        .arg("--log-json")
        .arg(d.join("new/logs/log.jsonl"))
        .arg("-e")
        .arg(&extension)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for file in ["new/sessions/s.jsonl", "new/events/e.jsonl", "new/logs/log.jsonl", "agent/logs/extensions/gate.log"] {
        assert_eq!(mode(&d.join(file)), 0o600, "{file}");
    }
    for dir in ["new/sessions", "new/events", "new/logs", "agent/logs/extensions", "agent/logs"] {
        assert_eq!(mode(&d.join(dir)), 0o700, "{dir}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_5_more_secret_formats_in_neutral_context_never_reach_a_sink_even_captured() {
    let d = scratch("audit-formats");
    let events = d.join("events.jsonl");
    // The formats this round added, in the wording a user or a tool would use (no `token:`).
    let added = [
        "gcp_oauth_token",
        "slack_webhook",
        "discord_webhook",
        "azure_sas_signature",
        "key_value (Azure SharedAccessKey)",
        "mysql_password_flag",
        "url_credentials (psql)",
        "url_credentials (@ in the password)",
        "docker_login_password",
        "netrc_password",
        "netrc_password (own line)",
        "curl_user_password",
        "twilio_key",
        "sendgrid_key",
        "mailgun_key",
        "discord_bot_token",
        "databricks_token",
        "vault_token",
        "datadog_key",
        "private_key (ENCRYPTED)",
        "age_secret_key",
    ];
    let samples: Vec<_> =
        pi_observe::core::canary::secret_samples().into_iter().filter(|s| added.contains(&s.format)).collect();
    assert_eq!(samples.len(), added.len(), "a sample for every added format");
    let prompt: Vec<String> = samples.iter().map(|s| format!("look at {} please", s.text)).collect();
    let out = pi()
        .args(["-p", &prompt.join("\n"), "--provider", "faux", "--no-session", "--capture", "all"])
        .arg("--cwd")
        .arg(&d)
        .arg("--events-jsonl")
        .arg(&events)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(&events).unwrap();
    assert!(written.contains("look at"), "the prompt was captured");
    for sample in &samples {
        assert!(!written.contains(&sample.secret), "{} survived: {}", sample.format, sample.secret);
    }
    let privacy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/privacy.md")).unwrap();
    for name in pi_observe::core::Scrubber::builtin_rule_names() {
        assert!(privacy.contains(&format!("`{name}`")), "docs/privacy.md does not list {name}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A planted key in the shape the audit used.
const PLANTED_KEY: &str = "sk-ant-api03-PlantedHeaderIdXq9Zw8Yv7Ut6Sr5Qp4";

#[test]
fn item_1_a_session_id_read_from_a_file_is_checked_on_resume_and_on_export() {
    let d = scratch("audit-session-id");
    let file = d.join("planted.jsonl");
    let header = serde_json::json!({"type": "session", "version": 3, "id": PLANTED_KEY,
        "timestamp": "2026-12-01T10:00:00.000Z", "cwd": d.display().to_string()});
    let user = r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#;
    let reply = r#"{"type":"message","id":"b1b2c3d4","parentId":"a1b2c3d4","timestamp":"2026-12-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"api":"faux","provider":"faux","model":"faux-1","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":4,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#;
    std::fs::write(&file, format!("{header}\n{user}\n{reply}\n")).unwrap();

    // A live run resuming the file.
    let mut resume = pi();
    resume.args(["-p", "again", "--provider", "faux"]).arg("--cwd").arg(&d).arg("--session").arg(&file);
    let (code, dump, stderr) = with_every_sink(resume, &d, true);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dump.contains("PlantedHeaderId"), "the planted header id reached a sink on resume");
    assert!(dump.contains(r#""sessionId":"invalid""#), "the id reads invalid");

    // The export of the same file.
    let mut export = pi();
    export.arg("export").arg(&file);
    let (code, dump, stderr) = with_every_sink(export, &d, false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(dump.contains("pi.agent.prompt"), "the export replayed the session");
    assert!(!dump.contains("PlantedHeaderId"), "the planted header id reached a sink on export");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_2_export_classifies_replayed_names_as_the_live_run_does() {
    let d = scratch("audit-replayed-names");
    let file = d.join("names.jsonl");
    let header = r#"{"type":"session","version":3,"id":"0a1b2c3d-1111-2222-3333-444455556666","timestamp":"2026-12-01T10:00:00.000Z","cwd":"/tmp"}"#;
    let change = r#"{"type":"model_change","id":"m0000001","parentId":null,"timestamp":"2026-12-01T10:00:00.500Z","provider":"CanaryTypedProvider","modelId":"CanaryTypedModel"}"#;
    let user = r#"{"type":"message","id":"a1b2c3d4","parentId":"m0000001","timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#;
    let reply = r#"{"type":"message","id":"b1b2c3d4","parentId":"a1b2c3d4","timestamp":"2026-12-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"api":"CanaryApi name","provider":"CanaryReplyProvider","model":"CanaryResponse model!","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":4,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}"#;
    let known = r#"{"type":"message","id":"c1b2c3d4","parentId":"b1b2c3d4","timestamp":"2026-12-01T10:00:03.000Z","message":{"role":"assistant","content":[],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":4,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":3}}"#;
    std::fs::write(&file, format!("{header}\n{change}\n{user}\n{reply}\n{known}\n")).unwrap();
    let mut export = pi();
    export.arg("export").arg(&file);
    let (code, dump, stderr) = with_every_sink(export, &d, false);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dump.contains("Canary"), "a recorded name no catalogue knows reached a sink: {dump}");
    // Catalogued names still arrive as they are.
    assert!(dump.contains("claude-sonnet-4-5") && dump.contains("anthropic-messages"));
    // With prompts captured for the events file, the typed names are there as content.
    let out = pi()
        .args(["export", "--capture", "events=prompt", "--events-jsonl"])
        .arg(d.join("captured.jsonl"))
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let captured = std::fs::read_to_string(d.join("captured.jsonl")).unwrap();
    assert!(captured.contains(r#""requestedModel":"CanaryTypedModel""#), "{captured}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_3_user_typed_model_and_provider_names_read_invalid_unless_captured() {
    let d = scratch("audit-typed-names");
    let (base, server) = support::one_shot_openai_server();
    let mut run = pi();
    run.args(["-p", "hi", "--provider", "CanaryTypedProvider", "--model", "CanaryTypedModel", "--no-session"])
        .args(["--base-url", &base])
        .env("OPENAI_API_KEY", "sk-test-key-for-the-loopback-server")
        .arg("--cwd")
        .arg(&d);
    let (code, dump, stderr) = with_every_sink(run, &d, true);
    server.join().unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dump.contains("CanaryTyped"), "a typed name reached a sink");
    assert!(dump.contains(r#""model":"invalid""#) && dump.contains(r#""provider":"invalid""#));
    // A catalogued model keeps its name.
    let mut known = pi();
    known.args(["-p", "hi", "--provider", "faux", "--model", "faux-1", "--no-session"]).arg("--cwd").arg(&d);
    let (code, dump, stderr) = with_every_sink(known, &d, true);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(dump.contains(r#""model":"faux-1""#));
    std::fs::remove_dir_all(&d).unwrap();
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

#[test]
fn item_4_batches_spooled_under_a_wider_capture_are_not_delivered_under_a_later_policy() {
    let d = scratch("audit-spool-cap");
    let endpoint = Receiver::down_endpoint();
    let sentry_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let sentry_dsn = format!("http://k@127.0.0.1:{sentry_port}/1");
    let prompt = "CanarySpooledPrompt please check";
    // Spooled while OTLP and Sentry captured prompts, completions and tool results (both down).
    let out = pi_in(&d)
        .args(["-p", prompt, "--provider", "faux", "--no-session", "--otlp", &endpoint, "--sentry", &sentry_dsn])
        .args(["--capture", "remote=prompt,completion,tool_result"])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(faux_script(&d))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let with_content = spooled_batches(&d);
    assert!(with_content > 1, "OTLP and Sentry batches");
    // A run without capture spools too: its batches stay deliverable under the policy.
    let out = pi_in(&d)
        .args(["-p", "plain", "--provider", "faux", "--no-session", "--otlp", &endpoint, "--sentry", &sentry_dsn])
        .arg("--cwd")
        .arg(&d)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(spooled_batches(&d) > with_content);

    // Now a managed policy caps both remote sinks' capture to nothing.
    let policy = d.join("managed.json");
    std::fs::write(&policy, r#"{"telemetry": {"sinks": {"otlp": {"capture": []}, "sentry": {"capture": []}}}}"#)
        .unwrap();
    let receiver = Receiver::start_at(&endpoint, vec![]);
    let sentry = EnvelopeEndpoint::start_at(sentry_port);
    let out = pi_in(&d)
        .env("PI_MANAGED_SETTINGS", &policy)
        .args(["observe", "flush", "--otlp", &endpoint, "--sentry", &sentry_dsn])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    let removed: u64 =
        report.lines().filter_map(|l| count_before(&format!("pi: {l}"), "pi: ", "removed over the capture cap")).sum();
    assert_eq!(removed as usize, with_content, "{report}");
    let mut sent = format!("{:?}", receiver.requests().iter().map(|r| &r.request).collect::<Vec<_>>());
    for (_, body) in sentry.requests() {
        sent.push_str(&String::from_utf8_lossy(&body));
    }
    assert!(!sent.contains("CanarySpooledPrompt"), "a batch spooled with prompts was delivered under the cap");
    assert!(!receiver.spans().is_empty(), "the OTLP batches spooled without content are delivered");
    assert!(!sentry.requests().is_empty(), "the Sentry envelope spooled without content is delivered");
    assert_eq!(spooled_batches(&d), 0, "nothing is left: delivered or removed");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs `cmd` (stdin closed) and returns (exit code, stderr); panics if it is still running
/// after 30 s (a hang guard, not a timing assert).
fn finished(mut cmd: Command) -> (Option<i32>, String) {
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.code(), err);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("pi hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn print_run(d: &Path) -> Command {
    let mut cmd = pi_in(d);
    cmd.args(["-p", "hi", "--provider", "faux"]).arg("--cwd").arg(d);
    cmd
}

/// A regular file where a directory is expected.
fn a_file(d: &Path) -> std::path::PathBuf {
    let file = d.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    file
}

/// Runs `cmd`, which must be refused as a usage error (exit 2) with one stderr text naming
/// every one of `needles`; returns that stderr.
fn refused(cmd: Command, needles: &[&str]) -> String {
    let (code, err) = finished(cmd);
    assert_eq!(code, Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not named: {err}");
    }
    err
}

#[test]
fn item_12_a_fifo_as_the_managed_policy_is_refused_not_waited_on() {
    let d = scratch("audit-fifo-policy");
    let fifo = d.join("policy.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut cmd = print_run(&d);
    cmd.arg("--no-session").env("PI_MANAGED_SETTINGS", &fifo);
    refused(cmd, &["policy.fifo", "not a regular file"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_an_agent_dir_that_is_a_file_names_the_variable() {
    let d = scratch("audit-agent-file");
    let file = a_file(&d);
    let mut cmd = print_run(&d);
    cmd.env("PI_CODING_AGENT_DIR", &file);
    refused(cmd, &["PI_CODING_AGENT_DIR", "is not a directory"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_session_dir_setting_that_is_a_file_names_the_setting_and_its_file() {
    let d = scratch("audit-session-dir");
    let file = a_file(&d);
    std::fs::create_dir_all(d.join("agent")).unwrap();
    let settings = d.join("agent/settings.json");
    std::fs::write(&settings, serde_json::json!({"sessionDir": file}).to_string()).unwrap();
    let err = refused(print_run(&d), &["sessionDir", &settings.display().to_string()]);
    assert!(!err.contains("--session"), "the flag was not given: {err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_spool_dir_that_is_a_file_is_refused_up_front() {
    let d = scratch("audit-spool-file");
    let file = a_file(&d);
    let mut cmd = print_run(&d);
    cmd.args(["--no-session", "--otlp", &Receiver::down_endpoint()]).arg("--spool-dir").arg(&file);
    refused(cmd, &["--spool-dir", "is not a directory"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_the_sampler_ratio_is_checked_whether_or_not_otlp_is_on() {
    let d = scratch("audit-sampler");
    std::fs::create_dir_all(d.join("agent")).unwrap();
    std::fs::write(d.join("agent/settings.json"), r#"{"telemetry": {"sampler": {"arg": 5}}}"#).unwrap();
    for otlp in [false, true] {
        let mut cmd = print_run(&d);
        cmd.arg("--no-session");
        if otlp {
            cmd.args(["--otlp", &Receiver::down_endpoint()]);
        }
        let (code, err) = finished(cmd);
        assert_eq!(code, Some(2), "otlp {otlp}: {err}");
        assert!(err.contains("telemetry.sampler.arg") && err.contains("between 0 and 1"), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_faux_with_a_base_url_is_refused() {
    let d = scratch("audit-faux-base");
    let mut cmd = print_run(&d);
    cmd.args(["--no-session", "--base-url", "http://127.0.0.1:9/v1"]);
    refused(cmd, &["--base-url", "faux"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_partial_session_id_finds_its_file_or_says_it_matches_none() {
    let d = scratch("audit-partial-id");
    // A first run creates a session in the default folder.
    let (code, err) = finished(print_run(&d));
    assert_eq!(code, Some(0), "{err}");
    let sessions: Vec<_> = walk(&d.join("agent/sessions"));
    assert_eq!(sessions.len(), 1);
    let header: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&sessions[0]).unwrap().lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_owned();
    // The start of its id resumes it.
    let mut resume = print_run(&d);
    resume.args(["--session", &id[..8]]);
    let (code, err) = finished(resume);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(walk(&d.join("agent/sessions")).len(), 1, "no new session");
    assert!(std::fs::read_to_string(&sessions[0]).unwrap().lines().count() > 4, "appended to");
    // An id that matches nothing is an error, not a new file named after it.
    let mut missing = print_run(&d);
    missing.args(["--session", "ffffeeee"]);
    refused(missing, &["ffffeeee", "no session"]);
    assert!(!d.join("ffffeeee").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
    out
}

#[test]
fn item_12_rpc_lines_that_are_not_utf8_get_a_parse_error() {
    use std::io::Write;
    let d = scratch("audit-rpc-utf8");
    let mut child = pi_in(&d)
        .args(["--mode", "rpc", "--provider", "faux", "--no-session"])
        .arg("--cwd")
        .arg(&d)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"type\":\"get_state\",\"id\":\"a\xff\xfeb\"}\n{\"type\":\"get_state\",\"id\":\"ok\"}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["type"] == "response")
        .collect();
    let parse = lines.iter().find(|v| v["command"] == "parse").expect("a parse error response");
    assert_eq!(parse["success"], false);
    assert!(parse.get("id").is_none(), "no id read from mangled text: {parse}");
    assert!(parse["error"].as_str().unwrap().contains("not UTF-8"), "{parse}");
    assert!(lines.iter().any(|v| v["id"] == "ok" && v["success"] == true), "the next line still runs");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_an_extension_writing_to_stdout_keeps_the_protocol_intact() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: no node on PATH");
        return;
    }
    let d = scratch("audit-ext-stdout");
    let ext = d.join("noisy.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  process.stdout.write("NOISE not a protocol line\n");
  console.log("more noise");
  pi.on("tool_call", async () => { process.stdout.write("{\"type\":\"bogus\"}\n"); return undefined; });
}
"#,
    )
    .unwrap();
    let mut cmd = pi_in(&d);
    cmd.args(["-p", "check", "--provider", "faux", "--no-session"])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(faux_script(&d))
        .arg("-e")
        .arg(&ext)
        .arg("--events-jsonl")
        .arg(d.join("events.jsonl"));
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("noisy"), "the extension was reported as failing: {err}");
    // Its tool_call handler ran and let both tools through (a broken pipe would block them).
    let events = support::events(&d.join("events.jsonl"));
    let tool_call_hooks = events.iter().filter(|e| {
        e.name == "pi.agent.hook"
            && e.kind == pi_observe::core::EventKind::Start
            && e.payload.get("hookName").is_some_and(|h| h.to_string().contains("tool_call"))
    });
    assert_eq!(tool_call_hooks.count(), 2, "one tool_call hook per tool");
    assert!(!events.iter().any(|e| e.name == "pi.agent.hook" && e.kind == pi_observe::core::EventKind::Error));
    let blocked = events.iter().filter(|e| e.payload.get("blocked").is_some_and(|b| b.to_string() == "true"));
    assert_eq!(blocked.count(), 0);
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/noisy.log")).unwrap();
    assert!(log.contains("NOISE not a protocol line") && log.contains("more noise"), "{log}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// True while process `pid` runs (a zombie has finished).
fn alive(pid: &str) -> bool {
    support::running(pid)
}

/// Waits (polling) until `path` holds `n` whole lines; returns them.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= n && text.ends_with('\n') {
            return lines;
        }
        assert!(std::time::Instant::now() < deadline, "{} never got {n} lines", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn item_9_nothing_an_extension_the_js_host_or_an_attribution_command_started_outlives_pi() {
    let d = scratch("audit-orphans");
    let pids = d.join("pids.txt");
    // A process extension that leaves a background child running.
    let ext = d.join("spawner.sh");
    std::fs::write(
        &ext,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! >> {pids}\nwhile IFS= read -r line; do\n  case \"$line\" in\n    *'\"type\":\"hello\"'*) printf '%s\\n' '{{\"type\":\"register\",\"protocol\":1,\"name\":\"spawner\",\"events\":[\"tool_call\"]}}' ;;\n    *'\"type\":\"event\"'*) id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9][0-9]*\\)}}$/\\1/p'); printf '{{\"type\":\"result\",\"id\":%s,\"result\":null}}\\n' \"$id\" ;;\n  esac\ndone\n",
            pids = pids.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut extensions = vec![ext];
    // A JavaScript extension whose host starts a child of its own.
    let node = Command::new("node").arg("--version").output().is_ok();
    if node {
        let js = d.join("spawner.mjs");
        std::fs::write(
            &js,
            format!(
                "import {{ spawn }} from 'node:child_process';\nimport {{ appendFileSync }} from 'node:fs';\nexport default function (pi) {{\n  const c = spawn('sleep', ['300'], {{ stdio: 'ignore' }});\n  appendFileSync({:?}, c.pid + '\\n');\n}}\n",
                pids.display().to_string()
            ),
        )
        .unwrap();
        extensions.push(js);
    } else {
        eprintln!("node not on PATH: the JavaScript host part is skipped");
    }
    // An attribution command that leaves a background child and answers.
    std::fs::create_dir_all(d.join("agent")).unwrap();
    std::fs::write(
        d.join("agent/settings.json"),
        serde_json::json!({"telemetry": {"attribution": {
            "userIdCommand": format!("sleep 300 & echo $! >> {}; echo alice@acme", pids.display())
        }}})
        .to_string(),
    )
    .unwrap();
    let mut cmd = pi_in(&d);
    cmd.args(["-p", "check", "--provider", "faux", "--no-session"])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(faux_script(&d));
    for ext in &extensions {
        cmd.arg("-e").arg(ext);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started = wait_lines(&pids, extensions.len() + 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while started.iter().any(|p| alive(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let left: Vec<&String> = started.iter().filter(|p| alive(p)).collect();
    for pid in &left {
        let _ = Command::new("kill").args(["-9", pid]).status();
    }
    assert!(left.is_empty(), "processes outlived pi: {left:?} of {started:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_9_an_attribution_command_that_prints_too_much_is_named_as_such() {
    let d = scratch("audit-attr-cap");
    std::fs::create_dir_all(d.join("agent")).unwrap();
    std::fs::write(
        d.join("agent/settings.json"),
        r#"{"telemetry": {"attribution": {"userIdCommand": "yes alice@acme | head -c 100000"}}}"#,
    )
    .unwrap();
    let (code, err) = finished(print_run(&d));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("printed more than 4096 bytes"), "{err}");
    assert!(!err.contains("took longer"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi` (interactive) on the slave side of a fresh pseudo-terminal, its master non-blocking.
struct Pty {
    master: Option<std::fs::File>,
    child: std::process::Child,
    screen: Vec<u8>,
}

impl Pty {
    fn spawn(mut cmd: Command) -> Pty {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = std::fs::OpenOptions::new().read(true).write(true).open(name.to_str().unwrap()).unwrap();
        rustix::io::ioctl_fionbio(&master, true).unwrap();
        let child = cmd
            .env("TERM", "xterm-256color")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .unwrap();
        Pty { master: Some(std::fs::File::from(master)), child, screen: Vec::new() }
    }

    /// Reads what pi wrote so far.
    fn pump(&mut self) {
        use std::io::Read;
        let Some(master) = &mut self.master else { return };
        let mut buf = [0u8; 8192];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.screen.extend_from_slice(&buf[..n]);
        }
    }

    fn type_text(&mut self, text: &str) {
        use std::io::Write;
        self.master.as_mut().unwrap().write_all(text.as_bytes()).unwrap();
    }

    /// Pumps until `done` holds (30 s at most).
    fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            self.pump();
            let screen = String::from_utf8_lossy(&self.screen).into_owned();
            if done(&screen) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what} never happened: {screen}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits for pi to exit (30 s at most): its exit code and how long it took.
    fn wait(&mut self) -> (Option<i32>, std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            self.pump();
            if let Some(status) = self.child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                if let Some(signal) = status.signal() {
                    eprintln!("pi was killed by signal {signal}");
                }
                return (status.code(), start.elapsed());
            }
            if start.elapsed() > std::time::Duration::from_secs(30) {
                self.child.kill().unwrap();
                panic!("pi kept running");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// The `sleep 60` processes (the long tool call) still running in `dir` once any that were
/// just killed had 10 s to go.
fn sleepers_in(dir: &Path) -> Vec<String> {
    let find = || -> Vec<String> {
        let sleeping = Command::new("pgrep").args(["-f", "^sleep 60$"]).output().unwrap();
        String::from_utf8_lossy(&sleeping.stdout)
            .lines()
            .filter(|pid| alive(pid) && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
            .map(str::to_owned)
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = find();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = find();
    }
    left
}

/// Every start record has its end in `events`, and every line is whole JSON.
fn records_complete(events: &Path) {
    let text = std::fs::read_to_string(events).unwrap();
    assert!(text.ends_with('\n'), "a torn last line");
    let events = support::events(events);
    let starts = events.iter().filter(|e| e.kind == pi_observe::core::EventKind::Start).count();
    let ends = events
        .iter()
        .filter(|e| matches!(e.kind, pi_observe::core::EventKind::End | pi_observe::core::EventKind::Error))
        .count();
    assert!(starts > 0);
    assert_eq!(starts, ends, "every span ended");
}

fn interactive(d: &Path, name: &str) -> Command {
    let script = d.join("script.json");
    // A long tool call keeps the prompt running when the terminal goes.
    std::fs::write(
        &script,
        serde_json::json!([{"text": "Working.", "tools": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}, {"text": "Done."}]).to_string(),
    )
    .unwrap();
    let mut cmd = pi_in(d);
    cmd.args(["--provider", "faux"])
        .arg("--cwd")
        .arg(d)
        .arg("--faux-script")
        .arg(&script)
        .arg("--session")
        .arg(d.join(format!("{name}.jsonl")))
        .arg("--events-jsonl")
        .arg(d.join(format!("{name}-events.jsonl")));
    cmd
}

#[test]
fn item_7_a_terminal_that_goes_away_ends_pi_with_129_and_every_record_written() {
    let d = scratch("audit-hangup");
    // The pseudo-terminal's master closes while a tool runs (tmux killed, SSH dropped).
    let mut pty = Pty::spawn(interactive(&d, "eof"));
    pty.until("the footer", |screen| screen.contains("faux-1"));
    pty.type_text("run the long thing\r");
    let session = d.join("eof.jsonl");
    pty.until("the tool call", |_| std::fs::read_to_string(&session).unwrap_or_default().contains("sleep 60"));
    pty.master = None;
    let (code, took) = pty.wait();
    eprintln!("exited {took:?} after the terminal went away");
    assert_eq!(code, Some(129));
    records_complete(&d.join("eof-events.jsonl"));
    assert!(std::fs::read_to_string(&session).unwrap().ends_with('\n'));

    assert!(sleepers_in(&d).is_empty(), "the tool's sleep outlived pi");

    // SIGHUP (the terminal's controlling process told it hung up): the same ending.
    let mut pty = Pty::spawn(interactive(&d, "hup"));
    let session = d.join("hup.jsonl");
    pty.until("the footer", |screen| screen.contains("faux-1"));
    pty.type_text("run the long thing\r");
    pty.until("the tool call", |_| std::fs::read_to_string(&session).unwrap_or_default().contains("sleep 60"));
    assert!(Command::new("kill").args(["-HUP", &pty.child.id().to_string()]).status().unwrap().success());
    let (code, took) = pty.wait();
    eprintln!("exited {took:?} after SIGHUP");
    assert_eq!(code, Some(129));
    records_complete(&d.join("hup-events.jsonl"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi --mode rpc` on the long-tool script, its stdin and stdout piped (stdin held open).
fn rpc(d: &Path) -> std::process::Child {
    let script = d.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([{"text": "Working.", "tools": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}, {"text": "Done."}]).to_string(),
    )
    .unwrap();
    pi_in(d)
        .args(["--mode", "rpc", "--provider", "faux"])
        .arg("--cwd")
        .arg(d)
        .arg("--faux-script")
        .arg(&script)
        .arg("--session")
        .arg(d.join("rpc.jsonl"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads stdout lines until one satisfies `want`.
fn read_until(lines: &mut impl Iterator<Item = std::io::Result<String>>, want: impl Fn(&serde_json::Value) -> bool) {
    for line in lines.by_ref() {
        let value: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap_or_default();
        if want(&value) {
            return;
        }
    }
    panic!("stdout ended first");
}

/// Waits for `child` (30 s hang guard): its exit code and how long it took.
fn exit_of(child: &mut std::process::Child) -> (Option<i32>, std::time::Duration) {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code(), start.elapsed());
        }
        if start.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("pi kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn item_8_rpc_mode_ends_on_sigint_sigterm_and_sighup_while_the_client_keeps_stdin_open() {
    use std::io::{BufRead, Write};
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let d = scratch("audit-rpc-signal");
        let mut child = rpc(&d);
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        stdin.write_all(b"{\"type\":\"prompt\",\"id\":\"p\",\"message\":\"run the long thing\"}\n").unwrap();
        stdin.flush().unwrap();
        read_until(&mut lines, |v| v["type"] == "tool_execution_start");
        assert!(
            Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap().success()
        );
        let (code, took) = exit_of(&mut child);
        eprintln!("SIG{signal}: exited in {took:?}");
        assert_eq!(code, Some(128 + number), "SIG{signal}");
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(err.contains(&format!("aborted by SIG{signal}")), "{err}");
        let ours = sleepers_in(&d);
        assert!(ours.is_empty(), "the tool's sleep outlived pi: {ours:?}");
        drop(stdin);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn item_8_a_client_that_closes_pis_stdout_ends_the_run() {
    use std::io::{BufRead, Write};
    let d = scratch("audit-rpc-epipe");
    let mut child = rpc(&d);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"{\"type\":\"prompt\",\"id\":\"p\",\"message\":\"run the long thing\"}\n").unwrap();
    stdin.flush().unwrap();
    read_until(&mut lines, |v| v["type"] == "tool_execution_start");
    drop(lines); // the client stops reading: pi's next line meets EPIPE
    // The next line pi writes (a response) meets the closed pipe.
    stdin.write_all(b"{\"type\":\"get_state\",\"id\":\"s\"}\n").unwrap();
    stdin.flush().unwrap();
    let (code, took) = exit_of(&mut child);
    eprintln!("exited in {took:?} after the client closed stdout");
    assert_eq!(code, Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(err.lines().filter(|l| l.contains("closed stdout")).count(), 1, "{err}");
    let session = std::fs::read_to_string(d.join("rpc.jsonl")).unwrap();
    assert!(session.ends_with('\n'), "whole lines");
    drop(stdin);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Items of each signal in the spool folder (from the batch headers).
fn spooled_items(spool: &Path, signal: &str) -> u64 {
    let mut items = 0;
    for entry in std::fs::read_dir(spool).into_iter().flatten().flatten() {
        if entry.path().extension().is_none_or(|x| x != "batch") {
            continue;
        }
        let bytes = std::fs::read(entry.path()).unwrap();
        let header = String::from_utf8_lossy(&bytes[..bytes.iter().position(|b| *b == b'\n').unwrap()]).into_owned();
        let meta: serde_json::Value = serde_json::from_str(header.split_once(' ').map_or(&header, |(_, m)| m))
            .or_else(|_| serde_json::from_str(&header))
            .unwrap_or_default();
        let meta = if meta.get("meta").is_some() { &meta["meta"] } else { &meta };
        if header.contains(&format!("\"signal\":\"{signal}\"")) {
            items += meta["items"].as_u64().unwrap_or(0);
        }
    }
    items
}

/// The number before `what` on the line of `stderr` that starts with `prefix`.
fn count_before(stderr: &str, prefix: &str, what: &str) -> Option<u64> {
    let line = stderr.lines().find(|l| l.starts_with(prefix))?;
    let at = line.find(what)?;
    line[..at].trim_end().rsplit([' ', '(']).next()?.parse().ok()
}

#[test]
fn item_10_spooled_counts_match_the_disk_when_the_folder_goes_mid_run() {
    let d = scratch("audit-spool-gone");
    // `pi -p` to a collector that is down, spooling into `spool`, on faux `steps`; its stderr.
    let run = |spool: &Path, steps: serde_json::Value, env: &[(&str, &str)]| {
        let script = d.join("script.json");
        std::fs::write(&script, steps.to_string()).unwrap();
        let out = pi_in(&d)
            .args(["-p", "go", "--provider", "faux", "--no-session", "--otlp", &Receiver::down_endpoint()])
            .arg("--spool-dir")
            .arg(spool)
            .arg("--cwd")
            .arg(&d)
            .arg("--faux-script")
            .arg(&script)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Batches go out every 50 ms; a tool removes the spool folder after the first ones were
    // written, and the run goes on (the rest are spooled at exit).
    let spool = d.join("spool");
    let err = run(
        &spool,
        serde_json::json!([
            {"text": "One.", "tools": [{"name": "bash", "arguments": {"command": "sleep 0.6"}}]},
            {"text": "Two.", "tools": [{"name": "bash", "arguments": {"command": format!("rm -rf {}", spool.display())}}]},
            {"text": "Done."}
        ]),
        &[("OTEL_BSP_SCHEDULE_DELAY", "50")],
    );
    let on_disk = spooled_items(&spool, "traces");
    assert!(on_disk > 0, "the folder was made again for the later batches: {err}");
    let claimed = count_before(&err, "pi: otlp:", "for the next run").expect("a spooled count");
    assert_eq!(claimed, on_disk, "the exit line's count is what the disk holds: {err}");
    assert!(err.contains("no longer in the spool folder"), "{err}");

    // A folder replaced by a file: nothing can be spooled, and nothing is said to be.
    let blocked = d.join("blocked");
    let err = run(
        &blocked,
        serde_json::json!([
            {"text": "One.", "tools": [{"name": "bash", "arguments": {"command": format!("rm -rf {b}; touch {b}", b = blocked.display())}}]},
            {"text": "Done."}
        ]),
        &[],
    );
    assert!(!err.contains("for the next run"), "{err}");
    assert!(err.contains("cannot write a batch"), "the reason is named: {err}");
    let lost = count_before(&err, "pi: otlp:", "not delivered").unwrap();
    assert!(lost > 0, "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_10_the_spans_line_names_the_last_error_of_traces() {
    let d = scratch("audit-last-error");
    let down = Receiver::down_endpoint();
    let out = pi_in(&d)
        .args(["-p", "go", "--provider", "faux", "--no-session", "--no-spool", "--otlp-logs", "--otlp", &down])
        .arg("--cwd")
        .arg(&d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = err.lines().find(|l| l.starts_with("pi: otlp:")).expect("the otlp line");
    assert!(line.contains("/v1/traces"), "{line}");
    assert!(!line.contains("/v1/metrics") && !line.contains("/v1/logs"), "{line}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A small tmpfs mounted on a fresh directory, unmounted when dropped; `None` (with the reason
/// printed) where this test cannot mount one (not root, no mount permission).
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(name: &str, size: &str) -> Option<SmallFs> {
        let dir = scratch(name);
        let out =
            Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir).output();
        match out {
            Ok(out) if out.status.success() => Some(SmallFs(dir)),
            Ok(out) => {
                eprintln!("skipped: cannot mount a tmpfs ({})", String::from_utf8_lossy(&out.stderr).trim());
                None
            }
            Err(e) => {
                eprintln!("skipped: no mount command ({e})");
                None
            }
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn item_11_a_full_disk_keeps_whole_session_lines_and_every_writer_says_so() {
    let Some(fs) = SmallFs::mount("audit-disk-full", "48k") else { return };
    let d = scratch("audit-disk-full-work");
    let script = d.join("script.json");
    let turn =
        serde_json::json!({"text": "x".repeat(3000), "tools": [{"name": "bash", "arguments": {"command": "echo hi"}}]});
    let mut steps = vec![turn; 30];
    steps.push(serde_json::json!({"text": "done"}));
    std::fs::write(&script, serde_json::Value::Array(steps).to_string()).unwrap();
    let session = fs.0.join("s.jsonl");
    let out = pi_in(&d)
        .args(["-p", "go", "--provider", "faux"])
        .arg("--cwd")
        .arg(&d)
        .arg("--faux-script")
        .arg(&script)
        .arg("--session")
        .arg(&session)
        .arg("--events-jsonl")
        .arg(fs.0.join("events.jsonl"))
        .arg("--log-json")
        .arg(fs.0.join("log.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_ne!(out.status.code(), Some(0), "{err}");
    // The session: whole lines only, each one JSON; the error says disk full.
    let text = std::fs::read_to_string(&session).unwrap();
    assert!(text.ends_with('\n'), "the session ends in half a line");
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("a whole JSON line");
    }
    let session_line = err.lines().find(|l| l.starts_with("pi: session:")).unwrap_or_else(|| panic!("{err}"));
    assert!(session_line.contains("disk full"), "{session_line}");
    // The events file and the log name the cause and what was lost.
    let events_line = err.lines().find(|l| l.starts_with("pi: events-jsonl:")).unwrap_or_else(|| panic!("{err}"));
    assert!(events_line.contains("not written") && events_line.contains("disk full"), "{events_line}");
    let log_line = err.lines().find(|l| l.starts_with("pi: log-json:")).unwrap_or_else(|| panic!("{err}"));
    assert!(log_line.contains("lost") && log_line.contains("disk full"), "{log_line}");
    std::fs::remove_dir_all(&d).unwrap();
}
