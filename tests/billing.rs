//! Billing over OTLP, end to end through the `pi` binary: metrics, span attributes and
//! `pi report` agree; a backfill adds no cost; sampling never skews the bill.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod support;

use support::Flag;

use support::Succeeds;

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use pi_observe::core::{EventKind, names};
use pi_observe::otel::testing::Receiver;
use support::{attr, events, faux_script, pi, scratch};

#[test]
fn a_backfill_exports_spans_only_so_replaying_twice_adds_no_cost() {
    let d = scratch("backfill");
    let session = d.join("s.jsonl");
    for prompt in ["first", "second"] {
        let out = pi()
            .args(["-p", prompt, "--provider", "faux", "--tools", "none", "--user", "u1"])
            .flag("--session", &session)
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let replay = |receiver: &Receiver, extra: &[&str]| {
        let out = pi().arg("export").arg(&session).args(["--otlp", &receiver.endpoint]).args(extra).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    // Twice by default: the same span ids both times, and no metrics (whose sums would double).
    let receiver = Receiver::start(vec![]);
    replay(&receiver, &[]);
    let first: Vec<Vec<u8>> = receiver.spans().iter().map(|s| s.span_id.clone()).collect();
    replay(&receiver, &[]);
    let all: Vec<Vec<u8>> = receiver.spans().iter().map(|s| s.span_id.clone()).collect();
    assert!(!first.is_empty());
    assert_eq!(all.len(), 2 * first.len());
    assert_eq!(all[first.len()..], first[..], "a replay is idempotent: the same ids again");
    assert!(receiver.metrics.lock().unwrap().is_empty(), "a default backfill sends no metrics");
    // Opting in exports the metrics once.
    let with_metrics = Receiver::start(vec![]);
    replay(&with_metrics, &["--export-metrics"]);
    assert!(!with_metrics.metrics.lock().unwrap().is_empty());
    std::fs::remove_dir_all(&d).unwrap();
}

/// The total of a cumulative sum metric over all its data points, in every request received.
fn sum_metric(receiver: &Receiver, name: &str) -> f64 {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as Number};
    let requests = receiver.metrics.lock().unwrap();
    // Cumulative: the last request holds the totals.
    let Some(last) = requests.last() else { return 0.0 };
    last.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter(|m| m.name == name)
        .filter_map(|m| match &m.data {
            Some(Data::Sum(sum)) => Some(&sum.data_points),
            _ => None,
        })
        .flatten()
        .map(|p| match p.value {
            Some(Number::AsDouble(v)) => v,
            Some(Number::AsInt(v)) => v as f64,
            None => 0.0,
        })
        .sum()
}

#[test]
fn trace_sampling_never_skews_the_bill_metrics_count_every_prompt() {
    let d = scratch("sampling");
    let receiver = Receiver::start(vec![]);
    for user in ["u1", "u2", "u3"] {
        pi().args(["-p", "hello", "--provider", "faux", "--no-session", "--tools", "none", "--user", user])
            .args(["--otlp", &receiver.endpoint])
            .env("OTEL_TRACES_SAMPLER", "traceidratio")
            .env("OTEL_TRACES_SAMPLER_ARG", "0")
            .flag("--events-jsonl", d.join(format!("{user}.jsonl")))
            .succeeds();
        let prompts = sum_metric(&receiver, "pi.prompts");
        let cost = sum_metric(&receiver, "pi.cost.usage");
        let expected: f64 = events(&d.join(format!("{user}.jsonl")))
            .iter()
            .filter(|e| e.kind == EventKind::End && e.name == names::PROVIDER_REQUEST)
            .filter_map(|e| e.payload.get(names::COST_TOTAL).and_then(pi_observe::core::Value::as_f64))
            .sum();
        assert_eq!(prompts, 1.0, "{user}: every prompt counted although no trace was sampled");
        assert!(expected > 0.0 && (cost - expected).abs() < 1e-12, "{user}: cost {cost} vs {expected}");
        receiver.metrics.lock().unwrap().clear();
    }
    assert!(receiver.spans().is_empty(), "a ratio of 0 samples no trace");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Per user: (cost, tokens) from the last metrics request of `receiver`.
fn metric_totals(receiver: &Receiver) -> std::collections::BTreeMap<String, (f64, f64)> {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as Number};
    let mut out = std::collections::BTreeMap::<String, (f64, f64)>::new();
    let requests = receiver.metrics.lock().unwrap();
    let Some(last) = requests.last() else { return out };
    let user_of = |attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue]| {
        attrs.iter().find(|kv| kv.key == "user.id").and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            Any::StringValue(u) => Some(u.clone()),
            _ => None,
        })
    };
    for metric in last.resource_metrics.iter().flat_map(|r| &r.scope_metrics).flat_map(|s| &s.metrics) {
        match (metric.name.as_str(), &metric.data) {
            ("pi.cost.usage", Some(Data::Sum(sum))) => {
                for point in &sum.data_points {
                    let Some(Number::AsDouble(v)) = point.value else { continue };
                    out.entry(user_of(&point.attributes).unwrap_or_default()).or_default().0 += v;
                }
            }
            ("gen_ai.client.token.usage", Some(Data::Histogram(histogram))) => {
                for point in &histogram.data_points {
                    out.entry(user_of(&point.attributes).unwrap_or_default()).or_default().1 +=
                        point.sum.unwrap_or(0.0);
                }
            }
            _ => {}
        }
    }
    out
}

