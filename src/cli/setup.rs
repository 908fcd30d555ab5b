//! Turning flags and environment into the agent: model and provider, tools, skills and prompt
//! templates, working directory and session.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pi_agent::model::{Api, ModelInfo, Registry};
use pi_agent::provider::{self, FauxProvider, FauxResponse, HttpConfig, Provider};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;

use super::CliError;
use super::args::AgentArgs;
use super::config::{Config, Key, keys};
use super::faux_script;
use super::settings::{Compaction, Count, Retry, SettingsDoc};

/// The chosen model and its provider.
pub struct Selected {
    pub model: ModelInfo,
    pub provider: Arc<dyn Provider>,
}

/// Picks the provider and model: the managed policy's `defaultProvider`/`defaultModel`, then
/// explicit flags, then the settings files' defaults; otherwise a configured key or base URL
/// selects a real provider, and with none of those the offline `faux` provider is used. The
/// models come from the built-in table, `~/.pi/agent/models.json` and `--models-file`; the managed
/// policy may restrict them.
pub fn select(args: &AgentArgs, cfg: &Config) -> Result<Selected, CliError> {
    // The table is read here only for a `PROVIDER/ID` pattern (`select_named` reads it anyway).
    let slashed = args.provider.is_none() && args.model.as_deref().is_some_and(|m| m.contains('/'));
    let registry = if slashed { Some(registry(args, cfg)?) } else { None };
    let known = |name: &str| registry.as_ref().is_some_and(|r| r.default_for(name).is_some());
    let (provider, model, _) = model_spec(args, known);
    select_named(args, cfg, provider, model)
}

/// `--model` as upstream reads it: `ID`, `PROVIDER/ID` (when PROVIDER is one `known` says is a
/// provider: ids such as OpenRouter's `anthropic/claude-…` keep their slash) and an optional
/// `:LEVEL` thinking suffix; `--provider` and `--thinking` win over what the pattern says.
pub fn model_spec(args: &AgentArgs, known: impl Fn(&str) -> bool) -> (Option<String>, Option<String>, Option<String>) {
    let Some(pattern) = args.model.as_deref() else { return (args.provider.clone(), None, args.thinking.clone()) };
    let (pattern, level) = match pattern.rsplit_once(':') {
        Some((id, level)) if pi_agent::model::THINKING_LEVELS.contains(&level) => (id, Some(level.to_owned())),
        _ => (pattern, None),
    };
    let (provider, id) = match pattern.split_once('/') {
        Some((provider, id)) if args.provider.is_none() && known(provider) => (Some(provider.to_owned()), id),
        _ => (args.provider.clone(), pattern),
    };
    (provider, Some(id.to_owned()), args.thinking.clone().or(level))
}

/// The models: the built-in table, `~/.pi/agent/models.json`, then `--models-file`.
pub fn registry(args: &AgentArgs, cfg: &Config) -> Result<Registry, CliError> {
    registry_with(cfg, args.models_file.as_deref())
}

/// The built-in table and `~/.pi/agent/models.json`, then `models` (`--models-file`) if given.
pub fn registry_with(cfg: &Config, models: Option<&std::path::Path>) -> Result<Registry, CliError> {
    let mut registry = Registry::builtin();
    // What a file skips or cannot run is said once per run, naming the file.
    let say = |registry: &mut Registry, path: &std::path::Path| {
        for warning in registry.warnings.drain(..) {
            cfg.notice(format!("warning: {}: {warning}", path.display()));
        }
    };
    if let Some(path) = cfg.agent_dir.as_ref().map(|d| d.join("models.json")).filter(|p| p.exists()) {
        registry = registry.with_overrides(&path).map_err(|e| CliError::Usage(e.to_string()))?;
        say(&mut registry, &path);
    }
    if let Some(path) = models {
        registry = registry.with_overrides(path).map_err(|e| CliError::Usage(format!("--models-file: {e}")))?;
        say(&mut registry, path);
    }
    Ok(registry)
}

