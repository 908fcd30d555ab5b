//! Finding and starting extensions as upstream pi does: `~/.pi/agent/extensions/` (global),
//! `.pi/extensions/` (the project's — trusted projects only), the settings' `extensions` list,
//! and `-e PATH` (repeatable). Each entry is an executable (a process extension), a folder with
//! a `pi-extension.json` manifest (`{"command": ["python3", "main.py"], "timeoutMs": 5000,
//! "maxRestarts": 3}`), or a `.js`/`.mjs`/`.ts` file (run by the JavaScript host, when `node` is
//! on PATH). The managed policy can forbid every extension it does not list itself.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pi_agent::extensions::process::{
    ActionSink, ExtensionAction, ModelAccessHandle, ProcessExtension, ProcessSpec, model_wire,
};
use pi_agent::resources::Resources;
use serde_json::{Value, json};

use super::config::Config;
use super::{CliError, output};

/// The manifest file of a folder extension.
pub const MANIFEST: &str = "pi-extension.json";

/// One extension to start, and where it came from.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The file or folder.
    pub path: PathBuf,
    /// `-e`, `global`, `project`, `settings` or `managed`.
    pub origin: &'static str,
}

/// The extensions this run would start, in upstream's order — global folder, project folder
/// (trusted only), settings lists, `-e` flags — split into those that do not come with the
/// project (they answer `project_trust`) and the project's own (`.pi/extensions/` and the
/// project settings' list). Missing `-e` paths are usage errors; a policy that forbids
/// non-managed extensions drops the others (said once).
/// `(flags, only_flags)`: the `-e` paths, and `--no-extensions` (nothing else is looked for).
pub fn discover(
    (flags, only_flags): (&[PathBuf], bool),
    cfg: &Config,
    cwd: &Path,
) -> Result<(Vec<Candidate>, Vec<Candidate>), CliError> {
    let found = discover_all(flags, cfg, cwd)?;
    let found = found.into_iter().filter(|c| !only_flags || c.origin == "-e");
    Ok(found.partition(|c| c.origin != "project"))
}

fn discover_all(flags: &[PathBuf], cfg: &Config, cwd: &Path) -> Result<Vec<Candidate>, CliError> {
    let mut found = Vec::new();
    let add_dir = |dir: PathBuf, origin: &'static str, found: &mut Vec<Candidate>| {
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths.iter().flat_map(|p| entries_of(p)) {
            found.push(Candidate { path, origin });
        }
    };
    if let Some(agent) = &cfg.agent_dir {
        add_dir(agent.join("extensions"), "global", &mut found);
    }
    if cfg.trust.trusted {
        add_dir(cwd.join(".pi").join("extensions"), "project", &mut found);
    }
    for file in cfg.managed.iter().chain(cfg.settings.files()) {
        let origin = match file.scope {
            crate::cli::settings::Scope::Managed => "managed",
            crate::cli::settings::Scope::Project => "project",
            crate::cli::settings::Scope::Global => "settings",
        };
        for raw in file.doc.extensions.iter().flat_map(|e| &e.paths) {
            let path = Config::path_of(file, raw);
            // A listed path that runs nothing is still listed: it fails to load (named), never
            // silently skipped.
            let entries = entries_of(&path);
            if entries.is_empty() {
                found.push(Candidate { path, origin });
            }
            found.extend(entries.into_iter().map(|path| Candidate { path, origin }));
        }
    }
    for path in flags {
        if !path.exists() {
            return Err(CliError::Usage(format!("-e: {}: no such file or folder", path.display())));
        }
        let entries = entries_of(path);
        if entries.is_empty() {
            return Err(CliError::Usage(format!(
                "-e: {}: not an extension (a .js/.mjs/.ts file, an executable, or a folder with pi-extension.json, a package.json listing pi.extensions, or index.ts)",
                path.display()
            )));
        }
        found.extend(entries.into_iter().map(|path| Candidate { path, origin: "-e" }));
    }
    if !cfg.policy().allows_non_managed_extensions() {
        let refused: Vec<String> =
            found.iter().filter(|c| c.origin != "managed").map(|c| c.path.display().to_string()).collect();
        if !refused.is_empty() {
            cfg.notice(format!("the managed policy allows only its own extensions: {} not loaded", refused.join(", ")));
        }
        found.retain(|c| c.origin == "managed");
    }
    let mut seen = std::collections::HashSet::new();
    found.retain(|c| seen.insert(std::fs::canonicalize(&c.path).unwrap_or_else(|_| c.path.clone())));
    Ok(found)
}

