//! OTLP metrics into Prometheus through its remote-write receiver, named the way Prometheus'
//! own OTLP receiver names them (its `UnderscoreEscapingWithSuffixes` translation, the default),
//! for a Prometheus that has no OTLP receiver (Debian's 2.42):
//!
//! - metric names: split on every character that is not a letter or digit, joined with `_`;
//!   the unit (annotations in `{…}` dropped, `s` → `seconds`, `By` → `bytes`, `a/b` → `a_per_b`)
//!   appended unless already there; `_total` for monotonic sums; `_ratio` for gauges in `1`;
//! - histograms: `_bucket{le=…}` (cumulative, ending with `+Inf`), `_sum`, `_count`;
//! - attribute keys: every character outside `[A-Za-z0-9_]` becomes `_`, a leading digit gets
//!   `key_`;
//! - the resource: `job` = `service.namespace/service.name`, `instance` = `service.instance.id`
//!   on every series; its other attributes on one `target_info` series;
//! - delta temporality is not accepted (Prometheus drops it), so it is left out here too.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value as Any};
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, Metric, metric::Data, number_data_point};

/// `prometheus.WriteRequest` of the remote-write protocol (version 1).
#[derive(Clone, PartialEq, prost::Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// Label set (sorted, with `__name__`) → timestamp (ms) → value.
pub type Series = BTreeMap<Vec<(String, String)>, BTreeMap<i64, f64>>;

/// Every sample of `requests`, as Prometheus would store them.
pub fn translate(requests: &[ExportMetricsServiceRequest]) -> Series {
    let mut out = Out::default();
    for resource_metrics in requests.iter().flat_map(|r| &r.resource_metrics) {
        let resource = resource_metrics.resource.as_ref().map(|r| strings(&r.attributes)).unwrap_or_default();
        let get = |key: &str| resource.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let job = match (get("service.namespace"), get("service.name")) {
            (Some(namespace), Some(name)) => format!("{namespace}/{name}"),
            (_, name) => name.unwrap_or_default(),
        };
        let identity =
            [("job".to_owned(), job), ("instance".to_owned(), get("service.instance.id").unwrap_or_default())];
        out.latest = 0;
        for metric in resource_metrics.scope_metrics.iter().flat_map(|s| &s.metrics) {
            out.metric(metric, &identity);
        }
        let info: Vec<(String, String)> = resource
            .iter()
            .filter(|(k, _)| !["service.name", "service.namespace", "service.instance.id"].contains(&k.as_str()))
            .map(|(k, v)| (label_name(k), v.clone()))
            .chain(identity.iter().cloned())
            .collect();
        if out.latest > 0 {
            let latest = out.latest;
            out.add("target_info".into(), info, latest, 1.0);
        }
    }
    out.series
}

/// The series so far, and the newest sample time of the resource being translated.
#[derive(Default)]
struct Out {
    series: Series,
    latest: u64,
}

impl Out {
    fn add(&mut self, name: String, mut labels: Vec<(String, String)>, time_nanos: u64, value: f64) {
        self.latest = self.latest.max(time_nanos);
        labels.push(("__name__".into(), name));
        labels.sort();
        self.series.entry(labels).or_default().insert((time_nanos / 1_000_000) as i64, value);
    }

    fn metric(&mut self, metric: &Metric, identity: &[(String, String)]) {
        let labels_of = |attributes: &[KeyValue]| -> Vec<(String, String)> {
            let mut labels: Vec<(String, String)> =
                strings(attributes).into_iter().map(|(k, v)| (label_name(&k), v)).collect();
            labels.extend(identity.iter().cloned());
            labels
        };
        let (points, kind) = match &metric.data {
            Some(Data::Sum(sum)) if sum.aggregation_temporality == AggregationTemporality::Delta as i32 => return,
            Some(Data::Sum(sum)) => (&sum.data_points, if sum.is_monotonic { Kind::Counter } else { Kind::Gauge }),
            Some(Data::Gauge(gauge)) => (&gauge.data_points, Kind::Gauge),
            Some(Data::Histogram(histogram))
                if histogram.aggregation_temporality != AggregationTemporality::Delta as i32 =>
            {
                let base = metric_name(&metric.name, &metric.unit, Kind::Histogram);
                for point in &histogram.data_points {
                    let (labels, time) = (labels_of(&point.attributes), point.time_unix_nano);
                    let mut cumulative = 0;
                    for (i, count) in point.bucket_counts.iter().enumerate() {
                        cumulative += count;
                        let le = point.explicit_bounds.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
                        let mut labels = labels.clone();
                        labels.push(("le".into(), le));
                        self.add(format!("{base}_bucket"), labels, time, cumulative as f64);
                    }
                    self.add(format!("{base}_sum"), labels.clone(), time, point.sum.unwrap_or(0.0));
                    self.add(format!("{base}_count"), labels, time, point.count as f64);
                }
                return;
            }
            _ => return,
        };
        let name = metric_name(&metric.name, &metric.unit, kind);
        for point in points {
            self.add(name.clone(), labels_of(&point.attributes), point.time_unix_nano, number(&point.value));
        }
    }
}

