//! A ratatui backend that writes every line it changes whole. ratatui sends a backend only the
//! cells that differ from the last frame, so streamed text reaches the terminal in fragments:
//! an unchanged space between two words is skipped and the cursor moved over it. Whatever reads
//! the terminal's byte stream rather than its screen — a screen reader's log, `script`, a
//! pseudo-terminal test — then never sees "two words" together. Keeping a copy of the screen,
//! this backend sends each touched line in full, left to right, to the real backend.

use ratatui::backend::{Backend, ClearType, WindowSize};
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Rect, Size};

/// The [`Backend`] methods (but `draw` and `append_lines`) of a wrapper, forwarded to its
/// `inner` backend.
macro_rules! forward_to_inner {
    () => {
        fn hide_cursor(&mut self) -> Result<(), Self::Error> {
            self.inner.hide_cursor()
        }
        fn show_cursor(&mut self) -> Result<(), Self::Error> {
            self.inner.show_cursor()
        }
        fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
            self.inner.get_cursor_position()
        }
        fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
            self.inner.set_cursor_position(position)
        }
        fn clear(&mut self) -> Result<(), Self::Error> {
            self.inner.clear()
        }
        fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
            self.inner.clear_region(clear_type)
        }
        fn size(&self) -> Result<Size, Self::Error> {
            self.inner.size()
        }
        fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
            self.inner.window_size()
        }
        fn flush(&mut self) -> Result<(), Self::Error> {
            self.inner.flush()
        }
    };
}

/// Wraps `B`, resending whole lines.
pub struct WholeLines<B> {
    inner: B,
    screen: Buffer,
    /// The screen assumed when the terminal reports no size.
    fallback: Rect,
}

impl<B: Backend> WholeLines<B> {
    /// Wraps `inner`; `fallback` is the screen when the terminal reports no size.
    pub fn new(inner: B, fallback: Rect) -> Self {
        WholeLines { inner, screen: Buffer::empty(Rect::default()), fallback }
    }

    /// The terminal was cleared behind its back (after Ctrl+Z or Ctrl+G): the copy of the
    /// screen is blank again, so a line is resent from what the next frame draws.
    pub fn forget(&mut self) {
        self.screen = Buffer::empty(Rect::default());
    }

    fn area(&self) -> Result<Rect, B::Error> {
        let size = self.inner.size()?;
        let area = Rect::new(0, 0, size.width, size.height);
        Ok(if area.is_empty() { self.fallback } else { area })
    }
}

impl<B: Backend> Backend for WholeLines<B> {
    type Error = B::Error;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let area = self.area()?;
        let mut touched = vec![false; area.height as usize];
        let mut cells: Vec<(u16, u16, Cell)> = Vec::new();
        for (x, y, cell) in content {
            if !area.contains(Position::new(x, y)) {
                // Outside what this backend knows (a size change in flight): pass it on as is.
                cells.push((x, y, cell.clone()));
                continue;
            }
            if self.screen.area != area {
                self.screen = Buffer::empty(area);
            }
            self.screen[(x, y)] = cell.clone();
            touched[y as usize] = true;
        }
        let whole = touched.iter().enumerate().filter(|(_, t)| **t).flat_map(|(y, _)| {
            let y = y as u16;
            (area.x..area.right()).map(move |x| (x, y))
        });
        let screen = &self.screen;
        let lines = whole.map(|(x, y)| (x, y, &screen[(x, y)]));
        self.inner.draw(cells.iter().map(|(x, y, c)| (*x, *y, c)).chain(lines))
    }

    fn append_lines(&mut self, n: u16) -> Result<(), Self::Error> {
        self.inner.append_lines(n)
    }

    forward_to_inner!();
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::widgets::Paragraph;
    use ratatui::{Terminal, TerminalOptions, Viewport};

    use super::*;

    /// Records the cells each draw sends.
    struct Recording {
        inner: TestBackend,
        sent: Vec<Vec<(u16, u16, String)>>,
    }

    impl Backend for Recording {
        type Error = <TestBackend as Backend>::Error;
        fn draw<'a, I: Iterator<Item = (u16, u16, &'a Cell)>>(&mut self, content: I) -> Result<(), Self::Error> {
            let cells: Vec<(u16, u16, &Cell)> = content.collect();
            self.sent.push(cells.iter().map(|(x, y, c)| (*x, *y, c.symbol().to_owned())).collect());
            self.inner.draw(cells.into_iter())
        }
        forward_to_inner!();
    }

    #[test]
    fn a_changed_line_is_sent_whole_and_untouched_lines_not_at_all() {
        let backend =
            WholeLines::new(Recording { inner: TestBackend::new(12, 3), sent: Vec::new() }, Rect::new(0, 0, 80, 24));
        let mut terminal = Terminal::with_options(backend, TerminalOptions { viewport: Viewport::Fullscreen }).unwrap();
        terminal.draw(|f| f.render_widget(Paragraph::new("top\nAll"), f.area())).unwrap();
        terminal.draw(|f| f.render_widget(Paragraph::new("top\nAll good."), f.area())).unwrap();
        let sent = &terminal.backend().inner.sent;
        let last = sent.last().unwrap();
        // Only line 1 changed: all of it went out, in order, spaces included.
        assert!(last.iter().all(|(_, y, _)| *y == 1));
        let text: String = last.iter().map(|(_, _, s)| s.as_str()).collect();
        assert_eq!(text, "All good.   ");
    }
}
