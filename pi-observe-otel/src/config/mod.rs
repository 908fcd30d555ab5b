//! OTLP configuration: code settings win over the standard `OTEL_*` environment variables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::convert::Conventions;
use crate::names::{self, env};

mod from_env;

pub use from_env::sampler_setting;

/// OTLP wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
    /// OTLP/HTTP with JSON bodies.
    HttpJson,
    /// OTLP/gRPC.
    Grpc,
}

impl Protocol {
    /// Parses `http/protobuf`, `http/json` or `grpc`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "http/protobuf" => Some(Protocol::HttpProtobuf),
            "http/json" => Some(Protocol::HttpJson),
            "grpc" => Some(Protocol::Grpc),
            _ => None,
        }
    }
}

pub use pi_observe_core::ConfigError;

/// Everything the OTLP exporter needs. Build with [`OtlpConfig::default`] and fields, then
/// [`OtlpConfig::with_env`] to fill what code left unset from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpConfig {
    /// Full traces URL (`…/v1/traces` for HTTP). `None` → env, else `http://localhost:4318/v1/traces`.
    pub traces_endpoint: Option<String>,
    /// Protocol (default `http/protobuf`).
    pub protocol: Option<Protocol>,
    /// Extra request headers (e.g. auth for a SaaS backend).
    pub headers: Vec<(String, String)>,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
    /// Gzip request bodies.
    pub gzip: Option<bool>,
    /// `service.name`.
    pub service_name: Option<String>,
    /// `service.version` (the embedding program's version).
    pub service_version: Option<String>,
    /// Extra resource attributes (`OTEL_RESOURCE_ATTRIBUTES`, then the settings'), e.g.
    /// `deployment.environment.name=prod`; the first of a key wins.
    pub resource_attributes: Vec<(String, String)>,
    /// Attribute conventions.
    pub conventions: Conventions,
    /// The newest GenAI names (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`)
    /// instead of the pinned [`GENAI_SEMCONV_VERSION`](crate::names::GENAI_SEMCONV_VERSION).
    pub latest_genai: Option<bool>,
    /// Most distinct attribute sets per metric (default 2,000); what does not fit is summed
    /// into one series marked `otel.metric.overflow=true`.
    pub metric_cardinality_limit: Option<usize>,
    /// Queue capacity in records (default 8192).
    pub max_queue_size: Option<usize>,
    /// Spans per export request (default 512).
    pub max_export_batch_size: Option<usize>,
    /// Longest wait before a partial batch is sent (default 1 s).
    pub schedule_delay: Option<Duration>,
    /// Retries of a failed export (default 5).
    pub max_retries: u32,
    /// Fraction of traces kept (1.0 = all), from `OTEL_TRACES_SAMPLER`.
    pub sample_ratio: Option<f64>,
    /// `parentbased_*` samplers: a trace whose root has a remote parent (an adopted
    /// `TRACEPARENT`) follows that parent's sampled flag; the ratio applies to local roots.
    pub parent_based: Option<bool>,
    /// Export metrics too (default on; `OTEL_METRICS_EXPORTER=none` turns them off).
    pub metrics: Option<bool>,
    /// Full metrics URL; default: the traces URL with `/v1/metrics`.
    pub metrics_endpoint: Option<String>,
    /// Attribution keys that become metric dimensions (default `orgId`).
    pub metric_dims: Option<Vec<String>>,
    /// How often metrics are exported (default 10 s; also at shutdown).
    pub metric_interval: Option<Duration>,
    /// Export every record as an OTLP log record too (default off).
    pub logs: Option<bool>,
    /// Full logs URL; default: the traces URL with `/v1/logs`.
    pub logs_endpoint: Option<String>,
    /// Export is off (`OTEL_SDK_DISABLED=true`).
    pub disabled: bool,
    /// PEM file of the CA certificate(s) that sign the collector's TLS certificate; when set,
    /// only these are trusted (`OTEL_EXPORTER_OTLP_CERTIFICATE`). Default: the system roots.
    pub certificate: Option<PathBuf>,
    /// PEM files of the client certificate and its private key, for collectors that require
    /// mutual TLS (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`, `OTEL_EXPORTER_OTLP_CLIENT_KEY`).
    pub client_certificate: Option<(PathBuf, PathBuf)>,
    /// Where batches that could not be delivered are kept for a later run (`None`: they are
    /// dropped and counted). Batches spooled by earlier runs for this configuration's
    /// endpoints are delivered in the background when the subscriber starts.
    pub spool: Option<pi_observe_spool::SpoolConfig>,
    /// With a spool, how long shutdown waits for the receiver before spooling what is left
    /// (default 200 ms); without one, shutdown waits its whole deadline.
    pub exit_patience: Option<Duration>,
    /// With a spool, ask the receiver at once with an empty traces export whether it answers
    /// (a backfill: while the sessions are still being read), so that a stalled receiver is known
    /// before the first batch and every batch goes straight to the spool. Default off: the first
    /// batch is the question.
    pub check_receiver_first: bool,
    /// Metric temporality (`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`; default
    /// cumulative).
    pub metric_temporality: Option<crate::metrics::Temporality>,
    /// Where spans go (`OTEL_TRACES_EXPORTER`; default OTLP). Metrics and logs are unaffected.
    pub traces_exporter: Option<TracesExporter>,
    /// Metrics-only settings (`OTEL_EXPORTER_OTLP_METRICS_*`), over the traces ones.
    pub metrics_signal: SignalSettings,
    /// Logs-only settings (`OTEL_EXPORTER_OTLP_LOGS_*`), over the traces ones.
    pub logs_signal: SignalSettings,
    /// Replaces the transport with a local capture of what would be sent (`pi observe canary`):
    /// nothing leaves the process, every request is kept and counted as delivered.
    pub capture: Option<WireCapture>,
}

