//! The Sentry adapter with the SDK's test transport: the transaction tree (ids, parents, depth,
//! timestamps, ops, user, tags), errors linked to the trace, breadcrumbs, privacy; then over the
//! wire to a loopback envelope endpoint, and against an unreachable DSN.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_core::testing::{CaptureSubscriber, assert_paired, conformance, spans_from_events};
use pi_observe_core::{
    Attribution, ContentKind, ContentPolicy, ObsEvent, Observability, Payload, Span, Subscriber, names, record_event,
    trace_operation_sync,
};
use pi_observe_sentry::testing::EnvelopeEndpoint;
use pi_observe_sentry::{SentryConfig, SentrySubscriber};
use serde_json::Value as Json;
use support::{captured, recorded_spans};

const CANARY: &str = "CANARY-sentry-93d1";

#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no such file, password={CANARY}")
    }
}

fn test_config() -> (SentryConfig, Arc<sentry::test::TestTransport>) {
    let transport = sentry::test::TestTransport::new();
    let config = SentryConfig {
        dsn: Some("https://public@sentry.invalid/1".into()),
        environment: Some("test".into()),
        release: Some("pi@0.1.0".into()),
        transport: Some(Arc::new(transport.clone())),
        ..SentryConfig::default()
    };
    (config, transport)
}

/// prompt → turn → provider request (first_token event) + tool call (fails) → hook (depth 4).
fn scenario(hub: &Observability) {
    let user = Attribution::new().with(names::CTX_USER_ID, "u1").with(names::CTX_ORG_ID, "acme").with("teamId", "core");
    hub.in_scope(|| {
        pi_observe_core::current().with_attribution(&user).in_scope(|| {
            trace_operation_sync(
                names::AGENT_PROMPT,
                Payload::new().safe(names::SESSION_ID, "s-1").content(ContentKind::Prompt, names::PROMPT_TEXT, CANARY),
                |_| {
                    trace_operation_sync(names::AGENT_TURN, Payload::new().safe(names::TURN_INDEX, 0), |_| {
                        trace_operation_sync(
                            names::PROVIDER_REQUEST,
                            Payload::new().safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1"),
                            |span: &Span| {
                                record_event(
                                    names::PROVIDER_FIRST_TOKEN,
                                    Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, 12),
                                );
                                span.record(
                                    Payload::new()
                                        .safe(names::INPUT_TOKENS, 100)
                                        .safe(names::OUTPUT_TOKENS, 20)
                                        .content(ContentKind::Completion, names::COMPLETION_TEXT, CANARY),
                                );
                            },
                        );
                        let _ = trace_operation_sync(
                            names::AGENT_TOOL_CALL,
                            Payload::new().safe(names::TOOL_NAME, "read").secret(names::API_KEY, CANARY),
                            |_| {
                                trace_operation_sync(
                                    names::AGENT_HOOK,
                                    Payload::new()
                                        .safe(names::HOOK_NAME, "tool_result")
                                        .safe(names::EXTENSION_NAME, "gate"),
                                    |_| (),
                                );
                                Err::<(), _>(Failed)
                            },
                        );
                    })
                },
            )
        })
    });
}

