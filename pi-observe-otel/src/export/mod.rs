//! OTLP transports — HTTP (protobuf or JSON) and gRPC — behind one retry loop: backoff honouring
//! `Retry-After` on network errors / 408 / 429 / 5xx (gRPC: UNAVAILABLE, RESOURCE_EXHAUSTED,
//! DEADLINE_EXCEEDED, ABORTED), stop for good on 401 / 403 (UNAUTHENTICATED, PERMISSION_DENIED).

use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use prost::Message;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::config::{CapturedRequest, ConfigError, OtlpConfig, Protocol, WireCapture, url_without_secrets};

mod payload;
mod spooled;
mod wire;

pub(crate) use payload::Payload;
use payload::{Body, Signal, Wire};
use wire::{Lane, http_client};

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
    /// 404/405/415 (gRPC `Unimplemented`): this backend takes no such signal; the signal stops.
    Unsupported(String),
}

/// What became of one payload in the pipeline.
pub(crate) enum Shipped {
    Delivered,
    Spooled,
    /// Neither delivered nor spooled.
    Lost(Delivery),
}

/// What the exporter knows about its link to the receiver, shared with the pipeline.
#[derive(Debug, Default)]
pub(crate) struct LinkState {
    /// Shutdown has begun: a refused connection is not retried any more.
    pub(crate) closing: AtomicBool,
    /// The last try could not connect at all (refused, no route): known at once, so the exit
    /// does not wait out retries for it.
    pub(crate) unreachable: AtomicBool,
    /// Why the last batch of each signal (traces, metrics, logs) that failed for good failed,
    /// for the exit summary: the spans' line names the traces' reason, not another signal's.
    pub(crate) last_error: Mutex<[Option<String>; 3]>,
    /// Spans receivers accepted a request for but rejected (OTLP `partial_success`), not yet
    /// taken by the pipeline's counts.
    pub(crate) partially_rejected: AtomicU64,
}

impl LinkState {
    /// Why the last batch of spans that failed for good failed.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())[Signal::Traces as usize].clone()
    }

    fn failed(&self, signal: Signal, why: &str) {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())[signal as usize] = Some(why.to_owned());
    }
}

/// The result of one try.
pub(crate) enum Attempt {
    Done,
    /// `refused`: no connection could be made (nothing listening, no route).
    Retry {
        after: Option<Duration>,
        why: String,
        refused: bool,
    },
    Reject(String),
    Unauthorized(String),
    /// The endpoint does not take this signal.
    Unsupported(String),
}

/// An `opentelemetry_sdk` span exporter behind an object-safe face, for
/// [`OtelSubscriber::with_span_exporter`](crate::OtelSubscriber::with_span_exporter).
pub(crate) trait SdkSpanExporter: Send + Sync {
    fn export(&self, batch: Vec<SpanData>) -> Pin<Box<dyn Future<Output = OTelSdkResult> + Send + '_>>;
    fn shutdown(&self, timeout: Duration) -> OTelSdkResult;
}

impl<E: SpanExporter + Send + Sync> SdkSpanExporter for E {
    fn export(&self, batch: Vec<SpanData>) -> Pin<Box<dyn Future<Output = OTelSdkResult> + Send + '_>> {
        Box::pin(SpanExporter::export(self, batch))
    }

    fn shutdown(&self, timeout: Duration) -> OTelSdkResult {
        self.shutdown_with_timeout(timeout)
    }
}

pub(crate) struct Exporter {
    /// Spans go to this SDK exporter instead of OTLP (metrics and logs still use OTLP).
    pub(crate) sdk: Option<Box<dyn SdkSpanExporter>>,
    grpc: Option<Endpoint>,
    channel: OnceLock<Channel>,
    endpoints: [String; 3],
    /// How each signal (traces, metrics, logs) is sent.
    lanes: [Lane; 3],
    /// Spans are written to stderr as OTLP/JSON instead of sent (`OTEL_TRACES_EXPORTER=console`).
    console: bool,
    pub(crate) max_retries: u32,
    resource: ResourceAttributesWithSchema,
    /// Shared with the pipeline (set when it starts shutting down).
    pub(crate) link: Arc<LinkState>,
    /// Keep requests here instead of sending them.
    capture: Option<WireCapture>,
}

