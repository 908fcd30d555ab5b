//! The harness on the faux provider: multi-turn with parallel tools, aborts, the contract
//! event tree, attribution on every event (including spawned tool tasks), and the session file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pi_agent::events::AgentEvent;
use pi_agent::message::{Message, StopReason};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::{EntryKind, SessionWriter, read_session};
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig, PromptResult};
use pi_observe_core::testing::{CaptureSubscriber, RecordedSpan, assert_paired, span_named};
use pi_observe_core::{Attribution, EventKind, ObsEvent, Observability, Value, names};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch("harness", name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("a.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn add(a: i32, b: i32) -> i32 { a - b }\n").unwrap();
    dir
}

fn agent(dir: &Path, faux: Arc<FauxProvider>, session: bool) -> Agent {
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = session.then(|| SessionWriter::create(&dir.join("session.jsonl"), dir).unwrap());
    Agent::new(faux, model, ToolRegistry::all_builtin(), session, AgentConfig::default(), dir.to_owned())
}

struct Run {
    result: PromptResult,
    events: Vec<ObsEvent>,
    agent_events: Vec<AgentEvent>,
}

fn run(agent: &mut Agent, prompt: &str, cancel_on: impl Fn(&AgentEvent) -> bool + Send + Sync) -> Run {
    run_with_token(agent, prompt, CancellationToken::new(), cancel_on)
}

fn run_with_token(
    agent: &mut Agent,
    prompt: &str,
    cancel: CancellationToken,
    cancel_on: impl Fn(&AgentEvent) -> bool + Send + Sync,
) -> Run {
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut agent_events = Vec::new();
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme");
    let result = runtime.block_on(hub.run_with_context(user, async {
        let mut sink = |event: AgentEvent| {
            if cancel_on(&event) {
                cancel.cancel();
            }
            agent_events.push(event);
        };
        agent.prompt(prompt, &cancel, &mut sink).await.unwrap()
    }));
    Run { result, events: capture.take(), agent_events }
}

fn children<'a>(spans: &'a [RecordedSpan], parent: &RecordedSpan, name: &str) -> Vec<&'a RecordedSpan> {
    spans.iter().filter(|s| s.parent_span_id == Some(parent.span_id) && s.name == name).collect()
}

fn script() -> Vec<FauxResponse> {
    vec![
        FauxResponse::tools(Some("Looking around."), vec![("ls", json!({})), ("read", json!({"path": "a.txt"}))]),
        FauxResponse::tools(
            None,
            vec![("bash", json!({"command": "echo from-bash"})), ("grep", json!({"pattern": "a - b"}))],
        ),
        FauxResponse::text("All done."),
    ]
}

