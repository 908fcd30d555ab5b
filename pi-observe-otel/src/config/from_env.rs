//! `OtlpConfig::with_env`: the `OTEL_*` variables (per-signal ones over generic ones), each
//! malformed value an error naming its variable.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::names::env;

impl OtlpConfig {
    /// Reads the process environment for everything code left unset.
    pub fn with_process_env(self) -> Result<Self, ConfigError> {
        self.with_env(|name| std::env::var(name).ok())
    }

    /// Fills unset fields from `lookup` (the `OTEL_*` variables; per-signal ones win over
    /// generic ones). Malformed values are errors naming the variable. Each field has its own
    /// resolver below, which says its variables in order of precedence; a value set in code wins
    /// over all of them.
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut vars = Vars { lookup: &lookup, grpc_scheme: None };
        if resolve_disabled(&vars)? {
            self.disabled = true;
        }
        if self.protocol.is_none() {
            self.protocol = resolve_protocol(&vars, &[env::TRACES_PROTOCOL, env::PROTOCOL])?;
        }
        let grpc = self.protocol == Some(Protocol::Grpc);
        let insecure = resolve_insecure(&vars)?;
        if grpc {
            // gRPC collectors are often given as `host:port`: the scheme follows `…_INSECURE`.
            vars.grpc_scheme = Some(if insecure == Some(true) { "http" } else { "https" });
        }
        if self.traces_endpoint.is_none() {
            self.traces_endpoint = resolve_traces_endpoint(&vars, grpc)?;
        }
        for var in [env::HEADERS, env::TRACES_HEADERS] {
            resolve_headers(&vars, var, &mut self.headers)?;
        }
        fill(&mut self.timeout, &vars, &[env::TRACES_TIMEOUT, env::TIMEOUT, env::BSP_EXPORT_TIMEOUT], millis)?;
        fill(&mut self.gzip, &vars, &[env::TRACES_COMPRESSION, env::COMPRESSION], gzip)?;
        if self.service_name.is_none() {
            self.service_name = vars.get(env::SERVICE_NAME).map(|s| s.trim().to_owned());
        }
        resolve_resource_attributes(&vars, &mut self.resource_attributes)?;
        fill(&mut self.max_queue_size, &vars, &[env::BSP_MAX_QUEUE_SIZE], count)?;
        fill(&mut self.max_export_batch_size, &vars, &[env::BSP_MAX_EXPORT_BATCH_SIZE], count)?;
        fill(&mut self.schedule_delay, &vars, &[env::BSP_SCHEDULE_DELAY], millis)?;
        if self.parent_based.is_none() {
            self.parent_based = vars.get(env::TRACES_SAMPLER).map(|name| name.trim().starts_with("parentbased_"));
        }
        if self.sample_ratio.is_none() {
            self.sample_ratio = sampler(vars.get(env::TRACES_SAMPLER), vars.get(env::TRACES_SAMPLER_ARG))?;
        }
        fill(&mut self.latest_genai, &vars, &[env::SEMCONV_STABILITY_OPT_IN], latest_genai)?;
        fill(&mut self.metrics, &vars, &[env::METRICS_EXPORTER], otlp_or_none)?;
        if self.metrics_endpoint.is_none() {
            self.metrics_endpoint = resolve_signal_endpoint(&vars, env::METRICS_ENDPOINT, "metrics", grpc)?;
        }
        fill(&mut self.logs, &vars, &[env::LOGS_EXPORTER], otlp_or_none)?;
        if self.logs_endpoint.is_none() {
            self.logs_endpoint = resolve_signal_endpoint(&vars, env::LOGS_ENDPOINT, "logs", grpc)?;
        }
        fill(&mut self.metric_interval, &vars, &[env::METRIC_EXPORT_INTERVAL], millis)?;
        fill(&mut self.metric_temporality, &vars, &[env::METRICS_TEMPORALITY_PREFERENCE], temporality)?;
        fill(&mut self.traces_exporter, &vars, &[env::TRACES_EXPORTER], traces_exporter)?;
        resolve_signal(&vars, &mut self.metrics_signal, METRICS_VARS, grpc)?;
        resolve_signal(&vars, &mut self.logs_signal, LOGS_VARS, grpc)?;
        if self.certificate.is_none() {
            self.certificate = path(&vars, [env::TRACES_CERTIFICATE, env::CERTIFICATE]).map(|(_, p)| p);
        }
        if self.client_certificate.is_none() {
            self.client_certificate = resolve_client_certificate(&vars)?;
        }
        Ok(self)
    }
}

