//! Compaction on the faux provider for all three reasons — threshold, overflow (compact, then
//! the turn is retried) and manual — with the summary's usage counted exactly once, extension
//! control (`session_before_compact`), the `pi.agent.compaction` span and resuming a compacted
//! session.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_agent::compaction::{CompactionSettings, summary_of};
use pi_agent::events::AgentEvent;
use pi_agent::extensions::{BeforeResult, extension, hooks};
use pi_agent::message::{Message, StopReason, Usage};
use pi_agent::model::{ModelInfo, Registry};
use pi_agent::provider::{FauxProvider, FauxResponse, ProviderError};
use pi_agent::session::{EntryKind, SessionWriter, read_session};
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig, PromptResult};
use pi_observe_core::testing::{CaptureSubscriber, RecordedSpan, assert_paired};
use pi_observe_core::{Attribution, ContentKind, ContentPolicy, ObsEvent, Observability, Value, names};
use tokio_util::sync::CancellationToken;

fn scratch(name: &str) -> PathBuf {
    common::scratch("compaction", name)
}

/// faux-1 with a 1,000-token window: compaction above 800 tokens, keeping ~100 recent tokens.
fn small_model() -> ModelInfo {
    let mut model = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    model.context_window = 1000;
    model
}

fn config() -> AgentConfig {
    AgentConfig {
        compaction: CompactionSettings { enabled: true, reserve_tokens: 200, keep_recent_tokens: 100 },
        ..AgentConfig::default()
    }
}

fn agent(dir: &Path, faux: Arc<FauxProvider>, model: ModelInfo) -> Agent {
    let session = SessionWriter::open_or_create(&dir.join("session.jsonl"), dir).unwrap();
    Agent::new(faux, model, ToolRegistry::all_builtin(), Some(session), config(), dir.to_owned())
}

struct Runs {
    results: Vec<PromptResult>,
    events: Vec<ObsEvent>,
    agent_events: Vec<AgentEvent>,
}

fn run(agent: &mut Agent, prompts: &[&str]) -> Runs {
    let hub = Observability::new();
    let (capture, _sub) =
        CaptureSubscriber::attach_with(&hub, ContentPolicy::default().capture(ContentKind::ErrorText));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut agent_events = Vec::new();
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme");
    let results = runtime.block_on(hub.run_with_context(user, async {
        let cancel = CancellationToken::new();
        let mut sink = |event: AgentEvent| agent_events.push(event);
        let mut results = Vec::new();
        for prompt in prompts {
            results.push(agent.prompt(prompt, &cancel, &mut sink).await.unwrap());
        }
        results
    }));
    Runs { results, events: capture.take(), agent_events }
}

fn compaction_spans(events: &[ObsEvent]) -> Vec<RecordedSpan> {
    assert_paired(events).into_iter().filter(|s| s.name == names::AGENT_COMPACTION).collect()
}

fn int(span: &RecordedSpan, key: &str) -> i64 {
    match span.attributes.get(key) {
        Some(Value::I64(v)) => *v,
        other => panic!("{key}: {other:?}"),
    }
}

/// Session totals, checked against the sum of every usage-carrying entry.
fn session_totals(dir: &Path) -> Usage {
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let mut entries = Usage::default();
    for entry in &session.entries {
        if let Some(usage) = entry.kind.usage() {
            entries.add(usage);
        }
    }
    let totals = session.totals().usage;
    assert_eq!(totals, entries);
    totals
}

/// Session totals equal the sum of every usage-carrying entry and of what the prompts reported.
fn assert_usage_counted_once(dir: &Path, results: &[PromptResult]) -> Usage {
    let totals = session_totals(dir);
    let mut reported = Usage::default();
    for result in results {
        reported.add(&result.usage);
    }
    assert_eq!(totals.total_tokens, reported.total_tokens, "prompts report the compaction usage they caused");
    assert!((totals.cost.total - reported.cost.total).abs() < 1e-12);
    totals
}