/// [`select`] with this provider and model instead of the flags' (RPC `set_model`, `/model`).
pub fn select_named(
    args: &AgentArgs,
    cfg: &Config,
    provider: Option<String>,
    model: Option<String>,
) -> Result<Selected, CliError> {
    let registry = registry(args, cfg)?;
    let (provider_name, model_flag) = chosen_names(args, cfg, &registry, provider, model);
    let known_provider = registry.default_for(&provider_name).is_some();
    let mut model = resolve_model(&registry, &provider_name, model_flag.as_deref())?;
    // A typed name no catalogue knows is content: telemetry says `invalid` unless captured.
    model.catalogued = registry.catalogued(&model.provider, &model.id);
    if !known_provider && args.base_url.is_none() && model.base_url.is_none() && model.api == Api::OpenAiCompletions {
        return Err(CliError::Usage(format!(
            "--provider {provider_name}: needs --base-url (or a baseUrl in --models-file)"
        )));
    }
    if model.api == Api::Faux && args.base_url.is_some() {
        return Err(CliError::Usage(
            "--base-url: the offline faux provider makes no requests; drop --base-url, or name a provider (--provider openai)"
                .into(),
        ));
    }
    if let Some(url) = &args.base_url {
        pi_observe::otel::check_url(url.trim()).map_err(|why| CliError::Usage(format!("--base-url: {why}")))?;
    }
    cfg.policy().check_model(&model.provider, &model.id).map_err(CliError::Usage)?;
    let provider = provider_of(args, &model, registry.api_key_var(&model.provider))?;
    Ok(Selected { model, provider })
}

/// The provider name and model id asked for: the managed policy's (a flag it overrides is said
/// once), else the flags (or the RPC / `/model` names), else the settings, else the provider
/// whose key is set, else `faux`. A settings default model applies only to the provider it was
/// chosen with.
fn chosen_names(
    args: &AgentArgs,
    cfg: &Config,
    registry: &Registry,
    provider: Option<String>,
    model: Option<String>,
) -> (String, Option<String>) {
    let managed = |key: &Key<String>, flag: &Option<String>, flag_name: &str| {
        let file = cfg.managed_sets(key)?;
        let value = (key.read)(file)?;
        if flag.as_ref().is_some_and(|f| *f != value) {
            let key = key.dotted();
            cfg.notice(format!("the managed policy {} sets {key}: {flag_name} ignored", file.path.display()));
        }
        Some(value)
    };
    let provider_flag = managed(&keys::DEFAULT_PROVIDER, &provider, "--provider").or(provider);
    let model_flag = managed(&keys::DEFAULT_MODEL, &model, "--model").or(model);
    let provider_name = match &provider_flag {
        Some(p) => p.clone(),
        None if args.base_url.is_some() => "openai".to_owned(),
        None => match cfg.settings.typed(|s| s.default_provider.clone()) {
            Some((p, _)) => p,
            // As upstream: the first provider (in its order) whose key variable is set.
            None => registry.provider_with_key(crate::cli::config::env_set).unwrap_or("faux").to_owned(),
        },
    };
    let model_flag = model_flag.or_else(|| {
        let (model, _) = cfg.settings.typed(|s| s.default_model.clone())?;
        let default_provider = cfg.settings.typed(|s| s.default_provider.clone()).map(|(p, _)| p);
        (provider_flag.is_none() || default_provider.as_deref() == Some(provider_name.as_str()))
            .then_some(model)
            .filter(|m| registry.find(&provider_name, m).is_some() || provider_name != "faux")
    });
    (provider_name, model_flag)
}

/// The model `id` of `provider_name` (its default without an id): from the registry, else an
/// uncatalogued model on the provider's API (faux knows only its own models).
fn resolve_model(registry: &Registry, provider_name: &str, id: Option<&str>) -> Result<ModelInfo, CliError> {
    Ok(match id {
        Some(id) => match registry.find(provider_name, id) {
            Some(model) => model.clone(),
            None if provider_name == "anthropic" => ModelInfo::unknown(provider_name, id, Api::AnthropicMessages),
            None if provider_name == "faux" => {
                return Err(CliError::Usage(format!(
                    "--model: {id:?} is not a model of the offline faux provider (give --provider, an API key or --base-url for a real one)"
                )));
            }
            None => ModelInfo::unknown(provider_name, id, Api::OpenAiCompletions),
        },
        None => match registry.default_for(provider_name) {
            Some(model) => model.clone(),
            None => {
                return Err(CliError::Usage(format!(
                    "--provider: unknown provider {provider_name:?}; give --model (and --base-url for an OpenAI-compatible server)"
                )));
            }
        },
    })
}