/// What `path` runs as extensions, upstream's way: a file (script or executable) is itself; a
/// folder is its `pi-extension.json` process, else the entries its `package.json` lists under
/// `pi.extensions` (relative to it), else its `index.ts` / `index.js` / `index.mjs`. Empty: not
/// an extension (a folder of something else).
fn entries_of(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return if is_script(path) || is_executable(path) { vec![path.to_path_buf()] } else { Vec::new() };
    }
    if path.join(MANIFEST).is_file() {
        return vec![path.to_path_buf()];
    }
    let listed = std::fs::read_to_string(path.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|package| {
            let entries = package.get("pi")?.get("extensions")?.as_array()?.clone();
            Some(entries.iter().filter_map(|e| e.as_str().map(|e| path.join(e))).collect::<Vec<_>>())
        });
    if let Some(listed) = listed {
        return listed;
    }
    ["index.ts", "index.js", "index.mjs"].iter().map(|name| path.join(name)).filter(|p| p.is_file()).take(1).collect()
}

fn is_script(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("js" | "mjs" | "ts"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Where the extensions' `ctx.ui` calls go in this process (its mode's UI; see [`attach_ui`]).
static UI: std::sync::OnceLock<pi_agent::extensions::process::UiHandle> = std::sync::OnceLock::new();

/// Makes `ui` answer the `ctx.ui` calls of every extension this process starts from now on
/// (one mode per process: RPC attaches upstream's `extension_ui_request` sub-protocol).
pub fn attach_ui(ui: pi_agent::extensions::process::UiHandle) {
    let _ = UI.set(ui);
}

/// Where the extensions' [`ExtensionAction`]s go in this process (see [`attach_actions`]).
static ACTIONS: std::sync::OnceLock<ActionSink> = std::sync::OnceLock::new();

/// Makes this process's long-lived mode (RPC, interactive) receive what every extension it
/// starts from now on asks it to do (`ctx.compact`, `ctx.shutdown`, `ctx.reload`,
/// `pi.sendUserMessage` outside a command); see [`Driver::run`](super::modes::driver::Driver::run).
pub fn attach_actions() -> tokio::sync::mpsc::UnboundedReceiver<ExtensionAction> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let _ = ACTIONS.set(tx);
    rx
}

/// The models and credentials extensions may read (see [`attach_models`]).
static MODELS: std::sync::OnceLock<ModelAccessHandle> = std::sync::OnceLock::new();

/// Upstream's `ctx.modelRegistry` for the extensions this process starts: the model table of
/// this run (built-in, `models.json`, `--models`) and, asked per model, the credentials pi would
/// send it (`models.json` values resolved, else the provider's key variable).
/// The table is read when the first extension starts (runs without extensions never read it).
pub fn attach_models(args: &crate::cli::args::AgentArgs, cfg: &Config) {
    let files = (cfg.agent_dir.as_ref().map(|d| d.join("models.json")), args.models_file.clone());
    let _ = MODELS.set(ModelAccessHandle(std::sync::Arc::new(RegistryAccess { files, table: Default::default() })));
}

struct RegistryAccess {
    /// `models.json` of the agent folder, `--models`.
    files: (Option<PathBuf>, Option<PathBuf>),
    /// The table and its models in upstream's shape, read once.
    table: std::sync::OnceLock<(pi_agent::model::Registry, Value)>,
}

impl RegistryAccess {
    /// The built-in table with the files over it (what they get wrong pi's own run already said).
    fn table(&self) -> &(pi_agent::model::Registry, Value) {
        self.table.get_or_init(|| {
            let mut registry = pi_agent::model::Registry::builtin();
            for file in [&self.files.0, &self.files.1].into_iter().flatten().filter(|f| f.exists()) {
                registry = registry.clone().with_overrides(file).unwrap_or(registry);
            }
            let models = Value::Array(registry.models().iter().map(model_wire).collect());
            (registry, models)
        })
    }
}

