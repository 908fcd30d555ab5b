//! Extensions' `ctx.ui` in the terminal: dialogs (`select`, `confirm`, `input`, `editor`) drawn
//! over the screen and answered with the keyboard (they take the keys until answered or
//! dismissed with Esc); `notify` in the transcript, `setStatus` and `setWidget` above the editor,
//! `setTitle` as the terminal's title, `set_editor_text` into the editor. The calls arrive from
//! the extensions' tasks through [`TerminalUi`] and wait in a queue: one dialog at a time.

use std::collections::{BTreeMap, VecDeque};

use super::alert::boxed;
use super::ansi::{key_bytes, osc_only, plain};
pub use super::ansi::{key_id, styled};
use super::overlay::Placement;
use pi_agent::extensions::process::{ExtensionUi, UiAnswer};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::Block;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// One `ctx.ui` call on its way to the screen.
pub enum UiCall {
    /// A dialog and where its answer goes.
    Dialog(Value, oneshot::Sender<Value>),
    /// A call that needs no answer.
    Show(Value),
    /// A custom component: its first frame, where its keys go, and where its end goes.
    Custom(Value, mpsc::UnboundedSender<Value>, oneshot::Sender<Value>),
}

/// The terminal as the extensions' UI: calls are queued for the screen's loop; `hello` says it
/// draws components and which themes it has.
pub struct TerminalUi(pub mpsc::UnboundedSender<UiCall>, pub serde_json::Map<String, Value>);

impl ExtensionUi for TerminalUi {
    fn dialog(&self, request: Value) -> UiAnswer {
        let (tx, rx) = oneshot::channel();
        let _ = self.0.send(UiCall::Dialog(request, tx));
        // The screen gone (quitting): the dialog is cancelled.
        Box::pin(async move { rx.await.unwrap_or_else(|_| json!({"cancelled": true})) })
    }

    fn show(&self, request: Value) {
        let _ = self.0.send(UiCall::Show(request));
    }

    fn custom(&self, request: Value, input: mpsc::UnboundedSender<Value>) -> UiAnswer {
        let (tx, rx) = oneshot::channel();
        let _ = self.0.send(UiCall::Custom(request, input, tx));
        Box::pin(async move { rx.await.unwrap_or_else(|_| json!({"cancelled": true})) })
    }

    fn hello(&self) -> serde_json::Map<String, Value> {
        self.1.clone()
    }
}

/// An open custom component: the lines it rendered last.
pub struct Component {
    id: Value,
    lines: Vec<String>,
    input: mpsc::UnboundedSender<Value>,
    reply: oneshot::Sender<Value>,
    /// The width it was last told.
    width: u16,
    /// Drawn as an overlay (`ctx.ui.custom(…, { overlay: true, overlayOptions })`), else boxed
    /// in the middle of the screen.
    overlay: Option<Placement>,
}

impl Component {
    /// True when its extension is gone (nothing will close it but pi).
    pub fn gone(&self) -> bool {
        self.input.is_closed()
    }

    /// Tells the component the width it renders for, when it changed.
    fn tell_width(&mut self, width: u16) {
        if self.width != width {
            self.width = width;
            let _ = self.input.send(json!({"width": width}));
        }
    }
}

/// An extension's autocomplete suggestions: each `(value, label and description)`.
fn suggestions(request: &Value) -> Shown {
    let items = request.get("items").and_then(Value::as_array).into_iter().flatten();
    let items = items
        .filter_map(|item| {
            let value = text(item, "value")?;
            let label = text(item, "label").unwrap_or_else(|| value.clone());
            let shown = match text(item, "description") {
                Some(description) => format!("{label}  {}", plain(&description)),
                None => label,
            };
            Some((value, shown))
        })
        .collect();
    let seq = request.get("seq").and_then(Value::as_u64).unwrap_or_default();
    Shown::Suggestions(seq, text(request, "prefix").unwrap_or_default(), items)
}

