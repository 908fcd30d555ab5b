//! The session picker (`/resume`, `pi -r`), upstream's: this folder's sessions or all of them
//! (Tab), threaded / recent / by relevance (`app.session.toggleSort`, Ctrl+S), all or only named
//! ones (`toggleNamedFilter`, Ctrl+N), paths shown (`togglePath`, Ctrl+P), a session renamed
//! (`rename`, Ctrl+R) or deleted after a confirmation (`delete`, Ctrl+D; `deleteNoninvasive`,
//! Ctrl+Backspace, only while the search is empty). Typing searches; Enter resumes; Esc closes.

use std::path::PathBuf;
use std::time::SystemTime;

use ratatui::crossterm::event::KeyEvent;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Block;

use super::keys::{Action, Context, Keymap};
use super::session_list::{self, Row, Sort, Summary};
use super::theme::{Token, fg};

/// An open session picker.
pub struct SessionPicker {
    /// This folder's sessions, and the folder.
    here: Vec<Summary>,
    here_dir: PathBuf,
    /// Every project's, once asked for (Tab).
    all: Option<Vec<Summary>>,
    /// The sessions folder (all projects' folders are in it).
    root: PathBuf,
    show_all: bool,
    sort: Sort,
    named_only: bool,
    show_path: bool,
    query: String,
    selected: usize,
    /// The running session's file (it cannot be deleted; it shows in the accent colour).
    current: Option<PathBuf>,
    mode: Mode,
    /// What the last action did (deleted, failed…), until the next key.
    status: Option<(Token, String)>,
}

enum Mode {
    List,
    ConfirmDelete(PathBuf),
    Rename { path: PathBuf, name: String },
}

/// What a key did.
#[derive(Debug, PartialEq)]
pub enum SessionKey {
    Open,
    Cancelled,
    /// Resume this session.
    Chosen(PathBuf),
    /// Name the running session (the others are named here).
    RenameCurrent(String),
}

/// Rows shown at once.
const ROWS: usize = 10;

impl SessionPicker {
    /// Over the session files in `here_dir`; `root` holds every project's folder.
    pub fn new(here_dir: PathBuf, root: PathBuf, current: Option<PathBuf>) -> SessionPicker {
        SessionPicker {
            here: session_list::load(std::slice::from_ref(&here_dir)),
            here_dir,
            all: None,
            root,
            show_all: false,
            sort: Sort::Threaded,
            named_only: false,
            show_path: false,
            query: String::new(),
            selected: 0,
            current,
            mode: Mode::List,
            status: None,
        }
    }

    /// No session at all here (the picker says so rather than opening empty).
    pub fn is_empty(&self) -> bool {
        self.here.is_empty()
    }

    fn sessions(&self) -> &[Summary] {
        if self.show_all { self.all.as_deref().unwrap_or_default() } else { &self.here }
    }

    fn rows(&self) -> Vec<Row> {
        session_list::rows(self.sessions(), &self.query, self.sort, self.named_only)
    }

    fn selected_session(&self) -> Option<&Summary> {
        let row = *self.rows().get(self.selected)?;
        self.sessions().get(row.index)
    }

    fn reload(&mut self) {
        self.here = session_list::load(std::slice::from_ref(&self.here_dir));
        if self.all.is_some() {
            self.all = Some(session_list::load(&session_list::project_dirs(&self.root)));
        }
        self.selected = self.selected.min(self.rows().len().saturating_sub(1));
    }

    fn start_delete(&mut self) {
        let Some(session) = self.selected_session() else { return };
        if Some(&session.path) == self.current.as_ref() {
            self.status = Some((Token::Error, "Cannot delete the currently active session".into()));
            return;
        }
        self.mode = Mode::ConfirmDelete(session.path.clone());
    }

    /// A key while "delete this session?" is asked: confirm deletes, cancel keeps it, any other
    /// key waits for the answer.
    fn confirm_delete_key(&mut self, path: PathBuf, first: Option<Action>) -> SessionKey {
        match first {
            Some(Action::SelectConfirm) => {
                self.status = Some(match session_list::delete(&path) {
                    Ok(said) => (Token::Accent, said.to_owned()),
                    Err(why) => (Token::Error, why),
                });
                self.reload();
            }
            Some(Action::SelectCancel) => {}
            _ => self.mode = Mode::ConfirmDelete(path),
        }
        SessionKey::Open
    }

