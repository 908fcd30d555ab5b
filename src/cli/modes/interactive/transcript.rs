//! The conversation as the interactive mode shows it: user messages, streaming assistant text,
//! thinking collapsed to one line, tool calls as one line with their status and the last lines
//! of their output, shell commands, and notices — built from agent events, rendered to lines
//! wrapped at the terminal's width.

use pi_agent::events::{AgentEvent, Delta};
use pi_agent::message::{ContentBlock, Message, StopReason};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use unicode_width::UnicodeWidthChar;

use super::theme::{Token, fg};

/// Lines of a tool's output shown under it.
const TOOL_TAIL: usize = 3;
/// Lines of a shell command's output shown.
const SHELL_TAIL: usize = 12;

/// How a tool call is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// Still running.
    Running,
    /// Finished.
    Done,
    /// Failed or was blocked.
    Failed,
}

/// What a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Information (command output).
    Info,
    /// Something to look at.
    Warn,
    /// Something failed.
    Error,
}

/// One block of the transcript.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// What the user sent.
    User(String),
    /// The assistant's answer so far.
    Assistant {
        /// Text.
        text: String,
        /// Reasoning (shown collapsed).
        thinking: String,
    },
    /// A tool call.
    Tool {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Its main argument (command, path, pattern).
        summary: String,
        /// Status.
        status: ToolStatus,
        /// Output so far (or the result).
        output: String,
        /// The edit's diff (upstream's `details.diff`), shown in place of the output.
        diff: Option<String>,
        /// What the tool's extension drew for it (`renderCall` / `renderResult`).
        drawn: Drawn,
    },
    /// A `!command`.
    Shell {
        /// The command line.
        command: String,
        /// Output (`None` while it runs).
        output: Option<String>,
        /// Exit code.
        code: Option<i64>,
    },
    /// A message from pi (command output, errors, lifecycle).
    Notice(Tone, String),
}

/// What an extension's renderers drew for a call of its tool (upstream's `renderCall` and
/// `renderResult`, as lines with their styles), each part in place of pi's own drawing of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drawn {
    /// The call (in place of pi's `⚙ name summary` line).
    pub call: Option<Vec<String>>,
    /// The result while the tool runs.
    pub partial: Option<Vec<String>>,
    /// The result, collapsed and expanded (Ctrl+O).
    pub collapsed: Option<Vec<String>>,
    pub expanded: Option<Vec<String>>,
}

impl Drawn {
    /// The parts `newer` has replace these.
    fn update(&mut self, newer: Drawn) {
        let Drawn { call, partial, collapsed, expanded } = newer;
        for (part, new) in [
            (&mut self.call, call),
            (&mut self.partial, partial),
            (&mut self.collapsed, collapsed),
            (&mut self.expanded, expanded),
        ] {
            if new.is_some() {
                *part = new;
            }
        }
    }
}

/// The transcript, with each block's lines kept once rendered (a frame re-wraps only the
/// blocks that changed since the last one, so a long session costs no more per keystroke).
#[derive(Debug, Default)]
pub struct Transcript {
    /// The blocks, oldest first.
    items: Vec<Item>,
    /// Each block's rendered lines at `width` (`None`: not rendered since it changed; blocks
    /// above the window are rendered only when scrolled to).
    rendered: Vec<Option<Vec<Line<'static>>>>,
    width: usize,
    /// What collapsed thinking is called (`ctx.ui.setHiddenThinkingLabel`; `None`: `thinking`).
    thinking_label: Option<String>,
    /// Ctrl+T: thinking drawn in full rather than as one line.
    show_thinking: bool,
    /// Ctrl+O: tools' whole output rather than its last lines.
    expand_tools: bool,
    /// Extensions' drawings of tool calls whose block is not there yet, by call id.
    early_drawings: std::collections::HashMap<String, Drawn>,
}

impl Transcript {
    /// Names collapsed thinking `label` (`None`: pi's own); every block is drawn again.
    pub fn set_thinking_label(&mut self, label: Option<String>) {
        self.thinking_label = label;
        self.rendered.clear();
    }

    /// The theme changed: every block is drawn again.
    pub fn restyle(&mut self) {
        self.rendered.clear();
    }

    /// Ctrl+T: thinking in full, or collapsed again; true when now shown.
    pub fn toggle_thinking(&mut self) -> bool {
        self.show_thinking = !self.show_thinking;
        self.rendered.clear();
        self.show_thinking
    }

    /// Whether tools' whole output is shown (Ctrl+O).
    pub fn tools_expanded(&self) -> bool {
        self.expand_tools
    }