/// What an extension drew for a call of its tool.
fn tool_drawn(request: &Value) -> Shown {
    let lines = |key: &str| request.get(key).and_then(|l| serde_json::from_value(l.clone()).ok());
    let drawn = super::transcript::Drawn {
        call: lines("call"),
        partial: lines("partial"),
        collapsed: lines("collapsed"),
        expanded: lines("expanded"),
    };
    Shown::ToolDrawn(text(request, "toolCallId").unwrap_or_default(), drawn)
}

/// An open dialog.
struct Dialog {
    method: String,
    title: String,
    message: Option<String>,
    options: Vec<String>,
    /// The highlighted option (`select`), or 0 = Yes / 1 = No (`confirm`).
    selected: usize,
    /// What was typed (`input`, `editor`).
    text: String,
    reply: oneshot::Sender<Value>,
}

/// What the extensions put on the screen.
#[derive(Default)]
pub struct ExtScreen {
    open: Option<Dialog>,
    /// Open components, the last on top (it gets the keys).
    components: Vec<Component>,
    /// An extension's editor (`ctx.ui.setEditorComponent`), drawn and given the keys in place
    /// of pi's.
    editor: Option<Component>,
    /// Extensions with autocomplete providers (`ctx.ui.addAutocompleteProvider`): asked as
    /// the user types.
    completers: Vec<Component>,
    /// Extensions listening to the terminal's input (`ctx.ui.onTerminalInput`): told each key.
    listeners: Vec<Component>,
    /// The terminal and an extension's full-screen program (upstream's `tui.stop()` /
    /// `tui.start()` in a component).
    pub handoff: Handoff,
    queued: VecDeque<(Value, oneshot::Sender<Value>)>,
    /// `setStatus` entries by key.
    pub status: BTreeMap<String, String>,
    /// `setWidget` lines by key.
    pub widgets: BTreeMap<String, Vec<String>>,
    /// `setWorkingMessage`: the text shown while the agent works (`None`: pi's own).
    pub working_message: Option<String>,
    /// `setWorkingIndicator`: the indicator before it (`None`: pi's own; empty: none).
    pub working_indicator: Option<String>,
    /// `setWorkingVisible(false)` hides the working line.
    pub working_hidden: bool,
    /// `setFooter`: the extension's footer lines, in place of pi's model line.
    pub footer: Option<Vec<String>>,
    /// `setHeader`: lines above the transcript.
    pub header: Option<Vec<String>>,
}

/// Where the terminal is with respect to an extension's full-screen program.
#[derive(Default)]
pub enum Handoff {
    /// pi's.
    #[default]
    Ours,
    /// Asked for by an extension: hand it over, then write this file.
    Asked(std::path::PathBuf, Component),
    /// The extension's until it closes this (or its extension ends): nothing is drawn or read.
    Given(Component),
    /// Given back: take it.
    Returning,
}

/// What a `Show` call asks of the rest of the screen.
pub enum Shown {
    /// A line for the transcript, and whether it is a warning or error.
    Notice(String, bool),
    /// Text for the editor.
    EditorText(String),
    /// The terminal's title.
    Title(String),
    /// Terminal sequences (OSC: notifications, titles) to write as they are.
    TerminalWrite(String),
    /// What collapsed thinking is called (`None`: pi's own).
    ThinkingLabel(Option<String>),
    /// An extension's editor sent its message (Enter).
    Submit(String),
    /// An extension's editor's text changed (pi's editor follows it).
    EditorChanged(String),
    /// An extension's editor recognised one of the app's keys: upstream's action id.
    Action(String),
    /// An extension's autocomplete suggestions: the text's `seq`, the prefix they replace, and
    /// each `(value, what the list shows)`.
    Suggestions(u64, String, Vec<(String, String)>),
    /// An extension switched the theme (`ctx.ui.setTheme`): its name.
    Theme(String),
    /// An extension expanded or collapsed tools' output (`ctx.ui.setToolsExpanded`).
    ToolsExpanded(bool),
    /// An extension drew (part of) a call of its tool: the call's id and the drawing.
    ToolDrawn(String, super::transcript::Drawn),
    /// Status and widgets changed (drawn from [`ExtScreen`]).
    Nothing,
}

