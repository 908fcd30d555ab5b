//! `/scoped-models`, upstream's scoped-models selector: which models Ctrl+P cycles through, and
//! in what order. Changes hold for this session at once; `app.models.save` (Ctrl+S) writes them
//! to the settings' `enabledModels`. Enter enables or disables the selected model, Ctrl+A
//! enables all (all that match the search while there is one), Ctrl+X clears them, Ctrl+P
//! toggles the selected model's provider, Alt+Up/Down move an enabled model in the order; typing
//! searches, Ctrl+C clears the search (or closes), Esc closes.

use ratatui::crossterm::event::KeyEvent;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Block;

use super::keys::{Action, Context, Keymap};
use super::theme::{Token, fg};

/// An open selector.
pub struct ScopePicker {
    /// Every model that can run here: `provider/id`, its provider, its name.
    models: Vec<Model>,
    /// The enabled models in cycle order; `None` when all are (no scope).
    enabled: Option<Vec<String>>,
    query: String,
    /// Index into the shown models.
    selected: usize,
    /// Changed since the last save.
    dirty: bool,
}

/// One model of the list.
pub struct Model {
    pub full_id: String,
    pub provider: String,
    pub name: String,
}

/// What a key did.
#[derive(Debug, PartialEq)]
pub enum ScopeKey {
    /// Nothing the session needs to hear of.
    Open,
    /// The scope changed: the models to cycle through (`None`: all).
    Changed(Option<Vec<String>>),
    /// Save this scope to the settings (`None`: remove `enabledModels`).
    Save(Option<Vec<String>>),
    Closed,
}

/// Rows of models shown at once (upstream's).
const ROWS: usize = 8;

impl ScopePicker {
    /// Over `models`, with `enabled` (in order; empty: all) the scope now.
    pub fn new(models: Vec<Model>, enabled: Vec<String>) -> ScopePicker {
        let enabled = (!enabled.is_empty()).then_some(enabled);
        ScopePicker { models, enabled, query: String::new(), selected: 0, dirty: false }
    }

    fn is_enabled(&self, id: &str) -> bool {
        self.enabled.as_ref().is_none_or(|list| list.iter().any(|m| m == id))
    }

    /// The models shown: the enabled ones first in their order, then the rest, narrowed by the
    /// search (each word in the model's id or provider).
    fn shown(&self) -> Vec<&Model> {
        let mut order: Vec<&Model> = match &self.enabled {
            None => self.models.iter().collect(),
            Some(list) => {
                let first = list.iter().filter_map(|id| self.models.iter().find(|m| &m.full_id == id));
                first.chain(self.models.iter().filter(|m| !list.contains(&m.full_id))).collect()
            }
        };
        order.retain(|m| crate::cli::models_cmd::matches(&self.query, &m.full_id));
        order
    }

    fn all_ids(&self) -> Vec<String> {
        self.models.iter().map(|m| m.full_id.clone()).collect()
    }

    /// The ids a bulk action works on: those the search shows while there is one, else all.
    fn targets(&self) -> Vec<String> {
        if self.query.is_empty() { self.all_ids() } else { self.shown().iter().map(|m| m.full_id.clone()).collect() }
    }

    fn enable(&mut self, ids: &[String]) {
        let Some(list) = &mut self.enabled else { return };
        for id in ids {
            if !list.contains(id) {
                list.push(id.clone());
            }
        }
        if list.len() == self.models.len() {
            self.enabled = None;
        }
    }

    fn disable(&mut self, ids: &[String]) {
        let list = self.enabled.take().unwrap_or_else(|| self.all_ids());
        self.enabled = Some(list.into_iter().filter(|id| !ids.contains(id)).collect());
    }

