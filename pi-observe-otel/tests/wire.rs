//! OTLP on the wire (HTTP protobuf and JSON, gRPC): gzip, headers and resource attributes arrive;
//! spans keep the contract's ids, parents and times; faults never block or change the work.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "support/grpc_receiver.rs"]
mod grpc_receiver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_core::testing::CaptureSubscriber;
use pi_observe_core::{
    Attribution, ContentPolicy, EventKind, ObsEvent, Observability, Payload, names, trace_operation,
};
use pi_observe_otel::testing::{Answer, Receiver};
use pi_observe_otel::{OtelSubscriber, OtlpConfig, Protocol};

type Res = Result<(), std::io::Error>;

/// A small agent-shaped tree for two users, with point events and an error.
async fn workload() {
    for (user, org) in [("alice", "acme"), ("bob", "globex")] {
        let who = Attribution::new().with(names::CTX_USER_ID, user).with(names::CTX_ORG_ID, org);
        let _ = pi_observe_core::run_with_context(
            who,
            trace_operation(names::AGENT_PROMPT, Payload::new().safe(names::MODEL, "faux-1"), async {
                trace_operation(names::AGENT_TURN, Payload::new().safe(names::TURN_INDEX, 0), async {
                    trace_operation(
                        names::PROVIDER_REQUEST,
                        Payload::new()
                            .safe(names::PROVIDER, "faux")
                            .safe(names::MODEL, "faux-1")
                            .safe(names::INPUT_TOKENS, 10)
                            .safe(names::OUTPUT_TOKENS, 5),
                        async {
                            pi_observe_core::record_event(
                                names::PROVIDER_FIRST_TOKEN,
                                Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, 3),
                            );
                            Res::Ok(())
                        },
                    )
                    .await?;
                    trace_operation(names::AGENT_TOOL_CALL, Payload::new().safe(names::TOOL_NAME, "bash"), async {
                        Err::<(), _>(std::io::Error::other("exit 1"))
                    })
                    .await
                    .ok();
                    Res::Ok(())
                })
                .await
            }),
        )
        .await;
    }
}

struct Run {
    events: Vec<ObsEvent>,
    stats: pi_observe_otel::ExportStats,
    shutdown: Duration,
}

fn run(config: OtlpConfig, deadline: Duration) -> Run {
    let hub = Observability::new();
    let (capture, _c) = CaptureSubscriber::attach(&hub);
    let otel = OtelSubscriber::new(config).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(hub.scope(workload()));
    let started = Instant::now();
    let _ = pi_observe_core::Subscriber::shutdown(otel.as_ref(), deadline);
    Run { events: capture.take(), stats: otel.stats(), shutdown: started.elapsed() }
}

