//! Real backend: `pi -p --otlp` for two users at once into an Arize Phoenix running on loopback,
//! read back over Phoenix's REST API: same ids, parents, names, user/org attributes and token
//! counts. Run by `scripts/test` (which starts Phoenix and sets `PHOENIX_URL`):
//!
//! ```sh
//! . scripts/phoenix.sh && cargo test --test phoenix -- --ignored
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pi_observe::core::{EventKind, ObsEvent, Value, names};

fn events(path: &Path) -> Vec<ObsEvent> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| ObsEvent::from_json(l).unwrap()).collect()
}

/// GET over plain HTTP/1.1 on loopback (no client crate needed for one request); `None` on 404
/// (a project Phoenix has not created yet).
fn get(base: &str, path: &str) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let host = base.trim_start_matches("http://");
    let mut socket = std::net::TcpStream::connect(host).unwrap();
    write!(socket, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAccept: application/json\r\n\r\n")
        .unwrap();
    let mut response = Vec::new();
    socket.read_to_end(&mut response).unwrap();
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    if head.starts_with("HTTP/1.1 404") {
        return None;
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_owned() };
    Some(serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}")))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

#[test]
#[ignore = "needs a running Phoenix: run scripts/test"]
fn phoenix_shows_both_users_traces_with_contract_ids_and_attribution() {
    let base = std::env::var("PHOENIX_URL").expect("PHOENIX_URL (start Phoenix with scripts/phoenix.sh)");
    let project = format!("pi-{}", pi_observe::core::SpanId::random());
    let dir = std::env::temp_dir().join(&project);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"text": "Looking.", "tools": [{"name": "ls", "arguments": {}}, {"name": "bash", "arguments": {"command": "echo ok"}}]},
            {"text": "Done."}
        ])
        .to_string(),
    )
    .unwrap();
    let users = [("alice", "acme"), ("bob", "globex")];
    let children: Vec<_> = users
        .iter()
        .map(|(user, org)| {
            // Alice's content goes to the backend (named explicitly); Bob's does not.
            let capture = if *user == "alice" { "otlp=provider_payload,completion,tool_args" } else { "local=prompt" };
            Command::new(env!("CARGO_BIN_EXE_pi"))
                .args(["-p", "check the project", "--provider", "faux", "--no-session", "--user", user, "--org", org])
                .args(["--capture", capture])
                .args(["--otlp", &base, "--otlp-header", &format!("x-project-name={project}"), "--conventions", "both"])
                .arg("--cwd")
                .arg(&dir)
                .arg("--faux-script")
                .arg(&script)
                .arg("--events-jsonl")
                .arg(dir.join(format!("{user}.jsonl")))
                .env_remove("OPENAI_API_KEY")
                .env_remove("ANTHROPIC_API_KEY")
                .env("PI_CODING_AGENT_DIR", dir.join(format!("agent-{user}")))
                .env_remove("PI_SPOOL_DIR")
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let evs: Vec<ObsEvent> = users.iter().flat_map(|(u, _)| events(&dir.join(format!("{u}.jsonl")))).collect();
    let starts: Vec<&ObsEvent> = evs.iter().filter(|e| e.kind == EventKind::Start).collect();

    // Phoenix ingests asynchronously: poll until every span is there.
    let deadline = Instant::now() + Duration::from_secs(60);
    let spans = loop {
        let page = get(&base, &format!("/v1/projects/{project}/spans?limit=1000"));
        let spans = page.and_then(|p| p["data"].as_array().cloned()).unwrap_or_default();
        if spans.len() >= starts.len() || Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(spans.len(), starts.len(), "Phoenix has {} of {} spans", spans.len(), starts.len());
    for start in starts {
        let id = start.span_id.unwrap().to_string();
        let span =
            spans.iter().find(|s| s["context"]["span_id"] == id.as_str()).unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(span["context"]["trace_id"], start.trace_id.to_string().as_str());
        // Span names follow the GenAI conventions; the contract name is `pi.operation` then.
        let operation = span["attributes"]["pi.operation"].as_str().unwrap_or(span["name"].as_str().unwrap_or(""));
        assert_eq!(operation, start.name.as_ref());
        match start.parent_span_id {
            Some(parent) => assert_eq!(span["parent_id"], parent.to_string().as_str()),
            None => assert!(span["parent_id"].is_null()),
        }
        let attributes = &span["attributes"];
        assert_eq!(attributes["user.id"], start.context.get("userId").unwrap());
        assert_eq!(attributes["organization.id"], start.context.get("orgId").unwrap());
        let captured = start.context.get("userId") == Some("alice");
        let content_keys: &[&str] = match start.name.as_ref() {
            names::PROVIDER_REQUEST => &["gen_ai.input.messages", "gen_ai.output.messages"],
            names::AGENT_TOOL_CALL => &["gen_ai.tool.call.arguments"],
            _ => &[],
        };
        for key in content_keys {
            let value = attributes[*key].as_str();
            assert_eq!(value.is_some(), captured, "{key} on {} (captured: {captured})", start.name);
        }
        if captured && start.name == names::PROVIDER_REQUEST {
            let input: serde_json::Value =
                serde_json::from_str(attributes["gen_ai.input.messages"].as_str().unwrap()).unwrap();
            assert_eq!(input[0]["role"], "user", "the conventions' message schema reaches Phoenix");
        }
        if start.name == names::PROVIDER_REQUEST {
            let end = evs.iter().find(|e| e.kind == EventKind::End && e.span_id == start.span_id).unwrap();
            let Some(Value::I64(output)) = end.payload.get(names::OUTPUT_TOKENS) else { panic!("no output tokens") };
            assert_eq!(attributes["gen_ai.usage.output_tokens"], *output);
            assert_eq!(attributes["llm.token_count.completion"], *output);
            assert_eq!(span["span_kind"], "LLM");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[ignore = "needs a running Phoenix: run scripts/test"]
fn phoenix_gets_pis_cost_for_a_model_it_has_no_price_for_in_the_pi_project() {
    let base = std::env::var("PHOENIX_URL").expect("PHOENIX_URL (start Phoenix with scripts/phoenix.sh)");
    let dir = std::env::temp_dir().join(format!("pi-phoenix-cost-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    // No project header: the project is the resource's `openinference.project.name`, pi's default.
    let status = Command::new(env!("CARGO_BIN_EXE_pi"))
        .args(["-p", "hello", "--provider", "faux", "--tools", "none", "--no-session", "--user", "alice"])
        .args(["--otlp", &base, "--conventions", "openinference"])
        .arg("--events-jsonl")
        .arg(dir.join("events.jsonl"))
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env_remove("PI_SPOOL_DIR")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .status()
        .unwrap();
    assert!(status.success());
    let evs = events(&dir.join("events.jsonl"));
    let end = evs.iter().find(|e| e.kind == EventKind::End && e.name == names::PROVIDER_REQUEST).unwrap();
    let cost = |key: &str| match end.payload.get(key) {
        Some(Value::F64(v)) => *v,
        other => panic!("{key}: {other:?}"),
    };
    let (total, input, output) = (cost(names::COST_TOTAL), cost(names::COST_INPUT), cost(names::COST_OUTPUT));
    assert!(total > 0.0, "faux-1 has a price in pi's catalogue");

    let trace = end.trace_id.to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    let span = loop {
        let page = get(&base, &format!("/v1/projects/pi/spans?trace_id={trace}&limit=100"));
        let spans = page.and_then(|p| p["data"].as_array().cloned()).unwrap_or_default();
        if let Some(span) = spans.into_iter().find(|s| s["span_kind"] == "LLM") {
            break span;
        }
        assert!(Instant::now() < deadline, "no LLM span of trace {trace} in Phoenix's project \"pi\"");
        std::thread::sleep(Duration::from_millis(200));
    };
    let attributes = &span["attributes"];
    assert_eq!(attributes["llm.model_name"], "faux-1", "a model Phoenix's price table does not have");
    let number = |key: &str| attributes[key].as_f64().unwrap_or_else(|| panic!("{key} missing: {attributes}"));
    assert!((number("llm.cost.total") - total).abs() < 1e-12);
    assert!((number("llm.cost.prompt") - input).abs() < 1e-12);
    assert!((number("llm.cost.completion") - output).abs() < 1e-12);
    std::fs::remove_dir_all(&dir).unwrap();
}
