//! The OTLP sink's configuration from the managed policy, flags, the environment and the settings
//! files (in that order of precedence), checked.

use pi_observe::otel::names::env;
use pi_observe::otel::{Conventions, OtlpConfig, Protocol};

use crate::cli::CliError;
use crate::cli::config::env_set;
use crate::cli::config::telemetry::sink_key;
use crate::cli::config::{Config, Source};
use crate::cli::settings::Ratio;
use crate::cli::sinks::OtlpArgs;

/// Where the sink sends: set by the managed policy, it pins the sink.
pub const PINS: &str = "endpoint";

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
    let pinned = cfg.pinned("otlp", PINS);
    let env_endpoint = pinned.is_none() && [env::ENDPOINT, env::TRACES_ENDPOINT].iter().any(|v| env_set(v));
    if args.otlp.is_none() && !env_endpoint && !cfg.sink_in_files("otlp", PINS) {
        return no_otlp(args);
    }
    let mut config = OtlpConfig::default();
    match pinned {
        Some(managed) => {
            pinned_destination(args, cfg, managed);
            config.headers = cfg.headers(&sink_key("otlp", "headers"), true)?;
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
    if pinned.is_none() {
        for (name, value) in cfg.headers(&sink_key("otlp", "headers"), false)? {
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
                .or_else(|| cfg.settings.str(&sink_key("otlp", "protocol")).map(str::to_owned))
                .is_some_and(|p| p.trim() == "grpc"));
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
    let wrong = |source: &crate::cli::config::Source, key: &str, why: String| {
        CliError::Usage(format!("{}: telemetry.{key}: {why}", source.file()))
    };
    let protocol_vars = [env::TRACES_PROTOCOL, env::PROTOCOL];
    if config.protocol.is_none()
        && unset(&protocol_vars)
        && let Some((p, source)) = cfg.text(&sink_key("otlp", "protocol"))?
    {
        let protocol = Protocol::parse(&p).ok_or_else(|| {
            wrong(&source, "sinks.otlp.protocol", format!("{p:?} is not grpc, http/protobuf or http/json"))
        })?;
        config.protocol = Some(protocol);
    }
    if let Some((endpoint, source)) = cfg.text(&sink_key("otlp", "endpoint"))? {
        let trimmed = endpoint.trim();
        pi_observe::otel::check_url(trimmed).map_err(|why| wrong(&source, "sinks.otlp.endpoint", why))?;
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
        && let Some((name, _)) = cfg.text(&sink_key("otlp", "serviceName"))?
    {
        config.service_name = Some(name.trim().to_owned());
    }
    if unset(&[env::TRACES_SAMPLER])
        && let Some((name, source)) = cfg.text(&["telemetry", "sampler", "name"])?
    {
        // A ratio (0..1) by type: the settings check refused anything else.
        let arg = cfg.typed(|s| s.telemetry.as_ref()?.sampler.as_ref()?.arg).map(|Ratio(arg)| arg);
        let (ratio, parent_based) =
            pi_observe::otel::sampler_setting(&name, arg).map_err(|e| wrong(&source, "sampler", e.to_string()))?;
        config.sample_ratio = Some(ratio);
        config.parent_based = Some(parent_based);
    }
    Ok(())
}

/// `conventions`, `metrics`, `metricDims` and `logs` of `telemetry.sinks.otlp`: below flags
/// and variables in the user's files, above them in the managed policy (reported once).
fn apply_sink_settings(config: &mut OtlpConfig, args: &OtlpArgs, cfg: &Config) -> Result<(), CliError> {
    use serde_json::{Value, json};
    // Each value by the one precedence (`Config::pick`); what a flag or variable set is in
    // `config` already, so only a managed or a file's value is applied here.
    let setting = |field: &str, flag: Option<(&'static str, Value)>, vars: &[&str]| {
        let found = cfg.pick(&sink_key("otlp", field), flag, vars)?;
        (!matches!(found.source, Source::Flag(_) | Source::Env(_))).then_some(found.value)
    };
    let flag = args.conventions.clone().map(|c| ("--conventions", Value::String(c)));
    if let Some(value) = setting("conventions", flag, &[]) {
        config.conventions = Conventions::parse(value.as_str().unwrap_or_default()).unwrap_or_default();
    }
    let flag = (!args.metric_dims.is_empty()).then(|| ("--metric-dims", json!(args.metric_dims)));
    if let Some(value) = setting("metricDims", flag, &[]) {
        let items: Vec<String> =
            value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect();
        let dims = if items.is_empty() { Vec::new() } else { metric_dims("telemetry.sinks.otlp.metricDims", &items)? };
        config.metric_dims = Some(dims);
    }
    if let Some(value) =
        setting("logs", args.otlp_logs.then(|| ("--otlp-logs", Value::Bool(true))), &[env::LOGS_EXPORTER])
    {
        config.logs = value.as_bool();
    }
    if let Some(value) = setting("metrics", None, &[env::METRICS_EXPORTER]) {
        config.metrics = value.as_bool();
    }
    if cfg.pinned("otlp", PINS).is_some() {
        config.disabled = false;
    }
    Ok(())
}

/// `--metric-dims` (or the setting `culprit`): attribution keys (letters, digits, `_ . -`), or
/// `none` alone.
fn metric_dims(culprit: &str, items: &[String]) -> Result<Vec<String>, CliError> {
    let given = items.join(",");
    if items.len() == 1 && items[0].trim() == "none" {
        return Ok(Vec::new());
    }
    let mut dims = Vec::new();
    for item in items {
        let key = item.trim();
        if key.is_empty() {
            return Err(CliError::Usage(format!("{culprit}: {given:?} has an empty key")));
        }
        if key == "none" {
            return Err(CliError::Usage(format!("{culprit}: {given:?}: `none` cannot be combined with keys")));
        }
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(CliError::Usage(format!(
                "{culprit}: {key:?} is not an attribution key (letters, digits, _ . -)"
            )));
        }
        if !dims.iter().any(|d| d == key) {
            dims.push(key.to_owned());
        }
    }
    Ok(dims)
}