/// The provider that serves `model`: faux (on `--faux-script`, or answering every prompt), or
/// the HTTP client of its API with `--base-url` and the `models.json` credentials resolved for
/// this model only (command, variable or literal), else the key from the provider's own variable
/// (`key_var`: `GEMINI_API_KEY`, `GROQ_API_KEY`, …; required unless `--base-url` points
/// elsewhere). A key is never sent to another provider's server.
fn provider_of(args: &AgentArgs, model: &ModelInfo, key_var: Option<&str>) -> Result<Arc<dyn Provider>, CliError> {
    if model.api == Api::Faux {
        let faux = FauxProvider::new().chunk_delay(std::time::Duration::from_millis(1));
        return Ok(match &args.faux_script {
            Some(path) => {
                faux.push(faux_script::load(path)?);
                Arc::new(faux)
            }
            // Every prompt gets an answer (interactive and RPC sessions have many).
            None => Arc::new(faux.fallback(offline_answer)),
        });
    }
    let provider_name = &model.provider;
    let mut http =
        HttpConfig { base_url: args.base_url.clone(), api_key: args.api_key.clone(), ..HttpConfig::default() };
    if let (Some(auth), None) = (&model.auth, &args.api_key) {
        let resolve = |what: &str, raw: &str| {
            pi_agent::model::resolve_value(raw)
                .map_err(|why| CliError::Usage(format!("models.json: providers.{provider_name}.{what}: {why}")))
        };
        http.api_key = auth.api_key.as_deref().map(|raw| resolve("apiKey", raw)).transpose()?;
        for (name, raw) in &auth.headers {
            http.headers.push((name.clone(), resolve(&format!("headers.{name}"), raw)?));
        }
    }
    if http.api_key.is_none()
        && let Some(var) = key_var
    {
        http.api_key = std::env::var(var).ok().filter(|key| !key.trim().is_empty());
        let keyless = model.api.spoken() && model.auth.is_none() && args.base_url.is_none();
        if http.api_key.is_none() && keyless {
            return Err(CliError::Usage(format!("--provider {provider_name}: configuration: {var} is not set")));
        }
    }
    provider::provider_for(model, &http).map_err(|e| CliError::Usage(format!("--provider {provider_name}: {e}")))
}

/// The offline faux provider's answer to a prompt (no script given): what it is and how to
/// use a real model.
fn offline_answer(request: &pi_agent::provider::ProviderRequest) -> FauxResponse {
    let chars = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            pi_agent::message::Message::User(user) => Some(user.content.text().chars().count()),
            _ => None,
        })
        .unwrap_or(0);
    FauxResponse::text(format!(
        "(faux) This is the offline faux provider: no model was called. Your prompt had {chars} characters. \
         Set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --base-url, to use a real model."
    ))
}

/// What the agent is made of before its extensions start: provider and model, built-in tools
/// (the skills and templates come with the extensions: `extensions::assemble`).
pub struct AgentParts {
    pub provider: Arc<dyn Provider>,
    pub model: ModelInfo,
    pub tools: ToolRegistry,
}

/// `--provider`/`--model`/`--base-url`/`--models-file`/`--faux-script`, `--tools`, `--skills` and
/// `--prompt-templates`, checked.
pub fn agent_parts(args: &AgentArgs, cfg: &Config) -> Result<AgentParts, CliError> {
    let Selected { model, provider } = select(args, cfg)?;
    let tools = match args.tools.as_deref() {
        None if args.no_tools || args.no_builtin_tools => ToolRegistry::empty(),
        list => tools(list)?,
    };
    check_dirs("--skills", &args.skills)?;
    check_dirs("--prompt-templates", &args.prompt_templates)?;
    Ok(AgentParts { provider, model, tools })
}

/// `--tools`.
pub fn tools(list: Option<&str>) -> Result<ToolRegistry, CliError> {
    match list.map(str::trim) {
        None => Ok(ToolRegistry::all_builtin()),
        Some("none") => Ok(ToolRegistry::empty()),
        Some(list) => {
            let names: Vec<&str> = list.split(',').map(str::trim).collect();
            if names.iter().any(|n| n.is_empty()) {
                return Err(CliError::Usage(format!("--tools: {list:?} has an empty name (give read,bash,… or none)")));
            }
            ToolRegistry::builtin(&names).map_err(|e| CliError::Usage(format!("--tools: {e}")))
        }
    }
}

