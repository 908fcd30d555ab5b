//! Drawing the tree navigator: each shown entry's line (branch lines, fold marks, the active
//! path, labels) and the box around them with the keys' help.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Block;

use super::super::keys::{Action, Keymap};
use super::super::theme::{Token, fg};
use super::{Filter, Mode, NodeKind, Shown, TreeNav};

impl TreeNav {
    /// The status labels after the count: the filter and label times when not the default.
    fn status(&self) -> String {
        let filter = match self.filter {
            Filter::Default => "",
            Filter::NoTools => " [no-tools]",
            Filter::UserOnly => " [user]",
            Filter::LabeledOnly => " [labeled]",
            Filter::All => " [all]",
        };
        format!("{filter}{}", if self.label_times { " [+label time]" } else { "" })
    }

    /// One shown entry's line: cursor, branch lines, fold and branch marks, label, text.
    pub(super) fn line(&self, at: usize, shown: &Shown) -> Line<'static> {
        let node = &self.nodes[shown.node];
        let here = at == self.selected;
        let folded = self.folded.contains(&node.id);
        let mut prefix = String::new();
        for level in 0..shown.indent {
            if let Some((_, show)) = shown.gutters.iter().find(|(p, _)| *p == level) {
                prefix.push_str(if *show { "│  " } else { "   " });
            } else if shown.connector.is_some() && level + 1 == shown.indent {
                let last = shown.connector == Some(true);
                let mark = if folded {
                    '⊞'
                } else if self.foldable(&node.id) {
                    '⊟'
                } else {
                    '─'
                };
                prefix.push_str(&format!("{}{mark} ", if last { '└' } else { '├' }));
            } else {
                prefix.push_str("   ");
            }
        }
        let mut spans =
            vec![Span::styled(if here { "› " } else { "  " }, fg(Token::Accent)), Span::styled(prefix, fg(Token::Dim))];
        if folded && shown.connector.is_none() {
            spans.push(Span::styled("⊞ ", fg(Token::Accent)));
        }
        if self.active.contains(&node.id) {
            spans.push(Span::styled("• ", fg(Token::Accent)));
        }
        if let Some((label, time)) = &node.label {
            spans.push(Span::styled(format!("[{label}] "), fg(Token::Warning)));
            if self.label_times {
                spans.push(Span::styled(
                    format!("{} ", time.get(..16).unwrap_or(time).replace('T', " ")),
                    fg(Token::Muted),
                ));
            }
        }
        let colour = match node.kind {
            NodeKind::User => fg(Token::Accent),
            NodeKind::Assistant { .. } => fg(Token::Success),
            NodeKind::ToolResult => fg(Token::Muted),
            NodeKind::Setting | NodeKind::Other => fg(Token::Dim),
        };
        let bold = |style: Style| if here { style.add_modifier(Modifier::BOLD) } else { style };
        match node.text.split_once(": ") {
            Some((role, rest)) if matches!(node.kind, NodeKind::User | NodeKind::Assistant { .. }) => {
                spans.push(Span::styled(format!("{role}: "), bold(colour)));
                spans.push(Span::styled(rest.to_owned(), bold(Style::default())));
            }
            _ => spans.push(Span::styled(node.text.clone(), bold(colour))),
        }
        let line = Line::from(spans);
        match super::super::theme::color(Token::SelectedBg) {
            Some(colour) if here => line.style(Style::default().bg(colour)),
            _ => line,
        }
    }

    pub fn draw(&self, frame: &mut ratatui::Frame<'_>, keymap: &Keymap) {
        let (muted, width) = (fg(Token::Muted), frame.area().width.saturating_sub(2));
        let keys = |a: &[Action]| a.iter().map(|a| keymap.keys_of(*a)).collect::<Vec<_>>().join("/");
        let help = format!(
            "↑/↓: move. ←/→: page. {}: fold/branch. {}: label. {}: filters ({} cycle). {}: label time",
            keys(&[Action::TreeFoldOrUp, Action::TreeUnfoldOrDown]),
            keymap.keys_of(Action::TreeEditLabel),
            keys(&[
                Action::TreeFilterDefault,
                Action::TreeFilterNoTools,
                Action::TreeFilterUserOnly,
                Action::TreeFilterLabeledOnly,
                Action::TreeFilterAll
            ]),
            keys(&[Action::TreeFilterCycleForward, Action::TreeFilterCycleBackward]),
            keymap.keys_of(Action::TreeToggleLabelTime),
        );
        let mut lines = vec![
            Line::styled(help, muted),
            Line::styled(format!("Type to search: {}", self.query), muted),
            Line::raw(""),
        ];
        match &self.mode {
            Mode::Label { text, .. } => {
                lines.push(Line::styled("Label (empty to remove):", muted));
                lines.push(Line::raw(format!("> {text}")));
                let hint = format!(
                    "{} save  {} cancel",
                    keymap.keys_of(Action::SelectConfirm),
                    keymap.keys_of(Action::SelectCancel)
                );
                lines.push(Line::styled(hint, muted));
            }
            Mode::Ask { choice, .. } => {
                lines.push(Line::styled("Summarize branch?", Modifier::BOLD));
                for (n, what) in ["No summary", "Summarize"].iter().enumerate() {
                    let style =
                        if n == *choice { fg(Token::Accent).add_modifier(Modifier::BOLD) } else { Style::default() };
                    lines.push(Line::styled(format!("{}{what}", if n == *choice { "› " } else { "  " }), style));
                }
            }
            Mode::Tree if self.shown.is_empty() => {
                lines.push(Line::styled("  No entries found", muted));
                lines.push(Line::styled(format!("  (0/0){}", self.status()), muted));
            }
            Mode::Tree => {
                let first = self.selected.saturating_sub(self.rows / 2).min(self.shown.len().saturating_sub(self.rows));
                for (at, shown) in self.shown.iter().enumerate().skip(first).take(self.rows) {
                    lines.push(self.line(at, shown));
                }
                lines.push(Line::styled(
                    format!("  ({}/{}){}", self.selected + 1, self.shown.len(), self.status()),
                    muted,
                ));
            }
        }
        let block = Block::bordered()
            .title(Span::styled(" Session Tree ", Modifier::BOLD))
            .border_style(fg(Token::BorderAccent));
        super::super::alert::boxed(frame, width, lines, block);
    }
}
