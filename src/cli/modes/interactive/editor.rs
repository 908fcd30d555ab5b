//! The prompt editor: multi-line text with a cursor, and the history of what was submitted
//! (Up on the first line goes back, Down on the last line forward).

use unicode_width::UnicodeWidthStr;

/// A multi-line editor with history.
#[derive(Debug, Default)]
pub struct Editor {
    lines: Vec<String>,
    row: usize,
    /// Cursor position in characters within the row.
    col: usize,
    history: Vec<String>,
    /// Index into `history` while browsing it, and the draft it replaced.
    browsing: Option<(usize, String)>,
}

impl Editor {
    /// An empty editor.
    pub fn new() -> Self {
        Editor { lines: vec![String::new()], ..Default::default() }
    }

    /// The text.
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// Nothing typed.
    pub fn is_empty(&self) -> bool {
        self.lines.iter().all(String::is_empty)
    }

    /// The lines.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// Replaces the text (cursor at the end).
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
        self.browsing = None;
    }

    /// Takes the text (into the history when not empty) and clears the editor.
    pub fn take(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.set_text("");
        text
    }

    /// Row and display column of the cursor.
    pub fn cursor(&self) -> (usize, usize) {
        let line = &self.lines[self.row];
        let before: String = line.chars().take(self.col).collect();
        (self.row, before.width())
    }

    /// Types a character.
    pub fn insert(&mut self, c: char) {
        let at = self.byte_at(self.col);
        self.lines[self.row].insert(at, c);
        self.col += 1;
    }

    /// Types text (a paste): newlines start new lines.
    pub fn insert_str(&mut self, text: &str) {
        for c in text.chars() {
            match c {
                '\n' => self.newline(),
                '\r' => {}
                c => self.insert(c),
            }
        }
    }

    /// Breaks the line at the cursor.
    pub fn newline(&mut self) {
        let at = self.byte_at(self.col);
        let rest = self.lines[self.row].split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    /// Deletes before the cursor (joining lines at a line start).
    pub fn backspace(&mut self) {
        if self.col > 0 {
            self.col -= 1;
            let at = self.byte_at(self.col);
            self.lines[self.row].remove(at);
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    /// Deletes at the cursor.
    pub fn delete(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            let at = self.byte_at(self.col);
            self.lines[self.row].remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    /// Moves left (to the end of the previous line at a line start).
    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    /// Moves right.
    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    /// To the line start.
    pub fn home(&mut self) {
        self.col = 0;
    }

    /// To the line end.
    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }

    /// Deletes from the line start to the cursor (Ctrl+U).
    pub fn kill_to_start(&mut self) {
        let at = self.byte_at(self.col);
        self.lines[self.row].drain(..at);
        self.col = 0;
    }

    /// Up a line, or back in the history from the first line.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let index = match &self.browsing {
            Some((0, _)) => return,
            Some((i, _)) => i - 1,
            None if self.history.is_empty() => return,
            None => self.history.len() - 1,
        };
        let draft = match self.browsing.take() {
            Some((_, draft)) => draft,
            None => self.text(),
        };
        let entry = self.history[index].clone();
        self.set_text(&entry);
        self.browsing = Some((index, draft));
    }

    /// Down a line, or forward in the history from the last line (back to the draft).
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let Some((index, draft)) = self.browsing.take() else { return };
        if index + 1 < self.history.len() {
            let entry = self.history[index + 1].clone();
            self.set_text(&entry);
            self.browsing = Some((index + 1, draft));
        } else {
            self.set_text(&draft);
        }
    }

    fn byte_at(&self, col: usize) -> usize {
        let line = &self.lines[self.row];
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_lines_and_walks_the_history() {
        let mut e = Editor::new();
        e.insert_str("héllo\nworld");
        assert_eq!(e.text(), "héllo\nworld");
        assert_eq!(e.cursor(), (1, 5));
        e.home();
        e.backspace();
        assert_eq!(e.text(), "hélloworld");
        e.left();
        e.left();
        e.delete();
        assert_eq!(e.text(), "héloworld");
        assert_eq!(e.take(), "héloworld");
        e.insert_str("second");
        e.take();
        e.insert_str("draft");
        e.up();
        assert_eq!(e.text(), "second");
        e.up();
        assert_eq!(e.text(), "héloworld");
        e.down();
        e.down();
        assert_eq!(e.text(), "draft");
        assert!(!e.is_empty());
        e.kill_to_start();
        assert!(e.is_empty());
    }
}
