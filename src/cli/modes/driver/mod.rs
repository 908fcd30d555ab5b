//! The agent of a long-lived mode (RPC, interactive), driven through jobs: one job at a time
//! (a prompt, a compaction, a session switch…), while the front end keeps reading its input —
//! it queues steering and follow-up messages, aborts, and reads the [`State`] without waiting
//! for the running job.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pi_agent::events::AgentEvent;
use pi_agent::session::SessionWriter;
use pi_agent::{MessageQueue, SwitchReason};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod jobs;
mod outcome;

pub use outcome::{JobOutput, JobResult};
mod state;

pub use state::{NodeKind, State, TreeNode, model_json};
use state::{state_of, tree_nodes};

use super::harness::Harness;
use crate::cli::args::AgentArgs;
use crate::cli::config::Config;
use crate::cli::setup;
use pi_agent::extensions::process::{ExtensionAction, ProcessExtension};

/// Thinking levels upstream accepts.
pub use pi_agent::model::THINKING_LEVELS;

/// What a job answers: upstream RPC's `data` (or `null`), or why it failed.
pub type Reply = Box<dyn FnOnce(JobResult) + Send>;

/// One thing for the agent to do.
pub enum Job {
    /// Run a prompt (its events stream; the reply comes when it settled).
    Prompt {
        /// The text as typed (skills and templates expand in the agent).
        text: String,
        /// Images attached (`ContentBlock::Image`), for models that take them.
        images: Vec<pi_agent::message::ContentBlock>,
    },
    /// `/name args` of an extension command; a prompt it hands back runs at once.
    ExtensionCommand {
        /// The whole line.
        line: String,
    },
    /// An extension's key shortcut was pressed (upstream's key id).
    Shortcut {
        /// The key id.
        key: String,
    },
    /// Ask the model again without a new user message (an extension's `triggerTurn`).
    Resume,
    /// Compact now.
    Compact {
        /// What the summary should focus on.
        instructions: Option<String>,
    },
    /// A fresh session.
    NewSession,
    /// Continue an existing session file.
    SwitchSession {
        /// Its path.
        path: PathBuf,
    },
    /// Fork before a user message (upstream's `fork`): the new session holds the branch up to
    /// that message's parent; the reply carries the message's text.
    Fork {
        /// The user message's entry id (with `at`: any entry).
        entry_id: String,
        /// Fork at the entry itself — the new session holds the branch up to and with it
        /// (upstream's `position: "at"`, and `clone` at the leaf); the reply is `Switched`.
        at: bool,
    },
    /// The current branch into a new session at the current position (upstream's `clone`).
    Clone,
    /// Move the leaf (`/tree`).
    Navigate {
        /// The entry to continue from.
        target: String,
        /// Summarize the abandoned branch.
        summarize: bool,
    },
    /// Reload the settings, extensions, skills and prompt templates (upstream's `/reload`): the
    /// old extensions get `session_shutdown`, the new ones `session_start` with reason `reload`.
    Reload,
    /// The session tree, depth first: `[{id, depth, type, text, leaf}]`.
    Tree,
    /// Another model.
    SetModel {
        /// Provider name.
        provider: String,
        /// Model id.
        model: String,
    },
    /// The next model of the current provider (upstream's `cycle_model`; `null` when it has one).
    CycleModel {
        /// To the previous model instead.
        backward: bool,
        /// The models to cycle through as `/scoped-models` set them for this session (`provider/id`);
        /// `None`: `--models`, else the settings' `enabledModels`.
        scope: Option<Vec<String>>,
    },
    /// The next thinking level (`null` when the model does not reason).
    CycleThinkingLevel,
    /// Another thinking level (`off` for none).
    SetThinkingLevel {
        /// One of [`THINKING_LEVELS`].
        level: String,
    },
    /// Automatic compaction on or off.
    SetAutoCompaction(bool),
    /// Provider retries on or off.
    SetAutoRetry(bool),
    /// Name the session.
    SetSessionName(String),
    /// Labels an entry of the session tree (`None` removes the label).
    SetLabel { target: String, label: Option<String> },
    /// Write the session as an HTML page (to this file, else `pi-session-<file>.html` in the
    /// working directory).
    ExportHtml(Option<std::path::PathBuf>),
    /// A shell command typed by the user (`!cmd`, RPC `bash`).
    Bash {
        /// The command line.
        command: String,
        /// `!!cmd`: recorded, but not sent to the model.
        exclude_from_context: bool,
    },
}

