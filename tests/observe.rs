//! `pi observe status` and `pi observe test` against a healthy, a 401 and a down receiver.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use std::path::Path;
use std::process::{Command, Output};

use pi_observe::otel::testing::{Answer, Receiver};
use serde_json::Value;
use support::{pi, scratch};

fn pi_in(dir: &Path) -> Command {
    let mut cmd = pi();
    cmd.env("PI_CODING_AGENT_DIR", dir.join("agent"));
    cmd
}

fn json(out: &Output) -> Value {
    assert!(!out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn prompt(dir: &Path, endpoint: &str) -> Output {
    pi_in(dir)
        .args(["-p", "hi", "--no-session", "--tools", "none", "--otlp", endpoint, "--otlp-header"])
        .arg("authorization=Bearer sekrit-token")
        .output()
        .unwrap()
}

fn status(dir: &Path, endpoint: &str) -> Value {
    let out = pi_in(dir)
        .args(["observe", "status", "--json", "--otlp", endpoint, "--otlp-header"])
        .arg("authorization=Bearer sekrit-token")
        .env("OTEL_TRACES_SAMPLER", "traceidratio")
        .env("OTEL_TRACES_SAMPLER_ARG", "0.5")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains("sekrit"), "no credential in the status: {text}");
    json(&out)
}

#[test]
fn status_shows_the_pipeline_with_sources_and_the_last_runs_counters_for_a_healthy_receiver() {
    let d = scratch("status-ok");
    let receiver = Receiver::start(vec![]);
    assert!(prompt(&d, &receiver.endpoint).status.success());
    let doc = status(&d, &receiver.endpoint);
    let otlp = &doc["pipeline"]["sinks"][0];
    assert_eq!(otlp["sink"], "otlp");
    assert_eq!(otlp["endpoint"], receiver.endpoint.as_str());
    assert_eq!(otlp["headers"], serde_json::json!(["authorization"]), "names only");
    assert_eq!(otlp["sources"]["endpoint"], "flag --otlp");
    assert_eq!(otlp["sources"]["protocol"], "default");
    assert_eq!(otlp["sources"]["sampler"], "env OTEL_TRACES_SAMPLER");
    assert_eq!(otlp["sampleRatio"], 0.5);
    assert_eq!(otlp["sources"]["sampleRatio"], "env OTEL_TRACES_SAMPLER_ARG");
    assert_eq!(otlp["sources"]["metrics"], "default");
    assert_eq!(otlp["capture"], serde_json::json!([]));
    assert_eq!(doc["pipeline"]["spool"]["sources"]["dir"], "default");
    let run = &doc["lastRun"];
    assert_eq!(run["command"], "print");
    assert_eq!(run["otlp"]["delivered"], receiver.spans().len());
    assert_eq!(run["otlp"]["spooled"], 0);
    assert!(run["hub"]["emitted"].as_u64().unwrap() > 0);
    assert!(run["hub"]["fieldsWithheld"].as_u64().unwrap() > 0, "the prompt was withheld");
    assert_eq!(doc["spool"]["batches"], 0);
}

#[test]
fn status_after_a_401_counts_the_unauthorized_drops() {
    let d = scratch("status-401");
    let receiver = Receiver::start(vec![Answer::Status(401, None); 8]);
    let out = prompt(&d, &receiver.endpoint);
    assert!(out.status.success());
    let run = &status(&d, &receiver.endpoint)["lastRun"];
    assert!(run["otlp"]["dropped"]["unauthorized"].as_u64().unwrap() > 0, "{run}");
    assert!(run["otlp"]["lastError"].as_str().unwrap().contains("401"), "{run}");
}

#[test]
fn status_after_a_down_receiver_shows_the_spooled_batches() {
    let d = scratch("status-down");
    let endpoint = Receiver::down_endpoint();
    assert!(prompt(&d, &endpoint).status.success());
    let doc = status(&d, &endpoint);
    assert!(doc["lastRun"]["otlp"]["spooled"].as_u64().unwrap() > 0);
    assert!(doc["lastRun"]["spool"]["spooled"].as_u64().unwrap() > 0);
    assert!(doc["spool"]["batches"].as_u64().unwrap() > 0);
    assert!(doc["spool"]["oldest"].as_str().unwrap().starts_with("20"));
    // The human form says the same.
    let out = pi_in(&d).args(["observe", "status", "--otlp", &endpoint]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("spool contents") && text.contains("last run (print at "), "{text}");
}

#[test]
fn credentials_in_the_endpoint_url_stay_out_of_errors_the_state_file_the_spool_and_the_status() {
    let d = scratch("status-url-secrets");
    let down = Receiver::down_endpoint();
    let base = down.trim_end_matches("/v1/traces").replace("http://", "http://user:pa55word@");
    let endpoint = format!("{base}/?token=t0ken");
    for _ in 0..2 {
        // The second run also tries to deliver the first run's batches.
        let out = prompt(&d, &endpoint);
        assert!(out.status.success(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Connection refused") && err.contains("/v1/traces"), "{err}");
        assert!(!err.contains("pa55word") && !err.contains("t0ken") && !err.contains("user:"), "{err}");
    }
    for entry in walk(&d.join("agent")) {
        let bytes = std::fs::read(&entry).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("pa55word") && !text.contains("t0ken"), "{} keeps a credential", entry.display());
    }
    let doc = status(&d, &endpoint);
    let text = doc.to_string();
    assert!(doc["spool"]["lastDeliveryError"].as_str().is_some_and(|e| e.contains("Connection refused")), "{doc}");
    assert!(!text.contains("pa55word") && !text.contains("t0ken"), "{text}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}

#[test]
fn a_malformed_state_file_is_named() {
    let d = scratch("status-bad");
    std::fs::create_dir_all(d.join("agent")).unwrap();
    std::fs::write(d.join("agent/observe-state.json"), "{not json").unwrap();
    let out = pi_in(&d).args(["observe", "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("observe-state.json: not a pi state file"), "{err}");
}

fn probe(dir: &Path, args: &[&str]) -> (Output, Value) {
    let out = pi_in(dir)
        .args(["observe", "test", "--json"])
        .args(args)
        .env("PI_TRACE_URL_TEMPLATE", "http://ui.example/trace/{trace_id}")
        .output()
        .unwrap();
    let doc = json(&out);
    (out, doc)
}

#[test]
fn test_probes_a_healthy_receiver_with_one_span_and_one_metric_point() {
    let d = scratch("probe-ok");
    let receiver = Receiver::start(vec![]);
    let (out, doc) = probe(&d, &["--otlp", &receiver.endpoint]);
    assert!(out.status.success(), "{out:?}");
    let trace = doc["traceId"].as_str().unwrap();
    assert_eq!(doc["traceUrl"], format!("http://ui.example/trace/{trace}"));
    let sinks = doc["sinks"].as_array().unwrap();
    assert_eq!(sinks.len(), 2);
    for sink in sinks {
        assert_eq!(sink["ok"], true, "{sink}");
        assert_eq!(sink["reachable"], true);
        assert_eq!(sink["status"], "HTTP 200");
        assert_eq!(sink["authAccepted"], true);
        assert!(sink["latencyMs"].as_f64().unwrap() >= 0.0);
    }
    let spans = receiver.spans();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].name, "pi.observe.probe");
    assert_eq!(spans[0].trace_id.iter().map(|b| format!("{b:02x}")).collect::<String>(), trace);
    assert_eq!(receiver.metrics.lock().unwrap().len(), 1);
}

#[test]
fn test_reports_refused_credentials_and_exits_non_zero() {
    let d = scratch("probe-401");
    let receiver = Receiver::start(vec![Answer::Status(401, None)]);
    let (out, doc) = probe(&d, &["--otlp", &receiver.endpoint]);
    assert_eq!(out.status.code(), Some(1));
    let traces = &doc["sinks"][0];
    assert_eq!(traces["signal"], "traces");
    assert_eq!(traces["reachable"], true);
    assert_eq!(traces["status"], "HTTP 401");
    assert_eq!(traces["authAccepted"], false);
    assert_eq!(traces["ok"], false);
}

#[test]
fn test_reports_a_down_receiver_and_exits_non_zero() {
    let d = scratch("probe-down");
    let (out, doc) = probe(&d, &["--otlp", &Receiver::down_endpoint()]);
    assert_eq!(out.status.code(), Some(1));
    for sink in doc["sinks"].as_array().unwrap() {
        assert_eq!(sink["reachable"], false);
        assert_eq!(sink["status"], Value::Null);
        assert!(sink["error"].as_str().unwrap().contains("Connection refused"), "{sink}");
    }
}

#[test]
fn test_probes_sentry_with_one_transaction() {
    use pi_observe::sentry::testing::EnvelopeEndpoint;
    let d = scratch("probe-sentry");
    let endpoint = EnvelopeEndpoint::start();
    let (out, doc) = probe(&d, &["--sentry", &endpoint.dsn()]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(doc["sinks"][0]["sink"], "sentry");
    let transactions: Vec<_> = endpoint.items().into_iter().filter(|(k, _)| k == "transaction").collect();
    assert_eq!(transactions.len(), 1);
    assert_eq!(transactions[0].1["contexts"]["trace"]["trace_id"], doc["traceId"]);
}

#[test]
fn test_without_a_remote_sink_is_a_usage_error() {
    let d = scratch("probe-none");
    let out = pi_in(&d).args(["observe", "test"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no remote sink to test"));
}

fn canary(dir: &Path, args: &[&str]) -> (Output, Value) {
    let out = pi_in(dir).args(["observe", "canary", "--json"]).args(args).output().unwrap();
    let doc = json(&out);
    (out, doc)
}

fn sink<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["sinks"].as_array().unwrap().iter().find(|s| s["sink"] == name).unwrap_or_else(|| panic!("{name}: {doc}"))
}

fn found(sink: &Value) -> Vec<String> {
    sink["content"].as_array().unwrap().iter().map(|c| c["canary"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn canary_with_the_default_configuration_finds_nothing_leaving_any_sink() {
    let d = scratch("canary-default");
    let (out, doc) =
        canary(&d, &["--otlp", &Receiver::down_endpoint(), "--sentry", "http://k@127.0.0.1:9/1", "--log-json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(doc["ok"], true);
    for name in ["events", "json", "log", "otlp", "sentry"] {
        let s = sink(&doc, name);
        assert!(found(s).is_empty(), "{s}");
        assert_eq!(s["secrets"], serde_json::json!([]), "{s}");
        assert!(s["bytes"].as_u64().unwrap() > 0, "{name} carried the run's telemetry: {s}");
    }
    assert_eq!(
        doc["planted"]["secretFormats"].as_array().unwrap().len(),
        pi_observe::core::canary::secret_samples().len()
    );
}

#[test]
fn canary_reports_the_prompt_for_otlp_when_it_opted_in_and_no_secret() {
    let d = scratch("canary-prompt");
    let receiver = Receiver::start(vec![]);
    let (out, doc) = canary(&d, &["--otlp", &receiver.endpoint, "--capture", "otlp=prompt"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let otlp = sink(&doc, "otlp");
    assert!(found(otlp).contains(&"prompt".to_owned()), "{otlp}");
    assert!(otlp["content"].as_array().unwrap().iter().all(|c| c["optedIn"] == true), "{otlp}");
    assert_eq!(otlp["secrets"], serde_json::json!([]));
    assert!(found(sink(&doc, "events")).is_empty());
    assert!(receiver.requests().is_empty(), "the real transport was not used");
}

#[test]
fn canary_plants_every_kind_it_names() {
    // With everything captured locally, every planted marker shows up — and still no secret —
    // except the extra request header's: pi records only the provider's own non-secret headers,
    // never ones added by configuration, captured or not.
    let d = scratch("canary-all");
    let (out, doc) = canary(&d, &["--capture", "events=all"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let planted: Vec<String> =
        doc["planted"]["content"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_owned()).collect();
    assert!(planted.contains(&"header".to_owned()), "{planted:?}");
    let expected: Vec<String> = planted.into_iter().filter(|c| c != "header").collect();
    assert_eq!(found(sink(&doc, "events")), expected);
    assert_eq!(sink(&doc, "events")["secrets"], serde_json::json!([]));
    assert!(found(sink(&doc, "json")).is_empty());
}

/// The value of the sum `name` with `outcome` (when given) in the last metrics request.
fn metric(receiver: &Receiver, name: &str, outcome: Option<&str>) -> Option<f64> {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
    let requests = receiver.metrics.lock().unwrap().clone();
    let last = requests.last()?;
    let metrics = last.resource_metrics.iter().flat_map(|r| &r.scope_metrics).flat_map(|s| &s.metrics);
    let metric = metrics.into_iter().find(|m| m.name == name)?;
    let Some(Data::Sum(sum)) = &metric.data else { return None };
    sum.data_points
        .iter()
        .find(|p| {
            outcome.is_none_or(|o| {
                p.attributes
                    .iter()
                    .any(|kv| kv.key == "outcome" && format!("{:?}", kv.value).contains(&format!("\"{o}\"")))
            })
        })
        .and_then(|p| match p.value {
            Some(Number::AsDouble(v)) => Some(v),
            Some(Number::AsInt(v)) => Some(v as f64),
            None => None,
        })
}

#[test]
fn self_telemetry_metrics_arrive_even_when_every_trace_is_sampled_out() {
    let d = scratch("self-metrics");
    let receiver = Receiver::start(vec![]);
    let out = pi_in(&d)
        .args(["-p", "hi", "--no-session", "--tools", "none", "--otlp", &receiver.endpoint])
        .env("OTEL_TRACES_SAMPLER", "traceidratio")
        .env("OTEL_TRACES_SAMPLER_ARG", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(receiver.spans().is_empty(), "every trace sampled out");
    assert!(metric(&receiver, "pi.observe.records", Some("emitted")).unwrap() > 0.0);
    assert!(metric(&receiver, "pi.observe.fields", Some("withheld")).unwrap() > 0.0, "the prompt was withheld");
    assert!(metric(&receiver, "pi.observe.records", Some("dropped.queue_full")).is_none(), "zero is not sent");
}

#[test]
fn capturing_one_kind_of_content_brings_no_other_kind_along() {
    // Each sink opted in to a single kind carries that kind only: a completion's tool calls
    // carry no arguments (tool_args), and only a provider payload — the conversation sent —
    // carries the earlier turns' content with it.
    let d = scratch("canary-one-kind");
    for kind in pi_observe::core::ContentKind::ALL {
        let capture = format!("all={}", kind.as_str());
        let (out, doc) = canary(
            &d,
            &["--otlp", &Receiver::down_endpoint(), "--conventions", "both", "--sentry", "http://k@127.0.0.1:9/1"]
                .into_iter()
                .chain(["--log-json", "--capture", &capture])
                .collect::<Vec<_>>(),
        );
        assert_eq!(out.status.code(), Some(0), "{capture}: {doc}");
        // …and the kind captured did reach the sinks (pi never records configured headers).
        if kind != pi_observe::core::ContentKind::Header {
            let seen =
                ["events", "otlp", "sentry"].iter().any(|s| found(sink(&doc, s)).contains(&kind.as_str().to_owned()));
            assert!(seen, "{capture}: the captured kind reached no sink: {doc}");
        }
    }
}
