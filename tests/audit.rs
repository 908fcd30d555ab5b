//! The outside audit's second round (issue 24): each test is named after the item it covers and
//! runs `pi` the way a user would.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

#[path = "../pi-observe-otel/tests/support/receiver.rs"]
mod receiver;
mod support;

use receiver::Receiver;
use support::{faux_script, pi, scratch};

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