#[test]
fn multi_turn_run_with_parallel_tools_forms_the_documented_tree() {
    let dir = scratch("tree");
    let faux = Arc::new(FauxProvider::new());
    faux.push(script());
    let mut agent = agent(&dir, faux.clone(), true);
    let run = run(&mut agent, "inspect the project", |_| false);

    assert_eq!(run.result.stop_reason, StopReason::Stop);
    assert_eq!(run.result.turns, 3);
    assert_eq!(faux.remaining(), 0);
    assert!(run.result.usage.total_tokens > 0 && run.result.usage.cost.total > 0.0);

    let spans = assert_paired(&run.events);
    let prompt = span_named(&spans, names::AGENT_PROMPT);
    assert!(prompt.parent_span_id.is_none());
    let turns = children(&spans, prompt, names::AGENT_TURN);
    assert_eq!(turns.len(), 3);
    for (i, turn) in turns.iter().enumerate() {
        assert_eq!(turn.attributes.get(names::TURN_INDEX), Some(&Value::I64(i as i64)));
        assert_eq!(children(&spans, turn, names::PROVIDER_REQUEST).len(), 1);
        let tools = children(&spans, turn, names::AGENT_TOOL_CALL);
        assert_eq!(tools.len(), if i < 2 { 2 } else { 0 });
        for tool in tools {
            let appends = tool.events.iter().filter(|e| e.name == names::AGENT_SESSION_APPEND_ENTRY).count();
            assert_eq!(appends, 1, "each tool call appends its result: an event on the tool's span");
            assert!(children(&spans, tool, names::AGENT_SESSION_APPEND_ENTRY).is_empty(), "no storage spans");
            assert_eq!(tool.attributes.get(names::IS_ERROR), Some(&Value::Bool(false)));
        }
    }
    // The user message and assistant messages are appended under the prompt and turns, as
    // events: storage makes no spans of its own.
    let appended = |span: &pi_observe_core::testing::RecordedSpan| {
        span.events.iter().filter(|e| e.name == names::AGENT_SESSION_APPEND_ENTRY).count()
    };
    assert!(appended(prompt) + turns.iter().map(|t| appended(t)).sum::<usize>() >= 2);
    assert!(spans.iter().all(|s| s.name != names::SESSION_WRITE && s.name != names::AGENT_SESSION_APPEND_ENTRY));

    // Attribution on every event, including those from spawned tool tasks.
    for event in &run.events {
        assert_eq!(event.context.get(names::CTX_USER_ID), Some("u1"), "{event}");
        assert_eq!(event.context.get(names::CTX_ORG_ID), Some("acme"), "{event}");
    }
    // Default policy: no content reached the subscriber.
    let dump: String = run.events.iter().map(ObsEvent::to_json).collect();
    for secret in ["inspect the project", "Looking around", "alpha", "from-bash", "All done"] {
        assert!(!dump.contains(secret), "{secret} leaked into events");
    }
    let request = children(&spans, turns[0], names::PROVIDER_REQUEST)[0];
    assert_eq!(request.attributes.get(names::STOP_REASON), Some(&Value::from("toolUse")));
    assert!(request.events.iter().any(|e| e.name == names::PROVIDER_FIRST_TOKEN));
    assert!(run.events.iter().any(|e| e.kind == EventKind::Event && e.name == names::PROVIDER_USAGE));

    // Session: results in source order, attribution recorded, totals match.
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let kinds: Vec<String> = session
        .entries
        .iter()
        .map(|e| match &e.kind {
            EntryKind::Message { message: Message::ToolResult(m) } => format!("toolResult:{}", m.tool_name),
            EntryKind::Message { message } => message.role().to_owned(),
            other => other.type_name().to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "custom", // the attribution
            "custom", // the trace
            "user",
            "assistant",
            "toolResult:ls",
            "toolResult:read",
            "assistant",
            "toolResult:bash",
            "toolResult:grep",
            "assistant"
        ]
    );
    let EntryKind::Custom { data, .. } = &session.entries[1].kind else { panic!() };
    assert_eq!(data["userId"], "u1");
    let totals = session.totals();
    assert_eq!(totals.usage.total_tokens, run.result.usage.total_tokens);
    assert_eq!(totals.assistant_messages, 3);
    // Tree links: every entry's parent is the previous one.
    for pair in session.entries.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn agent_events_follow_the_documented_order() {
    let dir = scratch("order");
    let faux = Arc::new(FauxProvider::new());
    faux.push(script());
    let mut agent = agent(&dir, faux, false);
    let run = run(&mut agent, "go", |_| false);
    let compact: Vec<String> = run
        .agent_events
        .iter()
        .filter(|e| !matches!(e, AgentEvent::MessageUpdate { .. } | AgentEvent::ToolExecutionUpdate { .. }))
        .map(|e| match e {
            AgentEvent::MessageStart { role } => format!("start:{role}"),
            AgentEvent::ToolExecutionStart { tool_name, .. } => format!("exec_start:{tool_name}"),
            AgentEvent::ToolExecutionEnd { .. } => "exec_end".to_owned(),
            other => serde_json::to_value(other).unwrap()["type"].as_str().unwrap().to_owned(),
        })
        .collect();
    // As upstream pi documents for parallel tools: every `tool_execution_start` in source order
    // first, then per call, in source order, `tool_execution_end` and its result message.
    let turn_with_tools = |a: &str, b: &str| {
        vec![
            "turn_start".to_owned(),
            "start:assistant".into(),
            "message_end".into(),
            format!("exec_start:{a}"),
            format!("exec_start:{b}"),
            "exec_end".into(),
            "start:toolResult".into(),
            "message_end".into(),
            "exec_end".into(),
            "start:toolResult".into(),
            "message_end".into(),
            "turn_end".into(),
        ]
    };
    let mut expected: Vec<String> =
        vec!["session_start".into(), "agent_start".into(), "start:user".into(), "message_end".into()];
    expected.extend(turn_with_tools("ls", "read"));
    expected.extend(turn_with_tools("bash", "grep"));
    expected.extend(
        ["turn_start", "start:assistant", "message_end", "turn_end", "agent_end", "agent_settled"].map(String::from),
    );
    assert_eq!(compact, expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn abort_during_a_stream_ends_cleanly_with_spans_closed_and_session_consistent() {
    let dir = scratch("abort-stream");
    let faux = Arc::new(FauxProvider::new().chunk_chars(2).chunk_delay(Duration::from_millis(5)));
    faux.push([FauxResponse::text("a long answer that streams slowly ".repeat(20))]);
    let mut agent = agent(&dir, faux, true);
    let run = run(&mut agent, "talk", |e| matches!(e, AgentEvent::MessageUpdate { .. }));
    assert_eq!(run.result.stop_reason, StopReason::Aborted);
    let spans = assert_paired(&run.events);
    let request = span_named(&spans, names::PROVIDER_REQUEST);
    assert_eq!(request.attributes.get(names::ABORTED), Some(&Value::Bool(true)));
    assert_eq!(request.error.as_ref().unwrap().name, names::ERROR_CANCELLED);
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let Some(EntryKind::Message { message: Message::Assistant(last) }) = session.entries.last().map(|e| &e.kind) else {
        panic!("last entry is not the aborted assistant message")
    };
    assert_eq!(last.stop_reason, StopReason::Aborted);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn abort_during_a_tool_kills_it_and_records_an_aborted_result() {
    let dir = scratch("abort-tool");
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(
            None,
            vec![("bash", json!({"command": "touch bash-started; sleep 30; echo never"})), ("ls", json!({}))],
        ),
        FauxResponse::text("unreachable"),
    ]);
    let mut agent = agent(&dir, faux.clone(), true);
    let started = std::time::Instant::now();
    // Abort once bash is really running (its marker file exists).
    let cancel = CancellationToken::new();
    let (marker, token) = (dir.join("bash-started"), cancel.clone());
    let watcher = std::thread::spawn(move || {
        while !marker.exists() && started.elapsed() < Duration::from_secs(20) {
            std::thread::yield_now();
        }
        token.cancel();
    });
    let run = run_with_token(&mut agent, "run it", cancel, |_| false);
    watcher.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "bash was not killed on abort");
    assert_eq!(run.result.stop_reason, StopReason::Aborted);
    assert_eq!(faux.remaining(), 1, "no further turn after the abort");
    let spans = assert_paired(&run.events);
    let bash = spans
        .iter()
        .find(|s| s.name == names::AGENT_TOOL_CALL && s.attributes.get(names::TOOL_NAME) == Some(&Value::from("bash")))
        .unwrap();
    assert_eq!(bash.attributes.get(names::IS_ERROR), Some(&Value::Bool(true)));
    let results = common::tool_results_in(&dir.join("session.jsonl"));
    assert_eq!(results.len(), 2, "both results persisted, in source order");
    assert_eq!(results[0].tool_name, "bash");
    assert!(results[0].is_error && pi_agent::message::joined_text(&results[0].content).contains("aborted"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn provider_failure_ends_the_prompt_with_an_error_span_and_persisted_error_message() {
    let dir = scratch("fail");
    let faux = Arc::new(FauxProvider::new());
    let mut agent = agent(&dir, faux, true);
    let run = run(&mut agent, "hello", |_| false);
    assert_eq!(run.result.stop_reason, StopReason::Error);
    assert!(run.result.error.is_some());
    let spans = assert_paired(&run.events);
    assert_eq!(span_named(&spans, names::PROVIDER_REQUEST).error.as_ref().unwrap().name, "NoMoreResponses");
    assert!(span_named(&spans, names::AGENT_PROMPT).error.is_some());
    std::fs::remove_dir_all(&dir).unwrap();
}
