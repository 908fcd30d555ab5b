//! The model catalogue from the user's side: `pi --list-models`, an upstream `models.json` with
//! providers on every API upstream speaks, and usage on a model without a price (billed as
//! unknown everywhere, never as $0).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use std::path::Path;

use pi_observe::core::{EventKind, Value, names};
use support::{Flag, events, pi, scratch};

fn text(out: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `pi` with `models.json` in its agent directory.
fn pi_with_models(agent: &Path) -> std::process::Command {
    let mut cmd = pi();
    cmd.env("PI_CODING_AGENT_DIR", agent);
    cmd
}

fn upstream_models(dir: &Path) -> std::path::PathBuf {
    let agent = dir.join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/models-all-apis.json");
    std::fs::copy(fixture, agent.join("models.json")).unwrap();
    agent
}

#[test]
fn list_models_prints_the_catalogue_with_prices_and_filters_by_search() {
    let out = pi().args(["--list-models", "claude-sonnet-4-5"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let header = stdout.lines().next().unwrap();
    for column in ["provider", "model", "context", "max-out", "input", "output", "cache-read", "cache-write", "status"]
    {
        assert!(header.contains(column), "{header}");
    }
    let row = stdout.lines().find(|l| l.starts_with("anthropic ") && l.contains(" claude-sonnet-4-5 ")).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cells[1..],
        ["claude-sonnet-4-5", "200K", "64K", "yes", "yes", "$3", "$15", "$0.3", "$3.75", "needs", "ANTHROPIC_API_KEY"]
    );
    assert!(stdout.lines().all(|l| !l.starts_with("openai ")), "only matches are listed");
    assert!(stdout.contains("from badlogic/pi-mono"), "the catalogue says where its prices come from");
    let out = pi().args(["--list-models", "no-such-model-anywhere"]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(text(&out).0.trim(), "No models matching \"no-such-model-anywhere\"");
    let all = pi().arg("--list-models").output().unwrap();
    let rows = text(&all).0.lines().filter(|l| l.contains('$')).count();
    assert!(rows > 700, "the whole catalogue: {rows}");
    // Bedrock needs AWS credentials, not one key variable: without them it is not ready.
    let bedrock = pi()
        .args(["--list-models", "amazon-bedrock"])
        .env("HOME", std::env::temp_dir().join("pi-no-aws-home"))
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_BEARER_TOKEN_BEDROCK")
        .output()
        .unwrap();
    let listed = text(&bedrock).0;
    let rows: Vec<&str> = listed.lines().filter(|l| l.starts_with("amazon-bedrock ")).collect();
    assert!(!rows.is_empty() && rows.iter().all(|l| l.ends_with("needs AWS credentials")), "{listed}");
}

#[test]
fn an_upstream_models_json_on_every_api_loads_and_says_once_what_cannot_run() {
    let d = scratch("models-all-apis");
    let agent = upstream_models(&d);
    let out = pi_with_models(&agent).args(["-p", "hi", "--no-session", "--tools", "none"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "faux still runs: {stderr}");
    assert!(stdout.contains("(faux)"), "{stdout}");
    assert!(stderr.contains("providers.my-future: api \"pi-messages\" is not one pi knows"), "{stderr}");
    for unspoken in ["my-codex", "my-gemini-cli", "my-vertex"] {
        let said = stderr.lines().filter(|l| l.contains(&format!("providers.{unspoken}:"))).count();
        assert_eq!(said, 1, "said once: {stderr}");
    }
    assert!(stderr.contains("my-codex: the openai-codex-responses API needs a subscription login"), "{stderr}");
    for spoken in
        ["my-completions", "my-responses", "my-azure", "my-anthropic", "my-bedrock", "my-gemini\"", "my-mistral"]
    {
        assert!(
            stderr.lines().all(|l| !l.contains(&format!("providers.{}", spoken.trim_end_matches('"')).to_string())
                || l.contains("gemini-cli")),
            "{spoken}: {stderr}"
        );
    }

    let out = pi_with_models(&agent).args(["--list-models", "my-"]).output().unwrap();
    let (stdout, _) = text(&out);
    let status = |id: &str| stdout.lines().find(|l| l.contains(&format!(" {id} "))).map(|l| l.to_owned());
    assert!(status("local-llama").unwrap().contains("$0.5"), "{stdout}");
    assert!(status("vertex-model").unwrap().ends_with("unavailable (google-vertex)"), "{stdout}");
    assert!(status("my-deployment").is_some(), "{stdout}");
    assert!(status("future-model").is_none(), "a provider on an unknown API is skipped: {stdout}");
    assert!(status("resp-model").unwrap().contains("n/a"), "no cost written: no price known: {stdout}");

    // A provider on an API pi has no client for is refused by name when chosen.
    let out = pi_with_models(&agent).args(["-p", "hi", "--no-session", "--provider", "my-vertex"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("no client for the google-vertex API"), "{}", text(&out).1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn usage_on_a_model_without_a_price_is_unknown_in_spans_sessions_and_the_report() {
    let d = scratch("unpriced");
    let (base, server) = support::one_shot_openai_server();
    let sessions = d.join("sessions");
    let out = pi()
        .args(["-p", "say hello", "--model", "llama-local", "--tools", "none", "--base-url", &base])
        .env("PI_CODING_AGENT_SESSION_DIR", &sessions)
        .flag("--events-jsonl", d.join("events.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out).1);
    server.join().unwrap();
    let evs = events(&d.join("events.jsonl"));
    let end = evs.iter().find(|e| e.kind == EventKind::End && e.name == names::PROVIDER_REQUEST).unwrap();
    assert_eq!(end.payload.get(names::COST_UNKNOWN), Some(&Value::Bool(true)));
    assert_eq!(end.payload.get(names::COST_TOTAL), None, "no zero that would read as free");
    assert_eq!(end.payload.get(names::INPUT_TOKENS), Some(&Value::I64(12)), "tokens still counted");

    let report = pi().args(["report", "--by", "model"]).arg(&sessions).output().unwrap();
    let (stdout, stderr) = text(&report);
    assert!(report.status.success(), "{stderr}");
    let row = stdout.lines().find(|l| l.contains("llama-local")).unwrap();
    assert!(row.trim_end().ends_with("n/a"), "{stdout}");
    assert!(stdout.contains("n/a: no price known for openai/llama-local (15 tokens)"), "{stdout}");
    let strict = pi().args(["report", "--strict-prices"]).arg(&sessions).output().unwrap();
    assert_eq!(strict.status.code(), Some(1));
    let json = pi().args(["report", "--format", "json", "--by", "provider"]).arg(&sessions).output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(rows[0]["provider"], "openai");
    assert_eq!(rows[0]["costUsd"], serde_json::Value::Null);
    assert!(text(&json).1.contains("no price known"), "the note goes to stderr beside JSON");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn every_api_runs_against_its_replay_with_only_its_users_credentials() {
    let d = scratch("providers-cli");
    for replay in support::replays::api_replays() {
        let (out, request) = replay.run(&["--no-session".as_ref(), "--cwd".as_ref(), d.as_os_str()]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{}: {stderr}", replay.api);
        assert_eq!(stdout.trim(), replay.answer, "{}", replay.api);
        for part in replay.sent {
            assert!(request.contains(part), "{}: {part:?} not in {request}", replay.api);
        }
        assert!(!request.contains("sk-must-not-leak"), "{}: another provider's key is never sent", replay.api);
    }
    let missing = [
        ("groq", "GROQ_API_KEY"),
        ("google", "GEMINI_API_KEY"),
        ("xai", "XAI_API_KEY"),
        ("azure-openai-responses", "AZURE_OPENAI_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
    ];
    for (provider, var) in missing {
        let out = pi().args(["-p", "hi", "--no-session", "--provider", provider]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{provider}");
        assert!(text(&out).1.contains(&format!("{var} is not set")), "{provider}: {}", text(&out).1);
    }
    let out = pi()
        .args(["-p", "hi", "--no-session", "--provider", "amazon-bedrock"])
        .env("HOME", d.join("home"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("no AWS credentials"), "{}", text(&out).1);
    std::fs::remove_dir_all(&d).ok();
}