impl Job {
    fn is_bash(&self) -> bool {
        matches!(self, Job::Bash { .. })
    }
}

/// Shared by the driver and its front end.
pub struct Shared {
    busy: AtomicBool,
    stopping: AtomicBool,
    compacting: AtomicBool,
    /// The running job's abort, and whether it is a shell command.
    current: Mutex<(CancellationToken, bool)>,
    state: Mutex<State>,
    /// The queues of messages typed while a prompt runs.
    pub queue: MessageQueue,
    /// The commands extensions registered: name, description, source file.
    extension_commands: Mutex<Vec<(String, String, String)>>,
    /// The keys extensions registered shortcuts for.
    extension_shortcuts: Mutex<Vec<String>>,
}

impl Shared {
    /// The session in use as an extension's `withSession` hears of it: `sessionFile`,
    /// `sessionId`.
    pub fn session_wire(&self) -> serde_json::Value {
        self.with_state(|s| serde_json::json!({"sessionFile": s.session_file, "sessionId": s.session_id}))
    }

    /// A prompt is running (or was just submitted).
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// A compaction is running.
    pub fn is_compacting(&self) -> bool {
        self.compacting.load(Ordering::SeqCst)
    }

    /// Marks a prompt as submitted (before its job is sent, so the next input sees it).
    pub fn mark_busy(&self) {
        self.busy.store(true, Ordering::SeqCst);
    }

    /// Aborts the running job (a prompt's stream and tools, a compaction, a shell command).
    pub fn abort(&self) {
        lock(&self.current).0.cancel();
    }

    /// Stops: the running job is aborted and queued jobs are answered without running.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.abort();
    }

    /// Aborts the running shell command, if the running job is one.
    pub fn abort_bash(&self) {
        let current = lock(&self.current);
        if current.1 {
            current.0.cancel();
        }
    }

    /// Reads the state in place (it holds the whole conversation: no copy per look).
    pub fn with_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&lock(&self.state))
    }

    /// `/name` is a command an extension registered.
    pub fn is_extension_command(&self, line: &str) -> bool {
        let Some(rest) = line.trim_start().strip_prefix('/') else { return false };
        let name = rest.split_whitespace().next().unwrap_or("");
        lock(&self.extension_commands).iter().any(|(n, _, _)| n == name)
    }

    /// The commands extensions registered: name, description, source file.
    pub fn extension_commands(&self) -> Vec<(String, String, String)> {
        lock(&self.extension_commands).clone()
    }

    /// The text of the latest assistant message, if any (RPC `get_last_assistant_text`, `/copy`).
    pub fn last_assistant_text(&self) -> Option<String> {
        self.with_state(|state| {
            state.messages.iter().rev().find_map(|m| match m {
                pi_agent::message::Message::Assistant(a) => Some(a.text()),
                _ => None,
            })
        })
    }

    /// An extension registered a shortcut for `key` (upstream's key id).
    pub fn is_extension_shortcut(&self, key: &str) -> bool {
        lock(&self.extension_shortcuts).iter().any(|k| k == key)
    }
}

/// Runs jobs on the harness until the job channel closes, then shuts the agent down
/// (`session_shutdown`) and hands the harness back for [`Harness::finish`].
pub struct Driver<'a> {
    harness: Harness,
    args: &'a AgentArgs,
    cfg: &'a Config,
    /// The configuration read again by `/reload`.
    reloaded: Option<Config>,
    shared: Arc<Shared>,
    events: Box<dyn FnMut(AgentEvent) + Send + 'a>,
}