fn config(endpoint: &str) -> OtlpConfig {
    OtlpConfig {
        traces_endpoint: Some(endpoint.to_owned()),
        schedule_delay: Some(Duration::from_millis(50)),
        timeout: Some(Duration::from_millis(500)),
        ..OtlpConfig::default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn spans_arrive_with_contract_ids_parents_times_and_attributes_over_each_http_protocol() {
    for (protocol, gzip) in
        [(Protocol::HttpProtobuf, false), (Protocol::HttpProtobuf, true), (Protocol::HttpJson, true)]
    {
        let receiver = Receiver::start(vec![]);
        let cfg = OtlpConfig {
            protocol: Some(protocol),
            gzip: Some(gzip),
            headers: vec![("x-tenant".into(), "t-42".into())],
            service_name: Some("pi-test".into()),
            resource_attributes: vec![("deployment.environment".into(), "ci".into())],
            ..config(&receiver.endpoint)
        };
        let run = run(cfg, Duration::from_secs(5));
        assert_eq!(run.stats.spans_started, 8);
        assert_eq!(run.stats.spans_exported, 8, "{:?}", run.stats);
        let spans = receiver.spans();
        assert_eq!(spans.len(), 8, "{protocol:?} gzip={gzip}");
        let request = &receiver.requests()[0];
        assert_eq!(request.header("x-tenant"), Some("t-42"));
        assert_eq!(request.header("content-encoding"), if gzip { Some("gzip") } else { None });
        let resource = format!("{:?}", receiver.resource());
        assert!(
            resource.contains("service.name") && resource.contains("pi-test") && resource.contains("ci"),
            "{resource}"
        );
        for start in run.events.iter().filter(|e| e.kind == EventKind::Start) {
            let end = run
                .events
                .iter()
                .find(|e| e.kind != EventKind::Start && e.kind != EventKind::Event && e.span_id == start.span_id)
                .unwrap();
            let span =
                spans.iter().find(|s| hex(&s.span_id) == start.span_id.unwrap().to_string()).expect("span exported");
            assert_eq!(hex(&span.trace_id), start.trace_id.to_string());
            assert_eq!(hex(&span.parent_span_id), start.parent_span_id.map(|p| p.to_string()).unwrap_or_default());
            assert_eq!(pi_observe_otel::testing::operation(span), start.name);
            assert_eq!(span.start_time_unix_nano, start.timestamp.unix_nanos());
            assert_eq!(span.end_time_unix_nano, end.timestamp.unix_nanos());
            let attr = |key: &str| span.attributes.iter().find(|kv| kv.key == key).map(|kv| format!("{:?}", kv.value));
            assert!(attr("user.id").unwrap().contains(start.context.get("userId").unwrap()));
            assert!(attr("organization.id").is_some());
            let status = span.status.as_ref().unwrap();
            assert_eq!(status.code == 2, end.kind == EventKind::Error, "{}", span.name);
        }
        let request_span =
            spans.iter().find(|s| pi_observe_otel::testing::operation(s) == names::PROVIDER_REQUEST).unwrap();
        assert_eq!(request_span.kind, 3, "CLIENT");
        assert_eq!(request_span.events.len(), 1);
        assert_eq!(request_span.events[0].name, names::PROVIDER_FIRST_TOKEN);
    }
}

#[test]
fn throttling_and_server_errors_are_retried_honouring_retry_after() {
    let receiver =
        Receiver::start(vec![Answer::Status(429, Some(0)), Answer::Status(503, None), Answer::Status(200, None)]);
    let run = run(config(&receiver.endpoint), Duration::from_secs(5));
    assert_eq!(run.stats.spans_exported, 8, "{:?}", run.stats);
    assert_eq!(*receiver.attempts.lock().unwrap(), 3);
}

#[test]
fn unauthorized_stops_export_with_one_diagnostic_and_counts_every_drop() {
    let receiver = Receiver::start(vec![Answer::Status(401, None); 10]);
    let cfg = OtlpConfig { max_export_batch_size: Some(2), ..config(&receiver.endpoint) };
    let run = run(cfg, Duration::from_secs(5));
    assert_eq!(run.stats.spans_exported, 0);
    assert_eq!(run.stats.dropped_unauthorized, 8);
    assert_eq!(run.stats.diagnostics.len(), 1, "{:?}", run.stats.diagnostics);
    assert!(run.stats.diagnostics[0].contains("401"));
    assert_eq!(*receiver.attempts.lock().unwrap(), 1, "no request after the 401");
}

#[test]
fn faults_never_block_the_work_and_shutdown_keeps_its_deadline() {
    let down = Receiver::down_endpoint();
    let reset = Receiver::start(vec![Answer::Reset; 50]);
    let stall = Receiver::start(vec![Answer::Stall; 50]);
    let failing = Receiver::start(vec![Answer::Status(500, None); 50]);
    for endpoint in [down, reset.endpoint.clone(), stall.endpoint.clone(), failing.endpoint.clone()] {
        let deadline = Duration::from_millis(800);
        let cfg = OtlpConfig { timeout: Some(Duration::from_secs(30)), max_retries: 50, ..config(&endpoint) };
        let run = run(cfg, deadline);
        assert_eq!(run.stats.spans_exported, 0, "{endpoint}");
        assert_eq!(
            run.stats.spans_exported + run.stats.spans_dropped(),
            run.stats.spans_started,
            "{endpoint}: {:?}",
            run.stats
        );
        assert!(run.shutdown <= deadline + deadline / 10, "{endpoint}: shutdown took {:?}", run.shutdown);
        pi_observe_core::testing::assert_paired(&run.events);
    }
}

#[test]
fn metrics_arrive_at_shutdown_with_org_dimensions_and_pipeline_counts() {
    let receiver = Receiver::start(vec![]);
    let run = run(config(&receiver.endpoint), Duration::from_secs(5));
    assert_eq!(run.stats.spans_exported, 8);
    let requests = receiver.metrics.lock().unwrap().clone();
    let last = requests.last().expect("a metrics request at shutdown");
    let metrics = &last.resource_metrics[0].scope_metrics[0].metrics;
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    for expected in [
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "pi.prompts",
        "pi.tool.calls",
        "pi.observe.spans",
    ] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let prompts = format!("{:?}", metrics.iter().find(|m| m.name == "pi.prompts").unwrap());
    assert!(prompts.contains("acme") && prompts.contains("globex"), "orgId is a dimension: {prompts}");
    assert!(!prompts.contains("alice"), "userId is not a dimension by default: {prompts}");
    let pipeline = format!("{:?}", metrics.iter().find(|m| m.name == "pi.observe.spans").unwrap());
    assert!(pipeline.contains("exported") && pipeline.contains("AsDouble(8.0)"), "{pipeline}");
}

#[test]
fn logs_are_off_by_default_and_when_on_every_record_arrives_correlated_to_its_span() {
    let receiver = Receiver::start(vec![]);
    let run_off = run(config(&receiver.endpoint), Duration::from_secs(5));
    assert_eq!(run_off.stats.spans_exported, 8);
    assert!(receiver.logs.lock().unwrap().is_empty(), "logs are opt-in");

    for protocol in [Protocol::HttpProtobuf, Protocol::HttpJson] {
        let receiver = Receiver::start(vec![]);
        let cfg = OtlpConfig { logs: Some(true), protocol: Some(protocol), ..config(&receiver.endpoint) };
        let run = run(cfg, Duration::from_secs(5));
        let records: Vec<_> = receiver
            .logs
            .lock()
            .unwrap()
            .iter()
            .flat_map(|r| r.resource_logs.clone())
            .flat_map(|rl| rl.scope_logs)
            .flat_map(|sl| sl.log_records)
            .collect();
        assert_eq!(records.len(), run.events.len(), "{protocol:?}: one log record per contract record");
        for event in &run.events {
            let r = records.iter().find(|r| r.time_unix_nano == event.timestamp.unix_nanos()).expect("record");
            assert_eq!(hex(&r.trace_id), event.trace_id.to_string());
            assert_eq!(hex(&r.span_id), event.span_id.map(|s| s.to_string()).unwrap_or_default());
            assert_eq!(r.severity_number == 17, event.kind == EventKind::Error);
        }
    }
}

#[test]
fn grpc_export_reaches_an_in_process_collector_with_traces_metrics_and_logs() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut collector = runtime.block_on(fake_opentelemetry_collector::FakeCollectorServer::start()).unwrap();
    let cfg = OtlpConfig {
        protocol: Some(Protocol::Grpc),
        logs: Some(true),
        headers: vec![("x-tenant".into(), "t-42".into())],
        ..config(&collector.endpoint())
    };
    let run = run(cfg, Duration::from_secs(5));
    assert_eq!(run.stats.spans_exported, 8, "{:?}", run.stats);
    let spans = runtime.block_on(collector.exported_spans(8, Duration::from_secs(5)));
    assert_eq!(spans.len(), 8);
    for start in run.events.iter().filter(|e| e.kind == EventKind::Start) {
        let span = spans.iter().find(|s| s.span_id == start.span_id.unwrap().to_string()).expect("span");
        assert_eq!(span.trace_id, start.trace_id.to_string());
        assert_eq!(span.parent_span_id, start.parent_span_id.map(|p| p.to_string()).unwrap_or_default());
        assert_eq!(span.start_time_unix_nano, start.timestamp.unix_nanos());
        let user = span.attributes.get("user.id").expect("user.id");
        assert!(user.contains(&format!("{:?}", start.context.get("userId").unwrap())), "{user}");
    }
    let logs = runtime.block_on(collector.exported_logs(run.events.len(), Duration::from_secs(5)));
    assert_eq!(logs.len(), run.events.len());
    let metrics = runtime.block_on(collector.exported_metrics(1, Duration::from_secs(5)));
    assert!(!metrics.is_empty());
}

#[test]
fn grpc_with_gzip_delivers_traces_metrics_and_logs_with_headers_and_resource_attributes() {
    use grpc_receiver::{GrpcReceiver, Received};
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let receiver = GrpcReceiver::start(&runtime);
    let cfg = OtlpConfig {
        protocol: Some(Protocol::Grpc),
        gzip: Some(true),
        logs: Some(true),
        headers: vec![("X-Tenant".into(), "t-42".into()), ("authorization".into(), "Bearer wire-token".into())],
        service_name: Some("pi-wire".into()),
        resource_attributes: vec![("deployment.environment".into(), "ci".into())],
        ..config(&receiver.endpoint)
    };
    let run = run(cfg, Duration::from_secs(5));
    assert_eq!(run.stats.spans_exported, 8, "{:?}", run.stats);
    let received = receiver.received();
    let count = |want: fn(&Received) -> bool| received.iter().filter(|r| want(r)).count();
    assert!(count(|r| matches!(r, Received::Traces(..))) >= 1);
    assert!(count(|r| matches!(r, Received::Metrics(..))) >= 1, "metrics are flushed at shutdown");
    assert!(count(|r| matches!(r, Received::Logs(..))) >= 1);
    for request in &received {
        let meta = request.metadata();
        assert_eq!(meta.get("grpc-encoding").map(String::as_str), Some("gzip"), "{meta:?}");
        assert_eq!(meta.get("x-tenant").map(String::as_str), Some("t-42"));
        assert_eq!(meta.get("authorization").map(String::as_str), Some("Bearer wire-token"));
    }
    let resource_attrs =
        |resource: Option<&opentelemetry_proto::tonic::resource::v1::Resource>| -> Vec<(String, String)> {
            resource
                .map(|r| r.attributes.iter().map(|kv| (kv.key.clone(), format!("{:?}", kv.value))).collect())
                .unwrap_or_default()
        };
    let mut spans = Vec::new();
    let mut log_records = 0;
    for request in &received {
        let resources: Vec<_> = match request {
            Received::Traces(r, _) => {
                spans.extend(
                    r.resource_spans.iter().flat_map(|rs| rs.scope_spans.iter().flat_map(|ss| ss.spans.clone())),
                );
                r.resource_spans.iter().map(|rs| resource_attrs(rs.resource.as_ref())).collect()
            }
            Received::Metrics(r, _) => {
                r.resource_metrics.iter().map(|rm| resource_attrs(rm.resource.as_ref())).collect()
            }
            Received::Logs(r, _) => {
                log_records +=
                    r.resource_logs.iter().flat_map(|rl| &rl.scope_logs).map(|sl| sl.log_records.len()).sum::<usize>();
                r.resource_logs.iter().map(|rl| resource_attrs(rl.resource.as_ref())).collect()
            }
        };
        for attrs in resources {
            let get = |k: &str| attrs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
            assert!(get("service.name").contains("pi-wire"), "{attrs:?}");
            assert!(get("deployment.environment").contains("ci"), "{attrs:?}");
        }
    }
    assert_eq!(log_records, run.events.len(), "one log record per contract record");
    assert_eq!(spans.len(), 8);
    for start in run.events.iter().filter(|e| e.kind == EventKind::Start) {
        let span = spans.iter().find(|s| hex(&s.span_id) == start.span_id.unwrap().to_string()).expect("span");
        assert_eq!(hex(&span.trace_id), start.trace_id.to_string());
        assert_eq!(hex(&span.parent_span_id), start.parent_span_id.map(|p| p.to_string()).unwrap_or_default());
        assert_eq!(span.start_time_unix_nano, start.timestamp.unix_nanos());
    }
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(&pi_observe_otel::testing::tls_fixtures()).join(name)
}

#[test]
fn https_export_trusts_only_the_configured_ca() {
    let receiver = Receiver::start_tls(vec![]);
    assert!(receiver.endpoint.starts_with("https://127.0.0.1:"));
    let https = |certificate: Option<std::path::PathBuf>| OtlpConfig {
        certificate,
        metrics: Some(false),
        max_retries: 1,
        ..config(&receiver.endpoint)
    };
    let trusted = run(https(Some(fixture("ca.pem"))), Duration::from_secs(5));
    assert_eq!(trusted.stats.spans_exported, 8, "{:?}", trusted.stats);
    assert_eq!(receiver.spans().len(), 8);
    // Trusting only a certificate that did not issue the receiver's (the client certificate):
    // the handshake fails and nothing is sent.
    let untrusted = run(https(Some(fixture("client.pem"))), Duration::from_secs(2));
    assert_eq!(untrusted.stats.spans_exported, 0);
    assert_eq!(untrusted.stats.spans_dropped(), 8, "{:?}", untrusted.stats);
    assert_eq!(receiver.spans().len(), 8);
}

#[test]
fn grpc_over_mutual_tls_trusts_the_configured_ca_and_presents_the_client_certificate() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let receiver = grpc_receiver::GrpcReceiver::start_tls(&runtime);
    assert!(receiver.endpoint.starts_with("https://127.0.0.1:"));
    let tls = |client: bool| OtlpConfig {
        protocol: Some(Protocol::Grpc),
        certificate: Some(fixture("ca.pem")),
        client_certificate: client.then(|| (fixture("client.pem"), fixture("client.key"))),
        metrics: Some(false),
        ..config(&receiver.endpoint)
    };
    let trusted = run(tls(true), Duration::from_secs(5));
    assert_eq!(trusted.stats.spans_exported, 8, "{:?}", trusted.stats);
    assert_eq!(receiver.received().len(), 1, "one batch of 8 spans");

    // Without the client certificate the receiver refuses the handshake: nothing arrives, every
    // span is counted as dropped, and shutdown keeps its deadline.
    let deadline = Duration::from_secs(2);
    let refused = run(OtlpConfig { max_retries: 1, ..tls(false) }, deadline);
    assert_eq!(refused.stats.spans_exported, 0);
    assert_eq!(refused.stats.spans_dropped(), 8, "{:?}", refused.stats);
    assert!(refused.shutdown <= deadline + deadline / 10, "shutdown took {:?}", refused.shutdown);
    assert_eq!(receiver.received().len(), 1);
}

