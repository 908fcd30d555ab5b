//! Drawing the screen: the header, the transcript, the status and queue lines, the editor (pi's
//! or an extension's) and the footer, then what extensions, pickers and alerts put over it.

use ratatui::layout::{Constraint, Layout, Position};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::theme::{self, Token};
use super::{Ui, ext_ui};
use crate::cli::modes::driver::State;

impl Ui<'_> {
    /// Draws the transcript, the status and queue lines, the editor and the footer.
    pub(super) fn draw(&mut self, frame: &mut ratatui::Frame<'_>) {
        let area = frame.area();
        let width = area.width as usize;
        // An extension's editor (`setEditorComponent`) draws itself, its frame included.
        let ext_editor = self.ext.editor_lines(area.width);
        let editor_height = match &ext_editor {
            Some(lines) => (lines.len() as u16).clamp(1, 14).saturating_sub(1),
            None => (self.editor.lines().len() as u16).clamp(1, 8),
        };
        let pending = self.shared.queue.pending();
        let mut widget_lines: Vec<String> = self.ext.widgets.values().flatten().take(6).cloned().collect();
        if !self.ext.status.is_empty() {
            widget_lines.push(self.ext.status.values().cloned().collect::<Vec<_>>().join(" · "));
        }
        let status_height = 1 + pending.len().min(4) as u16 + widget_lines.len() as u16;
        let footer_lines = self.footer();
        let header_height = self.ext.header.as_ref().map_or(0, |h| h.len().min(12) as u16);
        let [header, body, status, editor, footer] = Layout::vertical([
            Constraint::Length(header_height),
            Constraint::Min(1),
            Constraint::Length(status_height),
            Constraint::Length(editor_height + 1),
            Constraint::Length(footer_lines.len() as u16),
        ])
        .areas(area);
        if let Some(lines) = &self.ext.header {
            frame.render_widget(Paragraph::new(lines.iter().map(|l| ext_ui::styled(l)).collect::<Vec<_>>()), header);
        }

        let visible = body.height as usize;
        let (lines, total) = self.transcript.window(width, visible, self.scroll);
        self.scroll = self.scroll.min(total.saturating_sub(visible));
        frame.render_widget(Paragraph::new(lines), body);
        if let Some(completion) = &self.completion {
            completion.draw(frame, body);
        }

        let dim = theme::fg(Token::Dim);
        let mut status_lines: Vec<Line<'_>> = widget_lines.iter().map(|l| ext_ui::styled(l)).collect();
        let working = |what: &str| {
            let indicator = self.ext.working_indicator.as_deref().unwrap_or("●");
            let message = self.ext.working_message.clone().unwrap_or_else(|| format!("{what}… (Esc to abort)"));
            let line = if indicator.is_empty() { message } else { format!("{indicator} {message}") };
            Line::styled(line, theme::fg(Token::Accent))
        };
        status_lines.push(match (&self.running, self.shared.is_busy()) {
            (_, _) if self.ext.working_hidden && (self.running.is_some() || self.shared.is_busy()) => Line::raw(""),
            (Some(what), _) => working(what),
            (None, true) => working("working"),
            (None, false) => Line::styled("/help for commands · !cmd runs a shell command", dim),
        });
        let queued =
            pending.steering.iter().map(|t| ("steer", t)).chain(pending.follow_up.iter().map(|t| ("follow-up", t)));
        for (kind, text) in queued.take(4) {
            let first = text.lines().next().unwrap_or("");
            status_lines.push(Line::styled(format!("⏵ queued {kind}: {first}"), theme::fg(Token::Muted)));
        }
        frame.render_widget(Paragraph::new(status_lines), status);

        if let Some(lines) = ext_editor {
            frame.render_widget(Paragraph::new(lines), editor);
        } else {
            self.draw_editor(frame, editor, editor_height);
        }

        frame.render_widget(Paragraph::new(footer_lines), footer);
        self.ext.draw(frame);
        if let Some(selector) = &self.selector {
            selector.draw(frame, &self.keymap);
        }
        if let Some(alert) = &self.alert {
            alert.draw(frame);
        }
    }

    /// pi's own editor: a rule, then the lines around the cursor, the terminal's cursor in place.
    fn draw_editor(&self, frame: &mut ratatui::Frame<'_>, editor: ratatui::layout::Rect, editor_height: u16) {
        let (area, dim) = (frame.area(), theme::fg(Token::Dim));
        // Upstream's editor border: the thinking level's colour, or bash mode's for `!command`.
        let border = if self.editor.lines().first().is_some_and(|l| l.starts_with('!')) {
            Token::BashMode
        } else {
            match self.shared.with_state(|state| state.thinking_level.clone()).as_str() {
                "minimal" => Token::ThinkingMinimal,
                "low" => Token::ThinkingLow,
                "medium" => Token::ThinkingMedium,
                "high" => Token::ThinkingHigh,
                "xhigh" => Token::ThinkingXhigh,
                _ => Token::ThinkingOff,
            }
        };
        let rule = Line::styled("─".repeat(area.width as usize), theme::fg(border));
        let (row, col) = self.editor.cursor();
        let first_row = (row + 1).saturating_sub(editor_height as usize);
        let mut editor_lines = vec![rule];
        for (i, line) in self.editor.lines().iter().enumerate().skip(first_row).take(editor_height as usize) {
            let prompt = if i == 0 { "> " } else { "  " };
            editor_lines.push(Line::from(vec![Span::styled(prompt, dim), Span::raw(line.clone())]));
        }
        frame.render_widget(Paragraph::new(editor_lines), editor);
        let cursor_x = editor.x + 2 + col as u16;
        let cursor_y = editor.y + 1 + (row - first_row) as u16;
        frame.set_cursor_position(Position::new(cursor_x.min(area.width.saturating_sub(1)), cursor_y));
    }

    /// Model, tokens, cost, context (or an extension's footer, `ctx.ui.setFooter`); telemetry
    /// health.
    fn footer(&self) -> Vec<Line<'static>> {
        let (first, file) = self.shared.with_state(|state| {
            let file = state.session_file.as_deref().and_then(|f| std::path::Path::new(f).file_name());
            (footer_model_line(state), file.map(|f| f.to_string_lossy().into_owned()))
        });
        let health = self.probe.health();
        let sinks = if health.sinks.is_empty() { "off".to_owned() } else { health.sinks.join(",") };
        let traces = self.traces.lock().map(|t| t.len()).unwrap_or(0);
        let mut second = format!(
            "telemetry {sinks} · {traces} traces · exported {} · dropped {} · spooled {}",
            health.exported, health.dropped, health.spooled
        );
        if let Some(file) = file {
            second.push_str(&format!(" · {file}"));
        }
        let style = theme::fg(Token::Dim);
        let warn = if health.dropped > 0 { theme::fg(Token::Warning) } else { style };
        let mut lines = match &self.ext.footer {
            Some(custom) => custom.iter().take(6).map(|l| ext_ui::styled(l)).collect(),
            None => vec![Line::styled(first, style.add_modifier(Modifier::BOLD))],
        };
        lines.push(Line::styled(second, warn));
        lines
    }
}

/// The footer's first line: model, the session's tokens and cost, the context used.
fn footer_model_line(state: &State) -> String {
    let usage = state.usage;
    let model = &state.model;
    let thinking = if state.thinking_level == "off" { String::new() } else { format!(" [{}]", state.thinking_level) };
    let context = if model.context_window > 0 {
        format!(
            "ctx {:.0}% of {}",
            100.0 * state.context_tokens as f64 / model.context_window as f64,
            model.context_window
        )
    } else {
        format!("ctx {}", state.context_tokens)
    };
    format!(
        "{}/{}{thinking} · tokens in {} out {} cache {}/{} · ${:.6} · {context}",
        model.provider, model.id, usage.input, usage.output, usage.cache_read, usage.cache_write, usage.cost.total
    )
}
