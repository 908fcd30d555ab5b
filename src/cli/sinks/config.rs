//! OTLP and Sentry configuration from flags and the environment (flags win), checked.

use crate::cli::CliError;
use crate::cli::args::OtlpArgs;

use crate::cli::setup::env_set;

/// The OTLP configuration, when export is asked for by `--otlp` or an `OTEL_*` endpoint variable.
/// Flags win over the environment; malformed values are one-line errors naming the culprit.
pub fn otlp(args: &OtlpArgs) -> Result<Option<pi_observe::otel::OtlpConfig>, CliError> {
    use pi_observe::otel::{Conventions, OtlpConfig, Protocol, names::env};
    trace_url_template()?;
    let env_endpoint = [env::ENDPOINT, env::TRACES_ENDPOINT].iter().any(|v| env_set(v));
    if args.otlp.is_none() && !env_endpoint {
        // Flags that only shape OTLP export would silently do nothing.
        let given = [
            ("--otlp-protocol", args.otlp_protocol.is_some()),
            ("--otlp-header", !args.otlp_header.is_empty()),
            ("--service-name", args.service_name.is_some()),
            ("--conventions", args.conventions.is_some()),
            ("--metric-dims", !args.metric_dims.is_empty()),
            ("--otlp-logs", args.otlp_logs),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
            return Err(CliError::Usage(format!(
                "{flag}: no OTLP sink to apply it to (give --otlp or set {})",
                env::ENDPOINT
            )));
        }
        return Ok(None);
    }
    let mut config = OtlpConfig::default();
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
                .is_some_and(|p| p.trim() == "grpc"));
    if let Some(endpoint) = args.otlp.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        pi_observe::otel::check_url(endpoint).map_err(|why| CliError::Usage(format!("--otlp: {why}")))?;
        // gRPC takes the collector address as it is; HTTP wants the signal path.
        let full = if grpc || endpoint.trim_end_matches('/').ends_with("/v1/traces") {
            endpoint.to_owned()
        } else {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        };
        config.traces_endpoint = Some(full);
    }
    for (name, value) in &args.otlp_header {
        pi_observe::otel::check_header(name, value).map_err(|why| CliError::Usage(format!("--otlp-header: {why}")))?;
    }
    config.headers = args.otlp_header.clone();
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
        config.metric_dims = Some(metric_dims(&args.metric_dims)?);
    }
    let config = config.with_process_env().map_err(|e| CliError::Usage(e.to_string()))?;
    Ok((!config.disabled).then_some(config))
}

/// Variable with a link template for printed trace ids, e.g. `http://localhost:16686/trace/{trace_id}`.
pub const TRACE_URL_TEMPLATE: &str = "PI_TRACE_URL_TEMPLATE";

/// `PI_TRACE_URL_TEMPLATE`, when set: it must contain `{trace_id}`.
pub fn trace_url_template() -> Result<Option<String>, CliError> {
    match std::env::var(TRACE_URL_TEMPLATE) {
        Ok(t) if t.trim().is_empty() => Ok(None),
        Ok(t) if t.contains("{trace_id}") => Ok(Some(t)),
        Ok(_) => Err(CliError::Usage(format!("{TRACE_URL_TEMPLATE}: has no {{trace_id}} placeholder"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(CliError::Usage(format!("{TRACE_URL_TEMPLATE}: not valid UTF-8")))
        }
    }
}

/// `--metric-dims`: attribution keys (letters, digits, `_ . -`), or `none` alone.
fn metric_dims(items: &[String]) -> Result<Vec<String>, CliError> {
    let given = items.join(",");
    if items.len() == 1 && items[0].trim() == "none" {
        return Ok(Vec::new());
    }
    let mut dims = Vec::new();
    for item in items {
        let key = item.trim();
        if key.is_empty() {
            return Err(CliError::Usage(format!("--metric-dims: {given:?} has an empty key")));
        }
        if key == "none" {
            return Err(CliError::Usage(format!("--metric-dims: {given:?}: `none` cannot be combined with keys")));
        }
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(CliError::Usage(format!(
                "--metric-dims: {key:?} is not an attribution key (letters, digits, _ . -)"
            )));
        }
        if !dims.iter().any(|d| d == key) {
            dims.push(key.to_owned());
        }
    }
    Ok(dims)
}

/// The Sentry settings from `--sentry [DSN]` and `SENTRY_*`; `None` when neither asks for Sentry.
pub fn sentry(flag: Option<&str>) -> Result<Option<pi_observe::sentry::SentryConfig>, CliError> {
    use pi_observe::sentry::SentryConfig;
    if flag.is_none() && !env_set("SENTRY_DSN") {
        return Ok(None);
    }
    let mut config = SentryConfig::default();
    if let Some(dsn) = flag.map(str::trim).filter(|d| !d.is_empty()) {
        config.dsn = Some(dsn.to_owned());
        config.dsn_source = Some("--sentry".into());
    }
    config.from_env().map(Some).map_err(|e| CliError::Usage(e.to_string()))
}

/// Variable that moves the spool.
pub const SPOOL_DIR_VAR: &str = "PI_SPOOL_DIR";
/// Variable with the spool's size cap in bytes.
pub const SPOOL_MAX_BYTES_VAR: &str = "PI_SPOOL_MAX_BYTES";
/// Variable with the spool's age cap in days.
pub const SPOOL_MAX_AGE_VAR: &str = "PI_SPOOL_MAX_AGE_DAYS";

/// The spool and where its directory came from (`--spool-dir`, `PI_SPOOL_DIR`, default), or
/// `None` with `--no-spool` (or when there is no home directory to put it in).
pub fn spool(
    dir: Option<&std::path::Path>,
    off: bool,
) -> Result<Option<(pi_observe::spool::SpoolConfig, &'static str)>, CliError> {
    use pi_observe::spool::SpoolConfig;
    if off {
        return Ok(None);
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let (dir, source) = match (dir, std::env::var_os(SPOOL_DIR_VAR).filter(|d| !d.is_empty())) {
        (Some(dir), _) if dir.as_os_str().is_empty() => {
            return Err(CliError::Usage("--spool-dir: the path is empty".into()));
        }
        (Some(dir), _) => (dir.to_owned(), "flag --spool-dir"),
        (None, Some(dir)) => (crate::cli::paths::expand_home(dir.into(), home.as_ref()), "env PI_SPOOL_DIR"),
        (None, None) => match crate::cli::paths::agent_dir() {
            Some(agent) => (agent.join("spool"), "default"),
            None => return Ok(None),
        },
    };
    let mut config = SpoolConfig::new(dir);
    if let Some(raw) = std::env::var(SPOOL_MAX_BYTES_VAR).ok().filter(|v| !v.trim().is_empty()) {
        config.max_bytes = raw.trim().parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            CliError::Usage(format!("{SPOOL_MAX_BYTES_VAR}: {raw:?} is not a positive whole number of bytes"))
        })?;
    }
    if let Some(raw) = std::env::var(SPOOL_MAX_AGE_VAR).ok().filter(|v| !v.trim().is_empty()) {
        let days =
            raw.trim().parse::<f64>().ok().filter(|d| d.is_finite() && *d > 0.0 && *d <= 3650.0).ok_or_else(|| {
                CliError::Usage(format!("{SPOOL_MAX_AGE_VAR}: {raw:?} is not a number of days between 0 and 3650"))
            })?;
        config.max_age = std::time::Duration::from_secs_f64(days * 86_400.0);
    }
    Ok(Some((config, source)))
}
