//! A dialog over the screen that the user must dismiss (Enter or Esc) before anything else:
//! for what must not scroll by unread, such as a listed extension that failed to load.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Flex, Layout};
use ratatui::style::{Color, Style};
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
        text.push(Line::styled("Enter or Esc to dismiss", Style::default().fg(Color::DarkGray)));
        // Wrapped lines need more rows than lines: a generous estimate, capped by the screen.
        let rows: usize = text.iter().map(|l| l.width().max(1).div_ceil(width.saturating_sub(2).max(1) as usize)).sum();
        let height = (rows as u16 + 2).min(area.height);
        let [row] = Layout::vertical([Constraint::Length(height)]).flex(Flex::Center).areas(area);
        let [dialog] = Layout::horizontal([Constraint::Length(width)]).flex(Flex::Center).areas(row);
        frame.render_widget(Clear, dialog);
        let block = Block::bordered().title(self.title.as_str()).border_style(Style::default().fg(Color::Red));
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: false }).block(block), dialog);
    }
}
