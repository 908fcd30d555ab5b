//! Upstream's keybindings: every action by its namespaced id (`tui.editor.cursorWordLeft`,
//! `app.model.cycleForward`, `app.tree.editLabel`, …) — the main screen's and the selectors'
//! (lists, the session picker, the tree navigator, the scoped-models selector) —, their default
//! keys, and `~/.pi/agent/keybindings.json` (an id → a key or a list of keys, in upstream's
//! format: `ctrl+shift+x`, `alt+enter`, `pageUp`, `f5`, `ctrl+-`) replacing an action's defaults.

use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where an action applies: the same key means different things in different places (Ctrl+P
/// cycles models on the main screen and shows paths in the session picker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// The editor and the app (`tui.editor.*`, `tui.input.*`, `app.*` outside the selectors).
    Main,
    /// Any list (`tui.select.*`).
    Select,
    /// The session picker (`/resume`, `pi -r`).
    Sessions,
    /// The tree navigator (`/tree`).
    Tree,
    /// The scoped-models selector (`/scoped-models`).
    Models,
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    CursorUp,
    CursorDown,
    CursorLeft,
    CursorRight,
    CursorWordLeft,
    CursorWordRight,
    CursorLineStart,
    CursorLineEnd,
    JumpForward,
    JumpBackward,
    PageUp,
    PageDown,
    DeleteCharBackward,
    DeleteCharForward,
    DeleteWordBackward,
    DeleteWordForward,
    DeleteToLineStart,
    DeleteToLineEnd,
    NewLine,
    Submit,
    Tab,
    Yank,
    YankPop,
    Undo,
    Interrupt,
    Clear,
    Exit,
    Suspend,
    ExternalEditor,
    PasteImage,
    SessionNew,
    SessionTree,
    SessionFork,
    SessionResume,
    ModelSelect,
    ModelCycleForward,
    ModelCycleBackward,
    ThinkingCycle,
    ThinkingToggle,
    ToolsExpand,
    FollowUp,
    Dequeue,
    /// `tui.input.copy`: the editor has no selection of its own (the terminal's selection
    /// copies), so it never applies and Ctrl+C goes on to `app.clear`.
    Copy,
    SelectUp,
    SelectDown,
    SelectPageUp,
    SelectPageDown,
    SelectConfirm,
    SelectCancel,
    SessionTogglePath,
    SessionToggleSort,
    SessionToggleNamed,
    SessionRename,
    SessionDelete,
    SessionDeleteNoninvasive,
    TreeFoldOrUp,
    TreeUnfoldOrDown,
    TreeEditLabel,
    TreeToggleLabelTime,
    TreeFilterDefault,
    TreeFilterNoTools,
    TreeFilterUserOnly,
    TreeFilterLabeledOnly,
    TreeFilterAll,
    TreeFilterCycleForward,
    TreeFilterCycleBackward,
    ModelsSave,
    ModelsEnableAll,
    ModelsClearAll,
    ModelsToggleProvider,
    ModelsReorderUp,
    ModelsReorderDown,
}

use Context::{Main, Models, Select, Sessions, Tree};

