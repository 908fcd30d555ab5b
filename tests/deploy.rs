//! What `deploy/` ships holds together: the collector configurations define every component
//! their pipelines use, the compose images are pinned, the dashboards are Grafana dashboards
//! whose data sources are the provisioned ones and whose queries name metrics pi exports, by
//! the names Prometheus gives them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(path)
}

fn yaml(path: &str) -> serde_yaml_ng::Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(deploy(path)).unwrap()).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_collector_pipeline_uses_only_defined_components() {
    for file in ["collector/agent.yaml", "collector/gateway.yaml"] {
        let config = yaml(file);
        let pipelines = config["service"]["pipelines"].as_mapping().unwrap();
        assert!(["traces", "metrics", "logs"].iter().all(|s| pipelines.contains_key(*s)), "{file}");
        for (name, pipeline) in pipelines {
            for kind in ["receivers", "processors", "exporters"] {
                for component in pipeline[kind].as_sequence().into_iter().flatten() {
                    let component = component.as_str().unwrap();
                    assert!(
                        config[kind].as_mapping().is_some_and(|m| m.contains_key(component)),
                        "{file}: pipeline {name:?} uses {kind} {component:?}, which is not defined"
                    );
                }
            }
        }
    }
    let gateway = yaml("collector/gateway.yaml");
    let metrics = gateway["service"]["pipelines"]["metrics"]["processors"].as_sequence().unwrap();
    assert!(metrics.iter().all(|p| p.as_str() != Some("tail_sampling")), "metrics are never sampled");
}

#[test]
fn the_local_stack_pins_every_image() {
    let compose = yaml("compose.yaml");
    for (name, service) in compose["services"].as_mapping().unwrap() {
        let image = service["image"].as_str().unwrap();
        let tag = image.rsplit_once(':').map(|(_, tag)| tag).unwrap_or("");
        assert!(!tag.is_empty() && tag != "latest" && tag.chars().any(|c| c.is_ascii_digit()), "{name:?}: {image}");
    }
}

/// What pi exports, by the names Prometheus' OTLP translation gives them.
const EXPORTED: &[&str] = &[
    "gen_ai_client_token_usage",
    "gen_ai_client_operation_duration_seconds",
    "pi_cost_usage_USD_total",
    "pi_cost_unpriced_tokens_total",
    "pi_prompts_total",
    "pi_session_count_total",
    "pi_tool_calls_total",
    "pi_tool_duration_seconds",
    "pi_provider_retries_total",
    "pi_compactions_total",
    "pi_observe_spans_total",
    "pi_observe_records_total",
    "pi_observe_fields_total",
    "pi_observe_subscriber_panics_total",
    "pi_observe_redactor_failures_total",
    "pi_observe_spool_batches_total",
];

#[test]
fn dashboards_query_provisioned_sources_for_metrics_pi_exports() {
    let datasources = yaml("grafana/provisioning/datasources/datasources.yaml");
    let uids: Vec<&str> =
        datasources["datasources"].as_sequence().unwrap().iter().filter_map(|d| d["uid"].as_str()).collect();
    for file in ["grafana/dashboards/pi-cost.json", "grafana/dashboards/pi-health.json"] {
        let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(deploy(file)).unwrap()).unwrap();
        for field in ["uid", "title", "schemaVersion", "panels", "time"] {
            assert!(dashboard.get(field).is_some(), "{file}: no {field}");
        }
        let panels = dashboard["panels"].as_array().unwrap();
        assert!(!panels.is_empty());
        for panel in panels {
            let title = panel["title"].as_str().unwrap();
            assert!(uids.contains(&panel["datasource"]["uid"].as_str().unwrap()), "{file}: {title}");
            assert!(panel["gridPos"]["w"].as_u64().is_some(), "{file}: {title} has no position");
            for target in panel["targets"].as_array().unwrap() {
                assert!(uids.contains(&target["datasource"]["uid"].as_str().unwrap()), "{file}: {title}");
                let expr = target["expr"].as_str().unwrap();
                assert!(
                    EXPORTED.iter().any(|m| expr.contains(m)),
                    "{file}: {title}: {expr} names no metric pi exports"
                );
                assert_eq!(expr.matches('(').count(), expr.matches(')').count(), "{file}: {title}: {expr}");
            }
        }
    }
}