/// The variables as `with_env` reads them: blank counts as unset, and with gRPC an endpoint
/// without a scheme gets one.
struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The scheme a gRPC `host:port` endpoint gets (`OTEL_EXPORTER_OTLP_INSECURE`).
    grpc_scheme: Option<&'static str>,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        let raw = (self.lookup)(name).filter(|v| !v.trim().is_empty())?;
        match self.grpc_scheme {
            Some(scheme) if name.ends_with("_ENDPOINT") && !raw.contains("://") => {
                Some(format!("{scheme}://{}", raw.trim()))
            }
            _ => Some(raw),
        }
    }
}

/// The first of `names` that is set, parsed by `parse` (its errors name the variable).
fn first<T>(
    vars: &Vars<'_>,
    names: &[&'static str],
    parse: fn(&str, &str) -> Result<T, ConfigError>,
) -> Result<Option<T>, ConfigError> {
    names.iter().find_map(|name| vars.get(name).map(|raw| parse(name, &raw))).transpose()
}

/// Sets `slot`, when code left it unset, from the first of `names` that is set.
fn fill<T>(
    slot: &mut Option<T>,
    vars: &Vars<'_>,
    names: &[&'static str],
    parse: fn(&str, &str) -> Result<T, ConfigError>,
) -> Result<(), ConfigError> {
    if slot.is_none() {
        *slot = first(vars, names, parse)?;
    }
    Ok(())
}

/// `OTEL_SDK_DISABLED`: `true` turns every signal off.
fn resolve_disabled(vars: &Vars<'_>) -> Result<bool, ConfigError> {
    Ok(first(vars, &[env::SDK_DISABLED], boolean)?.unwrap_or(false))
}

/// The protocol: the first of `names` set (the signal's own variable, then the generic one).
fn resolve_protocol(vars: &Vars<'_>, names: &[&'static str]) -> Result<Option<Protocol>, ConfigError> {
    first(vars, names, |var, raw| {
        Protocol::parse(raw)
            .ok_or_else(|| ConfigError::new(var, format!("{raw:?} is not grpc, http/protobuf or http/json")))
    })
}

/// `OTEL_EXPORTER_OTLP_TRACES_INSECURE`, then `OTEL_EXPORTER_OTLP_INSECURE`: plain-text gRPC.
fn resolve_insecure(vars: &Vars<'_>) -> Result<Option<bool>, ConfigError> {
    first(vars, &[env::TRACES_INSECURE, env::INSECURE], boolean)
}

/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, then `OTEL_EXPORTER_OTLP_ENDPOINT` with the
/// traces path added (over gRPC: the collector address as it is).
fn resolve_traces_endpoint(vars: &Vars<'_>, grpc: bool) -> Result<Option<String>, ConfigError> {
    if let Some(raw) = vars.get(env::TRACES_ENDPOINT) {
        return url(env::TRACES_ENDPOINT, &raw).map(Some);
    }
    let Some(raw) = vars.get(env::ENDPOINT) else { return Ok(None) };
    let base = url(env::ENDPOINT, &raw)?;
    Ok(Some(if grpc { base } else { super::signal_url(&base, "traces") }))
}

/// The signal's own endpoint variable as it is, then `OTEL_EXPORTER_OTLP_ENDPOINT` with the
/// signal's path added (over gRPC: the collector address every signal goes to).
fn resolve_signal_endpoint(
    vars: &Vars<'_>,
    var: &'static str,
    signal: &str,
    grpc: bool,
) -> Result<Option<String>, ConfigError> {
    match (vars.get(var), vars.get(env::ENDPOINT)) {
        (Some(raw), _) => url(var, &raw).map(Some),
        (None, Some(raw)) if grpc => url(env::ENDPOINT, &raw).map(Some),
        (None, Some(raw)) => Ok(Some(super::signal_url(&url(env::ENDPOINT, &raw)?, signal))),
        (None, None) => Ok(None),
    }
}

/// Headers from `var` (`key=value,…`, percent-decoded), added to `headers` unless a header of
/// that name (in any case) is already there: code first, then the variables in call order.
fn resolve_headers(vars: &Vars<'_>, var: &'static str, headers: &mut Vec<(String, String)>) -> Result<(), ConfigError> {
    let Some(raw) = vars.get(var) else { return Ok(()) };
    for (k, v) in parse_pairs(var, &raw)? {
        check_header(&k, &v).map_err(|why| ConfigError::new(var, why))?;
        if !headers.iter().any(|(existing, _)| existing.eq_ignore_ascii_case(&k)) {
            headers.push((k, v));
        }
    }
    Ok(())
}

/// `OTEL_RESOURCE_ATTRIBUTES`, added under the attributes set in code.
fn resolve_resource_attributes(vars: &Vars<'_>, attributes: &mut Vec<(String, String)>) -> Result<(), ConfigError> {
    let Some(raw) = vars.get(env::RESOURCE_ATTRIBUTES) else { return Ok(()) };
    for (k, v) in parse_pairs(env::RESOURCE_ATTRIBUTES, &raw)? {
        if !attributes.iter().any(|(existing, _)| existing == &k) {
            attributes.push((k, v));
        }
    }
    Ok(())
}

/// A signal's own variables: headers, protocol, timeout, compression, certificate.
type SignalVars = [&'static str; 5];

const METRICS_VARS: SignalVars = [
    env::METRICS_HEADERS,
    env::METRICS_PROTOCOL,
    env::METRICS_TIMEOUT,
    env::METRICS_COMPRESSION,
    env::METRICS_CERTIFICATE,
];

const LOGS_VARS: SignalVars =
    [env::LOGS_HEADERS, env::LOGS_PROTOCOL, env::LOGS_TIMEOUT, env::LOGS_COMPRESSION, env::LOGS_CERTIFICATE];

/// The metrics or logs exporter's own settings (`OTEL_EXPORTER_OTLP_{METRICS,LOGS}_*`), over
/// the traces ones. Its protocol must be gRPC exactly when the traces' is (one transport).
fn resolve_signal(
    vars: &Vars<'_>,
    settings: &mut SignalSettings,
    [headers, protocol, timeout, compression, certificate]: SignalVars,
    grpc: bool,
) -> Result<(), ConfigError> {
    resolve_headers(vars, headers, &mut settings.headers)?;
    if settings.protocol.is_none() {
        settings.protocol = resolve_protocol(vars, &[protocol])?;
    }
    fill(&mut settings.timeout, vars, &[timeout], millis)?;
    fill(&mut settings.gzip, vars, &[compression], gzip)?;
    if settings.certificate.is_none() {
        settings.certificate = vars.get(certificate).map(|p| PathBuf::from(p.trim()));
    }
    if settings.protocol.is_some_and(|p| (p == Protocol::Grpc) != grpc) {
        return Err(ConfigError::new(
            protocol,
            "must be gRPC exactly when traces use gRPC (one transport per exporter)".to_owned(),
        ));
    }
    Ok(())
}

/// The first of `names` set, as a path, with the variable that set it.
fn path(vars: &Vars<'_>, names: [&'static str; 2]) -> Option<(&'static str, PathBuf)> {
    names.into_iter().find_map(|v| vars.get(v).map(|p| (v, PathBuf::from(p.trim()))))
}

/// The client certificate and key for mutual TLS: `…_TRACES_CLIENT_CERTIFICATE` then
/// `…_CLIENT_CERTIFICATE`, with `…_TRACES_CLIENT_KEY` then `…_CLIENT_KEY`; one without the
/// other is an error.
fn resolve_client_certificate(vars: &Vars<'_>) -> Result<Option<(PathBuf, PathBuf)>, ConfigError> {
    match (
        path(vars, [env::TRACES_CLIENT_CERTIFICATE, env::CLIENT_CERTIFICATE]),
        path(vars, [env::TRACES_CLIENT_KEY, env::CLIENT_KEY]),
    ) {
        (Some((_, cert)), Some((_, key))) => Ok(Some((cert, key))),
        (Some((var, _)), None) => Err(ConfigError::new(var, format!("set {} too", env::CLIENT_KEY))),
        (None, Some((var, _))) => Err(ConfigError::new(var, format!("set {} too", env::CLIENT_CERTIFICATE))),
        (None, None) => Ok(None),
    }
}

fn boolean(setting: &str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::new(setting, format!("{raw:?} is not true or false"))),
    }
}

