//! `pi -p MESSAGE…`: print mode — each message in turn, the answers printed, then exit.

use std::process::ExitCode;

use pi_agent::events::AgentEvent;
use pi_agent::message::StopReason;
use pi_agent::{PromptResult, PromptSource};
use tokio_util::sync::CancellationToken;

use super::harness::{Harness, Wants};
use crate::cli::args::{AgentArgs, Mode, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::{CliError, output, signals};

pub async fn run(
    agent: &AgentArgs,
    observe: &ObserveArgs,
    mode: Mode,
    initial: crate::cli::initial::Initial,
    cfg: &Config,
) -> Result<ExitCode, CliError> {
    let (messages, mut images) = (initial.messages, Some(initial.images));
    let wants =
        Wants { json_records: mode == Mode::Json, source: PromptSource::Interactive, has_ui: false, dialog: false };
    let mut actions = crate::cli::extensions::attach_actions();
    let mut harness = Harness::build(agent, observe, wants, cfg).await?;
    let mut started = false;
    if !harness.extensions.is_empty() {
        // As upstream: the session has started (`session_start`) before a command or the prompt
        // runs, so what extensions chose there (a model, a thinking level) is in force.
        let (scope, mut sink) = (harness.scope(), printed(mode));
        harness.hub.enter(scope, harness.agent.start_session(&mut sink)).await;
        take_actions(&mut harness, (agent, cfg), &mut actions).await;
        started = true;
    }
    let cancel = CancellationToken::new();
    let interrupted = signals::abort_on(&cancel)?;
    // Upstream's order: each message in turn, on one session; the first that does not succeed
    // ends the run.
    let mut code = ExitCode::SUCCESS;
    for message in messages.iter().filter(|m| !m.trim().is_empty()) {
        let prompt = match command(&mut harness, message).await {
            Ok(Some(prompt)) => prompt,
            Ok(None) => {
                take_actions(&mut harness, (agent, cfg), &mut actions).await;
                continue;
            }
            // A failed command (said on stderr) fails the run.
            Err(()) => {
                code = ExitCode::FAILURE;
                break;
            }
        };
        take_actions(&mut harness, (agent, cfg), &mut actions).await;
        // The images go with the first message.
        let images = images.take().unwrap_or_default();
        let result = prompt_once(&mut harness, (&prompt, images), mode, (&cancel, &mut started)).await;
        let result = match result {
            Ok(result) => result,
            Err(e) => {
                shutdown(&mut harness, mode, started).await;
                harness.finish("print").await;
                return Err(match e {
                    pi_agent::AgentError::ImagesNotSupported { .. } => CliError::Usage(e.to_string()),
                    e => CliError::Failure(format!("session: {e}")),
                });
            }
        };
        if let Some(signal) = interrupted.get() {
            shutdown(&mut harness, mode, started).await;
            harness.finish("print").await;
            return Ok(signals::exit(*signal));
        }
        code = exit(result);
        if code != ExitCode::SUCCESS {
            break;
        }
    }
    shutdown(&mut harness, mode, started).await;
    harness.finish("print").await;
    Ok(code)
}

/// `/name args` of a command an extension registered runs it, printing what it returns; the
/// prompt to send — the message itself, or what the command handed back — or `None` when the
/// command was the whole job; `Err` when the command failed (said on stderr).
async fn command(harness: &mut Harness, message: &str) -> Result<Option<String>, ()> {
    let session_file = harness.agent.session_file();
    let outcome = crate::cli::extensions::run_command(
        &harness.extensions,
        (harness.agent.resources(), harness.agent.model()),
        message,
        (&harness.cwd, session_file.as_deref()),
    )
    .await;
    match outcome {
        None => Ok(Some(message.to_owned())),
        Some(Ok((text, next))) => {
            if let Some(text) = text {
                output::line(&text);
            }
            // Sent by an extension: upstream's `input.source` says so.
            if next.is_some() {
                harness.agent.config_mut().source = PromptSource::Extension;
            }
            Ok(next)
        }
        Some(Err(e)) => {
            let name = message.split_whitespace().next().unwrap_or("");
            output::error(format_args!("pi: command {name}: {e}"));
            Err(())
        }
    }
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

/// Ends the session (`session_shutdown`); one that never started (only commands ran) starts
/// first, so extensions still see both.
async fn shutdown(harness: &mut Harness, mode: Mode, started: bool) {
    let (scope, mut sink) = (harness.scope(), printed(mode));
    let agent = &mut harness.agent;
    harness
        .hub
        .enter(scope, async {
            if !started {
                agent.start_session(&mut sink).await;
            }
            agent.shutdown(&mut sink).await;
        })
        .await;
}

/// Runs one prompt under the attribution (and, for the first, the incoming trace parent),
/// printing as `mode` says; the session starts first if it has not.
async fn prompt_once(
    harness: &mut Harness,
    (prompt, images): (&str, Vec<pi_agent::message::ContentBlock>),
    mode: Mode,
    (cancel, started): (&CancellationToken, &mut bool),
) -> Result<PromptResult, pi_agent::AgentError> {
    let mut sink = printed(mode);
    if !*started {
        // The session starts before the prompt, as in the interactive and RPC modes (its
        // extension handlers are not part of the prompt's trace).
        let scope = harness.scope();
        harness.hub.enter(scope, harness.agent.start_session(&mut sink)).await;
        *started = true;
    }
    // One scope: this hub, the user's attribution, and the caller's trace as parent.
    let scope = harness.prompt_scope();
    let work = harness.agent.prompt_with_images(prompt, images, cancel, &mut sink);
    let result = harness.hub.enter(scope, work).await;
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
