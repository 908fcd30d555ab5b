//! One running extension process: the handshake, requests matched to replies by id, each with
//! a deadline, and the end (EOF, crash, kill). Every failure is a one-line `String` naming what
//! happened; the caller decides what it means for the hook.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use super::ProcessSpec;
use super::protocol::{Message, PROTOCOL_VERSION, Register, Request};
use crate::extensions::ExtensionRequest;

/// A reply: the handler's result, or the error it sent.
type Reply = Result<Value, String>;

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

/// Where the `stream` lines of a request in flight go, by its id (a provider's events).
type Streams = Arc<Mutex<HashMap<u64, tokio::sync::mpsc::UnboundedSender<Value>>>>;

/// Its stdin, shared by requests and the answers to its UI dialogs.
type Stdin = Arc<tokio::sync::Mutex<ChildStdin>>;

/// Every running extension's stdin, for upstream's `pi.events` bus between extensions: what one
/// emits (`{"type":"bus","channel":…,"data":…}`) goes to all the others (one process runs one
/// pi, so the bus is the process's).
static BUS: Mutex<Vec<std::sync::Weak<tokio::sync::Mutex<ChildStdin>>>> = Mutex::new(Vec::new());

/// Hands a bus message from `from` to every other extension still running.
fn broadcast(from: &Stdin, message: Value) {
    let others: Vec<Stdin> = {
        let mut bus = lock(&BUS);
        bus.retain(|peer| peer.strong_count() > 0);
        bus.iter().filter_map(std::sync::Weak::upgrade).filter(|peer| !Arc::ptr_eq(peer, from)).collect()
    };
    for peer in others {
        let message = message.clone();
        tokio::spawn(async move {
            let _ = write_line(&mut *peer.lock().await, &message).await;
        });
    }
}