impl pi_agent::extensions::process::ModelAccess for RegistryAccess {
    fn models(&self) -> Value {
        self.table().1.clone()
    }

    fn credentials(&self, provider: &str, id: &str) -> Result<pi_agent::extensions::process::Credentials, String> {
        let registry = &self.table().0;
        let model = registry.find(provider, id).ok_or_else(|| format!("no model {provider}/{id}"))?;
        let resolve = |raw: &str| pi_agent::model::resolve_value(raw);
        let mut headers = Vec::new();
        let mut api_key = None;
        if let Some(auth) = &model.auth {
            api_key = auth.api_key.as_deref().map(resolve).transpose()?;
            for (name, raw) in &auth.headers {
                headers.push((name.clone(), resolve(raw)?));
            }
        }
        if api_key.is_none() {
            api_key =
                registry.api_key_var(provider).and_then(|var| std::env::var(var).ok()).filter(|k| !k.trim().is_empty());
        }
        Ok((api_key, headers))
    }
}

/// `--name [value]` options pi does not know, for extensions' `pi.registerFlag` (see
/// [`split_extension_flags`]).
static EXTENSION_FLAGS: std::sync::OnceLock<Vec<(String, Option<String>)>> = std::sync::OnceLock::new();

/// Upstream's extension flags: the long options of a run (no subcommand) that `command` does not
/// know are taken out of `argv` for the extensions — `--name=value`, `--name value` (the next
/// argument, when it is not an option) or `--name` alone. Whether an extension registered each
/// is checked once they are loaded ([`check_extension_flags`]).
pub fn split_extension_flags(
    command: &clap::Command,
    argv: Vec<std::ffi::OsString>,
) -> (Vec<std::ffi::OsString>, Vec<(String, Option<String>)>) {
    let known = |name: &str| {
        name == "help"
            || name == "version"
            || command
                .get_arguments()
                .any(|a| a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name)))
    };
    let subcommand = |arg: &str| command.get_subcommands().any(|s| s.get_name() == arg);
    let (mut kept, mut flags) = (Vec::with_capacity(argv.len()), Vec::new());
    let mut args = argv.into_iter().peekable();
    kept.extend(args.next());
    while let Some(arg) = args.next() {
        let Some(text) = arg.to_str() else {
            kept.push(arg);
            continue;
        };
        if text == "--" || subcommand(text) {
            kept.push(arg);
            kept.extend(args);
            break;
        }
        let Some(option) = text.strip_prefix("--").filter(|o| !o.is_empty()) else {
            kept.push(arg);
            continue;
        };
        let (name, value) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (option, None),
        };
        if known(name) {
            kept.push(arg);
            continue;
        }
        let value = value.or_else(|| {
            let next = args.peek()?.to_str()?;
            (!next.starts_with('-')).then(|| next.to_owned()).inspect(|_| {
                args.next();
            })
        });
        flags.push((name.to_owned(), value));
    }
    (kept, flags)
}

/// Keeps the extension flags of this run (once).
pub fn set_extension_flags(flags: Vec<(String, Option<String>)>) {
    let _ = EXTENSION_FLAGS.set(flags);
}

/// Every extension flag of the command line is one a loaded extension registered; otherwise
/// the option is unknown (a usage error naming it).
pub fn check_extension_flags(started: &[ProcessExtension]) -> Result<(), CliError> {
    let given = EXTENSION_FLAGS.get().map(Vec::as_slice).unwrap_or_default();
    let registered = |name: &str| started.iter().any(|e| e.registration().flags.iter().any(|f| f.name == name));
    match given.iter().find(|(name, _)| !registered(name)) {
        None => Ok(()),
        Some((name, _)) => {
            Err(CliError::Usage(format!("unexpected argument '--{name}' (neither pi nor a loaded extension takes it)")))
        }
    }
}

