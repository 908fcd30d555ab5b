//! The OTLP sink's configuration from the managed policy, flags, the environment and the settings
//! files (in that order of precedence), checked.

use pi_observe::otel::names::env;
use pi_observe::otel::{Conventions, OtlpConfig, Protocol};

use serde::Deserialize;

use crate::cli::CliError;
use crate::cli::config::keys::{self, sampler};
use crate::cli::config::telemetry::Headers;
use crate::cli::config::{Config, env_set};
use crate::cli::settings::sink_section;
use crate::cli::sinks::OtlpArgs;

/// `telemetry.sinks.otlp`, as each settings file writes it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    enabled: Option<bool>,
    endpoint: Option<String>,
    protocol: Option<ProtocolName>,
    headers: Option<Headers>,
    service_name: Option<String>,
    conventions: Option<ConventionsName>,
    metrics: Option<bool>,
    metric_dims: Option<Vec<String>>,
    logs: Option<bool>,
    capture: Option<Vec<String>>,
    resource_attributes: Option<std::collections::BTreeMap<String, String>>,
}

sink_section!(Settings);

#[derive(Debug, Clone, Copy, Deserialize)]
enum ProtocolName {
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "http/json")]
    HttpJson,
    #[serde(rename = "grpc")]
    Grpc,
}