/// Per user: (cost, tokens) summed over the exported spans that bill a call (`pi.call_kind`).
fn span_totals(receiver: &Receiver) -> std::collections::BTreeMap<String, (f64, f64)> {
    let mut out = std::collections::BTreeMap::<String, (f64, f64)>::new();
    for span in receiver.spans().iter().filter(|s| attr(s, "pi.call_kind").is_some()) {
        let user = match attr(span, "user.id") {
            Some(Any::StringValue(u)) => u.clone(),
            _ => String::new(),
        };
        let entry = out.entry(user).or_default();
        if let Some(Any::DoubleValue(cost)) = attr(span, "pi.costTotal") {
            entry.0 += cost;
        }
        if let Some(Any::IntValue(tokens)) = attr(span, "pi.totalTokens") {
            entry.1 += *tokens as f64;
        }
    }
    out
}

#[test]
fn cost_reconciles_three_ways_metrics_spans_and_report() {
    let d = scratch("reconcile");
    let sessions = d.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let script = |name: &str, steps: serde_json::Value| {
        let path = d.join(name);
        std::fs::write(&path, steps.to_string()).unwrap();
        path
    };
    let retried = script(
        "retried.json",
        serde_json::json!([
            {"error": {"status": 503, "message": "busy", "retryAfterSecs": 0}},
            {"text": "Hello! A reply long enough to be worth summarizing later on."}
        ]),
    );
    let summary = script("summary.json", serde_json::json!([{"text": "Summary: the user greeted the agent."}]));
    let runs = [
        ("alice", "acme", "hello there", "alice.jsonl", retried),
        ("alice", "acme", "/compact", "alice.jsonl", summary),
        ("bob", "globex", "check the project", "bob.jsonl", faux_script(&d)),
    ];
    let mut metrics = std::collections::BTreeMap::<String, (f64, f64)>::new();
    let mut spans = std::collections::BTreeMap::<String, (f64, f64)>::new();
    for (user, org, prompt, session, script) in runs {
        let receiver = Receiver::start(vec![]);
        let out = pi()
            .args(["-p", prompt, "--provider", "faux", "--user", user, "--org", org])
            .args(["--otlp", &receiver.endpoint, "--metric-dims", "orgId,userId"])
            .flag("--cwd", &d)
            .flag("--faux-script", &script)
            .flag("--session", sessions.join(session))
            .output()
            .unwrap();
        assert!(out.status.success(), "{prompt}: {}", String::from_utf8_lossy(&out.stderr));
        for (totals, into) in [(metric_totals(&receiver), &mut metrics), (span_totals(&receiver), &mut spans)] {
            for (user, (cost, tokens)) in totals {
                let entry = into.entry(user).or_default();
                entry.0 += cost;
                entry.1 += tokens;
            }
        }
    }
    let alice = std::fs::read_to_string(sessions.join("alice.jsonl")).unwrap();
    assert!(alice.contains(r#""type":"compaction""#) && alice.contains(r#""usage""#), "the compaction was made");
    let out = pi().args(["report", "--format", "json", "--by", "user"]).arg(&sessions).output().unwrap();
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let mut bob_before = (0.0, 0.0);
    for row in rows {
        let user = row["user"].as_str().unwrap();
        let (cost, tokens) = (row["costUsd"].as_f64().unwrap(), row["totalTokens"].as_f64().unwrap());
        assert!(cost > 0.0 && tokens > 0.0);
        if user == "bob" {
            bob_before = (cost, tokens);
        }
        for (source, totals) in [("metrics", &metrics), ("spans", &spans)] {
            let (c, t) = totals[user];
            assert!((c - cost).abs() < 1e-9, "{user}: {source} cost {c} vs report {cost}");
            assert_eq!(t, tokens, "{user}: {source} tokens vs report");
        }
    }
    // Side calls the print mode cannot make (a branch summary, a tool that reports model usage),
    // as upstream pi writes them, then a backfill with metrics: replayed metrics, replayed spans
    // and the report still agree, each call counted once.
    let bob_path = sessions.join("bob.jsonl");
    let bob = std::fs::read_to_string(&bob_path).unwrap();
    let last: serde_json::Value = serde_json::from_str(bob.lines().last().unwrap()).unwrap();
    let usage = |input: u64, output: u64, cost: f64| {
        serde_json::json!({"input": input, "output": output, "cacheRead": 7, "cacheWrite": 0,
            "totalTokens": input + output + 7,
            "cost": {"input": cost / 2.0, "output": cost / 2.0, "cacheRead": 0, "cacheWrite": 0, "total": cost}})
    };
    let side_calls = [
        serde_json::json!({"type": "branch_summary", "id": "b5000001", "parentId": last["id"],
            "timestamp": "2026-12-03T10:00:00.000Z", "fromId": last["id"], "summary": "the branch left",
            "usage": usage(40, 9, 0.000123)}),
        serde_json::json!({"type": "message", "id": "b5000002", "parentId": "b5000001",
            "timestamp": "2026-12-03T10:00:01.000Z", "message": {"role": "toolResult", "toolCallId": "call-9",
            "toolName": "bash", "content": [{"type": "text", "text": "ok"}], "isError": false,
            "timestamp": 1_796_292_001_000_i64, "usage": usage(11, 3, 0.0000456)}}),
    ];
    let appended: String = side_calls.iter().map(|entry| format!("{entry}\n")).collect();
    std::fs::write(&bob_path, format!("{bob}{appended}")).unwrap();
    let out = pi().args(["report", "--format", "json", "--by", "user"]).arg(&sessions).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let receiver = Receiver::start(vec![]);
    pi().args(["export", "--export-metrics", "--otlp", &receiver.endpoint, "--metric-dims", "orgId,userId"])
        .arg(&sessions)
        .succeeds();
    let (metrics, spans) = (metric_totals(&receiver), span_totals(&receiver));
    for row in rows {
        let user = row["user"].as_str().unwrap();
        let (cost, tokens) = (row["costUsd"].as_f64().unwrap(), row["totalTokens"].as_f64().unwrap());
        if user == "bob" {
            let (before_cost, before_tokens) = bob_before;
            assert!((cost - before_cost - (0.000123 + 0.0000456)).abs() < 1e-12, "each side call once");
            assert_eq!(tokens - before_tokens, 77.0, "each side call once");
        }
        for (source, totals) in [("replayed metrics", &metrics), ("replayed spans", &spans)] {
            let (c, t) = totals[user];
            assert!((c - cost).abs() < 1e-9, "{user}: {source} cost {c} vs report {cost}");
            assert_eq!(t, tokens, "{user}: {source} tokens vs report");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn parent_based_samplers_follow_the_sampled_flag_of_an_adopted_traceparent() {
    let run = |flags: &str, sampler: &str| {
        let receiver = Receiver::start(vec![]);
        pi().args(["-p", "hi", "--provider", "faux", "--no-session", "--tools", "none"])
            .args(["--otlp", &receiver.endpoint])
            .env("TRACEPARENT", format!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-{flags}"))
            .env("OTEL_TRACES_SAMPLER", sampler)
            .succeeds();
        (receiver.spans().len(), sum_metric(&receiver, "pi.prompts"))
    };
    // The caller did not sample: a parent-based sampler exports nothing (even always-on roots)...
    let (spans, prompts) = run("00", "parentbased_always_on");
    assert_eq!(spans, 0);
    assert_eq!(prompts, 1.0, "metrics count the prompt anyway");
    // ...and when the caller sampled, the trace is kept even though local roots would be dropped.
    let (spans, _) = run("01", "parentbased_always_off");
    assert!(spans > 0);
    // A plain ratio sampler ignores the parent.
    let (spans, _) = run("00", "always_on");
    assert!(spans > 0);
}

/// On every provider API: the cost the metrics count, the cost the spans carry and the cost
/// `pi report` reads from the session agree, and equal the tokens times the catalogue's prices.
#[test]
fn cost_reconciles_three_ways_on_every_provider_api() {
    let d = scratch("reconcile-apis");
    let registry = pi_agent::model::Registry::builtin();
    for (n, replay) in support::replays::api_replays().into_iter().enumerate() {
        let receiver = Receiver::start(vec![]);
        let sessions = d.join(format!("sessions-{n}"));
        std::fs::create_dir_all(&sessions).unwrap();
        let (user, session) = (format!("user-{n}"), sessions.join("s.jsonl"));
        let args: Vec<&std::ffi::OsStr> = vec![
            "--otlp".as_ref(),
            receiver.endpoint.as_ref(),
            "--metric-dims".as_ref(),
            "userId".as_ref(),
            "--user".as_ref(),
            user.as_ref(),
            "--session".as_ref(),
            session.as_os_str(),
        ];
        let (out, _) = replay.run(&args);
        assert!(out.status.success(), "{}: {}", replay.api, String::from_utf8_lossy(&out.stderr));
        let (metrics, spans) = (metric_totals(&receiver), span_totals(&receiver));
        let report = pi().args(["report", "--format", "json", "--by", "user,model"]).arg(&sessions).output().unwrap();
        assert!(report.status.success(), "{}", replay.api);
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&report.stdout).unwrap();
        let (cost, tokens) = (rows[0]["costUsd"].as_f64().unwrap(), rows[0]["totalTokens"].as_f64().unwrap());
        // The answer's usage: 25 tokens, 8 of the 20 input ones read from the cache where the API
        // says so (Mistral does not).
        let (provider, model) = rows[0]["model"].as_str().unwrap().split_once('/').unwrap();
        let prices = registry.find(provider, model).and_then(|m| m.cost).expect("a catalogued model");
        let (input, cached) = if replay.api == "mistral-conversations" { (20.0, 0.0) } else { (12.0, 8.0) };
        let expected = (input * prices.input + 5.0 * prices.output + cached * prices.cache_read) / 1e6;
        assert!(
            cost > 0.0 && (cost - expected).abs() < 1e-12,
            "{}: report {cost} vs tokens × prices {expected}",
            replay.api
        );
        for (source, totals) in [("metrics", &metrics), ("spans", &spans)] {
            let (c, t) = totals[&user];
            assert!((c - cost).abs() < 1e-12, "{}: {source} cost {c} vs report {cost}", replay.api);
            assert_eq!(t, tokens, "{}: {source} tokens vs report", replay.api);
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}
