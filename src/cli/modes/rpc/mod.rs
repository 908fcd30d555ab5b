//! `pi --mode rpc`: upstream pi's RPC protocol (`packages/coding-agent/docs/rpc.md`) — one JSON
//! command per line on stdin, responses (`{"type":"response","command":…,"success":…,"id"?}`)
//! and agent events on stdout, one JSON object per line (LF only; a trailing CR is stripped).
//! A line that is not a command gets an error response naming it and the session goes on; when
//! stdin closes, the commands already sent finish and pi exits with `session_shutdown`. The
//! commands supported and the differences from upstream are listed in `docs/rpc.md`.

use std::process::ExitCode;
use std::sync::Arc;

use pi_agent::events::AgentEvent;
use pi_agent::message::Message;
use pi_agent::{PromptSource, QueueKind, QueueMode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod events;
mod protocol;
mod ui;

use events::Encoder;
use protocol::{Command, Models, Response, RpcError, SessionState, SessionStats, SlashCommand, Tokens};

use super::driver::{Driver, Job, JobResult, Reply, Shared, State, model_json};
use super::harness::Harness;
use crate::cli::args::{AgentArgs, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::{CliError, output, setup, signals};

/// Lines to stdout, in order.
type Out = mpsc::UnboundedSender<String>;

pub async fn run(args: &AgentArgs, observe: &ObserveArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let mut models: Vec<Value> = setup::registry(args, cfg)?.models().iter().map(model_json).collect();
    // Extensions' `ctx.ui` calls become `extension_ui_request` lines (buffered until the writer
    // starts below).
    let (out, lines) = mpsc::unbounded_channel::<String>();
    let ui = ui::RpcUi::new(out.clone());
    crate::cli::extensions::attach_ui(pi_agent::extensions::process::UiHandle(ui.clone()));
    let actions = crate::cli::extensions::attach_actions();
    let (stop, interrupted, mut harness) = Harness::long_lived(args, observe, PromptSource::Rpc, cfg).await?;
    let reloaded = harness.reloaded.take();
    let cfg = reloaded.as_ref().unwrap_or(cfg);
    // The models of the providers extensions registered too.
    models.extend(harness.extensions.iter().flat_map(|e| e.provider_models()).map(|m| model_json(&m)));
    let writer = tokio::spawn(write_lines(lines, stop.clone()));
    let events = out.clone();
    let mut encoder = Encoder::default();
    let (driver, shared) = Driver::new(harness, args, cfg, move |event: AgentEvent| {
        output::extension_failure(&event);
        for line in encoder.encode(event).iter().filter_map(|e| serde_json::to_string(e).ok()) {
            let _ = events.send(line);
        }
    });
    let (jobs, queued) = mpsc::unbounded_channel();
    // `ctx.abort()` aborts the running job at once (the driver takes actions between jobs).
    let aborts = shared.clone();
    pi_agent::extensions::process::on_abort(move || aborts.abort());
    let front = read_commands(Front { shared, jobs, out, models, ui }, stop.clone());
    // The driver ends when stdin closes, or when an extension asks for the end (then reading
    // commands ends too).
    let driven = async {
        let harness = driver.run(queued, Some(actions)).await;
        stop.cancel();
        harness
    };
    let (harness, ()) = tokio::join!(driven, front);
    harness.finish("rpc").await;
    let broken = writer.await.ok().flatten();
    Ok(match (interrupted.get(), broken) {
        (Some(signal), _) => signals::exit(*signal),
        (None, Some(why)) => {
            output::error(format_args!("pi: rpc: the client closed stdout ({why}): the run was aborted"));
            ExitCode::FAILURE
        }
        (None, None) => ExitCode::SUCCESS,
    })
}

/// Writes each line and flushes (a client waits for whole lines). A client that closed stdout
/// (EPIPE) ends the run: the running prompt is aborted through `stop`, what is written is
/// flushed, and the reason comes back for the exit line.
async fn write_lines(mut lines: mpsc::UnboundedReceiver<String>, stop: CancellationToken) -> Option<String> {
    let mut stdout = tokio::io::stdout();
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        let written = match stdout.write_all(line.as_bytes()).await {
            Ok(()) => stdout.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            // The client is gone: nothing more can be said.
            stop.cancel();
            while lines.recv().await.is_some() {}
            return Some(e.to_string());
        }
    }
    None
}

/// What commands reach: the driver, stdout, and the model table.
struct Front {
    shared: Arc<Shared>,
    jobs: mpsc::UnboundedSender<(Job, Reply)>,
    out: Out,
    models: Vec<Value>,
    /// Answers extensions' dialogs (`extension_ui_response`).
    ui: Arc<ui::RpcUi>,
}

/// Reads commands until stdin closes or a signal arrives (which aborts the running job; queued
/// ones are answered without running).
async fn read_commands(front: Front, stop: CancellationToken) {
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        buf.clear();
        let read = tokio::select! {
            read = stdin.read_until(b'\n', &mut buf) => read,
            () = stop.cancelled() => {
                front.shared.stop();
                break;
            }
        };
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                output::error(format_args!("pi: rpc: cannot read stdin: {e}"));
                break;
            }
        }
        number += 1;
        // A line that is not UTF-8 is a parse error as a whole (no id is read from mangled text).
        let line = match std::str::from_utf8(&buf) {
            Ok(line) => line,
            Err(e) => {
                let at = e.valid_up_to();
                respond(&front.out, "parse", None, Err(RpcError::NotUtf8 { number, at }));
                continue;
            }
        };
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        handle(line, number, &front);
    }
    // No answer can come any more: open dialogs are cancelled, and stdout's writer may finish.
    front.ui.disconnect();
}

