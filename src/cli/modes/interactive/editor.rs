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
    /// What Ctrl+W, Alt+Backspace, Alt+D, Ctrl+K and Ctrl+U cut, newest last (Ctrl+Y yanks it).
    kill_ring: Vec<String>,
    /// The text the last yank put in (`Alt+Y` replaces it with the ring's previous entry), and
    /// which ring entry it was.
    yanked: Option<(String, usize)>,
    /// Earlier states for Ctrl+- (undo): text and cursor.
    undo: Vec<(Vec<String>, usize, usize)>,
    /// The last edit was typing (consecutive typing is undone at once).
    typing: bool,
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

    /// Adds what was sent earlier (a resumed session's user messages) to the history, oldest
    /// first; the newest 100 are kept, as upstream's editor keeps them.
    pub fn add_history(&mut self, sent: impl IntoIterator<Item = String>) {
        for text in sent {
            if !text.trim().is_empty() && self.history.last() != Some(&text) {
                self.history.push(text);
            }
        }
        let extra = self.history.len().saturating_sub(100);
        self.history.drain(..extra);
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
        if !self.typing {
            self.remember();
            self.typing = true;
        }
        self.yanked = None;
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
        self.remember();
        let at = self.byte_at(self.col);
        let rest = self.lines[self.row].split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    /// Deletes before the cursor (joining lines at a line start).
    pub fn backspace(&mut self) {
        self.remember();
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
        self.remember();
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

    /// Deletes from the line start to the cursor (Ctrl+U), into the kill ring.
    pub fn kill_to_start(&mut self) {
        let start = self.col;
        self.cut(0, start);
    }

    /// Deletes from the cursor to the line end (Ctrl+K), into the kill ring; at the end of a
    /// line, joins the next one.
    pub fn kill_to_end(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col == len {
            self.remember();
            self.delete();
        } else {
            self.cut(self.col, len);
        }
    }

    /// Where the word before the cursor starts (readline's: letters and digits; what is not one
    /// before it is skipped first).
    fn word_start(&self) -> usize {
        let chars: Vec<char> = self.lines[self.row].chars().collect();
        let mut at = self.col;
        while at > 0 && !chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        while at > 0 && chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        at
    }

    /// Where the word after the cursor ends.
    fn word_end(&self) -> usize {
        let chars: Vec<char> = self.lines[self.row].chars().collect();
        let mut at = self.col;
        while at < chars.len() && !chars[at].is_alphanumeric() {
            at += 1;
        }
        while at < chars.len() && chars[at].is_alphanumeric() {
            at += 1;
        }
        at
    }

    /// The word being typed: the characters before the cursor back to whitespace.
    /// The cursor's row and column, in characters.
    pub fn position(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    pub fn token(&self) -> String {
        let before: Vec<char> = self.lines[self.row].chars().take(self.col).collect();
        let start = before.iter().rposition(|c| c.is_whitespace()).map_or(0, |i| i + 1);
        before[start..].iter().collect()
    }

    /// Replaces the `chars` characters before the cursor with `text` (a completion).
    pub fn replace_before_cursor(&mut self, chars: usize, text: &str) {
        self.remember();
        let line: Vec<char> = self.lines[self.row].chars().collect();
        let start = self.col.saturating_sub(chars);
        let mut replaced: String = line[..start].iter().collect();
        replaced.push_str(text);
        let col = replaced.chars().count();
        replaced.extend(&line[self.col..]);
        self.lines[self.row] = replaced;
        self.col = col;
    }

    /// Ctrl+] then `c`: the cursor to the next `c` on the line (Ctrl+Alt+]: the one before);
    /// it stays when there is none.
    pub fn jump_to(&mut self, c: char, backward: bool) {
        let chars: Vec<char> = self.lines[self.row].chars().collect();
        let found = if backward {
            chars[..self.col].iter().rposition(|&x| x == c)
        } else {
            chars.iter().skip(self.col + 1).position(|&x| x == c).map(|i| i + self.col + 1)
        };
        if let Some(at) = found {
            self.col = at;
        }
    }

    /// A word left (Alt+B, Ctrl+Left); at a line start, the end of the line before.
    pub fn word_left(&mut self) {
        if self.col == 0 {
            return self.left();
        }
        self.col = self.word_start();
    }

    /// A word right (Alt+F, Ctrl+Right); at a line end, the start of the next.
    pub fn word_right(&mut self) {
        if self.col == self.lines[self.row].chars().count() {
            return self.right();
        }
        self.col = self.word_end();
    }

    /// Deletes the word before the cursor (Ctrl+W, Alt+Backspace), into the kill ring.
    pub fn kill_word_before(&mut self) {
        if self.col == 0 {
            self.remember();
            return self.backspace();
        }
        // `cut` remembers the cursor where it was (undo puts it back there), then moves it.
        let (start, end) = (self.word_start(), self.col);
        self.cut(start, end);
    }

    /// Deletes the word after the cursor (Alt+D), into the kill ring.
    pub fn kill_word_after(&mut self) {
        let end = self.word_end();
        self.cut(self.col, end);
    }

    /// Characters `from..to` of the row cut into the kill ring (the cursor is at `from`).
    fn cut(&mut self, from: usize, to: usize) {
        if from == to {
            return;
        }
        self.remember();
        let (a, b) = (self.byte_at(from), self.byte_at(to));
        let cut: String = self.lines[self.row].drain(a..b).collect();
        self.col = from;
        self.kill_ring.push(cut);
        if self.kill_ring.len() > 32 {
            self.kill_ring.remove(0);
        }
    }

    /// Puts the last cut back at the cursor (Ctrl+Y).
    pub fn yank(&mut self) {
        let Some(text) = self.kill_ring.last().cloned() else { return };
        self.remember();
        self.insert_plain(&text);
        self.yanked = Some((text, self.kill_ring.len() - 1));
    }

    /// Right after a yank, replaces what it put in with the ring's entry before it (Alt+Y).
    pub fn yank_pop(&mut self) {
        let Some((text, index)) = self.yanked.take() else { return };
        let previous = if index == 0 { self.kill_ring.len() - 1 } else { index - 1 };
        let width = text.chars().count();
        let start = self.col.saturating_sub(width);
        let (a, b) = (self.byte_at(start), self.byte_at(self.col));
        self.lines[self.row].drain(a..b);
        self.col = start;
        let next = self.kill_ring[previous].clone();
        self.insert_plain(&next);
        self.yanked = Some((next, previous));
    }

    /// Text typed at the cursor without touching the undo state (yanked text has no newlines:
    /// cuts stay within a line).
    fn insert_plain(&mut self, text: &str) {
        let at = self.byte_at(self.col);
        self.lines[self.row].insert_str(at, text);
        self.col += text.chars().count();
    }

    /// Remembers the text and cursor for undo (and ends a run of typing).
    fn remember(&mut self) {
        self.typing = false;
        if self.undo.last().is_some_and(|(lines, ..)| *lines == self.lines) {
            return;
        }
        self.undo.push((self.lines.clone(), self.row, self.col));
        if self.undo.len() > 100 {
            self.undo.remove(0);
        }
    }

    /// Back to the state before the last edit (Ctrl+-).
    pub fn undo(&mut self) {
        self.typing = false;
        self.yanked = None;
        if let Some((lines, row, col)) = self.undo.pop() {
            (self.lines, self.row, self.col) = (lines, row, col);
        }
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
    fn words_move_and_cut_into_a_kill_ring_that_yanks_back_and_undoes() {
        let mut e = Editor::new();
        e.insert_str("one two-three four");
        e.word_left();
        assert_eq!(e.cursor(), (0, 14), "to `four`");
        e.word_left();
        assert_eq!(e.cursor(), (0, 8), "over `-` to `three`");
        e.kill_word_before();
        assert_eq!(e.text(), "one three four", "`two-` cut");
        e.kill_word_after();
        assert_eq!(e.text(), "one  four", "`three` cut");
        e.kill_to_end();
        assert_eq!(e.text(), "one ", "` four` cut");
        e.yank();
        assert_eq!(e.text(), "one  four", "the last cut back");
        e.yank_pop();
        assert_eq!(e.text(), "one three", "replaced by the one before");
        e.undo();
        assert_eq!(e.text(), "one ", "before the yank");
        e.undo();
        e.undo();
        e.undo();
        assert_eq!(e.text(), "one two-three four");
        e.end();
        e.insert_str("!!");
        e.undo();
        assert_eq!(e.text(), "one two-three four", "typing is undone at once");
        e.home();
        e.word_right();
        assert_eq!(e.cursor(), (0, 3));
    }

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
