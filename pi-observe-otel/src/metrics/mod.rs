//! Metrics aggregated from finished spans: cumulative sums and explicit-bucket histograms,
//! exported as OTLP metrics. Which attribution keys become dimensions is configured (default:
//! `orgId` only — per-user dimensions can explode cardinality).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::SystemTime;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
    metric, number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use pi_observe_core::{EventKind, ObsEvent, Value, names as pi};

use crate::names::*;

/// Metric names.
pub mod metric_names {
    /// Tokens per request, by `gen_ai.token.type` (histogram).
    pub const TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// Request duration in seconds (histogram).
    pub const OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// Estimated cost in USD (sum).
    pub const COST_USAGE: &str = "pi.cost.usage";
    /// Tokens of calls with no known price (sum): billed as unknown, not as zero in
    /// `pi.cost.usage`.
    pub const UNPRICED_TOKENS: &str = "pi.cost.unpriced_tokens";
    /// Prompts run (sum).
    pub const PROMPTS: &str = "pi.prompts";
    /// Sessions that ran a prompt (sum; each session once per exporter).
    pub const SESSION_COUNT: &str = "pi.session.count";
    /// Tool calls (sum).
    pub const TOOL_CALLS: &str = "pi.tool.calls";
    /// Tool duration in seconds (histogram).
    pub const TOOL_DURATION: &str = "pi.tool.duration";
    /// Provider retries (sum).
    pub const RETRIES: &str = "pi.provider.retries";
    /// Compactions (sum).
    pub const COMPACTIONS: &str = "pi.compactions";
    /// The exporter's own span counts, by `outcome` (sum).
    pub const PIPELINE_SPANS: &str = "pi.observe.spans";
    /// Contract records through the hub, by `outcome` (`emitted`, `dropped.<reason>`) (sum).
    pub const OBSERVE_RECORDS: &str = "pi.observe.records";
    /// Fields the content policy changed, by `outcome` (`withheld`, `redacted`, `dropped`,
    /// `truncated`) (sum).
    pub const OBSERVE_FIELDS: &str = "pi.observe.fields";
    /// Subscriber calls that panicked (sum).
    pub const OBSERVE_SUBSCRIBER_PANICS: &str = "pi.observe.subscriber.panics";
    /// Redactor calls that failed (sum).
    pub const OBSERVE_REDACTOR_FAILURES: &str = "pi.observe.redactor.failures";
    /// Spool batches, by `outcome` (`spooled`, `delivered`, `rejected`, `dropped.full`,
    /// `dropped.expired`, `unreadable`, `write_failed`) (sum).
    pub const OBSERVE_SPOOL_BATCHES: &str = "pi.observe.spool.batches";
    /// One point sent by `pi observe test` (sum).
    pub const PROBE: &str = "pi.observe.probe";
}

/// `gen_ai.token.type`.
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
/// What a billed call was for (`turn`, `compaction`, `branch_summary`, `tool`).
pub const CALL_KIND_ATTRIBUTE: &str = "pi.call_kind";