/// Sends `series` to Prometheus' remote-write receiver at `base` (`http://host:port`).
pub fn write(base: &str, series: &Series) {
    let request = WriteRequest {
        timeseries: series
            .iter()
            .map(|(labels, samples)| TimeSeries {
                labels: labels.iter().map(|(name, value)| Label { name: name.clone(), value: value.clone() }).collect(),
                samples: samples.iter().map(|(&timestamp, &value)| Sample { value, timestamp }).collect(),
            })
            .collect(),
    };
    let body = snap::raw::Encoder::new().compress_vec(&prost::Message::encode_to_vec(&request)).unwrap();
    let response = reqwest::blocking::Client::new()
        .post(format!("{base}/api/v1/write"))
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .body(body)
        .send()
        .unwrap();
    let status = response.status();
    assert!(status.is_success(), "remote write: {status}: {}", response.text().unwrap_or_default());
}

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

fn metric_name(name: &str, unit: &str, kind: Kind) -> String {
    let mut tokens = words(name);
    // `{token}` and other annotations say what is counted, not a unit.
    let mut depth = 0;
    let unit: String = unit
        .chars()
        .filter(|&c| {
            depth += i32::from(c == '{') - i32::from(c == '}');
            depth == 0 && c != '}'
        })
        .collect();
    let (main, per) = unit.split_once('/').unwrap_or((&unit, ""));
    for word in words(main_unit(main)) {
        if !tokens.contains(&word) {
            tokens.push(word);
        }
    }
    let per = words(per_unit(per));
    if !per.is_empty() && !tokens.contains(&"per".to_owned()) {
        tokens.push("per".into());
        tokens.extend(per);
    }
    match kind {
        Kind::Counter => {
            tokens.retain(|t| t != "total");
            tokens.push("total".into());
        }
        Kind::Gauge if unit == "1" => tokens.push("ratio".into()),
        _ => {}
    }
    let name = tokens.join("_");
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("_{name}") } else { name }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect()
}

fn main_unit(unit: &str) -> &str {
    match unit {
        "d" => "days",
        "h" => "hours",
        "min" => "minutes",
        "s" => "seconds",
        "ms" => "milliseconds",
        "us" => "microseconds",
        "ns" => "nanoseconds",
        "By" => "bytes",
        "KiBy" => "kibibytes",
        "MiBy" => "mebibytes",
        "KBy" => "kilobytes",
        "MBy" => "megabytes",
        "%" => "percent",
        "Hz" => "hertz",
        "1" => "",
        other => other,
    }
}

fn per_unit(unit: &str) -> &str {
    match unit {
        "s" => "second",
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "mo" => "month",
        "y" => "year",
        other => other,
    }
}

fn label_name(key: &str) -> String {
    let name: String = key.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("key_{name}") } else { name }
}

fn number(value: &Option<number_data_point::Value>) -> f64 {
    match value {
        Some(number_data_point::Value::AsDouble(v)) => *v,
        Some(number_data_point::Value::AsInt(v)) => *v as f64,
        None => 0.0,
    }
}

fn strings(attributes: &[KeyValue]) -> Vec<(String, String)> {
    attributes
        .iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                Any::StringValue(v) => v.clone(),
                Any::IntValue(v) => v.to_string(),
                Any::BoolValue(v) => v.to_string(),
                Any::DoubleValue(v) => v.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

#[test]
fn names_follow_prometheus_otlp_translation() {
    assert_eq!(metric_name("gen_ai.client.token.usage", "{token}", Kind::Histogram), "gen_ai_client_token_usage");
    assert_eq!(
        metric_name("gen_ai.client.operation.duration", "s", Kind::Histogram),
        "gen_ai_client_operation_duration_seconds"
    );
    assert_eq!(metric_name("pi.cost.usage", "USD", Kind::Counter), "pi_cost_usage_USD_total");
    assert_eq!(metric_name("pi.prompts", "{prompt}", Kind::Counter), "pi_prompts_total");
    assert_eq!(metric_name("http.server.request.size", "By", Kind::Gauge), "http_server_request_size_bytes");
    assert_eq!(metric_name("disk.ops", "{op}/s", Kind::Gauge), "disk_ops_per_second");
    assert_eq!(metric_name("cpu.utilization", "1", Kind::Gauge), "cpu_utilization_ratio");
    assert_eq!(label_name("organization.id"), "organization_id");
    assert_eq!(label_name("2fa"), "key_2fa");
}
