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

/// A sink `--capture SINK=` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Events,
    Log,
    Json,
    Otlp,
    Sentry,
}

use Sink::{Events, Json, Log, Otlp, Sentry};

/// The sinks a `--capture` SINK word stands for (a sink or a group).
fn sink_group(word: &str) -> Option<&'static [Sink]> {
    Some(match word {
        "events" => &[Events],
        "log" => &[Log],
        "json" => &[Json],
        "otlp" => &[Otlp],
        "sentry" => &[Sentry],
        "local" => LOCAL,
        "remote" => &[Otlp, Sentry],
        "all" => &[Events, Log, Json, Otlp, Sentry],
        _ => return None,
    })
}

/// What a bare `--capture KINDS` applies to.
const LOCAL: &[Sink] = &[Events, Log, Json];

/// One content policy per sink, from `--capture [SINK=]KINDS` and `--redact` (which applies to
/// every sink). Sinks not named capture nothing.
#[derive(Debug, Clone)]
pub struct SinkPolicies {
    /// Safe-only, with the scrubber: for anything not a named sink.
    pub base: ContentPolicy,
    /// `--events-jsonl`.
    pub events: ContentPolicy,
    /// `--log-json`.
    pub log: ContentPolicy,
    /// `--mode json` on stdout.
    pub json: ContentPolicy,
    /// OTLP.
    pub otlp: ContentPolicy,
    /// Sentry.
    pub sentry: ContentPolicy,
}

impl SinkPolicies {
    fn sink_mut(&mut self, sink: Sink) -> &mut ContentPolicy {
        match sink {
            Events => &mut self.events,
            Log => &mut self.log,
            Json => &mut self.json,
            Otlp => &mut self.otlp,
            Sentry => &mut self.sentry,
        }
    }
}

/// `--capture` and `--redact` as one content policy per sink.
pub fn policies(args: &ContentArgs) -> Result<SinkPolicies, CliError> {
    let mut scrubber = Scrubber::default();
    for pattern in &args.redact {
        scrubber = scrubber.with_pattern(pattern).map_err(|e| CliError(format!("--redact: {e}")))?;
    }
    let base = ContentPolicy::default().scrubber(scrubber);
    let mut policies = SinkPolicies {
        events: base.clone(),
        log: base.clone(),
        json: base.clone(),
        otlp: base.clone(),
        sentry: base.clone(),
        base,
    };
    for value in &args.capture {
        let (sinks, kinds) = match value.split_once('=') {
            Some((sink, kinds)) => (
                sink_group(sink.trim()).ok_or_else(|| {
                    CliError(format!(
                        "--capture: unknown sink {:?} (expected events, log, json, otlp, sentry, local, remote or all)",
                        sink.trim()
                    ))
                })?,
                kinds,
            ),
            None => (LOCAL, value.as_str()),
        };
        let kinds = capture_kinds(kinds)?;
        for sink in sinks {
            let policy = policies.sink_mut(*sink);
            *policy = policy.clone().capture_kinds(kinds.iter().copied());
        }
    }
    Ok(policies)
}

/// `KIND[,KIND…]` or `all`; singular and plural spellings; an empty list is an error.
fn capture_kinds(list: &str) -> Result<Vec<ContentKind>, CliError> {
    let mut kinds = Vec::new();
    for word in list.split(',').map(str::trim) {
        match word {
            "" => return Err(CliError(format!("--capture: {list:?} has an empty kind"))),
            "all" => kinds.extend(ContentKind::ALL),
            other => kinds.push(ContentKind::parse(other).ok_or_else(|| {
                let known: Vec<_> = ContentKind::ALL.iter().map(|k| k.as_str()).collect();
                CliError(format!("--capture: unknown kind {other:?} (expected {} or all)", known.join(", ")))
            })?),
        }
    }
    Ok(kinds)
}

/// Longest attribution key or value, in bytes.
pub const MAX_ATTRIBUTION_BYTES: usize = 256;

/// An attribution key or value: at most [`MAX_ATTRIBUTION_BYTES`], no control characters.
fn check_attribution(culprit: &str, what: &str, text: &str) -> Result<(), CliError> {
    if text.len() > MAX_ATTRIBUTION_BYTES {
        return Err(CliError(format!(
            "{culprit}: {what} is {} bytes; at most {MAX_ATTRIBUTION_BYTES} are allowed",
            text.len()
        )));
    }
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        return Err(CliError(format!("{culprit}: {what} contains the control character {:?}", c)));
    }
    Ok(())
}