    /// Ctrl+O: tools' whole output, or their last lines again; true when now expanded.
    pub fn toggle_tool_output(&mut self) -> bool {
        self.expand_tools = !self.expand_tools;
        self.rendered.clear();
        self.expand_tools
    }

    /// What collapsed thinking is called, when an extension named it.
    pub fn thinking_label(&self) -> Option<&str> {
        self.thinking_label.as_deref()
    }

    /// What an extension drew for tool call `id` (kept until its block is there).
    pub fn drawn(&mut self, id: &str, newer: Drawn) {
        match self.tool(id) {
            Some(Item::Tool { drawn, .. }) => drawn.update(newer),
            _ => self.early_drawings.entry(id.to_owned()).or_default().update(newer),
        }
    }

    /// Adds a block.
    pub fn push(&mut self, item: Item) {
        self.items.push(item);
    }

    /// The latest shell command block (its lines are rendered again).
    pub fn last_shell(&mut self) -> Option<&mut Item> {
        let index = self.items.iter().rposition(|i| matches!(i, Item::Shell { .. }))?;
        self.changed(index);
        self.items.get_mut(index)
    }

    /// Adds a notice.
    pub fn notice(&mut self, tone: Tone, text: impl Into<String>) {
        self.items.push(Item::Notice(tone, text.into()));
    }

    /// Block `index` changed: it is rendered again.
    fn changed(&mut self, index: usize) {
        if let Some(slot) = self.rendered.get_mut(index) {
            *slot = None;
        }
    }

    fn last_mut(&mut self) -> Option<&mut Item> {
        let last = self.items.len().checked_sub(1)?;
        self.changed(last);
        self.items.last_mut()
    }

    /// The transcript of a conversation so far (a resumed, switched or forked session).
    pub fn of_messages(messages: &[Message]) -> Transcript {
        let mut t = Transcript::default();
        for message in messages {
            match message {
                Message::Assistant(assistant) => {
                    t.items.push(Item::Assistant { text: assistant.text(), thinking: assistant.thinking() });
                    for (id, name, args) in assistant.tool_calls() {
                        let summary = summary(&args);
                        t.items.push(Item::Tool {
                            id,
                            name,
                            summary,
                            status: ToolStatus::Running,
                            output: String::new(),
                            diff: None,
                            drawn: Drawn::default(),
                        });
                    }
                }
                Message::BashExecution(run) => t.items.push(Item::Shell {
                    command: run.command.clone(),
                    output: Some(run.output.clone()),
                    code: run.exit_code,
                }),
                Message::User(_) | Message::ToolResult(_) => t.message_end(message),
                other => {
                    if let Some(text) = other.context_text() {
                        let first = text.lines().next().unwrap_or("").to_owned();
                        t.notice(Tone::Info, format!("[{}] {first}", other.role()));
                    }
                }
            }
        }
        t
    }

