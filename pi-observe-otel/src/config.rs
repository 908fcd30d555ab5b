//! OTLP configuration: code settings win over the standard `OTEL_*` environment variables.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::convert::Conventions;
use crate::names::{self, env};

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

/// A setting that cannot be used; the message names the variable or flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct ConfigError {
    /// The variable or flag.
    pub setting: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(setting: &str, message: impl Into<String>) -> Self {
        ConfigError { setting: setting.to_owned(), message: message.into() }
    }
}

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
    /// Extra resource attributes.
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

/// Parses `key=value,key2=value2` (values percent-decoded, as the OTel spec requires).
pub(crate) fn parse_pairs(setting: &str, raw: &str) -> Result<Vec<(String, String)>, ConfigError> {
    raw.split(',')
        .enumerate()
        .filter(|(_, entry)| !entry.trim().is_empty())
        .map(|(i, entry)| {
            let (k, v) = entry
                .split_once('=')
                .ok_or_else(|| ConfigError::new(setting, format!("entry {} {:?} has no '='", i + 1, entry.trim())))?;
            let key = k.trim();
            if key.is_empty() {
                return Err(ConfigError::new(setting, format!("entry {} has an empty key", i + 1)));
            }
            let value = percent_decode(v.trim())
                .map_err(|why| ConfigError::new(setting, format!("entry {} ({key}): {why}", i + 1)))?;
            Ok((key.to_owned(), value))
        })
        .collect()
}

/// Decodes `%XX` escapes; a `%` not followed by two hex digits, or bytes that are not UTF-8
/// after decoding, are errors.
fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
            match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(hi), Some(lo)) => {
                    out.push((hi * 16 + lo) as u8);
                    i += 3;
                    continue;
                }
                _ => return Err(format!("bad %-escape at byte {} (expected %XX)", i + 1)),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).map_err(|_| "not UTF-8 after %-decoding".to_owned())
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

fn millis(setting: &str, raw: &str) -> Result<Duration, ConfigError> {
    raw.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| ConfigError::new(setting, format!("{raw:?} is not a whole number of milliseconds")))
}

fn gzip(setting: &str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim() {
        "gzip" => Ok(true),
        "none" => Ok(false),
        other => Err(ConfigError::new(setting, format!("{other:?} is not gzip or none"))),
    }
}

fn count(setting: &str, raw: &str) -> Result<usize, ConfigError> {
    match raw.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::new(setting, format!("{raw:?} is not a positive whole number"))),
    }
}