fn text(request: &Value, key: &str) -> Option<String> {
    request.get(key).and_then(Value::as_str).map(str::to_owned)
}

impl ExtScreen {
    /// True while a dialog or a component takes the keys.
    pub fn is_open(&self) -> bool {
        self.open.is_some() || !self.components.is_empty()
    }

    /// Takes one call: dialogs are queued (one shows at a time); the rest is applied here or
    /// handed back for the transcript, editor or title.
    pub fn take(&mut self, call: UiCall) -> Shown {
        match call {
            UiCall::Dialog(request, reply) => {
                self.queued.push_back((request, reply));
                self.next();
                Shown::Nothing
            }
            UiCall::Show(request) => self.show(&request),
            UiCall::Custom(request, input, reply) => {
                let lines =
                    request.get("lines").and_then(|l| serde_json::from_value(l.clone()).ok()).unwrap_or_default();
                let id = request.get("customId").cloned().unwrap_or(Value::Null);
                let overlay = (request.get("overlay") == Some(&Value::Bool(true)))
                    .then(|| Placement::parse(request.get("overlayOptions").unwrap_or(&Value::Null)));
                let component = Component { id, lines, input, reply, width: 0, overlay };
                let handoff = request.get("handoff") == Some(&Value::Bool(true));
                // Only a token of file-name characters names the file pi writes.
                let token = text(&request, "token")
                    .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
                if handoff {
                    match token {
                        Some(token) => {
                            self.handoff =
                                Handoff::Asked(std::env::temp_dir().join(format!("pi-tty-{token}")), component)
                        }
                        None => {
                            let _ = component.reply.send(json!({"cancelled": true}));
                        }
                    }
                } else if request.get("terminalInput") == Some(&Value::Bool(true)) {
                    self.listeners.push(component);
                } else if request.get("autocomplete") == Some(&Value::Bool(true)) {
                    self.completers.push(component);
                } else if request.get("editor") == Some(&Value::Bool(true)) {
                    // One editor at a time: the one it replaces is closed.
                    if let Some(old) = self.editor.replace(component) {
                        let _ = old.reply.send(json!({"cancelled": true}));
                    }
                } else {
                    self.components.push(component);
                }
                Shown::Nothing
            }
        }
    }