impl Exporter {
    pub(crate) fn new(config: &OtlpConfig, resource: &opentelemetry_sdk::Resource) -> Result<Self, ConfigError> {
        use crate::names::env;
        let tls = config.tls_files()?;
        let endpoints = [config.endpoint(), config.metrics_endpoint(), config.logs_endpoint()];
        let plain = endpoints.iter().all(|e| e.starts_with("http://"));
        let http = http_client(tls.ca.as_deref(), tls.identity.as_ref(), env::CERTIFICATE, plain)?;
        let traces = Lane {
            headers: config.headers.clone(),
            json: config.protocol == Some(Protocol::HttpJson),
            gzip: config.gzip.unwrap_or(false),
            timeout: config.timeout.unwrap_or(Duration::from_secs(10)),
            http: http.clone(),
        };
        let lane = |signal: &crate::config::SignalSettings, ca_setting: &str| -> Result<Lane, ConfigError> {
            let mut headers = signal.headers.clone();
            for (k, v) in &traces.headers {
                if !headers.iter().any(|(existing, _)| existing.eq_ignore_ascii_case(k)) {
                    headers.push((k.clone(), v.clone()));
                }
            }
            let http = match &signal.certificate {
                Some(path) => {
                    let ca = crate::config::read_pem(ca_setting, path, "CERTIFICATE-----")?;
                    http_client(Some(&ca), tls.identity.as_ref(), ca_setting, false)?
                }
                None => http.clone(),
            };
            Ok(Lane {
                headers,
                json: signal.protocol.map_or(traces.json, |p| p == Protocol::HttpJson),
                gzip: signal.gzip.unwrap_or(traces.gzip),
                timeout: signal.timeout.unwrap_or(traces.timeout),
                http,
            })
        };
        let metrics = lane(&config.metrics_signal, env::METRICS_CERTIFICATE)?;
        let logs = lane(&config.logs_signal, env::LOGS_CERTIFICATE)?;
        let grpc = match config.protocol {
            Some(Protocol::Grpc) => {
                let url = config.endpoint();
                let mut endpoint = Endpoint::from_shared(url.clone())
                    .map_err(|e| ConfigError::new(env::ENDPOINT, format!("{url}: not a gRPC endpoint ({e})")))?
                    .connect_timeout(Duration::from_secs(5));
                if url.starts_with("https://") {
                    let mut settings = ClientTlsConfig::new();
                    settings = match &tls.ca {
                        Some(ca) => settings.ca_certificate(tonic::transport::Certificate::from_pem(ca)),
                        None => settings.with_native_roots(),
                    };
                    if let Some((cert, key)) = &tls.identity {
                        settings = settings.identity(tonic::transport::Identity::from_pem(cert, key));
                    }
                    endpoint = endpoint.tls_config(settings).map_err(|e| {
                        let setting = if tls.ca.is_some() { env::CERTIFICATE } else { "OTLP gRPC TLS" };
                        ConfigError::new(setting, format!("cannot set up TLS for {url}: {e}"))
                    })?;
                }
                Some(endpoint)
            }
            _ => None,
        };
        Ok(Exporter {
            sdk: None,
            grpc,
            channel: OnceLock::new(),
            endpoints,
            lanes: [traces, metrics, logs],
            console: config.traces_exporter == Some(crate::config::TracesExporter::Console),
            max_retries: config.max_retries,
            resource: resource.into(),
            link: Arc::default(),
            capture: config.capture.clone(),
        })
    }

    /// The per-request timeout of traces.
    pub(crate) fn timeout(&self) -> Duration {
        self.lanes[0].timeout
    }

    fn lane(&self, signal: Signal) -> &Lane {
        &self.lanes[signal as usize]
    }

    /// The `schema_url` of the names in use (the resource's).
    fn schema_url(&self) -> String {
        self.resource.schema_url.clone().unwrap_or_default()
    }

