//! The aggregator: series, cardinality, temporality and the request it builds.

use super::*;
use pi_observe_core::{ErrorInfo, Payload, SpanId, TraceId};
use std::time::Duration;

#[test]
fn cardinality_is_capped_per_metric_with_one_overflow_series_and_whole_totals() {
    let mut agg = Aggregator::with_limit(vec!["userId".into()], 3);
    for i in 0..10 {
        let user = format!("user{i}");
        agg.record_span(&end(pi::AGENT_PROMPT, Payload::new(), &[("userId", &user)]));
    }
    let series: Vec<(&Attrs, f64)> = agg
        .sums
        .iter()
        .filter(|((name, _), _)| *name == metric_names::PROMPTS)
        .map(|((_, attrs), v)| (attrs, *v))
        .collect();
    assert_eq!(series.len(), 3, "two user series and the overflow series: {series:?}");
    assert_eq!(series.iter().map(|(_, v)| v).sum::<f64>(), 10.0, "nothing lost");
    let overflow = series.iter().find(|(a, _)| a.iter().any(|(k, v)| k == OVERFLOW_ATTRIBUTE && v == "true"));
    assert_eq!(overflow.map(|(_, v)| *v), Some(8.0));
    // A set seen before the cap keeps counting on its own series.
    agg.record_span(&end(pi::AGENT_PROMPT, Payload::new(), &[("userId", "user0")]));
    assert_eq!(agg.sums[&(metric_names::PROMPTS, vec![("user.id".into(), "user0".into())])], 2.0);
    assert_eq!(DEFAULT_CARDINALITY_LIMIT, 2000);
}

fn end(name: &'static str, payload: Payload, ctx: &[(&str, &str)]) -> ObsEvent {
    let mut e = ObsEvent::new(EventKind::End, name, TraceId::random());
    e.span_id = Some(SpanId::random());
    e.duration = Some(Duration::from_millis(250));
    e.context = ctx.iter().copied().collect();
    e.payload = payload;
    e
}

fn points(req: &ExportMetricsServiceRequest, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
    let metric = req.resource_metrics[0].scope_metrics[0].metrics.iter().find(|m| m.name == name).unwrap();
    let attrs = |kvs: &[KeyValue]| -> Vec<(String, String)> {
        kvs.iter()
            .map(|kv| {
                let v = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(any_value::Value::StringValue(s)) => s.clone(),
                    _ => String::new(),
                };
                (kv.key.clone(), v)
            })
            .collect()
    };
    match metric.data.as_ref().unwrap() {
        metric::Data::Sum(s) => s
            .data_points
            .iter()
            .map(|p| {
                let Some(number_data_point::Value::AsDouble(v)) = p.value else { panic!() };
                (attrs(&p.attributes), v)
            })
            .collect(),
        metric::Data::Histogram(h) => h.data_points.iter().map(|p| (attrs(&p.attributes), p.sum.unwrap())).collect(),
        _ => panic!("unexpected metric type"),
    }
}