    fn show(&mut self, request: &Value) -> Shown {
        match request.get("method").and_then(Value::as_str).unwrap_or_default() {
            "notify" => {
                let level = text(request, "notifyType").unwrap_or_default();
                Shown::Notice(text(request, "message").unwrap_or_default(), level == "warning" || level == "error")
            }
            "setStatus" => {
                let key = text(request, "statusKey").unwrap_or_default();
                match text(request, "statusText") {
                    Some(status) => self.status.insert(key, status),
                    None => self.status.remove(&key),
                };
                Shown::Nothing
            }
            "setWidget" => {
                let key = text(request, "widgetKey").unwrap_or_default();
                let lines: Option<Vec<String>> =
                    request.get("widgetLines").and_then(|l| serde_json::from_value(l.clone()).ok());
                match lines {
                    Some(lines) => self.widgets.insert(key, lines),
                    None => self.widgets.remove(&key),
                };
                Shown::Nothing
            }
            "setFooter" | "setHeader" => {
                let lines: Option<Vec<String>> =
                    request.get("lines").and_then(|l| serde_json::from_value::<Vec<String>>(l.clone()).ok());
                match request["method"].as_str() {
                    Some("setFooter") => self.footer = lines,
                    _ => self.header = lines,
                }
                Shown::Nothing
            }
            // A displayed `pi.sendMessage`, as its renderer drew it (or its text).
            "message" => {
                let lines: Vec<String> =
                    request.get("lines").and_then(|l| serde_json::from_value(l.clone()).ok()).unwrap_or_default();
                Shown::Notice(lines.iter().map(|l| plain(l)).collect::<Vec<_>>().join("\n"), false)
            }
            // Only OSC sequences (`ESC ] … BEL|ST`: they move nothing on the screen) are written.
            "terminal_write" => match text(request, "data").filter(|d| osc_only(d)) {
                Some(data) => Shown::TerminalWrite(data),
                None => Shown::Nothing,
            },
            "setHiddenThinkingLabel" => Shown::ThinkingLabel(text(request, "label").map(|l| plain(&l))),
            "setWorkingMessage" => {
                self.working_message = text(request, "message").map(|m| plain(&m));
                Shown::Nothing
            }
            "setWorkingIndicator" => {
                // The first frame, drawn still (styles dropped).
                let frames: Option<Vec<String>> =
                    request.get("frames").and_then(|f| serde_json::from_value(f.clone()).ok());
                self.working_indicator = frames.map(|f| f.first().map(|f| plain(f)).unwrap_or_default());
                Shown::Nothing
            }
            "setWorkingVisible" => {
                self.working_hidden = request.get("visible").and_then(Value::as_bool) == Some(false);
                Shown::Nothing
            }
            "setTitle" => Shown::Title(text(request, "title").unwrap_or_default()),
            "set_editor_text" => Shown::EditorText(text(request, "text").unwrap_or_default()),
            "setTheme" => Shown::Theme(text(request, "name").unwrap_or_default()),
            "autocomplete_result" => suggestions(request),
            "setToolsExpanded" => Shown::ToolsExpanded(request.get("expanded") == Some(&Value::Bool(true))),
            "tool_render" => tool_drawn(request),
            "editor_submit" if self.editor.is_some() => Shown::Submit(text(request, "text").unwrap_or_default()),
            "editor_change" if self.editor.is_some() => Shown::EditorChanged(text(request, "text").unwrap_or_default()),
            "editor_action" if self.editor.is_some() => Shown::Action(text(request, "action").unwrap_or_default()),
            "custom_render" | "custom_close" => {
                self.component_call(request);
                Shown::Nothing
            }
            _ => Shown::Nothing,
        }
    }

    /// A frame or the end of a component (`custom_render`, `custom_close`), whichever kind it
    /// is: the terminal's holder, the editor in pi's place, an open component, a completer or a
    /// listener.
    fn component_call(&mut self, request: &Value) {
        let is = |c: &Component| request.get("customId") == Some(&c.id);
        let closing = request["method"] == "custom_close";
        let frame = || request.get("lines").and_then(|l| serde_json::from_value(l.clone()).ok()).unwrap_or_default();
        let closed = |c: Component| {
            let _ = c.reply.send(json!({"closed": true}));
        };
        if matches!(&self.handoff, Handoff::Given(c) if is(c)) {
            if closing && let Handoff::Given(c) = std::mem::replace(&mut self.handoff, Handoff::Returning) {
                closed(c);
            }
        } else if self.editor.as_ref().is_some_and(is) {
            match (closing, self.editor.take()) {
                (true, Some(editor)) => closed(editor),
                (false, Some(mut editor)) => {
                    editor.lines = frame();
                    self.editor = Some(editor);
                }
                _ => {}
            }
        } else if let Some(at) = self.components.iter().position(is) {
            if closing {
                closed(self.components.remove(at));
            } else {
                self.components[at].lines = frame();
            }
        } else if closing {
            self.completers.retain(|c| !is(c));
            self.listeners.retain(|c| !is(c));
        }
    }

    /// Tells the extensions listening to the terminal's input about `key` (as its bytes).
    pub fn tell_listeners(&mut self, key: &KeyEvent) {
        if self.listeners.is_empty() {
            return;
        }
        self.listeners.retain(|l| !l.input.is_closed());
        if let Some(data) = key_bytes(key) {
            for listener in &self.listeners {
                let _ = listener.input.send(json!({"data": data}));
            }
        }
    }

    /// True when an extension has an autocomplete provider.
    pub fn has_completers(&self) -> bool {
        self.completers.iter().any(|c| !c.input.is_closed())
    }

