//! The selectors that open over the screen and take every key while open: a list to choose from
//! (the model selector, `/settings`), the scoped-models selector, the session picker and the tree
//! navigator — each with upstream's keys of its context ([`keys::Context`](super::keys::Context)).

use ratatui::crossterm::event::KeyEvent;

use super::Replies;
use super::picker::{Picked, Picker, Purpose};
use super::scope_picker::{ScopeKey, ScopePicker};
use super::session_picker::{SessionKey, SessionPicker};
use super::transcript::Tone;
use super::tree_nav::{TreeKey, TreeNav};
use super::{Done, Ui};
use crate::cli::modes::driver::Job;

/// An open selector.
pub(super) enum Selector {
    List(Picker),
    Scope(ScopePicker),
    Sessions(SessionPicker),
    Tree(TreeNav),
}

impl Selector {
    pub(super) fn draw(&self, frame: &mut ratatui::Frame<'_>, keymap: &super::keys::Keymap) {
        match self {
            Selector::List(picker) => picker.draw(frame),
            Selector::Scope(picker) => picker.draw(frame, keymap),
            Selector::Sessions(picker) => picker.draw(frame, keymap),
            Selector::Tree(nav) => nav.draw(frame, keymap),
        }
    }
}

impl Ui<'_> {
    /// A key while a selector is open.
    pub(super) fn selector_key(&mut self, key: &KeyEvent, replies: &Replies) {
        let Some(selector) = &mut self.selector else { return };
        match selector {
            Selector::List(picker) => {
                let purpose = picker.purpose;
                match picker.key(key, &self.keymap) {
                    Picked::Open => {}
                    Picked::Cancelled => self.selector = None,
                    Picked::Chosen(value) => {
                        self.selector = None;
                        self.picked(purpose, value, replies);
                    }
                }
            }
            Selector::Scope(picker) => match picker.key(key, &self.keymap) {
                ScopeKey::Open => {}
                ScopeKey::Closed => self.selector = None,
                ScopeKey::Changed(scope) => self.model_scope = Some(scope.unwrap_or_else(|| self.ready_models())),
                ScopeKey::Save(scope) => {
                    let Some(file) = super::settings_panel::global_file() else { return };
                    match super::settings_panel::save_enabled_models(&file, scope.as_deref()) {
                        Ok(()) => {
                            self.transcript.notice(Tone::Info, format!("model scope saved to {}", file.display()))
                        }
                        Err(why) => self.transcript.notice(Tone::Error, format!("/scoped-models: {why}")),
                    }
                }
            },
            Selector::Sessions(picker) => match picker.key(key, &self.keymap) {
                SessionKey::Open => {}
                SessionKey::Cancelled => self.selector = None,
                SessionKey::Chosen(path) => {
                    self.selector = None;
                    self.send(Job::SwitchSession { path }, Done::Session("resumed"), replies);
                }
                SessionKey::RenameCurrent(name) => {
                    self.send(Job::SetSessionName(name.clone()), Done::Quiet, replies);
                    self.transcript.notice(Tone::Info, format!("session name: {name}"));
                    self.selector = None;
                }
            },
            Selector::Tree(nav) => match nav.key(key, &self.keymap) {
                TreeKey::Open => {}
                TreeKey::Cancelled => self.selector = None,
                TreeKey::AlreadyThere => {
                    self.selector = None;
                    self.transcript.notice(Tone::Info, "Already at this point");
                }
                TreeKey::Navigate { target, summarize } => {
                    self.selector = None;
                    if summarize {
                        self.running = Some("summarizing the branch".into());
                    }
                    self.send(Job::Navigate { target, summarize }, Done::Tree { navigate: true }, replies);
                }
                TreeKey::Label { id, label } => self.send(Job::SetLabel { target: id, label }, Done::Quiet, replies),
            },
        }
    }

    /// What a list's choice does: switch to the model, continue the session, change a setting.
    fn picked(&mut self, purpose: Purpose, value: String, replies: &Replies) {
        match purpose {
            Purpose::Model => {
                let (provider, model) = value.split_once('/').unwrap_or(("", &value));
                let job = Job::SetModel { provider: provider.to_owned(), model: model.to_owned() };
                self.send(job, Done::Model, replies);
            }
            Purpose::Setting => self.change_setting(&value, replies),
        }
    }

    /// The models that can run here (their key is set).
    fn ready(&self) -> impl Iterator<Item = &pi_agent::model::ModelInfo> {
        self.registry.models().iter().filter(|m| crate::cli::models_cmd::status(m, &self.registry) == "ready")
    }

    /// The models that can run here, as `provider/id`.
    fn ready_models(&self) -> Vec<String> {
        self.ready().map(|m| format!("{}/{}", m.provider, m.id)).collect()
    }

    /// `/scoped-models`: the models that can run here, the scope in use (this session's, else
    /// `--models` or the settings' `enabledModels` as at start) enabled.
    pub(super) fn open_scoped_models(&mut self) {
        let models = self
            .ready()
            .map(|m| super::scope_picker::Model {
                full_id: format!("{}/{}", m.provider, m.id),
                provider: m.provider.clone(),
                name: m.name.clone().unwrap_or_else(|| m.id.clone()),
            })
            .collect();
        let enabled = self.model_scope.clone().unwrap_or_else(|| self.scope_at_start.clone());
        self.selector = Some(Selector::Scope(ScopePicker::new(models, enabled)));
    }
}