    /// Updates the transcript with an agent event.
    pub fn apply(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::MessageStart { role } if role == "assistant" => {
                self.items.push(Item::Assistant { text: String::new(), thinking: String::new() });
            }
            AgentEvent::MessageUpdate { delta } => {
                if let Some(Item::Assistant { text, thinking }) = self.last_mut() {
                    match delta {
                        Delta::Text { text: t } => text.push_str(t),
                        Delta::Thinking { text: t } => thinking.push_str(t),
                        Delta::ToolCallStart { .. } | Delta::ToolCallArgs { .. } => {}
                    }
                }
            }
            AgentEvent::MessageEnd { message } => self.message_end(message),
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => self.items.push(Item::Tool {
                id: tool_call_id.clone(),
                name: tool_name.clone(),
                summary: summary(args),
                status: ToolStatus::Running,
                output: String::new(),
                diff: None,
                drawn: self.early_drawings.remove(tool_call_id).unwrap_or_default(),
            }),
            AgentEvent::ToolExecutionUpdate { tool_call_id, output, .. } => {
                if let Some(Item::Tool { output: so_far, .. }) = self.tool(tool_call_id) {
                    so_far.push_str(output);
                    keep_tail(so_far, 64 * 1024);
                }
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, is_error, .. } => {
                if let Some(Item::Tool { status, .. }) = self.tool(tool_call_id) {
                    *status = if *is_error { ToolStatus::Failed } else { ToolStatus::Done };
                }
            }
            AgentEvent::AgentEnd { stop_reason: StopReason::Aborted, .. } => self.notice(Tone::Warn, "aborted"),
            AgentEvent::SessionCompact { reason, tokens_before, tokens_after, .. } => {
                self.notice(
                    Tone::Info,
                    format!("compacted ({reason}): {tokens_before} → {tokens_after} context tokens"),
                );
            }
            AgentEvent::SessionCompactFailed { reason, error } => {
                self.notice(Tone::Warn, format!("compaction ({reason}) failed: {error}"));
            }
            AgentEvent::SessionStart { reason, session_id, .. } if *reason != "startup" => {
                let id = session_id.as_deref().unwrap_or("no session file");
                self.notice(Tone::Info, format!("session {id} ({reason})"));
            }
            AgentEvent::SessionTree { new_leaf_id, summarized, .. } => {
                let leaf = new_leaf_id.as_deref().unwrap_or("the start");
                let how = if *summarized { ", the abandoned branch summarized" } else { "" };
                self.notice(Tone::Info, format!("continuing from {leaf}{how}"));
            }
            AgentEvent::ExtensionError { extension, hook, error } => {
                self.notice(Tone::Warn, format!("extension {extension} failed in {hook}: {error}"));
            }
            AgentEvent::AutoRetryStart { attempt, max_attempts, delay_ms, error_message } => {
                let secs = *delay_ms as f64 / 1000.0;
                self.notice(
                    Tone::Warn,
                    format!("retrying ({attempt}/{max_attempts}) in {secs:.1} s (Esc aborts): {error_message}"),
                );
            }
            AgentEvent::AutoRetryEnd { success: false, attempt, final_error } => {
                let error = final_error.as_deref().unwrap_or("failed");
                self.notice(Tone::Warn, format!("gave up after {attempt} retries: {error}"));
            }
            _ => {}
        }
    }

    fn message_end(&mut self, message: &Message) {
        match message {
            Message::User(user) => self.push(Item::User(user.content.text())),
            Message::Assistant(assistant) => {
                // The final text (an extension may have changed it).
                let final_text: String = assistant
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                // An aborted stream keeps what it showed.
                if let Some(Item::Assistant { text, .. }) = self.last_mut()
                    && !final_text.is_empty()
                {
                    *text = final_text;
                }
                if assistant.stop_reason == StopReason::Error {
                    let why = assistant.error_message.clone().unwrap_or_else(|| "the provider failed".into());
                    self.notice(Tone::Error, why);
                }
            }
            Message::ToolResult(result) => {
                let text = result
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let failed = result.is_error;
                let edit_diff = result.details.as_ref().and_then(|d| d.get("diff")).and_then(|d| d.as_str());
                let edit_diff = edit_diff.filter(|d| !d.is_empty()).map(str::to_owned);
                if let Some(Item::Tool { output, status, diff, .. }) = self.tool(&result.tool_call_id) {
                    *output = text;
                    *status = if failed { ToolStatus::Failed } else { ToolStatus::Done };
                    *diff = edit_diff;
                }
            }
            _ => {}
        }
    }

    fn tool(&mut self, id: &str) -> Option<&mut Item> {
        let index = self.items.iter().rposition(|item| matches!(item, Item::Tool { id: i, .. } if i == id))?;
        self.changed(index);
        self.items.get_mut(index)
    }

    /// The `rows` lines that end `scroll` lines above the last one (scrolling stops at the
    /// first line), at `width` columns; with the number of lines known — all of them once the
    /// window reaches the first block, else at least `rows + scroll`. Blocks are rendered from
    /// the last one up as far as the window needs (a long resumed session costs the screen's
    /// worth, not the whole conversation).
    pub fn window(&mut self, width: usize, rows: usize, scroll: usize) -> (Vec<Line<'static>>, usize) {
        let width = width.max(8);
        if width != self.width {
            self.rendered.clear();
            self.width = width;
        }
        self.rendered.resize(self.items.len(), None);
        let view = View {
            width,
            thinking_label: self.thinking_label.as_deref(),
            show_thinking: self.show_thinking,
            expand_tools: self.expand_tools,
        };
        let wanted = rows.saturating_add(scroll);
        let (mut known, mut first) = (0usize, self.items.len());
        while first > 0 && known < wanted {
            first -= 1;
            let slot = &mut self.rendered[first];
            let lines = slot.get_or_insert_with(|| {
                let mut out = Vec::new();
                // A blank line between blocks.
                if first > 0 {
                    out.push(Line::default());
                }
                render(&self.items[first], &view, &mut out);
                out
            });
            known += lines.len();
        }
        let blocks = &self.rendered[first..];
        let end = known - scroll.min(known.saturating_sub(rows));
        let start = end.saturating_sub(rows);
        let lines = blocks.iter().flatten().flatten().skip(start).take(end - start).cloned().collect();
        (lines, known)
    }

    /// Every line at `width` columns.
    #[cfg(test)]
    pub fn lines(&mut self, width: usize) -> Vec<Line<'static>> {
        self.window(width, usize::MAX, 0).0
    }
}