/// A flag's value, else the variable's (non-UTF-8 is an error naming the variable); empty = none.
fn flag_or_env(flag: Option<&str>, flag_name: &str, var: &str) -> Result<Option<(String, String)>, CliError> {
    if let Some(value) = flag {
        return Ok((!value.is_empty()).then(|| (value.to_owned(), flag_name.to_owned())));
    }
    match std::env::var(var) {
        Ok(value) => Ok((!value.is_empty()).then(|| (value, var.to_owned()))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError(format!("{var}: not valid UTF-8"))),
    }
}

/// `--user`, `--org`, `--context` (flags win over `PI_USER_ID` / `PI_ORG_ID`). Keys and values
/// are checked: at most 256 bytes, no control characters.
pub fn attribution(args: &ObserveArgs) -> Result<Attribution, CliError> {
    let mut attribution = Attribution::new();
    for (key, flag, flag_name, var) in [
        (names::CTX_USER_ID, args.user.as_deref(), "--user", names::ENV_USER_ID),
        (names::CTX_ORG_ID, args.org.as_deref(), "--org", names::ENV_ORG_ID),
    ] {
        if let Some((value, culprit)) = flag_or_env(flag, flag_name, var)? {
            check_attribution(&culprit, "the value", &value)?;
            attribution = attribution.with(key, value);
        }
    }
    for (key, value) in &args.context {
        check_attribution("--context", "a key", key)?;
        check_attribution("--context", &format!("the value of {key}"), value)?;
        attribution = attribution.with(key.clone(), value.clone());
    }
    Ok(attribution)
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
            None if provider_name == "faux" => {
                return Err(CliError(format!(
                    "--model: {id:?} is not a model of the offline faux provider (give --provider, an API key or --base-url for a real one)"
                )));
            }
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
        pi_observe::otel::check_url(url.trim()).map_err(|why| CliError(format!("--base-url: {why}")))?;
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
        Some("none") => Ok(ToolRegistry::empty()),
        Some(list) => {
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            if names.iter().any(|n| n.is_empty()) {
                return Err(CliError(format!("--tools: {list:?} has an empty name (give read,bash,… or none)")));
            }
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
/// An existing path must be a regular file (not a directory, FIFO or device).
pub fn session_path(args: &AgentArgs, cwd: &Path) -> Result<Option<PathBuf>, CliError> {
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
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_file() => Err(CliError(format!("--session: {} is not a regular file", path.display()))),
        _ => Ok(Some(path)),
    }
}

/// Opens (or creates) the session at `path`; a torn last line is moved aside and named.
pub fn open_session(path: &Path, cwd: &Path) -> Result<SessionWriter, CliError> {
    let writer = SessionWriter::open_or_create(path, cwd).map_err(|e| CliError(format!("--session: {e}")))?;
    if let Some(tail) = writer.recovered_tail() {
        super::output::error(format_args!(
            "pi: {}:{}: torn last line moved to {}",
            path.display(),
            tail.line,
            tail.saved_to.display()
        ));
    }
    Ok(writer)
}

/// What identifies a file: device and inode when it exists, else its canonical directory and name.
#[derive(PartialEq, Eq)]
enum FileIdentity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(meta) = std::fs::metadata(path) {
        return Some(FileIdentity::Inode(meta.dev(), meta.ino()));
    }
    let dir = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => dir.canonicalize().ok()?,
        None => std::env::current_dir().ok()?,
    };
    Some(FileIdentity::Path(dir.join(path.file_name()?)))
}

