//! The extension control plane on the faux provider: every hook's chaining semantics with
//! handlers from two or three extensions, failure reporting, the event order extensions see,
//! and the `pi.agent.hook` spans that make their latency visible.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::{Log, log_on};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_agent::events::AgentEvent;
use pi_agent::extensions::{
    BeforeAgentStartResult, BeforeCompactEvent, BeforeResult, BeforeTreeEvent, Extension, HeaderPatch, HookContext,
    Hooks, InjectedMessage, InputAction, ToolCallResult, ToolResultPatch, extension, hooks,
};
use pi_agent::message::{ContentBlock, Message, StopReason};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse, ProviderError};
use pi_agent::session::{EntryKind, SessionWriter, read_session};
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig, PromptResult};
use pi_observe_core::testing::{CaptureSubscriber, RecordedSpan, assert_paired};
use pi_observe_core::{Attribution, ObsEvent, Observability, Value as ObsValue, names};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch("extensions", name);
    std::fs::write(dir.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(dir.join("b.txt"), "beta\n").unwrap();
    dir
}

fn agent(dir: &Path, faux: Arc<FauxProvider>, extensions: &[&dyn Extension]) -> Agent {
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("session.jsonl"), dir).unwrap();
    let mut agent =
        Agent::new(faux, model, ToolRegistry::all_builtin(), Some(session), AgentConfig::default(), dir.to_owned());
    for extension in extensions {
        agent.add_extension(*extension);
    }
    agent
}

struct Run {
    result: PromptResult,
    events: Vec<ObsEvent>,
    agent_events: Vec<AgentEvent>,
}

fn run(agent: &mut Agent, prompt: &str) -> Run {
    let hub = Observability::new();
    let (capture, _sub) = CaptureSubscriber::attach(&hub);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cancel = CancellationToken::new();
    let mut agent_events = Vec::new();
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme");
    let result = runtime.block_on(hub.run_with_context(user, async {
        let mut sink = |event: AgentEvent| agent_events.push(event);
        agent.prompt(prompt, &cancel, &mut sink).await.unwrap()
    }));
    Run { result, events: capture.take(), agent_events }
}

fn hook_spans(events: &[ObsEvent]) -> Vec<RecordedSpan> {
    assert_paired(events).into_iter().filter(|s| s.name == names::AGENT_HOOK).collect()
}

fn hook_summary(span: &RecordedSpan) -> String {
    let get = |key: &str| match span.attributes.get(key) {
        Some(ObsValue::Str(s)) => s.to_string(),
        other => format!("{other:?}"),
    };
    format!("{} {} {}", get(names::HOOK_NAME), get(names::EXTENSION_NAME), get(names::HOOK_OUTCOME))
}

fn user_texts(messages: &Value) -> Vec<String> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().map(str::to_owned).unwrap_or_else(|| m["content"].to_string()))
        .collect()
}

