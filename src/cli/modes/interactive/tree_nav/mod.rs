//! `/tree`, upstream's session tree navigator: every entry of the session as a tree (the branch
//! you are on first and marked `•`), moved through with Up/Down (Left/Right a page), branch
//! segments folded or jumped between (`app.tree.foldOrUp` / `unfoldOrDown`, Ctrl/Alt+Left/Right),
//! filtered (`app.tree.filter.*`: Ctrl+D default, Ctrl+T no tool results, Ctrl+U your messages,
//! Ctrl+L labelled, Ctrl+A everything, Ctrl+O / Shift+Ctrl+O cycle), searched by typing, labelled
//! (`editLabel`, Shift+L; label times with Shift+T). Enter asks whether to summarize the branch
//! being left, then continues from the chosen entry (a message of yours goes back to the editor).

use std::collections::{HashMap, HashSet};

use ratatui::crossterm::event::{KeyCode, KeyEvent};

use super::keys::{Action, Context, Keymap};
use crate::cli::modes::driver::{NodeKind, TreeNode};

mod draw;

/// What the filter lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    Default,
    NoTools,
    UserOnly,
    LabeledOnly,
    All,
}

const FILTERS: [Filter; 5] = [Filter::Default, Filter::NoTools, Filter::UserOnly, Filter::LabeledOnly, Filter::All];

/// A shown entry and how it is drawn.
#[derive(Debug, Clone)]
struct Shown {
    /// Index into the nodes.
    node: usize,
    indent: usize,
    /// `Some(is_last)` when it hangs from a branch point (`├─` / `└─`).
    connector: Option<bool>,
    /// Columns (in indent levels) where an ancestor's branch line runs on (`│`), and whether
    /// it is drawn.
    gutters: Vec<(usize, bool)>,
}

/// The open navigator.
pub struct TreeNav {
    nodes: Vec<TreeNode>,
    /// Each node's index by its id (walks up the tree look parents up by id at every step).
    index: HashMap<String, usize>,
    leaf: Option<String>,
    /// Node indices depth first, the active branch's children first.
    order: Vec<usize>,
    active: HashSet<String>,
    filter: Filter,
    query: String,
    folded: HashSet<String>,
    shown: Vec<Shown>,
    /// Each shown entry's nearest shown ancestor, and each one's shown children.
    shown_parent: HashMap<String, Option<String>>,
    shown_children: HashMap<Option<String>, Vec<String>>,
    selected: usize,
    label_times: bool,
    mode: Mode,
    /// Rows shown at once.
    rows: usize,
}

enum Mode {
    Tree,
    /// Editing the label of an entry.
    Label {
        id: String,
        text: String,
    },
    /// "Summarize branch?" for a move to `target` (0: no summary, 1: summarize).
    Ask {
        target: String,
        choice: usize,
    },
}

/// What a key did.
#[derive(Debug, PartialEq)]
pub enum TreeKey {
    Open,
    Cancelled,
    /// The entry chosen is where the session already is.
    AlreadyThere,
    /// Continue from `target`, the branch left summarized or not.
    Navigate {
        target: String,
        summarize: bool,
    },
    /// Set (or with `None` remove) the label of an entry.
    Label {
        id: String,
        label: Option<String>,
    },
}

impl TreeNav {
    /// Over the session's `nodes` (file order) with the session at `leaf`; `rows` entries shown
    /// at once.
    pub fn new(nodes: Vec<TreeNode>, leaf: Option<String>, rows: usize) -> TreeNav {
        let index = nodes.iter().enumerate().map(|(i, n)| (n.id.clone(), i)).collect();
        let mut nav = TreeNav {
            nodes,
            index,
            leaf,
            order: Vec::new(),
            active: HashSet::new(),
            filter: Filter::Default,
            query: String::new(),
            folded: HashSet::new(),
            shown: Vec::new(),
            shown_parent: HashMap::new(),
            shown_children: HashMap::new(),
            selected: 0,
            label_times: false,
            mode: Mode::Tree,
            rows: rows.max(5),
        };
        nav.order_nodes();
        let leaf = nav.leaf.clone();
        nav.apply(leaf.as_deref());
        nav
    }

    fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }

    /// Depth first from the roots, the children on the active branch before the others.
    fn order_nodes(&mut self) {
        let mut walk = self.leaf.clone();
        while let Some(id) = walk {
            walk = self.index_of(&id).and_then(|i| self.nodes[i].parent.clone());
            self.active.insert(id);
        }
        let mut children: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
        for (i, node) in self.nodes.iter().enumerate() {
            children.entry(node.parent.as_deref()).or_default().push(i);
        }
        for list in children.values_mut() {
            list.sort_by_key(|&i| !self.active.contains(&self.nodes[i].id));
        }
        let mut stack: Vec<usize> = children.get(&None).into_iter().flatten().rev().copied().collect();
        while let Some(i) = stack.pop() {
            self.order.push(i);
            stack.extend(children.get(&Some(self.nodes[i].id.as_str())).into_iter().flatten().rev());
        }
    }

    fn passes(&self, node: &TreeNode) -> bool {
        let is_leaf = self.leaf.as_deref() == Some(node.id.as_str());
        if node.kind == (NodeKind::Assistant { silent: true }) && !is_leaf {
            return false;
        }
        let kept = match self.filter {
            Filter::Default => node.kind != NodeKind::Setting,
            Filter::NoTools => !matches!(node.kind, NodeKind::Setting | NodeKind::ToolResult),
            Filter::UserOnly => node.kind == NodeKind::User,
            Filter::LabeledOnly => node.label.is_some(),
            Filter::All => true,
        };
        let words = self.query.to_lowercase();
        let haystack = || {
            let label = node.label.as_ref().map(|(l, _)| l.as_str()).unwrap_or_default();
            format!("{label} {}", node.text).to_lowercase()
        };
        kept && (words.trim().is_empty() || words.split_whitespace().all(|w| haystack().contains(w)))
    }

    /// The shown entries for the filter, search and folds, the selection kept on `keep` or its
    /// nearest shown ancestor.
    fn apply(&mut self, keep: Option<&str>) {
        let visible: Vec<usize> = self.order.iter().copied().filter(|&i| self.passes(&self.nodes[i])).collect();
        let visible_ids: HashSet<&str> = visible.iter().map(|&i| self.nodes[i].id.as_str()).collect();
        let shown_ancestor = |i: usize| {
            let mut up = self.nodes[i].parent.clone();
            while let Some(id) = up {
                if visible_ids.contains(id.as_str()) {
                    return Some(id);
                }
                up = self.index_of(&id).and_then(|p| self.nodes[p].parent.clone());
            }
            None
        };
        // Folded entries hide everything under them.
        let mut hidden: HashSet<String> = HashSet::new();
        let mut parent: HashMap<String, Option<String>> = HashMap::new();
        let mut children: HashMap<Option<String>, Vec<String>> = HashMap::new();
        let mut kept = Vec::new();
        for &i in &visible {
            let id = self.nodes[i].id.clone();
            let up = shown_ancestor(i);
            if up.as_ref().is_some_and(|p| hidden.contains(p) || self.folded.contains(p)) {
                hidden.insert(id);
                continue;
            }
            parent.insert(id.clone(), up.clone());
            children.entry(up).or_default().push(id);
            kept.push(i);
        }
        self.shown = self.layout(&kept, &children);
        self.shown_parent = parent;
        self.shown_children = children;
        self.selected = self.nearest(keep).unwrap_or_else(|| self.shown.len().saturating_sub(1));
    }

    /// Upstream's layout: a branch point indents its children one level and draws connectors;
    /// a chain of single children stays at its level.
    fn layout(&self, kept: &[usize], children: &HashMap<Option<String>, Vec<String>>) -> Vec<Shown> {
        let roots = children.get(&None).cloned().unwrap_or_default();
        let many_roots = roots.len() > 1;
        let by_id: HashMap<&str, usize> = kept.iter().map(|&i| (self.nodes[i].id.as_str(), i)).collect();
        let mut out = Vec::with_capacity(kept.len());
        // (id, indent, just branched, connector, is last, gutters, a root under a virtual one)
        type Item = (String, usize, bool, bool, bool, Vec<(usize, bool)>, bool);
        let mut stack: Vec<Item> = roots
            .iter()
            .enumerate()
            .rev()
            .map(|(n, id)| {
                (
                    id.clone(),
                    usize::from(many_roots),
                    many_roots,
                    many_roots,
                    n + 1 == roots.len(),
                    Vec::new(),
                    many_roots,
                )
            })
            .collect();
        while let Some((id, indent, branched, connector, last, gutters, virtual_root)) = stack.pop() {
            let Some(&node) = by_id.get(id.as_str()) else { continue };
            let shown_connector = connector && !virtual_root;
            let display = if many_roots { indent.saturating_sub(1) } else { indent };
            let kids = children.get(&Some(id.clone())).cloned().unwrap_or_default();
            let many = kids.len() > 1;
            let child_indent = if many || (branched && indent > 0) { indent + 1 } else { indent };
            let mut child_gutters = gutters.clone();
            if shown_connector {
                child_gutters.push((display.saturating_sub(1), !last));
            }
            out.push(Shown { node, indent: display, connector: shown_connector.then_some(last), gutters });
            for (n, kid) in kids.iter().enumerate().rev() {
                stack.push((kid.clone(), child_indent, many, many, n + 1 == kids.len(), child_gutters.clone(), false));
            }
        }
        out
    }

    /// The shown index of `id`, or of its nearest shown ancestor.
    fn nearest(&self, id: Option<&str>) -> Option<usize> {
        let mut walk = id.map(str::to_owned);
        while let Some(id) = walk {
            if let Some(at) = self.shown.iter().position(|s| self.nodes[s.node].id == id) {
                return Some(at);
            }
            walk = self.index_of(&id).and_then(|i| self.nodes[i].parent.clone());
        }
        None
    }

    fn selected_id(&self) -> Option<String> {
        self.shown.get(self.selected).map(|s| self.nodes[s.node].id.clone())
    }

    fn refilter(&mut self) {
        self.folded.clear();
        let keep = self.selected_id();
        self.apply(keep.as_deref());
    }

    /// A branch segment can fold: it has shown children and is a root or one of several
    /// children.
    fn foldable(&self, id: &str) -> bool {
        let has_children = self.shown_children.get(&Some(id.to_owned())).is_some_and(|c| !c.is_empty());
        let parent = self.shown_parent.get(id).cloned().flatten();
        has_children && parent.is_none_or(|p| self.shown_children.get(&Some(p)).is_some_and(|s| s.len() > 1))
    }

    /// The start of the next branch segment down (following first children), or the previous
    /// one up.
    fn segment(&self, down: bool) -> usize {
        let Some(mut id) = self.selected_id() else { return self.selected };
        let at = |id: &str| self.shown.iter().position(|s| self.nodes[s.node].id == id).unwrap_or(self.selected);
        loop {
            if down {
                let kids = self.shown_children.get(&Some(id.clone())).cloned().unwrap_or_default();
                match kids.as_slice() {
                    [] => return at(&id),
                    [only] => id = only.clone(),
                    [first, ..] => return at(first),
                }
            } else {
                let Some(parent) = self.shown_parent.get(&id).cloned().flatten() else { return at(&id) };
                let siblings = self.shown_children.get(&Some(parent.clone())).map_or(0, Vec::len);
                if siblings > 1 && at(&id) < self.selected {
                    return at(&id);
                }
                id = parent;
            }
        }
    }

    pub fn key(&mut self, key: &KeyEvent, keymap: &Keymap) -> TreeKey {
        let actions = keymap.actions_in(key, &[Context::Tree, Context::Select, Context::Main]);
        let has = |action: Action| actions.contains(&action);
        match std::mem::replace(&mut self.mode, Mode::Tree) {
            Mode::Label { id, text } => self.label_key(id, text, key, has),
            Mode::Ask { target, choice } => self.ask_key(target, choice, has),
            Mode::Tree => self.tree_key(key, &actions),
        }
    }

    /// A key while a label is being edited: confirm sets it, cancel leaves it, anything else
    /// types.
    fn label_key(&mut self, id: String, mut text: String, key: &KeyEvent, has: impl Fn(Action) -> bool) -> TreeKey {
        if has(Action::SelectConfirm) {
            let label = Some(text.trim().to_owned()).filter(|l| !l.is_empty());
            if let Some(i) = self.index_of(&id) {
                self.nodes[i].label = label.clone().map(|l| (l, pi_agent::time::iso8601(pi_agent::time::now_millis())));
            }
            return TreeKey::Label { id, label };
        }
        if !has(Action::SelectCancel) {
            super::picker::type_into(&mut text, key);
            self.mode = Mode::Label { id, text };
        }
        TreeKey::Open
    }

    /// A key while asking whether to summarize the branch left.
    fn ask_key(&mut self, target: String, choice: usize, has: impl Fn(Action) -> bool) -> TreeKey {
        if has(Action::SelectConfirm) {
            return TreeKey::Navigate { target, summarize: choice == 1 };
        }
        if !has(Action::SelectCancel) {
            let choice = if has(Action::SelectUp) || has(Action::SelectDown) { 1 - choice } else { choice };
            self.mode = Mode::Ask { target, choice };
        }
        TreeKey::Open
    }

    /// A key on the tree itself: move, fold, page, choose, filter, search, label.
    fn tree_key(&mut self, key: &KeyEvent, actions: &[Action]) -> TreeKey {
        let has = |action: Action| actions.contains(&action);
        let count = self.shown.len();
        let last = count.saturating_sub(1);
        let id = self.selected_id();
        if has(Action::SelectUp) && count > 0 {
            self.selected = (self.selected + count - 1) % count;
        } else if has(Action::SelectDown) && count > 0 {
            self.selected = (self.selected + 1) % count;
        } else if has(Action::TreeFoldOrUp) {
            match id {
                Some(id) if self.foldable(&id) && !self.folded.contains(&id) => {
                    self.folded.insert(id.clone());
                    self.apply(Some(&id));
                }
                _ => self.selected = self.segment(false),
            }
        } else if has(Action::TreeUnfoldOrDown) {
            match id {
                Some(id) if self.folded.remove(&id) => self.apply(Some(&id)),
                _ => self.selected = self.segment(true),
            }
        } else if has(Action::CursorLeft) || has(Action::SelectPageUp) {
            self.selected = self.selected.saturating_sub(self.rows);
        } else if has(Action::CursorRight) || has(Action::SelectPageDown) {
            self.selected = (self.selected + self.rows).min(last);
        } else if has(Action::SelectConfirm) {
            let Some(id) = id else { return TreeKey::Open };
            if self.leaf.as_deref() == Some(id.as_str()) {
                return TreeKey::AlreadyThere;
            }
            self.mode = Mode::Ask { target: id, choice: 0 };
        } else if has(Action::SelectCancel) {
            if self.query.is_empty() {
                return TreeKey::Cancelled;
            }
            self.query.clear();
            self.refilter();
        } else if let Some(filter) = self.filter_for(actions) {
            self.filter = filter;
            self.refilter();
        } else if has(Action::DeleteCharBackward) {
            if self.query.pop().is_some() {
                self.refilter();
            }
        } else if has(Action::TreeEditLabel) {
            if let Some(id) = id {
                let text = self.index_of(&id).and_then(|i| self.nodes[i].label.clone()).map(|(l, _)| l);
                self.mode = Mode::Label { id, text: text.unwrap_or_default() };
            }
        } else if has(Action::TreeToggleLabelTime) {
            self.label_times = !self.label_times;
        } else if let KeyCode::Char(c) = key.code
            && !key.modifiers.intersects(
                ratatui::crossterm::event::KeyModifiers::CONTROL | ratatui::crossterm::event::KeyModifiers::ALT,
            )
        {
            self.query.push(c);
            self.refilter();
        }
        TreeKey::Open
    }

    /// The filter a filter key moves to: a direct one toggles with the default.
    fn filter_for(&self, actions: &[Action]) -> Option<Filter> {
        let toggle = |f: Filter| if self.filter == f { Filter::Default } else { f };
        let at = FILTERS.iter().position(|f| *f == self.filter).unwrap_or(0);
        actions.iter().find_map(|a| match a {
            Action::TreeFilterDefault => Some(Filter::Default),
            Action::TreeFilterNoTools => Some(toggle(Filter::NoTools)),
            Action::TreeFilterUserOnly => Some(toggle(Filter::UserOnly)),
            Action::TreeFilterLabeledOnly => Some(toggle(Filter::LabeledOnly)),
            Action::TreeFilterAll => Some(toggle(Filter::All)),
            Action::TreeFilterCycleForward => Some(FILTERS[(at + 1) % FILTERS.len()]),
            Action::TreeFilterCycleBackward => Some(FILTERS[(at + FILTERS.len() - 1) % FILTERS.len()]),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::KeyModifiers;

    use super::*;

    fn node(id: &str, parent: Option<&str>, kind: NodeKind) -> TreeNode {
        let text = format!("{}: {id}", if kind == NodeKind::User { "user" } else { "assistant" });
        TreeNode { id: id.into(), parent: parent.map(str::to_owned), kind, text, user_text: None, label: None }
    }

    fn press(nav: &mut TreeNav, code: KeyCode, modifiers: KeyModifiers) -> TreeKey {
        nav.key(&KeyEvent::new(code, modifiers), &Keymap::default())
    }

    fn ids(nav: &TreeNav) -> Vec<&str> {
        nav.shown.iter().map(|s| nav.nodes[s.node].id.as_str()).collect()
    }

    #[test]
    fn segments_fold_and_jump_as_upstreams_navigator() {
        let reply = NodeKind::Assistant { silent: false };
        let nodes = vec![
            node("a", None, NodeKind::User),
            node("b", Some("a"), reply),
            node("c", Some("b"), NodeKind::User),
            node("d", Some("c"), reply),
            node("e", Some("b"), NodeKind::User),
            node("f", Some("e"), reply),
        ];
        let mut nav = TreeNav::new(nodes, Some("f".into()), 10);
        assert_eq!(ids(&nav), ["a", "b", "e", "f", "c", "d"], "the active branch first");
        assert_eq!(nav.selected, 3, "at the leaf");
        let (ctrl, none) = (KeyModifiers::CONTROL, KeyModifiers::NONE);
        // Ctrl+Left on an entry that cannot fold: up to its segment's start.
        press(&mut nav, KeyCode::Left, ctrl);
        assert_eq!(nav.selected_id().as_deref(), Some("e"));
        // Again: e starts a segment with children, so it folds.
        press(&mut nav, KeyCode::Left, ctrl);
        assert_eq!(ids(&nav), ["a", "b", "e", "c", "d"]);
        assert!(nav.line(2, &nav.shown[2]).to_string().contains("├⊞ • user: e"), "{}", nav.line(2, &nav.shown[2]));
        press(&mut nav, KeyCode::Right, ctrl);
        assert_eq!(ids(&nav).len(), 6, "unfolded");
        press(&mut nav, KeyCode::Right, ctrl);
        assert_eq!(nav.selected_id().as_deref(), Some("f"), "down the segment to its end");
        for _ in 0..3 {
            press(&mut nav, KeyCode::Up, none);
        }
        press(&mut nav, KeyCode::Right, ctrl);
        assert_eq!(nav.selected_id().as_deref(), Some("e"), "from the root to the first branch");
        // Enter asks; Down picks "Summarize".
        press(&mut nav, KeyCode::Down, none);
        press(&mut nav, KeyCode::Down, none);
        assert_eq!(nav.selected_id().as_deref(), Some("c"));
        press(&mut nav, KeyCode::Enter, none);
        press(&mut nav, KeyCode::Down, none);
        assert_eq!(press(&mut nav, KeyCode::Enter, none), TreeKey::Navigate { target: "c".into(), summarize: true });
        // Ctrl+O cycles the filters: no tool results, then only yours.
        press(&mut nav, KeyCode::Char('o'), ctrl);
        press(&mut nav, KeyCode::Char('o'), ctrl);
        assert_eq!(ids(&nav), ["a", "e", "c"]);
        assert_eq!(press(&mut nav, KeyCode::Esc, none), TreeKey::Cancelled);
    }
}