/// Every action with its id and default keys, in the order a key is tried: where two actions
/// share a key (Ctrl+D: exit on an empty editor, else delete), the first that applies runs.
const ACTIONS: &[(Action, &str, &[&str], Context)] = &[
    (Action::Interrupt, "app.interrupt", &["escape"], Main),
    (Action::Clear, "app.clear", &["ctrl+c"], Main),
    (Action::Copy, "tui.input.copy", &["ctrl+c"], Main),
    (Action::Exit, "app.exit", &["ctrl+d"], Main),
    (Action::Suspend, "app.suspend", &["ctrl+z"], Main),
    (Action::ExternalEditor, "app.editor.external", &["ctrl+g"], Main),
    (Action::PasteImage, "app.clipboard.pasteImage", &["ctrl+v"], Main),
    (Action::SessionNew, "app.session.new", &[], Main),
    (Action::SessionTree, "app.session.tree", &[], Main),
    (Action::SessionFork, "app.session.fork", &[], Main),
    (Action::SessionResume, "app.session.resume", &[], Main),
    (Action::ModelSelect, "app.model.select", &["ctrl+l"], Main),
    (Action::ModelCycleForward, "app.model.cycleForward", &["ctrl+p"], Main),
    (Action::ModelCycleBackward, "app.model.cycleBackward", &["shift+ctrl+p"], Main),
    (Action::ThinkingCycle, "app.thinking.cycle", &["shift+tab"], Main),
    (Action::ThinkingToggle, "app.thinking.toggle", &["ctrl+t"], Main),
    (Action::ToolsExpand, "app.tools.expand", &["ctrl+o"], Main),
    (Action::FollowUp, "app.message.followUp", &["alt+enter"], Main),
    (Action::Dequeue, "app.message.dequeue", &["alt+up"], Main),
    (Action::CursorUp, "tui.editor.cursorUp", &["up"], Main),
    (Action::CursorDown, "tui.editor.cursorDown", &["down"], Main),
    (Action::CursorLeft, "tui.editor.cursorLeft", &["left", "ctrl+b"], Main),
    (Action::CursorRight, "tui.editor.cursorRight", &["right", "ctrl+f"], Main),
    (Action::CursorWordLeft, "tui.editor.cursorWordLeft", &["alt+left", "ctrl+left", "alt+b"], Main),
    (Action::CursorWordRight, "tui.editor.cursorWordRight", &["alt+right", "ctrl+right", "alt+f"], Main),
    (Action::CursorLineStart, "tui.editor.cursorLineStart", &["home", "ctrl+a"], Main),
    (Action::CursorLineEnd, "tui.editor.cursorLineEnd", &["end", "ctrl+e"], Main),
    (Action::JumpForward, "tui.editor.jumpForward", &["ctrl+]"], Main),
    (Action::JumpBackward, "tui.editor.jumpBackward", &["ctrl+alt+]"], Main),
    (Action::PageUp, "tui.editor.pageUp", &["pageUp"], Main),
    (Action::PageDown, "tui.editor.pageDown", &["pageDown"], Main),
    (Action::DeleteCharBackward, "tui.editor.deleteCharBackward", &["backspace"], Main),
    (Action::DeleteCharForward, "tui.editor.deleteCharForward", &["delete", "ctrl+d"], Main),
    (Action::DeleteWordBackward, "tui.editor.deleteWordBackward", &["ctrl+w", "alt+backspace"], Main),
    (Action::DeleteWordForward, "tui.editor.deleteWordForward", &["alt+d", "alt+delete"], Main),
    (Action::DeleteToLineStart, "tui.editor.deleteToLineStart", &["ctrl+u"], Main),
    (Action::DeleteToLineEnd, "tui.editor.deleteToLineEnd", &["ctrl+k"], Main),
    // Ctrl+J is a newline too: it is what most terminals send for Shift+Enter.
    (Action::NewLine, "tui.input.newLine", &["shift+enter", "ctrl+j"], Main),
    (Action::Submit, "tui.input.submit", &["enter"], Main),
    (Action::Tab, "tui.input.tab", &["tab"], Main),
    (Action::Yank, "tui.editor.yank", &["ctrl+y"], Main),
    (Action::YankPop, "tui.editor.yankPop", &["alt+y"], Main),
    (Action::Undo, "tui.editor.undo", &["ctrl+-"], Main),
    (Action::SelectUp, "tui.select.up", &["up"], Select),
    (Action::SelectDown, "tui.select.down", &["down"], Select),
    (Action::SelectPageUp, "tui.select.pageUp", &["pageUp"], Select),
    (Action::SelectPageDown, "tui.select.pageDown", &["pageDown"], Select),
    (Action::SelectConfirm, "tui.select.confirm", &["enter"], Select),
    (Action::SelectCancel, "tui.select.cancel", &["escape", "ctrl+c"], Select),
    (Action::SessionTogglePath, "app.session.togglePath", &["ctrl+p"], Sessions),
    (Action::SessionToggleSort, "app.session.toggleSort", &["ctrl+s"], Sessions),
    (Action::SessionToggleNamed, "app.session.toggleNamedFilter", &["ctrl+n"], Sessions),
    (Action::SessionRename, "app.session.rename", &["ctrl+r"], Sessions),
    (Action::SessionDelete, "app.session.delete", &["ctrl+d"], Sessions),
    (Action::SessionDeleteNoninvasive, "app.session.deleteNoninvasive", &["ctrl+backspace"], Sessions),
    (Action::TreeFoldOrUp, "app.tree.foldOrUp", &["ctrl+left", "alt+left"], Tree),
    (Action::TreeUnfoldOrDown, "app.tree.unfoldOrDown", &["ctrl+right", "alt+right"], Tree),
    (Action::TreeEditLabel, "app.tree.editLabel", &["shift+l"], Tree),
    (Action::TreeToggleLabelTime, "app.tree.toggleLabelTimestamp", &["shift+t"], Tree),
    (Action::TreeFilterDefault, "app.tree.filter.default", &["ctrl+d"], Tree),
    (Action::TreeFilterNoTools, "app.tree.filter.noTools", &["ctrl+t"], Tree),
    (Action::TreeFilterUserOnly, "app.tree.filter.userOnly", &["ctrl+u"], Tree),
    (Action::TreeFilterLabeledOnly, "app.tree.filter.labeledOnly", &["ctrl+l"], Tree),
    (Action::TreeFilterAll, "app.tree.filter.all", &["ctrl+a"], Tree),
    (Action::TreeFilterCycleForward, "app.tree.filter.cycleForward", &["ctrl+o"], Tree),
    (Action::TreeFilterCycleBackward, "app.tree.filter.cycleBackward", &["shift+ctrl+o"], Tree),
    (Action::ModelsSave, "app.models.save", &["ctrl+s"], Models),
    (Action::ModelsEnableAll, "app.models.enableAll", &["ctrl+a"], Models),
    (Action::ModelsClearAll, "app.models.clearAll", &["ctrl+x"], Models),
    (Action::ModelsToggleProvider, "app.models.toggleProvider", &["ctrl+p"], Models),
    (Action::ModelsReorderUp, "app.models.reorderUp", &["alt+up"], Models),
    (Action::ModelsReorderDown, "app.models.reorderDown", &["alt+down"], Models),
];