#[test]
fn cost_and_tokens_are_aggregated_per_org_but_not_per_user_by_default() {
    let mut agg = Aggregator::with_limit(vec!["orgId".into()], DEFAULT_CARDINALITY_LIMIT);
    let request = |cost: f64, org: &str, user: &str| {
        end(
            pi::PROVIDER_REQUEST,
            Payload::new()
                .safe(pi::PROVIDER, "openai")
                .safe(pi::MODEL, "gpt-4o")
                .safe(pi::INPUT_TOKENS, 10)
                .safe(pi::CACHE_READ_TOKENS, 90)
                .safe(pi::OUTPUT_TOKENS, 5)
                .safe(pi::COST_TOTAL, cost)
                .safe(pi::RETRY_COUNT, 1)
                .safe(pi::CALL_KIND, pi::CALL_KIND_TURN),
            &[("orgId", org), ("userId", user)],
        )
    };
    agg.record_span(&request(0.5, "acme", "u1"));
    agg.record_span(&request(0.25, "acme", "u2"));
    agg.record_span(&request(1.0, "globex", "u3"));
    let mut failed = end(pi::AGENT_TOOL_CALL, Payload::new().safe(pi::TOOL_NAME, "bash"), &[("orgId", "acme")]);
    failed.kind = EventKind::Error;
    failed.error = Some(ErrorInfo::new("ToolError", "x"));
    agg.record_span(&failed);
    agg.record_span(&end(pi::AGENT_PROMPT, Payload::new(), &[("orgId", "acme")]));
    let req = agg.request(&Resource::default(), SystemTime::now()).unwrap();

    let cost = points(&req, metric_names::COST_USAGE);
    let acme = cost.iter().find(|(a, _)| a.contains(&("organization.id".into(), "acme".into()))).unwrap();
    assert!((acme.1 - 0.75).abs() < 1e-12, "{cost:?}");
    assert_eq!(cost.len(), 2, "one series per org, users folded: {cost:?}");
    assert!(cost.iter().all(|(a, _)| a.iter().all(|(k, _)| k != "user.id")));
    let tokens = points(&req, metric_names::TOKEN_USAGE);
    let input_acme: f64 = tokens
        .iter()
        .filter(|(a, _)| {
            a.contains(&(GEN_AI_TOKEN_TYPE.into(), "input".into()))
                && a.contains(&("organization.id".into(), "acme".into()))
        })
        .map(|(_, v)| v)
        .sum();
    assert_eq!(input_acme, 200.0, "input includes cached tokens");
    assert_eq!(points(&req, metric_names::RETRIES).iter().map(|(_, v)| v).sum::<f64>(), 3.0);
    let tools = points(&req, metric_names::TOOL_CALLS);
    assert!(tools[0].0.contains(&("error".into(), "true".into())));
    assert_eq!(points(&req, metric_names::PROMPTS)[0].1, 1.0);
    let durations = points(&req, metric_names::OPERATION_DURATION);
    assert!((durations.iter().map(|(_, v)| v).sum::<f64>() - 0.75).abs() < 1e-9);
}

#[test]
fn usage_is_billed_once_per_call_kind_whatever_span_carries_it() {
    let mut agg = Aggregator::with_limit(vec![], DEFAULT_CARDINALITY_LIMIT);
    let used =
        |cost: f64| Payload::new().safe(pi::INPUT_TOKENS, 10).safe(pi::OUTPUT_TOKENS, 2).safe(pi::COST_TOTAL, cost);
    // Live: the summary request is billed; the compaction span repeats its usage without a
    // call kind and is not billed again.
    agg.record_span(&end(pi::PROVIDER_REQUEST, used(0.5).safe(pi::CALL_KIND, pi::CALL_KIND_COMPACTION), &[]));
    agg.record_span(&end(pi::AGENT_COMPACTION, used(0.5), &[]));
    // Replayed: no request span, the compaction / branch / tool spans carry the kind.
    agg.record_span(&end(pi::AGENT_COMPACTION, used(0.25).safe(pi::CALL_KIND, pi::CALL_KIND_COMPACTION), &[]));
    agg.record_span(&end(
        pi::AGENT_BRANCH_NAVIGATION,
        used(0.125).safe(pi::CALL_KIND, pi::CALL_KIND_BRANCH_SUMMARY),
        &[],
    ));
    agg.record_span(&end(pi::AGENT_TOOL_CALL, used(1.0).safe(pi::CALL_KIND, pi::CALL_KIND_TOOL), &[]));
    let req = agg.request(&Resource::default(), SystemTime::now()).unwrap();
    let cost = points(&req, metric_names::COST_USAGE);
    let by_kind = |kind: &str| -> f64 {
        cost.iter().filter(|(a, _)| a.contains(&(CALL_KIND_ATTRIBUTE.into(), kind.into()))).map(|(_, v)| v).sum()
    };
    assert_eq!(by_kind("compaction"), 0.75);
    assert_eq!(by_kind("branch_summary"), 0.125);
    assert_eq!(by_kind("tool"), 1.0);
    assert_eq!(cost.iter().map(|(_, v)| v).sum::<f64>(), 1.875, "nothing counted twice");
}

