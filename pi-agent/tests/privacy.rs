//! No emitter classes free text from outside pi as safe: a run in which every source of outside
//! text carries a canary — the prompt, tool arguments and output, a file, a missing path, an
//! unknown tool name the model asks for, provider error bodies (retried and final), extension
//! errors and block reasons — leaves no canary in any record a default-policy sink receives,
//! while the error types and numbers still arrive. With error text captured, the text is there.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::Duration;

use pi_agent::extensions::{ToolCallResult, extension, hooks};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse, ProviderError};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig};
use pi_observe_core::testing::CaptureSubscriber;
use pi_observe_core::{Class, ContentKind, ContentPolicy, ObsEvent, Observability, Value, names};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const CANARY: &str = "OUTSIDEcanary3e9";

fn run_with_canaries(policy: ContentPolicy) -> Vec<ObsEvent> {
    let dir = std::env::temp_dir().join(format!("pi-privacy-{CANARY}-{}", pi_observe_core::SpanId::random()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), format!("{CANARY} in a file\n")).unwrap();
    // Its name is the extension's own text too: not identifier-shaped, so never exported.
    let gate = extension(format!("{CANARY} gate"), |api| {
        api.on(hooks::ToolCall, |event, _| async move {
            match event.tool_name.as_str() {
                "write" => Ok(Some(ToolCallResult::block(format!("{CANARY} writes are off")))),
                "ls" => Err(format!("{CANARY} policy store down").into()),
                _ => Ok(None),
            }
        });
        api.on(hooks::Notify::TurnStart, |_, _| async move { Err(format!("{CANARY} bookkeeping").into()) });
    });
    let faux = Arc::new(FauxProvider::new());
    let http = |status, message: String| ProviderError::Http { status, message, retry_after: Some(Duration::ZERO) };
    faux.push([
        FauxResponse::error(http(503, format!("{CANARY} upstream body"))),
        FauxResponse::error(ProviderError::Network(format!("{CANARY} reset by {CANARY}.internal"))),
        FauxResponse::tools(
            Some("on it"),
            vec![
                ("bash", json!({"command": format!("echo DB_PASSWORD={CANARY}; echo {CANARY}; exit 1")})),
                ("read", json!({"path": "notes.txt"})),
                ("read", json!({"path": format!("/nonexistent/{CANARY}/x")})),
                ("write", json!({"path": "x.txt", "content": CANARY})),
                ("ls", json!({})),
                (&*format!("tool_{CANARY}"), json!({})),
            ],
        ),
        FauxResponse::error(http(400, format!("{CANARY} bad request"))),
    ]);
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("session.jsonl"), &dir).unwrap();
    let mut agent =
        Agent::new(faux, model, ToolRegistry::all_builtin(), Some(session), AgentConfig::default(), dir.clone());
    agent.add_extension(&gate);
    let hub = Observability::new();
    let capture = CaptureSubscriber::new();
    let _sub = hub.subscribe_with_policy(capture.clone(), policy);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cancel = CancellationToken::new();
    let result = runtime.block_on(hub.scope(async {
        let mut ignore = |_| {};
        agent.prompt(&format!("{CANARY} prompt"), &cancel, &mut ignore).await.unwrap()
    }));
    assert!(result.error.is_some(), "the final provider error ends the prompt");
    std::fs::remove_dir_all(&dir).unwrap();
    capture.take()
}

#[test]
fn no_emitter_exports_outside_text_as_safe() {
    let events = run_with_canaries(ContentPolicy::default());
    for event in &events {
        let json = event.to_json();
        assert!(!json.contains(CANARY), "outside text exported by default in {}: {json}", event.name);
        // Structurally too: no safe string field carries it (before JSON encoding).
        for field in event.payload.iter().filter(|f| f.class == Class::Safe) {
            assert!(!field.value.to_string().contains(CANARY), "{}.{} is safe", event.name, field.key);
        }
    }
    // The types and numbers still arrive.
    let error_names: Vec<&str> = events.iter().filter_map(|e| e.error.as_ref()).map(|e| e.name.as_str()).collect();
    for expected in [
        names::ERROR_TOOL,
        names::ERROR_BLOCKED,
        names::ERROR_UNKNOWN_TOOL,
        names::ERROR_HOOK_FAILED,
        names::ERROR_HTTP_STATUS,
    ] {
        assert!(error_names.contains(&expected), "{expected} missing from {error_names:?}");
    }
    let retries: Vec<&ObsEvent> = events.iter().filter(|e| e.name == names::PROVIDER_RETRY).collect();
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0].payload.get(names::ERROR_TYPE), Some(&Value::from(names::ERROR_HTTP_STATUS)));
    assert_eq!(retries[0].payload.get(names::STATUS_CODE), Some(&Value::I64(503)));
    assert_eq!(retries[1].payload.get(names::ERROR_TYPE), Some(&Value::from(names::ERROR_NETWORK)));
    let unknown = events
        .iter()
        .find(|e| {
            e.name == names::AGENT_TOOL_CALL && e.error.as_ref().is_some_and(|x| x.name == names::ERROR_UNKNOWN_TOOL)
        })
        .unwrap();
    assert_eq!(unknown.payload.get(names::TOOL_NAME), Some(&Value::from("unknown")));
}

#[test]
fn captured_error_text_and_output_kinds_arrive_under_their_own_kinds() {
    let only = |kind| run_with_canaries(ContentPolicy::default().capture(kind));
    let has = |events: &[ObsEvent], key: &str| events.iter().any(|e| e.payload.get(key).is_some());
    let errors = only(ContentKind::ErrorText);
    let texts: Vec<&str> = errors.iter().filter_map(ObsEvent::exportable_error_message).collect();
    assert!(texts.iter().any(|t| t.contains(CANARY)), "{texts:?}");
    assert!(has(&errors, names::ERROR_TEXT), "retry text under errorText");
    assert!(!has(&errors, names::SHELL_OUTPUT) && !has(&errors, names::TOOL_RESULT));
    // Bash output is shell_output, read results file_content, other tools tool_result.
    let shell = only(ContentKind::ShellOutput);
    assert!(has(&shell, names::SHELL_OUTPUT) && !has(&shell, names::FILE_CONTENT) && !has(&shell, names::TOOL_RESULT));
    let files = only(ContentKind::FileContent);
    assert!(has(&files, names::FILE_CONTENT) && !has(&files, names::SHELL_OUTPUT));
    let captured = files.iter().find_map(|e| e.payload.get(names::FILE_CONTENT)).unwrap();
    assert!(captured.as_str().is_some_and(|t| t.contains(CANARY)));
    let results = only(ContentKind::ToolResult);
    assert!(has(&results, names::TOOL_RESULT) && !has(&results, names::SHELL_OUTPUT));
    // Captured error text is still scrubbed: the bash error's first line is a secret pair.
    assert!(texts.contains(&"DB_PASSWORD=[REDACTED]"), "{texts:?}");
}
