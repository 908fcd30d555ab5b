//! `pi --mode rpc`: upstream pi's RPC protocol (`packages/coding-agent/docs/rpc.md`) — one JSON
//! command per line on stdin, responses (`{"type":"response","command":…,"success":…,"id"?}`)
//! and agent events on stdout, one JSON object per line (LF only; a trailing CR is stripped).
//! A line that is not a command gets an error response naming it and the session goes on; when
//! stdin closes, the commands already sent finish and pi exits with `session_shutdown`. The
//! commands supported and the differences from upstream are listed in `docs/rpc.md`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use pi_agent::events::{AgentEvent, Delta};
use pi_agent::message::Message;
use pi_agent::{PromptSource, QueueKind, QueueMode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::driver::{Driver, Job, Reply, Shared, State, model_json};
use super::harness::Harness;
use crate::cli::args::{AgentArgs, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::{CliError, output, setup, signals};

/// Lines to stdout, in order.
type Out = mpsc::UnboundedSender<String>;

pub async fn run(args: &AgentArgs, observe: &ObserveArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let models: Vec<Value> = setup::registry(args, cfg)?.models().iter().map(model_json).collect();
    let (stop, interrupted, mut harness) = Harness::long_lived(args, observe, PromptSource::Rpc, cfg).await?;
    let reloaded = harness.reloaded.take();
    let cfg = reloaded.as_ref().unwrap_or(cfg);
    let (out, lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(write_lines(lines, stop.clone()));
    let events = out.clone();
    let mut encoder = Encoder::default();
    let (driver, shared) = Driver::new(harness, args, cfg, move |event: AgentEvent| {
        output::extension_failure(&event);
        for value in encoder.encode(event) {
            let _ = events.send(value.to_string());
        }
    });
    let (jobs, queued) = mpsc::unbounded_channel();
    let front = read_commands(Front { shared, jobs, out, models }, stop);
    let (harness, ()) = tokio::join!(driver.run(queued), front);
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
                let why = format!("line {number}: not UTF-8 (invalid byte at offset {at}); the command was not run");
                respond(&front.out, "parse", None, Err(why));
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
}

/// One command line: parsed, then answered at once (queries, queue settings, abort), sent to
/// the driver as a job (`job_of`), or run as a prompt (`prompt`).
fn handle(line: &str, number: usize, front: &Front) {
    let Front { shared, jobs, out, models } = front;
    // The line is named by its number and its start (the client wrote it: no secret of pi's).
    let shown: String = line.chars().take(40).collect();
    let more = if shown.len() < line.len() { "…" } else { "" };
    let named = format!("line {number} ({shown:?}{more})");
    let command: Value = match serde_json::from_str(line) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return respond(out, "parse", None, Err(format!("{named}: a command is a JSON object"))),
        Err(e) => return respond(out, "parse", None, Err(format!("{named}: Failed to parse command: {e}"))),
    };
    let id = command.get("id").cloned();
    let Some(kind) = command.get("type").and_then(Value::as_str) else {
        return respond(out, "parse", id, Err(format!("{named}: the command has no \"type\"")));
    };
    let fields = Fields { kind, command: &command };
    let now = |outcome: Result<Value, String>| respond(out, kind, id.clone(), outcome);
    if let Some(answer) = query(kind, shared, models) {
        return now(Ok(answer));
    }
    match kind {
        "prompt" | "steer" | "follow_up" => prompt(&fields, front, &now),
        "abort" => {
            shared.abort();
            now(Ok(Value::Null));
        }
        "abort_bash" => {
            shared.abort_bash();
            now(Ok(Value::Null));
        }
        "set_steering_mode" | "set_follow_up_mode" => {
            let queue = if kind == "set_steering_mode" { QueueKind::Steer } else { QueueKind::FollowUp };
            match fields.text("mode").map(|m| QueueMode::parse(&m).ok_or(m)) {
                Ok(Ok(mode)) => {
                    shared.queue.set_mode(queue, mode);
                    now(Ok(Value::Null));
                }
                Ok(Err(mode)) => now(Err(format!("{kind}: unknown mode {mode:?} (all or one-at-a-time)"))),
                Err(e) => now(Err(e)),
            }
        }
        // Answers to extension UI requests: this pi sends none (extensions run without a UI here).
        "extension_ui_response" => {}
        _ => match job_of(&fields) {
            Some(Ok(job)) => {
                let (reply_out, reply_kind, reply_id) = (out.clone(), kind.to_owned(), id.clone());
                let reply: Reply = Box::new(move |outcome| respond(&reply_out, &reply_kind, reply_id, outcome));
                if jobs.send((job, reply)).is_err() {
                    now(Err("pi is shutting down".into()));
                }
            }
            Some(Err(e)) => now(Err(e)),
            None => now(Err(format!("unknown command: {kind}"))),
        },
    }
}

/// A command's fields, read with errors that name the command and the field.
struct Fields<'a> {
    kind: &'a str,
    command: &'a Value,
}

impl Fields<'_> {
    fn text(&self, field: &str) -> Result<String, String> {
        self.command
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("{}: \"{field}\" must be a string", self.kind))
    }

    fn flag(&self, field: &str) -> Result<bool, String> {
        self.command
            .get(field)
            .and_then(Value::as_bool)
            .ok_or_else(|| format!("{}: \"{field}\" must be true or false", self.kind))
    }
}