/// How blocks are drawn: the width, and what Ctrl+T / Ctrl+O show.
struct View<'a> {
    width: usize,
    thinking_label: Option<&'a str>,
    show_thinking: bool,
    expand_tools: bool,
}

fn render(item: &Item, view: &View<'_>, out: &mut Vec<Line<'static>>) {
    let (width, thinking_label) = (view.width, view.thinking_label);
    let dim = fg(Token::Dim);
    match item {
        Item::User(text) => {
            let mut style = fg(Token::UserMessageText).add_modifier(Modifier::BOLD);
            if let Some(bg) = super::theme::color(Token::UserMessageBg) {
                style = style.bg(bg);
            }
            wrap_into(out, "› ", text, width, style);
        }
        Item::Assistant { text, thinking } => {
            if !thinking.is_empty() && view.show_thinking {
                wrap_into(out, "∴ ", thinking, width, fg(Token::ThinkingText).add_modifier(Modifier::ITALIC));
            } else if !thinking.is_empty() {
                let chars = thinking.chars().count();
                let label = thinking_label.unwrap_or("thinking");
                let style = fg(Token::ThinkingText).add_modifier(Modifier::ITALIC);
                out.push(Line::styled(format!("∴ {label} ({chars} characters)"), style));
            }
            out.extend(super::markdown::lines(text, width));
        }
        Item::Tool { name, summary, status, output, diff, drawn, .. } => {
            let (mark, color) = match status {
                ToolStatus::Running => ("…", Token::Warning),
                ToolStatus::Done => ("✓", Token::Success),
                ToolStatus::Failed => ("✗", Token::Error),
            };
            let mark = Span::styled(mark, fg(color));
            match drawn.call.as_deref() {
                // The extension's drawing of the call, the status after its first line.
                Some([first, rest @ ..]) => {
                    // pi-tui pads lines to the width: the mark goes after the text.
                    let mut head = super::ext_ui::styled(first);
                    while head.spans.last().is_some_and(|s| s.content.trim_end().is_empty()) {
                        head.spans.pop();
                    }
                    if let Some(last) = head.spans.last_mut() {
                        last.content = last.content.trim_end().to_owned().into();
                    }
                    head.spans.extend([Span::raw(" "), mark]);
                    out.push(head);
                    out.extend(rest.iter().map(|l| super::ext_ui::styled(l)));
                }
                _ => {
                    let head: String = cut(&format!("⚙ {name} {summary}"), width.saturating_sub(2));
                    out.push(Line::from(vec![Span::styled(head, fg(Token::ToolTitle)), Span::raw(" "), mark]));
                }
            }
            let result = match status {
                ToolStatus::Running => &drawn.partial,
                _ if view.expand_tools => &drawn.expanded,
                _ => &drawn.collapsed,
            };
            if let Some(lines) = result {
                out.extend(lines.iter().map(|l| super::ext_ui::styled(l)));
                return;
            }
            if let Some(diff) = diff {
                return diff_lines(diff, view, out);
            }
            let shown = if view.expand_tools { usize::MAX } else { TOOL_TAIL };
            for line in last_lines(output, shown) {
                out.push(Line::styled(cut(&format!("  │ {line}"), width), fg(Token::ToolOutput)));
            }
        }
        Item::Shell { command, output, code } => {
            out.push(Line::styled(cut(&format!("$ {command}"), width), fg(Token::BashMode)));
            match output {
                None => out.push(Line::styled("  running…", dim)),
                Some(output) => {
                    for line in last_lines(output, SHELL_TAIL) {
                        out.push(Line::styled(cut(&format!("  {line}"), width), dim));
                    }
                    let code = code.map_or("killed".to_owned(), |c| format!("exit {c}"));
                    out.push(Line::styled(format!("  ({code})"), dim));
                }
            }
        }
        Item::Notice(tone, text) => {
            let style = match tone {
                Tone::Info => fg(Token::Muted),
                Tone::Warn => fg(Token::Warning),
                Tone::Error => fg(Token::Error),
            };
            wrap_into(out, "", text, width, style);
        }
    }
}

/// Lines of an edit's diff shown before the rest waits for Ctrl+O.
const DIFF_LINES: usize = 24;