#[test]
fn threshold_compaction_summarizes_old_turns_and_counts_the_summary_once() {
    let dir = scratch("threshold");
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::text("answer one"),
        FauxResponse::text("## Goal\nThe user sent a long first message."),
        FauxResponse::text("answer two"),
    ]);
    let mut agent = agent(&dir, faux.clone(), small_model());
    let first = "a".repeat(2400);
    let second = "b".repeat(2400);
    let runs = run(&mut agent, &[&first, &second]);
    assert_eq!(runs.results[1].last_message.as_ref().unwrap().text(), "answer two");

    // The summary request saw the old turn; the next request starts from the summary.
    let sent = faux.sent();
    assert_eq!(sent.len(), 3);
    let summary_request = sent[1].payload["messages"][0]["content"].as_str().unwrap();
    assert!(summary_request.contains("[User]: aaaa") && summary_request.contains("[Assistant]: answer one"));
    let after = sent[2].payload["messages"].as_array().unwrap();
    assert_eq!(after.len(), 2, "summary + the kept prompt");
    assert!(after[0]["content"].as_str().unwrap().contains("The user sent a long first message."));
    assert_eq!(after[1]["content"], second);

    let spans = compaction_spans(&runs.events);
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(span.attributes.get(names::COMPACTION_REASON), Some(&Value::from("threshold")));
    assert_eq!(span.attributes.get(names::WILL_RETRY), Some(&Value::Bool(false)));
    assert!(int(span, names::TOKENS_BEFORE) > 800 && int(span, names::TOKENS_AFTER) < int(span, names::TOKENS_BEFORE));
    assert!(int(span, names::INPUT_TOKENS) > 0, "the summary call's usage is on the span");
    assert_eq!(span.context.get(names::CTX_ORG_ID).map(String::as_str), Some("acme"));
    let provider_children: Vec<_> = assert_paired(&runs.events)
        .into_iter()
        .filter(|s| s.name == names::PROVIDER_REQUEST && s.parent_span_id == Some(span.span_id))
        .collect();
    assert_eq!(provider_children.len(), 1, "the summary request is a child of the compaction");

    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let compaction = session
        .entries
        .iter()
        .find_map(|e| match &e.kind {
            EntryKind::Compaction { usage, tokens_before, retained_tail, .. } => {
                Some((*usage, *tokens_before, retained_tail.clone()))
            }
            _ => None,
        })
        .unwrap();
    assert!(compaction.0.unwrap().total_tokens > 0 && compaction.1 > 800);
    assert_eq!(compaction.2.unwrap().len(), 1);
    assert!(
        runs.agent_events
            .iter()
            .any(|e| matches!(e, AgentEvent::SessionCompact { reason, .. } if reason == "threshold"))
    );
    let totals = assert_usage_counted_once(&dir, &runs.results);
    assert!(totals.total_tokens > compaction.0.unwrap().total_tokens);

    // A resumed session starts from the summary and the retained messages.
    let resumed = agent_from_disk(&dir);
    let messages = resumed.messages();
    assert_eq!(summary_of(&messages[0]).as_deref(), Some("## Goal\nThe user sent a long first message."));
    assert_eq!(messages.len(), 3, "summary, kept prompt, answer two");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn agent_from_disk(dir: &Path) -> Agent {
    agent(dir, Arc::new(FauxProvider::new()), small_model())
}