impl<'a> Driver<'a> {
    /// A driver whose agent events go to `events`.
    pub fn new(
        harness: Harness,
        args: &'a AgentArgs,
        cfg: &'a Config,
        events: impl FnMut(AgentEvent) + Send + 'a,
    ) -> (Self, Arc<Shared>) {
        let extension_commands = Mutex::new(commands_of(&harness.extensions));
        let extension_shortcuts = Mutex::new(shortcuts_of(&harness.extensions));
        let shared = Arc::new(Shared {
            busy: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            compacting: AtomicBool::new(false),
            current: Mutex::new((CancellationToken::new(), false)),
            state: Mutex::new(state_of(&harness)),
            queue: harness.agent.queue(),
            extension_commands,
            extension_shortcuts,
        });
        // The settings' `steeringMode` / `followUpMode` (upstream's delivery of queued messages).
        for (kind, key) in
            [(pi_agent::QueueKind::Steer, "steeringMode"), (pi_agent::QueueKind::FollowUp, "followUpMode")]
        {
            let mode =
                cfg.settings.get(&[key]).and_then(|found| found.value.as_str().and_then(pi_agent::QueueMode::parse));
            if let Some(mode) = mode {
                shared.queue.set_mode(kind, mode);
            }
        }
        let driver = Driver { harness, args, cfg, reloaded: None, shared: shared.clone(), events: Box::new(events) };
        (driver, shared)
    }

    /// Starts the session (`session_start`, reason `startup`), runs jobs until `jobs` closes
    /// or an extension asks for the end (`ctx.shutdown()`), then shuts down. What extensions
    /// ask for (`actions`, from [`attach_actions`](crate::cli::extensions::attach_actions)) runs
    /// as jobs of its own between the others.
    pub async fn run(
        mut self,
        mut jobs: mpsc::UnboundedReceiver<(Job, Reply)>,
        mut actions: Option<mpsc::UnboundedReceiver<ExtensionAction>>,
    ) -> Harness {
        let scope = self.harness.scope();
        let (agent, sink) = (&mut self.harness.agent, &mut self.events);
        self.harness.hub.enter(scope, agent.start_session(&mut |e| sink(e))).await;
        loop {
            // What an extension asked for during the last job comes before the jobs queued
            // behind it (its shutdown refuses them).
            let (job, reply) = tokio::select! {
                biased;
                Some(action) = async { actions.as_mut()?.recv().await } => match job_of_action(action, &self.shared) {
                    ActionJob::Run(job, reply) => (job, reply),
                    // An abort between jobs: nothing runs (the front end aborts at once).
                    ActionJob::Nothing => continue,
                    // `ctx.shutdown()`: the running job has finished; queued ones are refused.
                    ActionJob::Stop => {
                        self.shared.stopping.store(true, Ordering::SeqCst);
                        break;
                    }
                },
                next = jobs.recv() => match next {
                    Some(next) => next,
                    None => break,
                },
            };
            if self.shared.stopping.load(Ordering::SeqCst) {
                reply(Err("pi is shutting down".into()));
                continue;
            }
            let cancel = CancellationToken::new();
            *lock(&self.shared.current) = (cancel.clone(), job.is_bash());
            let mut outcome = self.run_job(job, &cancel).await;
            if let Err(e) = self.harness.agent.append_extension_entries() {
                outcome = outcome.and(Err(format!("cannot write the session: {e}").into()));
            }
            self.shared.busy.store(false, Ordering::SeqCst);
            self.shared.compacting.store(false, Ordering::SeqCst);
            *lock(&self.shared.state) = state_of(&self.harness);
            reply(outcome);
        }
        // Asked to end by an extension: what was queued is answered, not run.
        jobs.close();
        while let Ok((_, reply)) = jobs.try_recv() {
            reply(Err("pi is shutting down".into()));
        }
        let scope = self.harness.scope();
        let (agent, sink) = (&mut self.harness.agent, &mut self.events);
        self.harness.hub.enter(scope, agent.shutdown(&mut |e| sink(e))).await;
        self.harness
    }

