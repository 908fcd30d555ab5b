//! What the front ends read without waiting for the running job: the [`State`] snapshot of
//! the agent (model, session, conversation, totals, fork points, commands), refreshed after each
//! job and as messages end, and the views built from it.

use pi_agent::message::{Message, Usage};
use pi_agent::model::ModelInfo;
use pi_agent::session::{EntryKind, SessionWriter};
use serde_json::{Value, json};

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

/// The session's entries depth first (children in file order), with what each says.
pub(super) fn tree_rows(session: &SessionWriter) -> Vec<Value> {
    let entries = session.entries();
    let mut children: std::collections::HashMap<Option<&str>, Vec<usize>> = std::collections::HashMap::new();
    for (i, entry) in entries.iter().enumerate() {
        children.entry(entry.parent_id.as_deref()).or_default().push(i);
    }
    let leaf = session.leaf();
    let mut rows = Vec::with_capacity(entries.len());
    let mut stack: Vec<(usize, usize)> = children.get(&None).into_iter().flatten().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        let entry = &entries[i];
        let text = match &entry.kind {
            EntryKind::Message { message } => {
                let text = match message {
                    Message::User(user) => user.content.text(),
                    Message::Assistant(a) if a.text().is_empty() => {
                        a.tool_calls().iter().map(|(_, name, _)| format!("[{name}]")).collect::<Vec<_>>().join(" ")
                    }
                    Message::Assistant(a) => a.text(),
                    Message::ToolResult(r) => format!("[{} result]", r.tool_name),
                    other => other.context_text().unwrap_or_default(),
                };
                format!("{}: {text}", message.role())
            }
            EntryKind::Compaction { .. } => "compaction".into(),
            EntryKind::BranchSummary { .. } => "branch summary".into(),
            EntryKind::ModelChange { provider, model_id } => format!("model {provider}/{model_id}"),
            other => other.type_name().to_owned(),
        };
        let text: String = text.lines().next().unwrap_or("").chars().take(100).collect();
        rows.push(json!({"id": entry.id, "depth": depth, "text": text, "leaf": leaf == Some(entry.id.as_str())}));
        if let Some(kids) = children.get(&Some(entry.id.as_str())) {
            // A chain (one child) stays at its depth; a fork indents its branches.
            let next = if kids.len() > 1 { depth + 1 } else { depth };
            stack.extend(kids.iter().rev().map(|&k| (k, next)));
        }
    }
    rows
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
