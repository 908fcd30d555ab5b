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
use super::faux_script;

/// The chosen model and its provider.
pub struct Selected {
    pub model: ModelInfo,
    pub provider: Arc<dyn Provider>,
}

/// True when the variable is set and not empty.
pub fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// Picks the provider and model: explicit flags first; otherwise a configured key or base URL
/// selects a real provider, and with none of those the offline `faux` provider is used.
pub fn select(args: &AgentArgs, prompt: &str) -> Result<Selected, CliError> {
    let mut registry = Registry::builtin();
    if let Some(path) = &args.models {
        registry = registry.with_overrides(path).map_err(|e| CliError::Usage(format!("--models: {e}")))?;
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
                return Err(CliError::Usage(format!(
                    "--model: {id:?} is not a model of the offline faux provider (give --provider, an API key or --base-url for a real one)"
                )));
            }
            None => ModelInfo::unknown(&provider_name, id, Api::OpenAiCompletions),
        },
        None => match registry.default_for(&provider_name) {
            Some(model) => model.clone(),
            None => {
                return Err(CliError::Usage(format!(
                    "--provider: unknown provider {provider_name:?}; give --model (and --base-url for an OpenAI-compatible server)"
                )));
            }
        },
    };
    if !known_provider && args.base_url.is_none() && model.base_url.is_none() && model.api == Api::OpenAiCompletions {
        return Err(CliError::Usage(format!(
            "--provider {provider_name}: needs --base-url (or a baseUrl in --models)"
        )));
    }
    if let Some(url) = &args.base_url {
        pi_observe::otel::check_url(url.trim()).map_err(|why| CliError::Usage(format!("--base-url: {why}")))?;
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
        provider::provider_for(&model, &http)
            .map_err(|e| CliError::Usage(format!("--provider {provider_name}: {e}")))?
    };
    Ok(Selected { model, provider })
}

/// What the agent is made of: provider and model, tools, skills and prompt templates.
pub struct AgentParts {
    pub provider: Arc<dyn Provider>,
    pub model: ModelInfo,
    pub tools: ToolRegistry,
    pub resources: pi_observe::agent::resources::Resources,
}

/// `--provider`/`--model`/`--base-url`/`--models`/`--faux-script`, `--tools`, `--skills` and
/// `--prompt-templates`, checked.
pub fn agent_parts(args: &AgentArgs, prompt: &str, cwd: &Path) -> Result<AgentParts, CliError> {
    let Selected { model, provider } = select(args, prompt)?;
    let tools = tools(args.tools.as_deref())?;
    check_dirs("--skills", &args.skills)?;
    check_dirs("--prompt-templates", &args.prompt_templates)?;
    Ok(AgentParts { provider, model, tools, resources: resources(args, cwd) })
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

/// `--session PATH`, `--no-session`, or the default
/// `~/.pi/agent/sessions/--<cwd with '/' as '-'>--/<UTC time with ':' and '.' as '-'>.jsonl`.
/// An existing path must be a regular file (not a directory, FIFO or device).
pub fn session_path(args: &AgentArgs, cwd: &Path) -> Result<Option<PathBuf>, CliError> {
    if args.no_session {
        return Ok(None);
    }
    let path = match &args.session {
        Some(path) => path.clone(),
        None => {
            let agent = super::paths::agent_dir().unwrap_or_else(|| std::env::temp_dir().join(".pi/agent"));
            let slug = cwd.display().to_string().replace('/', "-");
            let stamp = pi_agent::time::iso8601(pi_agent::time::now_millis()).replace([':', '.'], "-");
            agent.join("sessions").join(format!("--{slug}--")).join(format!("{stamp}.jsonl"))
        }
    };
    match std::fs::metadata(&path) {
        Ok(meta) if !meta.is_file() => {
            Err(CliError::Usage(format!("--session: {} is not a regular file", path.display())))
        }
        _ => Ok(Some(path)),
    }
}

/// Opens (or creates) the session at `path`; a torn last line is moved aside and named.
pub fn open_session(path: &Path, cwd: &Path) -> Result<SessionWriter, CliError> {
    let writer = SessionWriter::open_or_create(path, cwd).map_err(|e| CliError::Usage(format!("--session: {e}")))?;
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

/// Skills and prompt templates: the `--skills` / `--prompt-templates` directories, then the
/// project's `.pi/` and the user's `~/.pi/agent/` ones. Skipped files are reported on stderr.
pub fn resources(agent: &super::args::AgentArgs, cwd: &std::path::Path) -> pi_observe::agent::resources::Resources {
    let agent_dir = super::paths::agent_dir();
    let dirs = |extra: &[std::path::PathBuf], leaf: &str| {
        let mut dirs = extra.to_vec();
        dirs.push(cwd.join(".pi").join(leaf));
        if let Some(agent_dir) = &agent_dir {
            dirs.push(agent_dir.join(leaf));
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
