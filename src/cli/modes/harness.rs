//! What every agent mode (print, RPC, interactive) builds before its first prompt and tears down
//! after its last: the configuration decided (an untrusted project's trust asked of the
//! extensions first), the sinks attached, the session opened, the extensions started and the
//! agent assembled — one harness, so every mode's prompts are traces alike.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_agent::extensions::process::ProcessExtension;
use pi_agent::{Agent, AgentConfig, PromptSource};
use pi_observe::core::{
    Attribution, EventKind, ObsEvent, Observability, Starts, Subscriber, TraceId, TraceParent, names,
};

use crate::cli::args::{AgentArgs, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::sinks::{SinkSetup, Sinks};
use crate::cli::{CliError, attribution, extensions, files, output, setup};

/// A mode's agent with everything around it.
pub struct Harness {
    /// The hub every prompt's records go through.
    pub hub: Observability,
    /// The attached sinks (finished by [`Harness::finish`]).
    pub sinks: Sinks,
    /// The agent.
    pub agent: Agent,
    /// The started extensions (stopped by [`Harness::finish`]).
    pub extensions: Vec<ProcessExtension>,
    /// Who the prompts are attributed to.
    pub attribution: Attribution,
    /// `TRACEPARENT` given at start (see [`Harness::scope`]).
    pub traceparent: Option<String>,
    /// The trace id of every prompt so far, in order.
    pub traces: Arc<Mutex<Vec<TraceId>>>,
    /// Listed extensions that failed to load, for the interactive mode's dialog (other modes
    /// stop before a harness exists; see `extensions::on_load_failures`).
    pub load_failures: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The configuration after an extension trusted the project (else the one loaded at start).
    pub reloaded: Option<Config>,
    /// Prompts started (the first one gets `TRACEPARENT`).
    prompts: std::sync::atomic::AtomicUsize,
}

/// How a mode wants its harness.
pub struct Wants {
    /// Print contract records as JSON lines on stdout (`--mode json`).
    pub json_records: bool,
    /// `input.source` of the prompts.
    pub source: PromptSource,
    /// Extensions may ask the user (interactive, RPC).
    pub has_ui: bool,
    /// A listed extension that fails to load is a dialog to dismiss (the interactive mode)
    /// rather than an error that stops the run.
    pub dialog: bool,
}

impl Harness {
    /// The start of a long-lived mode (interactive, RPC): a stop token that SIGINT, SIGTERM and
    /// SIGHUP cancel (with what fired), and the harness for prompts from `source`.
    pub async fn long_lived(
        args: &AgentArgs,
        observe: &ObserveArgs,
        source: PromptSource,
        cfg: &Config,
    ) -> Result<(tokio_util::sync::CancellationToken, crate::cli::signals::Interrupted, Harness), CliError> {
        let stop = tokio_util::sync::CancellationToken::new();
        let interrupted = crate::cli::signals::abort_on(&stop)?;
        let dialog = matches!(source, PromptSource::Interactive);
        let wants = Wants { json_records: false, source, has_ui: false, dialog };
        Ok((stop, interrupted, Harness::build(args, observe, wants, cfg).await?))
    }

    /// Builds the harness; nothing is created or written before the flags, files and settings
    /// are checked.
    pub async fn build(args: &AgentArgs, observe: &ObserveArgs, wants: Wants, cfg: &Config) -> Result<Self, CliError> {
        let cwd = setup::cwd(args.cwd.as_deref())?;
        extensions::attach_models(args, cfg);
        let dialog = wants.dialog;
        let (early, reloaded) = trust_question(args, cfg, &cwd, dialog).await?;
        let cfg = reloaded.as_ref().unwrap_or(cfg);
        cfg.announce_trust();
        let sink_setup = SinkSetup::resolve(&observe.sinks, observe.events_jsonl.as_deref(), cfg)?;
        let session_path = setup::session_path(args, &cwd, cfg)?;
        let fork_source = setup::fork_source(args, cfg)?;
        let inputs: Vec<(&str, &std::path::Path)> = session_path.iter().map(|p| ("--session", p.as_path())).collect();
        files::check_outputs(&inputs, &sink_setup.output_files())?;
        let attribution = attribution::attribution(observe, cfg, &cwd)?;
        // With the configuration decided: what comes with the project (and, when no trust
        // question started them early, the others).
        let (outside, project) = extensions::discover((&args.extensions, args.no_extensions), cfg, &cwd)?;
        // `--provider NAME` that pi does not know may be one an extension serves: known once
        // they started (the faux provider holds the place until then).
        let an_extension_may_serve = !(outside.is_empty() && project.is_empty() && early.is_none());
        let (mut parts, unknown_provider) = agent_parts_or_held(args, cfg, an_extension_may_serve)?;
        let Attached { hub, sinks, traces, session } =
            attach_and_open(sink_setup, wants.json_records, session_path, fork_source.as_deref(), &cwd)?;
        let mut config = AgentConfig { source: wants.source, has_ui: wants.has_ui, ..setup::agent_config(args, cfg) };
        if !parts.model.reasoning {
            // A thinking level is only for models that reason (others reject the parameter).
            config.reasoning = None;
        }
        // Extensions start with the session and stop on `session_shutdown`.
        let (early, early_failures) = early.unzip();
        let extensions::Assembled { extensions: started, tools, resources, mut failures } =
            extensions::assemble(args, cfg, &cwd, (outside, project), early, parts.tools, "startup").await;
        failures.splice(0..0, early_failures.into_iter().flatten());
        let load_failures = match loaded(cfg, &started, failures, dialog).await {
            Ok(shown) => shown,
            Err(error) => {
                sinks.close();
                return Err(error);
            }
        };
        if let Some(error) = unknown_provider {
            match extension_provider(&started, args) {
                Some((provider, model)) => (parts.provider, parts.model) = (provider, model),
                None => {
                    for extension in &started {
                        extension.shutdown().await;
                    }
                    sinks.close();
                    return Err(error);
                }
            }
        }
        if args.verbose {
            say_start(&parts.model, &tools, &started, &resources, session.as_ref().map(|s| s.path()));
        }
        let mut agent = Agent::new(parts.provider, parts.model, tools, session, config, cwd.clone());
        agent.set_resources(resources);
        for extension in &started {
            agent.add_extension(extension);
        }
        Ok(Harness {
            hub,
            sinks,
            agent,
            extensions: started,
            attribution,
            traceparent: incoming_traceparent(),
            traces,
            cwd,
            reloaded,
            prompts: Default::default(),
            load_failures,
        })
    }

    /// The scope a prompt runs in: this hub, the attribution, and — for the **first** prompt of
    /// the process only — the `TRACEPARENT` given at start as its parent. Later prompts are
    /// traces of their own: a caller's span covers what it asked for, not a whole interactive
    /// day (ADR 0011).
    pub fn prompt_scope(&self) -> pi_observe::core::Scope {
        let first = self.prompts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
        let traceparent = if first { self.traceparent.as_deref() } else { None };
        pi_observe::core::Scope::new().attribution(self.attribution.clone()).traceparent(traceparent)
    }

    /// The scope of work that is not a prompt (compaction, navigation, a session switch): this
    /// hub and the attribution, never the incoming parent.
    pub fn scope(&self) -> pi_observe::core::Scope {
        pi_observe::core::Scope::new().attribution(self.attribution.clone())
    }

    /// The trace ids of the prompts so far.
    pub fn trace_ids(&self) -> Vec<TraceId> {
        self.traces.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops the extensions, then flushes (or spools) and reports the sinks for `command`.
    ///
    /// The process ends next, so the agent (its conversation, tools, provider) and the hub (its
    /// subscribers and their buffers) are not freed one allocation at a time: the operating
    /// system takes their memory back at once. Every file they wrote is complete by now (session
    /// lines are written whole as they come, the sinks were just closed, the extensions stopped).
    pub async fn finish(self, command: &str) {
        for extension in &self.extensions {
            extension.shutdown().await;
        }
        let traces = self.trace_ids();
        let Harness { sinks, agent, hub, .. } = self;
        sinks.finish(command, &traces);
        std::mem::forget(agent);
        std::mem::forget(hub);
    }
}

/// The agent's provider, model and tools; when `--provider` names none pi knows and an extension
/// may serve it (`an_extension_may_serve`), the faux provider holds the place until the extensions
/// have started, with the error to give if none serves it.
fn agent_parts_or_held(
    args: &AgentArgs,
    cfg: &Config,
    an_extension_may_serve: bool,
) -> Result<(setup::AgentParts, Option<CliError>), CliError> {
    match setup::agent_parts(args, cfg) {
        Ok(parts) => Ok((parts, None)),
        Err(error) if args.provider.is_some() && an_extension_may_serve => {
            let held = setup::select_named(args, cfg, Some("faux".into()), None)?;
            let tools = setup::tools(args.tools.as_deref())?;
            Ok((setup::AgentParts { provider: held.provider, model: held.model, tools }, Some(error)))
        }
        Err(error) => Err(error),
    }
}

/// The hub with the sinks attached, the prompts' trace ids they watch, and the session.
struct Attached {
    hub: Observability,
    sinks: Sinks,
    traces: Arc<Mutex<Vec<TraceId>>>,
    session: Option<pi_agent::session::SessionWriter>,
}

/// Attaches the sinks — with the watcher of the prompts' trace ids — then opens the session at
/// `session_path` (so its `pi.session.read` reaches them); a session that cannot be opened
/// closes the sinks again.
fn attach_and_open(
    sink_setup: SinkSetup,
    json_records: bool,
    session_path: Option<PathBuf>,
    fork_source: Option<&std::path::Path>,
    cwd: &std::path::Path,
) -> Result<Attached, CliError> {
    let hub = sink_setup.hub();
    let traces = Arc::new(Mutex::new(Vec::new()));
    let watcher: Arc<dyn Subscriber> = Arc::new(PromptTraces(traces.clone()));
    let sinks = sink_setup.attach_with(&hub, json_records, Some(watcher))?;
    let opened = session_path.map(|path| hub.in_scope(|| setup::session_at(&path, fork_source, cwd)));
    match opened.transpose() {
        Ok(session) => Ok(Attached { hub, sinks, traces, session }),
        Err(error) => {
            sinks.close();
            Err(error)
        }
    }
}

/// `TRACEPARENT` from the environment; an invalid one is a warning and a new trace.
fn incoming_traceparent() -> Option<String> {
    let traceparent = std::env::var(names::ENV_TRACEPARENT).ok().filter(|v| !v.is_empty())?;
    if TraceParent::parse(&traceparent).is_none() {
        output::error(format_args!(
            "pi: warning: {}: not a valid W3C traceparent; starting a new trace",
            names::ENV_TRACEPARENT
        ));
    }
    Some(traceparent)
}

/// Extensions started early with what failed to load, and the configuration a trust answer
/// reloaded.
type Early = (Option<(Vec<ProcessExtension>, Vec<String>)>, Option<Config>);

/// A project nobody trusted yet: the extensions that do not come with it start now and may
/// answer upstream's `project_trust` before anything of the project is read.
async fn trust_question(
    args: &AgentArgs,
    cfg: &Config,
    cwd: &std::path::Path,
    dialog: bool,
) -> Result<Early, CliError> {
    if cfg.trust.reason != crate::cli::settings::trust::TrustReason::Untrusted {
        return Ok((None, None));
    }
    let (outside, _) = extensions::discover((&args.extensions, args.no_extensions), cfg, cwd)?;
    let (started, failures) = extensions::start(outside, cfg, cwd).await;
    // Said (or refused) now; what is left is for the dialog.
    let failures = loaded(cfg, &started, failures, dialog).await?;
    let reloaded = extensions::ask_project_trust(&started, cfg).await?;
    Ok((Some((started, failures)), reloaded))
}

/// `--verbose`: one stderr line each for the model, the tools, the extensions, the skills and
/// prompt templates, and the session file of this run.
fn say_start(
    model: &pi_agent::model::ModelInfo,
    tools: &pi_agent::tools::ToolRegistry,
    extensions: &[ProcessExtension],
    resources: &pi_agent::resources::Resources,
    session: Option<&std::path::Path>,
) {
    let names = |list: Vec<String>| if list.is_empty() { "none".to_owned() } else { list.join(", ") };
    let say = |what: &str, list: String| crate::cli::output::error(format_args!("pi: {what}: {list}"));
    say("model", format!("{}/{}", model.provider, model.id));
    say("tools", names(tools.active_names()));
    say("extensions", names(extensions.iter().map(|e| e.source().display().to_string()).collect()));
    say("skills", names(resources.skills.iter().map(|s| s.name.clone()).collect()));
    say("prompt templates", names(resources.templates.iter().map(|t| t.name.clone()).collect()));
    say("context files", names(resources.context_files.iter().map(|f| f.path.display().to_string()).collect()));
    say("session", session.map_or("none (--no-session)".to_owned(), |p| p.display().to_string()));
}

/// The provider `--provider` names when an extension serves it (upstream's `registerProvider`),
/// with `--model` among its models (else its first).
fn extension_provider(
    started: &[ProcessExtension],
    args: &AgentArgs,
) -> Option<(Arc<dyn pi_agent::provider::Provider>, pi_agent::model::ModelInfo)> {
    let name = args.provider.as_deref()?;
    let (models, provider) = started.iter().find_map(|e| e.provider(name))?;
    let model = match args.model.as_deref() {
        Some(id) => models.into_iter().find(|m| m.id == id)?,
        None => models.into_iter().next()?,
    };
    Some((provider, model))
}

/// [`extensions::on_load_failures`]; when the run does not go ahead, the extensions already
/// started are stopped.
async fn loaded(
    cfg: &Config,
    started: &[ProcessExtension],
    failures: Vec<String>,
    dialog: bool,
) -> Result<Vec<String>, CliError> {
    let outcome = extensions::on_load_failures(cfg, failures, dialog)
        .and_then(|f| extensions::check_extension_flags(started).map(|()| f));
    if outcome.is_err() {
        for extension in started {
            extension.shutdown().await;
        }
    }
    outcome
}

/// Collects the trace id of each prompt as it starts. Reads names and ids only (with no sink
/// attached, no payload is built at all) and needs no other operation's start record (so a
/// sink that pairs spans from their ends gets one record per operation).
struct PromptTraces(Arc<Mutex<Vec<TraceId>>>);

impl Subscriber for PromptTraces {
    fn on_event(&self, event: &ObsEvent) {
        if event.name == names::AGENT_PROMPT && event.kind == EventKind::Start {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(event.trace_id);
        }
    }

    fn wants_payloads(&self) -> bool {
        false
    }

    fn starts(&self) -> Starts {
        Starts::Only(&[names::AGENT_PROMPT])
    }

    fn begin_shutdown(&self, _timeout: std::time::Duration) -> bool {
        true
    }
}