impl From<ProtocolName> for Protocol {
    fn from(name: ProtocolName) -> Protocol {
        match name {
            ProtocolName::HttpProtobuf => Protocol::HttpProtobuf,
            ProtocolName::HttpJson => Protocol::HttpJson,
            ProtocolName::Grpc => Protocol::Grpc,
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ConventionsName {
    Genai,
    Openinference,
    Both,
}

impl From<ConventionsName> for Conventions {
    fn from(name: ConventionsName) -> Conventions {
        match name {
            ConventionsName::Genai => Conventions::GenAi,
            ConventionsName::Openinference => Conventions::OpenInference,
            ConventionsName::Both => Conventions::Both,
        }
    }
}

/// The sink's settings keys, each read from a file's typed `telemetry.sinks.otlp`.
pub mod key {
    use super::*;
    use crate::cli::config::Key;

    fn otlp(file: &crate::cli::settings::SettingsFile) -> Option<&Settings> {
        file.sink::<Settings>("otlp")
    }

    /// Where the sink sends: set by the managed policy, it pins the sink.
    pub const ENDPOINT: Key<String> =
        Key { path: &["telemetry", "sinks", "otlp", "endpoint"], read: |f| otlp(f)?.endpoint.clone() };
    /// `protocol`.
    pub const PROTOCOL: Key<Protocol> =
        Key { path: &["telemetry", "sinks", "otlp", "protocol"], read: |f| otlp(f)?.protocol.map(Protocol::from) };
    /// `headers`.
    pub const HEADERS: Key<Headers> =
        Key { path: &["telemetry", "sinks", "otlp", "headers"], read: |f| otlp(f)?.headers.clone() };
    /// `serviceName`.
    pub const SERVICE_NAME: Key<String> =
        Key { path: &["telemetry", "sinks", "otlp", "serviceName"], read: |f| otlp(f)?.service_name.clone() };
    /// `conventions`.
    pub const CONVENTIONS: Key<Conventions> = Key {
        path: &["telemetry", "sinks", "otlp", "conventions"],
        read: |f| otlp(f)?.conventions.map(Conventions::from),
    };
    /// `metrics`.
    pub const METRICS: Key<bool> = Key { path: &["telemetry", "sinks", "otlp", "metrics"], read: |f| otlp(f)?.metrics };
    /// `metricDims`.
    pub const METRIC_DIMS: Key<Vec<String>> =
        Key { path: &["telemetry", "sinks", "otlp", "metricDims"], read: |f| otlp(f)?.metric_dims.clone() };
    /// `logs`.
    pub const LOGS: Key<bool> = Key { path: &["telemetry", "sinks", "otlp", "logs"], read: |f| otlp(f)?.logs };
    /// `resourceAttributes`: extra resource attributes (`deployment.environment.name`, …).
    pub const RESOURCE_ATTRIBUTES: Key<std::collections::BTreeMap<String, String>> = Key {
        path: &["telemetry", "sinks", "otlp", "resourceAttributes"],
        read: |f| otlp(f)?.resource_attributes.clone(),
    };
}

/// The OTLP variables a pinned sink ignores: its destination, protocol, headers and on/off
/// switch belong to the managed policy.
const PINNED_VARS: &[&str] = &[
    env::SDK_DISABLED,
    env::ENDPOINT,
    env::TRACES_ENDPOINT,
    env::METRICS_ENDPOINT,
    env::LOGS_ENDPOINT,
    env::PROTOCOL,
    env::TRACES_PROTOCOL,
    env::METRICS_PROTOCOL,
    env::LOGS_PROTOCOL,
    env::HEADERS,
    env::TRACES_HEADERS,
    env::METRICS_HEADERS,
    env::LOGS_HEADERS,
];

/// The OTLP configuration, when export is asked for by `--otlp`, an `OTEL_*` endpoint variable,
/// `telemetry.sinks.otlp` in a settings file, or the managed policy. Precedence per value:
/// managed > flag > environment > project > global > default; a sink the managed policy pins
/// keeps its destination, protocol and headers whatever the flags and variables say.
/// Malformed values are one-line errors naming the flag, variable or key path.
pub fn resolve(args: &OtlpArgs, cfg: &Config) -> Result<Option<OtlpConfig>, CliError> {
    crate::cli::sinks::trace_link::trace_url_template()?;
    let pinned = cfg.pinned(&key::ENDPOINT);
    let env_endpoint = pinned.is_none() && [env::ENDPOINT, env::TRACES_ENDPOINT].iter().any(|v| env_set(v));
    if args.otlp.is_none() && !env_endpoint && !cfg.sink_in_files("otlp", &key::ENDPOINT) {
        return no_otlp(args);
    }
    let mut config = OtlpConfig::default();
    match pinned {
        Some(managed) => {
            pinned_destination(args, cfg, managed);
            config.headers = cfg.headers(&key::HEADERS, true)?;
        }
        None => flag_destination(&mut config, args, cfg)?,
    }
    shaping_flags(&mut config, args)?;
    // A pinned sink's destination variables are not read: the managed policy's values stand.
    let lookup = |name: &str| {
        let ignored = pinned.is_some() && PINNED_VARS.contains(&name);
        std::env::var(name).ok().filter(|v| !ignored && !v.trim().is_empty())
    };
    settings_below_env(&mut config, cfg, &lookup)?;
    let mut config = config.with_env(lookup).map_err(|e| CliError::Usage(e.to_string()))?;
    config.service_version = Some(env!("CARGO_PKG_VERSION").to_owned());
    // Below `OTEL_RESOURCE_ATTRIBUTES`: the first of a key wins.
    if let Some((extra, _)) = cfg.find(&key::RESOURCE_ATTRIBUTES) {
        config.resource_attributes.extend(extra);
    }
    if pinned.is_none() {
        for (name, value) in cfg.headers(&key::HEADERS, false)? {
            if !config.headers.iter().any(|(existing, _)| existing.eq_ignore_ascii_case(&name)) {
                config.headers.push((name, value));
            }
        }
    }
    apply_sink_settings(&mut config, args, cfg)?;
    Ok((!config.disabled).then_some(config))
}

/// No OTLP sink: fine, unless a flag that only shapes OTLP export was given (it would silently
/// do nothing).
fn no_otlp(args: &OtlpArgs) -> Result<Option<OtlpConfig>, CliError> {
    let given = [
        ("--otlp-protocol", args.otlp_protocol.is_some()),
        ("--otlp-header", !args.otlp_header.is_empty()),
        ("--service-name", args.service_name.is_some()),
        ("--conventions", args.conventions.is_some()),
        ("--metric-dims", !args.metric_dims.is_empty()),
        ("--otlp-logs", args.otlp_logs),
    ];
    match given.iter().find(|(_, given)| *given) {
        Some((flag, _)) => {
            Err(CliError::Usage(format!("{flag}: no OTLP sink to apply it to (give --otlp or set {})", env::ENDPOINT)))
        }
        None => Ok(None),
    }
}

/// The managed policy pins the destination: flags and variables that would move it are said
/// to be ignored, once.
fn pinned_destination(args: &OtlpArgs, cfg: &Config, managed: &crate::cli::settings::SettingsFile) {
    let flag_endpoint = args.otlp.as_deref().map(str::trim).filter(|e| !e.is_empty());
    let overridden: Vec<&str> = [
        ("--otlp", flag_endpoint.is_some()),
        ("--otlp-protocol", args.otlp_protocol.is_some()),
        ("--otlp-header", !args.otlp_header.is_empty()),
    ]
    .iter()
    .filter(|(_, given)| *given)
    .map(|(flag, _)| *flag)
    .chain(PINNED_VARS.iter().copied().filter(|v| env_set(v)))
    .collect();
    if !overridden.is_empty() {
        cfg.notice(format!(
            "the managed policy {} pins the OTLP sink: {} ignored",
            managed.path.display(),
            overridden.join(", ")
        ));
    }
}

/// `--otlp` (a base URL, or a full traces URL; a gRPC collector address as it is),
/// `--otlp-protocol` and `--otlp-header`, checked.
fn flag_destination(config: &mut OtlpConfig, args: &OtlpArgs, cfg: &Config) -> Result<(), CliError> {
    if let Some(p) = &args.otlp_protocol {
        config.protocol = Some(Protocol::parse(p).ok_or_else(|| {
            CliError::Usage(format!("--otlp-protocol: {p:?} is not grpc, http/protobuf or http/json"))
        })?);
    }
    let grpc = config.protocol == Some(Protocol::Grpc)
        || (config.protocol.is_none()
            && [env::TRACES_PROTOCOL, env::PROTOCOL]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|p| !p.trim().is_empty()))
                .map(|p| p.trim() == "grpc")
                .or_else(|| cfg.settings.files().iter().find_map(key::PROTOCOL.read).map(|p| p == Protocol::Grpc))
                .unwrap_or(false));
    if let Some(endpoint) = args.otlp.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        pi_observe::otel::check_url(endpoint).map_err(|why| CliError::Usage(format!("--otlp: {why}")))?;
        // gRPC takes the collector address as it is; HTTP wants the signal path.
        let full = if grpc || pi_observe::otel::traces_url_base(endpoint).is_some() {
            endpoint.to_owned()
        } else {
            pi_observe::otel::signal_url(endpoint, "traces")
        };
        config.traces_endpoint = Some(full);
    }
    for (name, value) in &args.otlp_header {
        pi_observe::otel::check_header(name, value).map_err(|why| CliError::Usage(format!("--otlp-header: {why}")))?;
    }
    config.headers = args.otlp_header.clone();
    Ok(())
}

