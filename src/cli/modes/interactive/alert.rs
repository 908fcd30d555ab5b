//! A dialog over the screen that the user must dismiss (Enter or Esc) before anything else:
//! for what must not scroll by unread, such as a listed extension that failed to load.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Flex, Layout};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// A titled message with one way out.
pub struct Alert {
    title: String,
    lines: Vec<String>,
}

impl Alert {
    pub fn new(title: impl Into<String>, lines: Vec<String>) -> Self {
        Alert { title: title.into(), lines }
    }

    /// True when `key` dismisses it; every other key is swallowed while it shows.
    pub fn dismissed_by(key: &KeyEvent) -> bool {
        matches!(key.code, KeyCode::Enter | KeyCode::Esc)
    }

    /// Draws it centred over whatever is on the screen.
    pub fn draw(&self, frame: &mut ratatui::Frame<'_>) {
        let area = frame.area();
        let width = area.width.saturating_sub(4).min(90);
        let mut text: Vec<Line<'_>> = self.lines.iter().map(|l| Line::raw(l.as_str())).collect();
        text.push(Line::raw(""));
        text.push(Line::styled("Enter or Esc to dismiss", super::theme::fg(super::theme::Token::Dim)));
        let block =
            Block::bordered().title(self.title.as_str()).border_style(super::theme::fg(super::theme::Token::Error));
        boxed(frame, width, text, block);
    }
}

/// Draws `lines` (wrapped) in `block`, `width` columns wide and as high as they need (capped by
/// the screen), centred over whatever is on the screen.
pub fn boxed(frame: &mut ratatui::Frame<'_>, width: u16, lines: Vec<Line<'_>>, block: Block<'_>) {
    let area = frame.area();
    // Wrapped lines need more rows than lines: a generous estimate.
    let inner = width.saturating_sub(2).max(1) as usize;
    let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
    let height = (rows as u16 + 2).min(area.height);
    let [row] = Layout::vertical([Constraint::Length(height)]).flex(Flex::Center).areas(area);
    let [place] = Layout::horizontal([Constraint::Length(width)]).flex(Flex::Center).areas(row);
    frame.render_widget(Clear, place);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).block(block), place);
}