/// How to run `candidate`, or why it cannot be run.
pub fn spec(candidate: &Candidate, cwd: &Path, cfg: &Config) -> Result<ProcessSpec, String> {
    let path = &candidate.path;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("extension").to_owned();
    let log = cfg.agent_dir.as_ref().map(|d| d.join("logs").join("extensions").join(format!("{stem}.log")));
    let mut spec = if path.is_dir() {
        let manifest = path.join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let value: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", manifest.display()))?;
        let command: Vec<String> = value
            .get("command")
            .and_then(Value::as_array)
            .map(|c| c.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .filter(|c: &Vec<String>| !c.is_empty())
            .ok_or_else(|| format!("{}: command: expected a non-empty list of strings", manifest.display()))?;
        let program = PathBuf::from(&command[0]);
        // A relative program with a path (`./main.py`) is the folder's; a bare name is on PATH.
        let program =
            if program.components().count() > 1 && program.is_relative() { path.join(program) } else { program };
        let mut spec = ProcessSpec::new(program, path, cwd);
        spec.args = command[1..].to_vec();
        spec.args = spec
            .args
            .iter()
            .map(|a| if a.starts_with("./") { path.join(a).display().to_string() } else { a.clone() })
            .collect();
        if let Some(ms) = value.get("timeoutMs").and_then(Value::as_u64) {
            spec.timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(n) = value.get("maxRestarts").and_then(Value::as_u64) {
            spec.max_restarts = u32::try_from(n).unwrap_or(u32::MAX);
        }
        spec
    } else if is_script(path) {
        let node = which("node").ok_or("JavaScript extensions need `node` on PATH")?;
        let host = js_host(cfg).map_err(|e| format!("cannot write the JavaScript host: {e}"))?;
        // A folder extension's other files may be the ones importing upstream's packages.
        let folder = path.parent().filter(|dir| {
            dir.join("package.json").is_file() || path.file_stem().and_then(|s| s.to_str()) == Some("index")
        });
        let js_dir = host.parent().unwrap_or(Path::new("."));
        super::js_packages::ensure_for(path, folder, js_dir)?;
        let mut spec = ProcessSpec::new(node, path, cwd);
        // The host's module loader asks this binary to compile each TypeScript module.
        let pi = std::env::current_exe().map_err(|e| format!("cannot find pi's own executable: {e}"))?;
        spec.args = vec![host.display().to_string(), path.display().to_string(), pi.display().to_string()];
        spec
    } else if is_executable(path) {
        ProcessSpec::new(path, path, cwd)
    } else {
        return Err("not an executable, a folder with pi-extension.json, or a .js/.mjs/.ts file".into());
    };
    spec.stderr_log = log;
    spec.ui = UI.get().cloned();
    spec.actions = ACTIONS.get().cloned();
    spec.models = MODELS.get().cloned();
    if let Some(flags) = EXTENSION_FLAGS.get().filter(|f| !f.is_empty()) {
        let given: serde_json::Map<String, Value> = flags
            .iter()
            .map(|(name, value)| (name.clone(), value.clone().map_or(Value::Bool(true), Value::String)))
            .collect();
        spec.env.push(("PI_EXTENSION_FLAGS".into(), Value::Object(given).to_string()));
    }
    spec.origin = if candidate.origin == "-e" { "flag" } else { candidate.origin };
    Ok(spec)
}

/// Upstream's `project_trust`: when the project has resources nobody trusted yet, the
/// extensions that do not come with it answer, in load order; the first `yes` or `no` decides.
/// `Some(config)` is the configuration reloaded with the project trusted.
pub async fn ask_project_trust(extensions: &[ProcessExtension], cfg: &Config) -> Result<Option<Config>, CliError> {
    use pi_agent::extensions::Extension;
    if cfg.trust.reason != crate::cli::settings::trust::TrustReason::Untrusted {
        return Ok(None);
    }
    for extension in extensions {
        match extension.project_trust(&cfg.trust.project).await {
            (Some(true), remember) => {
                cfg.notice(format!(
                    "extension {} trusts project {}{}",
                    extension.name(),
                    cfg.trust.project.display(),
                    if remember { " (remembered)" } else { " for this run" }
                ));
                return Config::load_trusted_by_extension(&cfg.trust.project, remember).map(Some);
            }
            (Some(false), _) => return Ok(None),
            (None, _) => {}
        }
    }
    Ok(None)
}

/// Upstream's `resources_discover`: the skill and prompt-template folders the extensions add.
/// `reason` is upstream's: `startup` or `reload`.
/// What the extensions bring to a run — one assembly for its start and for `/reload`.
pub struct Assembled {
    /// The extensions started, those from outside the project first.
    pub extensions: Vec<ProcessExtension>,
    /// The built-in tools with the extensions' tools over them.
    pub tools: pi_agent::tools::ToolRegistry,
    /// The skills and prompt templates of the folders and of the extensions.
    pub resources: pi_agent::resources::Resources,
    /// One line for each listed extension that could not be loaded (see [`on_load_failures`]).
    pub failures: Vec<String>,
}

/// Starts the extensions of `outside` (unless `early` already holds them: started for the
/// trust question) and of `project`; their tools override `tools`; the skills and templates
/// they discover (`reason`: `startup`, `reload`) join the folders'.
pub async fn assemble(
    args: &crate::cli::args::AgentArgs,
    cfg: &Config,
    cwd: &Path,
    (outside, project): (Vec<Candidate>, Vec<Candidate>),
    early: Option<Vec<ProcessExtension>>,
    tools: pi_agent::tools::ToolRegistry,
    reason: &str,
) -> Assembled {
    let (mut started, mut failures) = match early {
        Some(started) => (started, Vec::new()),
        None => start(outside, cfg, cwd).await,
    };
    let (more, more_failures) = start(project, cfg, cwd).await;
    started.extend(more);
    failures.extend(more_failures);
    let tools = started.iter().flat_map(|e| e.tools()).fold(tools, |tools, tool| tools.with_override(tool));
    // `--no-tools`: extensions' tools are off too (unless `--tools` named some).
    let tools = if args.no_tools && args.tools.is_none() { tools.with_active(&[]) } else { tools };
    let (skills, prompts) = discovered_resources(&started, cwd, reason).await;
    let resources = crate::cli::setup::resources(args, cwd, cfg, (&skills, &prompts));
    Assembled { extensions: started, tools, resources, failures }
}

pub async fn discovered_resources(
    extensions: &[ProcessExtension],
    cwd: &Path,
    reason: &str,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut skills, mut prompts) = (Vec::new(), Vec::new());
    for extension in extensions {
        let (s, p) = extension.resources_discover(cwd, reason).await;
        skills.extend(s);
        prompts.extend(p);
    }
    (skills, prompts)
}

/// `/name args` when an extension registered command `name`: its outcome (text to print, prompt
/// to run instead); `None` when the prompt is not such a command. `at`: the working directory and
/// the session file the command's `ctx.sessionManager` reads; `resources`: the skills and
/// templates `pi.getCommands()` lists with the extensions' commands.
pub async fn run_command(
    extensions: &[ProcessExtension],
    (resources, model): (&Resources, &pi_agent::model::ModelInfo),
    prompt: &str,
    (cwd, session_file): (&Path, Option<&str>),
) -> Option<Result<(Option<String>, Option<String>), String>> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let more = json!({"commands": slash_commands(extensions, resources), "model": model_wire(model)});
    for extension in extensions {
        if let Some(outcome) = extension.command(name, args.trim(), (cwd, session_file, &more)).await {
            return Some(outcome.map_err(|e| e.to_string()));
        }
    }
    None
}