    pub fn key(&mut self, key: &KeyEvent, keymap: &Keymap) -> ScopeKey {
        let count = self.shown().len();
        let selected = self.shown().get(self.selected).map(|m| (m.full_id.clone(), m.provider.clone()));
        let actions = keymap.actions_in(key, &[Context::Models, Context::Select]);
        match actions.first() {
            Some(Action::SelectUp) if count > 0 => self.selected = (self.selected + count - 1) % count,
            Some(Action::SelectDown) if count > 0 => self.selected = (self.selected + 1) % count,
            Some(Action::ModelsReorderUp | Action::ModelsReorderDown) => {
                let up = actions[0] == Action::ModelsReorderUp;
                let (Some(list), Some((id, _))) = (&mut self.enabled, selected) else { return ScopeKey::Open };
                let Some(at) = list.iter().position(|m| *m == id) else { return ScopeKey::Open };
                let to = if up { at.checked_sub(1) } else { Some(at + 1).filter(|&to| to < list.len()) };
                let Some(to) = to else { return ScopeKey::Open };
                list.swap(at, to);
                self.selected = if up { self.selected.saturating_sub(1) } else { self.selected + 1 };
                return self.changed();
            }
            Some(Action::SelectConfirm) => {
                let Some((id, _)) = selected else { return ScopeKey::Open };
                if self.enabled.is_none() {
                    // The first toggle from "all": only this one.
                    self.enabled = Some(vec![id]);
                } else if self.is_enabled(&id) {
                    self.disable(&[id]);
                } else {
                    self.enable(&[id]);
                }
                return self.changed();
            }
            Some(Action::ModelsEnableAll) => {
                let targets = self.targets();
                self.enable(&targets);
                return self.changed();
            }
            Some(Action::ModelsClearAll) => {
                let targets = match (&self.enabled, self.query.is_empty()) {
                    (Some(list), true) => list.clone(),
                    _ => self.targets(),
                };
                self.disable(&targets);
                return self.changed();
            }
            Some(Action::ModelsToggleProvider) => {
                let Some((_, provider)) = selected else { return ScopeKey::Open };
                let ids: Vec<String> =
                    self.models.iter().filter(|m| m.provider == provider).map(|m| m.full_id.clone()).collect();
                if ids.iter().all(|id| self.is_enabled(id)) {
                    self.disable(&ids);
                } else {
                    self.enable(&ids);
                }
                return self.changed();
            }
            Some(Action::ModelsSave) => {
                self.dirty = false;
                return ScopeKey::Save(self.enabled.clone());
            }
            Some(Action::SelectCancel) if key.code == ratatui::crossterm::event::KeyCode::Esc => {
                return ScopeKey::Closed;
            }
            // Ctrl+C: the search cleared, or closed when there is none.
            Some(Action::SelectCancel) if self.query.is_empty() => return ScopeKey::Closed,
            Some(Action::SelectCancel) => self.query.clear(),
            _ => {
                super::picker::type_into(&mut self.query, key);
            }
        }
        self.selected = self.selected.min(self.shown().len().saturating_sub(1));
        ScopeKey::Open
    }

    fn changed(&mut self) -> ScopeKey {
        self.dirty = true;
        self.selected = self.selected.min(self.shown().len().saturating_sub(1));
        ScopeKey::Changed(self.enabled.clone())
    }

    /// Draws it centred over the screen, as upstream's: the search, a window of models (the
    /// selected one's name under them), the keys and the count.
    pub fn draw(&self, frame: &mut ratatui::Frame<'_>, keymap: &Keymap) {
        let shown = self.shown();
        let (dim, muted) = (fg(Token::Dim), fg(Token::Muted));
        let save = keymap.keys_of(Action::ModelsSave);
        let mut lines = vec![
            Line::styled(format!("Session-only. {save} to save to settings."), muted),
            Line::raw(""),
            Line::raw(format!("> {}", self.query)),
            Line::raw(""),
        ];
        let first = self.selected.saturating_sub(ROWS / 2).min(shown.len().saturating_sub(ROWS));
        for (i, model) in shown.iter().enumerate().skip(first).take(ROWS) {
            let here = i == self.selected;
            let mark = if here { "→ " } else { "  " };
            let id = model.full_id.split_once('/').map_or(model.full_id.as_str(), |(_, id)| id);
            let mut spans = vec![
                Span::styled(mark, fg(Token::Accent)),
                Span::styled(id.to_owned(), if here { fg(Token::Accent) } else { Default::default() }),
                Span::styled(format!(" [{}]", model.provider), muted),
            ];
            if self.enabled.is_some() {
                spans.push(if self.is_enabled(&model.full_id) {
                    Span::styled(" ✓", fg(Token::Success))
                } else {
                    Span::styled(" ✗", dim)
                });
            }
            lines.push(Line::from(spans));
        }
        if shown.is_empty() {
            lines.push(Line::styled("  No matching models", muted));
        } else if shown.len() > ROWS {
            lines.push(Line::styled(format!("  ({}/{})", self.selected + 1, shown.len()), muted));
        }
        if let Some(model) = shown.get(self.selected) {
            lines.push(Line::raw(""));
            lines.push(Line::styled(format!("  Model Name: {}", model.name), muted));
        }
        let count = match &self.enabled {
            None => "all enabled".to_owned(),
            Some(list) => format!("{}/{} enabled", list.len(), self.models.len()),
        };
        let hint = [
            (Action::SelectConfirm, "toggle"),
            (Action::ModelsEnableAll, "all"),
            (Action::ModelsClearAll, "clear"),
            (Action::ModelsToggleProvider, "provider"),
        ]
        .iter()
        .map(|(action, what)| format!("{} {what}", keymap.keys_of(*action)))
        .chain([
            format!(
                "{}/{} reorder",
                keymap.keys_of(Action::ModelsReorderUp),
                keymap.keys_of(Action::ModelsReorderDown)
            ),
            format!("{save} save"),
            count,
        ])
        .collect::<Vec<_>>()
        .join(" · ");
        lines.push(Line::raw(""));
        let mut footer = vec![Span::styled(format!("  {hint}"), dim)];
        if self.dirty {
            footer.push(Span::styled(" (unsaved)", fg(Token::Warning)));
        }
        lines.push(Line::from(footer));
        let width = frame.area().width.saturating_sub(4).min(100);
        let block = Block::bordered()
            .title(Span::styled(" Model Configuration ", fg(Token::Accent).add_modifier(Modifier::BOLD)))
            .border_style(fg(Token::BorderAccent));
        super::alert::boxed(frame, width, lines, block);
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};