/// The working directory for tools.
pub fn cwd(arg: Option<&Path>) -> Result<PathBuf, CliError> {
    match arg {
        Some(dir) if dir.is_dir() => Ok(dir.to_owned()),
        Some(dir) => Err(CliError::Usage(format!("--cwd: {} is not a directory", dir.display()))),
        None => std::env::current_dir().map_err(|e| CliError::Usage(format!("current directory: {e}"))),
    }
}

/// Variable that moves the session folder (upstream pi's name).
pub const SESSION_DIR_VAR: &str = "PI_CODING_AGENT_SESSION_DIR";

/// `--session PATH`, `--no-session`, or a new file
/// `<sessions>/--<cwd with '/' as '-'>--/<UTC time with ':' and '.' as '-'>.jsonl`, where
/// `<sessions>` is `PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting, else
/// `~/.pi/agent/sessions`. An existing path must be a regular file (not a directory, FIFO or
/// device).
pub fn session_path(args: &AgentArgs, cwd: &Path, cfg: &Config) -> Result<Option<PathBuf>, CliError> {
    if args.no_session {
        return Ok(None);
    }
    if let Some(dir) = &args.session_dir {
        let _ = SESSION_DIR_FLAG.set(dir.clone());
    }
    let latest = args.continue_session.then(|| latest_session(cwd, cfg)).flatten();
    let path = match (&args.session, latest) {
        (Some(path), _) => session_argument("--session", path, cfg)?,
        (None, Some(latest)) => latest,
        (None, None) => {
            let (sessions, culprit) = sessions_dir(cfg);
            super::paths::check_dir(&culprit, &sessions).map_err(CliError::Usage)?;
            new_session_path(cwd, cfg)
        }
    };
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_file() => {
            Err(CliError::Usage(format!("--session: {} is not a regular file", path.display())))
        }
        _ => Ok(Some(path)),
    }
}

/// `--session-dir`, once a run's arguments were read (every session path of the run uses it).
static SESSION_DIR_FLAG: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// `-c`: the most recently written session file of `cwd`'s folder in the sessions folder.
fn latest_session(cwd: &Path, cfg: &Config) -> Option<PathBuf> {
    let folder = new_session_path(cwd, cfg).parent()?.to_owned();
    let files = std::fs::read_dir(folder).ok()?.flatten().map(|e| e.path());
    let sessions = files.filter(|p| p.extension().is_some_and(|e| e == "jsonl"));
    sessions.max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// A new session file's path:
/// `<sessions>/--<cwd with '/' as '-'>--/<UTC time with ':' and '.' as '-'>.jsonl`, where
/// `<sessions>` is `PI_CODING_AGENT_SESSION_DIR`, else the `sessionDir` setting, else
/// `~/.pi/agent/sessions` (a path taken in the same millisecond gets a suffix).
pub fn new_session_path(cwd: &Path, cfg: &Config) -> PathBuf {
    let (sessions, _) = sessions_dir(cfg);
    let slug = cwd.display().to_string().replace('/', "-");
    let stamp = pi_agent::time::iso8601(pi_agent::time::now_millis()).replace([':', '.'], "-");
    let dir = sessions.join(format!("--{slug}--"));
    let mut path = dir.join(format!("{stamp}.jsonl"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{stamp}-{n}.jsonl"));
    }
    path
}

/// The folder of new sessions and what set it, for errors: `PI_CODING_AGENT_SESSION_DIR`, else
/// the `sessionDir` setting (naming its file), else `<agent dir>/sessions`.
pub fn sessions_dir(cfg: &Config) -> (PathBuf, String) {
    if let Some(dir) = SESSION_DIR_FLAG.get() {
        return (dir.clone(), "--session-dir".to_owned());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let managed = cfg.managed_sets(&keys::SESSION_DIR).is_some();
    match std::env::var_os(SESSION_DIR_VAR).filter(|v| !v.is_empty() && !managed) {
        Some(dir) => (super::paths::expand_home(dir.into(), home.as_ref()), SESSION_DIR_VAR.to_owned()),
        None => match cfg.path_setting(&keys::SESSION_DIR) {
            Some((dir, source)) => (dir, format!("sessionDir ({source})")),
            None => {
                let agent = super::paths::agent_dir().unwrap_or_else(|| std::env::temp_dir().join(".pi/agent"));
                (agent.join("sessions"), "the sessions folder".to_owned())
            }
        },
    }
}

/// What `--session VALUE` names: a path (anything with a `/`, a `.jsonl` name, or an existing
/// file), else a session id or the start of one, looked up among the session files under the
/// sessions folder; an id that matches no file, or more than one, is an error saying so.
fn session_argument(flag: &str, value: &Path, cfg: &Config) -> Result<PathBuf, CliError> {
    let text = value.to_string_lossy();
    let looks_like_path = text.contains('/') || text.ends_with(".jsonl") || value.exists();
    if looks_like_path {
        return Ok(value.to_owned());
    }
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(CliError::Usage(format!("{flag}: {text:?} is neither a session file nor a session id")));
    }
    let (sessions, _) = sessions_dir(cfg);
    // A sessions folder that does not exist yet holds no match.
    let files = super::sessions::session_files_of(std::slice::from_ref(&sessions)).unwrap_or_default();
    let matches: Vec<PathBuf> = files
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| header_id(path).is_some_and(|id| id.starts_with(text.as_ref())))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(CliError::Usage(format!(
            "{flag}: no session in {} has an id starting with {text:?} (give a path to start a new session file)",
            sessions.display()
        ))),
        many => Err(CliError::Usage(format!(
            "{flag}: {} sessions in {} have an id starting with {text:?}; give more of it",
            many.len(),
            sessions.display()
        ))),
    }
}