fn url(setting: &str, raw: &str) -> Result<String, ConfigError> {
    let raw = raw.trim();
    check_url(raw).map(|()| raw.to_owned()).map_err(|why| ConfigError::new(setting, why))
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
    /// Reads the process environment for everything code left unset.
    pub fn with_process_env(self) -> Result<Self, ConfigError> {
        self.with_env(|name| std::env::var(name).ok())
    }

    /// Fills unset fields from `lookup` (the `OTEL_*` variables; per-signal ones win over
    /// generic ones). Malformed values are errors naming the variable.
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        if let Some(raw) = get(env::SDK_DISABLED) {
            match raw.trim().to_ascii_lowercase().as_str() {
                "true" => self.disabled = true,
                "false" => {}
                _ => return Err(ConfigError::new(env::SDK_DISABLED, format!("{raw:?} is not true or false"))),
            }
        }
        if self.protocol.is_none() {
            for var in [env::TRACES_PROTOCOL, env::PROTOCOL] {
                if let Some(raw) = get(var) {
                    self.protocol = Some(Protocol::parse(&raw).ok_or_else(|| {
                        ConfigError::new(var, format!("{raw:?} is not grpc, http/protobuf or http/json"))
                    })?);
                    break;
                }
            }
        }
        let mut insecure = None;
        for var in [env::TRACES_INSECURE, env::INSECURE] {
            if let Some(raw) = get(var) {
                insecure = Some(match raw.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    other => return Err(ConfigError::new(var, format!("{other:?} is not true or false"))),
                });
                break;
            }
        }
        // gRPC collectors are often given as `host:port`: the scheme follows `…_INSECURE`.
        let grpc = self.protocol == Some(Protocol::Grpc);
        let get = |name: &str| {
            get(name).map(|raw| {
                let is_endpoint = name.ends_with("_ENDPOINT");
                if grpc && is_endpoint && !raw.contains("://") {
                    format!("{}://{}", if insecure == Some(true) { "http" } else { "https" }, raw.trim())
                } else {
                    raw
                }
            })
        };
        if self.traces_endpoint.is_none() {
            if let Some(raw) = get(env::TRACES_ENDPOINT) {
                self.traces_endpoint = Some(url(env::TRACES_ENDPOINT, &raw)?);
            } else if let Some(raw) = get(env::ENDPOINT) {
                let base = url(env::ENDPOINT, &raw)?;
                self.traces_endpoint = Some(match self.protocol {
                    Some(Protocol::Grpc) => base,
                    _ => format!("{}/v1/traces", base.trim_end_matches('/')),
                });
            }
        }
        for var in [env::HEADERS, env::TRACES_HEADERS] {
            if let Some(raw) = get(var) {
                for (k, v) in parse_pairs(var, &raw)? {
                    check_header(&k, &v).map_err(|why| ConfigError::new(var, why))?;
                    if !self.headers.iter().any(|(existing, _)| existing.eq_ignore_ascii_case(&k)) {
                        self.headers.push((k, v));
                    }
                }
            }
        }
        if self.timeout.is_none() {
            for var in [env::TRACES_TIMEOUT, env::TIMEOUT, env::BSP_EXPORT_TIMEOUT] {
                if let Some(raw) = get(var) {
                    self.timeout = Some(millis(var, &raw)?);
                    break;
                }
            }
        }
        if self.gzip.is_none() {
            for var in [env::TRACES_COMPRESSION, env::COMPRESSION] {
                if let Some(raw) = get(var) {
                    self.gzip = Some(gzip(var, &raw)?);
                    break;
                }
            }
        }
        if self.service_name.is_none() {
            self.service_name = get(env::SERVICE_NAME).map(|s| s.trim().to_owned());
        }
        if let Some(raw) = get(env::RESOURCE_ATTRIBUTES) {
            for (k, v) in parse_pairs(env::RESOURCE_ATTRIBUTES, &raw)? {
                if !self.resource_attributes.iter().any(|(existing, _)| existing == &k) {
                    self.resource_attributes.push((k, v));
                }
            }
        }
        if self.max_queue_size.is_none() {
            self.max_queue_size =
                get(env::BSP_MAX_QUEUE_SIZE).map(|r| count(env::BSP_MAX_QUEUE_SIZE, &r)).transpose()?;
        }
        if self.max_export_batch_size.is_none() {
            self.max_export_batch_size =
                get(env::BSP_MAX_EXPORT_BATCH_SIZE).map(|r| count(env::BSP_MAX_EXPORT_BATCH_SIZE, &r)).transpose()?;
        }
        if self.schedule_delay.is_none() {
            self.schedule_delay =
                get(env::BSP_SCHEDULE_DELAY).map(|r| millis(env::BSP_SCHEDULE_DELAY, &r)).transpose()?;
        }
        if self.parent_based.is_none() {
            self.parent_based = get(env::TRACES_SAMPLER).map(|name| name.trim().starts_with("parentbased_"));
        }
        if self.sample_ratio.is_none() {
            self.sample_ratio = sampler(get(env::TRACES_SAMPLER), get(env::TRACES_SAMPLER_ARG))?;
        }
        let switch = |var: &str| -> Result<Option<bool>, ConfigError> {
            get(var)
                .map(|raw| match raw.trim() {
                    "none" => Ok(false),
                    "otlp" => Ok(true),
                    other => Err(ConfigError::new(var, format!("{other:?} is not otlp or none"))),
                })
                .transpose()
        };
        let signal_endpoint = |var: &str, signal: &str| -> Result<Option<String>, ConfigError> {
            match (get(var), get(env::ENDPOINT)) {
                (Some(raw), _) => url(var, &raw).map(Some),
                (None, Some(raw)) => {
                    Ok(Some(format!("{}/v1/{signal}", url(env::ENDPOINT, &raw)?.trim_end_matches('/'))))
                }
                (None, None) => Ok(None),
            }
        };
        if self.latest_genai.is_none() {
            self.latest_genai = get(env::SEMCONV_STABILITY_OPT_IN)
                .map(|raw| raw.split(',').any(|v| v.trim() == crate::names::GEN_AI_LATEST_EXPERIMENTAL));
        }
        if self.metrics.is_none() {
            self.metrics = switch(env::METRICS_EXPORTER)?;
        }
        if self.metrics_endpoint.is_none() {
            self.metrics_endpoint = signal_endpoint(env::METRICS_ENDPOINT, "metrics")?;
        }
        if self.logs.is_none() {
            self.logs = switch(env::LOGS_EXPORTER)?;
        }
        if self.logs_endpoint.is_none() {
            self.logs_endpoint = signal_endpoint(env::LOGS_ENDPOINT, "logs")?;
        }
        if self.metric_interval.is_none() {
            self.metric_interval =
                get(env::METRIC_EXPORT_INTERVAL).map(|r| millis(env::METRIC_EXPORT_INTERVAL, &r)).transpose()?;
        }
        if self.metric_temporality.is_none()
            && let Some(raw) = get(env::METRICS_TEMPORALITY_PREFERENCE)
        {
            self.metric_temporality = Some(crate::metrics::Temporality::parse(&raw).ok_or_else(|| {
                ConfigError::new(
                    env::METRICS_TEMPORALITY_PREFERENCE,
                    format!("{raw:?} is not cumulative, delta or lowmemory"),
                )
            })?);
        }
        if self.traces_exporter.is_none()
            && let Some(raw) = get(env::TRACES_EXPORTER)
        {
            self.traces_exporter = Some(match raw.trim() {
                "otlp" => TracesExporter::Otlp,
                "none" => TracesExporter::None,
                "console" => TracesExporter::Console,
                other => {
                    return Err(ConfigError::new(
                        env::TRACES_EXPORTER,
                        format!("{other:?} is not otlp, none or console"),
                    ));
                }
            });
        }
        for (settings, [headers, protocol, timeout, compression, certificate]) in [
            (
                &mut self.metrics_signal,
                [
                    env::METRICS_HEADERS,
                    env::METRICS_PROTOCOL,
                    env::METRICS_TIMEOUT,
                    env::METRICS_COMPRESSION,
                    env::METRICS_CERTIFICATE,
                ],
            ),
            (
                &mut self.logs_signal,
                [
                    env::LOGS_HEADERS,
                    env::LOGS_PROTOCOL,
                    env::LOGS_TIMEOUT,
                    env::LOGS_COMPRESSION,
                    env::LOGS_CERTIFICATE,
                ],
            ),
        ] {
            if let Some(raw) = get(headers) {
                for (k, v) in parse_pairs(headers, &raw)? {
                    check_header(&k, &v).map_err(|why| ConfigError::new(headers, why))?;
                    if !settings.headers.iter().any(|(existing, _)| existing.eq_ignore_ascii_case(&k)) {
                        settings.headers.push((k, v));
                    }
                }
            }
            if settings.protocol.is_none()
                && let Some(raw) = get(protocol)
            {
                settings.protocol = Some(Protocol::parse(&raw).ok_or_else(|| {
                    ConfigError::new(protocol, format!("{raw:?} is not grpc, http/protobuf or http/json"))
                })?);
            }
            if settings.timeout.is_none() {
                settings.timeout = get(timeout).map(|r| millis(timeout, &r)).transpose()?;
            }
            if settings.gzip.is_none() {
                settings.gzip = get(compression).map(|r| gzip(compression, &r)).transpose()?;
            }
            if settings.certificate.is_none() {
                settings.certificate = get(certificate).map(|p| PathBuf::from(p.trim()));
            }
        }
        let grpc = self.protocol == Some(Protocol::Grpc);
        for (settings, var) in [(&self.metrics_signal, env::METRICS_PROTOCOL), (&self.logs_signal, env::LOGS_PROTOCOL)]
        {
            if settings.protocol.is_some_and(|p| (p == Protocol::Grpc) != grpc) {
                return Err(ConfigError::new(
                    var,
                    "must be gRPC exactly when traces use gRPC (one transport per exporter)".to_owned(),
                ));
            }
        }
        let path = |vars: [&'static str; 2]| vars.iter().find_map(|v| get(v).map(|p| (*v, PathBuf::from(p.trim()))));
        if self.certificate.is_none() {
            self.certificate = path([env::TRACES_CERTIFICATE, env::CERTIFICATE]).map(|(_, p)| p);
        }
        if self.client_certificate.is_none() {
            match (
                path([env::TRACES_CLIENT_CERTIFICATE, env::CLIENT_CERTIFICATE]),
                path([env::TRACES_CLIENT_KEY, env::CLIENT_KEY]),
            ) {
                (Some((_, cert)), Some((_, key))) => self.client_certificate = Some((cert, key)),
                (Some((var, _)), None) => return Err(ConfigError::new(var, format!("set {} too", env::CLIENT_KEY))),
                (None, Some((var, _))) => {
                    return Err(ConfigError::new(var, format!("set {} too", env::CLIENT_CERTIFICATE)));
                }
                (None, None) => {}
            }
        }
        Ok(self)
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

    /// The traces URL with its `/v1/traces` replaced by `/v1/<signal>`.
    fn sibling(&self, signal: &str) -> String {
        let traces = self.endpoint();
        match traces.strip_suffix("/v1/traces") {
            Some(base) => format!("{base}/v1/{signal}"),
            None => format!("{}/v1/{signal}", traces.trim_end_matches('/')),
        }
    }

    pub(crate) fn dims(&self) -> Vec<String> {
        self.metric_dims.clone().unwrap_or_else(|| vec![pi_observe_core::names::CTX_ORG_ID.to_owned()])
    }

    pub(crate) fn service(&self) -> String {
        self.service_name.clone().unwrap_or_else(|| names::DEFAULT_SERVICE_NAME.to_owned())
    }
}

