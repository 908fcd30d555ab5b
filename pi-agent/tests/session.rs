//! Session files: round trip, torn last lines from crashes, corrupt lines named by number.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::io::Write;
use std::path::{Path, PathBuf};

use pi_agent::message::{AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage, Usage};
use pi_agent::session::{EntryKind, SessionError, SessionWriter, read_session};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-session-{name}-{}", pi_observe_core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn assistant(cost: f64) -> Message {
    let mut usage = Usage::tokens(100, 20, 5, 1);
    usage.cost.total = cost;
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text("ok")],
        api: "faux".into(),
        provider: "faux".into(),
        model: "faux-1".into(),
        usage,
        stop_reason: StopReason::Stop,
        error_message: None,
        timestamp: 1,
    })
}

fn write_sample(path: &std::path::Path) -> usize {
    let mut w = SessionWriter::create(path, path.parent().unwrap()).unwrap();
    w.append(EntryKind::ModelChange { provider: "faux".into(), model_id: "faux-1".into() }).unwrap();
    w.append(EntryKind::Message { message: Message::user("hello") }).unwrap();
    w.append(EntryKind::Message { message: assistant(0.25) }).unwrap();
    let mut nested = Usage::tokens(10, 10, 0, 0);
    nested.cost.total = 0.5;
    w.append(EntryKind::Message {
        message: Message::ToolResult(ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "subagent".into(),
            content: vec![ContentBlock::text("done")],
            details: None,
            usage: Some(nested),
            is_error: false,
            timestamp: 2,
        }),
    })
    .unwrap();
    w.append(EntryKind::Message { message: assistant(0.25) }).unwrap();
    5
}

