//! What the front ends read without waiting for the running job: the [`State`] snapshot of
//! the agent (model, session, conversation, totals, fork points, commands), refreshed after each
//! job and as messages end, and the views built from it.

use pi_agent::message::{Message, StopReason, Usage};
use pi_agent::model::ModelInfo;
use pi_agent::session::{EntryKind, SessionWriter};
use serde_json::Value;

use crate::cli::modes::harness::Harness;

/// What a front end may read at any time.
#[derive(Debug, Clone)]
pub struct State {
    /// The model in use.
    pub model: ModelInfo,
    /// Thinking level (`off` when none).
    pub thinking_level: String,
    /// Session file.
    pub session_file: Option<String>,
    /// Session id.
    pub session_id: Option<String>,
    /// Session display name.
    pub session_name: Option<String>,
    /// The conversation (as of the last finished message).
    pub messages: Vec<Message>,
    /// Automatic compaction is on.
    pub auto_compaction: bool,
    /// Tokens and cost of the whole session (as `pi report` counts them).
    pub usage: Usage,
    /// Context tokens the next request would send.
    pub context_tokens: u64,
    /// The user messages of the current branch: entry id and text (fork points).
    pub user_entries: Vec<(String, String)>,
    /// Skills and prompt templates: `(name, description, source, path)`.
    pub resources: Vec<(String, String, &'static str, String)>,
}

/// Upstream's `Model` object.
pub fn model_json(model: &ModelInfo) -> Value {
    pi_agent::extensions::process::model_wire(model)
}

/// One entry of the session tree as the tree navigator shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TreeNode {
    pub id: String,
    pub parent: Option<String>,
    pub kind: NodeKind,
    /// What it says, on one line (`user: …`, `[read: src/main.rs]`, `[compaction: 12k tokens]`).
    pub text: String,
    /// The user message's whole text (it goes back to the editor when the tree moves above it).
    pub user_text: Option<String>,
    /// Its label and when it was set.
    pub label: Option<(String, String)>,
}

/// What an entry is, for the navigator's filters and colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum NodeKind {
    User,
    /// A reply; `silent` when it only called tools (hidden unless it is where the session is).
    Assistant {
        silent: bool,
    },
    ToolResult,
    /// Bookkeeping: labels, extension state, model and thinking changes, the session's name.
    Setting,
    /// Summaries, shell commands, extension messages.
    Other,
}

/// The session's entries in file order with what each says, labels applied, and the leaf.
pub(super) fn tree_nodes(session: &SessionWriter) -> (Vec<TreeNode>, Option<String>) {
    let entries = session.entries();
    let mut labels: std::collections::HashMap<&str, Option<(String, String)>> = std::collections::HashMap::new();
    let mut calls: std::collections::HashMap<String, (String, Value)> = std::collections::HashMap::new();
    for entry in entries {
        match &entry.kind {
            EntryKind::Label { target_id, label } => {
                labels.insert(target_id, label.clone().map(|l| (l, entry.timestamp.clone())));
            }
            EntryKind::Message { message: Message::Assistant(a) } => {
                calls.extend(a.tool_calls().into_iter().map(|(id, name, args)| (id, (name, args))));
            }
            _ => {}
        }
    }
    let nodes = entries
        .iter()
        .map(|entry| {
            let (kind, text, user_text) = describe(&entry.kind, &calls);
            TreeNode {
                id: entry.id.clone(),
                parent: entry.parent_id.clone(),
                kind,
                text,
                user_text,
                label: labels.get(entry.id.as_str()).cloned().flatten(),
            }
        })
        .collect();
    (nodes, session.leaf().map(str::to_owned))
}