/// `OTEL_SEMCONV_STABILITY_OPT_IN`: whether it lists `gen_ai_latest_experimental`.
fn latest_genai(_setting: &str, raw: &str) -> Result<bool, ConfigError> {
    Ok(raw.split(',').any(|v| v.trim() == crate::names::GEN_AI_LATEST_EXPERIMENTAL))
}

/// `OTEL_METRICS_EXPORTER` / `OTEL_LOGS_EXPORTER`: `otlp` or `none`.
fn otlp_or_none(setting: &str, raw: &str) -> Result<bool, ConfigError> {
    match raw.trim() {
        "none" => Ok(false),
        "otlp" => Ok(true),
        other => Err(ConfigError::new(setting, format!("{other:?} is not otlp or none"))),
    }
}

fn temporality(setting: &str, raw: &str) -> Result<crate::metrics::Temporality, ConfigError> {
    crate::metrics::Temporality::parse(raw)
        .ok_or_else(|| ConfigError::new(setting, format!("{raw:?} is not cumulative, delta or lowmemory")))
}

fn traces_exporter(setting: &str, raw: &str) -> Result<TracesExporter, ConfigError> {
    match raw.trim() {
        "otlp" => Ok(TracesExporter::Otlp),
        "none" => Ok(TracesExporter::None),
        "console" => Ok(TracesExporter::Console),
        other => Err(ConfigError::new(setting, format!("{other:?} is not otlp, none or console"))),
    }
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

/// A sampler by one of `OTEL_TRACES_SAMPLER`'s names with its ratio argument, as set somewhere
/// other than the environment (a settings file): `(keep ratio, parent based)`.
pub fn sampler_setting(name: &str, arg: Option<f64>) -> Result<(f64, bool), ConfigError> {
    let ratio = sampler(Some(name.to_owned()), arg.map(|a| a.to_string()))?.unwrap_or(1.0);
    Ok((ratio, name.trim().starts_with("parentbased_")))
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
        // The signal path goes on the path, before a query string.
        let q = with(&[(env::ENDPOINT, "https://c/otlp/?api-key=k")]).unwrap();
        assert_eq!(q.endpoint(), "https://c/otlp/v1/traces?api-key=k");
        assert_eq!(q.metrics_endpoint(), "https://c/otlp/v1/metrics?api-key=k");
        let full = OtlpConfig { traces_endpoint: Some("http://c:1/v1/traces?k=v".into()), ..OtlpConfig::default() };
        assert_eq!(full.logs_endpoint(), "http://c:1/v1/logs?k=v");
        assert_eq!(super::super::traces_url_base("http://c:1/x/v1/traces/?k=v").as_deref(), Some("http://c:1/x?k=v"));
        assert_eq!(super::super::traces_url_base("http://c:1/x"), None);
        // Over gRPC every signal goes to the collector address.
        let grpc = with(&[(env::ENDPOINT, "http://c:4317"), (env::PROTOCOL, "grpc")]).unwrap();
        assert_eq!((grpc.endpoint(), grpc.metrics_endpoint()), ("http://c:4317".into(), "http://c:4317".into()));
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
