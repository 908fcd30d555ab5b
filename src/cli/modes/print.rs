//! `pi -p PROMPT`: one prompt in print mode.

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use pi_agent::events::AgentEvent;
use pi_agent::message::StopReason;
use pi_agent::{Agent, AgentConfig, PromptResult, PromptSource};
use pi_observe::core::{ObsEvent, Scope, TraceId, TraceParent, names};
use tokio_util::sync::CancellationToken;

use crate::cli::args::{AgentArgs, Mode, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::sinks::SinkSetup;
use crate::cli::{CliError, attribution, files, output, setup, signals};

/// Everything a print-mode run needs, checked before anything is created or written.
struct Plan {
    agent: Agent,
    attribution: pi_observe::core::Attribution,
    traceparent: Option<String>,
}

pub async fn run(
    agent: &AgentArgs,
    observe: &ObserveArgs,
    mode: Mode,
    prompt: &str,
    cfg: &Config,
) -> Result<ExitCode, CliError> {
    use crate::cli::extensions;
    if prompt.trim().is_empty() {
        return Err(CliError::Usage("-p: the prompt is empty".into()));
    }
    let cwd = setup::cwd(agent.cwd.as_deref())?;
    // A project nobody trusted yet: the extensions that do not come with it start now and may
    // answer upstream's `project_trust` before anything of the project is read.
    let (early, reloaded) = if cfg.trust.reason == pi_agent::settings::trust::TrustReason::Untrusted {
        let (outside, _) = extensions::discover(&agent.extensions, cfg, &cwd)?;
        let started = extensions::start(outside, cfg, &cwd).await;
        let reloaded = extensions::ask_project_trust(&started, cfg).await?;
        (Some(started), reloaded)
    } else {
        (None, None)
    };
    let cfg = reloaded.as_ref().unwrap_or(cfg);
    cfg.announce_trust();
    let sink_setup = SinkSetup::resolve(&observe.sinks, observe.events_jsonl.as_deref(), cfg)?;
    let session_path = setup::session_path(agent, &cwd, cfg)?;
    let inputs: Vec<(&str, &std::path::Path)> = session_path.iter().map(|p| ("--session", p.as_path())).collect();
    files::check_outputs(&inputs, &sink_setup.output_files())?;
    let attribution = attribution::attribution(observe, cfg, &cwd)?;
    // With the configuration decided: what comes with the project (and, when no trust question
    // started them early, the others).
    let (outside, project) = extensions::discover(&agent.extensions, cfg, &cwd)?;
    let agent_parts = setup::agent_parts(agent, prompt, &cwd, cfg)?;

    // The sinks are attached before the session is opened, so its `pi.session.read` reaches them.
    let hub = sink_setup.hub();
    let mut sinks = sink_setup.attach(&hub, mode == Mode::Json)?;
    let session = match session_path.map(|path| hub.in_scope(|| setup::open_session(&path, &cwd))).transpose() {
        Ok(session) => session,
        Err(error) => {
            sinks.close();
            return Err(error);
        }
    };
    let trace = Arc::new(OnceLock::new());
    let root = trace.clone();
    sinks.keep(hub.subscribe(move |e: &ObsEvent| {
        if e.name == names::AGENT_PROMPT {
            let _ = root.set(e.trace_id);
        }
    }));
    let mut config = AgentConfig { source: PromptSource::Interactive, ..setup::agent_config(agent, cfg) };
    if !agent_parts.model.reasoning {
        // A thinking level is only for models that reason (others reject the parameter).
        config.reasoning = None;
    }
    // Extensions start with the session and stop on `session_shutdown`.
    let mut extensions = match early {
        Some(started) => started,
        None => extensions::start(outside, cfg, &cwd).await,
    };
    extensions.extend(extensions::start(project, cfg, &cwd).await);
    let tools =
        extensions.iter().flat_map(|e| e.tools()).fold(agent_parts.tools, |tools, tool| tools.with_override(tool));
    let (skills, prompts) = extensions::discovered_resources(&extensions, &cwd).await;
    let resources = if skills.is_empty() && prompts.is_empty() {
        agent_parts.resources
    } else {
        setup::resources(agent, &cwd, cfg, (&skills, &prompts))
    };
    // `/name args` of a command an extension registered runs it; it may hand back a prompt.
    let command = extensions::run_command(&extensions, prompt, &cwd).await;
    let prompt = match &command {
        Some(Ok((_, Some(next)))) => {
            // Sent by an extension: upstream's `input.source` says so.
            config.source = PromptSource::Extension;
            next.as_str()
        }
        _ => prompt,
    };
    let mut runner = Agent::new(agent_parts.provider, agent_parts.model, tools, session, config, cwd);
    runner.set_resources(resources);
    for extension in &extensions {
        runner.add_extension(extension);
    }
    let plan = Plan { agent: runner, attribution, traceparent: incoming_traceparent() };

    if let Some(outcome) = &command {
        match outcome {
            Ok((Some(text), _)) => output::line(text),
            Ok((None, _)) => {}
            Err(e) => {
                output::error(format_args!("pi: command {}: {e}", prompt.split_whitespace().next().unwrap_or("")))
            }
        }
        if !matches!(outcome, Ok((_, Some(_)))) {
            command_only(&hub, plan.agent, &extensions).await;
            sinks.finish("print", &[]);
            return Ok(if outcome.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
    }
    let cancel = CancellationToken::new();
    let interrupted = signals::abort_on(&cancel)?;
    let result = prompt_once(&hub, plan, prompt, mode, &cancel).await;
    for extension in &extensions {
        extension.shutdown().await;
    }
    sinks.finish("print", &trace.get().copied().into_iter().collect::<Vec<TraceId>>());
    let result = result.map_err(|e| CliError::Failure(format!("session: {e}")))?;
    if let Some(signal) = interrupted.get() {
        return Ok(signals::exit(*signal));
    }
    Ok(exit(result))
}

/// A command that was the whole job: the session still starts and ends for the extensions.
async fn command_only(
    hub: &pi_observe::core::Observability,
    mut agent: Agent,
    extensions: &[pi_agent::extensions::process::ProcessExtension],
) {
    hub.enter(Scope::new(), async {
        agent.start_session(&mut |e: AgentEvent| output::extension_failure(&e)).await;
        agent.shutdown(&mut |e: AgentEvent| output::extension_failure(&e)).await;
    })
    .await;
    for extension in extensions {
        extension.shutdown().await;
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

/// Runs the prompt under the attribution and incoming trace parent, printing as `mode` says,
/// then shuts the agent down (`session_shutdown`).
async fn prompt_once(
    hub: &pi_observe::core::Observability,
    plan: Plan,
    prompt: &str,
    mode: Mode,
    cancel: &CancellationToken,
) -> Result<PromptResult, pi_agent::AgentError> {
    let Plan { mut agent, attribution, traceparent } = plan;
    let mut sink = move |event: AgentEvent| match mode {
        Mode::Json => {
            output::agent_event_line(&event);
            output::extension_failure(&event);
        }
        Mode::Text => output::text_delta(&event),
    };
    // One scope: this hub, the user's attribution, and the caller's trace as parent.
    let scope = Scope::new().attribution(attribution).traceparent(traceparent.as_deref());
    let result = hub
        .enter(scope, async {
            let result = agent.prompt(prompt, cancel, &mut sink).await;
            agent.shutdown(&mut sink).await;
            result
        })
        .await;
    if mode == Mode::Text {
        output::line("");
    }
    result
}

/// The exit code of a finished prompt (printing why it did not succeed).
fn exit(result: PromptResult) -> ExitCode {
    match result.stop_reason {
        StopReason::Stop | StopReason::Length | StopReason::ToolUse => ExitCode::SUCCESS,
        StopReason::Aborted => {
            output::error(format_args!("pi: aborted"));
            ExitCode::from(130)
        }
        StopReason::Error => {
            let why = result.error.map(|e| e.to_string()).unwrap_or_else(|| "the provider failed".into());
            output::error(format_args!("pi: {why}"));
            ExitCode::FAILURE
        }
    }
}