    /// A key while a session's new name is typed: confirm renames (the current session through
    /// the caller), cancel keeps the old name, anything else types.
    fn rename_key(&mut self, path: PathBuf, mut name: String, first: Option<Action>, key: &KeyEvent) -> SessionKey {
        match first {
            Some(Action::SelectCancel) => {}
            Some(Action::SelectConfirm) if name.trim().is_empty() => self.mode = Mode::Rename { path, name },
            Some(Action::SelectConfirm) if Some(&path) == self.current.as_ref() => {
                return SessionKey::RenameCurrent(name.trim().to_owned());
            }
            Some(Action::SelectConfirm) => {
                if let Err(why) = session_list::rename(&path, name.trim()) {
                    self.status = Some((Token::Error, format!("Failed to rename: {why}")));
                }
                self.reload();
            }
            _ => {
                super::picker::type_into(&mut name, key);
                self.mode = Mode::Rename { path, name };
            }
        }
        SessionKey::Open
    }

    pub fn key(&mut self, key: &KeyEvent, keymap: &Keymap) -> SessionKey {
        self.status = None;
        let actions = keymap.actions_in(key, &[Context::Sessions, Context::Select]);
        let first = actions.first().copied();
        match std::mem::replace(&mut self.mode, Mode::List) {
            Mode::ConfirmDelete(path) => return self.confirm_delete_key(path, first),
            Mode::Rename { path, name } => return self.rename_key(path, name, first, key),
            Mode::List => {}
        }
        if keymap.actions_in(key, &[Context::Main]).contains(&Action::Tab) {
            self.show_all = !self.show_all;
            if self.show_all && self.all.is_none() {
                self.all = Some(session_list::load(&session_list::project_dirs(&self.root)));
            }
            self.selected = 0;
            return SessionKey::Open;
        }
        let count = self.rows().len();
        let last = count.saturating_sub(1);
        match first {
            Some(Action::SessionToggleSort) => self.sort = self.sort.next(),
            Some(Action::SessionToggleNamed) => self.named_only = !self.named_only,
            Some(Action::SessionTogglePath) => self.show_path = !self.show_path,
            Some(Action::SessionDelete) => self.start_delete(),
            Some(Action::SessionDeleteNoninvasive) if self.query.is_empty() => self.start_delete(),
            Some(Action::SessionDeleteNoninvasive) => {
                self.query.pop();
            }
            Some(Action::SessionRename) => {
                if let Some(session) = self.selected_session() {
                    let (path, name) = (session.path.clone(), session.name.clone().unwrap_or_default());
                    self.mode = Mode::Rename { path, name };
                }
            }
            Some(Action::SelectUp) => self.selected = self.selected.saturating_sub(1),
            Some(Action::SelectDown) => self.selected = (self.selected + 1).min(last),
            Some(Action::SelectPageUp) => self.selected = self.selected.saturating_sub(ROWS),
            Some(Action::SelectPageDown) => self.selected = (self.selected + ROWS).min(last),
            Some(Action::SelectConfirm) => {
                return self.selected_session().map_or(SessionKey::Open, |s| SessionKey::Chosen(s.path.clone()));
            }
            Some(Action::SelectCancel) => return SessionKey::Cancelled,
            _ => {
                if super::picker::type_into(&mut self.query, key) {
                    self.selected = 0;
                }
            }
        }
        self.selected = self.selected.min(self.rows().len().saturating_sub(1));
        SessionKey::Open
    }

