//! Real Prometheus: the metrics of a scripted run by two users in two orgs (plus a third on a
//! model without a price), exported by `pi --otlp`, are written into a Prometheus running on
//! loopback (its remote-write receiver, with Prometheus' OTLP naming rules applied in
//! `remote_write.rs`); then every PromQL query of the shipped Grafana dashboards runs through
//! Prometheus' HTTP API and must return series, and the cost-by-organization panel must equal
//! `pi report --by org`. Run by `scripts/test`, which starts Prometheus and sets
//! `PROMETHEUS_URL`:
//!
//! ```sh
//! . scripts/prometheus.sh && cargo test --test prometheus -- --ignored
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

mod remote_write;
#[path = "../support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pi_observe_otel::testing::Receiver;
use support::{Flag, Succeeds, pi};

/// Grafana's range variables, as a dashboard opened on the last hour sets them.
fn grafana_variables(expr: &str) -> String {
    expr.replace("$__rate_interval", "1h").replace("$__interval", "1h").replace("$__range", "1h")
}

/// `(dashboard, panel title, query)` of every Prometheus target of the shipped dashboards.
fn dashboard_queries() -> Vec<(String, String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/dashboards");
    let mut queries = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                if target["datasource"]["type"] == "prometheus" {
                    let title = panel["title"].as_str().unwrap().to_owned();
                    queries.push((file.clone(), title, target["expr"].as_str().unwrap().to_owned()));
                }
            }
        }
    }
    queries
}

/// An instant query's result: each series' labels and value.
fn query(base: &str, expr: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let url = reqwest::Url::parse_with_params(&format!("{base}/api/v1/query"), [("query", expr)]).unwrap();
    let body = reqwest::blocking::Client::new().get(url).send().unwrap().text().unwrap();
    let response: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(response["status"], "success", "{expr}: {response}");
    response["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|series| {
            let labels = serde_json::from_value(series["metric"].clone()).unwrap();
            (labels, series["value"][1].as_str().unwrap().parse().unwrap())
        })
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-prometheus-{name}-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The scripted team, exporting to `endpoint` and keeping sessions in `d/sessions`: alice (first
/// org) with a failing tool, a working one and a retried 429; bob (second org) twice, then once
/// with a key the provider refuses; carol (third org) on a local model without a price.
fn run_the_team(d: &Path, endpoint: &str, [acme, globex, initech]: [&str; 3]) {
    let script = d.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([
            {"text": "Looking.", "tools": [
                {"name": "read", "arguments": {"path": "missing.txt"}},
                {"name": "bash", "arguments": {"command": "echo ok"}}
            ]},
            {"error": {"status": 429, "message": "slow down", "retryAfterSecs": 0}},
            {"text": "Done."}
        ])
        .to_string(),
    )
    .unwrap();
    let agent = |user: &str, org: &str| {
        let mut cmd = pi();
        cmd.args(["--user", user, "--org", org, "--otlp", endpoint, "--metric-dims", "organization.id,user.id"])
            .env("PI_CODING_AGENT_SESSION_DIR", d.join("sessions"))
            .flag("--cwd", d);
        cmd
    };
    agent("alice", acme).args(["-p", "check the project"]).flag("--faux-script", &script).succeeds();
    agent("bob", globex).args(["-p", "hello", "--tools", "none"]).succeeds();
    agent("bob", globex).args(["-p", "hello again", "--tools", "none"]).succeeds();
    // A provider that refuses the key: the prompt fails, and the error is on the metrics.
    let refused = d.join("refused.json");
    std::fs::write(&refused, r#"[{"error": {"status": 401, "message": "invalid key"}}]"#).unwrap();
    let out =
        agent("bob", globex).args(["-p", "once more", "--tools", "none"]).flag("--faux-script", &refused).output();
    assert!(!out.unwrap().status.success(), "a refused request fails the prompt");
    let (local, server) = support::one_shot_openai_server();
    agent("carol", initech)
        .args(["-p", "hello", "--tools", "none", "--model", "llama-local", "--base-url", &local])
        .succeeds();
    server.join().unwrap();
}

#[test]
#[ignore = "needs a running Prometheus: run scripts/test"]
fn every_dashboard_query_returns_series_and_cost_by_org_matches_the_report() {
    let base = std::env::var("PROMETHEUS_URL").expect("PROMETHEUS_URL (start Prometheus with scripts/prometheus.sh)");
    let d = scratch("dashboards");
    let sessions = d.join("sessions");
    // Orgs of this run only, so a Prometheus that kept earlier runs' samples still compares.
    let run = pi_observe::core::SpanId::random().to_string();
    let (acme, globex, initech) = (format!("acme-{run}"), format!("globex-{run}"), format!("initech-{run}"));
    let receiver = Receiver::start(vec![]);
    run_the_team(&d, &receiver.endpoint, [&acme, &globex, &initech]);

    let series = remote_write::translate(&receiver.metrics.lock().unwrap());
    remote_write::write(&base, &series);

    let mut empty = Vec::new();
    for (file, title, expr) in dashboard_queries() {
        if query(&base, &grafana_variables(&expr)).is_empty() {
            empty.push(format!("{file}: {title}: {expr}"));
        }
    }
    let names: std::collections::BTreeSet<&str> = series
        .keys()
        .flat_map(|labels| labels.iter().filter(|(k, _)| k == "__name__").map(|(_, v)| v.as_str()))
        .collect();
    assert!(empty.is_empty(), "queries without series:\n{}\nmetrics written: {names:?}", empty.join("\n"));

    // The cost-by-organization panel against the report of the same sessions.
    let (_, _, cost_by_org) =
        dashboard_queries().into_iter().find(|(_, title, _)| title == "Cost by organization").unwrap();
    let panel: BTreeMap<String, f64> = query(&base, &grafana_variables(&cost_by_org))
        .into_iter()
        .filter_map(|(labels, value)| Some((labels.get("organization_id")?.clone(), value)))
        .collect();
    let out = pi().args(["report", "--by", "org", "--format", "json"]).arg(&sessions).output().unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for org in [&acme, &globex] {
        let row = rows.iter().find(|r| r["org"] == org.as_str()).unwrap();
        let reported = row["costUsd"].as_f64().unwrap();
        assert!(reported > 0.0);
        assert!(
            (panel[org.as_str()] - reported).abs() < 1e-6,
            "{org}: panel {} vs report {reported}",
            panel[org.as_str()]
        );
    }
    // The model without a price costs nothing on the panel and n/a in the report: never $0.
    assert!(!panel.contains_key(initech.as_str()), "{panel:?}");
    assert!(rows.iter().any(|r| r["org"] == initech.as_str() && r["costUsd"].is_null()));
    std::fs::remove_dir_all(&d).unwrap();
}