    /// The resource, as OTLP metrics and logs want it.
    pub(crate) fn proto_resource(&self) -> opentelemetry_proto::tonic::resource::v1::Resource {
        opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: self.resource.attributes.0.clone(),
            dropped_attributes_count: 0,
            entity_refs: vec![],
        }
    }

    /// Sends one batch of spans through the SDK exporter given to
    /// [`OtelSubscriber::with_span_exporter`](crate::OtelSubscriber::with_span_exporter).
    pub(crate) async fn export_sdk(&self, spans: Vec<SpanData>, deadline: Instant) -> Delivery {
        let Some(sdk) = &self.sdk else { return Delivery::Rejected("no span exporter".into()) };
        let why = match tokio::time::timeout_at(deadline.into(), sdk.export(spans)).await {
            Ok(Ok(())) => return Delivery::Exported,
            Ok(Err(error)) => format!("span exporter: {error}"),
            Err(_) => "span exporter: deadline passed".to_owned(),
        };
        self.link.failed(Signal::Traces, &why);
        Delivery::Failed(why)
    }

    /// An export with no spans: a question the receiver answers like any other.
    pub(crate) fn empty_traces(&self) -> Payload {
        self.payload(Signal::Traces, 0, Body::Traces(ExportTraceServiceRequest::default()))
    }

    /// Sends to a receiver over the network (not to a capture or the console).
    pub(crate) fn sends_over_network(&self) -> bool {
        self.capture.is_none() && !self.console
    }

    /// A batch of spans, encoded for the wire.
    pub(crate) fn traces_payload(&self, spans: Vec<SpanData>) -> Payload {
        let items = spans.len() as u64;
        let request =
            ExportTraceServiceRequest { resource_spans: group_spans_by_resource_and_scope(spans, &self.resource) };
        self.payload(Signal::Traces, items, Body::Traces(request))
    }

    /// Spans already in OTLP form (one resource, one scope), encoded for the wire.
    pub(crate) fn traces_payload_wire(
        &self,
        spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>,
        scope: &opentelemetry::InstrumentationScope,
    ) -> Payload {
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
        let items = spans.len() as u64;
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(self.proto_resource()),
                scope_spans: vec![ScopeSpans {
                    scope: Some((scope, None).into()),
                    spans,
                    schema_url: scope.schema_url().unwrap_or_default().to_owned(),
                }],
                schema_url: self.resource.schema_url.clone().unwrap_or_default(),
            }],
        };
        self.payload(Signal::Traces, items, Body::Traces(request))
    }

    /// Traces go as OTLP/HTTP protobuf (not gRPC, not JSON): spans can be encoded as they are
    /// paired ([`crate::wire`]).
    pub(crate) fn traces_as_protobuf_bytes(&self) -> bool {
        self.grpc.is_none() && !self.lane(Signal::Traces).json
    }

    /// Spans already encoded (one resource, one scope), wrapped in their request for the wire.
    pub(crate) fn traces_payload_encoded(
        &self,
        spans: &crate::wire::EncodedSpans,
        scope: &opentelemetry::InstrumentationScope,
    ) -> Payload {
        use prost::Message;
        let resource = self.proto_resource().encode_to_vec();
        let scope_message: opentelemetry_proto::tonic::common::v1::InstrumentationScope = (scope, None).into();
        let raw = spans.request(
            &resource,
            self.resource.schema_url.as_deref().unwrap_or_default(),
            &scope_message.encode_to_vec(),
            scope.schema_url().unwrap_or_default(),
        );
        let wire = Wire::Http(if self.lane(Signal::Traces).gzip { gzip(&raw) } else { raw });
        Payload { signal: Signal::Traces, items: spans.len() as u64, wire }
    }

    /// One metrics request, encoded for the wire, its resource and scope announcing the
    /// conventions' `schema_url` as traces do.
    pub(crate) fn metrics_payload(&self, mut request: ExportMetricsServiceRequest) -> Payload {
        let schema_url = self.schema_url();
        for resource in &mut request.resource_metrics {
            resource.schema_url = schema_url.clone();
            for scope in &mut resource.scope_metrics {
                scope.schema_url = schema_url.clone();
            }
        }
        self.payload(Signal::Metrics, 1, Body::Metrics(request))
    }

    /// Log records, encoded for the wire.
    pub(crate) fn logs_payload(&self, records: Vec<LogRecord>) -> Payload {
        let items = records.len() as u64;
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
                    schema_url: self.schema_url(),
                }],
                schema_url: self.schema_url(),
            }],
        };
        self.payload(Signal::Logs, items, Body::Logs(request))
    }

    fn payload(&self, signal: Signal, items: u64, body: Body) -> Payload {
        let wire = if self.grpc.is_some() { Wire::Grpc(body) } else { Wire::Http(self.encode(signal, &body)) };
        Payload { signal, items, wire }
    }

    /// How long a TCP connection to the traces endpoint takes: one connection opened and closed
    /// (`None` when there is no network endpoint or none connects within a second).
    ///
    /// A loopback endpoint (`localhost`, `127.0.0.0/8`, `::1`) is not timed: its round trip is
    /// nil. One that does not connect at once has its backlog full — the kernel drops the SYN
    /// and the client tries again only after a second — and is as stalled as one that takes
    /// the connection and never answers.
    pub(crate) async fn connect_time(&self) -> Option<Duration> {
        if self.capture.is_some() || self.console {
            return None;
        }
        let url = reqwest::Url::parse(&self.endpoints[Signal::Traces as usize]).ok()?;
        let host = url.host_str()?.trim_matches(['[', ']']);
        if pi_observe_core::is_loopback_host(host) {
            return Some(Duration::ZERO);
        }
        let address = (host.to_owned(), url.port_or_known_default()?);
        let started = Instant::now();
        let connect = tokio::net::TcpStream::connect(address);
        match tokio::time::timeout(Duration::from_secs(1), connect).await {
            Ok(Ok(_)) => Some(started.elapsed()),
            _ => None,
        }
    }

    /// Sends `payload`, retrying until `deadline`.
    pub(crate) async fn send(&self, payload: &Payload, deadline: Instant) -> Delivery {
        if let Some(capture) = &self.capture {
            capture.keep(self.captured(payload));
            return Delivery::Exported;
        }
        if self.console && matches!(payload.signal, Signal::Traces) {
            return self.to_console(payload);
        }
        let lane = self.lane(payload.signal);
        let mut attempt = 0u32;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.link.failed(payload.signal, "deadline passed");
                return Delivery::Failed("deadline passed".into());
            }
            let limit = lane.timeout.min(left);
            let result = match (&payload.wire, &self.grpc) {
                (Wire::Grpc(body), Some(endpoint)) => self.grpc_attempt(endpoint, body, limit).await.0,
                (Wire::Http(bytes), _) => {
                    let url = &self.endpoints[payload.signal as usize];
                    self.http_attempt(lane, url, bytes, lane.json, lane.gzip, limit).await.0
                }
                (Wire::Grpc(_), None) => Attempt::Reject("gRPC payload without a gRPC endpoint".into()),
            };
            let (after, why, refused) = match result {
                Attempt::Done => {
                    self.link.unreachable.store(false, Relaxed);
                    return Delivery::Exported;
                }
                Attempt::Reject(why) => {
                    self.link.failed(payload.signal, &why);
                    return Delivery::Rejected(why);
                }
                Attempt::Unauthorized(why) => {
                    self.link.failed(payload.signal, &why);
                    return Delivery::Unauthorized(why);
                }
                Attempt::Unsupported(why) => {
                    self.link.failed(payload.signal, &why);
                    return Delivery::Unsupported(why);
                }
                Attempt::Retry { after, why, refused } => (after, why, refused),
            };
            self.link.unreachable.store(refused, Relaxed);
            // A refused connection is final for this batch: nobody is listening, and waiting out
            // the backoff only delays the spool (which delivers it once the collector is back) —
            // and, while shutting down, the exit.
            let give_up = refused;
            if attempt >= self.max_retries || give_up {
                self.link.failed(payload.signal, &why);
                return Delivery::Failed(why);
            }
            let backoff =
                Duration::from_millis(100u64.saturating_mul(1 << attempt.min(10))).min(Duration::from_secs(5));
            let delay = after.unwrap_or(backoff).min(Duration::from_secs(30));
            if Instant::now() + delay >= deadline {
                self.link.failed(payload.signal, &why);
                return Delivery::Failed(why);
            }
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// `OTEL_TRACES_EXPORTER=console`: the batch as one OTLP/JSON line on stderr.
    fn to_console(&self, payload: &Payload) -> Delivery {
        let json = match &payload.wire {
            Wire::Grpc(body) => body.to_json(),
            Wire::Http(_) => match self.captured(payload).body {
                body if self.lane(payload.signal).json => body,
                body => {
                    ExportTraceServiceRequest::decode(&body[..]).map(|r| Body::Traces(r).to_json()).unwrap_or_default()
                }
            },
        };
        let mut err = std::io::stderr().lock();
        match err.write_all(&json).and_then(|()| err.write_all(b"\n")) {
            Ok(()) => Delivery::Exported,
            Err(e) => Delivery::Failed(format!("console: {e}")),
        }
    }

    /// One try at sending `payload`, without retries: what came of it, the receiver's status
    /// when it answered, and how long it took (`pi observe test`).
    pub(crate) async fn probe(&self, payload: &Payload) -> (Attempt, Option<String>, Duration) {
        let started = Instant::now();
        let lane = self.lane(payload.signal);
        let (attempt, status) = match (&payload.wire, &self.grpc) {
            (Wire::Grpc(body), Some(endpoint)) => self.grpc_attempt(endpoint, body, lane.timeout).await,
            (Wire::Http(bytes), _) => {
                let url = &self.endpoints[payload.signal as usize];
                self.http_attempt(lane, url, bytes, lane.json, lane.gzip, lane.timeout).await
            }
            (Wire::Grpc(_), None) => (Attempt::Reject("gRPC payload without a gRPC endpoint".into()), None),
        };
        (attempt, status, started.elapsed())
    }

    /// `payload` as a [`CapturedRequest`]: its encoded body before compression.
    fn captured(&self, payload: &Payload) -> CapturedRequest {
        let body = match &payload.wire {
            Wire::Grpc(body) => body.to_protobuf(),
            Wire::Http(bytes) if self.lane(payload.signal).gzip => {
                let mut raw = Vec::new();
                let _ = std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut raw);
                raw
            }
            Wire::Http(bytes) => bytes.clone(),
        };
        CapturedRequest { signal: payload.signal.name(), url: self.url_of(payload), body }
    }

    /// Records why `payload` was not sent when no try of the exporter's said so (an attempt cut
    /// short at the exit, a receiver skipped after a recent failure), naming its own URL: each
    /// signal's summary names that signal's reason.
    pub(crate) fn note_unsent(&self, payload: &Payload, why: &str) {
        let mut errors = self.link.last_error.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &mut errors[payload.signal as usize];
        if slot.is_none() {
            *slot = Some(format!("{}: {why}", self.url_of(payload)));
        }
    }

    /// The URL `payload` goes to, without credentials.
    pub(crate) fn url_of(&self, payload: &Payload) -> String {
        url_without_secrets(&self.endpoints[payload.signal as usize])
    }

    /// The protocol `payload` goes over.
    pub(crate) fn protocol_of(&self, payload: &Payload) -> &'static str {
        self.protocol_name(payload.signal)
    }

    /// The protocol name of `signal` (recorded by spooled batches).
    fn protocol_name(&self, signal: Signal) -> &'static str {
        match (self.grpc.is_some(), self.lane(signal).json) {
            (true, _) => "grpc",
            (false, true) => "http/json",
            (false, false) => "http/protobuf",
        }
    }

    fn encode(&self, signal: Signal, body: &Body) -> Vec<u8> {
        let lane = self.lane(signal);
        let raw = if lane.json { body.to_json() } else { body.to_protobuf() };
        if lane.gzip { gzip(&raw) } else { raw }
    }
}

/// `raw` gzipped.
fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into memory cannot fail; an empty body would be rejected and counted.
    encoder.write_all(raw).and_then(|()| encoder.finish()).unwrap_or_default()
}