/// A started, registered extension process.
pub(super) struct Connection {
    stdin: Stdin,
    pending: Pending,
    streams: Streams,
    next_id: AtomicU64,
    child: Mutex<Child>,
    /// The process group it leads (its pid at start: `Child::id` is gone once it is reaped).
    group: Option<u32>,
    closed: Arc<AtomicBool>,
    /// Its UI dialogs waiting for the user: while any is open, no reply deadline runs out.
    dialogs: Arc<std::sync::atomic::AtomicUsize>,
    /// What it registered in the handshake.
    pub register: Register,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Starts the process, sends `hello`, and waits (at most `spec.start_timeout`) for its
    /// `register`.
    pub async fn start(spec: &ProcessSpec, has_ui: bool, entries: Entries) -> Result<Connection, String> {
        let mut child = spawn(spec)?;
        let group = child.id();
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("no stdin/stdout".into());
        };
        let models = spec.models.as_ref().map(|m| m.0.models());
        let mut hello = Request::Hello { protocol: PROTOCOL_VERSION, cwd: &spec.cwd, has_ui, models }.to_json();
        // What the mode's UI adds (the interactive mode: it draws components; its themes).
        if let (Some(ui), Value::Object(fields)) = (&spec.ui, &mut hello) {
            fields.extend(ui.0.hello());
        }
        let mut lines = BufReader::new(stdout).lines();
        let handshake = async {
            write_line(&mut stdin, &hello).await?;
            let line = lines
                .next_line()
                .await
                .map_err(|e| format!("reading its handshake: {e}"))?
                .ok_or_else(|| "exited before registering".to_owned())?;
            Register::parse(&line)
        };
        let register = match tokio::time::timeout(spec.start_timeout, handshake).await {
            Ok(Ok(register)) => register,
            Ok(Err(why)) => {
                kill_group_of(&mut child, group);
                return Err(why);
            }
            Err(_) => {
                kill_group_of(&mut child, group);
                return Err(format!("did not register within {} ms", spec.start_timeout.as_millis()));
            }
        };
        let pending: Pending = Arc::default();
        let streams: Streams = Arc::default();
        let closed = Arc::new(AtomicBool::new(false));
        let stdin: Stdin = Arc::new(tokio::sync::Mutex::new(stdin));
        lock(&BUS).push(Arc::downgrade(&stdin));
        let dialogs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peer = Peer {
            pending: pending.clone(),
            streams: streams.clone(),
            closed: closed.clone(),
            stdin: stdin.clone(),
            ui: spec.ui.clone(),
            actions: spec.actions.clone(),
            models: spec.models.as_ref().map(|m| m.0.clone()),
            dialogs: dialogs.clone(),
            entries,
        };
        tokio::spawn(read_replies(lines, peer));
        Ok(Connection {
            stdin,
            pending,
            streams,
            next_id: AtomicU64::new(1),
            child: Mutex::new(child),
            group,
            closed,
            dialogs,
            register,
        })
    }

    /// True once its output ended (exit, crash, garbage).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sends `message` (an object; its `id` is added) and waits at most `timeout` for the reply,
    /// handing the `stream` lines of this request to `events` as they come (a provider's events
    /// before its result).
    pub async fn request_streaming(
        &self,
        mut message: Value,
        timeout: Duration,
        events: Option<tokio::sync::mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, String> {
        if self.is_closed() {
            return Err("exited".into());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        message["id"] = Value::from(id);
        if let Some(events) = events {
            lock(&self.streams).insert(id, events);
        }
        let result = self.exchange(id, message, timeout).await;
        lock(&self.streams).remove(&id);
        result
    }

    async fn exchange(&self, id: u64, message: Value, timeout: Duration) -> Result<Value, String> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let exchange = async {
            write_line(&mut *self.stdin.lock().await, &message).await?;
            rx.await.map_err(|_| "exited".to_owned())?
        };
        tokio::pin!(exchange);
        let mut deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, &mut exchange).await {
                Ok(result) => return result,
                // A handler waiting for the user's answer to its dialog is not stuck.
                Err(_) if self.dialogs.load(Ordering::SeqCst) > 0 => deadline = tokio::time::Instant::now() + timeout,
                Err(_) => {
                    lock(&self.pending).remove(&id);
                    return Err(format!("no reply within {} ms", timeout.as_millis()));
                }
            }
        }
    }

    /// Asks it to stop (`shutdown`, stdin closed), waits up to `grace`, then kills it.
    pub async fn stop(&self, grace: Duration) {
        {
            let mut stdin = self.stdin.lock().await;
            let _ = write_line(&mut stdin, &Request::Shutdown.to_json()).await;
            let _ = stdin.shutdown().await;
        }
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let exited = lock(&self.child).try_wait().map(|s| s.is_some()).unwrap_or(true);
            if exited || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Whatever it started goes with it, whether it exited on its own or not.
        self.kill();
    }

    /// Kills it and its process group now (a handler that did not answer in time may be stuck).
    pub fn kill(&self) {
        kill_group_of(&mut lock(&self.child), self.group);
        self.closed.store(true, Ordering::SeqCst);
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        kill_group_of(&mut lock(&self.child), self.group);
    }
}

/// SIGKILL to the process group the child leads, and to the child itself.
fn kill_group_of(child: &mut Child, group: Option<u32>) {
    if let Some(pid) = group {
        crate::process::kill_group(pid);
    }
    let _ = child.start_kill();
}

/// Starts the extension's program in a process group of its own (whatever it starts is ended
/// with it), its stderr appended to its log (created 0600) when it has one.
fn spawn(spec: &ProcessSpec) -> Result<Child, String> {
    let stderr = match &spec.stderr_log {
        Some(path) => {
            let _ = pi_observe_core::create_private_parent(path);
            let file = pi_observe_core::private_file_options()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open its log {}: {e}", path.display()))?;
            Stdio::from(file)
        }
        None => Stdio::null(),
    };
    Command::new(&spec.program)
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", spec.program.display()))
}

/// What the reader of its output hands lines to: the requests waiting for replies, its stdin
/// (for the answers to its UI dialogs) and the UI.
struct Peer {
    pending: Pending,
    streams: Streams,
    closed: Arc<AtomicBool>,
    stdin: Stdin,
    ui: Option<super::UiHandle>,
    actions: Option<super::ActionSink>,
    models: Option<Arc<dyn super::ModelAccess>>,
    dialogs: Arc<std::sync::atomic::AtomicUsize>,
    entries: Entries,
}