/// What an entry says on one line, its kind, and (for a user message) its whole text;
/// `calls` names each tool call by id, so a tool result shows its call.
fn describe(
    kind: &EntryKind,
    calls: &std::collections::HashMap<String, (String, Value)>,
) -> (NodeKind, String, Option<String>) {
    let one_line = |text: &str| -> String { text.replace(['\n', '\t'], " ").trim().chars().take(200).collect() };
    let mut user_text = None;
    let (kind, text) = match kind {
        EntryKind::Message { message } => match message {
            Message::User(user) => {
                let text = user.content.text();
                let shown = format!("user: {}", one_line(&text));
                user_text = Some(text);
                (NodeKind::User, shown)
            }
            Message::Assistant(a) => {
                let text = one_line(&a.text());
                let failed = matches!(a.stop_reason, StopReason::Error | StopReason::Aborted);
                let shown = match () {
                    _ if !text.is_empty() => text,
                    _ if a.stop_reason == StopReason::Aborted => "(aborted)".into(),
                    _ => a.error_message.as_deref().map(one_line).unwrap_or_else(|| "(no content)".into()),
                };
                (NodeKind::Assistant { silent: a.text().trim().is_empty() && !failed }, format!("assistant: {shown}"))
            }
            Message::ToolResult(r) => {
                let shown = match calls.get(&r.tool_call_id) {
                    Some((name, args)) => tool_call_line(name, args),
                    None => format!("[{}]", r.tool_name),
                };
                (NodeKind::ToolResult, shown)
            }
            Message::BashExecution(b) => (NodeKind::Other, format!("[bash]: {}", one_line(&b.command))),
            Message::Custom(c) => (NodeKind::Other, format!("[{}]: {}", c.custom_type, one_line(&c.content.text()))),
            other => (NodeKind::Other, format!("[{}]", other.role())),
        },
        EntryKind::CustomMessage { custom_type, content, .. } => {
            (NodeKind::Other, format!("[{custom_type}]: {}", one_line(&content.text())))
        }
        EntryKind::Compaction { tokens_before, .. } => {
            (NodeKind::Other, format!("[compaction: {}k tokens]", (*tokens_before as f64 / 1000.0).round()))
        }
        EntryKind::BranchSummary { summary, .. } => {
            (NodeKind::Other, format!("[branch summary]: {}", one_line(summary)))
        }
        EntryKind::ModelChange { model_id, .. } => (NodeKind::Setting, format!("[model: {model_id}]")),
        EntryKind::ThinkingLevelChange { thinking_level } => {
            (NodeKind::Setting, format!("[thinking: {thinking_level}]"))
        }
        EntryKind::Custom { custom_type, .. } => (NodeKind::Setting, format!("[custom: {custom_type}]")),
        EntryKind::Label { label, .. } => {
            (NodeKind::Setting, format!("[label: {}]", label.as_deref().unwrap_or("(cleared)")))
        }
        EntryKind::SessionInfo { name } => (NodeKind::Setting, format!("[title: {name}]")),
        EntryKind::Unknown(value) => (NodeKind::Setting, format!("[{}]", value["type"].as_str().unwrap_or("unknown"))),
    };
    (kind, text, user_text)
}

/// A tool call as the tree shows it, upstream's way: `[read: src/main.rs:10-29]`,
/// `[bash: cargo test]`, `[grep: /todo/ in src]`, other tools with their arguments.
fn tool_call_line(name: &str, args: &Value) -> String {
    let arg = |key: &str| args[key].as_str().unwrap_or_default().to_owned();
    let home = std::env::var("HOME").unwrap_or_default();
    let short = |path: String| match path.strip_prefix(&home) {
        Some(rest) if !home.is_empty() => format!("~{rest}"),
        _ => path,
    };
    let path = || short(if args["path"].is_string() { arg("path") } else { arg("file_path") });
    let place = || short(args["path"].as_str().unwrap_or(".").to_owned());
    match name {
        "read" => {
            let (offset, limit) = (args["offset"].as_u64(), args["limit"].as_u64());
            let range = match (offset, limit) {
                (None, None) => String::new(),
                (start, Some(limit)) => format!(":{}-{}", start.unwrap_or(1), start.unwrap_or(1) + limit - 1),
                (Some(start), None) => format!(":{start}"),
            };
            format!("[read: {}{range}]", path())
        }
        "write" | "edit" => format!("[{name}: {}]", path()),
        "bash" => {
            let command = arg("command").replace(['\n', '\t'], " ");
            let cut: String = command.trim().chars().take(50).collect();
            let more = if command.trim().chars().count() > 50 { "..." } else { "" };
            format!("[bash: {cut}{more}]")
        }
        "grep" => format!("[grep: /{}/ in {}]", arg("pattern"), place()),
        "find" => format!("[find: {} in {}]", arg("pattern"), place()),
        "ls" => format!("[ls: {}]", place()),
        _ => {
            let json = args.to_string();
            let cut: String = json.chars().take(40).collect();
            format!("[{name}: {cut}{}]", if json.chars().count() > 40 { "..." } else { "" })
        }
    }
}

pub(super) fn state_of(harness: &Harness) -> State {
    let agent = &harness.agent;
    State {
        model: agent.model().clone(),
        thinking_level: agent.config().reasoning.clone().unwrap_or_else(|| "off".into()),
        session_file: agent.session_file(),
        session_id: agent.session_id(),
        session_name: agent.session_name(),
        messages: agent.messages().to_vec(),
        auto_compaction: agent.config().compaction.enabled,
        usage: agent.session_usage(),
        context_tokens: agent.context_tokens(),
        user_entries: agent
            .with_session(|s| {
                s.branch(s.leaf())
                    .into_iter()
                    .filter_map(|e| match &e.kind {
                        EntryKind::Message { message: Message::User(user) } => {
                            Some((e.id.clone(), user.content.text()))
                        }
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        resources: {
            let resources = agent.resources();
            let skills = resources
                .skills
                .iter()
                .map(|s| (format!("skill:{}", s.name), s.description.clone(), "skill", s.path.display().to_string()));
            let templates = resources
                .templates
                .iter()
                .map(|t| (t.name.clone(), t.description.clone(), "prompt", t.path.display().to_string()));
            skills.chain(templates).collect()
        },
    }
}
