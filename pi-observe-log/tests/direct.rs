//! With the crate's own JSON logging installed as the global subscriber, the bridge writes its
//! lines straight into the log's writer: the same lines, field for field, that the `tracing`
//! path writes, and the filter still decides by level. (A binary of its own: it installs the
//! process's global subscriber.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use pi_observe_core::{
    Attribution, ContentKind, ContentPolicy, Observability, Payload, Span, names, record_event, trace_operation_sync,
};
use pi_observe_log::testing::MemoryWriter;
use pi_observe_log::{JsonLogConfig, LogDestination, SpanLevel, TracingSubscriber, init_json_logging, json_subscriber};
use serde_json::Value as Json;

/// A prompt with a tool call that records, a point event with an array and a failing tool call.
fn scenario(hub: &Observability) {
    let user = Attribution::new().with(names::CTX_USER_ID, "u\"1").with(names::CTX_ORG_ID, "acme");
    hub.in_scope(|| {
        pi_observe_core::current().with_attribution(&user).in_scope(|| {
            trace_operation_sync(
                names::AGENT_PROMPT,
                Payload::new().safe(names::PROVIDER, "faux").content(ContentKind::Prompt, names::PROMPT_TEXT, "hi\n"),
                |_| {
                    trace_operation_sync(
                        names::AGENT_TOOL_CALL,
                        Payload::new().safe(names::TOOL_NAME, "read").safe(names::RESULT_BYTES, 42),
                        |span: &Span| {
                            span.record(Payload::new().safe(names::IS_ERROR, false).safe("ratio", 0.5));
                            record_event(names::PROVIDER_USAGE, Payload::new().safe("list", vec![1i64, 2]));
                        },
                    );
                    let _ = trace_operation_sync(names::AGENT_TOOL_CALL, Payload::new(), |_| {
                        Err::<(), _>(std::io::Error::other("denied"))
                    });
                },
            )
        })
    });
}

/// The lines without their timestamps, and the ids (random per run) replaced by their order.
fn comparable(text: &str) -> Vec<Json> {
    let mut ids: Vec<String> = Vec::new();
    text.lines()
        .map(|line| {
            let mut json: Json = serde_json::from_str(line).unwrap();
            let object = json.as_object_mut().unwrap();
            assert!(object.remove("timestamp").is_some_and(|t| t.as_str().is_some_and(|t| t.ends_with('Z'))));
            for key in ["trace_id", "span_id", "parent_span_id", "time_unix_nano", "duration_ms", "duration_ns"] {
                if let Some(Json::String(id)) = object.get(key).cloned() {
                    let n = ids.iter().position(|i| *i == id).unwrap_or_else(|| {
                        ids.push(id);
                        ids.len() - 1
                    });
                    object.insert(key.into(), Json::from(n));
                } else if object.remove(key).is_some() {
                    object.insert(key.into(), Json::from("number"));
                }
            }
            json
        })
        .collect()
}

/// Runs the scenario on a fresh hub with two bridges: start/end at DEBUG and at INFO.
fn both_levels(policy: &std::sync::Arc<ContentPolicy>) {
    for bridge in [TracingSubscriber::new(), TracingSubscriber::new().span_level(SpanLevel::Info)] {
        let hub = Observability::new();
        let _subscription = hub.subscribe_arc(std::sync::Arc::new(bridge), policy.clone());
        scenario(&hub);
    }
}

#[test]
fn lines_written_straight_match_the_tracing_path_and_the_filter_still_decides() {
    let dir = std::env::temp_dir().join(format!("pi-log-direct-{}", pi_observe_core::SpanId::random()));
    let path = dir.join("log.jsonl");
    let config = JsonLogConfig {
        destination: LogDestination::File(path.clone()),
        default_filter: "info".into(),
        ..JsonLogConfig::default()
    };
    let guard = init_json_logging(&config).unwrap();
    let policy = std::sync::Arc::new(ContentPolicy::default().capture_all());
    both_levels(&policy);
    let (counts, _) = guard.close(Duration::from_secs(5));
    let direct = std::fs::read_to_string(&path).unwrap();
    assert_eq!(counts.written, direct.lines().count() as u64);
    assert_eq!(pi_observe_log::testing::direct_lines(), counts.written, "every line written straight");

    // The same records through `tracing`, with the same filter (this thread's own subscriber,
    // whose writer is not the installed one).
    let buffer = MemoryWriter::default();
    let filter = pi_observe_log::env_filter("info").unwrap();
    tracing::subscriber::with_default(json_subscriber(buffer.clone(), filter), || both_levels(&policy));
    let through_tracing = buffer.text();
    assert_eq!(pi_observe_log::testing::direct_lines(), counts.written, "none, with another subscriber");
    assert_eq!(comparable(&direct), comparable(&through_tracing), "{direct}\n{through_tracing}");

    if std::env::var_os("PI_LOG").is_none() && std::env::var_os("RUST_LOG").is_none() {
        // "info": start and end records at DEBUG are left out, at INFO they are written.
        let kinds: Vec<String> =
            comparable(&direct).iter().map(|l| l["event.kind"].as_str().unwrap().to_owned()).collect();
        let debug = ["event", "error"];
        let info = ["start", "start", "event", "end", "start", "error", "end"];
        assert_eq!(kinds, [&debug[..], &info[..]].concat(), "{direct}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
