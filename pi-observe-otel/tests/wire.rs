//! OTLP on the wire (HTTP protobuf and JSON, gRPC): gzip, headers and resource attributes arrive;
//! spans keep the contract's ids, parents and times; faults never block or change the work.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

#[path = "support/grpc_receiver.rs"]
mod grpc_receiver;
#[path = "support/workload.rs"]
mod workload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pi_observe_core::testing::CaptureSubscriber;
use pi_observe_core::{ContentPolicy, EventKind, ObsEvent, Observability, Payload, names, trace_operation};
use pi_observe_otel::testing::{Answer, Receiver};
use pi_observe_otel::{OtelSubscriber, OtlpConfig, Protocol};
use workload::{Res, config, workload};

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