    async fn run_job(&mut self, job: Job, cancel: &CancellationToken) -> JobResult {
        let state = &self.shared.state;
        let events = &mut self.events;
        // Finished messages (and their usage) reach the state as they end: `get_messages` and
        // the footer while a prompt runs.
        let mut sink = |event: AgentEvent| {
            if let AgentEvent::MessageEnd { message } = &event {
                let mut state = lock(state);
                if let Some(usage) = message.usage() {
                    state.usage.add(usage);
                }
                state.messages.push(message.clone());
            }
            events(event);
        };
        let harness = &mut self.harness;
        let cfg = self.reloaded.as_ref().unwrap_or(self.cfg);
        match job {
            Job::Prompt { text, images } => prompt(harness, (&text, images), cancel, &mut sink).await,
            Job::Shortcut { key } => jobs::extension_shortcut(harness, &key).await,
            Job::Resume => {
                let (scope, mut forward) = (harness.prompt_scope(), |e| sink(e));
                let work = harness.agent.resume(cancel, &mut forward);
                let result = harness.hub.enter(scope, work).await.map_err(|e| e.to_string())?;
                Ok(JobOutput::Prompt {
                    stop_reason: result.stop_reason,
                    turns: result.turns,
                    error: result.error.map(|e| e.to_string()),
                })
            }
            Job::ExtensionCommand { line } => {
                jobs::extension_command(harness, &self.shared, &line, cancel, &mut sink).await
            }
            Job::Compact { instructions } => {
                jobs::compact(harness, &self.shared, instructions.as_deref(), cancel, &mut sink).await
            }
            Job::NewSession => jobs::new_session(harness, cfg, &mut sink).await,
            Job::SwitchSession { path } => jobs::switch_session(harness, &path, &mut sink).await,
            Job::Fork { entry_id, at: false } => jobs::fork(harness, cfg, &entry_id, &mut sink).await,
            Job::Fork { entry_id, at: true } => jobs::fork_at(harness, cfg, Some(&entry_id), &mut sink).await,
            Job::Clone => jobs::fork_at(harness, cfg, None, &mut sink).await,
            Job::Navigate { target, summarize } => jobs::navigate(harness, &target, summarize, cancel, &mut sink).await,
            Job::Reload => {
                let (loaded, fresh) = jobs::reload(harness, self.args, &self.shared, &mut sink).await?;
                self.reloaded = Some(fresh);
                Ok(loaded)
            }
            Job::Tree => {
                let (nodes, leaf) = harness.agent.with_session(tree_nodes).ok_or("no session file (--no-session)")?;
                Ok(JobOutput::Tree { nodes, leaf })
            }
            Job::SetModel { provider, model } => {
                jobs::set_model(harness, (self.args, cfg), provider, model, &mut sink).await
            }
            Job::CycleModel { backward, scope } => {
                jobs::cycle_model(harness, (self.args, cfg), (backward, scope.as_deref()), &mut sink).await
            }
            Job::CycleThinkingLevel => Ok(jobs::cycle_thinking_level(harness, &mut sink).await),
            Job::SetThinkingLevel { level } => jobs::set_thinking_level(harness, level, &mut sink).await,
            Job::SetAutoCompaction(enabled) => {
                harness.agent.config_mut().compaction.enabled = enabled;
                Ok(JobOutput::Nothing)
            }
            Job::SetAutoRetry(enabled) => {
                let defaults = setup::agent_config(self.args, cfg).retry;
                harness.agent.config_mut().retry.max_retries = if enabled { defaults.max_retries.max(1) } else { 0 };
                Ok(JobOutput::Nothing)
            }
            Job::SetSessionName(name) => {
                harness.agent.set_session_name(&name).map_err(|e| e.to_string())?;
                Ok(JobOutput::Nothing)
            }
            Job::SetLabel { target, label } => {
                harness.agent.set_label(&target, label.as_deref()).map_err(|e| e.to_string())?;
                Ok(JobOutput::Nothing)
            }
            Job::ExportHtml(out) => {
                let file = harness.agent.session_file().map(std::path::PathBuf::from).filter(|f| f.is_file());
                let file = file.ok_or("nothing to export yet: no session file (start a conversation)")?;
                let path = crate::cli::session_html::export("export", &file, out.as_deref(), &harness.cwd)
                    .map_err(|e| e.to_string())?;
                Ok(JobOutput::Exported { path: path.display().to_string() })
            }
            Job::Bash { command, exclude_from_context } => {
                jobs::bash(harness, (&command, exclude_from_context), cancel).await
            }
        }
    }
}

/// The commands extensions registered: name, description, source file.
fn commands_of(extensions: &[ProcessExtension]) -> Vec<(String, String, String)> {
    extensions
        .iter()
        .flat_map(|e| {
            let source = e.source().display().to_string();
            e.registration().commands.iter().map(move |c| (c.name.clone(), c.description.clone(), source.clone()))
        })
        .collect()
}

/// The keys extensions registered shortcuts for.
fn shortcuts_of(extensions: &[ProcessExtension]) -> Vec<String> {
    extensions.iter().flat_map(|e| e.registration().shortcuts.iter().map(|s| s.key.clone())).collect()
}