/// What an extension asked of the agent since its last write, kept across restarts.
pub(super) type Entries = Arc<Mutex<Vec<Asked>>>;

/// One ask of an extension waiting for the agent's next write.
pub(super) enum Asked {
    /// An entry, active tools, a message.
    Request(ExtensionRequest),
    /// Tools registered after start (made into tools by the extension, which runs them).
    Tools(Vec<super::ToolSpec>),
}

/// Hands each reply to the request waiting for its id, and each UI call to the UI (a dialog's
/// answer goes back as `{"type":"ui_result","id":…,"result":…}`), until the output ends (exit,
/// crash, a line outside the protocol); then marks the connection closed and fails every
/// request still waiting with the reason.
async fn read_replies(mut lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>, peer: Peer) {
    let end = loop {
        match lines.next_line().await {
            Ok(Some(line)) if line.trim().is_empty() => continue,
            Ok(Some(line)) => match reply(&line) {
                Ok(Line::Bus(message)) => broadcast(&peer.stdin, message),
                Ok(Line::Stream(id, event)) => {
                    if let Some(events) = lock(&peer.streams).get(&id) {
                        let _ = events.send(event);
                    }
                }
                Ok(Line::Reply(id, result)) => {
                    if let Some(tx) = lock(&peer.pending).remove(&id) {
                        let _ = tx.send(result);
                    }
                }
                Ok(Line::Ui(request)) => {
                    match super::ui::dialog(peer.ui.as_ref(), request, |id| keys_to(&peer.stdin, id)) {
                        // Shown in the order it was written; nothing goes back.
                        None => {}
                        // A dialog may wait for the user as long as it likes: replies keep flowing.
                        Some((id, answer, waits_for_user)) => {
                            let (stdin, dialogs) = (peer.stdin.clone(), peer.dialogs.clone());
                            let counted = usize::from(waits_for_user);
                            dialogs.fetch_add(counted, Ordering::SeqCst);
                            tokio::spawn(async move {
                                let answer = answer.await;
                                dialogs.fetch_sub(counted, Ordering::SeqCst);
                                let message = serde_json::json!({"type": "ui_result", "id": id, "result": answer});
                                let _ = write_line(&mut *stdin.lock().await, &message).await;
                            });
                        }
                    }
                }
                Ok(Line::Request(request)) => lock(&peer.entries).push(Asked::Request(request)),
                Ok(Line::Tools(tools)) => lock(&peer.entries).push(Asked::Tools(tools)),
                Ok(Line::Credentials { id, provider, model }) => {
                    // Resolving may run a `models.json` command: off the reader, answered when done.
                    let (stdin, models) = (peer.stdin.clone(), peer.models.clone());
                    tokio::spawn(async move {
                        let found = tokio::task::spawn_blocking(move || match models {
                            Some(models) => models.credentials(&provider, &model),
                            None => Err("pi gives this extension no model credentials".to_owned()),
                        })
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()));
                        let result = match found {
                            Ok((api_key, headers)) => serde_json::json!({"ok": true, "apiKey": api_key,
                                "headers": headers.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<serde_json::Map<String, Value>>()}),
                            Err(error) => serde_json::json!({"ok": false, "error": error}),
                        };
                        let message = serde_json::json!({"type": "query_result", "id": id, "result": result});
                        let _ = write_line(&mut *stdin.lock().await, &message).await;
                    });
                }
                Ok(Line::Action(action, id)) => take_action(&peer, action, id),
                Ok(Line::Log) => {}
                Err(why) => break why,
            },
            Ok(None) => break "exited".to_owned(),
            Err(e) => break format!("its output could not be read: {e}"),
        }
    };
    peer.closed.store(true, Ordering::SeqCst);
    for (_, tx) in lock(&peer.pending).drain() {
        let _ = tx.send(Err(end.clone()));
    }
}