/// `OTEL_TRACES_EXPORTER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracesExporter {
    /// OTLP (the default).
    Otlp,
    /// No spans are exported (counted as sampled out); metrics and logs still are.
    None,
    /// Each batch as one OTLP/JSON line on stderr instead of the network.
    Console,
}

/// Settings of one signal (metrics or logs) that differ from the traces ones; unset fields
/// take the traces value. Headers are added to (and override by name) the traces headers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignalSettings {
    /// Extra or replacing headers.
    pub headers: Vec<(String, String)>,
    /// HTTP flavour (`http/protobuf` or `http/json`); gRPC only when traces use gRPC too.
    pub protocol: Option<Protocol>,
    /// Per-request timeout.
    pub timeout: Option<Duration>,
    /// Gzip request bodies.
    pub gzip: Option<bool>,
    /// CA certificate file trusted for this signal's collector.
    pub certificate: Option<PathBuf>,
}

/// Requests the OTLP exporter would have sent, kept instead of sent (see
/// [`OtlpConfig::capture`]). Clones share one list.
#[derive(Clone, Default)]
pub struct WireCapture(std::sync::Arc<std::sync::Mutex<Vec<CapturedRequest>>>);

/// One request kept by a [`WireCapture`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedRequest {
    /// `traces`, `metrics` or `logs`.
    pub signal: &'static str,
    /// Where it would have gone (without credentials).
    pub url: String,
    /// The encoded request (OTLP protobuf, or JSON for `http/json`), before any compression.
    pub body: Vec<u8>,
}

impl WireCapture {
    /// Every request kept so far.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn keep(&self, request: CapturedRequest) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(request);
    }
}

impl PartialEq for WireCapture {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for WireCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireCapture").field("requests", &self.0.lock().map(|r| r.len()).unwrap_or(0)).finish()
    }
}

/// TLS material read from the configured files (at start-up).
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsFiles {
    /// Trusted CA certificates (PEM); `None` = system roots.
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key (PEM).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            traces_endpoint: None,
            protocol: None,
            headers: Vec::new(),
            timeout: None,
            gzip: None,
            service_name: None,
            service_version: None,
            resource_attributes: Vec::new(),
            conventions: Conventions::default(),
            latest_genai: None,
            metric_cardinality_limit: None,
            max_queue_size: None,
            max_export_batch_size: None,
            schedule_delay: None,
            max_retries: 5,
            sample_ratio: None,
            parent_based: None,
            metrics: None,
            metrics_endpoint: None,
            metric_dims: None,
            metric_interval: None,
            logs: None,
            logs_endpoint: None,
            disabled: false,
            certificate: None,
            client_certificate: None,
            spool: None,
            exit_patience: None,
            check_receiver_first: false,
            metric_temporality: None,
            traces_exporter: None,
            metrics_signal: SignalSettings::default(),
            logs_signal: SignalSettings::default(),
            capture: None,
        }
    }
}