impl Action {
    /// The action of upstream's id (`app.model.select`).
    pub fn by_id(id: &str) -> Option<Action> {
        ACTIONS.iter().find(|(_, name, ..)| *name == id).map(|(action, ..)| *action)
    }
}

/// Keys of one action.
#[derive(Debug, Clone, PartialEq)]
struct Binding {
    action: Action,
    context: Context,
    keys: Vec<KeySpec>,
}

/// The actions' keys: upstream's defaults, with `keybindings.json` applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Keymap {
    bindings: Vec<Binding>,
}

impl Default for Keymap {
    fn default() -> Self {
        let bindings = ACTIONS
            .iter()
            .map(|(action, _, keys, context)| Binding {
                action: *action,
                context: *context,
                keys: keys.iter().filter_map(|k| KeySpec::parse(k).ok()).collect(),
            })
            .collect();
        Keymap { bindings }
    }
}

impl Keymap {
    /// The defaults with `path` (upstream's `keybindings.json`) applied when it exists; each
    /// problem — not JSON, an unknown id, a key that is not one — is a warning naming it, and the
    /// rest still applies.
    pub fn load(path: &Path) -> (Keymap, Vec<String>) {
        let mut keymap = Keymap::default();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (keymap, Vec::new()),
            Err(e) => return (keymap, vec![format!("{}: {e}", path.display())]),
        };
        let shown = path.display();
        let map: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(&text) {
            Ok(map) => map,
            Err(e) => return (keymap, vec![format!("{shown}: not a JSON object of keybindings ({e})")]),
        };
        let mut warnings = Vec::new();
        for (id, keys) in map {
            let Some((action, ..)) = ACTIONS.iter().find(|(_, name, ..)| *name == id) else {
                warnings.push(format!("{shown}: {id:?} is not a keybinding id this pi has"));
                continue;
            };
            let specs: Vec<&str> = match &keys {
                serde_json::Value::String(key) => vec![key.as_str()],
                serde_json::Value::Array(list) => list.iter().filter_map(serde_json::Value::as_str).collect(),
                _ => {
                    warnings.push(format!("{shown}: {id}: a key or a list of keys"));
                    continue;
                }
            };
            let mut parsed = Vec::new();
            for spec in specs {
                match KeySpec::parse(spec) {
                    Ok(key) => parsed.push(key),
                    Err(why) => warnings.push(format!("{shown}: {id}: {why}")),
                }
            }
            if let Some(binding) = keymap.bindings.iter_mut().find(|b| b.action == *action) {
                binding.keys = parsed;
            }
        }
        (keymap, warnings)
    }

    /// The main screen's actions `key` is bound to, in the order they are tried.
    pub fn actions(&self, key: &KeyEvent) -> Vec<Action> {
        self.actions_in(key, &[Main])
    }

    /// The actions of `contexts` that `key` is bound to, in the table's order (a selector asks
    /// for its own context, `Select`, and the editor's actions it borrows).
    pub fn actions_in(&self, key: &KeyEvent, contexts: &[Context]) -> Vec<Action> {
        let bound = |b: &&Binding| contexts.contains(&b.context) && b.keys.iter().any(|k| k.matches(key));
        self.bindings.iter().filter(bound).map(|b| b.action).collect()
    }

    /// The keys of `action` as upstream writes them (`ctrl+s`), for hints.
    pub fn keys_of(&self, action: Action) -> String {
        let binding = self.bindings.iter().find(|b| b.action == action);
        binding.map(|b| b.keys.iter().map(|k| k.text.as_str()).collect::<Vec<_>>().join("/")).unwrap_or_default()
    }

    /// Every action with keys, `id  key, key` a line (for `/hotkeys`; ids as `keybindings.json`
    /// names them).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for ((_, id, ..), binding) in ACTIONS.iter().zip(&self.bindings) {
            let keys: Vec<&str> = binding.keys.iter().map(|k| k.text.as_str()).collect();
            if !keys.is_empty() {
                out.push_str(&format!("  {id:<32} {}\n", keys.join(", ")));
            }
        }
        out
    }
}