/// Refuses an output file that is one of the `inputs` (a session) or another output: writing it
/// would corrupt the session or interleave two streams. Each pair is (flag, path).
pub fn check_outputs(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<(), CliError> {
    let known: Vec<(&str, &Path, Option<FileIdentity>)> =
        inputs.iter().chain(outputs).map(|(flag, path)| (*flag, *path, file_identity(path))).collect();
    for (i, (flag, path, id)) in known.iter().enumerate().skip(inputs.len()) {
        let Some(id) = id else { continue };
        if let Some((other, _, _)) = known[..i].iter().find(|(_, _, other)| other.as_ref() == Some(id)) {
            return Err(CliError(format!("{flag}: {} is the same file as {other}; give another file", path.display())));
        }
        if is_session_file(path) {
            return Err(CliError(format!("{flag}: {} is a session file; give another file", path.display())));
        }
    }
    Ok(())
}

/// True when `path` exists and its first line is a session header (appending events would
/// corrupt that session).
fn is_session_file(path: &Path) -> bool {
    use std::io::{BufRead, Read};
    let Ok(file) = std::fs::File::open(path) else { return false };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut first = Vec::new();
    let mut reader = std::io::BufReader::new(file.take(64 * 1024));
    if reader.read_until(b'\n', &mut first).is_err() {
        return false;
    }
    serde_json::from_slice::<serde_json::Value>(&first)
        .is_ok_and(|header| header.get("type").and_then(|t| t.as_str()) == Some("session"))
}

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
            return Err(CliError(format!(
                "{flag}: no OTLP sink to apply it to (give --otlp or set {})",
                env::ENDPOINT
            )));
        }
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
        pi_observe::otel::check_url(endpoint).map_err(|why| CliError(format!("--otlp: {why}")))?;
        // gRPC takes the collector address as it is; HTTP wants the signal path.
        let full = if grpc || endpoint.trim_end_matches('/').ends_with("/v1/traces") {
            endpoint.to_owned()
        } else {
            format!("{}/v1/traces", endpoint.trim_end_matches('/'))
        };
        config.traces_endpoint = Some(full);
    }
    for (name, value) in &args.otlp_header {
        pi_observe::otel::check_header(name, value).map_err(|why| CliError(format!("--otlp-header: {why}")))?;
    }
    config.headers = args.otlp_header.clone();
    if let Some(name) = &args.service_name {
        if name.trim().is_empty() {
            return Err(CliError("--service-name: the name is empty".into()));
        }
        config.service_name = Some(name.trim().to_owned());
    }
    if let Some(c) = &args.conventions {
        config.conventions = Conventions::parse(c)
            .ok_or_else(|| CliError(format!("--conventions: {c:?} is not genai, openinference or both")))?;
    }
    if args.otlp_logs {
        config.logs = Some(true);
    }
    if !args.metric_dims.is_empty() {
        config.metric_dims = Some(metric_dims(&args.metric_dims)?);
    }
    let config = config.with_process_env().map_err(|e| CliError(e.to_string()))?;
    Ok((!config.disabled).then_some(config))
}

/// Variable with a link template for printed trace ids, e.g. `http://localhost:16686/trace/{trace_id}`.
pub const TRACE_URL_TEMPLATE: &str = "PI_TRACE_URL_TEMPLATE";

/// `PI_TRACE_URL_TEMPLATE`, when set: it must contain `{trace_id}`.
pub fn trace_url_template() -> Result<Option<String>, CliError> {
    match std::env::var(TRACE_URL_TEMPLATE) {
        Ok(t) if t.trim().is_empty() => Ok(None),
        Ok(t) if t.contains("{trace_id}") => Ok(Some(t)),
        Ok(_) => Err(CliError(format!("{TRACE_URL_TEMPLATE}: has no {{trace_id}} placeholder"))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(CliError(format!("{TRACE_URL_TEMPLATE}: not valid UTF-8"))),
    }
}

/// Each directory given to `flag` exists and is a directory.
pub fn check_dirs(flag: &str, dirs: &[PathBuf]) -> Result<(), CliError> {
    for dir in dirs {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(CliError(format!("{flag}: {} is not a directory", dir.display()))),
            Err(e) => return Err(CliError(format!("{flag}: {}: {e}", dir.display()))),
        }
    }
    Ok(())
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
            return Err(CliError(format!("--metric-dims: {given:?} has an empty key")));
        }
        if key == "none" {
            return Err(CliError(format!("--metric-dims: {given:?}: `none` cannot be combined with keys")));
        }
        if !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')) {
            return Err(CliError(format!("--metric-dims: {key:?} is not an attribution key (letters, digits, _ . -)")));
        }
        if !dims.iter().any(|d| d == key) {
            dims.push(key.to_owned());
        }
    }
    Ok(dims)
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