/// Reads a PEM file that must hold a `block` (e.g. `CERTIFICATE-----`); errors name `setting`.
pub(crate) fn read_pem(setting: &str, path: &Path, block: &str) -> Result<Vec<u8>, ConfigError> {
    let bytes =
        std::fs::read(path).map_err(|e| ConfigError::new(setting, format!("cannot read {}: {e}", path.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    if !text.contains("-----BEGIN ") || !text.contains(block) {
        return Err(ConfigError::new(setting, format!("{} has no PEM {block}", path.display())));
    }
    Ok(bytes)
}

/// Checks that `name: value` can be sent as an HTTP header (a token name; a value without
/// control characters such as a newline). The message does not repeat the value (it may be a
/// credential).
pub fn check_header(name: &str, value: &str) -> Result<(), String> {
    reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("header name {name:?} is not a valid HTTP header name"))?;
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!("the value of header {name:?} contains a control character"));
    }
    reqwest::header::HeaderValue::from_str(value)
        .map(|_| ())
        .map_err(|_| format!("the value of header {name:?} is not a valid HTTP header value"))
}

/// `url` without what may be a credential — user name, password and query string — for
/// display and for the spool, which must not keep secrets.
pub fn url_without_secrets(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => "(invalid URL)".to_owned(),
    }
}

/// `base` (an OTLP/HTTP base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it) with `/v1/<signal>`
/// added to its path; a query string stays after the path.
pub fn signal_url(base: &str, signal: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) => {
            let path = format!("{}/v1/{signal}", url.path().trim_end_matches('/'));
            url.set_path(&path);
            url.to_string()
        }
        Err(_) => format!("{}/v1/{signal}", base.trim_end_matches('/')),
    }
}

/// The base URL of `url` when its path ends with `/v1/traces` (a full traces URL), its query
/// kept; `None` otherwise.
pub fn traces_url_base(url: &str) -> Option<String> {
    let mut parsed = reqwest::Url::parse(url).ok()?;
    let base = parsed.path().trim_end_matches('/').strip_suffix("/v1/traces")?.to_owned();
    parsed.set_path(&base);
    Some(parsed.to_string())
}