/// The driver's job for a command that is one, with its fields checked; `None` for a command
/// that is not a job.
fn job_of(fields: &Fields<'_>) -> Option<Result<Job, String>> {
    let command = fields.command;
    Some(match fields.kind {
        "new_session" => Ok(Job::NewSession),
        "switch_session" => fields.text("sessionPath").map(|path| Job::SwitchSession { path: path.into() }),
        "fork" => fields.text("entryId").map(|entry_id| Job::Fork { entry_id }),
        "compact" => {
            let instructions = command.get("customInstructions").and_then(Value::as_str).map(str::to_owned);
            Ok(Job::Compact { instructions })
        }
        "set_model" => match (fields.text("provider"), fields.text("modelId")) {
            (Ok(provider), Ok(model)) => Ok(Job::SetModel { provider, model }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        "cycle_model" => Ok(Job::CycleModel),
        "cycle_thinking_level" => Ok(Job::CycleThinkingLevel),
        "set_thinking_level" => fields.text("level").map(|level| Job::SetThinkingLevel { level }),
        "set_auto_compaction" => fields.flag("enabled").map(Job::SetAutoCompaction),
        "set_auto_retry" => fields.flag("enabled").map(Job::SetAutoRetry),
        "set_session_name" => match fields.text("name") {
            Ok(name) if !name.trim().is_empty() => Ok(Job::SetSessionName(name.trim().to_owned())),
            Ok(_) => Err("set_session_name: the name is empty".into()),
            Err(e) => Err(e),
        },
        "bash" => fields.text("command").map(|command| Job::Bash { command }),
        _ => return None,
    })
}

/// The answer to a query command (`get_*`), read from the shared state; `None` for any other.
fn query(kind: &str, shared: &Shared, models: &[Value]) -> Option<Value> {
    Some(match kind {
        "get_state" => state_json(shared),
        "get_available_models" => json!({ "models": models }),
        "get_messages" => shared.with_state(|state| json!({ "messages": state.messages })),
        "get_session_stats" => session_stats(shared),
        "get_fork_messages" => {
            let messages: Vec<Value> = shared.with_state(|state| {
                state.user_entries.iter().map(|(id, text)| json!({"entryId": id, "text": text})).collect()
            });
            json!({ "messages": messages })
        }
        "get_last_assistant_text" => {
            let text = shared.with_state(|state| {
                state.messages.iter().rev().find_map(|m| match m {
                    Message::Assistant(a) => Some(a.text()),
                    _ => None,
                })
            });
            json!({ "text": text })
        }
        "get_commands" => {
            let commands = shared.extension_commands();
            let mut listed: Vec<Value> = commands
                .iter()
                .map(|(name, description, path)| {
                    json!({"name": name, "description": description, "source": "extension", "path": path})
                })
                .collect();
            shared.with_state(|state| {
                listed.extend(state.resources.iter().map(|(name, description, source, path)| {
                    json!({"name": name, "description": description, "source": source, "path": path})
                }))
            });
            json!({ "commands": listed })
        }
        _ => return None,
    })
}

/// `prompt`, `steer` and `follow_up`: a prompt runs when the agent is idle; while it streams (and
/// always for `steer`/`follow_up`, as upstream) the message is queued; an extension command runs
/// after the running job.
fn prompt(fields: &Fields<'_>, front: &Front, now: &dyn Fn(Result<Value, String>)) {
    let (kind, command) = (fields.kind, fields.command);
    let Front { shared, jobs, out, .. } = front;
    let message = match fields.text("message") {
        Ok(message) => message,
        Err(e) => return now(Err(e)),
    };
    if command.get("images").and_then(Value::as_array).is_some_and(|images| !images.is_empty()) {
        return now(Err(format!("{kind}: images are not supported by this pi")));
    }
    let behavior = match kind {
        "steer" => Some("steer"),
        "follow_up" => Some("followUp"),
        _ => command.get("streamingBehavior").and_then(Value::as_str),
    };
    if shared.is_extension_command(&message) {
        if kind != "prompt" {
            return now(Err(format!("{kind}: extension commands are not allowed here (use prompt)")));
        }
        // Runs even while the agent streams (after the running job).
        let (reply_out, reply_id) = (out.clone(), command.get("id").cloned());
        let reply: Reply = Box::new(move |outcome| respond(&reply_out, "prompt", reply_id, outcome));
        if jobs.send((Job::ExtensionCommand { line: message }, reply)).is_err() {
            now(Err("pi is shutting down".into()));
        }
        return;
    }
    let queue = match behavior {
        Some("steer") => Some(QueueKind::Steer),
        Some("followUp") => Some(QueueKind::FollowUp),
        Some(other) => return now(Err(format!("{kind}: unknown streamingBehavior {other:?} (steer or followUp)"))),
        None => None,
    };
    match queue {
        // `steer`/`follow_up` always queue (an idle agent takes steering at its next prompt's
        // start, follow-ups at its end), as upstream.
        Some(queue) if kind != "prompt" || shared.is_busy() => {
            shared.queue.push(queue, message);
            now(Ok(Value::Null));
            queue_update(shared, out);
        }
        None if shared.is_busy() => now(Err(
            "prompt: the agent is streaming; give \"streamingBehavior\": \"steer\" or \"followUp\" to queue the message"
                .into(),
        )),
        _ => {
            shared.mark_busy();
            now(Ok(Value::Null));
            let events = out.clone();
            let failed: Reply = Box::new(move |outcome| {
                if let Err(e) = outcome {
                    let _ = events.send(json!({"type": "error", "command": "prompt", "error": e}).to_string());
                }
            });
            let _ = jobs.send((Job::Prompt { text: message }, failed));
        }
    }
}

/// Writes a response line.
fn respond(out: &Out, command: &str, id: Option<Value>, outcome: Result<Value, String>) {
    let mut response = serde_json::Map::new();
    if let Some(id) = id {
        response.insert("id".into(), id);
    }
    response.insert("type".into(), "response".into());
    response.insert("command".into(), command.into());
    match outcome {
        Ok(data) => {
            response.insert("success".into(), true.into());
            if !data.is_null() {
                response.insert("data".into(), data);
            }
        }
        Err(error) => {
            response.insert("success".into(), false.into());
            response.insert("error".into(), error.into());
        }
    }
    let _ = out.send(Value::Object(response).to_string());
}

/// The queues as they are now.
fn queue_update(shared: &Shared, out: &Out) {
    let pending = shared.queue.pending();
    let event = AgentEvent::QueueUpdate { steering: pending.steering, follow_up: pending.follow_up };
    if let Ok(line) = serde_json::to_string(&event) {
        let _ = out.send(line);
    }
}

fn state_json(shared: &Shared) -> Value {
    let pending = shared.queue.pending().len();
    shared.with_state(|state| state_data(shared, state, pending))
}

fn state_data(shared: &Shared, state: &State, pending: usize) -> Value {
    let mut data = json!({
        "model": model_json(&state.model),
        "thinkingLevel": state.thinking_level,
        "isStreaming": shared.is_busy(),
        "isCompacting": shared.is_compacting(),
        "steeringMode": shared.queue.mode(QueueKind::Steer).as_str(),
        "followUpMode": shared.queue.mode(QueueKind::FollowUp).as_str(),
        "sessionFile": state.session_file,
        "sessionId": state.session_id,
        "autoCompactionEnabled": state.auto_compaction,
        "messageCount": state.messages.len(),
        "pendingMessageCount": pending,
    });
    if let Some(name) = &state.session_name {
        data["sessionName"] = name.as_str().into();
    }
    data
}

fn session_stats(shared: &Shared) -> Value {
    shared.with_state(stats_data)
}

fn stats_data(state: &State) -> Value {
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
    json!({
        "sessionFile": state.session_file,
        "sessionId": state.session_id,
        "userMessages": count("user"),
        "assistantMessages": count("assistant"),
        "toolCalls": tool_calls,
        "toolResults": count("toolResult"),
        "totalMessages": state.messages.len(),
        "tokens": {
            "input": usage.input,
            "output": usage.output,
            "cacheRead": usage.cache_read,
            "cacheWrite": usage.cache_write,
            "total": usage.total_tokens,
        },
        "cost": usage.cost.total,
    })
}

/// Agent events in upstream's RPC shapes: `message_start`/`message_end` carry the message,
/// `message_update` an `assistantMessageEvent` delta, `tool_execution_end` the result,
/// `turn_end` the turn's assistant message and tool results, `agent_end` the prompt's
/// messages. Events upstream does not have (`session_start`, `queue_update`, `agent_settled`,
/// `session_compact`, `session_tree`, `session_shutdown`) are written in pi's own shape.
#[derive(Default)]
struct Encoder {
    run_messages: Vec<Value>,
    turn_message: Value,
    turn_results: Vec<Value>,
    content_index: Option<usize>,
    last_delta: Option<&'static str>,
    tool_output: HashMap<String, String>,
    tool_end: Option<(String, String, bool)>,
}

impl Encoder {
    fn encode(&mut self, event: AgentEvent) -> Vec<Value> {
        let mut out = Vec::new();
        match event {
            AgentEvent::AgentStart => {
                self.run_messages.clear();
                out.push(json!({"type": "agent_start"}));
            }
            AgentEvent::TurnStart { turn_index } => {
                self.turn_message = Value::Null;
                self.turn_results.clear();
                out.push(json!({"type": "turn_start", "turnIndex": turn_index}));
            }
            AgentEvent::MessageStart { role } => {
                // Other roles are final at once: their start is written with their end.
                if role == "assistant" {
                    self.content_index = None;
                    self.last_delta = None;
                    out.push(json!({"type": "message_start", "message": {"role": "assistant", "content": []}}));
                }
            }
            AgentEvent::MessageUpdate { delta } => out.push(self.delta(delta)),
            AgentEvent::MessageEnd { message } => {
                let value = serde_json::to_value(&message).unwrap_or(Value::Null);
                self.run_messages.push(value.clone());
                match &message {
                    Message::Assistant(_) => self.turn_message = value.clone(),
                    Message::ToolResult(result) => {
                        self.turn_results.push(value.clone());
                        if let Some((id, name, is_error)) = self.tool_end.take() {
                            let output = json!({"content": result.content, "details": result.details});
                            out.push(json!({"type": "tool_execution_end", "toolCallId": id, "toolName": name, "result": output, "isError": is_error}));
                        }
                    }
                    _ => {}
                }
                if !matches!(message, Message::Assistant(_)) {
                    out.push(json!({"type": "message_start", "message": value}));
                }
                out.push(json!({"type": "message_end", "message": value}));
            }
            AgentEvent::ToolExecutionUpdate { tool_call_id, tool_name, output } => {
                let so_far = self.tool_output.entry(tool_call_id.clone()).or_default();
                so_far.push_str(&output);
                out.push(json!({
                    "type": "tool_execution_update",
                    "toolCallId": tool_call_id,
                    "toolName": tool_name,
                    "partialResult": {"content": [{"type": "text", "text": so_far}]},
                }));
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, is_error } => {
                // Written with its result, which the tool result message brings next.
                self.tool_output.remove(&tool_call_id);
                self.tool_end = Some((tool_call_id, tool_name, is_error));
            }
            AgentEvent::TurnEnd { turn_index } => out.push(json!({
                "type": "turn_end",
                "turnIndex": turn_index,
                "message": self.turn_message,
                "toolResults": self.turn_results,
            })),
            AgentEvent::AgentEnd { stop_reason, usage } => out.push(json!({
                "type": "agent_end",
                "messages": std::mem::take(&mut self.run_messages),
                "stopReason": stop_reason,
                "usage": usage,
            })),
            AgentEvent::ExtensionError { extension, hook, error } => {
                out.push(json!({"type": "extension_error", "extensionPath": extension, "event": hook, "error": error}));
            }
            other => out.push(serde_json::to_value(&other).unwrap_or(Value::Null)),
        }
        out
    }

    /// A streamed fragment as upstream's `assistantMessageEvent`.
    fn delta(&mut self, delta: Delta) -> Value {
        let event = match delta {
            Delta::Text { text } => {
                json!({"type": "text_delta", "contentIndex": self.block("text"), "delta": text})
            }
            Delta::Thinking { text } => {
                json!({"type": "thinking_delta", "contentIndex": self.block("thinking"), "delta": text})
            }
            Delta::ToolCallStart { tool_call_id, tool_name } => json!({
                "type": "toolcall_start",
                "contentIndex": self.block("toolcall"),
                "toolCall": {"id": tool_call_id, "name": tool_name},
            }),
            Delta::ToolCallArgs { text, .. } => {
                json!({"type": "toolcall_delta", "contentIndex": self.content_index.unwrap_or(0), "delta": text})
            }
        };
        json!({"type": "message_update", "assistantMessageEvent": event})
    }

    /// The content index of a fragment of `kind`: a new block when the kind changes (every tool
    /// call is a block of its own).
    fn block(&mut self, kind: &'static str) -> usize {
        if self.last_delta != Some(kind) || kind == "toolcall" {
            self.content_index = Some(self.content_index.map_or(0, |i| i + 1));
            self.last_delta = Some(kind);
        }
        self.content_index.unwrap_or(0)
    }
}