/// Runs the handler an extension registered for `key` (upstream's key id); `None` when none did.
pub async fn run_shortcut(
    extensions: &[ProcessExtension],
    (resources, model): (&Resources, &pi_agent::model::ModelInfo),
    key: &str,
    (cwd, session_file): (&Path, Option<&str>),
) -> Option<Result<(), String>> {
    let more = json!({"commands": slash_commands(extensions, resources), "model": model_wire(model)});
    for extension in extensions {
        if let Some(outcome) = extension.shortcut(key, (cwd, session_file, &more)).await {
            return Some(outcome.map_err(|e| e.to_string()));
        }
    }
    None
}

/// Upstream's `SlashCommandInfo` list (`pi.getCommands()`): extension commands, prompt
/// templates, skills (`skill:name`), each with its source file.
pub fn slash_commands(extensions: &[ProcessExtension], resources: &Resources) -> Value {
    let info = |name: &str, description: &str, source: &str, path: &Path| {
        json!({"name": name, "description": description, "source": source,
               "sourceInfo": {"path": path, "source": source, "scope": "user", "origin": "top-level"}})
    };
    let commands = extensions
        .iter()
        .flat_map(|e| e.registration().commands.iter().map(|c| info(&c.name, &c.description, "extension", e.source())));
    let templates = resources.templates.iter().map(|t| info(&t.name, &t.description, "prompt", &t.path));
    let skills = resources.skills.iter().map(|s| info(&format!("skill:{}", s.name), &s.description, "skill", &s.path));
    Value::Array(commands.chain(templates).chain(skills).collect())
}

