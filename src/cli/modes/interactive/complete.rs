//! Completions in the editor, as upstream's: `@` followed by letters lists the project's files
//! that match them in order (walked as `grep` and `find` walk, so `.gitignore`d paths never show),
//! and Tab completes the path before the cursor from the file system. Up/Down choose, Tab or
//! Enter take the choice, Esc closes the list.

use std::path::Path;

use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph};

/// Files listed at most (the walk stops there: a huge tree is not read whole per keystroke).
const WALK_LIMIT: usize = 20_000;
/// Suggestions shown.
const SHOWN: usize = 8;

/// An open list of completions for the token before the cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// What replaces the token, for each suggestion.
    pub items: Vec<String>,
    pub selected: usize,
    /// The token's length in characters (what a choice replaces).
    pub token_chars: usize,
    /// What the list shows for each suggestion, when not the replacement itself (an extension's
    /// `label  description`).
    pub labels: Vec<String>,
}

impl Completion {
    /// The chosen replacement.
    pub fn choice(&self) -> Option<&str> {
        self.items.get(self.selected).map(String::as_str)
    }

    pub fn up(&mut self) {
        self.selected = self.selected.saturating_sub(1);
    }

    pub fn down(&mut self) {
        self.selected = (self.selected + 1).min(self.items.len().saturating_sub(1));
    }

    /// Drawn over the bottom rows of `area` (above the editor).
    pub fn draw(&self, frame: &mut ratatui::Frame<'_>, area: Rect) {
        let first = self.selected.saturating_sub(SHOWN - 1);
        let shown = if self.labels.len() == self.items.len() { &self.labels } else { &self.items };
        let lines: Vec<Line<'_>> = shown
            .iter()
            .enumerate()
            .skip(first)
            .take(SHOWN)
            .map(|(i, item)| {
                if i == self.selected {
                    Line::styled(
                        format!("› {item}"),
                        super::theme::fg(super::theme::Token::Accent).add_modifier(Modifier::BOLD),
                    )
                } else {
                    Line::raw(format!("  {item}"))
                }
            })
            .collect();
        let height = (lines.len() as u16 + 2).min(area.height);
        let width = lines.iter().map(Line::width).max().unwrap_or(0).max(30) as u16 + 4;
        let place = Rect::new(area.x, area.bottom().saturating_sub(height), width.min(area.width), height);
        let block = Block::bordered()
            .title(" Tab/Enter take · Esc close ")
            .border_style(super::theme::fg(super::theme::Token::BorderMuted));
        frame.render_widget(Clear, place);
        frame.render_widget(Paragraph::new(lines).block(block), place);
    }
}

/// `@query` before the cursor: the project's `paths` ([`project_paths`]) that have the query's
/// letters in order, best first (a match in the file name before one in the folders, then
/// shorter paths); `None` when nothing matches.
pub fn file_reference(query: &str, paths: &[String]) -> Option<Completion> {
    let mut scored: Vec<(u8, usize, &String)> = paths
        .iter()
        .filter_map(|path| {
            let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or(path);
            let rank = if in_order(query, name) {
                0
            } else if in_order(query, path) {
                1
            } else {
                return None;
            };
            Some((rank, path.len(), path))
        })
        .collect();
    scored.sort();
    let items: Vec<String> = scored.into_iter().take(50).map(|(_, _, path)| format!("@{path}")).collect();
    (!items.is_empty()).then(|| Completion {
        items,
        selected: 0,
        token_chars: query.chars().count() + 1,
        labels: Vec::new(),
    })
}

/// Tab: the entries of the folder `token` names so far (relative to `cwd`, `~/` for home) that
/// start with its last part — folders with a trailing `/`; `None` when there are none.
pub fn path(token: &str, cwd: &Path) -> Option<Completion> {
    let (dir, stem) = match token.rfind('/') {
        Some(at) => (&token[..=at], &token[at + 1..]),
        None => ("", token),
    };
    let base = match dir.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| Path::new(&h).join(rest))?,
        None if dir.starts_with('/') => Path::new(dir).to_owned(),
        None => cwd.join(dir),
    };
    let mut items: Vec<String> = std::fs::read_dir(base)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            // Hidden entries only when asked for by their dot.
            if !name.starts_with(stem) || (name.starts_with('.') && !stem.starts_with('.')) {
                return None;
            }
            let slash = if entry.file_type().ok()?.is_dir() { "/" } else { "" };
            Some(format!("{dir}{name}{slash}"))
        })
        .collect();
    items.sort();
    (!items.is_empty()).then(|| Completion {
        items,
        selected: 0,
        token_chars: token.chars().count(),
        labels: Vec::new(),
    })
}

/// The longest start all `items` share.
pub fn common_prefix(items: &[String]) -> String {
    let Some(first) = items.first() else { return String::new() };
    let mut end = first.len();
    for item in &items[1..] {
        end = end.min(first.bytes().zip(item.bytes()).take_while(|(a, b)| a == b).count());
    }
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    first[..end].to_owned()
}

/// The files and folders under `cwd` that `grep`/`find` see (ignore files honoured), relative,
/// folders with a trailing `/`.
pub fn project_paths(cwd: &Path) -> Vec<String> {
    pi_agent::tools::project_entries(cwd, WALK_LIMIT)
        .into_iter()
        .filter_map(|(path, dir)| {
            let relative = path.strip_prefix(cwd).ok()?.to_str()?.to_owned();
            Some(if dir { format!("{relative}/") } else { relative })
        })
        .collect()
}

/// `query`'s characters appear in `text` in order (ASCII case ignored).
fn in_order(query: &str, text: &str) -> bool {
    let mut rest = text.chars().map(|c| c.to_ascii_lowercase());
    query.chars().all(|wanted| {
        let wanted = wanted.to_ascii_lowercase();
        rest.any(|c| c == wanted)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("pi-complete-{}", pi_observe::core::SpanId::random()));
        for file in ["src/main.rs", "src/lib.rs", "build/main.rs", "README.md"] {
            std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
            std::fs::write(dir.join(file), "x").unwrap();
        }
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".gitignore"), "build/\n").unwrap();
        dir
    }

    #[test]
    fn at_references_list_matching_files_but_never_ignored_ones() {
        let dir = project();
        let paths = project_paths(&dir);
        let found = file_reference("main", &paths).unwrap();
        assert_eq!(found.items, ["@src/main.rs"], "build/ is ignored");
        assert_eq!(found.token_chars, 5, "the @ and the query");
        let found = file_reference("srlib", &paths).unwrap();
        assert_eq!(found.items, ["@src/lib.rs"]);
        assert!(file_reference("zzz", &paths).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tab_completes_paths_from_the_file_system() {
        let dir = project();
        assert_eq!(path("sr", &dir).unwrap().items, ["src/"]);
        assert_eq!(path("src/", &dir).unwrap().items, ["src/lib.rs", "src/main.rs"]);
        assert_eq!(path("src/m", &dir).unwrap().items, ["src/main.rs"]);
        assert!(path("nothing", &dir).is_none());
        assert_eq!(common_prefix(&["src/lib.rs".into(), "src/list.rs".into()]), "src/li");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