/// The `id` of a session file's header line, reading only that line.
fn header_id(path: &Path) -> Option<String> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(path).ok()?;
    let mut line = String::new();
    std::io::BufReader::new(file).take(64 * 1024).read_line(&mut line).ok()?;
    let header: serde_json::Value = serde_json::from_str(&line).ok()?;
    (header.get("type")?.as_str()? == "session").then(|| header.get("id")?.as_str().map(str::to_owned))?
}

/// `--fork`: the session file to fork (a path, or the start of a session id), which must exist.
pub fn fork_source(args: &AgentArgs, cfg: &Config) -> Result<Option<PathBuf>, CliError> {
    let Some(value) = &args.fork else { return Ok(None) };
    let path = session_argument("--fork", value, cfg)?;
    if !path.is_file() {
        return Err(CliError::Usage(format!("--fork: {} is not a session file", path.display())));
    }
    Ok(Some(path))
}

/// The session of a run: `source` forked into a new file at `path` (`--fork`), else the
/// session at `path` opened or created.
pub fn session_at(path: &Path, source: Option<&Path>, cwd: &Path) -> Result<SessionWriter, CliError> {
    let Some(source) = source else { return open_session(path, cwd) };
    let from =
        open_session(source, cwd).map_err(|e| CliError::Usage(e.to_string().replacen("--session", "--fork", 1)))?;
    let Some(leaf) = from.leaf().map(str::to_owned) else {
        return Err(CliError::Usage(format!("--fork: {} has no entries to fork", source.display())));
    };
    from.fork(&leaf, path, cwd).map_err(|e| CliError::Failure(format!("--fork: {e}")))
}

/// Opens (or creates) the session at `path`; a torn last line is moved aside and named.
pub fn open_session(path: &Path, cwd: &Path) -> Result<SessionWriter, CliError> {
    let writer = SessionWriter::open_or_create(path, cwd).map_err(|e| CliError::Usage(format!("--session: {e}")))?;
    if let Some(version) = writer.migrated_from() {
        super::output::error(format_args!(
            "pi: {}: session format v{version} migrated to v3 (as upstream pi does; every field kept)",
            path.display()
        ));
    }
    if let Some(note) = super::sessions::unknown_note(writer.unknown_lines()) {
        super::output::error(format_args!("pi: {}: {note}", path.display()));
    }
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

/// Each directory given to `flag` exists and is a directory.
pub fn check_dirs(flag: &str, dirs: &[PathBuf]) -> Result<(), CliError> {
    for dir in dirs {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(CliError::Usage(format!("{flag}: {} is not a directory", dir.display()))),
            Err(e) => return Err(CliError::Usage(format!("{flag}: {}: {e}", dir.display()))),
        }
    }
    Ok(())
}