/// `--service-name`, `--conventions`, `--otlp-logs` and `--metric-dims`, checked.
fn shaping_flags(config: &mut OtlpConfig, args: &OtlpArgs) -> Result<(), CliError> {
    if let Some(name) = &args.service_name {
        if name.trim().is_empty() {
            return Err(CliError::Usage("--service-name: the name is empty".into()));
        }
        config.service_name = Some(name.trim().to_owned());
    }
    if let Some(c) = &args.conventions {
        config.conventions = Conventions::parse(c)
            .ok_or_else(|| CliError::Usage(format!("--conventions: {c:?} is not genai, openinference or both")))?;
    }
    if args.otlp_logs {
        config.logs = Some(true);
    }
    if !args.metric_dims.is_empty() {
        config.metric_dims = Some(metric_dims("--metric-dims", &args.metric_dims)?);
    }
    Ok(())
}

/// The settings files' endpoint, protocol, service name and sampler (and the managed policy's),
/// which sit below the environment: each applies when no flag set the value and none of its
/// variables (`lookup`) is set — the protocol under `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL`, the
/// endpoint (a base URL for every signal, or a full traces URL) under each signal's endpoint
/// variable and `OTEL_EXPORTER_OTLP_ENDPOINT`, the service name under `OTEL_SERVICE_NAME`, the
/// sampler under `OTEL_TRACES_SAMPLER`. Errors name the file and key path.
fn settings_below_env(
    config: &mut OtlpConfig,
    cfg: &Config,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), CliError> {
    let unset = |vars: &[&str]| vars.iter().all(|v| lookup(v).is_none());
    let protocol_vars = [env::TRACES_PROTOCOL, env::PROTOCOL];
    if config.protocol.is_none()
        && unset(&protocol_vars)
        && let Some((protocol, _)) = cfg.find(&key::PROTOCOL)
    {
        config.protocol = Some(protocol);
    }
    if let Some((endpoint, source)) = cfg.text(&key::ENDPOINT)? {
        let trimmed = endpoint.trim();
        pi_observe::otel::check_url(trimmed)
            .map_err(|why| CliError::Usage(format!("{}: {}: {why}", source.file(), key::ENDPOINT.dotted())))?;
        // Like `--otlp`, a full traces URL is accepted: the base is what precedes `/v1/traces`.
        let base = pi_observe::otel::traces_url_base(trimmed).unwrap_or_else(|| trimmed.to_owned());
        let env_protocol = protocol_vars.iter().find_map(|v| lookup(v));
        let grpc = config.protocol.map_or(env_protocol.is_some_and(|p| p.trim() == "grpc"), |p| p == Protocol::Grpc);
        let url = |signal: &str| if grpc { base.clone() } else { pi_observe::otel::signal_url(&base, signal) };
        for (slot, var, signal) in [
            (&mut config.traces_endpoint, env::TRACES_ENDPOINT, "traces"),
            (&mut config.metrics_endpoint, env::METRICS_ENDPOINT, "metrics"),
            (&mut config.logs_endpoint, env::LOGS_ENDPOINT, "logs"),
        ] {
            if slot.is_none() && unset(&[var, env::ENDPOINT]) {
                *slot = Some(url(signal));
            }
        }
    }
    if config.service_name.is_none()
        && unset(&[env::SERVICE_NAME])
        && let Some((name, _)) = cfg.text(&key::SERVICE_NAME)?
    {
        config.service_name = Some(name.trim().to_owned());
    }
    if unset(&[env::TRACES_SAMPLER])
        && let Some((name, file)) = cfg.find(&sampler::NAME)
    {
        // A ratio (0..1) by type: the settings check refused anything else.
        let arg = cfg.find(&sampler::ARG).map(|(arg, _)| arg);
        let (ratio, parent_based) = pi_observe::otel::sampler_setting(name.as_str(), arg)
            .map_err(|e| CliError::Usage(format!("{}: telemetry.sampler: {e}", file.path.display())))?;
        config.sample_ratio = Some(ratio);
        config.parent_based = Some(parent_based);
    }
    Ok(())
}