const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];
const DURATION_BOUNDS: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// A series' attributes: keys are mostly fixed names (no allocation), values come from records.
type Attrs = Vec<(Cow<'static, str>, String)>;

/// One value per series: a metric's name and its attributes.
type Series<V> = BTreeMap<(&'static str, Attrs), V>;

#[derive(Debug, Clone)]
struct Hist {
    bounds: &'static [f64],
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Hist {
    /// The observations since `before` (an earlier copy of this histogram), or `None` when
    /// there were none. Its min and max are unknown (NaN: not exported).
    fn since(&self, before: Option<&Hist>) -> Option<Hist> {
        let Some(before) = before else { return (self.count > 0).then(|| self.clone()) };
        if self.count == before.count {
            return None;
        }
        Some(Hist {
            bounds: self.bounds,
            counts: self.counts.iter().zip(&before.counts).map(|(now, then)| now - then).collect(),
            count: self.count - before.count,
            sum: self.sum - before.sum,
            min: f64::NAN,
            max: f64::NAN,
        })
    }

    fn new(bounds: &'static [f64]) -> Self {
        Hist {
            bounds,
            counts: vec![0; bounds.len() + 1],
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    fn record(&mut self, v: f64) {
        let bucket = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[bucket] += 1;
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
}

/// Default cap on distinct attribute sets per metric (the OpenTelemetry SDK's default).
pub const DEFAULT_CARDINALITY_LIMIT: usize = 2000;

/// The attribute set that takes what no longer fits under the cap (OpenTelemetry SDK spec).
pub const OVERFLOW_ATTRIBUTE: &str = "otel.metric.overflow";

/// Aggregates since the exporter started; exported cumulative (default) or as deltas since the
/// last export.
#[derive(Debug)]
pub(crate) struct Aggregator {
    start: SystemTime,
    /// Delta temporality: what the last request reported, and when.
    delta: Option<Sent>,
    dims: Vec<String>,
    sums: Series<f64>,
    histograms: Series<Hist>,
    /// Distinct attribute sets per metric, and the cap on them.
    series: BTreeMap<&'static str, usize>,
    limit: usize,
    /// Sessions already counted in `pi.session.count`.
    sessions: std::collections::BTreeSet<String>,
}

/// What the last delta request covered.
#[derive(Debug, Default)]
struct Sent {
    at: Option<SystemTime>,
    sums: Series<f64>,
    histograms: Series<Hist>,
}

/// `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`: every pi metric is a counter or a
/// histogram, so `delta` and `lowmemory` both mean deltas.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Temporality {
    /// Totals since start (the default).
    #[default]
    Cumulative,
    /// Changes since the previous export.
    Delta,
}

impl Temporality {
    /// Parses `cumulative`, `delta` or `lowmemory` (any case).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cumulative" => Some(Temporality::Cumulative),
            "delta" | "lowmemory" => Some(Temporality::Delta),
            _ => None,
        }
    }
}

fn text(record: &ObsEvent, key: &str) -> Option<String> {
    text_ref(record, key).map(str::to_owned)
}

fn text_ref<'a>(record: &'a ObsEvent, key: &str) -> Option<&'a str> {
    record.payload.get(key).and_then(Value::as_str)
}

fn number(record: &ObsEvent, key: &str) -> Option<f64> {
    record.payload.get(key).and_then(Value::as_f64)
}

impl Aggregator {
    /// At most `limit` attribute sets per metric (one of them the overflow set).
    pub(crate) fn with_limit(dims: Vec<String>, limit: usize) -> Self {
        Aggregator {
            start: SystemTime::now(),
            delta: None,
            dims,
            sums: BTreeMap::new(),
            histograms: BTreeMap::new(),
            series: BTreeMap::new(),
            limit: limit.max(1),
            sessions: Default::default(),
        }
    }

    /// Reports changes since the previous request instead of totals.
    pub(crate) fn delta(mut self, temporality: Temporality) -> Self {
        self.delta = (temporality == Temporality::Delta).then(Sent::default);
        self
    }

    /// `attrs`, or the overflow set when `name` already has its limit of attribute sets and
    /// `attrs` is not one of them (so cardinality stays bounded and totals stay whole).
    fn admit(&mut self, name: &'static str, attrs: Attrs, present: bool) -> Attrs {
        if present {
            return attrs;
        }
        let count = self.series.entry(name).or_insert(0);
        if *count + 1 >= self.limit {
            let overflow: Attrs = vec![(OVERFLOW_ATTRIBUTE.into(), "true".to_owned())];
            let overflow_present = self.sums.contains_key(&(name, overflow.clone()))
                || self.histograms.contains_key(&(name, overflow.clone()));
            if !overflow_present {
                *count += 1;
            }
            return overflow;
        }
        *count += 1;
        attrs
    }

    /// The configured dimensions of `record`, named as on its span: `user.id`,
    /// `organization.id`, `session.id`, and any other attribution key as `pi.context.<key>`.
    fn base(&self, record: &ObsEvent) -> Attrs {
        self.dims
            .iter()
            .filter_map(|dim| {
                let value = match dim.as_str() {
                    SESSION_ID => text(record, pi::SESSION_ID)?,
                    key => record.context.get(key)?.to_owned(),
                };
                Some((dimension_key(dim), value))
            })
            .collect()
    }

    fn add(&mut self, name: &'static str, attrs: Attrs, v: f64) {
        // A series seen before is found by the key as built, with nothing copied.
        let key = (name, attrs);
        if let Some(sum) = self.sums.get_mut(&key) {
            *sum += v;
            return;
        }
        let attrs = self.admit(name, key.1, false);
        *self.sums.entry((name, attrs)).or_insert(0.0) += v;
    }

    fn observe(&mut self, name: &'static str, bounds: &'static [f64], attrs: Attrs, v: f64) {
        let key = (name, attrs);
        if let Some(histogram) = self.histograms.get_mut(&key) {
            histogram.record(v);
            return;
        }
        let attrs = self.admit(name, key.1, false);
        self.histograms.entry((name, attrs)).or_insert_with(|| Hist::new(bounds)).record(v);
    }

    /// Sets a cumulative sum to an absolute value (the pipeline's own counters).
    pub(crate) fn set(&mut self, name: &'static str, attrs: Vec<(String, String)>, v: f64) {
        let attrs = attrs.into_iter().map(|(k, v)| (Cow::Owned(k), v)).collect();
        self.sums.insert((name, attrs), v);
    }

    /// Folds one finished operation (its `end`/`error` record) into the aggregates.
    pub(crate) fn record_span(&mut self, end: &ObsEvent) {
        use metric_names::*;
        let seconds = end.duration.map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let failed = end.kind == EventKind::Error;
        let mut attrs = self.base(end);
        // A provider request without a call kind (another producer of the contract) is a turn.
        let kind =
            text_ref(end, pi::CALL_KIND).or_else(|| (end.name == pi::PROVIDER_REQUEST).then_some(pi::CALL_KIND_TURN));
        if let Some(kind) = kind {
            self.record_usage(end, &attrs, kind);
        }
        match end.name.as_ref() {
            pi::PROVIDER_REQUEST => {
                attrs.push((GEN_AI_OPERATION_NAME.into(), OP_CHAT.into()));
                if let Some(provider) = text_ref(end, pi::PROVIDER) {
                    attrs.push((GEN_AI_PROVIDER_NAME.into(), genai_provider_name(provider).to_owned()));
                }
                if let Some(model) = text(end, pi::MODEL) {
                    attrs.push((GEN_AI_REQUEST_MODEL.into(), model));
                }
                if let Some(retries) = number(end, pi::RETRY_COUNT).filter(|r| *r > 0.0) {
                    self.add(RETRIES, attrs.clone(), retries);
                }
                let duration_attrs = if failed {
                    let kind = end.error.as_ref().map(|e| e.name.clone()).unwrap_or_else(|| "error".into());
                    with(&attrs, "error.type", &kind)
                } else {
                    attrs
                };
                self.observe(OPERATION_DURATION, &DURATION_BOUNDS, duration_attrs, seconds);
            }
            pi::AGENT_TOOL_CALL => {
                attrs.push((GEN_AI_TOOL_NAME.into(), text(end, pi::TOOL_NAME).unwrap_or_default()));
                attrs.push(("error".into(), failed.to_string()));
                self.add(TOOL_CALLS, attrs.clone(), 1.0);
                self.observe(TOOL_DURATION, &DURATION_BOUNDS, attrs, seconds);
            }
            pi::AGENT_PROMPT => {
                if let Some(session) = text(end, pi::SESSION_ID)
                    && self.sessions.insert(session)
                {
                    self.add(SESSION_COUNT, attrs.clone(), 1.0);
                }
                self.add(PROMPTS, attrs, 1.0);
            }
            pi::AGENT_COMPACTION => {
                attrs.push(("reason".into(), text(end, pi::COMPACTION_REASON).unwrap_or_default()));
                self.add(COMPACTIONS, attrs, 1.0);
            }
            _ => {}
        }
    }

    /// Tokens and cost of one billed call (any record with `pi.call_kind`: provider requests
    /// live; compactions, branch summaries and tools with usage too when replayed), by the
    /// configured dimensions, provider, model and call kind.
    fn record_usage(&mut self, end: &ObsEvent, base: &Attrs, kind: &str) {
        use metric_names::*;
        let has = |key| end.payload.get(key).is_some();
        if !(has(pi::INPUT_TOKENS) || has(pi::OUTPUT_TOKENS) || has(pi::COST_UNKNOWN) || has(pi::COST_TOTAL)) {
            // Nothing billed on this record: no series to name.
            return;
        }
        let mut attrs = base.clone();
        if end.name == pi::PROVIDER_REQUEST {
            attrs.push((GEN_AI_OPERATION_NAME.into(), OP_CHAT.into()));
        }
        if let Some(provider) = text_ref(end, pi::PROVIDER) {
            attrs.push((GEN_AI_PROVIDER_NAME.into(), genai_provider_name(provider).to_owned()));
        }
        if let Some(model) = text(end, pi::MODEL) {
            attrs.push((GEN_AI_REQUEST_MODEL.into(), model));
        }
        attrs.push((CALL_KIND_ATTRIBUTE.into(), kind.to_owned()));
        let input = [pi::INPUT_TOKENS, pi::CACHE_READ_TOKENS, pi::CACHE_WRITE_TOKENS]
            .iter()
            .filter_map(|k| number(end, k))
            .sum::<f64>();
        if number(end, pi::INPUT_TOKENS).is_some() {
            self.observe(TOKEN_USAGE, &TOKEN_BOUNDS, with(&attrs, GEN_AI_TOKEN_TYPE, "input"), input);
        }
        if let Some(output) = number(end, pi::OUTPUT_TOKENS) {
            self.observe(TOKEN_USAGE, &TOKEN_BOUNDS, with(&attrs, GEN_AI_TOKEN_TYPE, "output"), output);
        }
        if end.payload.get(pi::COST_UNKNOWN).and_then(Value::as_bool) == Some(true) {
            let tokens = number(end, pi::TOTAL_TOKENS).unwrap_or(input + number(end, pi::OUTPUT_TOKENS).unwrap_or(0.0));
            self.add(UNPRICED_TOKENS, attrs, tokens);
        } else if let Some(cost) = number(end, pi::COST_TOTAL) {
            self.add(COST_USAGE, attrs, cost);
        }
    }

    /// The window this request reports — its start, and the totals or (delta temporality) the
    /// changes since the previous request, which it marks as sent — or `None` when nothing
    /// changed.
    fn window(&mut self, now: SystemTime) -> Option<(SystemTime, Series<f64>, Series<Hist>)> {
        let (window_start, sums, histograms) = match &mut self.delta {
            None => (self.start, self.sums.clone(), self.histograms.clone()),
            Some(sent) => {
                let sums: BTreeMap<_, _> = self
                    .sums
                    .iter()
                    .map(|(k, v)| (k.clone(), v - sent.sums.get(k).copied().unwrap_or(0.0)))
                    .filter(|(_, d)| *d != 0.0)
                    .collect();
                let histograms: BTreeMap<_, _> = self
                    .histograms
                    .iter()
                    .filter_map(|(k, h)| h.since(sent.histograms.get(k)).map(|d| (k.clone(), d)))
                    .collect();
                let start = sent.at.unwrap_or(self.start);
                *sent = Sent { at: Some(now), sums: self.sums.clone(), histograms: self.histograms.clone() };
                (start, sums, histograms)
            }
        };
        if sums.is_empty() && histograms.is_empty() {
            return None;
        }
        Some((window_start, sums, histograms))
    }

    /// Everything as one OTLP request — totals, or with delta temporality the changes since
    /// the previous request — or `None` when there is nothing to report.
    pub(crate) fn request(&mut self, resource: &Resource, now: SystemTime) -> Option<ExportMetricsServiceRequest> {
        let temporality =
            if self.delta.is_some() { AggregationTemporality::Delta } else { AggregationTemporality::Cumulative }
                as i32;
        let (window_start, sums, histograms) = self.window(now)?;
        let nanos = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        let (start, now) = (nanos(window_start), nanos(now));
        let kv = |attrs: &Attrs| -> Vec<KeyValue> {
            attrs
                .iter()
                .map(|(k, v)| KeyValue {
                    key: k.to_string(),
                    value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.clone())) }),
                    ..Default::default()
                })
                .collect()
        };
        let new_metric = |name: &str, data| Metric {
            name: name.to_owned(),
            unit: unit(name).to_owned(),
            data: Some(data),
            ..Default::default()
        };
        let mut metrics: BTreeMap<&'static str, Metric> = BTreeMap::new();
        for ((name, attrs), value) in &sums {
            let empty = Sum { data_points: vec![], aggregation_temporality: temporality, is_monotonic: true };
            let metric = metrics.entry(name).or_insert_with(|| new_metric(name, metric::Data::Sum(empty)));
            if let Some(metric::Data::Sum(sum)) = &mut metric.data {
                sum.data_points.push(NumberDataPoint {
                    attributes: kv(attrs),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    value: Some(number_data_point::Value::AsDouble(*value)),
                    ..Default::default()
                });
            }
        }
        for ((name, attrs), h) in &histograms {
            let empty = Histogram { data_points: vec![], aggregation_temporality: temporality };
            let metric = metrics.entry(name).or_insert_with(|| new_metric(name, metric::Data::Histogram(empty)));
            if let Some(metric::Data::Histogram(hist)) = &mut metric.data {
                hist.data_points.push(HistogramDataPoint {
                    attributes: kv(attrs),
                    start_time_unix_nano: start,
                    time_unix_nano: now,
                    count: h.count,
                    sum: Some(h.sum),
                    bucket_counts: h.counts.clone(),
                    explicit_bounds: h.bounds.to_vec(),
                    min: h.min.is_finite().then_some(h.min),
                    max: h.max.is_finite().then_some(h.max),
                    ..Default::default()
                });
            }
        }
        Some(ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(resource.clone()),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(InstrumentationScope {
                        name: "pi-observe".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    metrics: metrics.into_values().collect(),
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        })
    }
}

