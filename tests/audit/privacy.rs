//! Items 1–6 and 15: what leaves the machine (ids, replayed and typed names, spool under a later policy, secret formats, file modes, schema_url).

use super::*;
use crate::support::Flag;
use crate::support::Succeeds;

#[test]
fn item_15_metrics_and_logs_carry_the_schema_url_on_resource_and_scope() {
    let d = scratch("audit-schema");
    let receiver = Receiver::start(vec![]);
    pi().args(["-p", "check", "--provider", "faux", "--no-session", "--otlp-logs", "--otlp", &receiver.endpoint])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d))
        .succeeds();
    let schema = pi_observe::otel::names::SCHEMA_URL;
    let metrics = receiver.metrics.lock().unwrap().clone();
    let logs = receiver.logs.lock().unwrap().clone();
    assert!(!metrics.is_empty() && !logs.is_empty(), "a metrics and a logs request each");
    // Every resource's schema_url, then its scopes'.
    let mut urls: Vec<&str> = Vec::new();
    for resource in metrics.iter().flat_map(|r| &r.resource_metrics) {
        urls.push(&resource.schema_url);
        urls.extend(resource.scope_metrics.iter().map(|s| s.schema_url.as_str()));
    }
    for resource in logs.iter().flat_map(|r| &r.resource_logs) {
        urls.push(&resource.schema_url);
        urls.extend(resource.scope_logs.iter().map(|s| s.schema_url.as_str()));
    }
    assert!(urls.len() >= 4 && urls.iter().all(|u| *u == schema), "{urls:?}");
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
    std::process::Command::new("sh")
        .flag("-c", "umask 0; exec \"$0\" \"$@\"")
        .arg(pi().get_program())
        .envs(pi().get_envs().filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))))
        .env("PI_CODING_AGENT_DIR", &agent)
        .args(["-p", "check", "--provider", "faux"])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d))
        .flag("--session", d.join("new/sessions/s.jsonl"))
        .flag("--events-jsonl", d.join("new/events/e.jsonl"))
        .flag("--log-json", d.join("new/logs/log.jsonl"))
        .flag("-e", &extension)
        .succeeds();
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
    pi().args(["-p", &prompt.join("\n"), "--provider", "faux", "--no-session", "--capture", "all"])
        .flag("--cwd", &d)
        .flag("--events-jsonl", &events)
        .succeeds();
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
    pi().args(["export", "--capture", "events=prompt", "--events-jsonl"])
        .arg(d.join("captured.jsonl"))
        .arg(&file)
        .succeeds();
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
        .flag("--cwd", &d);
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

#[test]
fn item_4_batches_spooled_under_a_wider_capture_are_not_delivered_under_a_later_policy() {
    let d = scratch("audit-spool-cap");
    let endpoint = Receiver::down_endpoint();
    let sentry_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let sentry_dsn = format!("http://k@127.0.0.1:{sentry_port}/1");
    let prompt = "CanarySpooledPrompt please check";
    // Spooled while OTLP and Sentry captured prompts, completions and tool results (both down).
    pi_in(&d)
        .args(["-p", prompt, "--provider", "faux", "--no-session", "--otlp", &endpoint, "--sentry", &sentry_dsn])
        .args(["--capture", "remote=prompt,completion,tool_result"])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d))
        .succeeds();
    let with_content = spooled_batches(&d);
    assert!(with_content > 1, "OTLP and Sentry batches");
    // A run without capture spools too: its batches stay deliverable under the policy.
    pi_in(&d)
        .args(["-p", "plain", "--provider", "faux", "--no-session", "--otlp", &endpoint, "--sentry", &sentry_dsn])
        .flag("--cwd", &d)
        .succeeds();
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