/// An extension's action: to the mode (an abort at once); the extension hears how a session
/// action (`withSession`) or a compaction (`onComplete` / `onError`) went when it asked with an
/// `id`.
fn take_action(peer: &Peer, mut action: super::ExtensionAction, id: Option<Value>) {
    if let (Some(done), Some(id)) = (action.session_done(), id.clone()) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *done = Some(tx);
        answer_later(&peer.stdin, id, rx, |session| match session.ok().flatten() {
            Some(Value::Object(mut session)) => {
                session.insert("cancelled".into(), Value::Bool(false));
                Value::Object(session)
            }
            _ => serde_json::json!({"cancelled": true}),
        });
    }
    if let (super::ExtensionAction::Compact { done, .. }, Some(id)) = (&mut action, id) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        *done = Some(tx);
        answer_later(&peer.stdin, id, rx, |outcome| {
            match outcome.unwrap_or_else(|_| Err("the compaction did not run".into())) {
                Ok(result) => serde_json::json!({"ok": true, "result": result}),
                Err(error) => serde_json::json!({"ok": false, "error": error}),
            }
        });
    }
    match (&action, super::ABORT.get()) {
        (super::ExtensionAction::Abort, Some(abort)) => abort(),
        _ => {
            if let Some(actions) = &peer.actions {
                let _ = actions.send(action);
            }
        }
    }
}

/// Answers the extension's request `id` with a `query_result` once `outcome` is told (shaped by
/// `answer`; a dropped sender is an `Err`).
fn answer_later<T: Send + 'static>(
    stdin: &Stdin,
    id: Value,
    outcome: tokio::sync::oneshot::Receiver<T>,
    answer: impl FnOnce(Result<T, tokio::sync::oneshot::error::RecvError>) -> Value + Send + 'static,
) {
    let stdin = stdin.clone();
    tokio::spawn(async move {
        let result = answer(outcome.await);
        let message = serde_json::json!({"type": "query_result", "id": id, "result": result});
        let _ = write_line(&mut *stdin.lock().await, &message).await;
    });
}

/// Where a custom component's keys and width go: `{"type":"ui_input","customId":…,…}` lines on
/// the extension's stdin, in order.
fn keys_to(stdin: &Stdin, id: &Value) -> tokio::sync::mpsc::UnboundedSender<Value> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let (stdin, id) = (stdin.clone(), id.clone());
    tokio::spawn(async move {
        while let Some(mut input) = rx.recv().await {
            input["type"] = Value::from("ui_input");
            input["customId"] = id.clone();
            if write_line(&mut *stdin.lock().await, &input).await.is_err() {
                return;
            }
        }
    });
    tx
}

async fn write_line(stdin: &mut ChildStdin, message: &Value) -> Result<(), String> {
    let mut line = message.to_string();
    line.push('\n');
    stdin.write_all(line.as_bytes()).await.map_err(|e| format!("cannot write to it: {e}"))?;
    stdin.flush().await.map_err(|e| format!("cannot write to it: {e}"))
}

/// A line after the handshake.
enum Line {
    /// The reply to request `id`.
    Reply(u64, Reply),
    /// A message on upstream's `pi.events` bus, for the other extensions.
    Bus(Value),
    /// An event of request `id` in flight (`{"type":"stream","id":…,"event":{…}}`).
    Stream(u64, Value),
    /// A `ctx.ui` call (`{"type":"ui","method":…}`; dialogs carry an `id`).
    Ui(Value),
    /// A session entry to append: `pi.appendEntry` (`{"type":"append_entry","customType":…,
    /// "data":…}`), `setSessionName` and `setLabel` (`{"type":"session_entry","entry":{…}}`).
    Request(crate::extensions::ExtensionRequest),
    /// Tools registered after start (`{"type":"register_tools","tools":[…]}`).
    Tools(Vec<super::ToolSpec>),
    /// `ctx.modelRegistry.getApiKeyAndHeaders(model)`: `{"type":"credentials","id":…,
    /// "provider":…,"model":…}`, answered with a `query_result`.
    Credentials { id: Value, provider: String, model: String },
    /// Something for the running mode to do (`{"type":"action","action":…}`), and the `id` its
    /// outcome is reported with (`new_session`).
    Action(super::ExtensionAction, Option<Value>),
    /// A message that needs no answer (`log`).
    Log,
}

