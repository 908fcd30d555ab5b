//! `pi -p PROMPT`: one prompt in print mode.

use std::process::ExitCode;

use pi_agent::events::AgentEvent;
use pi_agent::message::StopReason;
use pi_agent::{PromptResult, PromptSource};
use pi_observe::core::Scope;
use tokio_util::sync::CancellationToken;

use super::harness::{Harness, Wants};
use crate::cli::args::{AgentArgs, Mode, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::{CliError, output, signals};

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
    let wants =
        Wants { json_records: mode == Mode::Json, source: PromptSource::Interactive, has_ui: false, dialog: false };
    let mut actions = extensions::attach_actions();
    let mut harness = Harness::build(agent, observe, wants, cfg).await?;
    if !harness.extensions.is_empty() {
        // As upstream: the session has started (`session_start`) before a command or the prompt
        // runs, so what extensions chose there (a model, a thinking level) is in force.
        let (scope, mut sink) = (harness.prompt_scope(), printed(mode));
        harness.hub.enter(scope, harness.agent.start_session(&mut sink)).await;
        take_actions(&mut harness, (agent, cfg), &mut actions).await;
    }
    // `/name args` of a command an extension registered runs it; it may hand back a prompt.
    let session_file = harness.agent.session_file();
    let command = extensions::run_command(
        &harness.extensions,
        (harness.agent.resources(), harness.agent.model()),
        prompt,
        (&harness.cwd, session_file.as_deref()),
    )
    .await;
    take_actions(&mut harness, (agent, cfg), &mut actions).await;
    let prompt = match &command {
        Some(Ok((_, Some(next)))) => {
            // Sent by an extension: upstream's `input.source` says so.
            harness.agent.config_mut().source = PromptSource::Extension;
            next.as_str()
        }
        _ => prompt,
    };
    if let Some(outcome) = &command {
        match outcome {
            Ok((Some(text), _)) => output::line(text),
            Ok((None, _)) => {}
            Err(e) => {
                output::error(format_args!("pi: command {}: {e}", prompt.split_whitespace().next().unwrap_or("")))
            }
        }
        if !matches!(outcome, Ok((_, Some(_)))) {
            command_only(&mut harness).await;
            harness.finish("print").await;
            return Ok(if outcome.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
        }
    }
    let cancel = CancellationToken::new();
    let interrupted = signals::abort_on(&cancel)?;
    let result = prompt_once(&mut harness, prompt, mode, &cancel).await;
    harness.finish("print").await;
    let result = result.map_err(|e| CliError::Failure(format!("session: {e}")))?;
    if let Some(signal) = interrupted.get() {
        return Ok(signals::exit(*signal));
    }
    Ok(exit(result))
}

/// What extensions asked for so far that print mode carries out: a model and a thinking level
/// (`pi.setModel`, `pi.setThinkingLevel`) for its prompt. The rest (compact, reload, follow-up
/// prompts, shutdown) belongs to the long-lived modes; print mode ends after its prompt.
async fn take_actions(
    harness: &mut Harness,
    (args, cfg): (&AgentArgs, &Config),
    actions: &mut tokio::sync::mpsc::UnboundedReceiver<pi_agent::extensions::process::ExtensionAction>,
) {
    use pi_agent::extensions::process::ExtensionAction;
    let mut sink = |e: AgentEvent| output::extension_failure(&e);
    while let Ok(action) = actions.try_recv() {
        let scope = harness.scope();
        match action {
            ExtensionAction::SetModel { provider, id } => {
                match crate::cli::setup::select_named(args, cfg, Some(provider), Some(id)) {
                    Ok(selected) => {
                        let chosen = harness.agent.select_model(selected.provider, selected.model, "set", &mut sink);
                        harness.hub.enter(scope, chosen).await;
                    }
                    Err(e) => output::error(format_args!("pi: an extension's model: {e}")),
                }
            }
            ExtensionAction::SetThinkingLevel { level } => {
                let level = (level != "off" && harness.agent.model().reasoning).then_some(level);
                harness.hub.enter(scope, harness.agent.select_thinking_level(level, &mut sink)).await;
            }
            _ => {}
        }
    }
}

/// A command that was the whole job: the session still starts and ends for the extensions.
async fn command_only(harness: &mut Harness) {
    let agent = &mut harness.agent;
    harness
        .hub
        .enter(Scope::new(), async {
            agent.start_session(&mut |e: AgentEvent| output::extension_failure(&e)).await;
            agent.shutdown(&mut |e: AgentEvent| output::extension_failure(&e)).await;
        })
        .await;
}

/// Runs the prompt under the attribution and incoming trace parent, printing as `mode` says,
/// then shuts the agent down (`session_shutdown`).
async fn prompt_once(
    harness: &mut Harness,
    prompt: &str,
    mode: Mode,
    cancel: &CancellationToken,
) -> Result<PromptResult, pi_agent::AgentError> {
    let mut sink = printed(mode);
    // One scope: this hub, the user's attribution, and the caller's trace as parent.
    let scope = harness.prompt_scope();
    let agent = &mut harness.agent;
    let result = harness
        .hub
        .enter(scope, async {
            // The session starts before the prompt, as in the interactive and RPC modes (its
            // extension handlers are not part of the prompt's trace).
            agent.start_session(&mut sink).await;
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

/// Where print mode's agent events go: JSON lines, or the answer's text.
fn printed(mode: Mode) -> impl FnMut(AgentEvent) {
    move |event: AgentEvent| match mode {
        Mode::Json => {
            output::agent_event_line(&event);
            output::extension_failure(&event);
        }
        Mode::Text | Mode::Rpc => output::text_delta(&event),
    }
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
