//! The agent's traces over OTLP, end to end: `pi -p --otlp` for two users at once against a
//! loopback OTLP receiver; an in-process faux run with parallel tools exported span for span;
//! and export faults that must not change the agent's output or hold its exit.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::{Flag, Succeeds};

use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use pi_observe::core::{ContentPolicy, EventKind, ObsEvent, Observability, names};
use pi_observe::otel::testing::{Answer, Receiver};
use support::{attr, events, faux_script, pi, scratch};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every start/end pair of `evs` is one span in `spans`, with the same ids, parent, name and
/// nanosecond times.
fn assert_spans_match_events(evs: &[ObsEvent], spans: &[Span]) {
    let starts: Vec<&ObsEvent> = evs.iter().filter(|e| e.kind == EventKind::Start).collect();
    assert_eq!(starts.len(), spans.len(), "one span per start record");
    for start in starts {
        let id = start.span_id.unwrap().to_string();
        let span = spans.iter().find(|s| hex(&s.span_id) == id).unwrap_or_else(|| panic!("span {id} missing"));
        let end = evs
            .iter()
            .find(|e| matches!(e.kind, EventKind::End | EventKind::Error) && e.span_id == start.span_id)
            .unwrap();
        assert_eq!(hex(&span.trace_id), start.trace_id.to_string());
        assert_eq!(hex(&span.parent_span_id), start.parent_span_id.map(|p| p.to_string()).unwrap_or_default());
        assert_eq!(pi_observe::otel::testing::operation(span), start.name);
        assert_eq!(span.start_time_unix_nano, start.timestamp.unix_nanos());
        assert_eq!(span.end_time_unix_nano, end.timestamp.unix_nanos());
    }
}

fn run_pi(dir: &Path, user: &str, org: &str, otlp: Option<&str>) -> std::process::Child {
    let mut cmd = pi();
    cmd.args(["-p", "check the project", "--provider", "faux", "--no-session", "--user", user, "--org", org])
        .flag("--cwd", dir)
        .flag("--faux-script", faux_script(dir))
        .flag("--events-jsonl", dir.join(format!("{user}.jsonl")))
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if let Some(endpoint) = otlp {
        cmd.args([
            "--otlp",
            endpoint,
            "--otlp-header",
            "x-tenant=t1",
            "--service-name",
            "pi-e2e",
            "--conventions",
            "both",
        ]);
    }
    cmd.spawn().unwrap()
}