#[test]
fn unreadable_or_malformed_tls_files_are_start_up_errors_naming_the_setting() {
    let start = |config: OtlpConfig| OtelSubscriber::new(config).map(|_| ()).unwrap_err().to_string();
    let https = |c: OtlpConfig| OtlpConfig { traces_endpoint: Some("https://127.0.0.1:4318/v1/traces".into()), ..c };
    let missing = start(https(OtlpConfig { certificate: Some(fixture("nope.pem")), ..OtlpConfig::default() }));
    assert!(missing.starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE") && missing.contains("nope.pem"), "{missing}");
    let not_a_cert = start(https(OtlpConfig { certificate: Some(fixture("README.md")), ..OtlpConfig::default() }));
    assert!(not_a_cert.starts_with("OTEL_EXPORTER_OTLP_CERTIFICATE") && not_a_cert.contains("no PEM"), "{not_a_cert}");
    let key_as_cert = start(https(OtlpConfig {
        client_certificate: Some((fixture("client.key"), fixture("client.key"))),
        ..OtlpConfig::default()
    }));
    assert!(key_as_cert.starts_with("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"), "{key_as_cert}");
    assert!(!missing.contains('\n') && !not_a_cert.contains('\n') && !key_as_cert.contains('\n'));
}

#[test]
fn a_retry_after_http_date_is_waited_for() {
    // HTTP-dates have whole seconds: two seconds ahead is at least one second of wait.
    let at = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
    let receiver = Receiver::start(vec![Answer::RetryAt(503, at), Answer::Status(200, None)]);
    // The first batch may go out while the work runs, within the export timeout: room for the wait.
    let cfg = OtlpConfig { timeout: Some(Duration::from_secs(5)), ..config(&receiver.endpoint) };
    let run = run(cfg, Duration::from_secs(10));
    assert_eq!(run.stats.spans_exported, 8, "{:?}", run.stats);
    let arrivals = receiver.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 2);
    // Without the date the backoff would be 100 ms.
    assert!(arrivals[1] - arrivals[0] >= Duration::from_millis(900), "{:?}", arrivals[1] - arrivals[0]);
}