/// One key in upstream's format.
#[derive(Debug, Clone, PartialEq)]
struct KeySpec {
    code: KeyCode,
    ctrl: bool,
    alt: bool,
    shift: bool,
    text: String,
}

impl KeySpec {
    fn parse(spec: &str) -> Result<KeySpec, String> {
        let lower = spec.trim().to_ascii_lowercase();
        // `ctrl+-` / `ctrl++`: a trailing `+` or `-` is the key itself.
        let (mods, key) = match lower.rsplit_once('+') {
            Some((mods, "")) => (mods.strip_suffix('+').unwrap_or(mods), "+"),
            Some((mods, key)) => (mods, key),
            None => ("", lower.as_str()),
        };
        let (mut ctrl, mut alt, mut shift) = (false, false, false);
        for m in mods.split('+').filter(|m| !m.is_empty()) {
            match m {
                "ctrl" => ctrl = true,
                "alt" => alt = true,
                "shift" => shift = true,
                other => return Err(format!("{spec:?}: {other:?} is not a modifier (ctrl, alt, shift)")),
            }
        }
        let code = match key {
            "escape" | "esc" => KeyCode::Esc,
            "enter" | "return" => KeyCode::Enter,
            "tab" if shift => KeyCode::BackTab,
            "tab" => KeyCode::Tab,
            "space" => KeyCode::Char(' '),
            "backspace" => KeyCode::Backspace,
            "delete" => KeyCode::Delete,
            "insert" => KeyCode::Insert,
            "clear" => KeyCode::KeypadBegin,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" => KeyCode::PageUp,
            "pagedown" => KeyCode::PageDown,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            f if f.starts_with('f') && f[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)) => {
                KeyCode::F(f[1..].parse().unwrap_or(1))
            }
            c if c.chars().count() == 1 => KeyCode::Char(c.chars().next().unwrap_or(' ')),
            other => return Err(format!("{spec:?}: {other:?} is not a key")),
        };
        Ok(KeySpec { code, ctrl, alt, shift, text: spec.trim().to_owned() })
    }

    fn matches(&self, key: &KeyEvent) -> bool {
        let m = key.modifiers;
        let (ctrl, alt, shift) =
            (m.contains(KeyModifiers::CONTROL), m.contains(KeyModifiers::ALT), m.contains(KeyModifiers::SHIFT));
        if ctrl != self.ctrl || alt != self.alt {
            return false;
        }
        match (self.code, key.code) {
            (KeyCode::Char(want), KeyCode::Char(got)) => {
                // Shift shows as an upper-case letter (and sometimes the flag); for other
                // characters it is part of the character itself.
                let upper = got.is_ascii_uppercase() || (shift && got.is_ascii_alphabetic());
                if want.is_ascii_alphabetic() && upper != self.shift {
                    return false;
                }
                got.to_ascii_lowercase() == want || (self.ctrl && control_alias(want) == Some(got))
            }
            (KeyCode::BackTab, KeyCode::BackTab) => true,
            // Ctrl+Backspace where the terminal cannot say it (no kitty protocol): Ctrl+H.
            (KeyCode::Backspace, KeyCode::Char('h')) => self.ctrl,
            (want, got) => want == got && shift == self.shift,
        }
    }
}