/// `conventions`, `metrics`, `metricDims` and `logs` of `telemetry.sinks.otlp`: below flags
/// and variables in the user's files, above them in the managed policy (reported once).
fn apply_sink_settings(config: &mut OtlpConfig, args: &OtlpArgs, cfg: &Config) -> Result<(), CliError> {
    // Each value by the one precedence (`Config::pick`); what a flag or variable set is in
    // `config` already, so only a managed or a file's value (`Picked::set`) is applied here.
    let flag = |given: bool, name: &'static str| given.then_some(name);
    if let Some(conventions) =
        cfg.pick(&key::CONVENTIONS, flag(args.conventions.is_some(), "--conventions"), &[]).and_then(|p| p.set())
    {
        config.conventions = conventions;
    }
    let dims_flag = flag(!args.metric_dims.is_empty(), "--metric-dims");
    let found = match cfg.pick(&key::METRIC_DIMS, dims_flag, &[]) {
        Some(picked) => picked.set().map(|items| (items, key::METRIC_DIMS.dotted())),
        None => cfg.find(&keys::METRIC_DIMENSIONS).map(|(items, _)| (items, keys::METRIC_DIMENSIONS.dotted())),
    };
    if let Some((items, culprit)) = found {
        config.metric_dims = Some(if items.is_empty() { Vec::new() } else { metric_dims(&culprit, &items)? });
    }
    let logs_flag = flag(args.otlp_logs, "--otlp-logs");
    if let Some(logs) = cfg.pick(&key::LOGS, logs_flag, &[env::LOGS_EXPORTER]).and_then(|p| p.set()) {
        config.logs = Some(logs);
    }
    if let Some(metrics) = cfg.pick(&key::METRICS, None, &[env::METRICS_EXPORTER]).and_then(|p| p.set()) {
        config.metrics = Some(metrics);
    }
    if cfg.pinned(&key::ENDPOINT).is_some() {
        config.disabled = false;
    }
    Ok(())
}

/// The metric dimensions by their span attribute names, and the attribution keys they carry.
const NAMED_DIMENSIONS: &[(&str, &str)] =
    &[("user.id", "userId"), ("organization.id", "orgId"), ("session.id", "session.id")];

/// `--metric-dims` (or the setting `culprit`): span attribute names (`user.id`,
/// `organization.id`, `session.id`) or attribution keys (`userId`, `orgId`, `teamId`…: a letter,
/// then letters and digits), or `none` alone. A name that is neither — `user`, `org`, an unknown
/// dotted name — is refused with the valid list (it would attribute nothing).
fn metric_dims(culprit: &str, items: &[String]) -> Result<Vec<String>, CliError> {
    let given = items.join(",");
    if items.len() == 1 && items[0].trim() == "none" {
        return Ok(Vec::new());
    }
    let mut dims = Vec::new();
    for item in items {
        let name = item.trim();
        if name.is_empty() {
            return Err(CliError::Usage(format!("{culprit}: {given:?} has an empty key")));
        }
        if name == "none" {
            return Err(CliError::Usage(format!("{culprit}: {given:?}: `none` cannot be combined with keys")));
        }
        let named = NAMED_DIMENSIONS.iter().find(|(attribute, key)| name == *attribute || name == *key);
        let key = match named {
            Some((_, key)) => *key,
            None if is_attribution_key(name) && !["user", "org", "organization", "session"].contains(&name) => name,
            None => {
                return Err(CliError::Usage(format!(
                    "{culprit}: {name:?} is not a metric dimension (valid: user.id or userId, organization.id or orgId, session.id, or an attribution key such as teamId)"
                )));
            }
        };
        if !dims.iter().any(|d| d == key) {
            dims.push(key.to_owned());
        }
    }
    Ok(dims)
}

/// An attribution key as `--context` takes it for a dimension: a letter, then letters, digits
/// and `_`.
fn is_attribution_key(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
