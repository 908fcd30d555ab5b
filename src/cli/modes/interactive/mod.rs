//! `pi` on a terminal: the interactive mode. A transcript of the conversation (streaming text,
//! thinking collapsed, tool calls with their status), the queued messages, a multi-line editor
//! with history, and a footer with the model, the session's tokens and cost, the context used
//! and the telemetry pipeline's health. The agent runs on the shared [`Driver`]; the terminal is
//! ratatui on crossterm (alternate screen, raw mode), restored on every exit path.
//!
//! Keys: Enter sends (while the agent works: queues a steering message), Alt+Enter queues a
//! follow-up (a newline when idle), Ctrl+J a newline, Esc aborts the running turn (queued
//! messages come back to the editor), Ctrl+C aborts, clears, or — twice on an empty editor —
//! exits, Ctrl+D on an empty editor exits, Up/Down walk the history, PageUp/PageDown scroll.

mod alert;
mod ansi;
mod commands;
mod complete;
mod draw;
mod editor;
mod ext_ui;
mod extension_calls;
mod input;
mod keys;
mod markdown;
mod overlay;
mod picker;
mod scope_picker;
mod selector;
mod session_list;
mod session_picker;
mod settings_panel;
mod terminal;
pub mod theme;
mod transcript;
mod tree_nav;
mod whole_lines;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pi_agent::events::AgentEvent;
use pi_agent::extensions::process::ExtensionAction;
use pi_agent::{PromptSource, QueueKind};
use ratatui::crossterm::event::{Event, KeyEventKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::driver::{Driver, Job, JobOutput, JobResult, Reply, Shared};
use super::harness::Harness;
use crate::cli::args::{AgentArgs, ObserveArgs};
use crate::cli::config::Config;
use crate::cli::sinks::HealthProbe;
use crate::cli::{CliError, output, setup, signals};
use alert::Alert;
use editor::Editor;
use ext_ui::Handoff;
use terminal::{Screen, read_input, terminal, terminal_hung_up};
use transcript::{Item, Tone, Transcript};

/// What a finished job means to the screen.
#[derive(Debug, Clone)]
enum Done {
    Prompt,
    Command(String),
    /// A compaction; an extension's (`ctx.compact`) hears its outcome.
    Compact(Option<Arc<Mutex<Option<pi_agent::extensions::process::CompactDone>>>>),
    Bash,
    Session(&'static str),
    Fork,
    Tree {
        navigate: bool,
    },
    Model,
    /// Ctrl+P / Shift+Tab: what to say when there is nothing to cycle to.
    Cycle(&'static str),
    Reload,
    /// Nothing to show.
    Quiet,
    /// A new session an extension asked for (`ctx.newSession`): shown as `/new`, then the
    /// extension hears whether it started.
    ExtensionSession(Arc<Mutex<Option<pi_agent::extensions::process::SessionDone>>>),
}

/// Runs the interactive mode until the user quits (or a signal arrives).
pub async fn run(
    args: &AgentArgs,
    observe: &ObserveArgs,
    initial: crate::cli::initial::Initial,
    cfg: &Config,
) -> Result<ExitCode, CliError> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        // No extension loads here, so an option only an extension could take is the culprit.
        crate::cli::extensions::check_extension_flags(&[])?;
        return Err(CliError::Usage(
            "the interactive mode needs a terminal: give -p (print mode) or --mode rpc (for programs)".into(),
        ));
    }
    let registry = setup::registry(args, cfg)?;
    let mut themes = setup::themes(args, &setup::cwd(args.cwd.as_deref())?, cfg)?;
    theme::set(themes.pick(cfg.typed(|s| s.theme.clone()).as_deref()));
    for warning in &themes.warnings {
        output::error(format_args!("pi: {warning}"));
    }
    // Extensions' `ctx.ui` calls come to the screen's loop.
    let (ui_tx, ui_calls) = mpsc::unbounded_channel();
    let hello = serde_json::json!({
        "components": true,
        "themes": themes.all.iter().map(theme::Theme::to_json).collect::<Vec<_>>(),
        "theme": theme::current().name,
        // pi's own slash commands, for an extension's editor's completions.
        "commands": commands::BUILTIN_COMMANDS.iter().map(|c| c.trim_start_matches('/')).collect::<Vec<_>>(),
    });
    let hello = hello.as_object().cloned().unwrap_or_default();
    crate::cli::extensions::attach_ui(pi_agent::extensions::process::UiHandle(Arc::new(ext_ui::TerminalUi(
        ui_tx, hello,
    ))));
    let actions = crate::cli::extensions::attach_actions();
    let (stop, interrupted, mut harness) = Harness::long_lived(args, observe, PromptSource::Interactive, cfg).await?;
    let reloaded = harness.reloaded.take();
    let cfg = reloaded.as_ref().unwrap_or(cfg);
    let terminal = match terminal() {
        Ok(terminal) => terminal,
        Err(e) => {
            let _ = ratatui::try_restore();
            harness.finish("interactive").await;
            return Err(CliError::Failure(format!("cannot use the terminal: {e}")));
        }
    };
    // A paste arrives whole (its newlines do not send it).
    let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::event::EnableBracketedPaste);
    terminal::enhance_keys();
    let (errors_tx, errors) = std::sync::mpsc::channel();
    output::divert_errors(Some(errors_tx));
    let (probe, traces, cwd) = (harness.sinks.probe(), harness.traces.clone(), harness.cwd.clone());
    let extension_models = harness.extensions.iter().flat_map(|e| e.provider_models()).collect();
    let failures = std::mem::take(&mut harness.load_failures);
    let alert = (!failures.is_empty()).then(|| Alert::new(" Extension not loaded ", failures));
    let (keymap, key_warnings) = input::keymap();
    for warning in key_warnings {
        output::error(format_args!("pi: {warning}"));
    }
    let (events_tx, events) = mpsc::unbounded_channel();
    let (driver, shared) = Driver::new(harness, args, cfg, move |event: AgentEvent| {
        let _ = events_tx.send(event);
    });
    let (jobs, queued) = mpsc::unbounded_channel();
    let scope_at_start = crate::cli::model_scope::scoped_models(args, cfg, &registry)
        .iter()
        .map(|m| format!("{}/{}", m.provider, m.id))
        .collect();
    let ui = Ui {
        shared: shared.clone(),
        jobs,
        probe,
        registry,
        extension_models,
        traces,
        cwd,
        cfg,
        editor: Editor::new(),
        transcript: Transcript::default(),
        scroll: 0,
        running: None,
        last_ctrl_c: None,
        quit: false,
        quit_when_idle: false,
        suspend: false,
        alert,
        ext: ext_ui::ExtScreen::default(),
        keymap,
        jump: None,
        external_edit: false,
        selector: None,
        model_scope: None,
        scope_at_start,
        completion: None,
        project_files: None,
        pending_images: Vec::new(),
        editor_synced: None,
        themes,
        complete_seq: 0,
    };
    let mut ui = ui;
    if args.resume {
        ui.open_session_picker();
    }
    // What extensions ask for (`ctx.compact`, `ctx.newSession`, follow-up prompts…) the screen
    // sends as if typed, so it shows their outcome.
    let (harness, ui_outcome) = tokio::join!(
        driver.run(queued, None),
        ui.run(terminal, (events, ui_calls, actions), errors, stop.clone(), initial)
    );
    terminal::plain_keys();
    let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::event::DisableBracketedPaste);
    let _ = ratatui::try_restore();
    output::divert_errors(None);
    harness.finish("interactive").await;
    let hung_up = match ui_outcome {
        Ok(ended) => ended == Ended::HungUp,
        Err(e) => return Err(CliError::Failure(format!("terminal: {e}"))),
    };
    Ok(match interrupted.get() {
        Some(signal) => signals::exit(*signal),
        // The terminal went away without a SIGHUP reaching pi: the same ending as one.
        None if hung_up => signals::exit(signals::SIGHUP),
        None => ExitCode::SUCCESS,
    })
}