/// The attribute a metric dimension becomes — the name the same value has on spans:
/// `userId` → `user.id`, `orgId` → `organization.id`, `session.id` as it is, any other
/// attribution key `k` → `pi.context.k`.
pub fn dimension_attribute(dim: &str) -> String {
    dimension_key(dim).into_owned()
}

/// [`dimension_attribute`], without an allocation for the known dimensions.
fn dimension_key(dim: &str) -> Cow<'static, str> {
    match dim {
        pi::CTX_USER_ID => USER_ID.into(),
        pi::CTX_ORG_ID => ORGANIZATION_ID.into(),
        SESSION_ID => SESSION_ID.into(),
        key => format!("{PI_CONTEXT_PREFIX}{key}").into(),
    }
}

fn with(attrs: &Attrs, key: &'static str, value: &str) -> Attrs {
    let mut out = attrs.clone();
    out.push((key.into(), value.to_owned()));
    out
}

fn unit(name: &str) -> &'static str {
    use metric_names::*;
    match name {
        TOKEN_USAGE | UNPRICED_TOKENS => "{token}",
        OPERATION_DURATION | TOOL_DURATION => "s",
        COST_USAGE => "USD",
        PIPELINE_SPANS => "{span}",
        _ => "1",
    }
}

#[cfg(test)]
mod tests;
