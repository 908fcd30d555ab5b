//! Keys on the main screen: dialogs, extension components and shortcuts first, then upstream's
//! actions through the keymap ([`keys`](super::keys)), then typing.

use std::time::{Duration, Instant};

use pi_agent::QueueKind;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::alert::Alert;
use super::keys::{Action, Keymap};
use super::transcript::Tone;
use super::{Done, Replies, Ui, complete, ext_ui};
use crate::cli::modes::driver::Job;

/// The keymap: upstream's defaults with `~/.pi/agent/keybindings.json` applied, and what in
/// that file could not be used.
pub(super) fn keymap() -> (Keymap, Vec<String>) {
    match crate::cli::paths::agent_dir() {
        Some(dir) => Keymap::load(&dir.join("keybindings.json")),
        None => (Keymap::default(), Vec::new()),
    }
}

impl Ui<'_> {
    /// One key.
    pub(super) fn key(&mut self, key: KeyEvent, replies: &Replies) {
        self.ext.tell_listeners(&key);
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if self.alert.is_some() && !(ctrl && matches!(key.code, KeyCode::Char('c' | 'd'))) {
            if Alert::dismissed_by(&key) {
                self.alert = None;
            }
            return;
        }
        if self.selector.is_some() {
            return self.selector_key(&key, replies);
        }
        if self.ext.is_open() && !(ctrl && matches!(key.code, KeyCode::Char('c' | 'd'))) {
            return self.ext.key(key);
        }
        if let Some(id) = ext_ui::key_id(&key).filter(|id| self.shared.is_extension_shortcut(id)) {
            self.send(Job::Shortcut { key: id }, Done::Quiet, replies);
            return;
        }
        if self.ext.has_editor() {
            // An extension's editor takes every other key (the app's keys come back as actions).
            return self.ext.editor_key(&key);
        }
        if !(ctrl && key.code == KeyCode::Char('c')) {
            self.last_ctrl_c = None;
        }
        if let (Some(backward), KeyCode::Char(c)) = (self.jump.take(), key.code) {
            self.editor.jump_to(c, backward);
            return;
        }
        if key.code == KeyCode::Esc {
            // Esc also turns away extensions' answers still on their way.
            self.complete_seq += 1;
        }
        if self.completion.is_some() && self.complete_key(&key) {
            return;
        }
        let typed = self.editor.text();
        self.keys_to_actions(&key, replies);
        if self.editor.text() != typed {
            // An `@` reference being typed lists the files it may name (the project walked once
            // per reference).
            let token = self.editor.token();
            self.completion = match token.strip_prefix('@') {
                Some(query) => {
                    let paths = self.project_files.get_or_insert_with(|| complete::project_paths(&self.cwd));
                    complete::file_reference(query, paths)
                }
                None => {
                    self.project_files = None;
                    None
                }
            };
            if self.completion.is_none() && !token.is_empty() {
                self.ask_completers();
            }
        }
    }

    /// The key's actions in order, else what it types.
    fn keys_to_actions(&mut self, key: &KeyEvent, replies: &Replies) {
        for action in self.keymap.actions(key) {
            if self.act(action, replies) {
                return;
            }
        }
        let (ctrl, alt) = (key.modifiers.contains(KeyModifiers::CONTROL), key.modifiers.contains(KeyModifiers::ALT));
        match key.code {
            // A Ctrl or Alt letter no binding took types nothing.
            KeyCode::Char(c) if !ctrl && !alt => self.editor.insert(c),
            // Alt+Enter on an idle agent: a newline (a follow-up needs something running).
            KeyCode::Enter if alt => self.editor.newline(),
            _ => {}
        }
    }

    /// A key while completions are listed: Up/Down choose, Tab/Enter take the choice, Esc
    /// closes the list; false for any other key (it edits, and the list follows).
    fn complete_key(&mut self, key: &KeyEvent) -> bool {
        let Some(completion) = &mut self.completion else { return false };
        match key.code {
            KeyCode::Up => completion.up(),
            KeyCode::Down => completion.down(),
            KeyCode::Esc => self.completion = None,
            KeyCode::Tab | KeyCode::Enter => {
                let chars = completion.token_chars;
                // An extension's suggestion replaces its prefix as it is (upstream's default).
                let extensions = !completion.labels.is_empty();
                if let Some(choice) = completion.choice().map(str::to_owned) {
                    // A file is a finished word; a folder goes on being completed.
                    let space = if choice.ends_with('/') || extensions { "" } else { " " };
                    self.editor.replace_before_cursor(chars, &format!("{choice}{space}"));
                }
                self.completion = None;
            }
            _ => return false,
        }
        true
    }

    /// Extensions' autocomplete providers (`ctx.ui.addAutocompleteProvider`) asked for the text
    /// as it is now; their answer lists suggestions when the text has not changed since.
    fn ask_completers(&mut self) {
        if !self.ext.has_completers() {
            return;
        }
        self.complete_seq += 1;
        let (row, col) = self.editor.position();
        let ask = serde_json::json!({"lines": self.editor.lines(), "cursorLine": row, "cursorCol": col, "seq": self.complete_seq});
        self.ext.ask_completers(ask);
    }

    /// An extension's suggestions for the text asked about in `seq` (dropped when the text
    /// changed since, or when they are none).
    pub(super) fn suggestions(&mut self, seq: u64, prefix: &str, items: Vec<(String, String)>) {
        if seq != self.complete_seq || items.is_empty() || self.completion.is_some() {
            return;
        }
        let (values, labels) = items.into_iter().unzip();
        self.completion =
            Some(complete::Completion { items: values, selected: 0, token_chars: prefix.chars().count(), labels });
    }

    /// Tab after `/word`: the commands starting with it — pi's own, extensions', prompt
    /// templates and skills — completed at once when one fits, else listed.
    fn complete_command(&mut self) {
        let typed = self.editor.text();
        let extension = self.shared.extension_commands().into_iter().map(|(name, ..)| format!("/{name}"));
        let resources: Vec<String> =
            self.shared.with_state(|state| state.resources.iter().map(|(name, ..)| format!("/{name}")).collect());
        let mut names: Vec<String> = super::commands::BUILTIN_COMMANDS
            .iter()
            .map(|c| (*c).to_owned())
            .chain(extension)
            .chain(resources)
            .filter(|name| name.starts_with(&typed))
            .collect();
        names.sort();
        names.dedup();
        match names.as_slice() {
            [] => {}
            [one] => self.editor.set_text(&format!("{one} ")),
            _ => {
                let token_chars = typed.chars().count();
                self.completion =
                    Some(complete::Completion { items: names, selected: 0, token_chars, labels: Vec::new() });
            }
        }
    }

    /// Tab: the path before the cursor completed — at once when one entry fits, else as far as
    /// they agree, with the list of them.
    fn complete_path(&mut self) {
        let token = self.editor.token();
        let Some(found) = complete::path(&token, &self.cwd) else { return };
        let shared = complete::common_prefix(&found.items);
        if found.items.len() == 1 {
            let choice = &found.items[0];
            let space = if choice.ends_with('/') { "" } else { " " };
            self.editor.replace_before_cursor(found.token_chars, &format!("{choice}{space}"));
        } else {
            if shared.chars().count() > found.token_chars {
                self.editor.replace_before_cursor(found.token_chars, &shared);
            }
            let token_chars = self.editor.token().chars().count();
            self.completion = Some(complete::Completion { token_chars, ..found });
        }
    }

    /// Carries out `action`; false when it does not apply now (the key then tries the next
    /// action bound to it).
    pub(super) fn act(&mut self, action: Action, replies: &Replies) -> bool {
        match action {
            Action::Interrupt if self.working() => self.abort(),
            Action::Interrupt => return false,
            Action::Clear => self.ctrl_c(),
            Action::Exit if self.editor.is_empty() => self.quit = true,
            Action::Exit => return false,
            // The shell's job control takes over until `fg` (the agent keeps working).
            Action::Suspend => self.suspend = true,
            Action::ExternalEditor => self.external_edit = true,
            Action::PasteImage => match clipboard_image() {
                Some(image) => {
                    self.pending_images.push(image);
                    let n = self.pending_images.len();
                    self.transcript
                        .notice(Tone::Info, format!("{n} image(s) attached: they go with your next message"));
                }
                None => self.transcript.notice(Tone::Info, "no image in the clipboard (wl-paste or xclip reads it)"),
            },
            Action::SessionNew => self.send(Job::NewSession, Done::Session("new session"), replies),
            Action::SessionTree => return self.builtin("/tree", replies),
            Action::SessionFork => return self.builtin("/fork", replies),
            Action::SessionResume => return self.builtin("/resume", replies),
            Action::ModelSelect => return self.builtin("/model", replies),
            Action::ModelCycleForward | Action::ModelCycleBackward => {
                let backward = action == Action::ModelCycleBackward;
                let scope = self.model_scope.clone();
                self.send(Job::CycleModel { backward, scope }, Done::Cycle("no other model to cycle to"), replies);
            }
            Action::ThinkingCycle => {
                self.send(Job::CycleThinkingLevel, Done::Cycle("this model does not reason"), replies);
            }
            Action::ThinkingToggle => {
                let shown = self.transcript.toggle_thinking();
                self.transcript.notice(Tone::Info, if shown { "thinking shown" } else { "thinking collapsed" });
            }
            Action::ToolsExpand => {
                let expanded = self.transcript.toggle_tool_output();
                self.transcript
                    .notice(Tone::Info, if expanded { "tool output expanded" } else { "tool output collapsed" });
            }
            Action::FollowUp if self.shared.is_busy() => {
                let text = self.editor.take();
                self.submit(text, QueueKind::FollowUp, replies);
            }
            Action::FollowUp => return false,
            Action::Dequeue => self.dequeue(),
            Action::Submit => {
                let text = self.editor.take();
                self.submit(text, QueueKind::Steer, replies);
            }
            Action::NewLine => self.editor.newline(),
            // A slash command's name completes from the commands; a word elsewhere as a path.
            Action::Tab if self.editor.text().starts_with('/') && !self.editor.text().contains(char::is_whitespace) => {
                self.complete_command()
            }
            Action::Tab if self.editor.token().is_empty() || self.editor.text().starts_with('/') => {
                self.editor.insert_str("  ")
            }
            Action::Tab => self.complete_path(),
            Action::CursorUp => self.editor.up(),
            Action::CursorDown => self.editor.down(),
            Action::CursorLeft => self.editor.left(),
            Action::CursorRight => self.editor.right(),
            Action::CursorWordLeft => self.editor.word_left(),
            Action::CursorWordRight => self.editor.word_right(),
            Action::CursorLineStart => self.editor.home(),
            Action::CursorLineEnd => self.editor.end(),
            Action::JumpForward => self.jump = Some(false),
            Action::JumpBackward => self.jump = Some(true),
            Action::PageUp => self.scroll += 10,
            Action::PageDown => self.scroll = self.scroll.saturating_sub(10),
            Action::DeleteCharBackward => self.editor.backspace(),
            Action::DeleteCharForward => self.editor.delete(),
            Action::DeleteWordBackward => self.editor.kill_word_before(),
            Action::DeleteWordForward => self.editor.kill_word_after(),
            Action::DeleteToLineStart => self.editor.kill_to_start(),
            Action::DeleteToLineEnd => self.editor.kill_to_end(),
            Action::Yank => self.editor.yank(),
            Action::YankPop => self.editor.yank_pop(),
            Action::Undo => self.editor.undo(),
            // The selectors' actions are their own (picker, session picker, tree, scope); the
            // editor has no selection for `tui.input.copy`.
            _ => return false,
        }
        true
    }

    /// A `/settings` option moved to its next value: written, taken by this session where it
    /// can be, and the list shown again on it.
    pub(super) fn change_setting(&mut self, key: &str, replies: &Replies) {
        let Some(file) = super::settings_panel::global_file() else { return };
        match super::settings_panel::cycle(&file, key, &self.themes.names()) {
            Ok(value) => {
                if key == "theme" {
                    self.use_theme(&value);
                    self.transcript.notice(Tone::Info, format!("settings: theme = {value} (now)"));
                    return self.open_settings(Some(key));
                }
                let queue = match key {
                    "steeringMode" => Some(QueueKind::Steer),
                    "followUpMode" => Some(QueueKind::FollowUp),
                    _ => None,
                };
                if let (Some(queue), Some(mode)) = (queue, pi_agent::QueueMode::parse(&value)) {
                    self.shared.queue.set_mode(queue, mode);
                    self.transcript.notice(Tone::Info, format!("settings: {key} = {value} (now)"));
                    return self.open_settings(Some(key));
                }
                let now = match (key, value.as_str()) {
                    ("compaction.enabled", v) => Some(Job::SetAutoCompaction(v == "true")),
                    ("retry.enabled", v) => Some(Job::SetAutoRetry(v == "true")),
                    ("defaultThinkingLevel", level) => Some(Job::SetThinkingLevel { level: level.to_owned() }),
                    _ => None,
                };
                let when = if now.is_some() { "now" } else { "from /reload or the next start" };
                if let Some(job) = now {
                    self.send(job, Done::Quiet, replies);
                }
                self.transcript.notice(Tone::Info, format!("settings: {key} = {value} ({when})"));
            }
            Err(why) => self.transcript.notice(Tone::Error, format!("/settings: {why}")),
        }
        self.open_settings(Some(key));
    }

    /// Ctrl+C: abort what runs, else clear the editor, else (twice within 2 s) exit.
    fn ctrl_c(&mut self) {
        if self.working() {
            self.abort();
        } else if !self.editor.is_empty() {
            self.editor.set_text("");
        } else if self.last_ctrl_c.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
            self.quit = true;
        } else {
            self.last_ctrl_c = Some(Instant::now());
            self.transcript.notice(Tone::Info, "press Ctrl+C again to exit");
        }
    }

    /// Alt+Up: the queued messages come back to the editor (before what is typed there).
    pub(super) fn dequeue(&mut self) {
        let pending = self.shared.queue.clear();
        if pending.is_empty() {
            return;
        }
        let mut texts = pending.steering;
        texts.extend(pending.follow_up);
        if !self.editor.is_empty() {
            texts.push(self.editor.text());
        }
        self.editor.set_text(&texts.join("\n"));
    }

    /// Ctrl+G: the editor's text in `$VISUAL` (else `$EDITOR`), the terminal handed over until
    /// it exits; what it saved replaces the text.
    pub(super) fn edit_externally(&mut self, terminal: &mut super::terminal::Screen) -> std::io::Result<()> {
        let command = ["VISUAL", "EDITOR"].iter().find_map(|v| std::env::var(v).ok().filter(|c| !c.trim().is_empty()));
        let Some(command) = command else {
            self.transcript.notice(Tone::Warn, "Ctrl+G: set $VISUAL or $EDITOR to edit the message in your editor");
            return Ok(());
        };
        match super::terminal::external_editor(terminal, &command, &self.editor.text())? {
            Ok(text) => self.editor.set_text(text.strip_suffix('\n').unwrap_or(&text)),
            Err(why) => self.transcript.notice(Tone::Warn, format!("Ctrl+G: {command}: {why}")),
        }
        Ok(())
    }
}

/// The clipboard's image (PNG), read with `wl-paste` (Wayland) or `xclip` (X11) where present.
fn clipboard_image() -> Option<pi_agent::message::ContentBlock> {
    let readers: [(&str, &[&str]); 2] = [
        ("wl-paste", &["--no-newline", "--type", "image/png"]),
        ("xclip", &["-selection", "clipboard", "-t", "image/png", "-o"]),
    ];
    readers.iter().find_map(|(tool, args)| {
        let out = std::process::Command::new(tool).args(*args).stdin(std::process::Stdio::null()).output().ok()?;
        out.status.success().then(|| crate::cli::images::from_bytes(&out.stdout)).flatten()
    })
}
