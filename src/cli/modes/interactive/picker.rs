//! A list to choose from, over the screen, narrowed as you type (each typed word's letters in
//! order, as `pi --list-models SEARCH`): the model selector (Ctrl+L, `/model`) and `/settings`.
//! Upstream's `tui.select.*` keys: Up/Down move, PageUp/PageDown move by a page, Enter chooses,
//! Esc or Ctrl+C cancels (rebindable in `keybindings.json`).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::keys::{Action, Context, Keymap};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Block;

/// What a choice is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `provider/id` of the model to switch to.
    Model,
    /// A `/settings` option to move to its next value (the list stays open).
    Setting,
}

/// An open picker.
pub struct Picker {
    pub purpose: Purpose,
    title: String,
    /// `(what is shown, what is chosen)`.
    items: Vec<(String, String)>,
    query: String,
    /// Index into the filtered items.
    selected: usize,
}

/// What a key did to the picker.
#[derive(Debug, PartialEq)]
pub enum Picked {
    /// Still open.
    Open,
    /// Closed with this value.
    Chosen(String),
    /// Closed without a choice.
    Cancelled,
}

/// Rows of items shown at once.
const ROWS: usize = 12;

impl Picker {
    /// A picker over `items` (`(label, value)`), the one whose value is `current` selected.
    pub fn new(purpose: Purpose, title: &str, items: Vec<(String, String)>, current: Option<&str>) -> Picker {
        let selected = current.and_then(|c| items.iter().position(|(_, v)| v == c)).unwrap_or(0);
        Picker { purpose, title: title.to_owned(), items, query: String::new(), selected }
    }

    /// The items the query lets through, as indices.
    fn shown(&self) -> Vec<usize> {
        (0..self.items.len()).filter(|&i| crate::cli::models_cmd::matches(&self.query, &self.items[i].0)).collect()
    }

    pub fn key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Picked {
        let count = self.shown().len();
        let last = count.saturating_sub(1);
        match keymap.actions_in(key, &[Context::Select]).first() {
            Some(Action::SelectCancel) => return Picked::Cancelled,
            Some(Action::SelectConfirm) => {
                return match self.shown().get(self.selected) {
                    Some(&i) => Picked::Chosen(self.items[i].1.clone()),
                    None => Picked::Open,
                };
            }
            Some(Action::SelectUp) => self.selected = self.selected.saturating_sub(1),
            Some(Action::SelectDown) => self.selected = (self.selected + 1).min(last),
            Some(Action::SelectPageUp) => self.selected = self.selected.saturating_sub(ROWS),
            Some(Action::SelectPageDown) => self.selected = (self.selected + ROWS).min(last),
            _ => {
                if type_into(&mut self.query, key) {
                    self.selected = 0;
                }
            }
        }
        Picked::Open
    }

    /// Draws it centred over the screen: the query, then a window of the items around the
    /// selected one.
    pub fn draw(&self, frame: &mut ratatui::Frame<'_>) {
        let shown = self.shown();
        let first = self.selected.saturating_sub(ROWS - 1);
        let dim = super::theme::fg(super::theme::Token::Dim);
        let mut lines = vec![Line::raw(format!("> {}", self.query)), Line::raw("")];
        for (row, &i) in shown.iter().enumerate().skip(first).take(ROWS) {
            let (mark, style) = if row == self.selected {
                ("› ", super::theme::fg(super::theme::Token::Accent).add_modifier(Modifier::BOLD))
            } else {
                ("  ", Style::default())
            };
            lines.push(Line::styled(format!("{mark}{}", self.items[i].0), style));
        }
        if shown.is_empty() {
            lines.push(Line::styled("  nothing matches", dim));
        }
        lines.push(Line::raw(""));
        let count =
            format!("{} of {} · type to filter · ↑↓ move · Enter choose · Esc cancel", shown.len(), self.items.len());
        lines.push(Line::styled(count, dim));
        let width = frame.area().width.saturating_sub(4).min(90);
        let block = Block::bordered()
            .title(format!(" {} ", self.title))
            .border_style(super::theme::fg(super::theme::Token::BorderAccent));
        super::alert::boxed(frame, width, lines, block);
    }
}

/// A key typed into a selector's search `query`: a character without Ctrl or Alt is added,
/// Backspace takes the last one off. True when the query changed.
pub fn type_into(query: &mut String, key: &KeyEvent) -> bool {
    match key.code {
        KeyCode::Backspace => query.pop().is_some(),
        KeyCode::Char(c) if !key.modifiers.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) => {
            query.push(c);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(p: &mut Picker, code: KeyCode) -> Picked {
        p.key(&KeyEvent::new(code, KeyModifiers::NONE), &Keymap::default())
    }

    #[test]
    fn typing_narrows_the_list_and_enter_chooses_the_selected_one() {
        let items = ["openai/gpt-4o", "anthropic/claude-sonnet-4-5", "openai/gpt-4o-mini"]
            .map(|s| (s.to_owned(), s.to_owned()))
            .to_vec();
        let mut p = Picker::new(Purpose::Model, "Model", items, Some("openai/gpt-4o-mini"));
        assert_eq!(p.selected, 2);
        for c in "gpt mini".chars() {
            press(&mut p, KeyCode::Char(c));
        }
        assert_eq!(p.shown(), [2]);
        assert_eq!(press(&mut p, KeyCode::Enter), Picked::Chosen("openai/gpt-4o-mini".into()));
        for _ in 0..4 {
            press(&mut p, KeyCode::Backspace);
        }
        assert_eq!(p.shown(), [0, 2], "\"gpt\" again");
        press(&mut p, KeyCode::Down);
        press(&mut p, KeyCode::Down);
        assert_eq!(press(&mut p, KeyCode::Enter), Picked::Chosen("openai/gpt-4o-mini".into()), "stops at the end");
        assert_eq!(press(&mut p, KeyCode::Esc), Picked::Cancelled);
    }
}
