//! The `tracing` bridge: every field of every record kind in the JSON lines, levels, privacy
//! under the default and a capturing policy, and isolation from failing writers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;

use pi_observe_core::{
    Attribution, ContentKind, ContentPolicy, Observability, Payload, Span, names, record_event, trace_operation_sync,
};
use pi_observe_log::{SpanLevel, TracingSubscriber, json_subscriber, non_blocking};
use serde_json::Value as Json;
use support::{Buffer, event_from_line};
use tracing_subscriber::EnvFilter;

const CANARY: &str = "CANARY-log-51c2";

#[derive(Debug)]
struct Denied;

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "denied with key sk-ant-api03-{CANARY}abcdefghijklmnop")
    }
}

/// Runs a prompt → tool call (ok) + tool call (error) + point event, on `hub`, with the JSON
/// subscriber installed for this thread; returns the lines.
fn scenario(hub: &Observability, filter: &str) -> Vec<Json> {
    let buffer = Buffer::default();
    let subscriber = json_subscriber(buffer.clone(), EnvFilter::new(filter));
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme");
    tracing::subscriber::with_default(subscriber, || {
        hub.in_scope(|| {
            pi_observe_core::current().with_attribution(&user).in_scope(|| {
                trace_operation_sync(
                    names::AGENT_PROMPT,
                    Payload::new().safe(names::PROVIDER, "faux").content(
                        ContentKind::Prompt,
                        names::PROMPT_TEXT,
                        CANARY,
                    ),
                    |_| {
                        trace_operation_sync(
                            names::AGENT_TOOL_CALL,
                            Payload::new().safe(names::TOOL_NAME, "read").safe(names::RESULT_BYTES, 42),
                            |span: &Span| {
                                span.record(Payload::new().safe(names::IS_ERROR, false));
                                record_event(names::PROVIDER_USAGE, Payload::new().safe(names::INPUT_TOKENS, 7));
                            },
                        );
                        let _ = trace_operation_sync(
                            names::AGENT_TOOL_CALL,
                            Payload::new().safe(names::TOOL_NAME, "bash"),
                            |_| Err::<(), _>(Denied),
                        );
                    },
                )
            })
        })
    });
    support::lines(&buffer)
}