/// The screen and what it knows.
struct Ui<'a> {
    shared: Arc<Shared>,
    jobs: mpsc::UnboundedSender<(Job, Reply)>,
    probe: HealthProbe,
    registry: pi_agent::model::Registry,
    /// The models of the providers extensions registered (`/model` offers them too).
    extension_models: Vec<pi_agent::model::ModelInfo>,
    traces: Arc<std::sync::Mutex<Vec<pi_observe::core::TraceId>>>,
    cwd: std::path::PathBuf,
    cfg: &'a Config,
    editor: Editor,
    transcript: Transcript,
    /// Lines scrolled up from the bottom.
    scroll: usize,
    /// A job other than a prompt that runs (compaction, shell command…), for the status line.
    running: Option<String>,
    last_ctrl_c: Option<Instant>,
    quit: bool,
    /// An extension asked for the end (`ctx.shutdown()`): once the running job is done.
    quit_when_idle: bool,
    /// Ctrl+Z: hand the terminal back and stop until the shell continues pi.
    suspend: bool,
    /// A dialog to dismiss before anything else.
    alert: Option<Alert>,
    /// What extensions show: their dialogs, statuses and widgets.
    ext: ext_ui::ExtScreen,
    /// The keys of upstream's actions (`~/.pi/agent/keybindings.json` applied).
    keymap: keys::Keymap,
    /// Ctrl+] (or Ctrl+Alt+]) was pressed: the next character is where the cursor jumps to
    /// (true: backward).
    jump: Option<bool>,
    /// Ctrl+G: the editor's text goes to `$VISUAL` / `$EDITOR` before the next frame.
    external_edit: bool,
    /// A selector over the screen (model, settings, scope, sessions, tree), while open.
    selector: Option<selector::Selector>,
    /// The models Ctrl+P cycles through as `/scoped-models` set them in this session.
    model_scope: Option<Vec<String>>,
    /// The model scope at start (`--models`, else `enabledModels`), as `provider/id`.
    scope_at_start: Vec<String>,
    /// `@file` or Tab completions for the word before the cursor, while listed.
    completion: Option<complete::Completion>,
    /// The project's paths while an `@` reference is typed (walked at its `@`).
    project_files: Option<Vec<String>>,
    /// Images pasted (Ctrl+V) for the next prompt.
    pending_images: Vec<pi_agent::message::ContentBlock>,
    /// The text pi's editor and an extension's editor (`setEditorComponent`) last agreed on.
    editor_synced: Option<String>,
    /// The themes pi loaded (`/settings` switches between them).
    themes: theme::Themes,
    /// The latest text extensions' autocomplete providers were asked about.
    complete_seq: u64,
}