#[test]
fn overflow_compacts_and_retries_the_turn() {
    let dir = scratch("overflow");
    let faux = Arc::new(FauxProvider::new());
    let too_long = ProviderError::Http {
        status: 400,
        message: "prompt is too long: context length exceeded".into(),
        retry_after: None,
    };
    faux.push([
        FauxResponse::text("answer one"),
        FauxResponse::error(too_long),
        FauxResponse::text("summary of the first turn"),
        FauxResponse::text("answer two after compaction"),
    ]);
    // A large window: only the provider's overflow error triggers compaction.
    let mut agent = agent(&dir, faux.clone(), Registry::builtin().find("faux", "faux-1").unwrap().clone());
    let runs = run(&mut agent, &["first question", "second question"]);
    let second = &runs.results[1];
    assert_eq!(second.stop_reason, StopReason::Stop);
    assert!(second.error.is_none());
    assert_eq!(second.last_message.as_ref().unwrap().text(), "answer two after compaction");
    assert_eq!(faux.sent().len(), 4, "request, overflow, summary, retried request");

    let spans = compaction_spans(&runs.events);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].attributes.get(names::COMPACTION_REASON), Some(&Value::from("overflow")));
    assert_eq!(spans[0].attributes.get(names::WILL_RETRY), Some(&Value::Bool(true)));
    let turns = assert_paired(&runs.events).into_iter().filter(|s| s.name == names::AGENT_TURN).count();
    assert_eq!(turns, 3, "one turn for the first prompt, the overflowed turn and its retry");

    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let errors = session
        .entries
        .iter()
        .filter(|e| matches!(&e.kind, EntryKind::Message { message: Message::Assistant(a) } if a.stop_reason == StopReason::Error))
        .count();
    assert_eq!(errors, 0, "the overflowed attempt is replaced by the retried turn");
    assert_usage_counted_once(&dir, &runs.results);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn manual_compaction_follows_extensions_cancel_or_summary() {
    let dir = scratch("manual");
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::text("answer one"),
        FauxResponse::text("answer two"),
        FauxResponse::text("model summary"),
    ]);
    let mut first = agent(&dir, faux.clone(), Registry::builtin().find("faux", "faux-1").unwrap().clone());
    let runs = run(&mut first, &["one", "two", "/compact focus on the tests"]);
    let sent = faux.sent();
    assert_eq!(sent.len(), 3);
    let request = sent[2].payload["messages"][0]["content"].as_str().unwrap();
    assert!(request.contains("Additional focus: focus on the tests"), "instructions reach the summarizer");
    let spans = compaction_spans(&runs.events);
    assert_eq!(spans[0].attributes.get(names::COMPACTION_REASON), Some(&Value::from("manual")));
    assert!(runs.results[2].usage.total_tokens > 0, "the /compact prompt reports the summary usage");
    assert_usage_counted_once(&dir, &runs.results);

    // Extensions: the first cancels manual compactions; another supplies a summary otherwise.
    let dir2 = scratch("manual-ext");
    let veto = extension("veto", |api| {
        api.on(hooks::SessionBeforeCompact, |event, _| async move {
            let about_three = event
                .messages_to_summarize
                .iter()
                .any(|m| matches!(m, Message::User(u) if u.content.text() == "three"));
            Ok(about_three.then(BeforeResult::cancel))
        });
    });
    let writer = extension("writer", |api| {
        api.on(hooks::SessionBeforeCompact, |event, _| async move {
            Ok(Some(BeforeResult::summary(format!(
                "{} old messages, summarized by writer",
                event.messages_to_summarize.len()
            ))))
        });
    });
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("r1"), FauxResponse::text("r2"), FauxResponse::text("r3")]);
    let mut second = agent(&dir2, faux.clone(), Registry::builtin().find("faux", "faux-1").unwrap().clone());
    second.add_extension(&veto);
    second.add_extension(&writer);
    let runs = run(&mut second, &["one", "two", "/compact", "three", "/compact"]);
    // First /compact: [one, r1, two] are summarized (the last answer is kept) by `writer`, with
    // no model call. Second /compact: [r2, three] would be summarized → vetoed by `veto`.
    let failed: Vec<&str> = runs
        .agent_events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::SessionCompactFailed { error, .. } => Some(error.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(failed, ["cancelled by extension veto"]);
    assert_eq!(faux.sent().len(), 3, "an extension's summary needs no model call");
    let session = read_session(&dir2.join("session.jsonl")).unwrap();
    let compactions: Vec<(String, Option<bool>)> = session
        .entries
        .iter()
        .filter_map(|e| match &e.kind {
            EntryKind::Compaction { summary, from_hook, .. } => Some((summary.clone(), *from_hook)),
            _ => None,
        })
        .collect();
    assert_eq!(compactions, [("3 old messages, summarized by writer".to_owned(), Some(true))]);
    let spans = compaction_spans(&runs.events);
    assert_eq!(spans.len(), 2);
    assert!(spans[1].error.as_ref().unwrap().message.contains("veto"));
    for d in [dir, dir2] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn branch_navigation_moves_the_leaf_summarizes_the_abandoned_branch_and_counts_it_once() {
    let dir = scratch("tree");
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::text("r1"),
        FauxResponse::text("r2"),
        FauxResponse::text("On the abandoned branch the user asked two."),
        FauxResponse::text("r3"),
    ]);
    let big = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let mut agent = agent(&dir, faux.clone(), big);
    let mut runs = run(&mut agent, &["one", "two"]);
    let r1_id = read_session(&dir.join("session.jsonl"))
        .unwrap()
        .entries
        .iter()
        .find(|e| matches!(&e.kind, EntryKind::Message { message: Message::Assistant(a) } if a.text() == "r1"))
        .unwrap()
        .id
        .clone();

    let hub = Observability::new();
    let (capture, _sub) =
        CaptureSubscriber::attach_with(&hub, ContentPolicy::default().capture(ContentKind::ErrorText));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme");
    let navigation = runtime.block_on(hub.run_with_context(user, async {
        let cancel = CancellationToken::new();
        let unknown = agent.navigate("ffffffff", true, &cancel, &mut |_| {}).await.unwrap_err();
        assert!(unknown.to_string().contains("no entry with id ffffffff"), "{unknown}");
        agent.navigate(&r1_id, true, &cancel, &mut |_| {}).await.unwrap()
    }));
    assert!(navigation.moved);
    assert_eq!(navigation.abandoned_entries, 4, "attribution and trace records, prompt two and its answer");
    let (summary, usage) = navigation.summary.clone().unwrap();
    assert_eq!(summary, "On the abandoned branch the user asked two.");
    assert!(usage.unwrap().total_tokens > 0);
    let events = capture.take();
    let spans = assert_paired(&events);
    let navs: Vec<&RecordedSpan> = spans.iter().filter(|s| s.name == names::AGENT_BRANCH_NAVIGATION).collect();
    assert_eq!(navs.len(), 2);
    assert!(navs[0].error.as_ref().unwrap().message.contains("ffffffff"), "the failed attempt is an error span");
    let nav = navs[1];
    assert_eq!(nav.attributes.get("summarized"), Some(&Value::Bool(true)));
    assert!(int(nav, names::INPUT_TOKENS) > 0);
    assert!(spans.iter().any(|s| s.name == names::PROVIDER_REQUEST && s.parent_span_id == Some(nav.span_id)));

    // The conversation continues from r1 plus the branch summary; "two" is gone from the context.
    let after = run(&mut agent, &["three"]);
    let sent = faux.sent();
    let texts: Vec<String> = sent[3].payload["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().map(str::to_owned).unwrap_or_else(|| m["content"].to_string()))
        .collect();
    assert_eq!(texts[0], "one");
    assert!(texts.iter().any(|t| t.contains("On the abandoned branch")));
    assert!(!texts.iter().any(|t| t == "two" || t.contains("\"r2\"")), "{texts:?}");
    let session = read_session(&dir.join("session.jsonl")).unwrap();
    let summary_entry = session.entries.iter().find(|e| matches!(e.kind, EntryKind::BranchSummary { .. })).unwrap();
    assert_eq!(summary_entry.parent_id.as_deref(), Some(r1_id.as_str()), "the summary hangs under the target");
    runs.results.extend(after.results);
    // Session totals = every assistant message (both branches) + the branch summary, once each.
    let totals = assert_branch_usage(&dir, &runs.results, usage.unwrap());
    assert!(totals.total_tokens > 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Like [`assert_usage_counted_once`], for a session whose branch summary was not reported by a prompt.
fn assert_branch_usage(dir: &Path, results: &[PromptResult], summary: Usage) -> Usage {
    let totals = session_totals(dir);
    let mut expected = summary;
    for result in results {
        expected.add(&result.usage);
    }
    assert_eq!(totals.total_tokens, expected.total_tokens);
    totals
}

#[test]
fn extensions_cancel_or_supply_branch_summaries() {
    let dir = scratch("tree-ext");
    let faux = Arc::new(FauxProvider::new());
    faux.push([FauxResponse::text("r1"), FauxResponse::text("r2")]);
    let big = Registry::builtin().find("faux", "faux-1").unwrap().clone();
    let mut agent = agent(&dir, faux.clone(), big);
    let guard = extension("guard", |api| {
        api.on(hooks::SessionBeforeTree, |event, _| async move { Ok((!event.summarize).then(BeforeResult::cancel)) });
    });
    let scribe = extension("scribe", |api| {
        api.on(hooks::SessionBeforeTree, |_, _| async move { Ok(Some(BeforeResult::summary("scribe's notes"))) });
    });
    agent.add_extension(&guard);
    agent.add_extension(&scribe);
    run(&mut agent, &["one", "two"]);
    let first_id = read_session(&dir.join("session.jsonl")).unwrap().entries[0].id.clone();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cancel = CancellationToken::new();
    let cancelled = runtime.block_on(agent.navigate(&first_id, false, &cancel, &mut |_| {})).unwrap();
    assert_eq!(cancelled.cancelled_by.as_deref(), Some("guard"));
    assert!(!cancelled.moved);
    let moved = runtime.block_on(agent.navigate(&first_id, true, &cancel, &mut |_| {})).unwrap();
    assert!(moved.moved);
    assert_eq!(moved.summary, Some(("scribe's notes".to_owned(), None)));
    assert_eq!(faux.sent().len(), 2, "no model call for an extension's summary");
    std::fs::remove_dir_all(&dir).unwrap();
}