#[test]
fn unpriced_calls_count_their_tokens_and_never_a_zero_cost() {
    let mut agg = Aggregator::with_limit(vec![], DEFAULT_CARDINALITY_LIMIT);
    let call = Payload::new().safe(pi::INPUT_TOKENS, 100).safe(pi::OUTPUT_TOKENS, 20).safe(pi::TOTAL_TOKENS, 120);
    agg.record_span(&end(pi::PROVIDER_REQUEST, call.safe(pi::COST_UNKNOWN, true).safe(pi::CALL_KIND, "turn"), &[]));
    let priced = Payload::new().safe(pi::INPUT_TOKENS, 1).safe(pi::COST_TOTAL, 0.5).safe(pi::CALL_KIND, "turn");
    agg.record_span(&end(pi::PROVIDER_REQUEST, priced, &[]));
    let req = agg.request(&Resource::default(), SystemTime::now()).unwrap();
    let unpriced = points(&req, metric_names::UNPRICED_TOKENS);
    assert_eq!(unpriced.iter().map(|(_, v)| v).sum::<f64>(), 120.0);
    assert_eq!(points(&req, metric_names::COST_USAGE).iter().map(|(_, v)| v).sum::<f64>(), 0.5);
    let tokens = points(&req, metric_names::TOKEN_USAGE);
    assert!(!tokens.is_empty(), "the unpriced call's tokens are still counted");
}

#[test]
fn user_dimension_is_opt_in_and_nothing_is_sent_before_data() {
    let mut agg = Aggregator::with_limit(vec![], DEFAULT_CARDINALITY_LIMIT);
    assert!(agg.request(&Resource::default(), SystemTime::now()).is_none());
    let mut agg = Aggregator::with_limit(vec!["orgId".into(), "userId".into()], DEFAULT_CARDINALITY_LIMIT);
    agg.record_span(&end(pi::AGENT_PROMPT, Payload::new(), &[("orgId", "acme"), ("userId", "u1")]));
    let req = agg.request(&Resource::default(), SystemTime::now()).unwrap();
    let prompts = points(&req, metric_names::PROMPTS);
    assert!(prompts[0].0.contains(&("user.id".into(), "u1".into())));
}

#[test]
fn histogram_buckets_count_every_value_once() {
    let mut h = Hist::new(&DURATION_BOUNDS);
    for v in [0.0, 0.01, 0.011, 5.0, 1000.0] {
        h.record(v);
    }
    assert_eq!(h.counts.iter().sum::<u64>(), 5);
    assert_eq!(h.counts[0], 2, "values equal to a bound fall in that bucket");
    assert_eq!(*h.counts.last().unwrap(), 1);
    assert_eq!((h.min, h.max), (0.0, 1000.0));
}

#[test]
fn delta_temporality_reports_changes_since_the_previous_request() {
    let sum_of = |req: &ExportMetricsServiceRequest, name: &str| -> Option<(f64, i32)> {
        let m = req.resource_metrics[0].scope_metrics[0].metrics.iter().find(|m| m.name == name)?;
        match &m.data {
            Some(metric::Data::Sum(s)) => match s.data_points[0].value {
                Some(number_data_point::Value::AsDouble(v)) => Some((v, s.aggregation_temporality)),
                _ => None,
            },
            _ => None,
        }
    };
    let mut agg = Aggregator::with_limit(vec![], 10).delta(Temporality::Delta);
    agg.set(metric_names::PROMPTS, vec![], 2.0);
    let first = agg.request(&Resource::default(), SystemTime::now()).unwrap();
    assert_eq!(sum_of(&first, metric_names::PROMPTS), Some((2.0, AggregationTemporality::Delta as i32)));
    assert!(agg.request(&Resource::default(), SystemTime::now()).is_none(), "no change, no request");
    agg.set(metric_names::PROMPTS, vec![], 5.0);
    let third = agg.request(&Resource::default(), SystemTime::now()).unwrap();
    assert_eq!(sum_of(&third, metric_names::PROMPTS).unwrap().0, 3.0);
    let mut cumulative = Aggregator::with_limit(vec![], 10);
    cumulative.set(metric_names::PROMPTS, vec![], 2.0);
    let req = cumulative.request(&Resource::default(), SystemTime::now()).unwrap();
    assert_eq!(sum_of(&req, metric_names::PROMPTS), Some((2.0, AggregationTemporality::Cumulative as i32)));
}