#[test]
fn input_transforms_chain_and_the_first_handled_wins() {
    let dir = scratch("input");
    let log = Log::default();
    let (l1, l2, l3, l4) = (log.clone(), log.clone(), log.clone(), log.clone());
    let upper = extension("upper", move |api| {
        let log = l1.clone();
        api.on(hooks::Input, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("upper saw {}", event.text));
                Ok(Some(InputAction::Transform { text: event.text.to_uppercase() }))
            }
        });
    });
    let suffix = extension("suffix", move |api| {
        let log = l2.clone();
        api.on(hooks::Input, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("suffix saw {} from {}", event.text, event.source.as_str()));
                Ok(Some(InputAction::Transform { text: format!("{}!", event.text) }))
            }
        });
    });
    let ping = extension("ping", move |api| {
        let log = l3.clone();
        api.on(hooks::Input, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("ping saw {}", event.text));
                Ok((event.text == "PING!").then_some(InputAction::Handled))
            }
        });
    });
    let late = extension("late", move |api| {
        let log = l4.clone();
        api.on(hooks::Input, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("late saw {}", event.text));
                Ok(Some(InputAction::Handled))
            }
        });
    });

    // "ping" is transformed to "PING!" and handled by `ping`: `late` never runs, no request.
    let faux = Arc::new(FauxProvider::new());
    let mut handled = agent(&dir, faux.clone(), &[&upper, &suffix, &ping, &late]);
    let run1 = run(&mut handled, "ping");
    assert_eq!(run1.result.handled_by.as_deref(), Some("ping"));
    assert_eq!(run1.result.turns, 0);
    assert!(faux.sent().is_empty(), "a handled input never reaches the provider");
    assert!(!run1.agent_events.contains(&AgentEvent::AgentStart), "the agent does not start");
    assert_eq!(
        log.lines(),
        ["upper saw ping", "suffix saw PING from interactive", "ping saw PING!", "late saw PING!"][..3]
    );
    let summaries: Vec<String> = hook_spans(&run1.events).iter().map(hook_summary).collect();
    assert_eq!(summaries, ["input upper transformed", "input suffix transformed", "input ping handled"]);

    // Without a handler that handles it, the transformed text is the prompt.
    let dir2 = scratch("input-2");
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("ok")]);
    let mut transformed = agent(&dir2, faux.clone(), &[&upper, &suffix]);
    let run2 = run(&mut transformed, "hello");
    assert_eq!(run2.result.handled_by, None);
    let sent = faux.sent();
    assert_eq!(user_texts(&sent[0].payload["messages"]), ["HELLO!"]);
    for d in [dir, dir2] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn before_agent_start_collects_messages_and_chains_the_system_prompt() {
    let dir = scratch("before-start");
    let first = extension("first", |api| {
        api.on(hooks::BeforeAgentStart, |event, _| async move {
            Ok(Some(BeforeAgentStartResult {
                messages: vec![InjectedMessage {
                    custom_type: "first".into(),
                    content: "ctx one".into(),
                    display: true,
                }],
                system_prompt: Some(format!("{} +first", event.system_prompt.unwrap_or_default())),
            }))
        });
    });
    let second = extension("second", |api| {
        api.on(hooks::BeforeAgentStart, |event, _| async move {
            assert!(event.system_prompt.as_deref().unwrap().ends_with("+first"), "sees the chained prompt");
            Ok(Some(BeforeAgentStartResult {
                messages: vec![InjectedMessage {
                    custom_type: "second".into(),
                    content: "ctx two".into(),
                    display: false,
                }],
                system_prompt: Some(format!("{} +second", event.system_prompt.unwrap_or_default())),
            }))
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("ok")]);
    let mut agent = agent(&dir, faux.clone(), &[&first, &second]);
    let run = run(&mut agent, "task");
    assert_eq!(run.result.stop_reason, StopReason::Stop);
    let sent = &faux.sent()[0].payload;
    assert!(sent["system"].as_str().unwrap().ends_with("+first +second"));
    assert_eq!(user_texts(&sent["messages"]), ["task", "ctx one", "ctx two"]);
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let injected: Vec<String> = session
        .entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::CustomMessage { custom_type, .. } => Some(custom_type.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(injected, ["first", "second"], "injected messages are persisted in order");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn context_replacements_chain_on_copies() {
    let dir = scratch("context");
    let log = Log::default();
    let l = log.clone();
    let drop_first = extension("drop-first", |api| {
        api.on(hooks::Context, |event, _| async move { Ok(Some(event.messages.into_iter().skip(1).collect())) });
    });
    let add_note = extension("add-note", move |api| {
        let log = l.clone();
        api.on(hooks::Context, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("add-note saw {} messages", event.messages.len()));
                let mut messages = event.messages;
                messages.push(Message::user("note from add-note"));
                Ok(Some(messages))
            }
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("one"), FauxResponse::text("two")]);
    let mut agent = agent(&dir, faux.clone(), &[&drop_first, &add_note]);
    run(&mut agent, "first prompt");
    run(&mut agent, "second prompt");
    let sent = faux.sent();
    // Turn 2 has [user1, assistant1, user2]: drop-first removes user1, add-note appends its note.
    assert_eq!(user_texts(&sent[1].payload["messages"]), ["second prompt", "note from add-note"]);
    assert_eq!(log.lines(), ["add-note saw 0 messages", "add-note saw 2 messages"]);
    // The agent's own conversation is untouched: handlers work on copies.
    assert_eq!(agent.messages().len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn provider_headers_chain_once_per_request_and_retries_reuse_them() {
    let dir = scratch("headers");
    let calls = Log::default();
    let (c1, c2) = (calls.clone(), calls.clone());
    let tracer = extension("trace-header", move |api| {
        let calls = c1.clone();
        api.on(hooks::BeforeProviderHeaders, move |event, _| {
            let calls = calls.clone();
            async move {
                calls.push(format!("trace-header saw {:?}", event.headers.keys().collect::<Vec<_>>()));
                Ok(Some(HeaderPatch::from([("X-Request-Tag".to_owned(), Some("tag-1".to_owned()))])))
            }
        });
    });
    let cleaner = extension("cleaner", move |api| {
        let calls = c2.clone();
        api.on(hooks::BeforeProviderHeaders, move |event, _| {
            let calls = calls.clone();
            async move {
                calls.push(format!("cleaner saw {:?}", event.headers.get("x-request-tag")));
                Ok(Some(HeaderPatch::from([("x-faux-version".to_owned(), None)])))
            }
        });
    });
    let statuses = Log::default();
    let s = statuses.clone();
    let observer =
        extension("observer", move |api| log_on(api, hooks::AfterProviderResponse, &s, |e| e.status.to_string()));
    let faux = Arc::new(FauxProvider::new());
    let unavailable = ProviderError::Http { status: 503, message: "busy".into(), retry_after: None };
    faux.push([FauxResponse::error(unavailable), FauxResponse::text("ok")]);
    let mut agent = agent(&dir, faux.clone(), &[&tracer, &cleaner, &observer]);
    let run = run(&mut agent, "hi");
    assert_eq!(run.result.stop_reason, StopReason::Stop);
    assert_eq!(calls.lines(), ["trace-header saw [\"x-faux-version\"]", "cleaner saw Some(\"tag-1\")"]);
    let sent = faux.sent();
    assert_eq!(sent.len(), 2, "one retry");
    for attempt in &sent {
        assert_eq!(attempt.headers.get("x-request-tag").map(String::as_str), Some("tag-1"));
        assert!(!attempt.headers.contains_key("x-faux-version"), "deleted by the second handler");
    }
    assert_eq!(statuses.lines(), ["503", "200"], "after_provider_response sees every attempt");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn provider_payload_replacements_chain_and_are_sent() {
    let dir = scratch("payload");
    let first = extension("temperature", |api| {
        api.on(hooks::BeforeProviderRequest, |event, _| async move {
            let mut payload = event.payload;
            payload["temperature"] = json!(0);
            Ok(Some(payload))
        });
    });
    let second = extension("tagger", |api| {
        api.on(hooks::BeforeProviderRequest, |event, _| async move {
            assert_eq!(event.payload["temperature"], json!(0), "sees the earlier replacement");
            let mut payload = event.payload;
            payload["metadata"] = json!({"tag": "t"});
            Ok(Some(payload))
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("ok")]);
    let mut agent = agent(&dir, faux.clone(), &[&first, &second]);
    run(&mut agent, "hi");
    let sent = &faux.sent()[0].payload;
    assert_eq!(sent["temperature"], json!(0));
    assert_eq!(sent["metadata"]["tag"], "t");
    assert_eq!(sent["model"], "faux-1");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tool_call_input_changes_chain_the_first_block_wins_and_a_failure_blocks() {
    let dir = scratch("tool-call");
    let log = Log::default();
    let (l1, l2) = (log.clone(), log.clone());
    let redirect = extension("redirect", move |api| {
        let log = l1.clone();
        api.on(hooks::ToolCall, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("redirect saw {} {}", event.tool_name, event.input));
                Ok((event.tool_name == "read").then(|| ToolCallResult::input(json!({"path": "b.txt"}))))
            }
        });
    });
    let gate = extension("gate", |api| {
        api.on(hooks::ToolCall, |event, _| async move {
            if event.tool_name == "bash" {
                return Ok(Some(ToolCallResult::block("no shell today")));
            }
            if event.tool_name == "ls" {
                return Err("gate database unavailable".into());
            }
            Ok(None)
        });
    });
    let after = extension("after", move |api| {
        let log = l2.clone();
        api.on(hooks::ToolCall, move |event, _| {
            let log = log.clone();
            async move {
                log.push(format!("after saw {} {}", event.tool_name, event.input));
                Ok(None)
            }
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(
            None,
            vec![("read", json!({"path": "a.txt"})), ("bash", json!({"command": "touch ran.txt"})), ("ls", json!({}))],
        ),
        FauxResponse::text("done"),
    ]);
    let mut agent = agent(&dir, faux.clone(), &[&redirect, &gate, &after]);
    let run = run(&mut agent, "go");
    assert_eq!(run.result.stop_reason, StopReason::Stop);
    // `after` runs only for the call nobody blocked, and sees the redirected input.
    assert_eq!(
        log.lines(),
        [
            "redirect saw read {\"path\":\"a.txt\"}",
            "after saw read {\"path\":\"b.txt\"}",
            "redirect saw bash {\"command\":\"touch ran.txt\"}",
            "redirect saw ls {}",
        ]
    );
    assert!(!dir.join("ran.txt").exists(), "a blocked tool does not run");
    let results: Vec<(String, bool, String)> = agent
        .messages()
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => {
                Some((r.tool_name.clone(), r.is_error, pi_agent::message::joined_text(&r.content)))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results[0], ("read".into(), false, "beta".into()), "the tool ran with the new input");
    assert_eq!(results[1], ("bash".into(), true, "no shell today".into()), "the model gets the reason");
    assert!(results[2].1 && results[2].2.contains("gate database unavailable"), "a failing handler blocks");
    let failures: Vec<&AgentEvent> =
        run.agent_events.iter().filter(|e| matches!(e, AgentEvent::ExtensionError { .. })).collect();
    assert_eq!(
        failures,
        [&AgentEvent::ExtensionError {
            extension: "gate".into(),
            hook: "tool_call".into(),
            error: "gate database unavailable".into()
        }]
    );
    let spans = assert_paired(&run.events);
    let bash = spans
        .iter()
        .find(|s| {
            s.name == names::AGENT_TOOL_CALL && s.attributes.get(names::TOOL_NAME) == Some(&ObsValue::from("bash"))
        })
        .unwrap();
    assert_eq!(bash.attributes.get(names::BLOCKED), Some(&ObsValue::Bool(true)));
    assert_eq!(bash.attributes.get(names::BLOCKED_BY), Some(&ObsValue::from("gate")));
    let summaries: Vec<String> = hook_spans(&run.events).iter().map(hook_summary).collect();
    assert!(summaries.contains(&"tool_call gate blocked".to_owned()));
    assert!(summaries.contains(&"tool_call gate failed".to_owned()));
    assert!(summaries.contains(&"tool_call redirect transformed".to_owned()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tool_result_patches_accumulate() {
    let dir = scratch("tool-result");
    let shout = extension("shout", |api| {
        api.on(hooks::ToolResult, |event, _| async move {
            let text = pi_agent::message::joined_text(&event.content).to_uppercase();
            Ok(Some(ToolResultPatch { content: Some(vec![ContentBlock::text(text)]), ..Default::default() }))
        });
    });
    let judge = extension("judge", |api| {
        api.on(hooks::ToolResult, |event, _| async move {
            let text = pi_agent::message::joined_text(&event.content);
            assert_eq!(text, "ALPHA", "sees the earlier patch");
            Ok(Some(ToolResultPatch { is_error: Some(true), details: Some(json!({"judged": true})), content: None }))
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::tools(None, vec![("read", json!({"path": "a.txt"}))]), FauxResponse::text("ok")]);
    let mut agent = agent(&dir, faux, &[&shout, &judge]);
    run(&mut agent, "read it");
    let result = common::tool_results_in(&dir.join("session.jsonl")).remove(0);
    assert_eq!(pi_agent::message::joined_text(&result.content), "ALPHA");
    assert!(result.is_error);
    assert_eq!(result.details, Some(json!({"judged": true})));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn message_end_replacements_chain_and_a_role_change_is_rejected() {
    let dir = scratch("message-end");
    let polish = extension("polish", |api| {
        api.on(hooks::MessageEnd, |event, _| async move {
            Ok(match event.message {
                Message::Assistant(mut m) => {
                    m.content = vec![ContentBlock::text(format!("{} (polished)", m.text()))];
                    Some(Message::Assistant(m))
                }
                _ => None,
            })
        });
    });
    let hijack = extension("hijack", |api| {
        api.on(hooks::MessageEnd, |event, _| async move {
            Ok(match event.message {
                Message::Assistant(m) => {
                    assert!(m.text().ends_with("(polished)"), "sees the earlier replacement");
                    Some(Message::user("I am a user now"))
                }
                _ => None,
            })
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("answer")]);
    let mut agent = agent(&dir, faux, &[&polish, &hijack]);
    let run = run(&mut agent, "q");
    assert_eq!(run.result.last_message.unwrap().text(), "answer (polished)");
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let persisted: Vec<String> = session
        .entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Message { message } => Some(format!("{}: {}", message.role(), text_of(message))),
            _ => None,
        })
        .collect();
    assert_eq!(persisted, ["user: q", "assistant: answer (polished)"], "the rejected replacement is not persisted");
    assert!(run.agent_events.iter().any(|e| matches!(
        e,
        AgentEvent::ExtensionError { extension, hook, error }
            if extension == "hijack" && hook == "message_end" && error.contains("role")
    )));
    std::fs::remove_dir_all(&dir).unwrap();
}

fn text_of(message: &Message) -> String {
    match message {
        Message::User(u) => u.content.text(),
        Message::Assistant(a) => a.text(),
        Message::ToolResult(r) => pi_agent::message::joined_text(&r.content),
        other => other.context_text().unwrap_or_default(),
    }
}

#[test]
fn session_before_hooks_the_first_cancel_wins_else_the_last_result() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let seen = Log::default();
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let summarizer = extension("summarizer", move |api| {
        let seen = s1.clone();
        api.on(hooks::SessionBeforeCompact, move |_, _| {
            let seen = seen.clone();
            async move {
                seen.push("summarizer");
                Ok(Some(BeforeResult::summary("short summary")))
            }
        });
        let seen = s1.clone();
        api.on(hooks::SessionBeforeTree, move |_, _| {
            let seen = seen.clone();
            async move {
                seen.push("summarizer tree");
                Ok(Some(BeforeResult::summary("branch summary")))
            }
        });
    });
    let veto = extension("veto", move |api| {
        let seen = s2.clone();
        api.on(hooks::SessionBeforeCompact, move |event, _| {
            let seen = seen.clone();
            async move {
                seen.push("veto");
                Ok((event.reason == "manual").then(BeforeResult::cancel))
            }
        });
    });
    let late = extension("late", move |api| {
        let seen = s3.clone();
        api.on(hooks::SessionBeforeCompact, move |_, _| {
            let seen = seen.clone();
            async move {
                seen.push("late");
                Ok(Some(BeforeResult::summary("late summary")))
            }
        });
    });
    let mut hooks = Hooks::new();
    for e in [&summarizer as &dyn Extension, &veto, &late] {
        hooks.add(e);
    }
    let ctx = HookContext::detached(Registry::builtin().find("faux", "faux-1").unwrap().clone());
    let compact = |reason: &str| BeforeCompactEvent {
        reason: reason.into(),
        tokens_before: 1000,
        messages_to_summarize: vec![Message::user("old")],
        kept_messages: 2,
        will_retry: false,
        previous_summary: None,
        custom_instructions: None,
    };
    runtime.block_on(async {
        let manual = hooks.session_before(hooks::SessionBeforeCompact, compact("manual"), &ctx).await;
        assert_eq!(manual, Some(("veto".into(), BeforeResult::cancel())), "the first cancel wins");
        assert_eq!(seen.lines(), ["summarizer", "veto"], "handlers after a cancel do not run");
        let threshold = hooks.session_before(hooks::SessionBeforeCompact, compact("threshold"), &ctx).await;
        assert_eq!(threshold, Some(("late".into(), BeforeResult::summary("late summary"))), "else the last result");
        let tree =
            BeforeTreeEvent { old_leaf_id: Some("aaaa0000".into()), target_id: "bbbb1111".into(), summarize: true };
        let tree = hooks.session_before(hooks::SessionBeforeTree, tree, &ctx).await;
        assert_eq!(tree, Some(("summarizer".into(), BeforeResult::summary("branch summary"))));
    });
}

#[test]
fn failing_and_panicking_handlers_are_reported_by_name_and_the_agent_continues() {
    let dir = scratch("failures");
    pi_observe_core::testing::silence_expected_panics(&["context handler exploded"]);
    let broken = extension("broken", |api| {
        api.on(hooks::Notify::TurnStart, |_, _| async move { Err("turn bookkeeping failed".into()) });
        api.on(hooks::Context, |_, _| async move { panic!("context handler exploded") });
    });
    let fine = extension("fine", |api| {
        api.on(hooks::Input, |event, _| async move {
            Ok(Some(InputAction::Transform { text: format!("{} please", event.text) }))
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("still answered")]);
    let mut agent = agent(&dir, faux.clone(), &[&broken, &fine]);
    let run = run(&mut agent, "work");
    assert_eq!(run.result.stop_reason, StopReason::Stop);
    assert_eq!(run.result.last_message.unwrap().text(), "still answered");
    assert_eq!(user_texts(&faux.sent()[0].payload["messages"]), ["work please"], "the panic changed nothing");
    let failures: Vec<(String, String)> = run
        .agent_events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ExtensionError { extension, hook, error } => {
                Some((format!("{extension}/{hook}"), error.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(failures[0], ("broken/turn_start".into(), "turn bookkeeping failed".into()));
    assert_eq!(failures[1].0, "broken/context");
    assert!(failures[1].1.contains("context handler exploded"));
    let spans = hook_spans(&run.events);
    let failed: Vec<String> = spans.iter().filter(|s| s.error.is_some()).map(hook_summary).collect();
    assert_eq!(failed, ["turn_start broken failed", "context broken failed"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn extensions_see_the_documented_event_order_and_every_hook_run_is_an_attributed_span() {
    let dir = scratch("order");
    let log = Log::default();
    let l = log.clone();
    let watcher = extension("watcher", move |api| {
        use hooks::Notify::*;
        for kind in [
            SessionStart,
            AgentStart,
            TurnStart,
            TurnEnd,
            MessageStart,
            ToolExecutionStart,
            ToolExecutionEnd,
            AgentEnd,
            AgentSettled,
        ] {
            log_on(api, kind, &l, |event| match event {
                AgentEvent::MessageStart { role } => format!("message_start:{role}"),
                AgentEvent::ToolExecutionStart { tool_name, .. } => format!("tool_execution_start:{tool_name}"),
                AgentEvent::ToolExecutionEnd { tool_name, .. } => format!("tool_execution_end:{tool_name}"),
                other => serde_json::to_value(other).unwrap()["type"].as_str().unwrap().to_owned(),
            });
        }
        log_on(api, hooks::Input, &l, |_| "input".into());
        log_on(api, hooks::BeforeAgentStart, &l, |_| "before_agent_start".into());
        log_on(api, hooks::Context, &l, |_| "context".into());
        log_on(api, hooks::BeforeProviderRequest, &l, |_| "before_provider_request".into());
        log_on(api, hooks::ToolCall, &l, |e| format!("tool_call:{}", e.tool_name));
        log_on(api, hooks::ToolResult, &l, |e| format!("tool_result:{}", e.tool_name));
        log_on(api, hooks::MessageEnd, &l, |e| format!("message_end:{}", e.message.role()));
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(None, vec![("read", json!({"path": "a.txt"})), ("ls", json!({}))]),
        FauxResponse::text("done"),
    ]);
    // Tools run one after another so the interleaving of tool_result is deterministic.
    let model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let session = SessionWriter::create(&dir.join("session.jsonl"), &dir).unwrap();
    let config = AgentConfig { parallel_tools: false, ..AgentConfig::default() };
    let mut agent = Agent::new(faux, model, ToolRegistry::all_builtin(), Some(session), config, dir.clone());
    agent.add_extension(&watcher);
    let run = run(&mut agent, "look");
    let turn_two = [
        "turn_start",
        "context",
        "before_provider_request",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
    ];
    let mut expected: Vec<&str> = vec![
        "session_start",
        "input",
        "before_agent_start",
        "agent_start",
        "message_start:user",
        "message_end:user",
        "turn_start",
        "context",
        "before_provider_request",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:read",
        "tool_call:read",
        "tool_execution_start:ls",
        "tool_call:ls",
        "tool_result:read",
        "tool_execution_end:read",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_result:ls",
        "tool_execution_end:ls",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
    ];
    expected.extend(turn_two);
    expected.extend(["agent_end", "agent_settled"]);
    assert_eq!(log.lines(), expected);

    // Every handler run is a paired `pi.agent.hook` span, attributed like the prompt.
    let spans = hook_spans(&run.events);
    assert_eq!(spans.len(), expected.len());
    for span in &spans {
        assert_eq!(span.attributes.get(names::EXTENSION_NAME), Some(&ObsValue::from("watcher")));
        assert_eq!(span.attributes.get(names::HOOK_OUTCOME), Some(&ObsValue::from("completed")));
        assert_eq!(span.context.get(names::CTX_USER_ID).map(String::as_str), Some("u1"));
        assert_eq!(span.context.get(names::CTX_ORG_ID).map(String::as_str), Some("acme"));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn message_update_handlers_see_every_streamed_delta_in_order() {
    let dir = scratch("updates");
    let log = Log::default();
    let l = log.clone();
    let watcher = extension("stream-watcher", move |api| {
        log_on(api, hooks::Notify::MessageUpdate, &l, |event| match event {
            AgentEvent::MessageUpdate { delta } => serde_json::to_string(delta).unwrap(),
            other => panic!("not an update: {other:?}"),
        });
    });
    let faux = Arc::new(FauxProvider::new().chunk_chars(3));
    faux.push([FauxResponse::text("streamed slowly in pieces")]);
    let mut agent = agent(&dir, faux, &[&watcher]);
    let run = run(&mut agent, "stream");
    let sink_updates: Vec<String> = run
        .agent_events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageUpdate { delta } => Some(serde_json::to_string(delta).unwrap()),
            _ => None,
        })
        .collect();
    assert_eq!(sink_updates.len(), 9, "25 characters in chunks of 3");
    assert_eq!(log.lines(), sink_updates);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tool_execution_update_carries_partial_output_before_the_end() {
    let dir = scratch("tool-updates");
    let log = Log::default();
    let l = log.clone();
    let watcher = extension("output-watcher", move |api| {
        log_on(api, hooks::Notify::ToolExecutionUpdate, &l, |event| match event {
            AgentEvent::ToolExecutionUpdate { output, .. } => format!("update:{output}"),
            other => panic!("not an update: {other:?}"),
        });
        log_on(api, hooks::Notify::ToolExecutionEnd, &l, |_| "end".into());
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(None, vec![("bash", json!({"command": "echo first; echo second"}))]),
        FauxResponse::text("ok"),
    ]);
    let mut agent = agent(&dir, faux, &[&watcher]);
    let run = run(&mut agent, "go");
    let lines = log.lines();
    assert_eq!(lines.last().map(String::as_str), Some("end"), "updates come before the end");
    let streamed: String = lines.iter().filter_map(|l| l.strip_prefix("update:")).collect();
    assert_eq!(streamed, "first\nsecond\n");
    let sink_updates = run.agent_events.iter().filter(|e| matches!(e, AgentEvent::ToolExecutionUpdate { .. })).count();
    assert_eq!(sink_updates, lines.len() - 1, "the sink sees the same updates");
    std::fs::remove_dir_all(&dir).unwrap();
}