#[test]
fn a_full_queue_drops_and_counts_every_record_it_could_not_take() {
    let stall = Receiver::start(vec![Answer::Stall; 4]);
    let hub = Observability::new();
    let cfg = OtlpConfig {
        max_queue_size: Some(8),
        max_export_batch_size: Some(1),
        metrics: Some(false),
        timeout: Some(Duration::from_secs(30)),
        ..config(&stall.endpoint)
    };
    let otel = OtelSubscriber::new(cfg).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let span = || trace_operation(names::AGENT_TOOL_CALL, Payload::new(), async { Res::Ok(()) });
    // One span puts the worker into an export the receiver never answers ...
    runtime.block_on(hub.scope(span())).unwrap();
    let polled = Instant::now();
    while *stall.attempts.lock().unwrap() == 0 {
        assert!(polled.elapsed() < Duration::from_secs(10), "the export never started");
        std::thread::yield_now();
    }
    // ... so the queue (8 records) takes eight more spans, one record each (a tool call's
    // start is not needed: its end alone makes the span), and drops the rest: the first as its
    // end record finds the queue full, the others shed by the hub as they start (the adapter is
    // `saturated`), counted the same way.
    for _ in 0..200 {
        runtime.block_on(hub.scope(span())).unwrap();
    }
    let _ = pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_millis(300));
    let stats = otel.stats();
    assert_eq!(stats.spans_started, 201);
    assert_eq!(stats.dropped_queue_full, 192, "{stats:?}");
    assert_eq!(hub.stats().dropped(pi_observe_core::DropReason::QueueFull), 192, "one record per span");
    let accounted = stats.spans_exported + stats.spans_spooled + stats.spans_dropped() + stats.spans_sampled_out;
    assert_eq!(accounted, stats.spans_started, "{stats:?}");
}