    /// Asks every extension's autocomplete provider about the editor's text (`ask`: upstream's
    /// `lines`, `cursorLine`, `cursorCol`, and the text's `seq`).
    pub fn ask_completers(&mut self, ask: Value) {
        self.completers.retain(|c| !c.input.is_closed());
        for completer in &self.completers {
            let _ = completer.input.send(json!({"complete": ask}));
        }
    }

    /// True while an extension's editor stands in for pi's.
    pub fn has_editor(&self) -> bool {
        self.editor.as_ref().is_some_and(|e| !e.input.is_closed())
    }

    /// The extension's editor as it rendered itself for `width` (told the width when it
    /// changed); `None` without one.
    pub fn editor_lines(&mut self, width: u16) -> Option<Vec<Line<'static>>> {
        if self.editor.as_ref().is_some_and(|e| e.input.is_closed()) {
            // Its extension is gone: pi's editor is back.
            let _ = self.editor.take().map(|e| e.reply.send(json!({"cancelled": true})));
        }
        let editor = self.editor.as_mut()?;
        editor.tell_width(width);
        Some(editor.lines.iter().map(|l| styled(l)).collect())
    }

    /// One key for the extension's editor, as the terminal bytes it reads.
    pub fn editor_key(&self, key: &KeyEvent) {
        if let (Some(editor), Some(data)) = (&self.editor, key_bytes(key)) {
            let _ = editor.input.send(json!({"data": data}));
        }
    }

    /// Pasted text for the extension's editor (a bracketed paste, as a terminal sends it).
    pub fn editor_paste(&self, text: &str) {
        if let Some(editor) = &self.editor {
            let _ = editor.input.send(json!({"data": format!("\x1b[200~{text}\x1b[201~")}));
        }
    }

    /// Puts `text` in the extension's editor (pi changed its own: a dequeue, `setEditorText`,
    /// Ctrl+G, a cleared editor).
    pub fn editor_set_text(&self, text: &str) {
        if let Some(editor) = &self.editor {
            let _ = editor.input.send(json!({"setText": text}));
        }
    }

    /// Opens the next queued dialog when none is open (a caller that gave up is skipped).
    fn next(&mut self) {
        while self.open.is_none() {
            let Some((request, reply)) = self.queued.pop_front() else { return };
            if reply.is_closed() {
                continue;
            }
            let options: Vec<String> =
                request.get("options").and_then(|o| serde_json::from_value(o.clone()).ok()).unwrap_or_default();
            self.open = Some(Dialog {
                method: text(&request, "method").unwrap_or_default(),
                title: text(&request, "title").unwrap_or_default(),
                message: text(&request, "message").or_else(|| text(&request, "placeholder")),
                options,
                selected: 0,
                text: text(&request, "prefill").unwrap_or_default(),
                reply,
            });
        }
    }

    fn answer(&mut self, answer: Value) {
        if let Some(dialog) = self.open.take() {
            let _ = dialog.reply.send(answer);
        }
        self.next();
    }

    /// One key for the open dialog: Esc cancels; arrows and Enter choose; typing fills an
    /// input. Does nothing without an open dialog.
    pub fn key(&mut self, key: KeyEvent) {
        if let Some(component) = self.components.last() {
            if let Some(data) = key_bytes(&key) {
                let _ = component.input.send(json!({"data": data}));
            }
            return;
        }
        let Some(dialog) = self.open.as_mut() else { return };
        if key.code == KeyCode::Esc {
            return self.answer(json!({"cancelled": true}));
        }
        let choices = if dialog.method == "confirm" { 2 } else { dialog.options.len().max(1) };
        match (dialog.method.as_str(), key.code) {
            ("confirm", KeyCode::Char('y' | 'Y')) => self.answer(json!({"confirmed": true})),
            ("confirm", KeyCode::Char('n' | 'N')) => self.answer(json!({"confirmed": false})),
            ("confirm", KeyCode::Enter) => {
                let yes = dialog.selected == 0;
                self.answer(json!({"confirmed": yes}));
            }
            ("confirm" | "select", KeyCode::Up | KeyCode::Left) => {
                dialog.selected = (dialog.selected + choices - 1) % choices
            }
            ("confirm" | "select", KeyCode::Down | KeyCode::Right | KeyCode::Tab) => {
                dialog.selected = (dialog.selected + 1) % choices
            }
            ("select", KeyCode::Enter) => {
                let value = dialog.options.get(dialog.selected).cloned();
                self.answer(value.map_or(json!({"cancelled": true}), |v| json!({"value": v})));
            }
            ("input" | "editor", KeyCode::Enter)
                if dialog.method == "editor" && key.modifiers.contains(KeyModifiers::ALT) =>
            {
                dialog.text.push('\n')
            }
            ("input" | "editor", KeyCode::Enter) => {
                let value = std::mem::take(&mut dialog.text);
                self.answer(json!({"value": value}));
            }
            ("input" | "editor", KeyCode::Backspace) => {
                dialog.text.pop();
            }
            ("input" | "editor", KeyCode::Char(c)) => dialog.text.push(c),
            _ => {}
        }
    }

    /// Draws the open component over the screen, telling it the width it has; else the open
    /// dialog.
    pub fn draw(&mut self, frame: &mut ratatui::Frame<'_>) {
        let area = frame.area();
        // A component whose extension is gone: nothing will close it but us.
        for gone in self.components.extract_if(.., |c| c.input.is_closed()) {
            let _ = gone.reply.send(json!({"cancelled": true}));
        }
        for component in &mut self.components {
            // An overlay goes where its options put it, drawn as it rendered itself; any other
            // component is boxed in the middle, in place of a dialog.
            let placed = component.overlay.as_ref().map(|o| (o.width(area), o.rect(area, component.lines.len())));
            let boxed_width = area.width.saturating_sub(4).max(10);
            component.tell_width(placed.map_or(boxed_width - 2, |(width, _)| width));
            let lines: Vec<Line<'_>> = component.lines.iter().map(|l| styled(l)).collect();
            match placed {
                Some((_, place)) => {
                    frame.render_widget(ratatui::widgets::Clear, place);
                    frame.render_widget(ratatui::widgets::Paragraph::new(lines), place);
                }
                None => boxed(frame, boxed_width, lines, Block::bordered()),
            }
        }
        if !self.components.is_empty() {
            return;
        }
        let Some(dialog) = &self.open else { return };
        let highlight = super::theme::fg(super::theme::Token::Accent).add_modifier(Modifier::BOLD | Modifier::REVERSED);
        let mut lines: Vec<Line<'_>> = dialog.message.iter().flat_map(|m| m.lines()).map(Line::raw).collect();
        let choice = |i: usize, label: String| {
            if i == dialog.selected {
                Line::styled(format!("> {label}"), highlight)
            } else {
                Line::raw(format!("  {label}"))
            }
        };
        let hint = match dialog.method.as_str() {
            "confirm" => {
                lines.extend([choice(0, "Yes".into()), choice(1, "No".into())]);
                "y / n, or arrows and Enter · Esc cancels"
            }
            "select" => {
                lines.extend(dialog.options.iter().enumerate().map(|(i, o)| choice(i, o.clone())));
                "arrows and Enter · Esc cancels"
            }
            _ => {
                lines.extend(format!("{}▏", dialog.text).lines().map(|l| Line::raw(l.to_owned())));
                if dialog.method == "editor" {
                    "Enter saves · Alt+Enter new line · Esc cancels"
                } else {
                    "Enter answers · Esc cancels"
                }
            }
        };
        lines.push(Line::raw(""));
        lines.push(Line::styled(hint, super::theme::fg(super::theme::Token::Dim)));
        let block = Block::bordered()
            .title(format!(" {} ", dialog.title))
            .border_style(super::theme::fg(super::theme::Token::BorderAccent));
        boxed(frame, area.width.saturating_sub(4).min(90), lines, block);
    }
}