#[test]
fn entries_round_trip_and_totals_count_assistant_and_tool_usage_once() {
    let d = dir("roundtrip");
    let path = d.join("s.jsonl");
    let n = write_sample(&path);
    let session = read_session(&path).unwrap();
    assert_eq!(session.header.version, 3);
    assert_eq!(session.entries.len(), n);
    assert!(session.torn_tail.is_none());
    assert_eq!(session.entries[0].parent_id, None);
    let totals = session.totals();
    assert!((totals.usage.cost.total - 1.0).abs() < 1e-12);
    assert_eq!(totals.usage.total_tokens, 126 * 2 + 20);
    assert_eq!(totals.assistant_messages, 2);
    // Re-opening continues the tree from the last entry.
    let mut w = SessionWriter::open_or_create(&path, &d).unwrap();
    let last = session.entries.last().unwrap().id.clone();
    assert_eq!(w.leaf(), Some(last.as_str()));
    w.append(EntryKind::SessionInfo { name: "again".into() }).unwrap();
    assert_eq!(read_session(&path).unwrap().entries.len(), n + 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_last_line_torn_at_any_byte_keeps_every_complete_entry() {
    let d = dir("torn");
    let path = d.join("s.jsonl");
    let n = write_sample(&path);
    let full = std::fs::read(&path).unwrap();
    let last_start = full[..full.len() - 1].iter().rposition(|b| *b == b'\n').unwrap() + 1;
    for cut in last_start..full.len() {
        std::fs::write(&path, &full[..cut]).unwrap();
        let session = read_session(&path).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        // Only the newline missing: the last entry is complete and kept.
        let complete = cut == full.len() - 1;
        let kept = if complete { n } else { n - 1 };
        assert_eq!(session.entries.len(), kept, "cut at {cut}");
        assert_eq!(session.torn_tail.is_some(), cut > last_start && !complete, "cut at {cut}");
        // Appending after a crash cuts the torn tail and loses nothing that was complete.
        let mut w = SessionWriter::open_or_create(&path, &d).unwrap();
        w.append(EntryKind::SessionInfo { name: "after crash".into() }).unwrap();
        let after = read_session(&path).unwrap();
        assert_eq!(after.entries.len(), kept + 1, "cut at {cut}");
        assert!(after.torn_tail.is_none());
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn corrupt_lines_and_missing_headers_are_errors_naming_file_and_line() {
    let d = dir("corrupt");
    let path = d.join("s.jsonl");
    write_sample(&path);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{this is not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = read_session(&path).unwrap_err();
    assert!(matches!(err, SessionError::Corrupt { line: 4, .. }));
    let message = err.to_string();
    assert!(message.starts_with(&format!("{}:4: not JSON", path.display())), "{message}");
    assert!(!message.contains('\n'));

    // An object this version does not understand is kept as written and counted, not fatal.
    lines[3] = r#"{"type":"message","id":"x"}"#;
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let session = read_session(&path).unwrap();
    assert_eq!(session.unknown_lines, [4]);
    assert_eq!(serde_json::to_string(&session.entries[2]).unwrap(), lines[3]);
    lines[3] = "[1, 2]";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    assert!(read_session(&path).unwrap_err().to_string().contains(":4: not a JSON object"));

    std::fs::write(&path, "{\"type\":\"message\"}\n").unwrap();
    assert!(matches!(read_session(&path), Err(SessionError::NoHeader { .. })));
    assert!(read_session(&d.join("missing.jsonl")).unwrap_err().to_string().contains("missing.jsonl"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn streaming_the_usage_gives_the_same_rows_as_reading_the_whole_session() {
    let d = dir("scan");
    let path = d.join("s.jsonl");
    write_sample(&path);
    // A second branch with its own attribution and a compaction, written after the first.
    let mut w = SessionWriter::open_or_create(&path, &d).unwrap();
    let first = w.entries().first().map(|e| e.id.clone());
    w.set_leaf(first.as_deref()).unwrap();
    w.append(EntryKind::Custom {
        custom_type: pi_agent::session::ATTRIBUTION_CUSTOM_TYPE.into(),
        data: serde_json::json!({"userId": "bob", "orgId": "globex"}),
    })
    .unwrap();
    w.append(EntryKind::Message { message: assistant(0.125) }).unwrap();
    w.append(EntryKind::Compaction {
        summary: "s".into(),
        first_kept_entry_id: None,
        tokens_before: 10,
        usage: Some(Usage::tokens(3, 2, 0, 0)),
        retained_tail: None,
        details: None,
        from_hook: None,
    })
    .unwrap();
    drop(w);
    let whole = pi_agent::session::attributed_usage(&read_session(&path).unwrap());
    let mut streamed = Vec::new();
    let read = std::sync::atomic::AtomicU64::new(0);
    let torn = pi_agent::session::scan_usage_counting(&path, &read, 2, |row| streamed.push(row)).unwrap();
    assert!(torn.torn_tail.is_none());
    assert_eq!(streamed, whole);
    assert_eq!(read.into_inner(), std::fs::metadata(&path).unwrap().len(), "progress counts every byte read");
    assert_eq!(streamed.len(), 5);
    assert!(streamed.iter().any(|r| r.user() == Some("bob")));
    // A torn tail is reported, not an error; a corrupt line is an error naming it.
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"id\":\"x").unwrap();
    let torn = pi_agent::session::scan_usage(&path, |_| {}).unwrap().torn_tail.unwrap();
    assert_eq!(torn.line, 10, "the tenth line: header, nine entries, then the torn one");
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n{oops\n",
    )
    .unwrap();
    let error = pi_agent::session::scan_usage(&path, |_| {}).unwrap_err().to_string();
    assert!(error.contains("s.jsonl:2"), "{error}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_upstream_compaction_keeps_the_messages_from_its_first_kept_entry_and_every_role_reaches_the_model() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/upstream/v3-full.jsonl");
    let session = read_session(&path).unwrap();
    assert_eq!(session.unknown_lines, [20, 21]);
    let by_id: std::collections::HashMap<&str, &pi_agent::session::Entry> =
        session.entries.iter().map(|e| (e.id.as_str(), e)).collect();
    // The first branch, from the root to the refactoring answer.
    let mut path_ids = vec!["1000000f"];
    while let Some(parent) = by_id[path_ids.last().unwrap()].parent_id.as_deref() {
        path_ids.push(parent);
    }
    path_ids.reverse();
    let (messages, _) = pi_agent::compaction::context_from(path_ids.iter().map(|id| by_id[id]));
    let roles: Vec<&str> = messages.iter().map(|m| m.role()).collect();
    // Summary, then from firstKeptEntryId (10000006) on: assistant, bashExecution, custom,
    // the custom_message entry (as a user message), then the messages after the compaction.
    assert_eq!(roles, ["user", "assistant", "bashExecution", "custom", "user", "user", "assistant"]);
    assert!(pi_agent::compaction::summary_of(&messages[0]).unwrap().contains("failing parser test"));
    let bash = messages[2].context_text().unwrap();
    assert!(bash.starts_with("Ran `git diff --stat`") && bash.contains("src/lexer.rs"), "{bash}");
    assert_eq!(messages[3].context_text().unwrap(), "Open TODOs: 2");
}
