//! The `OTEL_*` variables as a user sets them for `pi`: per-signal settings, the traces
//! exporter switch and metric temporality, against a loopback receiver.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use std::process::Output;

use pi_observe::otel::testing::Receiver;
use support::{pi, scratch};

fn run(base: &str, vars: &[(&str, &str)]) -> Output {
    let d = scratch("otel-env");
    let mut cmd = pi();
    cmd.args(["-p", "hi", "--no-session", "--tools", "none"])
        .flag("--events-jsonl", d.join("events.jsonl"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", base);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    out
}

fn base(receiver: &Receiver) -> String {
    receiver.endpoint.trim_end_matches("/v1/traces").to_owned()
}

fn header<'a>(heads: &'a [(String, Vec<(String, String)>)], path: &str, name: &str) -> Option<&'a str> {
    let (_, headers) = heads.iter().find(|(p, _)| p == path)?;
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

#[test]
fn per_signal_headers_go_only_with_their_signal_and_generic_ones_with_all() {
    let receiver = Receiver::start(vec![]);
    run(
        &base(&receiver),
        &[
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-all=1"),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-metrics=m,x-all=2"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json"),
        ],
    );
    let heads = receiver.heads.lock().unwrap().clone();
    assert_eq!(header(&heads, "/v1/traces", "x-all"), Some("1"));
    assert_eq!(header(&heads, "/v1/traces", "x-metrics"), None);
    assert_eq!(header(&heads, "/v1/metrics", "x-metrics"), Some("m"));
    assert_eq!(header(&heads, "/v1/metrics", "x-all"), Some("2"), "the metrics value wins for metrics");
    assert_eq!(header(&heads, "/v1/metrics", "content-type"), Some("application/json"));
    assert_eq!(header(&heads, "/v1/traces", "content-type"), Some("application/x-protobuf"));
    assert_eq!(receiver.metrics.lock().unwrap().len(), 1, "the JSON metrics request decoded");
}

#[test]
fn traces_exporter_none_sends_metrics_but_no_spans() {
    let receiver = Receiver::start(vec![]);
    let out = run(&base(&receiver), &[("OTEL_TRACES_EXPORTER", "none")]);
    assert!(receiver.spans().is_empty());
    assert_eq!(receiver.metrics.lock().unwrap().len(), 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 spans delivered, 0 not delivered"));
}

#[test]
fn traces_exporter_console_writes_the_spans_as_otlp_json_on_stderr() {
    let receiver = Receiver::start(vec![]);
    let out = run(&base(&receiver), &[("OTEL_TRACES_EXPORTER", "console")]);
    assert!(receiver.spans().is_empty(), "spans did not go over the network");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.starts_with("{\"resourceSpans\"")).unwrap_or_else(|| panic!("{stderr}"));
    let request: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest =
        serde_json::from_str(line).unwrap();
    let names: Vec<String> = request.resource_spans[0].scope_spans[0].spans.iter().map(|s| s.name.clone()).collect();
    assert!(names.iter().any(|n| n.starts_with("invoke_agent")), "{names:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("(faux)"), "the answer is unchanged");
}

#[test]
fn delta_temporality_is_announced_on_every_metric() {
    use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, metric::Data};
    let receiver = Receiver::start(vec![]);
    run(&base(&receiver), &[("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")]);
    let requests = receiver.metrics.lock().unwrap().clone();
    let metrics: Vec<_> = requests[0].resource_metrics[0].scope_metrics[0].metrics.clone();
    assert!(!metrics.is_empty());
    for metric in metrics {
        let temporality = match metric.data.unwrap() {
            Data::Sum(s) => s.aggregation_temporality,
            Data::Histogram(h) => h.aggregation_temporality,
            other => panic!("{other:?}"),
        };
        assert_eq!(temporality, AggregationTemporality::Delta as i32, "{}", metric.name);
    }
}