    /// Draws it centred over the screen: the title and toggles, the hints (or the question
    /// being asked), the search, then a window of sessions.
    pub fn draw(&self, frame: &mut ratatui::Frame<'_>, keymap: &Keymap) {
        let (muted, accent) = (fg(Token::Muted), fg(Token::Accent));
        let width = frame.area().width.saturating_sub(4).min(110);
        let inner = usize::from(width.saturating_sub(2));
        if let Mode::Rename { name, .. } = &self.mode {
            let lines = vec![
                Line::styled("Rename Session", Modifier::BOLD),
                Line::raw(""),
                Line::raw(format!("> {name}")),
                Line::raw(""),
                Line::styled(
                    format!(
                        "{} to save · {} to cancel",
                        keymap.keys_of(Action::SelectConfirm),
                        keymap.keys_of(Action::SelectCancel)
                    ),
                    muted,
                ),
            ];
            return super::alert::boxed(frame, width, lines, Block::bordered().border_style(accent));
        }
        let scope = if self.show_all { "○ Current Folder | ◉ All" } else { "◉ Current Folder | ○ All" };
        let name = if self.named_only { "Named" } else { "All" };
        let toggles = format!("{scope}  Name: {name}  Sort: {}", self.sort.label());
        let hint = |action: Action, what: &str| format!("{} {what}", keymap.keys_of(action));
        let mut lines = vec![Line::styled(toggles, muted)];
        match (&self.mode, &self.status) {
            (Mode::ConfirmDelete(_), _) => {
                let ask = format!(
                    "Delete session? {} · {}",
                    hint(Action::SelectConfirm, "confirm"),
                    hint(Action::SelectCancel, "cancel")
                );
                lines.push(Line::styled(ask, fg(Token::Error)));
            }
            (_, Some((token, said))) => lines.push(Line::styled(said.clone(), fg(*token))),
            _ => {
                lines.push(Line::styled("tab scope · re:<pattern> regex · \"phrase\" exact", muted));
                let path = if self.show_path { "path (on)" } else { "path (off)" };
                let keys = [
                    hint(Action::SessionToggleSort, "sort"),
                    hint(Action::SessionToggleNamed, "named"),
                    hint(Action::SessionDelete, "delete"),
                    hint(Action::SessionTogglePath, path),
                    hint(Action::SessionRename, "rename"),
                ];
                lines.push(Line::styled(keys.join(" · "), muted));
            }
        }
        lines.push(Line::raw(""));
        lines.push(Line::raw(format!("> {}", self.query)));
        lines.push(Line::raw(""));
        let rows = self.rows();
        if rows.is_empty() {
            let empty = match (self.named_only, self.show_all) {
                (true, _) => "  No named sessions found.",
                (false, true) => "  No sessions found",
                (false, false) => "  No sessions in current folder. Press Tab to view all.",
            };
            lines.push(Line::styled(empty, muted));
        }
        let first = self.selected.saturating_sub(ROWS / 2).min(rows.len().saturating_sub(ROWS));
        let now = SystemTime::now();
        for (i, row) in rows.iter().enumerate().skip(first).take(ROWS) {
            lines.push(self.session_line(*row, i == self.selected, inner, now));
        }
        if rows.len() > ROWS {
            lines.push(Line::styled(format!("  ({}/{})", self.selected + 1, rows.len()), muted));
        }
        let title = if self.show_all { " Resume Session (All) " } else { " Resume Session (Current Folder) " };
        let block = Block::bordered().title(Span::styled(title, Modifier::BOLD)).border_style(fg(Token::BorderAccent));
        super::alert::boxed(frame, width, lines, block);
    }

    /// One session's line: the cursor, its place in the thread, its name or first message
    /// (cut to fit), then its path, folder, message count and age on the right.
    fn session_line(&self, row: Row, here: bool, inner: usize, now: SystemTime) -> Line<'static> {
        let (dim, accent) = (fg(Token::Dim), fg(Token::Accent));
        let session = &self.sessions()[row.index];
        let deleting = matches!(&self.mode, Mode::ConfirmDelete(p) if *p == session.path);
        let mut right = format!("{} {}", session.messages, session_list::age(session.modified, now));
        if self.show_all {
            right = format!("{} {right}", session.cwd);
        }
        if self.show_path {
            right = format!("{} {right}", session.path.display());
        }
        let prefix = if row.depth == 0 { String::new() } else { format!("{}└─ ", "   ".repeat(row.depth - 1)) };
        let text = session.name.as_deref().unwrap_or(&session.first).replace(char::is_control, " ");
        let room = inner.saturating_sub(2 + prefix.chars().count() + right.chars().count() + 2).max(10);
        let text: String =
            if text.chars().count() > room { text.chars().take(room - 1).chain(['…']).collect() } else { text };
        let colour = match () {
            _ if deleting => fg(Token::Error),
            _ if self.current.as_ref() == Some(&session.path) => accent,
            _ if session.name.is_some() => fg(Token::Warning),
            _ => Default::default(),
        };
        let colour = if here { colour.add_modifier(Modifier::BOLD) } else { colour };
        let gap = inner.saturating_sub(2 + prefix.chars().count() + text.chars().count() + right.chars().count());
        Line::from(vec![
            Span::styled(if here { "› " } else { "  " }, accent),
            Span::styled(prefix, dim),
            Span::styled(text, colour),
            Span::raw(" ".repeat(gap.max(1))),
            Span::styled(right, if deleting { fg(Token::Error) } else { dim }),
        ])
    }
}