#[test]
fn a_prompt_becomes_one_transaction_with_the_contract_tree_and_errors_link_to_it() {
    let (config, transport) = test_config();
    let hub = Observability::new();
    let sentry = SentrySubscriber::new(config).unwrap();
    let (capture, _c) = CaptureSubscriber::attach(&hub);
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    scenario(&hub);
    sentry.flush(Duration::from_secs(2)).unwrap();
    let items = captured(&transport);
    let contract = assert_paired(&capture.take());
    let root = contract.iter().find(|s| s.name == names::AGENT_PROMPT).unwrap();

    let transactions: Vec<&Json> = items.iter().filter(|(t, _)| t == "transaction").map(|(_, j)| j).collect();
    assert_eq!(transactions.len(), 1);
    let tx = transactions[0];
    assert_eq!(tx["contexts"]["trace"]["trace_id"], root.trace_id.to_string());
    assert_eq!(tx["contexts"]["trace"]["span_id"], root.span_id.to_string());
    assert_eq!(tx["contexts"]["trace"]["op"], "gen_ai.invoke_agent");
    assert_eq!(tx["transaction"], "invoke_agent pi");
    assert_eq!(tx["user"]["id"], "u1");
    assert_eq!(tx["tags"]["orgId"], "acme");
    assert_eq!(tx["tags"]["teamId"], "core");
    assert!(tx["tags"].get("userId").is_none(), "the user id is the user, not a tag");
    assert_eq!(tx["environment"], "test");
    assert_eq!(tx["release"], "pi@0.1.0");

    // Every contract span is there, with its ids, parent, op and times (to the microsecond).
    let exported = recorded_spans(&items);
    assert_eq!(exported.len(), contract.len());
    for span in &contract {
        let out =
            exported.iter().find(|s| s.span_id == span.span_id).unwrap_or_else(|| panic!("{} missing", span.name));
        assert_eq!(out.name, span.name);
        assert_eq!(out.trace_id, span.trace_id);
        assert_eq!(out.parent_span_id, span.parent_span_id, "{}", span.name);
        // Sentry keeps float seconds: equal to the microsecond (±1 for float rounding).
        let close = |a: pi_observe_core::Timestamp, b: pi_observe_core::Timestamp| {
            a.unix_nanos().abs_diff(b.unix_nanos()) <= 1_000
        };
        assert!(close(out.start, span.start), "{} start", span.name);
        assert!(close(out.end.unwrap(), span.end.unwrap()), "{} end", span.name);
        assert_eq!(out.error.is_some(), span.error.is_some(), "{} status", span.name);
    }
    let hook = exported.iter().find(|s| s.name == names::AGENT_HOOK).unwrap();
    let depth =
        std::iter::successors(Some(hook), |s| exported.iter().find(|p| Some(p.span_id) == s.parent_span_id)).count();
    assert_eq!(depth, 4, "prompt → turn → tool call → hook");
    let chat = tx["spans"].as_array().unwrap().iter().find(|s| s["op"] == "gen_ai.chat").unwrap();
    assert_eq!(chat["description"], "chat faux-1");
    assert_eq!(chat["data"]["gen_ai.request.model"], "faux-1");
    assert_eq!(chat["data"]["gen_ai.usage.input_tokens"], 100);
    assert_eq!(chat["data"]["gen_ai.usage.output_tokens"], 20);
    assert_eq!(chat["status"], "ok");
    let tool = tx["spans"].as_array().unwrap().iter().find(|s| s["op"] == "gen_ai.execute_tool").unwrap();
    assert_eq!(tool["description"], "execute_tool read");
    assert_eq!(tool["status"], "internal_error");
    let crumbs = tx["breadcrumbs"]["values"].as_array().unwrap();
    assert_eq!(crumbs.len(), 1);
    assert_eq!(crumbs[0]["category"], names::PROVIDER_FIRST_TOKEN);
    assert_eq!(crumbs[0]["data"][names::TIME_TO_FIRST_TOKEN_MS], 12);

    // The failed tool call is an error event linked to its trace and span, with the breadcrumbs.
    let errors: Vec<&Json> = items.iter().filter(|(t, _)| t == "event").map(|(_, j)| j).collect();
    assert_eq!(errors.len(), 1);
    let error = errors[0];
    let failed = contract.iter().find(|s| s.name == names::AGENT_TOOL_CALL).unwrap();
    assert_eq!(error["contexts"]["trace"]["trace_id"], failed.trace_id.to_string());
    assert_eq!(error["contexts"]["trace"]["span_id"], failed.span_id.to_string());
    assert_eq!(error["exception"]["values"][0]["type"], "Failed");
    // Error text is content: by default the value repeats the type.
    assert_eq!(error["exception"]["values"][0]["value"], "Failed");
    assert_eq!(error["user"]["id"], "u1");
    assert_eq!(error["breadcrumbs"]["values"][0]["category"], names::PROVIDER_FIRST_TOKEN);

    // Default policy: the canary (prompt, completion, secret, error message) is nowhere.
    for (_, item) in &items {
        assert!(!item.to_string().contains(CANARY), "canary leaked: {item}");
    }
    assert_eq!(sentry.stats().transactions, 1);
    assert_eq!(sentry.stats().errors, 1);
}

