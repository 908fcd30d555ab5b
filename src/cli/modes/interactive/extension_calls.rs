//! What extensions ask of the screen: their actions (`ctx.compact`, `ctx.newSession`, follow-up
//! prompts…), sent as the user would send them, and their `ctx.ui` calls.

use std::sync::{Arc, Mutex};

use pi_agent::QueueKind;
use pi_agent::extensions::process::ExtensionAction;

use super::transcript::Tone;
use super::{Done, Replies, Ui, ext_ui};
use crate::cli::modes::driver::Job;

impl Ui<'_> {
    /// What an extension asked for, sent as the user would (its outcome shows the same way).
    pub(super) fn extension_action(&mut self, action: ExtensionAction, replies: &Replies) {
        match action {
            ExtensionAction::Compact { instructions, done } => {
                self.running = Some("compacting".into());
                self.send(
                    Job::Compact { instructions },
                    Done::Compact(done.map(|d| Arc::new(Mutex::new(Some(d))))),
                    replies,
                );
            }
            ExtensionAction::Reload => self.send(Job::Reload, Done::Reload, replies),
            ExtensionAction::NewSession { done } => {
                self.send(Job::NewSession, Done::ExtensionSession(Arc::new(Mutex::new(done))), replies)
            }
            ExtensionAction::Fork { entry_id, at, done } => {
                self.send(Job::Fork { entry_id, at }, Done::ExtensionSession(Arc::new(Mutex::new(done))), replies)
            }
            ExtensionAction::SwitchSession { path, done } => self.send(
                Job::SwitchSession { path: path.into() },
                Done::ExtensionSession(Arc::new(Mutex::new(done))),
                replies,
            ),
            ExtensionAction::NavigateTree { target, summarize, done } => self.send(
                Job::Navigate { target, summarize },
                Done::ExtensionSession(Arc::new(Mutex::new(done))),
                replies,
            ),
            // A follow-up (after the running prompt), or a command line as typed.
            ExtensionAction::Prompt { text } => self.submit(text, QueueKind::FollowUp, replies),
            ExtensionAction::Resume => {
                self.shared.mark_busy();
                self.send(Job::Resume, Done::Prompt, replies);
            }
            ExtensionAction::SetModel { provider, id } => {
                self.send(Job::SetModel { provider, model: id }, Done::Model, replies)
            }
            ExtensionAction::SetThinkingLevel { level } => {
                self.send(Job::SetThinkingLevel { level }, Done::Quiet, replies)
            }
            ExtensionAction::Shutdown => self.quit_when_idle = true,
            ExtensionAction::Abort => self.abort(),
        }
    }

    /// One `ctx.ui` call of an extension.
    pub(super) fn extension_ui(&mut self, call: ext_ui::UiCall, replies: &Replies) {
        match self.ext.take(call) {
            ext_ui::Shown::Notice(text, warn) => {
                self.transcript.notice(if warn { Tone::Warn } else { Tone::Info }, text)
            }
            ext_ui::Shown::EditorText(text) => self.editor.set_text(&text),
            ext_ui::Shown::Title(title) => {
                let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::terminal::SetTitle(title));
            }
            ext_ui::Shown::TerminalWrite(data) => {
                use std::io::Write as _;
                let mut stdout = std::io::stdout();
                let _ = stdout.write_all(data.as_bytes()).and_then(|()| stdout.flush());
            }
            ext_ui::Shown::ThinkingLabel(label) => self.transcript.set_thinking_label(label),
            ext_ui::Shown::Submit(text) => {
                self.editor.add_history([text.clone()]);
                self.submit(text, QueueKind::Steer, replies);
            }
            ext_ui::Shown::EditorChanged(text) => {
                self.editor.set_text(&text);
                self.editor_synced = Some(text);
            }
            ext_ui::Shown::Action(id) => {
                if let Some(action) = super::keys::Action::by_id(&id) {
                    self.act(action, replies);
                }
            }
            ext_ui::Shown::ToolDrawn(id, drawn) => self.transcript.drawn(&id, drawn),
            ext_ui::Shown::Theme(name) => self.use_theme(&name),
            ext_ui::Shown::Suggestions(seq, prefix, items) => self.suggestions(seq, &prefix, items),
            ext_ui::Shown::ToolsExpanded(expanded) => {
                if self.transcript.tools_expanded() != expanded {
                    self.transcript.toggle_tool_output();
                }
            }
            ext_ui::Shown::Nothing => {}
        }
    }

    /// Draws with the theme called `name` from now on and keeps it in the global settings (as
    /// upstream's `setTheme`); an unknown name is said.
    pub(super) fn use_theme(&mut self, name: &str) {
        let Some(chosen) = self.themes.all.iter().find(|t| t.name == name) else {
            return self.transcript.notice(Tone::Warn, format!("theme \"{name}\" not found"));
        };
        super::theme::set(chosen.clone());
        self.transcript.restyle();
        if let Some(file) = super::settings_panel::global_file()
            && let Err(why) = super::settings_panel::set(&file, "theme", serde_json::Value::from(name))
        {
            self.transcript.notice(Tone::Warn, format!("theme: {why}"));
        }
    }

    /// With an extension's editor in place of pi's: what pi put in its own editor since (a
    /// dequeue, a cleared editor, `setEditorText`, Ctrl+G) goes to the extension's.
    pub(super) fn sync_extension_editor(&mut self) {
        if !self.ext.has_editor() {
            self.editor_synced = None;
            return;
        }
        let text = self.editor.text();
        if self.editor_synced.as_deref() != Some(text.as_str()) {
            self.ext.editor_set_text(&text);
            self.editor_synced = Some(text);
        }
    }
}