#[test]
fn spans_a_receiver_rejects_in_a_partial_success_are_counted_as_rejected() {
    let receiver = Receiver::start(vec![Answer::Partial(3)]);
    let run = run(config(&receiver.endpoint), Duration::from_secs(5));
    assert_eq!(run.stats.spans_started, 8);
    assert_eq!(run.stats.spans_exported, 5, "{:?}", run.stats);
    assert_eq!(run.stats.dropped_rejected, 3);
}

/// Runs `run` against an OTLP subscriber with a spool (in a fresh folder, batches of four, its
/// own export timeout `timeout`) sending to a receiver that accepts connections and never
/// answers; then asserts that every span went to the spool after one attempt — the receiver taken
/// as stalled, the batches after the first spooled without trying.
fn against_a_stalled_receiver(timeout: Duration, run: impl FnOnce(&Observability, &Arc<OtelSubscriber>)) {
    against_a_stalled_receiver_asked(timeout, false, run)
}

/// [`against_a_stalled_receiver`], the receiver asked first (a backfill) when `ask_first`.
fn against_a_stalled_receiver_asked(
    timeout: Duration,
    ask_first: bool,
    run: impl FnOnce(&Observability, &Arc<OtelSubscriber>),
) {
    let stall = Receiver::start(vec![Answer::Stall; 8]);
    let stats = spooling_to(&stall.endpoint, timeout, ask_first, run);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    assert_eq!(*stall.attempts.lock().unwrap(), 1, "one attempt; the rest went straight to the spool");
}