/// The JavaScript host shipped with pi (`js/host.mjs`) and its module loader (`js/loader.mjs`).
const JS_HOST: &str = include_str!("../../js/host.mjs");
const JS_LOADER: &str = include_str!("../../js/loader.mjs");

/// Writes the JavaScript host and its loader to `<agent dir>/js/{host,loader}-<version>.mjs`
/// (once per version) and returns the host's path.
fn js_host(cfg: &Config) -> std::io::Result<PathBuf> {
    let dir = cfg.agent_dir.clone().unwrap_or_else(std::env::temp_dir).join("js");
    let version = env!("CARGO_PKG_VERSION");
    for (name, text) in [("loader", JS_LOADER), ("host", JS_HOST)] {
        let path = dir.join(format!("{name}-{version}.mjs"));
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".{name}-{}.tmp", std::process::id()));
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, &path)?;
        }
    }
    Ok(dir.join(format!("host-{version}.mjs")))
}

/// `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|p| is_executable(p)))
}

/// Starts every discovered extension; for each one that cannot start, one line naming it and
/// why (what the run does about it: [`on_load_failures`]).
pub async fn start(candidates: Vec<Candidate>, cfg: &Config, cwd: &Path) -> (Vec<ProcessExtension>, Vec<String>) {
    let (mut started, mut failures) = (Vec::new(), Vec::new());
    for candidate in candidates {
        let spec = match spec(&candidate, cwd, cfg) {
            Ok(spec) => spec,
            Err(why) => {
                failures.push(format!("extension {}: {why}", candidate.path.display()));
                continue;
            }
        };
        match ProcessExtension::start(spec).await {
            Ok(extension) => {
                let register = extension.registration();
                if !register.ignored_events.is_empty() {
                    output::error(format_args!(
                        "pi: extension {}: ignoring events this pi does not know: {}",
                        register.name,
                        register.ignored_events.join(", ")
                    ));
                }
                started.push(extension);
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    (started, failures)
}

/// What listed extensions that failed to load do to the run (`extensions.onLoadError`): by
/// default the run stops — an error (exit 2) naming the first, or, with a UI (`has_ui`), the
/// failures returned for a dialog the user must dismiss; with `"warn"` each is one stderr line
/// and the run goes on without it. A gate is never silently absent.
pub fn on_load_failures(cfg: &Config, failures: Vec<String>, has_ui: bool) -> Result<Vec<String>, CliError> {
    use crate::cli::settings::OnLoadError;
    let policy = cfg.find(&crate::cli::config::keys::EXTENSIONS_ON_LOAD_ERROR).map(|(p, _)| p).unwrap_or_default();
    match (policy, failures.first()) {
        (_, None) => Ok(failures),
        (OnLoadError::Warn, _) => {
            for failure in &failures {
                output::error(format_args!("pi: {failure}; not loaded"));
            }
            Ok(Vec::new())
        }
        (OnLoadError::Stop, _) if has_ui => Ok(failures),
        (OnLoadError::Stop, Some(first)) => {
            let more = match failures.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            Err(CliError::Usage(format!(
                "{first}{more}: not running without a listed extension (settings extensions.onLoadError: \"warn\" runs without it)"
            )))
        }
    }
}