/// Checks that `raw` is an http(s) URL with a host (and, if given, a valid port).
pub fn check_url(raw: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(raw).map_err(|e| format!("{raw:?} is not a valid URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{raw:?} is not an http(s) URL"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{raw:?} has no host"));
    }
    Ok(())
}

impl OtlpConfig {
    /// The resource: `service.name` plus the configured attributes.
    pub(crate) fn resource(&self) -> opentelemetry_sdk::Resource {
        use opentelemetry::KeyValue;
        let mut attributes = vec![KeyValue::new(names::SERVICE_NAME, self.service())];
        let given = |key: &str| self.resource_attributes.iter().any(|(k, _)| k == key);
        if let Some(version) = self.service_version.as_ref().filter(|_| !given(names::SERVICE_VERSION)) {
            attributes.push(KeyValue::new(names::SERVICE_VERSION, version.clone()));
        }
        if !given(names::SERVICE_INSTANCE_ID) {
            attributes.push(KeyValue::new(names::SERVICE_INSTANCE_ID, instance_id().to_owned()));
        }
        // Phoenix files traces under this project (else its "default"): Phoenix's own
        // `x-project-name` header when one is sent, else the service name — unless
        // `OTEL_RESOURCE_ATTRIBUTES` / the settings name one.
        if self.conventions.openinference() && !given(names::OPENINFERENCE_PROJECT_NAME) {
            let header = self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("x-project-name"));
            let project = header.map_or_else(|| self.service(), |(_, v)| v.clone());
            attributes.push(KeyValue::new(names::OPENINFERENCE_PROJECT_NAME, project));
        }
        let mut seen: Vec<&str> = vec![names::SERVICE_NAME];
        for (key, value) in &self.resource_attributes {
            if !seen.contains(&key.as_str()) {
                seen.push(key);
                attributes.push(KeyValue::new(key.clone(), value.clone()));
            }
        }
        opentelemetry_sdk::Resource::builder_empty().with_schema_url(attributes, self.schema_url()).build()
    }

    /// Reads the configured certificate files; a missing file or one without the expected PEM
    /// block is an error naming the setting.
    pub(crate) fn tls_files(&self) -> Result<TlsFiles, ConfigError> {
        let read = read_pem;
        Ok(TlsFiles {
            ca: self.certificate.as_deref().map(|p| read(env::CERTIFICATE, p, "CERTIFICATE-----")).transpose()?,
            identity: self
                .client_certificate
                .as_ref()
                .map(|(cert, key)| {
                    Ok::<_, ConfigError>((
                        read(env::CLIENT_CERTIFICATE, cert, "CERTIFICATE-----")?,
                        read(env::CLIENT_KEY, key, "PRIVATE KEY-----")?,
                    ))
                })
                .transpose()?,
        })
    }

    /// The traces URL in use (HTTP: the full `…/v1/traces` URL; gRPC: the collector address).
    pub fn endpoint(&self) -> String {
        match (&self.traces_endpoint, self.protocol) {
            (Some(endpoint), _) => endpoint.clone(),
            (None, Some(Protocol::Grpc)) => "http://localhost:4317".to_owned(),
            (None, _) => "http://localhost:4318/v1/traces".to_owned(),
        }
    }

    /// The `schema_url` of the names in use.
    pub(crate) fn schema_url(&self) -> &'static str {
        if self.latest_genai == Some(true) { crate::names::SCHEMA_URL_LATEST } else { crate::names::SCHEMA_URL }
    }

    /// The metrics URL in use.
    pub fn metrics_endpoint(&self) -> String {
        self.metrics_endpoint.clone().unwrap_or_else(|| self.sibling("metrics"))
    }

    /// The logs URL in use.
    pub fn logs_endpoint(&self) -> String {
        self.logs_endpoint.clone().unwrap_or_else(|| self.sibling("logs"))
    }

    /// The traces URL with its `/v1/traces` replaced by `/v1/<signal>` (added when it has none);
    /// over gRPC every signal goes to the one collector address.
    fn sibling(&self, signal: &str) -> String {
        let traces = self.endpoint();
        if self.protocol == Some(Protocol::Grpc) {
            return traces;
        }
        signal_url(&traces_url_base(&traces).unwrap_or(traces), signal)
    }

    pub(crate) fn dims(&self) -> Vec<String> {
        self.metric_dims.clone().unwrap_or_else(|| vec![pi_observe_core::names::CTX_ORG_ID.to_owned()])
    }

    pub(crate) fn service(&self) -> String {
        self.service_name.clone().unwrap_or_else(|| names::DEFAULT_SERVICE_NAME.to_owned())
    }
}

/// This process's `service.instance.id`: random, the same for every signal and exporter.
pub fn instance_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| pi_observe_core::SpanId::random().to_string() + &pi_observe_core::SpanId::random().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(config: &OtlpConfig) -> Vec<(String, String)> {
        config.resource().iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_resource_names_service_version_process_and_phoenix_project() {
        let config = OtlpConfig {
            service_version: Some("1.2.3".into()),
            conventions: Conventions::OpenInference,
            resource_attributes: vec![
                ("deployment.environment.name".into(), "prod".into()),
                ("service.name".into(), "x".into()),
            ],
            ..OtlpConfig::default()
        };
        let attrs = resource(&config);
        let get = |key: &str| attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        assert_eq!(get(names::SERVICE_NAME), Some("pi"), "service.name comes from its own setting");
        assert_eq!(get(names::SERVICE_VERSION), Some("1.2.3"));
        assert_eq!(get(names::SERVICE_INSTANCE_ID), Some(instance_id()));
        assert_eq!(get(names::OPENINFERENCE_PROJECT_NAME), Some("pi"));
        assert_eq!(get("deployment.environment.name"), Some("prod"));
        let genai = OtlpConfig { conventions: Conventions::GenAi, ..OtlpConfig::default() };
        assert!(resource(&genai).iter().all(|(k, _)| k != names::OPENINFERENCE_PROJECT_NAME));
    }
}