/// Reads one line after the handshake; `Err` for anything that is not a message of the protocol.
fn reply(line: &str) -> Result<Line, String> {
    let shown: String = line.chars().take(80).collect();
    let value: Value = serde_json::from_str(line).map_err(|_| format!("wrote a line that is not JSON: {shown:?}"))?;
    match value.get("type").and_then(Value::as_str) {
        Some("ui") => return Ok(Line::Ui(value)),
        Some("bus") => return Ok(Line::Bus(value)),
        Some("stream") => {
            let id = value
                .get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("a stream event without an id: {shown:?}"))?;
            return Ok(Line::Stream(id, value.get("event").cloned().unwrap_or(Value::Null)));
        }
        Some("credentials") => {
            let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            let id = value.get("id").cloned().unwrap_or(Value::Null);
            return Ok(Line::Credentials { id, provider: text("provider"), model: text("model") });
        }
        Some("register_tools") => {
            return serde_json::from_value(value.get("tools").cloned().unwrap_or_default())
                .map(Line::Tools)
                .map_err(|e| format!("registered tools pi cannot read ({e}): {shown:?}"));
        }
        Some("action") => {
            return super::ExtensionAction::parse(&value)
                .map(|action| Line::Action(action, value.get("id").cloned()))
                .ok_or_else(|| format!("asked for an action pi does not know: {shown:?}"));
        }
        Some("append_entry") => {
            let custom_type = value.get("customType").and_then(Value::as_str).unwrap_or_default().to_owned();
            let data = value.get("data").cloned().unwrap_or(Value::Null);
            return Ok(Line::Request(ExtensionRequest::Entry(Box::new(crate::session::EntryKind::Custom {
                custom_type,
                data,
            }))));
        }
        Some("send_message") => {
            let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
            let content = match value.get("content") {
                Some(Value::String(text)) => text.clone(),
                Some(blocks @ Value::Array(_)) => {
                    serde_json::from_value::<Vec<crate::message::ContentBlock>>(blocks.clone())
                        .map(|b| crate::message::joined_text(&b))
                        .unwrap_or_default()
                }
                _ => String::new(),
            };
            let message = crate::extensions::InjectedMessage {
                custom_type: text("customType").unwrap_or_default(),
                content,
                display: value.get("display").and_then(Value::as_bool).unwrap_or(true),
            };
            return Ok(Line::Request(ExtensionRequest::Message(message)));
        }
        Some("set_active_tools") => {
            let names = value.get("names").and_then(|n| serde_json::from_value(n.clone()).ok()).unwrap_or_default();
            return Ok(Line::Request(ExtensionRequest::ActiveTools(names)));
        }
        Some("session_entry") => {
            use crate::session::EntryKind;
            // Only what upstream lets an extension write: a name and labels (never messages).
            let entry = value.get("entry").cloned().and_then(|e| serde_json::from_value::<EntryKind>(e).ok());
            return match entry {
                Some(entry @ (EntryKind::SessionInfo { .. } | EntryKind::Label { .. })) => {
                    Ok(Line::Request(ExtensionRequest::Entry(Box::new(entry))))
                }
                _ => Err(format!("wrote a session entry pi does not let extensions write: {shown:?}")),
            };
        }
        _ => {}
    }
    match serde_json::from_value(value) {
        Ok(Message::Result { id, result }) => Ok(Line::Reply(id, Ok(result))),
        Ok(Message::Error { id, message }) => Ok(Line::Reply(id, Err(message.unwrap_or_else(|| "failed".into())))),
        Ok(Message::Log) => Ok(Line::Log),
        Err(_) => Err(format!("wrote a message that is not a reply: {shown:?}")),
    }
}