/// What the driver does with an extension's action.
enum ActionJob {
    /// Runs this job; the reply hears its outcome.
    Run(Job, Reply),
    /// Ends the run (`ctx.shutdown()`).
    Stop,
    /// Nothing (an abort is carried out by the front end as it arrives).
    Nothing,
}

/// The job an extension's action runs as.
fn job_of_action(action: ExtensionAction, shared: &Arc<Shared>) -> ActionJob {
    let session_reply = |done| session_reply(done, shared.clone());
    let quiet: Reply = Box::new(|_| {});
    let (job, reply) = match action {
        ExtensionAction::NewSession { done } => (Job::NewSession, session_reply(done)),
        ExtensionAction::Fork { entry_id, at, done } => (Job::Fork { entry_id, at }, session_reply(done)),
        ExtensionAction::SwitchSession { path, done } => {
            (Job::SwitchSession { path: path.into() }, session_reply(done))
        }
        ExtensionAction::NavigateTree { target, summarize, done } => {
            (Job::Navigate { target, summarize }, session_reply(done))
        }
        ExtensionAction::Compact { instructions, done } => {
            let reply: Reply = Box::new(move |outcome| {
                if let Some(done) = done {
                    let _ = done.send(compact_outcome(outcome));
                }
            });
            (Job::Compact { instructions }, reply)
        }
        ExtensionAction::Reload => (Job::Reload, quiet),
        ExtensionAction::Prompt { text } => (Job::Prompt { text, images: Vec::new() }, quiet),
        ExtensionAction::Resume => (Job::Resume, quiet),
        ExtensionAction::SetModel { provider, id } => (Job::SetModel { provider, model: id }, quiet),
        ExtensionAction::SetThinkingLevel { level } => (Job::SetThinkingLevel { level }, quiet),
        ExtensionAction::Abort => return ActionJob::Nothing,
        ExtensionAction::Shutdown => return ActionJob::Stop,
    };
    ActionJob::Run(job, reply)
}

/// Tells an extension whether its session job (new, fork, switch, navigate) did what it asked,
/// and the session then in use.
fn session_reply(done: Option<pi_agent::extensions::process::SessionDone>, shared: Arc<Shared>) -> Reply {
    Box::new(move |outcome| {
        if let Some(done) = done {
            let changed = outcome.as_ref().is_ok_and(JobOutput::session_changed);
            let _ = done.send(changed.then(|| shared.session_wire()));
        }
    })
}

/// A compaction job's outcome as an extension hears it: upstream's `CompactionResult`, or why
/// there is none.
pub(super) fn compact_outcome(outcome: JobResult) -> Result<serde_json::Value, String> {
    match outcome {
        Ok(output @ JobOutput::Compacted { summary: Some(_), .. }) => {
            serde_json::to_value(output).map_err(|e| e.to_string())
        }
        Ok(_) => Err("nothing was compacted".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs one prompt in its own trace.
async fn prompt(
    harness: &mut Harness,
    (text, images): (&str, Vec<pi_agent::message::ContentBlock>),
    cancel: &CancellationToken,
    sink: &mut (dyn FnMut(AgentEvent) + Send),
) -> JobResult {
    let (scope, mut forward) = (harness.prompt_scope(), |e| sink(e));
    let work = harness.agent.prompt_with_images(text, images, cancel, &mut forward);
    let result = harness.hub.enter(scope, work).await.map_err(|e| e.to_string())?;
    Ok(JobOutput::Prompt {
        stop_reason: result.stop_reason,
        turns: result.turns,
        error: result.error.map(|e| e.to_string()),
    })
}

/// Replaces the session (`session_before_switch` may cancel).
async fn switch(
    harness: &mut Harness,
    reason: SwitchReason,
    next: Option<SessionWriter>,
    sink: &mut (dyn FnMut(AgentEvent) + Send),
) -> JobResult {
    let (scope, mut forward) = (harness.scope(), |e| sink(e));
    let work = harness.agent.switch_session(reason, next, &mut forward);
    let switched = harness.hub.enter(scope, work).await.map_err(|e| e.to_string())?;
    Ok(JobOutput::Switched { cancelled: !switched })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