/// Runs `run` against an OTLP subscriber sending to `endpoint` with a spool (in a fresh folder,
/// removed after; batches of four, its own export timeout `timeout`), the receiver asked first
/// when `ask_first`; then shuts it down and returns its counts.
fn spooling_to(
    endpoint: &str,
    timeout: Duration,
    ask_first: bool,
    run: impl FnOnce(&Observability, &Arc<OtelSubscriber>),
) -> pi_observe_otel::ExportStats {
    let dir = std::env::temp_dir().join(format!("pi-otel-stalled-spool-{}", pi_observe_core::SpanId::random()));
    let hub = Observability::new();
    let cfg = OtlpConfig {
        metrics: Some(false),
        timeout: Some(timeout),
        max_export_batch_size: Some(4),
        spool: Some(pi_observe_spool::SpoolConfig::new(&dir)),
        check_receiver_first: ask_first,
        ..config(endpoint)
    };
    let otel = OtelSubscriber::new(cfg).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    run(&hub, &otel);
    let _ = pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(1));
    let _ = std::fs::remove_dir_all(&dir);
    otel.stats()
}

/// The workload, flushed with a deadline far off: only taking the receiver as stalled returns
/// the flush early.
fn workload_then_flush(hub: &Observability, otel: &Arc<OtelSubscriber>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(hub.scope(workload()));
    let flushed = Instant::now();
    pi_observe_core::Subscriber::flush(otel.as_ref(), Duration::from_secs(20)).unwrap();
    assert!(flushed.elapsed() < Duration::from_secs(10), "waited out the deadline: {:?}", flushed.elapsed());
}

