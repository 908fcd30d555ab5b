//! Turning flags and environment into a policy, attribution, model, provider, tools and session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_agent::model::{Api, ModelInfo, Registry};
use pi_agent::provider::{self, FauxProvider, FauxResponse, HttpConfig, Provider};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;
use pi_observe::core::{Attribution, ContentKind, ContentPolicy, Scrubber, names};

use super::faux_script;
use super::{AgentArgs, CliError, ContentArgs, ObserveArgs, OtlpArgs};

/// `--capture` and `--redact` as a content policy.
pub fn policy(args: &ContentArgs) -> Result<ContentPolicy, CliError> {
    let (capture, redact) = (&args.capture, &args.redact);
    let mut policy = ContentPolicy::default();
    for kind in capture.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
        policy = match kind {
            "all" => policy.capture_all(),
            other => policy.capture(ContentKind::parse(other).ok_or_else(|| {
                let known: Vec<_> = ContentKind::ALL.iter().map(|k| k.as_str()).collect();
                CliError(format!("--capture: unknown kind {other:?} (expected {} or all)", known.join(", ")))
            })?),
        };
    }
    let mut scrubber = Scrubber::default();
    for pattern in redact {
        scrubber = scrubber
            .with_pattern(pattern)
            .map_err(|e| CliError(format!("--redact: invalid regex {pattern:?}: {}", one_line(&e.to_string()))))?;
    }
    Ok(policy.scrubber(scrubber))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `--user`, `--org`, `--context` (flags win over `PI_USER_ID` / `PI_ORG_ID`, which clap folds in).
pub fn attribution(args: &ObserveArgs) -> Attribution {
    let mut attribution = Attribution::new();
    if let Some(user) = args.user.as_deref().filter(|u| !u.is_empty()) {
        attribution = attribution.with(names::CTX_USER_ID, user);
    }
    if let Some(org) = args.org.as_deref().filter(|o| !o.is_empty()) {
        attribution = attribution.with(names::CTX_ORG_ID, org);
    }
    for (key, value) in &args.context {
        attribution = attribution.with(key.clone(), value.clone());
    }
    attribution
}

/// The chosen model and its provider.
pub struct Selected {
    pub model: ModelInfo,
    pub provider: Arc<dyn Provider>,
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// Picks the provider and model: explicit flags first; otherwise a configured key or base URL
/// selects a real provider, and with none of those the offline `faux` provider is used.
pub fn select(args: &AgentArgs, prompt: &str) -> Result<Selected, CliError> {
    let mut registry = Registry::builtin();
    if let Some(path) = &args.models {
        registry = registry.with_overrides(path).map_err(|e| CliError(format!("--models: {e}")))?;
    }
    let provider_name = match &args.provider {
        Some(p) => p.clone(),
        None if args.base_url.is_some() => "openai".to_owned(),
        None if env_set("ANTHROPIC_API_KEY") => "anthropic".to_owned(),
        None if env_set("OPENAI_API_KEY") => "openai".to_owned(),
        None => "faux".to_owned(),
    };
    let known_provider = registry.default_for(&provider_name).is_some();
    let model = match &args.model {
        Some(id) => match registry.find(&provider_name, id) {
            Some(model) => model.clone(),
            None if provider_name == "anthropic" => ModelInfo::unknown(&provider_name, id, Api::AnthropicMessages),
            None if provider_name == "faux" => ModelInfo::unknown(&provider_name, id, Api::Faux),
            None => ModelInfo::unknown(&provider_name, id, Api::OpenAiCompletions),
        },
        None => match registry.default_for(&provider_name) {
            Some(model) => model.clone(),
            None => {
                return Err(CliError(format!(
                    "--provider: unknown provider {provider_name:?}; give --model (and --base-url for an OpenAI-compatible server)"
                )));
            }
        },
    };
    if !known_provider && args.base_url.is_none() && model.base_url.is_none() && model.api == Api::OpenAiCompletions {
        return Err(CliError(format!("--provider {provider_name}: needs --base-url (or a baseUrl in --models)")));
    }
    if let Some(url) = &args.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(CliError(format!("--base-url: {url:?} is not an http(s) URL")));
        }
    }
    let provider: Arc<dyn Provider> = if model.api == Api::Faux {
        let faux = FauxProvider::new().chunk_delay(std::time::Duration::from_millis(1));
        match &args.faux_script {
            Some(path) => faux.push(faux_script::load(path)?),
            None => faux.push([FauxResponse::text(format!(
                "(faux) This is the offline faux provider: no model was called. Your prompt had {} characters. \
                 Set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --base-url, to use a real model.",
                prompt.chars().count()
            ))]),
        }
        Arc::new(faux)
    } else {
        let http = HttpConfig { base_url: args.base_url.clone(), ..HttpConfig::default() };
        provider::provider_for(&model, &http).map_err(|e| CliError(format!("--provider {provider_name}: {e}")))?
    };
    Ok(Selected { model, provider })
}

