//! A process extension (Python, stdlib only) answering every reply shape of the protocol,
//! chained with a Rust extension registered on the same agent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pi_agent::events::AgentEvent;
use pi_agent::extensions::process::{ProcessExtension, ProcessSpec};
use pi_agent::extensions::{InputAction, extension, hooks};
use pi_agent::message::{Message, joined_text};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/extensions/shapes.py")
}

#[test]
fn every_reply_shape_applies_and_chains_with_a_rust_extension() {
    let dir = std::env::temp_dir().join(format!("pi-process-shapes-{}", pi_observe_core::SpanId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.join("b.txt"), "beta").unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let process = runtime.block_on(ProcessExtension::start(ProcessSpec::new(fixture(), fixture(), &dir))).unwrap();
    // The Rust extension runs after the process one and sees its decisions.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let shared = seen.clone();
    let rust = extension("rust-after", move |api| {
        let log = shared.clone();
        api.on(hooks::Input, move |event, _ctx| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(format!("input {}", event.text));
                Ok(Some(InputAction::Continue))
            }
        });
        let log = shared.clone();
        api.on(hooks::ToolCall, move |event, _ctx| {
            let log = log.clone();
            async move {
                log.lock().unwrap().push(format!("tool_call {} {}", event.tool_name, event.input));
                Ok(None)
            }
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(
            Some("Reading."),
            vec![("read", json!({"path": "a.txt"})), ("bash", json!({"command": "ls"}))],
        ),
        FauxResponse::text("original answer"),
    ]);
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("s.jsonl"), &dir).unwrap();
    let mut agent = Agent::new(
        faux.clone(),
        model,
        ToolRegistry::all_builtin(),
        Some(session),
        AgentConfig::default(),
        dir.clone(),
    );
    agent.add_extension(&process);
    agent.add_extension(&rust);
    let cancel = CancellationToken::new();
    let mut events = Vec::new();
    let result = runtime.block_on(async {
        let mut sink = |e: AgentEvent| events.push(e);
        agent.prompt("hello", &cancel, &mut sink).await.unwrap()
    });
    let failures: Vec<&AgentEvent> = events.iter().filter(|e| matches!(e, AgentEvent::ExtensionError { .. })).collect();
    assert!(failures.is_empty(), "{failures:?}");

    // input: transformed by the process extension, seen so by the Rust one.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], "input hello [py]");
    // tool_call: the process extension changed read's path; the Rust one saw the change; bash
    // was blocked before the Rust handler ran.
    assert_eq!(seen[1], r#"tool_call read {"path":"b.txt"}"#);
    assert_eq!(seen.len(), 2, "{seen:?}");
    let sent = faux.sent();
    let first = &sent[0];
    assert_eq!(first.headers.get("x-py").map(String::as_str), Some("1"), "headers patched");
    assert_eq!(first.payload["py_marker"], true, "payload replaced");
    let body = first.payload.to_string();
    assert!(body.contains("PY-SYSTEM") && body.contains("note from py") && body.contains("py-context"), "{body}");
    // tool_result: patched content reaches the model on the next request.
    let second = sent[1].payload.to_string();
    assert!(second.contains("PY:beta"), "{second}");
    assert!(second.contains("py says no"), "the block reason is the bash result");
    // message_end: the final answer was replaced before it was persisted.
    let Message::Assistant(answer) = agent.messages().last().unwrap() else { panic!() };
    assert_eq!(joined_text(&answer.content), "PY-REPLACED");
    assert_eq!(result.stop_reason, pi_agent::message::StopReason::Stop);

    // input handled: the agent does not start.
    let before = faux.sent().len();
    runtime.block_on(async {
        let mut sink = |_: AgentEvent| {};
        agent.prompt("handled please", &cancel, &mut sink).await.unwrap()
    });
    assert_eq!(faux.sent().len(), before, "a handled input starts no turn");

    // session_before_compact: the extension's summary is used, no summarizer call.
    let compacted = runtime.block_on(async {
        let mut sink = |_: AgentEvent| {};
        agent.compact(None, &cancel, &mut sink).await
    });
    assert!(compacted.is_ok(), "{compacted:?}");
    let summary: Vec<Value> = std::fs::read_to_string(dir.join("s.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["type"] == "compaction")
        .collect();
    assert_eq!(summary[0]["summary"], "py summary");
    runtime.block_on(process.shutdown());
    std::fs::remove_dir_all(&dir).unwrap();
}