#[test]
fn every_record_becomes_one_line_with_flat_fields_and_a_level_by_kind() {
    let hub = Observability::new();
    let _sub = hub.subscribe(TracingSubscriber::new());
    let lines = scenario(&hub, "trace");
    let kinds: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            (
                l["level"].as_str().unwrap().into(),
                l["event.kind"].as_str().unwrap().into(),
                l["event.name"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = |level: &str, kind: &str, name: &str| (level.to_owned(), kind.to_owned(), name.to_owned());
    assert_eq!(
        kinds,
        [
            expect("DEBUG", "start", names::AGENT_PROMPT),
            expect("DEBUG", "start", names::AGENT_TOOL_CALL),
            expect("INFO", "event", names::PROVIDER_USAGE),
            expect("DEBUG", "end", names::AGENT_TOOL_CALL),
            expect("DEBUG", "start", names::AGENT_TOOL_CALL),
            expect("ERROR", "error", names::AGENT_TOOL_CALL),
            expect("DEBUG", "end", names::AGENT_PROMPT),
        ]
    );
    for line in &lines {
        assert_eq!(line["target"], "pi_observe");
        assert_eq!(line["trace_id"], lines[0]["trace_id"], "one trace");
        assert_eq!(line["ctx.userId"], "u1");
        assert_eq!(line["ctx.orgId"], "acme");
        assert!(line["time_unix_nano"].as_str().unwrap().parse::<u64>().unwrap() > 0);
        assert_eq!(line["trace_id"].as_str().unwrap().len(), 32);
    }
    let root = &lines[0];
    assert!(root.get("parent_span_id").is_none(), "the root has no parent");
    assert_eq!(root["payload.provider"], "faux");
    let read_end = &lines[3];
    assert_eq!(read_end["parent_span_id"], root["span_id"]);
    assert_eq!(read_end["payload.toolName"], "read");
    assert_eq!(read_end["payload.resultBytes"], 42);
    assert_eq!(read_end["payload.isError"], false);
    assert!(read_end["duration_ms"].as_f64().unwrap() >= 0.0);
    let usage = &lines[2];
    assert_eq!(usage["span_id"], lines[1]["span_id"], "a point event names its span");
    assert_eq!(usage["payload.inputTokens"], 7);
    let error = &lines[5];
    assert_eq!(error["error.name"], "Denied");
    assert!(error.get("error.message").is_none(), "error text is content, withheld by default: {error}");
    // Default policy: no content, no secret, anywhere.
    for line in &lines {
        assert!(!line.to_string().contains(CANARY), "canary leaked: {line}");
    }
    // Lines parse back into the records they came from.
    let events: Vec<_> = lines.iter().map(event_from_line).collect();
    pi_observe_core::testing::assert_paired(&events);
}

#[test]
fn span_level_and_filters_choose_what_is_logged() {
    let hub = Observability::new();
    let _sub = hub.subscribe(TracingSubscriber::new());
    let info_only = scenario(&hub, "info");
    let kinds: Vec<&str> = info_only.iter().map(|l| l["event.kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["event", "error"], "start/end are DEBUG by default");
    drop(_sub);
    let _sub = hub.subscribe(TracingSubscriber::new().span_level(SpanLevel::Info));
    assert_eq!(scenario(&hub, "pi_observe=info").len(), 7);
    assert!(scenario(&hub, "pi_observe=off").is_empty());
}

#[test]
fn captured_content_appears_only_scrubbed() {
    let hub = Observability::new();
    let policy = ContentPolicy::default().capture(ContentKind::Prompt);
    let _sub = hub.subscribe_with_policy(TracingSubscriber::new(), policy);
    let buffer = Buffer::default();
    tracing::subscriber::with_default(json_subscriber(buffer.clone(), EnvFilter::new("trace")), || {
        hub.in_scope(|| {
            trace_operation_sync(
                names::AGENT_PROMPT,
                Payload::new()
                    .content(
                        ContentKind::Prompt,
                        names::PROMPT_TEXT,
                        format!("deploy with sk-proj-{CANARY}0123456789abcdef"),
                    )
                    .content(ContentKind::ToolResult, names::TOOL_RESULT, CANARY)
                    .secret(names::API_KEY, CANARY),
                |_| (),
            )
        })
    });
    let lines = support::lines(&buffer);
    let prompt = lines[0][format!("payload.{}", names::PROMPT_TEXT)].as_str().unwrap();
    assert!(prompt.starts_with("deploy with ") && !prompt.contains(CANARY), "captured and scrubbed: {prompt}");
    for line in &lines {
        assert!(line.get(format!("payload.{}", names::TOOL_RESULT)).is_none());
        assert!(line.get(format!("payload.{}", names::API_KEY)).is_none());
        assert!(!line.to_string().contains(CANARY));
    }
}

/// A writer that panics on every write.
struct Exploding;

impl Write for Exploding {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        panic!("log disk on fire")
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_panicking_writer_is_isolated_and_counted() {
    pi_observe_core::testing::silence_expected_panics(&["log disk on fire"]);
    let hub = Observability::new();
    let _sub = hub.subscribe(TracingSubscriber::new());
    let subscriber = json_subscriber(|| Exploding, EnvFilter::new("trace"));
    let answer = tracing::subscriber::with_default(subscriber, || {
        hub.in_scope(|| trace_operation_sync(names::AGENT_TOOL_CALL, Payload::new(), |_| Ok::<_, Denied>(41 + 1)))
    });
    assert_eq!(answer.unwrap(), 42, "the operation's result is untouched");
    assert_eq!(hub.stats().subscriber_panics, 2, "start and end each panicked inside the subscriber");
}

#[test]
fn a_full_writer_drops_lines_instead_of_blocking_the_agent() {
    let gate = pi_observe_log::testing::GatedWriter::default();
    let writer = non_blocking(gate.clone(), 8 * 1024).unwrap();
    let hub = Observability::new();
    let _sub = hub.subscribe(TracingSubscriber::new().span_level(SpanLevel::Info));
    let done = tracing::subscriber::with_default(json_subscriber(writer.clone(), EnvFilter::new("trace")), || {
        hub.in_scope(|| {
            (0..500)
                .map(|i| {
                    trace_operation_sync(names::AGENT_TOOL_CALL, Payload::new().safe("i", i), |_| Ok::<_, Denied>(i))
                })
                .map(Result::unwrap)
                .sum::<i64>()
        })
    });
    assert_eq!(done, (0..500).sum::<i64>(), "all 500 operations ran while the writer was stuck");
    assert!(writer.dropped_lines() > 900, "lines beyond the buffer were dropped and counted");
    gate.open();
    assert!(writer.flush(std::time::Duration::from_secs(5)));
}