/// A loopback receiver's round trip is nil: it is never probed with a connection of its own. A
/// silent one sees the question's connection and nothing else — the batches spooled.
#[test]
fn a_silent_loopback_receiver_is_not_probed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((stream, peer)) = listener.accept() {
            held.push(stream);
            if accepted_tx.send(peer).is_err() {
                return;
            }
        }
    });
    let stats = spooling_to(&format!("http://{addr}/v1/traces"), Duration::from_secs(30), true, workload_then_flush);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    // Connections are accepted in the order they were made: once a last one of ours is in,
    // every connection the subscriber made has been counted.
    let marker = std::net::TcpStream::connect(addr).unwrap().local_addr().unwrap();
    let connections = accepted.iter().take_while(|peer| *peer != marker).count();
    assert_eq!(connections, 1, "the question's connection only");
}

/// A loopback receiver whose backlog is full never takes a connection (the kernel drops the
/// SYN; the client tries again only after a second): a backfill spools without waiting for one.
#[test]
fn a_backfill_to_a_loopback_receiver_whose_backlog_is_full_spools() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listener = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.listen(0).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    // Fill the backlog: connections complete until it is full.
    let mut fillers = Vec::new();
    while let Ok(stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
        fillers.push(stream);
        assert!(fillers.len() < 64, "the backlog does not fill");
    }
    let stats = spooling_to(&format!("http://{addr}/v1/traces"), Duration::from_secs(30), true, workload_then_flush);
    assert!(stats.spans_started > 0);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    drop(listener);
}

/// With a spool, a receiver that takes connections and never answers the run's first export is
/// taken as stalled while the run goes on — no flush asked, the export's own timeout far off:
/// the batches are spooled (a loopback connection takes well under 2 ms, so the first answer's
/// patience is its 100 ms floor).
#[test]
fn a_silent_receiver_is_taken_as_stalled_during_the_run() {
    against_a_stalled_receiver(Duration::from_secs(60), |hub, otel| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(hub.scope(workload()));
        let began = Instant::now();
        loop {
            let stats = otel.stats();
            if stats.spans_spooled > 0 && stats.spans_spooled == stats.spans_started {
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(30), "not spooled: {stats:?}");
            std::thread::yield_now();
        }
    });
}

/// With a spool, a flush does not wait out its whole deadline for a receiver that accepted the
/// connection and never answers: past the first-answer patience the export is cut, the batch
/// spooled, and the batches after it go straight to the spool.
#[test]
fn a_flush_with_a_spool_takes_a_silent_receiver_as_stalled() {
    against_a_stalled_receiver(Duration::from_secs(30), |hub, otel| {
        for _ in 0..3 {
            workload_then_flush(hub, otel);
        }
    });
}

/// A backfill asks the receiver with an empty export as it starts; unanswered, the first flush
/// takes it as stalled and every batch goes to the spool — the question the only request sent.
#[test]
fn a_backfill_whose_question_goes_unanswered_spools_every_batch() {
    against_a_stalled_receiver_asked(Duration::from_secs(30), true, |hub, otel| {
        for _ in 0..3 {
            workload_then_flush(hub, otel);
        }
    });
}