/// An edit's diff: added lines green, removed red, the unchanged ones dim.
fn diff_lines(diff: &str, view: &View<'_>, out: &mut Vec<Line<'static>>) {
    let total = diff.lines().count();
    let shown = if view.expand_tools { total } else { total.min(DIFF_LINES) };
    for line in diff.lines().take(shown) {
        let color = match line.chars().next() {
            Some('+') => Token::ToolDiffAdded,
            Some('-') => Token::ToolDiffRemoved,
            _ => Token::ToolDiffContext,
        };
        out.push(Line::styled(cut(&format!("  {line}"), view.width), fg(color)));
    }
    if shown < total {
        let more = format!("  … {} more lines (Ctrl+O shows them)", total - shown);
        out.push(Line::styled(more, fg(Token::Dim)));
    }
}

/// `text` wrapped at `width` columns, the first line prefixed.
fn wrap_into(out: &mut Vec<Line<'static>>, prefix: &str, text: &str, width: usize, style: Style) {
    let indent = " ".repeat(prefix.chars().count());
    let mut first = true;
    for logical in text.split('\n') {
        let lead = if first { prefix } else { indent.as_str() };
        first = false;
        let mut line = String::from(lead);
        let mut used = lead.chars().count();
        for c in logical.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width {
                out.push(Line::styled(std::mem::take(&mut line), style));
                line.push_str(&indent);
                used = indent.len();
            }
            line.push(c);
            used += w;
        }
        out.push(Line::styled(line, style));
    }
}

/// At most `width` columns of `text`.
fn cut(text: &str, width: usize) -> String {
    let mut used = 0;
    text.chars()
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= width
        })
        .collect()
}

fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// Keeps the last `max` bytes (at a character boundary).
fn keep_tail(text: &mut String, max: usize) {
    if text.len() > max {
        let mut cut = text.len() - max;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.drain(..cut);
    }
}

/// A tool call's main argument, on one line.
fn summary(args: &Value) -> String {
    let main = ["command", "path", "pattern", "file_path"].iter().find_map(|k| args.get(*k).and_then(Value::as_str));
    let text = match main {
        Some(text) => text.to_owned(),
        None => args.to_string(),
    };
    text.replace('\n', " ⏎ ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect()).collect()
    }

    #[test]
    fn only_the_blocks_the_window_shows_are_rendered() {
        let mut t = Transcript::default();
        for i in 0..1000 {
            t.notice(Tone::Info, format!("notice {i}"));
        }
        // Ten rows: the last five notices (each a blank line and its text).
        let (lines, known) = t.window(40, 10, 0);
        assert_eq!(plain(&lines).last().map(String::as_str), Some("notice 999"));
        assert_eq!(plain(&lines)[1], "notice 995");
        assert!((10..20).contains(&known), "{known}");
        assert_eq!(t.rendered.iter().filter(|r| r.is_some()).count(), 5, "the rest waits");
        // Scrolled up past the top: stops at the first line, the whole length known.
        let (lines, known) = t.window(40, 10, usize::MAX / 4);
        assert_eq!(plain(&lines)[0], "notice 0");
        assert_eq!(known, 1999);
        // A changed block is rendered again, alone.
        t.notice(Tone::Info, "notice 1000");
        let (lines, _) = t.window(40, 3, 0);
        assert_eq!(plain(&lines), ["notice 999", "", "notice 1000"]);
    }

    #[test]
    fn a_turn_with_a_tool_renders_compactly_and_wraps() {
        let mut t = Transcript::default();
        t.apply(&AgentEvent::MessageEnd { message: Message::user("list the files please") });
        t.apply(&AgentEvent::MessageStart { role: "assistant".into() });
        t.apply(&AgentEvent::MessageUpdate { delta: Delta::Thinking { text: "hmm".into() } });
        t.apply(&AgentEvent::MessageUpdate { delta: Delta::Text { text: "Let me look.".into() } });
        t.apply(&AgentEvent::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            args: serde_json::json!({"command": "ls -la"}),
        });
        t.apply(&AgentEvent::ToolExecutionUpdate {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            output: "a\nb\nc\nd\n".into(),
        });
        let lines = plain(&t.lines(12));
        assert_eq!(lines[..3], ["› list the f", "  iles pleas", "  e"]);
        assert!(lines.contains(&"∴ thinking (3 characters)".to_owned()), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("⚙ bash ls") && l.ends_with('…')), "{lines:?}");
        assert!(lines.iter().any(|l| l == "  │ d") && !lines.iter().any(|l| l == "  │ a"), "{lines:?}");
        t.apply(&AgentEvent::ToolExecutionEnd { tool_call_id: "c1".into(), tool_name: "bash".into(), is_error: true });
        assert!(plain(&t.lines(40)).iter().any(|l| l == "⚙ bash ls -la ✗"));
    }
}