#[test]
fn captured_content_reaches_sentry_only_scrubbed() {
    let (config, transport) = test_config();
    let hub = Observability::new();
    let sentry = SentrySubscriber::new(config).unwrap();
    let policy = ContentPolicy::default().capture(ContentKind::Prompt);
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(policy));
    hub.in_scope(|| {
        trace_operation_sync(
            names::AGENT_PROMPT,
            Payload::new()
                .content(ContentKind::Prompt, names::PROMPT_TEXT, format!("use key sk-ant-api03-{CANARY}abcdefghij"))
                .content(ContentKind::Completion, names::COMPLETION_TEXT, CANARY),
            |_| (),
        )
    });
    sentry.flush(Duration::from_secs(2)).unwrap();
    let items = captured(&transport);
    let tx = &items.iter().find(|(t, _)| t == "transaction").unwrap().1;
    let prompt = tx["contexts"]["trace"]["data"][format!("pi.{}", names::PROMPT_TEXT)].as_str().unwrap();
    assert!(prompt.starts_with("use key ") && !prompt.contains(CANARY), "captured, scrubbed: {prompt}");
    assert!(!tx.to_string().contains(CANARY));
}

struct SentryFixture {
    transport: Arc<sentry::test::TestTransport>,
}

impl conformance::ConformanceFixture for SentryFixture {
    fn subscriber(&mut self) -> Arc<dyn Subscriber> {
        let (config, transport) = test_config();
        self.transport = transport;
        SentrySubscriber::new(config).unwrap()
    }

    fn finished_spans(&mut self) -> Vec<pi_observe_core::testing::RecordedSpan> {
        recorded_spans(&captured(&self.transport))
    }
}

#[test]
fn the_sentry_subscriber_passes_the_conformance_suite() {
    conformance::run_all(|| Box::new(SentryFixture { transport: sentry::test::TestTransport::new() }));
}

#[test]
fn envelopes_arrive_over_http_at_a_loopback_endpoint() {
    let endpoint = EnvelopeEndpoint::start();
    let dsn = endpoint.dsn();
    let hub = Observability::new();
    let sentry = SentrySubscriber::new(SentryConfig { dsn: Some(dsn), ..SentryConfig::default() }).unwrap();
    let (capture, _c) = CaptureSubscriber::attach(&hub);
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    scenario(&hub);
    sentry.shutdown(Duration::from_secs(5)).unwrap();
    let received = endpoint.requests();
    assert!(received.iter().all(|(line, _)| line.starts_with("POST /api/1/envelope/")), "{received:?}");
    let items = endpoint.items();
    let contract = spans_from_events(&capture.take());
    let exported = recorded_spans(&items);
    assert_eq!(exported.len(), contract.len(), "every span arrived");
    let root = contract.iter().find(|s| s.name == names::AGENT_PROMPT).unwrap();
    assert!(exported.iter().all(|s| s.trace_id == root.trace_id));
    assert_eq!(items.iter().filter(|(t, _)| t == "event").count(), 1, "the error event arrived too");
}

#[test]
fn an_unreachable_dsn_neither_blocks_the_agent_nor_the_exit_beyond_the_deadline() {
    // A port that accepts connections but never answers (the kernel backlog completes the
    // handshake; nobody reads).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dsn = format!("http://public@127.0.0.1:{}/1", silent.local_addr().unwrap().port());
    let hub = Observability::new();
    let sentry = SentrySubscriber::new(SentryConfig { dsn: Some(dsn), ..SentryConfig::default() }).unwrap();
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    for _ in 0..50 {
        scenario(&hub);
    }
    let deadline = Duration::from_millis(500);
    let started = Instant::now();
    let _ = sentry.shutdown(deadline);
    // The deadline, give or take scheduling on a loaded machine; not the transport's 30 s.
    assert!(started.elapsed() < deadline + Duration::from_secs(1), "shutdown took {:?}", started.elapsed());
    assert_eq!(sentry.stats().transactions, 50, "every prompt was handed over without waiting on the network");
    drop(silent);
}