/// A backfill that ends before a batch was due settles its question at the exit with the
/// question's own patience, not the exit's: a silent receiver costs the exit no more than it
/// costs a longer backfill, and every span goes to the spool after the one question.
#[test]
fn a_short_backfill_does_not_wait_the_exits_patience_for_its_question() {
    let stall = Receiver::start(vec![Answer::Stall; 4]);
    let dir = std::env::temp_dir().join(format!("pi-otel-short-backfill-{}", pi_observe_core::SpanId::random()));
    let hub = Observability::new();
    let cfg = OtlpConfig {
        metrics: Some(false),
        spool: Some(pi_observe_spool::SpoolConfig::new(&dir)),
        check_receiver_first: true,
        exit_patience: Some(Duration::from_secs(60)),
        ..config(&stall.endpoint)
    };
    let otel = OtelSubscriber::new(cfg).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(hub.scope(workload()));
    let began = Instant::now();
    pi_observe_core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(60)).unwrap();
    // Waiting the exit's patience would take the whole minute.
    assert!(began.elapsed() < Duration::from_secs(30), "{:?}", began.elapsed());
    let stats = otel.stats();
    assert!(stats.spans_started > 0);
    assert_eq!(stats.spans_spooled, stats.spans_started, "{stats:?}");
    assert_eq!(*stall.attempts.lock().unwrap(), 1, "the question only");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A capture that needs the same starts as the OTel subscriber, so that starts stay skipped.
#[derive(Clone, Default)]
struct SameStarts(CaptureSubscriber);

impl pi_observe_core::Subscriber for SameStarts {
    fn on_event(&self, event: &ObsEvent) {
        self.0.on_event(event)
    }

    fn starts(&self) -> pi_observe_core::Starts {
        pi_observe_core::Starts::Only(&[names::AGENT_PROMPT])
    }
}

#[test]
fn spans_made_from_their_end_alone_keep_ids_times_and_events_and_a_running_one_is_incomplete() {
    let receiver = Receiver::start(vec![]);
    let hub = Observability::new();
    let capture = SameStarts::default();
    let _c = hub.subscribe(capture.clone());
    let otel = OtelSubscriber::new(OtlpConfig { metrics: Some(false), ..config(&receiver.endpoint) }).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(hub.scope(workload()));
    // An operation that is still running when the hub shuts down.
    let mut running = Box::pin(hub.scope(trace_operation(
        names::AGENT_TOOL_CALL,
        Payload::new().safe(names::TOOL_NAME, "read"),
        std::future::pending::<Res>(),
    )));
    let noop = &mut std::task::Context::from_waker(std::task::Waker::noop());
    assert!(std::future::Future::poll(running.as_mut(), noop).is_pending());
    hub.shutdown(Duration::from_secs(5)).unwrap();

    let events = capture.0.take();
    let skipped = events.iter().filter(|e| e.start_skipped()).count();
    assert!(skipped >= 6, "the tool calls, turns and requests came as one record each: {skipped}");
    let expected = pi_observe_core::testing::spans_from_events(&events);
    let spans = receiver.spans();
    assert_eq!((otel.stats().spans_started, otel.stats().spans_exported), (9, 9), "{:?}", otel.stats());
    assert_eq!(spans.len(), expected.len());
    for want in &expected {
        let span = spans.iter().find(|s| hex(&s.span_id) == want.span_id.to_string()).expect("span exported");
        assert_eq!(hex(&span.trace_id), want.trace_id.to_string());
        assert_eq!(hex(&span.parent_span_id), want.parent_span_id.map(|p| p.to_string()).unwrap_or_default());
        assert_eq!(pi_observe_otel::testing::operation(span), want.name);
        assert_eq!(span.start_time_unix_nano, want.start.unix_nanos(), "{}", want.name);
        assert_eq!(span.events.len(), want.events.len(), "{}", want.name);
        let incomplete = span.attributes.iter().any(|kv| kv.key == "pi.incomplete");
        match want.end {
            Some(end) => {
                assert_eq!(span.end_time_unix_nano, end.unix_nanos());
                assert!(!incomplete);
            }
            None => assert!(incomplete && want.name == names::AGENT_TOOL_CALL, "{}", want.name),
        }
    }
    let request = spans.iter().find(|s| pi_observe_otel::testing::operation(s) == names::PROVIDER_REQUEST).unwrap();
    assert_eq!(request.events[0].name, names::PROVIDER_FIRST_TOKEN);
    drop(running);
}
