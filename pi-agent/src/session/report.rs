//! Who spent what: a session's usage split by attribution, model and day.

use std::collections::HashMap;
use std::rc::Rc;

use pi_observe_core::names;

use super::entry::{ATTRIBUTION_CUSTOM_TYPE, EntryKind};
use super::reader::Session;
use crate::message::{Message, Usage};

/// The usage of one entry, with who caused it, which model produced it and when.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedUsage {
    /// UTC day of the entry (`YYYY-MM-DD`, from its timestamp).
    pub day: String,
    /// `userId` of the attribution in force on the entry's branch.
    pub user: Option<String>,
    /// `orgId` of the attribution in force on the entry's branch.
    pub org: Option<String>,
    /// `provider/model` of the assistant message, or of the model in use on the branch for
    /// tool results, compactions and branch summaries.
    pub model: String,
    /// The entry's usage.
    pub usage: Usage,
    /// True for an assistant message (a provider turn).
    pub assistant_message: bool,
}

/// What is in force at an entry: inherited from its parent, changed by attribution entries,
/// model changes and assistant messages.
#[derive(Debug, Clone, Default)]
struct BranchState {
    user: Option<String>,
    org: Option<String>,
    model: Option<String>,
}

/// Every usage-carrying entry of `session` (assistant messages, tool results with usage,
/// compactions, branch summaries — each exactly once, on whichever branch it lies), attributed
/// to the `userId`/`orgId` recorded for the prompt it belongs to. Entries are attributed through
/// the tree (`parentId`), so a branch inherits the attribution of the prompt it grew from.
pub fn attributed_usage(session: &Session) -> Vec<AttributedUsage> {
    let mut states: HashMap<&str, Rc<BranchState>> = HashMap::with_capacity(session.entries.len());
    let mut rows = Vec::new();
    for entry in &session.entries {
        let inherited = entry.parent_id.as_deref().and_then(|p| states.get(p)).cloned().unwrap_or_default();
        let state = match &entry.kind {
            EntryKind::Custom { custom_type, data } if custom_type == ATTRIBUTION_CUSTOM_TYPE => {
                let get = |key: &str| data.get(key).and_then(|v| v.as_str()).map(str::to_owned);
                Rc::new(BranchState {
                    user: get(names::CTX_USER_ID),
                    org: get(names::CTX_ORG_ID),
                    model: inherited.model.clone(),
                })
            }
            EntryKind::ModelChange { provider, model_id } => {
                Rc::new(BranchState { model: Some(format!("{provider}/{model_id}")), ..(*inherited).clone() })
            }
            EntryKind::Message { message: Message::Assistant(m) } => {
                Rc::new(BranchState { model: Some(format!("{}/{}", m.provider, m.model)), ..(*inherited).clone() })
            }
            _ => inherited,
        };
        if let Some(usage) = entry.kind.usage() {
            rows.push(AttributedUsage {
                day: entry.timestamp.get(..10).unwrap_or("unknown").to_owned(),
                user: state.user.clone(),
                org: state.org.clone(),
                model: state.model.clone().unwrap_or_else(|| "unknown".to_owned()),
                usage: *usage,
                assistant_message: matches!(entry.kind, EntryKind::Message { message: Message::Assistant(_) }),
            });
        }
        states.insert(&entry.id, state);
    }
    rows
}