/// Skills and prompt templates: the `--skills` / `--prompt-templates` directories, the folders
/// extensions added (`resources_discover`), the settings files' `skills` / `prompts` lists
/// (relative to the file's folder), then — for a trusted project only — the project's
/// `.pi/skills` and `.pi/prompts`, then the user's `~/.pi/agent/` ones; and the context files
/// (`AGENTS.md` / `CLAUDE.md` of `~/.pi/agent/` and of each folder down to `cwd`) unless
/// `--no-context-files`. Skipped files are reported on stderr.
pub fn resources(
    agent: &AgentArgs,
    cwd: &Path,
    cfg: &Config,
    (ext_skills, ext_prompts): (&[PathBuf], &[PathBuf]),
) -> pi_observe::agent::resources::Resources {
    let agent_dir = super::paths::agent_dir();
    let dirs = |extra: &[PathBuf],
                from_extensions: &[PathBuf],
                listed: fn(&SettingsDoc) -> Option<Vec<String>>,
                (leaf, discover): (&str, bool)| {
        let mut dirs = extra.to_vec();
        if !discover {
            return dirs;
        }
        dirs.extend_from_slice(from_extensions);
        if let Some((listed, file)) = cfg.settings.typed(listed) {
            dirs.extend(listed.iter().map(|raw| Config::path_of(file, raw)));
        }
        if cfg.trust.trusted {
            dirs.push(cwd.join(".pi").join(leaf));
        }
        if let Some(agent_dir) = &agent_dir {
            dirs.push(agent_dir.join(leaf));
        }
        dirs
    };
    let mut resources = pi_observe::agent::resources::Resources::load(
        &dirs(&agent.skills, ext_skills, |s| s.skills.clone(), ("skills", !agent.no_skills)),
        &dirs(&agent.prompt_templates, ext_prompts, |s| s.prompts.clone(), ("prompts", !agent.no_prompt_templates)),
    );
    if !agent.no_context_files {
        let (files, errors) = pi_observe::agent::resources::context_files(cwd, agent_dir.as_deref());
        resources.context_files = files;
        resources.errors.extend(errors);
    }
    for error in &resources.errors {
        super::output::error(format_args!("pi: skipped {error}"));
    }
    resources
}

/// The themes: `--theme` paths (an unreadable one is an error), then — unless `--no-themes` —
/// the settings' `themes` (relative to the file), a trusted project's `.pi/themes` and
/// `~/.pi/agent/themes` (an unreadable theme there is a warning in `warnings`).
pub fn themes(
    agent: &AgentArgs,
    cwd: &Path,
    cfg: &Config,
) -> Result<crate::cli::modes::interactive::theme::Themes, CliError> {
    let mut discovered = Vec::new();
    if !agent.no_themes {
        if let Some((listed, file)) = cfg.settings.typed(|s| s.themes.clone()) {
            discovered.extend(listed.iter().map(|raw| Config::path_of(file, raw)));
        }
        if cfg.trust.trusted {
            discovered.push(cwd.join(".pi").join("themes"));
        }
        if let Some(agent_dir) = &cfg.agent_dir {
            discovered.push(agent_dir.join("themes"));
        }
    }
    let given: Vec<PathBuf> = agent.themes.iter().map(|p| cwd.join(p)).collect();
    crate::cli::modes::interactive::theme::Themes::load(&given, &discovered).map_err(CliError::Usage)
}

/// The harness settings from the files (managed first): thinking level, compaction, retry, and
/// whether child processes see `PI_*` (`--no-session-env` turns that off whatever they say).
/// `--system-prompt` / `--append-system-prompt`: the contents of the file it names, else the
/// text itself (as upstream).
fn text_or_file(value: &str) -> String {
    let path = Path::new(value);
    match path.is_file().then(|| std::fs::read_to_string(path)) {
        Some(Ok(text)) => text,
        _ => value.to_owned(),
    }
}

