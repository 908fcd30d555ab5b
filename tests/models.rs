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

/// A short Responses API stream: one text answer with usage.
fn responses_stream(model: &str) -> String {
    let events = [
        ("response.created", format!(r#"{{"type":"response.created","response":{{"id":"resp_1","status":"in_progress","model":"{model}"}}}}"#)),
        ("response.output_item.added", r#"{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#.to_owned()),
        ("response.output_text.delta", r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hello from Responses"}"#.to_owned()),
        ("response.output_item.done", r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"text":"Hello from Responses"}],"role":"assistant"}}"#.to_owned()),
        ("response.completed", format!(r#"{{"type":"response.completed","response":{{"id":"resp_1","status":"completed","model":"{model}","usage":{{"input_tokens":100,"input_tokens_details":{{"cached_tokens":40}},"output_tokens":10,"total_tokens":110}}}}}}"#)),
    ];
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

/// Runs `pi -p hi --no-session --tools none ARGS` with `ENV` against a loopback server
/// replaying `stream` (`{base}` in an argument or value is its address) and returns stdout and
/// the request the server received; the run must succeed.
fn replay(stream: String, args: &[&str], env: &[(&str, &str)], events_file: Option<&Path>) -> (String, String) {
    let (base, server) = support::one_shot_sse_server(stream);
    let mut cmd = pi();
    cmd.args(["-p", "hi", "--no-session", "--tools", "none"]);
    cmd.args(args.iter().map(|a| a.replace("{base}", &base)));
    for (name, value) in env {
        cmd.env(name, value.replace("{base}", &base));
    }
    if let Some(file) = events_file {
        cmd.flag("--events-jsonl", file);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    (stdout, server.join().unwrap())
}

#[test]
fn openai_and_azure_run_on_the_responses_api_with_only_their_usual_variables() {
    let d = scratch("responses-cli");
    let events_file = d.join("openai.jsonl");
    let (stdout, request) = replay(
        responses_stream("gpt-5-mini"),
        &["--provider", "openai", "--model", "gpt-5-mini", "--base-url", "{base}/v1"],
        &[("OPENAI_API_KEY", "sk-openai-test-1234567890")],
        Some(&events_file),
    );
    assert_eq!(stdout.trim(), "Hello from Responses");
    assert!(request.starts_with("POST /v1/responses "), "{request}");
    assert!(request.contains("authorization: Bearer sk-openai-test-1234567890"), "{request}");
    let evs = events(&events_file);
    let end = evs.iter().find(|e| e.kind == EventKind::End && e.name == names::PROVIDER_REQUEST).unwrap();
    assert_eq!(end.payload.get(names::API), Some(&Value::from("openai-responses")));
    // gpt-5-mini: $0.25 in, $2 out, $0.025 cache read per million tokens.
    let expected = (60.0 * 0.25 + 10.0 * 2.0 + 40.0 * 0.025) / 1e6;
    let cost = end.payload.get(names::COST_TOTAL).and_then(Value::as_f64).unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");

    let (stdout, request) = replay(
        responses_stream("gpt-5-mini"),
        &["--provider", "azure-openai-responses", "--model", "gpt-5-mini"],
        &[
            ("AZURE_OPENAI_API_KEY", "azure-key-1234567890"),
            ("AZURE_OPENAI_BASE_URL", "{base}/openai/v1"),
            ("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-5-mini=my-mini"),
        ],
        None,
    );
    assert_eq!(stdout.trim(), "Hello from Responses");
    assert!(request.starts_with("POST /openai/v1/responses?api-version=v1 "), "{request}");
    assert!(request.contains("api-key: azure-key-1234567890"), "{request}");
    assert!(request.contains(r#""model":"my-mini""#), "{request}");

    let out = pi().args(["-p", "hi", "--no-session", "--provider", "azure-openai-responses"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).1.contains("AZURE_OPENAI_API_KEY is not set"), "{}", text(&out).1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn gemini_mistral_bedrock_and_openai_compatible_providers_run_with_their_own_credentials() {
    let d = scratch("providers-cli");
    let gemini = [
        r#"{"candidates":[{"content":{"parts":[{"text":"Hello from Gemini"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":20,"candidatesTokenCount":5,"totalTokenCount":25},"modelVersion":"gemini-2.5-flash"}"#,
    ];
    let body: String = gemini.iter().map(|c| format!("data: {c}\r\n\r\n")).collect();
    let (stdout, request) = replay(
        body,
        &["--provider", "google", "--model", "gemini-2.5-flash", "--base-url", "{base}/v1beta"],
        &[("GEMINI_API_KEY", "gemini-key-1234567890")],
        None,
    );
    assert_eq!(stdout.trim(), "Hello from Gemini");
    assert!(request.starts_with("POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse "), "{request}");
    assert!(request.contains("x-goog-api-key: gemini-key-1234567890"), "{request}");

    let chunks = [
        r#"{"id":"c1","object":"chat.completion.chunk","model":"devstral-medium-2507","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello from Mistral"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"total_tokens":25,"completion_tokens":5}}"#,
        "[DONE]",
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    let (stdout, request) = replay(
        body,
        &["--provider", "mistral", "--base-url", "{base}"],
        &[("MISTRAL_API_KEY", "mistral-key-1234567890")],
        None,
    );
    assert_eq!(stdout.trim(), "Hello from Mistral");
    assert!(request.starts_with("POST /v1/chat/completions "), "{request}");
    assert!(request.contains("authorization: Bearer mistral-key-1234567890"), "{request}");
    assert!(request.contains(r#""model":"devstral-medium-latest""#), "upstream's default model: {request}");

    let chunks = [
        r#"{"id":"gen-1","model":"openai/gpt-5.1-codex","choices":[{"index":0,"delta":{"content":"Hello from OpenRouter"},"finish_reason":"stop"}]}"#,
        r#"{"id":"gen-1","model":"openai/gpt-5.1-codex","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}"#,
        "[DONE]",
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    let (stdout, request) = replay(
        body,
        &["--provider", "openrouter", "--base-url", "{base}/api/v1"],
        &[("OPENROUTER_API_KEY", "or-key-1234567890"), ("OPENAI_API_KEY", "sk-must-not-leak-1234567890")],
        None,
    );
    assert_eq!(stdout.trim(), "Hello from OpenRouter");
    assert!(request.starts_with("POST /api/v1/chat/completions "), "{request}");
    assert!(request.contains("authorization: Bearer or-key-1234567890"), "{request}");
    assert!(!request.contains("sk-must-not-leak"), "another provider's key is never sent: {request}");

    let frames = [
        support::aws_event("messageStart", r#"{"role":"assistant"}"#),
        support::aws_event("contentBlockDelta", r#"{"contentBlockIndex":0,"delta":{"text":"Hello from Bedrock"}}"#),
        support::aws_event("messageStop", r#"{"stopReason":"end_turn"}"#),
        support::aws_event(
            "metadata",
            r#"{"usage":{"inputTokens":20,"outputTokens":5,"totalTokens":25},"metrics":{"latencyMs":100}}"#,
        ),
    ]
    .concat();
    let (base, server) = support::one_shot_server("application/vnd.amazon.eventstream", frames);
    let out = pi()
        .args([
            "-p",
            "hi",
            "--no-session",
            "--tools",
            "none",
            "--provider",
            "amazon-bedrock",
            "--model",
            "amazon.nova-pro-v1:0",
        ])
        .args(["--base-url", &base])
        .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
        .env("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        .env("AWS_REGION", "eu-central-1")
        .env("HOME", d.join("home"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "Hello from Bedrock");
    let request = server.join().unwrap();
    assert!(request.starts_with("POST /model/amazon.nova-pro-v1%3A0/converse-stream "), "{request}");
    assert!(
        request.contains("Credential=AKIDEXAMPLE/") && request.contains("/eu-central-1/bedrock/aws4_request"),
        "{request}"
    );

    for (provider, var) in [("groq", "GROQ_API_KEY"), ("google", "GEMINI_API_KEY"), ("xai", "XAI_API_KEY")] {
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