/// What a command gets back: data, or why it failed.
type Outcome = Result<Option<Value>, RpcError>;

/// One command line: parsed into a [`Command`], then answered at once (queries, queue settings,
/// abort), sent to the driver as a job (`job_of`), or run as a prompt (`prompt`).
fn handle(line: &str, number: usize, front: &Front) {
    // The line is named by its number and its start (the client wrote it: no secret of pi's).
    let shown: String = line.chars().take(40).collect();
    let more = if shown.len() < line.len() { "…" } else { "" };
    let named = format!("line {number} ({shown:?}{more})");
    let value: Value = match serde_json::from_str(line) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return respond(&front.out, "parse", None, Err(RpcError::NotAnObject { line: named })),
        Err(e) => {
            return respond(&front.out, "parse", None, Err(RpcError::NotJson { line: named, why: e.to_string() }));
        }
    };
    let id = value.get("id").cloned();
    let Some(kind) = value.get("type").and_then(Value::as_str).map(str::to_owned) else {
        return respond(&front.out, "parse", id, Err(RpcError::NoType { line: named }));
    };
    if kind == "extension_ui_response" {
        // An answer, not a command: nothing is sent back (upstream ignores an unknown id).
        front.ui.respond(value);
        return;
    }
    let now = |outcome: Outcome| respond(&front.out, &kind, id.clone(), outcome);
    match Command::from_json(value, &kind) {
        Ok(command) => dispatch(command, &kind, id.clone(), front, &now),
        Err(e) => now(Err(e)),
    }
}

/// Runs or queues `command` (`kind` as the line named it, `id` for its reply).
fn dispatch(command: Command, kind: &str, id: Option<Value>, front: &Front, now: &dyn Fn(Outcome)) {
    let Front { shared, jobs, out, models, .. } = front;
    if let Some(answer) = query(&command, shared, models) {
        return now(Ok(Some(answer)));
    }
    match command {
        Command::Prompt { message, images, streaming_behavior } => {
            prompt(kind, message, &images, streaming_behavior.as_deref(), id, front, now)
        }
        Command::Steer { message, images } => prompt(kind, message, &images, Some("steer"), id, front, now),
        Command::FollowUp { message, images } => prompt(kind, message, &images, Some("followUp"), id, front, now),
        Command::Abort => {
            shared.abort();
            now(Ok(None));
        }
        Command::AbortBash => {
            shared.abort_bash();
            now(Ok(None));
        }
        Command::AbortRetry => {
            pi_agent::provider::abort_retry_delays();
            now(Ok(None));
        }
        Command::SetSteeringMode { mode } => set_mode(shared, QueueKind::Steer, kind, &mode, now),
        Command::SetFollowUpMode { mode } => set_mode(shared, QueueKind::FollowUp, kind, &mode, now),
        // Answers to extension UI requests are handed to the dialog before parsing (`handle`).
        Command::ExtensionUiResponse => {}
        other => match job_of(other, kind) {
            Ok(job) => {
                let (reply_out, reply_kind) = (out.clone(), kind.to_owned());
                let reply: Reply = Box::new(move |outcome| respond(&reply_out, &reply_kind, id, answered(outcome)));
                if jobs.send((job, reply)).is_err() {
                    now(Err(RpcError::ShuttingDown));
                }
            }
            Err(e) => now(Err(e)),
        },
    }
}