/// `--tools`.
pub fn tools(list: Option<&str>) -> Result<ToolRegistry, CliError> {
    match list.map(str::trim) {
        None => Ok(ToolRegistry::all_builtin()),
        Some("none") | Some("") => Ok(ToolRegistry::empty()),
        Some(list) => {
            let names: Vec<&str> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
            ToolRegistry::builtin(&names).map_err(|e| CliError(format!("--tools: {e}")))
        }
    }
}

/// The working directory for tools.
pub fn cwd(arg: Option<&Path>) -> Result<PathBuf, CliError> {
    match arg {
        Some(dir) if dir.is_dir() => Ok(dir.to_owned()),
        Some(dir) => Err(CliError(format!("--cwd: {} is not a directory", dir.display()))),
        None => std::env::current_dir().map_err(|e| CliError(format!("current directory: {e}"))),
    }
}

/// `--session PATH`, `--no-session`, or the default `~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl`.
pub fn session(args: &AgentArgs, cwd: &Path) -> Result<Option<SessionWriter>, CliError> {
    if args.no_session {
        return Ok(None);
    }
    let path = match &args.session {
        Some(path) => path.clone(),
        None => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
            let slug = cwd.display().to_string().replace('/', "-");
            let stamp = pi_agent::time::iso8601(pi_agent::time::now_millis()).replace([':', '.'], "-");
            home.join(".pi/agent/sessions").join(format!("--{slug}--")).join(format!("{stamp}.jsonl"))
        }
    };
    SessionWriter::open_or_create(&path, cwd).map(Some).map_err(|e| CliError(format!("--session: {e}")))
}

/// The OTLP configuration, when export is asked for by `--otlp` or an `OTEL_*` endpoint variable.
/// Flags win over the environment; malformed values are one-line errors naming the culprit.
pub fn otlp(args: &OtlpArgs) -> Result<Option<pi_observe::otel::OtlpConfig>, CliError> {
    use pi_observe::otel::{Conventions, OtlpConfig, Protocol, names::env};
    let env_endpoint = [env::ENDPOINT, env::TRACES_ENDPOINT].iter().any(|v| env_set(v));
    if args.otlp.is_none() && !env_endpoint {
        return Ok(None);
    }
    let mut config = OtlpConfig::default();
    if let Some(p) = &args.otlp_protocol {
        config.protocol = Some(
            Protocol::parse(p)
                .ok_or_else(|| CliError(format!("--otlp-protocol: {p:?} is not grpc, http/protobuf or http/json")))?,
        );
    }
    let grpc = config.protocol == Some(Protocol::Grpc)
        || (config.protocol.is_none()
            && [env::TRACES_PROTOCOL, env::PROTOCOL]
                .iter()
                .find_map(|v| std::env::var(v).ok().filter(|p| !p.trim().is_empty()))
                .is_some_and(|p| p.trim() == "grpc"));
    if let Some(endpoint) = args.otlp.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(CliError(format!("--otlp: {endpoint:?} is not an http(s) URL")));
        }
        // gRPC takes the collector address as it is; HTTP wants the signal path.
        let full = if grpc || endpoint.trim_end_matches('/').ends_with("/v1/traces") {
            endpoint.to_owned()
        } else {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        };
        config.traces_endpoint = Some(full);
    }
    config.headers = args.otlp_header.clone();
    config.service_name = args.service_name.clone();
    if let Some(c) = &args.conventions {
        config.conventions = Conventions::parse(c)
            .ok_or_else(|| CliError(format!("--conventions: {c:?} is not genai, openinference or both")))?;
    }
    if args.otlp_logs {
        config.logs = Some(true);
    }
    if !args.metric_dims.is_empty() {
        let dims: Vec<String> =
            args.metric_dims.iter().map(|d| d.trim().to_owned()).filter(|d| !d.is_empty() && d != "none").collect();
        config.metric_dims = Some(dims);
    }
    let config = config.with_process_env().map_err(|e| CliError(e.to_string()))?;
    Ok((!config.disabled).then_some(config))
}

/// Skills and prompt templates: the `--skills` / `--prompt-templates` directories, then the
/// project's `.pi/` and the user's `~/.pi/agent/` ones. Skipped files are reported on stderr.
pub fn resources(agent: &super::AgentArgs, cwd: &std::path::Path) -> pi_observe::agent::resources::Resources {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let dirs = |extra: &[std::path::PathBuf], leaf: &str| {
        let mut dirs = extra.to_vec();
        dirs.push(cwd.join(".pi").join(leaf));
        if let Some(home) = &home {
            dirs.push(home.join(".pi/agent").join(leaf));
        }
        dirs
    };
    let resources = pi_observe::agent::resources::Resources::load(
        &dirs(&agent.skills, "skills"),
        &dirs(&agent.prompt_templates, "prompts"),
    );
    for error in &resources.errors {
        super::output::error(format_args!("pi: skipped {error}"));
    }
    resources
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
    config.from_env().map(Some).map_err(|e| CliError(e.to_string()))
}