/// What terminals send for Ctrl with a symbol: the control byte, which crossterm reports as
/// Ctrl+4…7 (Ctrl+\ ] ^ -) — `ctrl+-` arrives as Ctrl+_ (0x1f), `ctrl+]` as 0x1d.
fn control_alias(symbol: char) -> Option<char> {
    Some(match symbol {
        '\\' => '4',
        ']' => '5',
        '^' => '6',
        '-' | '_' => '7',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn upstreams_defaults_match_what_terminals_send() {
        let map = Keymap::default();
        let first = |k: KeyEvent| map.actions(&k).first().copied();
        assert_eq!(first(key(KeyCode::Char('p'), KeyModifiers::CONTROL)), Some(Action::ModelCycleForward));
        assert_eq!(
            first(key(KeyCode::Char('P'), KeyModifiers::CONTROL | KeyModifiers::SHIFT)),
            Some(Action::ModelCycleBackward)
        );
        assert_eq!(first(key(KeyCode::BackTab, KeyModifiers::SHIFT)), Some(Action::ThinkingCycle));
        assert_eq!(first(key(KeyCode::Char('7'), KeyModifiers::CONTROL)), Some(Action::Undo), "Ctrl+- as 0x1f");
        assert_eq!(first(key(KeyCode::Char('5'), KeyModifiers::CONTROL)), Some(Action::JumpForward), "Ctrl+]");
        assert_eq!(
            first(key(KeyCode::Char('5'), KeyModifiers::CONTROL | KeyModifiers::ALT)),
            Some(Action::JumpBackward)
        );
        assert_eq!(first(key(KeyCode::Up, KeyModifiers::ALT)), Some(Action::Dequeue));
        assert_eq!(first(key(KeyCode::Char('b'), KeyModifiers::ALT)), Some(Action::CursorWordLeft));
        assert_eq!(first(key(KeyCode::Char('B'), KeyModifiers::SHIFT)), None, "a capital letter is typed");
        // Ctrl+D: exit first, then delete (the screen decides which applies).
        assert_eq!(
            map.actions(&key(KeyCode::Char('d'), KeyModifiers::CONTROL)),
            [Action::Exit, Action::DeleteCharForward]
        );
    }

    #[test]
    fn keybindings_json_replaces_an_actions_keys_and_names_what_it_cannot_use() {
        let dir = std::env::temp_dir().join(format!("pi-keys-{}", pi_observe::core::SpanId::random()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keybindings.json");
        std::fs::write(
            &path,
            r#"{"tui.editor.cursorUp": ["up", "alt+k"], "app.model.cycleForward": "f5",
                "no.such.action": "x", "tui.editor.cursorDown": ["hyper+j"]}"#,
        )
        .unwrap();
        let (map, warnings) = Keymap::load(&path);
        assert_eq!(map.actions(&key(KeyCode::Char('k'), KeyModifiers::ALT)), [Action::CursorUp]);
        assert_eq!(map.actions(&key(KeyCode::F(5), KeyModifiers::NONE)), [Action::ModelCycleForward]);
        assert!(map.actions(&key(KeyCode::Char('p'), KeyModifiers::CONTROL)).is_empty(), "the default is replaced");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("\"no.such.action\"") || warnings[1].contains("\"no.such.action\""));
        assert!(warnings.iter().any(|w| w.contains("\"hyper\" is not a modifier")), "{warnings:?}");
        std::fs::write(&path, "[1]").unwrap();
        let (map, warnings) = Keymap::load(&path);
        assert_eq!(map, Keymap::default());
        assert!(warnings[0].contains("not a JSON object"), "{warnings:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every id of upstream's keybindings.md (0.73.1), all 72, is one this pi has.
    #[test]
    fn every_upstream_keybinding_id_is_known() {
        const UPSTREAM: [&str; 72] = [
            "app.clear",
            "app.clipboard.pasteImage",
            "app.editor.external",
            "app.exit",
            "app.interrupt",
            "app.message.dequeue",
            "app.message.followUp",
            "app.model.cycleBackward",
            "app.model.cycleForward",
            "app.model.select",
            "app.models.clearAll",
            "app.models.enableAll",
            "app.models.reorderDown",
            "app.models.reorderUp",
            "app.models.save",
            "app.models.toggleProvider",
            "app.session.delete",
            "app.session.deleteNoninvasive",
            "app.session.fork",
            "app.session.new",
            "app.session.rename",
            "app.session.resume",
            "app.session.toggleNamedFilter",
            "app.session.togglePath",
            "app.session.toggleSort",
            "app.session.tree",
            "app.suspend",
            "app.thinking.cycle",
            "app.thinking.toggle",
            "app.tools.expand",
            "app.tree.editLabel",
            "app.tree.filter.all",
            "app.tree.filter.cycleBackward",
            "app.tree.filter.cycleForward",
            "app.tree.filter.default",
            "app.tree.filter.labeledOnly",
            "app.tree.filter.noTools",
            "app.tree.filter.userOnly",
            "app.tree.foldOrUp",
            "app.tree.toggleLabelTimestamp",
            "app.tree.unfoldOrDown",
            "tui.editor.cursorDown",
            "tui.editor.cursorLeft",
            "tui.editor.cursorLineEnd",
            "tui.editor.cursorLineStart",
            "tui.editor.cursorRight",
            "tui.editor.cursorUp",
            "tui.editor.cursorWordLeft",
            "tui.editor.cursorWordRight",
            "tui.editor.deleteCharBackward",
            "tui.editor.deleteCharForward",
            "tui.editor.deleteToLineEnd",
            "tui.editor.deleteToLineStart",
            "tui.editor.deleteWordBackward",
            "tui.editor.deleteWordForward",
            "tui.editor.jumpBackward",
            "tui.editor.jumpForward",
            "tui.editor.pageDown",
            "tui.editor.pageUp",
            "tui.editor.undo",
            "tui.editor.yank",
            "tui.editor.yankPop",
            "tui.input.copy",
            "tui.input.newLine",
            "tui.input.submit",
            "tui.input.tab",
            "tui.select.cancel",
            "tui.select.confirm",
            "tui.select.down",
            "tui.select.pageDown",
            "tui.select.pageUp",
            "tui.select.up",
        ];
        let unknown: Vec<&&str> = UPSTREAM.iter().filter(|id| Action::by_id(id).is_none()).collect();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(ACTIONS.len(), 72);
    }

    #[test]
    fn selector_keys_live_in_their_context_and_rebind() {
        let map = Keymap::default();
        let ctrl_p = key(KeyCode::Char('p'), KeyModifiers::CONTROL);
        assert_eq!(map.actions(&ctrl_p), [Action::ModelCycleForward]);
        assert_eq!(map.actions_in(&ctrl_p, &[Context::Sessions]), [Action::SessionTogglePath]);
        assert_eq!(map.actions_in(&ctrl_p, &[Context::Models]), [Action::ModelsToggleProvider]);
        let ctrl_h = key(KeyCode::Char('h'), KeyModifiers::CONTROL);
        assert_eq!(
            map.actions_in(&ctrl_h, &[Context::Sessions]),
            [Action::SessionDeleteNoninvasive],
            "legacy Ctrl+Backspace"
        );
        assert_eq!(
            map.actions_in(&key(KeyCode::Char('L'), KeyModifiers::SHIFT), &[Context::Tree]),
            [Action::TreeEditLabel]
        );
        let dir = std::env::temp_dir().join(format!("pi-keys-sel-{}", pi_observe::core::SpanId::random()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("k.json"),
            r#"{"app.session.toggleSort": "f6", "tui.select.down": ["down", "ctrl+j"]}"#,
        )
        .unwrap();
        let (map, warnings) = Keymap::load(&dir.join("k.json"));
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            map.actions_in(&key(KeyCode::F(6), KeyModifiers::NONE), &[Context::Sessions]),
            [Action::SessionToggleSort]
        );
        assert_eq!(map.keys_of(Action::SelectDown), "down/ctrl+j");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