    use super::*;

    fn picker() -> ScopePicker {
        let model = |p: &str, id: &str| Model { full_id: format!("{p}/{id}"), provider: p.into(), name: id.into() };
        ScopePicker::new(vec![model("a", "one"), model("a", "two"), model("b", "three")], Vec::new())
    }

    fn press(p: &mut ScopePicker, code: KeyCode, modifiers: KeyModifiers) -> ScopeKey {
        p.key(&KeyEvent::new(code, modifiers), &Keymap::default())
    }

    #[test]
    fn toggles_bulk_actions_and_reordering_follow_upstreams_selector() {
        let mut p = picker();
        let none = KeyModifiers::NONE;
        // From "all", the first Enter keeps only the selected one.
        assert_eq!(press(&mut p, KeyCode::Enter, none), ScopeKey::Changed(Some(vec!["a/one".into()])));
        press(&mut p, KeyCode::Down, none);
        press(&mut p, KeyCode::Down, none);
        assert_eq!(
            press(&mut p, KeyCode::Enter, none),
            ScopeKey::Changed(Some(vec!["a/one".into(), "b/three".into()]))
        );
        // The enabled come first: b/three is second now (the selection stays on the third row,
        // as upstream's); Alt+Up moves it to the front.
        press(&mut p, KeyCode::Up, none);
        assert_eq!(
            press(&mut p, KeyCode::Up, KeyModifiers::ALT),
            ScopeKey::Changed(Some(vec!["b/three".into(), "a/one".into()]))
        );
        // Ctrl+P on provider a (a/one selected after the move): a/two is off, so both go on.
        press(&mut p, KeyCode::Down, none);
        assert_eq!(press(&mut p, KeyCode::Char('p'), KeyModifiers::CONTROL), ScopeKey::Changed(None), "all on");
        // Ctrl+X with a search clears only what it shows.
        for c in "two".chars() {
            press(&mut p, KeyCode::Char(c), none);
        }
        assert_eq!(
            press(&mut p, KeyCode::Char('x'), KeyModifiers::CONTROL),
            ScopeKey::Changed(Some(vec!["a/one".into(), "b/three".into()]))
        );
        assert_eq!(press(&mut p, KeyCode::Char('s'), KeyModifiers::CONTROL), ScopeKey::Save(p.enabled.clone()));
        // Ctrl+C clears the search first, then closes.
        assert_eq!(press(&mut p, KeyCode::Char('c'), KeyModifiers::CONTROL), ScopeKey::Open);
        assert_eq!(p.shown().len(), 3);
        assert_eq!(press(&mut p, KeyCode::Char('a'), KeyModifiers::CONTROL), ScopeKey::Changed(None));
        assert_eq!(press(&mut p, KeyCode::Char('c'), KeyModifiers::CONTROL), ScopeKey::Closed);
    }
}