/// `set_steering_mode` / `set_follow_up_mode`.
fn set_mode(shared: &Shared, queue: QueueKind, kind: &str, mode: &str, now: &dyn Fn(Outcome)) {
    match QueueMode::parse(mode) {
        Some(mode) => {
            shared.queue.set_mode(queue, mode);
            now(Ok(None));
        }
        None => now(Err(RpcError::invalid(kind, format!("unknown mode {mode:?} (all or one-at-a-time)")))),
    }
}

/// The driver's job for a command that is one (the others are answered before).
fn job_of(command: Command, kind: &str) -> Result<Job, RpcError> {
    Ok(match command {
        Command::NewSession { .. } => Job::NewSession,
        Command::SwitchSession { session_path } => Job::SwitchSession { path: session_path.into() },
        Command::Fork { entry_id } => Job::Fork { entry_id, at: false },
        Command::Clone => Job::Clone,
        Command::Compact { custom_instructions } => Job::Compact { instructions: custom_instructions },
        Command::SetModel { provider, model_id } => Job::SetModel { provider, model: model_id },
        Command::CycleModel => Job::CycleModel { backward: false, scope: None },
        Command::CycleThinkingLevel => Job::CycleThinkingLevel,
        Command::SetThinkingLevel { level } => Job::SetThinkingLevel { level },
        Command::SetAutoCompaction { enabled } => Job::SetAutoCompaction(enabled),
        Command::SetAutoRetry { enabled } => Job::SetAutoRetry(enabled),
        Command::ExportHtml { output_path } => Job::ExportHtml(output_path.map(std::path::PathBuf::from)),
        Command::SetSessionName { name } if name.trim().is_empty() => {
            return Err(RpcError::invalid(kind, "the name is empty"));
        }
        Command::SetSessionName { name } => Job::SetSessionName(name.trim().to_owned()),
        Command::Bash { command } => Job::Bash { command, exclude_from_context: false },
        _ => return Err(RpcError::Unknown(kind.to_owned())),
    })
}

/// The answer to a query command (`get_*`), read from the shared state; `None` for any other.
fn query(command: &Command, shared: &Shared, models: &[Value]) -> Option<Value> {
    let data = match command {
        Command::GetState => serde_json::to_value(session_state(shared)),
        Command::GetAvailableModels => serde_json::to_value(Models { models }),
        Command::GetMessages => Ok(shared.with_state(|state| json!({ "messages": state.messages }))),
        Command::GetSessionStats => serde_json::to_value(shared.with_state(session_stats)),
        Command::GetForkMessages => {
            let messages: Vec<Value> = shared.with_state(|state| {
                state.user_entries.iter().map(|(id, text)| json!({"entryId": id, "text": text})).collect()
            });
            Ok(json!({ "messages": messages }))
        }
        Command::GetLastAssistantText => Ok(json!({ "text": shared.last_assistant_text() })),
        Command::GetCommands => serde_json::to_value(commands(shared)).map(|c| json!({ "commands": c })),
        _ => return None,
    };
    Some(data.unwrap_or(Value::Null))
}

/// The commands a prompt can invoke: extension commands, then skills and templates.
fn commands(shared: &Shared) -> Vec<SlashCommand> {
    let mut listed: Vec<SlashCommand> = shared
        .extension_commands()
        .into_iter()
        .map(|(name, description, path)| SlashCommand {
            name,
            description: json!(description),
            source: "extension".into(),
            path: json!(path),
        })
        .collect();
    shared.with_state(|state| {
        listed.extend(state.resources.iter().map(|(name, description, source, path)| SlashCommand {
            name: name.clone(),
            description: json!(description),
            source: source.to_string(),
            path: json!(path),
        }))
    });
    listed
}