/// `OTEL_TRACES_SAMPLER` (+ `_ARG`) as a keep ratio. Contract traces are whole trees, so
/// `parentbased_*` behaves like its root sampler.
fn sampler(name: Option<String>, arg: Option<String>) -> Result<Option<f64>, ConfigError> {
    let Some(name) = name else { return Ok(None) };
    let ratio = || -> Result<f64, ConfigError> {
        match arg.as_deref().map(str::trim) {
            None => Ok(1.0),
            Some(raw) => match raw.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err(ConfigError::new(env::TRACES_SAMPLER_ARG, format!("{raw:?} is not a ratio between 0 and 1"))),
            },
        }
    };
    Ok(Some(match name.trim() {
        "always_on" | "parentbased_always_on" => 1.0,
        "always_off" | "parentbased_always_off" => 0.0,
        "traceidratio" | "parentbased_traceidratio" => ratio()?,
        other => return Err(ConfigError::new(env::TRACES_SAMPLER, format!("{other:?} is not a supported sampler"))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> Result<OtlpConfig, ConfigError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        OtlpConfig::default().with_env(|k| map.get(k).cloned())
    }

    #[test]
    fn generic_endpoint_gets_the_signal_path_and_per_signal_endpoint_is_verbatim() {
        assert_eq!(with(&[(env::ENDPOINT, "http://c:4318/")]).unwrap().endpoint(), "http://c:4318/v1/traces");
        let c = with(&[(env::ENDPOINT, "http://c:4318"), (env::TRACES_ENDPOINT, "http://t:1/custom")]).unwrap();
        assert_eq!(c.endpoint(), "http://t:1/custom");
        assert_eq!(OtlpConfig::default().endpoint(), "http://localhost:4318/v1/traces");
    }

    #[test]
    fn code_settings_win_over_the_environment() {
        let code = OtlpConfig {
            traces_endpoint: Some("http://code:1/v1/traces".into()),
            service_name: Some("svc".into()),
            headers: vec![("x-tenant".into(), "code".into())],
            ..OtlpConfig::default()
        };
        let map: HashMap<&str, &str> = [
            (env::ENDPOINT, "http://env:2"),
            (env::SERVICE_NAME, "env-svc"),
            (env::HEADERS, "x-tenant=env,authorization=Bearer%20abc"),
            (env::RESOURCE_ATTRIBUTES, "deployment.environment=prod,team=core"),
            (env::COMPRESSION, "gzip"),
            (env::TIMEOUT, "2500"),
            (env::PROTOCOL, "http/json"),
            (env::TRACES_SAMPLER, "traceidratio"),
            (env::TRACES_SAMPLER_ARG, "0.25"),
        ]
        .into_iter()
        .collect();
        let c = code.with_env(|k| map.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(c.endpoint(), "http://code:1/v1/traces");
        assert_eq!(c.service(), "svc");
        assert_eq!(
            c.headers,
            vec![("x-tenant".to_owned(), "code".to_owned()), ("authorization".into(), "Bearer abc".into())]
        );
        assert_eq!(c.resource_attributes.len(), 2);
        assert_eq!(
            (c.gzip, c.timeout, c.protocol),
            (Some(true), Some(Duration::from_millis(2500)), Some(Protocol::HttpJson))
        );
        assert_eq!(c.sample_ratio, Some(0.25));
    }

    #[test]
    fn malformed_values_are_one_line_errors_naming_the_variable() {
        for (var, value, needle) in [
            (env::HEADERS, "a=1,broken", "entry 2 \"broken\" has no '='"),
            (env::PROTOCOL, "carrier-pigeon", "not grpc"),
            (env::ENDPOINT, "localhost:4318", "not an http(s) URL"),
            (env::TIMEOUT, "soon", "milliseconds"),
            (env::COMPRESSION, "zstd", "not gzip"),
            (env::BSP_MAX_QUEUE_SIZE, "0", "positive"),
            (env::SDK_DISABLED, "yes", "true or false"),
            (env::TRACES_SAMPLER, "sometimes", "supported sampler"),
            (env::RESOURCE_ATTRIBUTES, "=x", "empty key"),
            (env::CLIENT_CERTIFICATE, "/c.pem", "set OTEL_EXPORTER_OTLP_CLIENT_KEY too"),
            (env::CLIENT_KEY, "/c.key", "set OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE too"),
        ] {
            let err = with(&[(var, value)]).unwrap_err().to_string();
            assert!(err.starts_with(var), "{err}");
            assert!(err.contains(needle), "{err}");
            assert!(!err.contains('\n'));
        }
        assert!(with(&[(env::SDK_DISABLED, "true")]).unwrap().disabled);
    }

    #[test]
    fn tls_files_come_from_the_generic_or_the_traces_variables() {
        let c = with(&[
            (env::CERTIFICATE, "/generic/ca.pem"),
            (env::TRACES_CERTIFICATE, "/traces/ca.pem"),
            (env::CLIENT_CERTIFICATE, "/c.pem"),
            (env::CLIENT_KEY, "/c.key"),
        ])
        .unwrap();
        assert_eq!(c.certificate, Some(PathBuf::from("/traces/ca.pem")));
        assert_eq!(c.client_certificate, Some((PathBuf::from("/c.pem"), PathBuf::from("/c.key"))));
        assert_eq!(with(&[]).unwrap().certificate, None);
    }

    #[test]
    fn per_signal_settings_temporality_traces_exporter_and_insecure_are_read_and_checked() {
        let c = with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-m=1"),
            ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "250"),
            ("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "gzip"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ])
        .unwrap();
        assert_eq!(c.metrics_signal.headers, vec![("x-m".to_owned(), "1".to_owned())]);
        assert!(c.headers.is_empty(), "metrics headers stay with metrics");
        assert_eq!(c.logs_signal.protocol, Some(Protocol::HttpJson));
        assert_eq!(c.metrics_signal.timeout, Some(Duration::from_millis(250)));
        assert_eq!(c.logs_signal.gzip, Some(true));
        assert_eq!(c.metric_temporality, Some(crate::metrics::Temporality::Delta));
        assert_eq!(c.traces_exporter, Some(TracesExporter::None));
        for (var, value, said) in [
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes", "cumulative, delta or lowmemory"),
            ("OTEL_TRACES_EXPORTER", "zipkin", "otlp, none or console"),
            ("OTEL_EXPORTER_OTLP_INSECURE", "yes", "true or false"),
            ("OTEL_EXPORTER_OTLP_LOGS_COMPRESSION", "zstd", "gzip or none"),
            ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc", "gRPC exactly when traces use gRPC"),
        ] {
            let err = with(&[(var, value)]).unwrap_err().to_string();
            assert!(err.starts_with(var) && err.contains(said), "{err}");
        }
        let grpc = |insecure: &str| {
            with(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
                ("OTEL_EXPORTER_OTLP_INSECURE", insecure),
            ])
            .unwrap()
            .endpoint()
        };
        assert_eq!(grpc("true"), "http://collector:4317");
        assert_eq!(grpc("false"), "https://collector:4317");
    }
}