pub fn agent_config(agent: &AgentArgs, cfg: &Config) -> pi_agent::AgentConfig {
    let mut config = pi_agent::AgentConfig::default();
    let exposed = cfg.typed(|s| s.expose_session_environment);
    config.expose_session_environment = !agent.no_session_env && exposed != Some(false);
    config.reasoning =
        cfg.typed(|s| s.default_thinking_level).filter(|l| l.as_str() != "off").map(|l| l.as_str().to_owned());
    // `--thinking`, else a `--model …:LEVEL` suffix.
    let level = agent.thinking.clone().or_else(|| model_spec(agent, |_| false).2);
    if let Some(level) = level {
        config.reasoning = (level != "off").then_some(level);
    }
    // Upstream's prompt files: the trusted project's `.pi/NAME`, else `~/.pi/agent/NAME`; a flag
    // wins over its file.
    let prompt_file = |name: &str| {
        let project = cfg.trust.trusted.then(|| cfg.trust.project.join(".pi").join(name));
        let path = project.into_iter().chain(cfg.agent_dir.as_ref().map(|d| d.join(name))).find(|p| p.is_file())?;
        std::fs::read_to_string(path).ok()
    };
    if let Some(prompt) = agent.system_prompt.as_deref().map(text_or_file).or_else(|| prompt_file("SYSTEM.md")) {
        config.system_prompt = Some(prompt);
    }
    let appended: Vec<String> = match agent.append_system_prompt.as_slice() {
        [] => prompt_file("APPEND_SYSTEM.md").into_iter().collect(),
        given => given.iter().map(|more| text_or_file(more)).collect(),
    };
    for more in appended {
        let base = config.system_prompt.take().unwrap_or_default();
        let sep = if base.is_empty() { "" } else { "\n\n" };
        config.system_prompt = Some(format!("{base}{sep}{more}"));
    }
    let compaction = |read: fn(&Compaction) -> Option<Count>| cfg.typed(|s| s.compaction.as_ref().and_then(read));
    if let Some(enabled) = cfg.typed(|s| s.compaction.as_ref()?.enabled) {
        config.compaction.enabled = enabled;
    }
    if let Some(Count(tokens)) = compaction(|c| c.reserve_tokens) {
        config.compaction.reserve_tokens = tokens;
    }
    if let Some(Count(tokens)) = compaction(|c| c.keep_recent_tokens) {
        config.compaction.keep_recent_tokens = tokens;
    }
    let retry = |read: fn(&Retry) -> Option<Count>| cfg.typed(|s| s.retry.as_ref().and_then(read));
    if let Some(Count(n)) = retry(|r| r.max_retries) {
        config.retry.max_retries = u32::try_from(n).unwrap_or(u32::MAX);
    }
    if cfg.typed(|s| s.retry.as_ref()?.enabled) == Some(false) {
        config.retry.max_retries = 0;
    }
    if let Some(Count(ms)) = retry(|r| r.base_delay_ms) {
        config.retry.base_delay = std::time::Duration::from_millis(ms);
    }
    // Upstream: 0 disables the cap.
    match retry(|r| r.max_delay_ms) {
        Some(Count(0)) => config.retry.max_delay = std::time::Duration::MAX,
        Some(Count(ms)) => config.retry.max_delay = std::time::Duration::from_millis(ms),
        None => {}
    }
    config
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn spec(argv: &[&str]) -> (Option<String>, Option<String>, Option<String>) {
        let command = AgentArgs::augment_args(clap::Command::new("pi"));
        let args = AgentArgs::from_arg_matches(&command.get_matches_from([&["pi"], argv].concat())).unwrap();
        model_spec(&args, |name| ["anthropic", "openai"].contains(&name))
    }

    #[test]
    fn model_patterns_read_as_upstream_reads_them() {
        let s = |v: Option<&str>| v.map(str::to_owned);
        assert_eq!(spec(&["--model", "claude-sonnet-4-5"]), (None, s(Some("claude-sonnet-4-5")), None));
        assert_eq!(
            spec(&["--model", "anthropic/claude-sonnet-4-5:high"]),
            (s(Some("anthropic")), s(Some("claude-sonnet-4-5")), s(Some("high")))
        );
        // Not a provider: the slash is part of the id (OpenRouter's ids).
        assert_eq!(spec(&["--model", "meta-llama/llama-3:free"]), (None, s(Some("meta-llama/llama-3:free")), None));
        // --provider and --thinking win.
        assert_eq!(
            spec(&["--provider", "openrouter", "--model", "openai/gpt-4o:low", "--thinking", "high"]),
            (s(Some("openrouter")), s(Some("openai/gpt-4o")), s(Some("high")))
        );
    }
}