/// `prompt`, `steer` and `follow_up`: a prompt runs when the agent is idle; while it streams (and
/// always for `steer`/`follow_up`, as upstream) the message is queued; an extension command runs
/// after the running job.
fn prompt(
    kind: &str,
    message: String,
    images: &[Value],
    behavior: Option<&str>,
    id: Option<Value>,
    front: &Front,
    now: &dyn Fn(Outcome),
) {
    let Front { shared, jobs, out, .. } = front;
    let images = match crate::cli::images::from_rpc(images) {
        Ok(images) => images,
        Err(why) => return now(Err(RpcError::invalid(kind, why))),
    };
    if !images.is_empty() && shared.is_extension_command(&message) {
        return now(Err(RpcError::invalid(kind, "images go with a prompt, not an extension command")));
    }
    if shared.is_extension_command(&message) {
        if kind != "prompt" {
            return now(Err(RpcError::invalid(kind, "extension commands are not allowed here (use prompt)")));
        }
        // Runs even while the agent streams (after the running job).
        let reply_out = out.clone();
        let reply: Reply = Box::new(move |outcome| respond(&reply_out, "prompt", id, answered(outcome)));
        if jobs.send((Job::ExtensionCommand { line: message }, reply)).is_err() {
            now(Err(RpcError::ShuttingDown));
        }
        return;
    }
    let queue = match behavior {
        Some("steer") => Some(QueueKind::Steer),
        Some("followUp") => Some(QueueKind::FollowUp),
        Some(other) => {
            return now(Err(RpcError::invalid(
                kind,
                format!("unknown streamingBehavior {other:?} (steer or followUp)"),
            )));
        }
        None => None,
    };
    match queue {
        // `steer`/`follow_up` always queue (an idle agent takes steering at its next prompt's
        // start, follow-ups at its end), as upstream.
        Some(_) if !images.is_empty() && (kind != "prompt" || shared.is_busy()) => {
            now(Err(RpcError::invalid(kind, "images go with a prompt that runs now; a queued message is text only")));
        }
        Some(queue) if kind != "prompt" || shared.is_busy() => {
            shared.queue.push(queue, message);
            now(Ok(None));
            queue_update(shared, out);
        }
        None if shared.is_busy() => now(Err(RpcError::Busy)),
        _ => {
            shared.mark_busy();
            now(Ok(None));
            let events = out.clone();
            let failed: Reply = Box::new(move |outcome| {
                if let Err(e) = outcome {
                    let _ =
                        events.send(json!({"type": "error", "command": "prompt", "error": e.to_string()}).to_string());
                }
            });
            let _ = jobs.send((Job::Prompt { text: message, images }, failed));
        }
    }
}

/// A job's result as a command's outcome: its data serialized here, at the edge.
fn answered(result: JobResult) -> Outcome {
    result.map(|output| serde_json::to_value(output).ok()).map_err(|e| RpcError::Failed(e.0))
}

/// Writes a response line.
fn respond(out: &Out, command: &str, id: Option<Value>, outcome: Outcome) {
    if let Ok(line) = serde_json::to_string(&Response::to(command, id, outcome)) {
        let _ = out.send(line);
    }
}

/// The queues as they are now.
fn queue_update(shared: &Shared, out: &Out) {
    let pending = shared.queue.pending();
    let event = AgentEvent::QueueUpdate { steering: pending.steering, follow_up: pending.follow_up };
    if let Ok(line) = serde_json::to_string(&event) {
        let _ = out.send(line);
    }
}

/// `get_state`'s data.
fn session_state(shared: &Shared) -> SessionState {
    let pending = shared.queue.pending().len();
    shared.with_state(|state| SessionState {
        model: model_json(&state.model),
        thinking_level: json!(state.thinking_level),
        is_streaming: shared.is_busy(),
        is_compacting: shared.is_compacting(),
        steering_mode: shared.queue.mode(QueueKind::Steer).as_str(),
        follow_up_mode: shared.queue.mode(QueueKind::FollowUp).as_str(),
        session_file: json!(state.session_file),
        session_id: json!(state.session_id),
        auto_compaction_enabled: state.auto_compaction,
        message_count: state.messages.len(),
        pending_message_count: pending,
        session_name: state.session_name.clone(),
    })
}

/// `get_session_stats`' data.
fn session_stats(state: &State) -> SessionStats {
    let count = |role: &str| state.messages.iter().filter(|m| m.role() == role).count();
    let tool_calls: usize = state
        .messages
        .iter()
        .map(|m| match m {
            Message::Assistant(a) => a.tool_calls().len(),
            _ => 0,
        })
        .sum();
    let usage = state.usage;
    SessionStats {
        session_file: json!(state.session_file),
        session_id: json!(state.session_id),
        user_messages: count("user"),
        assistant_messages: count("assistant"),
        tool_calls,
        tool_results: count("toolResult"),
        total_messages: state.messages.len(),
        tokens: Tokens {
            input: usage.input,
            output: usage.output,
            cache_read: usage.cache_read,
            cache_write: usage.cache_write,
            total: usage.total_tokens,
        },
        cost: usage.cost.total,
    }
}
