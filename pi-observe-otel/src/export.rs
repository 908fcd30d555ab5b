//! OTLP/HTTP transport: encode (protobuf or JSON), gzip, POST, retry with backoff honouring
//! `Retry-After` on network errors / 408 / 429 / 5xx, stop for good on 401 / 403.

use std::io::Write;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::SpanData;
use prost::Message;

use crate::config::{OtlpConfig, Protocol};

/// What happened to one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// Accepted by the receiver.
    Exported,
    /// Given up after retries or the deadline (network, 5xx, 429, timeout).
    Failed(String),
    /// Refused (4xx other than 408/429): retrying cannot help.
    Rejected(String),
    /// 401/403: credentials are wrong; the exporter stops.
    Unauthorized(String),
}

pub(crate) struct HttpExporter {
    client: reqwest::Client,
    endpoint: String,
    metrics_endpoint: String,
    logs_endpoint: String,
    headers: Vec<(String, String)>,
    json: bool,
    gzip: bool,
    timeout: Duration,
    max_retries: u32,
    resource: ResourceAttributesWithSchema,
}

impl HttpExporter {
    pub(crate) fn new(config: &OtlpConfig, resource: &opentelemetry_sdk::Resource) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot build HTTP client: {e}"))?;
        Ok(HttpExporter {
            client,
            endpoint: config.endpoint(),
            metrics_endpoint: config.metrics_endpoint(),
            logs_endpoint: config.logs_endpoint(),
            headers: config.headers.clone(),
            json: config.protocol == Some(Protocol::HttpJson),
            gzip: config.gzip.unwrap_or(false),
            timeout: config.timeout.unwrap_or(Duration::from_secs(10)),
            max_retries: config.max_retries,
            resource: resource.into(),
        })
    }

    fn encode<M: Message + serde::Serialize>(&self, request: &M) -> Result<Vec<u8>, String> {
        let raw = if self.json {
            serde_json::to_vec(&request).map_err(|e| format!("cannot encode JSON: {e}"))?
        } else {
            request.encode_to_vec()
        };
        if !self.gzip {
            return Ok(raw);
        }
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&raw).and_then(|()| encoder.finish()).map_err(|e| format!("cannot gzip: {e}"))
    }

    /// Sends one batch of spans, retrying until `deadline`.
    pub(crate) async fn export(&self, spans: Vec<SpanData>, deadline: Instant) -> Delivery {
        let request =
            ExportTraceServiceRequest { resource_spans: group_spans_by_resource_and_scope(spans, &self.resource) };
        match self.encode(&request) {
            Ok(body) => self.send(&self.endpoint, body, deadline).await,
            Err(e) => Delivery::Rejected(e),
        }
    }

    /// The resource, as OTLP metrics want it.
    pub(crate) fn proto_resource(&self) -> opentelemetry_proto::tonic::resource::v1::Resource {
        opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: self.resource.attributes.0.clone(),
            dropped_attributes_count: 0,
            entity_refs: vec![],
        }
    }

    /// Sends one metrics request, retrying until `deadline`.
    pub(crate) async fn export_metrics(&self, request: ExportMetricsServiceRequest, deadline: Instant) -> Delivery {
        match self.encode(&request) {
            Ok(body) => self.send(&self.metrics_endpoint, body, deadline).await,
            Err(e) => Delivery::Rejected(e),
        }
    }

    /// Sends log records, retrying until `deadline`.
    pub(crate) async fn export_logs(&self, records: Vec<LogRecord>, deadline: Instant) -> Delivery {
        let request = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(self.proto_resource()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(InstrumentationScope {
                        name: "pi-observe".into(),
                        version: env!("CARGO_PKG_VERSION").into(),
                        ..Default::default()
                    }),
                    log_records: records,
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            }],
        };
        match self.encode(&request) {
            Ok(body) => self.send(&self.logs_endpoint, body, deadline).await,
            Err(e) => Delivery::Rejected(e),
        }
    }

    async fn send(&self, endpoint: &str, body: Vec<u8>, deadline: Instant) -> Delivery {
        let mut attempt = 0u32;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Delivery::Failed("deadline passed".into());
            }
            let mut request = self
                .client
                .post(endpoint)
                .timeout(self.timeout.min(left))
                .header("content-type", if self.json { "application/json" } else { "application/x-protobuf" })
                .body(body.clone());
            if self.gzip {
                request = request.header("content-encoding", "gzip");
            }
            for (k, v) in &self.headers {
                request = request.header(k.as_str(), v.as_str());
            }
            let (retryable, retry_after, why) = match request.send().await {
                Ok(response) => {
                    let status = response.status().as_u16();
                    if response.status().is_success() {
                        return Delivery::Exported;
                    }
                    let retry_after = response
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<f64>().ok())
                        .filter(|s| s.is_finite() && *s >= 0.0)
                        .map(Duration::from_secs_f64);
                    let why = format!("HTTP {status} from {endpoint}");
                    match status {
                        401 | 403 => return Delivery::Unauthorized(why),
                        408 | 429 | 500..=599 => (true, retry_after, why),
                        _ => return Delivery::Rejected(why),
                    }
                }
                Err(e) => (true, None, format!("{endpoint}: {}", one_line(&e.to_string()))),
            };
            if !retryable || attempt >= self.max_retries {
                return Delivery::Failed(why);
            }
            let backoff =
                Duration::from_millis(100u64.saturating_mul(1 << attempt.min(10))).min(Duration::from_secs(5));
            let delay = retry_after.unwrap_or(backoff).min(Duration::from_secs(30));
            if Instant::now() + delay >= deadline {
                return Delivery::Failed(why);
            }
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