type Replies = mpsc::UnboundedSender<(Done, JobResult)>;

/// How the screen's loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The user quit (or a signal arrived).
    Quit,
    /// The terminal went away (its pseudo-terminal closed: tmux killed, SSH dropped).
    HungUp,
}

impl Ui<'_> {
    async fn run(
        mut self,
        mut terminal: Screen,
        (mut events, mut ui_calls, mut actions): (
            mpsc::UnboundedReceiver<AgentEvent>,
            mpsc::UnboundedReceiver<ext_ui::UiCall>,
            mpsc::UnboundedReceiver<ExtensionAction>,
        ),
        errors: std::sync::mpsc::Receiver<String>,
        stop: CancellationToken,
        initial: crate::cli::initial::Initial,
    ) -> std::io::Result<Ended> {
        let (keys_tx, mut keys) = mpsc::unbounded_channel();
        let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let input = std::thread::spawn({
            let reading = reading.clone();
            move || read_input(&keys_tx, &reading)
        });
        let (replies_tx, mut replies) = mpsc::unbounded_channel();
        if self.shared.with_state(|state| !state.messages.is_empty()) {
            self.show_conversation("resumed ");
        }
        // The command line's messages: the first now, the rest each after the one before.
        let mut messages = initial.messages.into_iter();
        if let Some(first) = messages.next() {
            if initial.images.is_empty() {
                self.submit(first, QueueKind::Steer, &replies_tx);
            } else {
                // With the command line's images: a prompt as such (not a command).
                self.shared.mark_busy();
                self.send(Job::Prompt { text: first, images: initial.images }, Done::Prompt, &replies_tx);
            }
        }
        for message in messages {
            self.submit(message, QueueKind::FollowUp, &replies_tx);
        }
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let outcome = loop {
            for line in errors.try_iter() {
                self.transcript.notice(Tone::Warn, line);
            }
            self.sync_extension_editor();
            match std::mem::take(&mut self.ext.handoff) {
                Handoff::Asked(ack, program) => {
                    terminal::hand_over(&ack)?;
                    self.ext.handoff = Handoff::Given(program);
                }
                Handoff::Given(program) if !program.gone() => self.ext.handoff = Handoff::Given(program),
                // Given back, or its extension ended.
                Handoff::Given(_) | Handoff::Returning => terminal::take_back(&mut terminal)?,
                Handoff::Ours => {}
            }
            if !matches!(self.ext.handoff, Handoff::Given(_))
                && let Err(e) = terminal.draw(|frame| self.draw(frame))
            {
                break if terminal_hung_up() { Ok(Ended::HungUp) } else { Err(e) };
            }
            self.quit |= self.quit_when_idle && !self.shared.is_busy() && self.running.is_none();
            if self.quit {
                break Ok(Ended::Quit);
            }
            if std::mem::take(&mut self.suspend) {
                terminal::suspend(&mut terminal)?;
            }
            if std::mem::take(&mut self.external_edit) {
                self.edit_externally(&mut terminal)?;
            }
            tokio::select! {
                key = keys.recv() => match key {
                    Some(Event::Key(key)) if key.kind != KeyEventKind::Release => self.key(key, &replies_tx),
                    Some(Event::Paste(text)) if self.ext.has_editor() => self.ext.editor_paste(&text),
                    Some(Event::Paste(text)) => self.editor.insert_str(&text),
                    Some(_) => {}
                    None => self.quit = true,
                },
                Some(event) = events.recv() => {
                    self.transcript.apply(&event);
                    while let Ok(event) = events.try_recv() {
                        self.transcript.apply(&event);
                    }
                }
                Some((done, outcome)) = replies.recv() => self.done(done, outcome),
                Some(call) = ui_calls.recv() => self.extension_ui(call, &replies_tx),
                Some(action) = actions.recv() => self.extension_action(action, &replies_tx),
                _ = tick.tick() => {
                    if terminal_hung_up() {
                        break Ok(Ended::HungUp);
                    }
                }
                () = stop.cancelled() => self.quit = true,
            }
        };
        // Quitting: the running job is aborted, queued ones are not run.
        self.shared.stop();
        reading.store(false, std::sync::atomic::Ordering::SeqCst);
        drop(self.jobs);
        // The reader stops within its 50 ms poll; on a hung-up terminal crossterm never returns,
        // so it is left behind (the process ends without it) rather than waited for.
        let gone = Instant::now() + Duration::from_millis(200);
        while !input.is_finished() && Instant::now() < gone {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if input.is_finished() {
            let _ = input.join();
        }
        outcome
    }

    fn working(&self) -> bool {
        self.shared.is_busy() || self.running.is_some()
    }

    /// Aborts the running turn (tools' process groups are killed); queued messages come back to
    /// the editor.
    fn abort(&mut self) {
        self.shared.abort();
        self.dequeue();
    }

    /// What Enter (or Alt+Enter) sends: a built-in command, `!command`, or a prompt — queued
    /// as `queue` while the agent works.
    fn submit(&mut self, text: String, queue: QueueKind, replies: &Replies) {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return;
        }
        self.scroll = 0;
        if let Some(command) = trimmed.strip_prefix('!') {
            // `!!cmd`: the output stays out of the model's context (upstream's `!!`).
            let (command, exclude_from_context) = match command.strip_prefix('!') {
                Some(command) => (command.trim().to_owned(), true),
                None => (command.trim().to_owned(), false),
            };
            if command.is_empty() {
                return;
            }
            self.transcript.push(Item::Shell { command: command.clone(), output: None, code: None });
            self.running = Some(format!("running `{command}`"));
            self.send(Job::Bash { command, exclude_from_context }, Done::Bash, replies);
            return;
        }
        if trimmed.starts_with('/') && self.builtin(trimmed, replies) {
            return;
        }
        if let Some(unknown) = self.unknown_command(trimmed) {
            // As upstream: an unknown `/word` is said, never sent to the model.
            self.transcript.notice(Tone::Warn, format!("unknown command: /{unknown} (see /help)"));
            return;
        }
        if self.shared.is_extension_command(trimmed) {
            self.running = Some(trimmed.split_whitespace().next().unwrap_or("").to_owned());
            self.send(Job::ExtensionCommand { line: trimmed.to_owned() }, Done::Command(trimmed.to_owned()), replies);
            return;
        }
        if self.shared.is_busy() {
            self.shared.queue.push(queue, text);
            return;
        }
        self.shared.mark_busy();
        // Images pasted with Ctrl+V go with this prompt.
        let images = std::mem::take(&mut self.pending_images);
        self.send(Job::Prompt { text, images }, Done::Prompt, replies);
    }

    /// The name of `/word …` when no built-in, extension command, prompt template or skill has
    /// it (a path such as `/usr/bin/env …` is not a command).
    fn unknown_command<'t>(&self, line: &'t str) -> Option<&'t str> {
        let word = line.strip_prefix('/')?.split_whitespace().next()?;
        let commandish = word.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && word.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
        let known = self.shared.is_extension_command(line)
            || self.shared.with_state(|state| state.resources.iter().any(|(name, ..)| name == word));
        (commandish && !known).then_some(word)
    }

    fn send(&mut self, job: Job, done: Done, replies: &Replies) {
        let replies = replies.clone();
        let reply: Reply = Box::new(move |outcome| {
            let _ = replies.send((done, outcome));
        });
        if self.jobs.send((job, reply)).is_err() {
            self.transcript.notice(Tone::Error, "the agent has stopped");
        }
    }

    /// A job finished.
    fn done(&mut self, done: Done, outcome: JobResult) {
        if !matches!(done, Done::Prompt) {
            self.running = None;
        }
        // An extension's compaction: it hears the outcome too.
        if let Done::Compact(Some(tell)) = &done
            && let Some(tell) = tell.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let _ = tell.send(crate::cli::modes::driver::compact_outcome(outcome.clone()));
        }
        let output = match outcome {
            Ok(output) => output,
            Err(error) => {
                if let (Done::Bash, Some(Item::Shell { output, .. })) = (&done, self.transcript.last_shell()) {
                    *output = Some(error.to_string());
                }
                self.transcript.notice(Tone::Error, error.to_string());
                return;
            }
        };
        match (done, output) {
            (Done::Bash, JobOutput::Bash { output: text, exit_code, cancelled, .. }) => {
                if let Some(Item::Shell { output, code, .. }) = self.transcript.last_shell() {
                    *output = Some(if cancelled { "(cancelled)".into() } else { text });
                    *code = exit_code;
                }
            }
            (Done::Command(_), JobOutput::Command { output: Some(text) }) => self.transcript.notice(Tone::Info, text),
            (Done::Command(line), _) => self.transcript.notice(Tone::Info, format!("{line}: done")),
            (Done::Compact(_), JobOutput::Compacted { summary, .. }) => {
                let summary = summary.unwrap_or_default();
                self.transcript.notice(Tone::Info, format!("compaction summary:\n{summary}"));
            }
            (Done::Session(what), JobOutput::Switched { cancelled: true }) => {
                self.transcript.notice(Tone::Warn, format!("{what}: cancelled by an extension"));
            }
            (Done::Session(what), _) => self.show_conversation(&format!("{what}: ")),
            // An extension's new session, fork, session switch or tree move: shown as the user's
            // would be, and the extension hears whether it happened.
            (Done::ExtensionSession(done), output) => {
                let changed = output.session_changed();
                if changed {
                    self.show_conversation("session: ");
                } else {
                    self.transcript.notice(Tone::Warn, "session: not changed (cancelled by an extension)");
                }
                if let JobOutput::Forked { text, cancelled: false } = &output {
                    self.editor.set_text(text);
                }
                if let Some(done) = done.lock().ok().and_then(|mut d| d.take()) {
                    let _ = done.send(changed.then(|| self.shared.session_wire()));
                }
            }
            (Done::Fork, JobOutput::Forked { cancelled: true, .. }) => {
                self.transcript.notice(Tone::Warn, "fork: cancelled by an extension");
            }
            (Done::Fork, JobOutput::Forked { text, .. }) => {
                self.show_conversation("forked: ");
                self.editor.set_text(&text);
            }
            (Done::Tree { navigate: false }, JobOutput::Tree { nodes, .. }) if nodes.is_empty() => {
                self.transcript.notice(Tone::Info, "No entries in session");
            }
            (Done::Tree { navigate: false }, JobOutput::Tree { nodes, leaf }) => {
                let height = ratatui::crossterm::terminal::size().map_or(24, |(_, rows)| usize::from(rows));
                self.selector = Some(selector::Selector::Tree(tree_nav::TreeNav::new(nodes, leaf, height / 2)));
            }
            (Done::Tree { navigate: true }, JobOutput::Navigated { moved: true, summarized, editor_text, .. }) => {
                self.show_conversation(if summarized { "tree (the branch left summarized): " } else { "tree: " });
                if let Some(text) = editor_text.filter(|_| self.editor.is_empty()) {
                    self.editor.set_text(&text);
                }
            }
            (Done::Tree { navigate: true }, JobOutput::Navigated { cancelled_by: Some(extension), .. }) => {
                self.transcript.notice(Tone::Warn, format!("tree: the move was cancelled by {extension}"));
            }
            (Done::Reload, JobOutput::Reloaded { extensions, skills, prompts }) => self.transcript.notice(
                Tone::Info,
                format!("reloaded: {extensions} extensions, {skills} skills, {prompts} prompt templates"),
            ),
            (_, JobOutput::Exported { path }) => self.transcript.notice(Tone::Info, format!("exported to {path}")),
            (_, JobOutput::CycledModel { model, thinking_level, .. }) => {
                let id = model["id"].as_str().unwrap_or_default();
                let provider = model["provider"].as_str().unwrap_or_default();
                self.transcript.notice(Tone::Info, format!("model: {provider}/{id} (thinking {thinking_level})"));
            }
            (_, JobOutput::ThinkingLevel { level }) => {
                self.transcript.notice(Tone::Info, format!("thinking level: {level}"))
            }
            (Done::Cycle(what), JobOutput::Nothing) => self.transcript.notice(Tone::Info, what),
            (Done::Model, JobOutput::Model(model)) => {
                let id = model["id"].as_str().unwrap_or_default();
                let provider = model["provider"].as_str().unwrap_or_default();
                self.transcript.notice(Tone::Info, format!("model: {provider}/{id}"));
            }
            _ => {}
        }
    }

    /// Shows the session's conversation (after a resume, a switch or a fork), then what happened.
    fn show_conversation(&mut self, what: &str) {
        let (transcript, said, sent) = self.shared.with_state(|state| {
            let file = state.session_file.as_deref().unwrap_or("no session file");
            let sent: Vec<String> = state
                .messages
                .iter()
                .filter_map(|m| match m {
                    pi_agent::message::Message::User(user) => Some(user.content.text()),
                    _ => None,
                })
                .collect();
            let said = format!("{what}{file} ({} messages)", state.messages.len());
            (Transcript::of_messages(&state.messages), said, sent)
        });
        // As upstream: what was sent in the session is in the editor's history (Up).
        self.editor.add_history(sent);
        // An extension's name for collapsed thinking stays.
        let label = self.transcript.thinking_label().map(str::to_owned);
        self.transcript = transcript;
        self.transcript.set_thinking_label(label);
        self.transcript.notice(Tone::Info, said);
    }
}