#[test]
fn two_concurrent_users_export_their_traces_with_ids_attribution_and_tokens() {
    let receiver = Receiver::start(vec![]);
    let d = scratch("two-users");
    let children: Vec<_> = [("alice", "acme"), ("bob", "globex")]
        .into_iter()
        .map(|(u, o)| (u, o, run_pi(&d, u, o, Some(&receiver.endpoint))))
        .collect();
    let mut all_events = Vec::new();
    for (user, org, child) in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let evs = events(&d.join(format!("{user}.jsonl")));
        let trace = evs[0].trace_id;
        assert!(stderr.contains(&format!("pi: trace {trace}")), "{stderr}");
        for e in &evs {
            assert_eq!((e.context.get("userId"), e.context.get("orgId")), (Some(user), Some(org)));
        }
        all_events.extend(evs);
    }
    let spans = receiver.spans();
    assert_spans_match_events(&all_events, &spans);
    for span in &spans {
        let user = attr(span, "user.id");
        assert!(matches!(user, Some(Any::StringValue(u)) if u == "alice" || u == "bob"), "{}", span.name);
    }
    let llm = spans.iter().find(|s| pi_observe::otel::testing::operation(s) == names::PROVIDER_REQUEST).unwrap();
    assert!(matches!(attr(llm, "gen_ai.usage.output_tokens"), Some(Any::IntValue(n)) if *n > 0));
    assert!(matches!(attr(llm, "openinference.span.kind"), Some(Any::StringValue(k)) if k == "LLM"));
    assert_eq!(receiver.requests()[0].header("x-tenant"), Some("t1"));
    assert!(format!("{:?}", receiver.resource()).contains("pi-e2e"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_in_process_faux_run_with_parallel_tools_is_exported_span_for_span() {
    let receiver = Receiver::start(vec![]);
    let d = scratch("in-process");
    let hub = Observability::new();
    let (capture, _c) = pi_observe::core::testing::CaptureSubscriber::attach(&hub);
    let config = pi_observe::otel::OtlpConfig {
        traces_endpoint: Some(receiver.endpoint.clone()),
        schedule_delay: Some(Duration::from_millis(20)),
        ..Default::default()
    };
    let otel = pi_observe::otel::OtelSubscriber::new(config).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    faux_run_with_parallel_tools(&hub, &d);
    pi_observe::core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(5)).unwrap();
    let evs = capture.take();
    pi_observe::core::testing::assert_paired(&evs);
    assert_spans_match_events(&evs, &receiver.spans());
    let stats = otel.stats();
    assert_eq!(stats.spans_exported, stats.spans_started);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_sdk_in_memory_exporter_gets_the_contract_tree_id_for_id_and_time_for_time() {
    use opentelemetry_sdk::trace::InMemorySpanExporter;
    let d = scratch("in-memory");
    let hub = Observability::new();
    let (capture, _c) = pi_observe::core::testing::CaptureSubscriber::attach(&hub);
    let memory = InMemorySpanExporter::default();
    let config = pi_observe::otel::OtlpConfig {
        service_name: Some("pi-tier2".into()),
        metrics: Some(false),
        schedule_delay: Some(Duration::from_millis(20)),
        ..Default::default()
    };
    let otel = pi_observe::otel::OtelSubscriber::with_span_exporter(config, memory.clone()).unwrap();
    let _o = hub.subscribe_arc(otel.clone(), Arc::new(ContentPolicy::default()));
    faux_run_with_parallel_tools(&hub, &d);
    pi_observe::core::Subscriber::flush(otel.as_ref(), Duration::from_secs(5)).unwrap();
    let evs = capture.take();
    let contract = pi_observe::core::testing::assert_paired(&evs);
    let spans = memory.get_finished_spans().unwrap();
    assert_eq!(spans.len(), contract.len(), "one SDK span per contract operation");
    let tools = contract.iter().filter(|s| s.name == names::AGENT_TOOL_CALL).count();
    assert_eq!(tools, 3, "three parallel tool calls");
    let nanos = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    for op in &contract {
        let span = spans
            .iter()
            .find(|s| s.span_context.span_id().to_string() == op.span_id.to_string())
            .unwrap_or_else(|| panic!("{} missing", op.name));
        assert_eq!(span.span_context.trace_id().to_string(), op.trace_id.to_string());
        let operation = span.attributes.iter().find(|kv| kv.key.as_str() == "pi.operation").map(|kv| kv.value.as_str());
        assert_eq!(operation.as_deref().unwrap_or(&span.name), op.name);
        let parent = op.parent_span_id.map(|p| p.to_string()).unwrap_or_else(|| "0000000000000000".into());
        assert_eq!(span.parent_span_id.to_string(), parent, "{}", op.name);
        assert_eq!(nanos(span.start_time), op.start.unix_nanos(), "{} start", op.name);
        assert_eq!(nanos(span.end_time), op.end.unwrap().unix_nanos(), "{} end", op.name);
        let is_error = matches!(span.status, opentelemetry::trace::Status::Error { .. });
        assert_eq!(is_error, op.error.is_some(), "{} status", op.name);
    }
    let exported = otel.stats();
    assert_eq!(exported.spans_exported, exported.spans_started);
    pi_observe::core::Subscriber::shutdown(otel.as_ref(), Duration::from_secs(5)).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

/// One prompt on the faux provider whose first turn runs ls, find and bash in parallel, on `hub`.
fn faux_run_with_parallel_tools(hub: &Observability, dir: &Path) {
    use pi_agent::provider::{FauxProvider, FauxResponse};
    use pi_agent::{Agent, AgentConfig};
    let faux = FauxProvider::new();
    faux.push([
        FauxResponse::tools(
            None,
            vec![
                ("ls", serde_json::json!({})),
                ("find", serde_json::json!({"pattern": "*"})),
                ("bash", serde_json::json!({"command": "true"})),
            ],
        ),
        FauxResponse::text("done"),
    ]);
    let model = pi_agent::model::Registry::builtin().default_for("faux").unwrap().clone();
    let tools = pi_agent::tools::ToolRegistry::all_builtin();
    let mut agent = Agent::new(Arc::new(faux), model, tools, None, AgentConfig::default(), dir.to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(hub.scope(async {
        let cancel = tokio_util::sync::CancellationToken::new();
        agent.prompt("go", &cancel, &mut |_| {}).await.unwrap()
    }));
}

fn output_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn export_faults_leave_the_answer_unchanged_and_the_exit_within_the_deadline() {
    let d = scratch("faults");
    let baseline = run_pi(&d, "u0", "o", None).wait_with_output().unwrap();
    assert!(baseline.status.success());
    let baseline_started = Instant::now();
    let _ = run_pi(&d, "u0", "o", None).wait_with_output().unwrap();
    let baseline_time = baseline_started.elapsed();

    let down = Receiver::down_endpoint();
    let stall = Receiver::start(vec![Answer::Stall; 20]);
    let failing = Receiver::start(vec![Answer::Status(500, None); 50]);
    let limited = Receiver::start(vec![Answer::Status(429, Some(0)), Answer::Status(200, None)]);
    let unauthorized = Receiver::start(vec![Answer::Status(401, None); 20]);
    let reset = Receiver::start(vec![Answer::Reset; 50]);
    for endpoint in
        [&down, &stall.endpoint, &failing.endpoint, &limited.endpoint, &unauthorized.endpoint, &reset.endpoint]
    {
        let started = Instant::now();
        let out = run_pi(&d, "u1", "o", Some(endpoint)).wait_with_output().unwrap();
        let elapsed = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{endpoint}: {stderr}");
        assert_eq!(output_text(&out), output_text(&baseline), "{endpoint}: export changed the answer");
        // Flush deadline (OTEL_EXPORTER_OTLP_TIMEOUT=1000) + 10 %, on top of a run without export,
        // plus 2 s of slack for process start-up noise while other tests load both cores: still
        // short of the default 5 s flush deadline, so a timeout not honoured shows. A collector
        // that held the exit would cost its 30 s timeouts and retries instead.
        let bound = baseline_time + Duration::from_millis(1100 + 2000);
        assert!(elapsed <= bound, "{endpoint}: exit took {elapsed:?} (baseline {baseline_time:?})");
        let warnings = stderr.lines().filter(|l| l.contains("warning")).count();
        if endpoint == &unauthorized.endpoint {
            assert_eq!(warnings, 1, "one diagnostic for 401: {stderr}");
            assert_eq!(*unauthorized.attempts.lock().unwrap(), 1);
        }
        let summary = stderr.lines().find(|l| l.starts_with("pi: otlp: ")).unwrap_or_else(|| panic!("{stderr}"));
        // "pi: otlp: N spans delivered, M not delivered (last error: …)"
        let counts = summary.split(" (").next().unwrap().split("; ").next().unwrap();
        let numbers: Vec<u64> = counts
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse().ok())
            .collect();
        let (exported, dropped) = (numbers[numbers.len() - 2], numbers[numbers.len() - 1]);
        let emitted = events(&d.join("u1.jsonl")).iter().filter(|e| e.kind == EventKind::Start).count() as u64;
        assert_eq!(exported + dropped, emitted, "{endpoint}: {summary}");
        std::fs::remove_file(d.join("u1.jsonl")).unwrap();
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn print_mode_exports_over_grpc_to_an_in_process_collector() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mut collector = runtime.block_on(fake_opentelemetry_collector::FakeCollectorServer::start()).unwrap();
    let d = scratch("grpc");
    let mut cmd = pi();
    cmd.args(["-p", "hi", "--provider", "faux", "--no-session", "--tools", "none", "--user", "carol"])
        .args(["--otlp", &collector.endpoint(), "--otlp-protocol", "grpc"])
        .flag("--events-jsonl", d.join("grpc.jsonl"));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let evs = events(&d.join("grpc.jsonl"));
    let starts = evs.iter().filter(|e| e.kind == EventKind::Start).count();
    let spans = runtime.block_on(collector.exported_spans(starts, Duration::from_secs(5)));
    assert_eq!(spans.len(), starts);
    let root = evs.iter().find(|e| e.name == names::AGENT_PROMPT).unwrap();
    assert!(
        spans.iter().any(|s| s.span_id == root.span_id.unwrap().to_string() && s.trace_id == root.trace_id.to_string())
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn otlp_sentry_and_json_logs_run_at_once_and_agree_on_the_trace() {
    let d = scratch("all-three");
    let receiver = Receiver::start(vec![]);
    let sentry = pi_observe::sentry::testing::EnvelopeEndpoint::start();
    let log = d.join("pi.log.jsonl");
    let out = pi()
        .args(["-p", "check the project", "--provider", "faux", "--no-session", "--user", "u1", "--org", "acme"])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d))
        .flag("--events-jsonl", d.join("events.jsonl"))
        .args(["--otlp", &receiver.endpoint, "--sentry", &sentry.dsn()])
        .flag("--log-json", &log)
        .env_remove("SENTRY_DSN")
        .env_remove("RUST_LOG")
        .env_remove("PI_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("pi: sentry: 1 transactions, 0 error events: 1 delivered, 0 not delivered"), "{stderr}");

    let evs = events(&d.join("events.jsonl"));
    let trace = evs[0].trace_id.to_string();
    let starts = evs.iter().filter(|e| e.kind == EventKind::Start).count();
    // OTLP: every span, same trace.
    let spans = receiver.spans();
    assert_eq!(spans.len(), starts);
    assert!(spans.iter().all(|s| hex(&s.trace_id) == trace));
    // Sentry: one transaction of the same trace holding every other span.
    let items = sentry.items();
    let tx = &items.iter().find(|(t, _)| t == "transaction").unwrap().1;
    assert_eq!(tx["contexts"]["trace"]["trace_id"], trace);
    assert_eq!(tx["spans"].as_array().unwrap().len(), starts - 1);
    assert_eq!(tx["user"]["id"], "u1");
    // JSON logs: one line per record, same trace.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &serde_json::Value| l["target"] == "pi_observe")
        .collect();
    assert_eq!(lines.len(), evs.len());
    assert!(lines.iter().all(|l| l["trace_id"] == trace && l["ctx.orgId"] == "acme"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn export_replays_sessions_with_the_same_ids_every_time_and_usage_as_recorded() {
    let d = scratch("export");
    let demo = pi().args(["demo", "--dir"]).arg(&d).output().unwrap();
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let sessions = d.join("sessions");
    let export = |extra: &[&str], jsonl: &Path| {
        let out = pi().arg("export").arg(&sessions).arg("--events-jsonl").arg(jsonl).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        events(jsonl)
    };
    let receiver = Receiver::start(vec![]);
    let first = export(&["--otlp", &receiver.endpoint], &d.join("first.jsonl"));
    let second = export(&[], &d.join("second.jsonl"));
    assert_eq!(first, second, "a replay yields the same records, ids included");
    pi_observe::core::testing::assert_paired(&first);
    assert_spans_match_events(&first, &receiver.spans());

    // The shape of a live prompt: prompt → turn → provider request, tool calls under the turn.
    let by_id: std::collections::HashMap<_, _> =
        first.iter().filter(|e| e.kind == EventKind::Start).map(|e| (e.span_id.unwrap(), e)).collect();
    let parent_name = |e: &ObsEvent| e.parent_span_id.map(|p| by_id[&p].name.to_string());
    for start in by_id.values() {
        let expected = match start.name.as_ref() {
            names::AGENT_PROMPT => None,
            names::AGENT_TURN => Some(names::AGENT_PROMPT),
            names::PROVIDER_REQUEST | names::AGENT_TOOL_CALL => Some(names::AGENT_TURN),
            other => panic!("unexpected span {other}"),
        };
        assert_eq!(parent_name(start).as_deref(), expected, "{}", start.name);
        assert!(start.context.get(names::CTX_USER_ID).is_some(), "attribution replayed");
    }
    // Tokens and cost per user are the sessions' recorded totals; tool calls are the tool results.
    for (user, file) in [("alice", "alice.jsonl"), ("bob", "bob.jsonl")] {
        let session = pi_observe::agent::session::read_session(&sessions.join(file)).unwrap();
        let ends = first.iter().filter(|e| {
            e.kind != EventKind::Start && e.name == names::PROVIDER_REQUEST && e.context.get("userId") == Some(user)
        });
        let (mut input, mut cost, mut turns) = (0, 0.0, 0);
        for end in ends {
            input += end.payload.get(names::INPUT_TOKENS).and_then(|v| v.as_i64()).unwrap() as u64;
            cost += end.payload.get(names::COST_TOTAL).and_then(|v| v.as_f64()).unwrap();
            turns += 1;
        }
        let totals = session.totals();
        assert_eq!((input, turns), (totals.usage.input, totals.assistant_messages), "{user}");
        assert!((cost - totals.usage.cost.total).abs() < 1e-12, "{user}");
        let tool_results = session
            .entries
            .iter()
            .filter(|e| matches!(&e.kind, pi_observe::agent::session::EntryKind::Message { message } if message.role() == "toolResult"))
            .count();
        let tool_spans = first
            .iter()
            .filter(|e| {
                e.kind == EventKind::Start && e.name == names::AGENT_TOOL_CALL && e.context.get("userId") == Some(user)
            })
            .count();
        assert!(tool_results > 0, "the demo runs tools");
        assert_eq!(tool_spans, tool_results, "{user}");
    }
    assert!(first.iter().all(|e| e.payload.get(pi_observe::agent::session::REPLAYED).is_some()));
    // Content is withheld unless captured, as in a live run.
    assert!(first.iter().all(|e| e.payload.get(names::PROMPT_TEXT).is_none()));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn every_span_of_a_prompt_carries_the_conversation_id_and_the_schema_url_names_the_pinned_version() {
    let d = scratch("semconv");
    let session = d.join("s.jsonl");
    for (opt_in, schema) in [
        (None, pi_observe::otel::names::SCHEMA_URL),
        (Some("gen_ai_latest_experimental"), pi_observe::otel::names::SCHEMA_URL_LATEST),
    ] {
        let receiver = Receiver::start(vec![]);
        let mut cmd = pi();
        cmd.args(["-p", "check", "--provider", "faux", "--user", "u1", "--otlp", &receiver.endpoint])
            .flag("--cwd", &d)
            .flag("--faux-script", faux_script(&d))
            .flag("--session", &session);
        if let Some(value) = opt_in {
            cmd.env("OTEL_SEMCONV_STABILITY_OPT_IN", value);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let session_id = std::fs::read_to_string(&session).unwrap();
        let session_id: serde_json::Value = serde_json::from_str(session_id.lines().next().unwrap()).unwrap();
        let spans = receiver.spans();
        let prompt = spans.iter().find(|s| s.name == "invoke_agent pi").expect("the prompt span");
        let of_prompt: Vec<_> = spans.iter().filter(|s| s.trace_id == prompt.trace_id).collect();
        assert!(of_prompt.len() > 5, "{} spans", of_prompt.len());
        for span in of_prompt {
            let conversation = attr(span, "gen_ai.conversation.id");
            assert!(
                matches!(conversation, Some(Any::StringValue(id)) if *id == session_id["id"]),
                "{} has no conversation id",
                span.name
            );
        }
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        for expected in ["invoke_agent pi", "chat faux-1", "execute_tool ls", "execute_tool bash"] {
            assert!(names.contains(&expected), "{expected} missing from {names:?}");
        }
        for request in receiver.requests() {
            for resource_spans in &request.request.resource_spans {
                assert_eq!(resource_spans.schema_url, schema);
                assert!(resource_spans.scope_spans.iter().all(|s| s.schema_url == schema));
            }
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// Metrics carry the span attributes' names (`user.id`, `organization.id`, `session.id`) so a
/// dashboard joins them with traces; the resource names the version and the process; a
/// dimension that would attribute nothing is refused.
#[test]
fn metrics_and_spans_share_one_identity_and_the_resource_names_version_and_process() {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let strings = |attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue]| -> Vec<(String, String)> {
        attributes
            .iter()
            .filter_map(|kv| match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(v) => Some((kv.key.clone(), v.clone())),
                _ => None,
            })
            .collect()
    };
    let d = scratch("identity");
    support::global_settings(
        &d,
        r#"{"telemetry":{"sinks":{"otlp":{"resourceAttributes":{"deployment.environment.name":"staging","team":"from-settings"}}}}}"#,
    );
    let receiver = Receiver::start(vec![]);
    pi().args(["-p", "hello", "--provider", "faux", "--tools", "none", "--user", "alice", "--org", "acme"])
        .args(["--context", "teamId=core", "--otlp", &receiver.endpoint])
        .args(["--metric-dims", "user.id,orgId,session.id,teamId"])
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .env("OTEL_RESOURCE_ATTRIBUTES", "team=from-env")
        .flag("--session", d.join("s.jsonl"))
        .succeeds();
    let requests = receiver.metrics.lock().unwrap().clone();
    let last = requests.last().expect("metrics were exported");
    let resource = strings(&last.resource_metrics[0].resource.as_ref().unwrap().attributes);
    let get = |key: &str| resource.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    assert_eq!(get("service.name"), Some("pi"));
    assert_eq!(get("service.version"), Some(env!("CARGO_PKG_VERSION")));
    let instance = get("service.instance.id").unwrap();
    assert_eq!(instance.len(), 32);
    assert_eq!(get("deployment.environment.name"), Some("staging"));
    assert_eq!(get("team"), Some("from-env"), "the variable wins over the settings");
    assert!(receiver.resource().iter().any(|(k, v)| k == "service.instance.id" && v.contains(instance)), "one process");
    let spans = receiver.spans();
    let prompt = spans.iter().find(|s| s.name == "invoke_agent pi").expect("the prompt span");
    let Some(Any::StringValue(session)) = attr(prompt, "gen_ai.conversation.id") else { panic!("no session id") };
    let metric = |name: &str| {
        last.resource_metrics[0].scope_metrics.iter().flat_map(|s| &s.metrics).find(|m| m.name == name).cloned()
    };
    let Some(Data::Sum(prompts)) = metric("pi.prompts").and_then(|m| m.data) else { panic!("no pi.prompts") };
    let attrs = strings(&prompts.data_points[0].attributes);
    for (key, value) in [("user.id", "alice"), ("organization.id", "acme"), ("pi.context.teamId", "core")] {
        assert!(attrs.contains(&(key.to_owned(), value.to_owned())), "{key}: {attrs:?}");
    }
    assert!(attrs.contains(&("session.id".to_owned(), session.clone())), "{attrs:?}");
    let Some(Data::Sum(sessions)) = metric("pi.session.count").and_then(|m| m.data) else { panic!("no session count") };
    assert_eq!(sessions.data_points.len(), 1);

    // The settings' own key for the dimensions, checked the same way.
    support::global_settings(&d, r#"{"telemetry":{"metrics":{"dimensions":["user"]}}}"#);
    let out = pi()
        .args(["-p", "x", "--otlp", &receiver.endpoint])
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("telemetry.metrics.dimensions: \"user\" is not a metric dimension")
    );
    for bad in ["user", "org", "user.email"] {
        let out = pi().args(["-p", "x", "--otlp", &receiver.endpoint, "--metric-dims", bad]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is not a metric dimension (valid: user.id or userId"), "{bad}: {stderr}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A trace-only backend (Phoenix) answers 405 on metrics: said once with the setting that turns
/// them off, the spans still delivered, exit 0.
#[test]
fn a_backend_without_metrics_is_said_once_and_the_traces_carry_on() {
    let receiver = Receiver::start(vec![]);
    *receiver.other_signals.lock().unwrap() = 405;
    let d = scratch("trace-only");
    let out = pi()
        .args(["-p", "hello", "--provider", "faux", "--no-session", "--tools", "none", "--otlp", &receiver.endpoint])
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("this backend takes no metrics")).collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("HTTP 405") && said[0].contains("OTEL_METRICS_EXPORTER=none"), "{stderr}");
    assert!(!receiver.spans().is_empty(), "the traces carry on");
    assert!(stderr.contains("spans delivered, 0 not delivered; metrics: not taken by this backend"), "{stderr}");
    let test = pi().args(["observe", "test", "--otlp", &receiver.endpoint]).output().unwrap();
    let stdout = String::from_utf8_lossy(&test.stdout);
    assert!(test.status.success(), "a missing signal is no failure: {stdout}");
    let metrics = stdout.lines().find(|l| l.contains(" metrics ")).unwrap();
    assert!(metrics.starts_with("skip") && metrics.contains("OTEL_METRICS_EXPORTER=none"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("ok ") && l.contains(" traces ")), "{stdout}");
    let status =
        pi().args(["observe", "status", "--json"]).env("PI_CODING_AGENT_DIR", d.join("agent")).output().unwrap();
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["lastRun"]["otlp"]["metrics"], "not taken by this backend", "{status}");
    std::fs::remove_dir_all(&d).unwrap();
}