/// A backfill hands over envelopes faster than any server takes them: a full queue holds the
/// caller back instead of dropping (here a queue of two, forty envelopes).
#[test]
fn a_backfill_is_paced_by_the_server_not_dropped() {
    let endpoint = EnvelopeEndpoint::start();
    let hub = Observability::new();
    let config =
        SentryConfig { dsn: Some(endpoint.dsn()), queue_capacity: Some(2), backfill: true, ..SentryConfig::default() };
    let sentry = SentrySubscriber::new(config).unwrap();
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    for _ in 0..20 {
        scenario(&hub);
    }
    sentry.shutdown(Duration::from_secs(30)).unwrap();
    let stats = sentry.stats();
    assert_eq!((stats.transactions, stats.errors), (20, 20), "{stats:?}");
    assert_eq!((stats.delivered, stats.not_delivered), (40, 0), "{stats:?}");
    assert_eq!(endpoint.requests().len(), 40);
}

/// Runs forty envelopes of a backfill (`spool` or not) into a server that takes connections and
/// never answers, the request timeout a minute: only taking it as stalled after its first
/// envelope lets the flush finish within its deadline. Returns the counts.
fn backfill_into_a_silent_server(spool: Option<pi_observe_spool::SpoolConfig>) -> pi_observe_sentry::SentryStats {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dsn = format!("http://public@127.0.0.1:{}/1", silent.local_addr().unwrap().port());
    let hub = Observability::new();
    let config = SentryConfig {
        dsn: Some(dsn),
        queue_capacity: Some(2),
        request_timeout: Some(Duration::from_secs(60)),
        backfill: true,
        spool,
        ..SentryConfig::default()
    };
    let sentry = SentrySubscriber::new(config).unwrap();
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    for _ in 0..20 {
        scenario(&hub);
    }
    sentry.flush(Duration::from_secs(20)).expect("every envelope settled within the flush's deadline");
    let _ = sentry.shutdown(Duration::from_secs(1));
    drop(silent);
    sentry.stats()
}

#[test]
fn a_backfill_spools_what_a_silent_server_would_hold_up() {
    let dir = std::env::temp_dir().join(format!("pi-sentry-backfill-{}", pi_observe_core::SpanId::random()));
    let stats = backfill_into_a_silent_server(Some(pi_observe_spool::SpoolConfig::new(&dir)));
    assert_eq!((stats.delivered, stats.spooled, stats.not_delivered), (0, 40, 0), "{stats:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_backfill_without_a_spool_counts_what_a_silent_server_would_hold_up() {
    let stats = backfill_into_a_silent_server(None);
    assert_eq!((stats.delivered, stats.spooled, stats.not_delivered), (0, 0, 40), "{stats:?}");
    assert!(stats.last_error.is_some_and(|e| e.contains("unavailable") || e.contains("stalled")));
}

#[test]
fn every_builtin_secret_rule_is_active_in_this_build() {
    let scrubber = pi_observe_core::Scrubber::default();
    let active: Vec<&str> = scrubber.rule_names().collect();
    assert_eq!(active, pi_observe_core::Scrubber::builtin_rule_names().collect::<Vec<_>>());
}

#[test]
fn bad_dsns_are_one_line_errors_naming_their_source() {
    let err = SentrySubscriber::new(SentryConfig {
        dsn: Some("nope".into()),
        dsn_source: Some("--sentry".into()),
        ..SentryConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("--sentry: not a Sentry DSN") && !err.contains('\n'), "{err}");
    let _ = ObsEvent::new(pi_observe_core::EventKind::Event, "x", pi_observe_core::TraceId::random());
}

#[test]
fn sampled_out_traces_send_no_transaction_but_errors_still_go_out() {
    let (mut config, transport) = test_config();
    config.traces_sample_rate = Some(0.0);
    let hub = Observability::new();
    let sentry = SentrySubscriber::new(config).unwrap();
    let _s = hub.subscribe_arc(sentry.clone(), Arc::new(ContentPolicy::default()));
    scenario(&hub);
    sentry.flush(Duration::from_secs(2)).unwrap();
    let items = captured(&transport);
    assert!(items.iter().all(|(t, _)| t != "transaction"));
    assert_eq!(items.iter().filter(|(t, _)| t == "event").count(), 1);
    assert_eq!(sentry.stats().sampled_out, 1);
}
