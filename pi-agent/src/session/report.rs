//! Who spent what: a session's usage split by attribution, model and day.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use pi_observe_core::names;

use super::entry::{ATTRIBUTION_CUSTOM_TYPE, EntryKind};
use super::reader::Session;
use crate::message::{Message, Usage};

/// The usage of one entry, with who caused it, which model produced it and when.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributedUsage {
    /// UTC day of the entry (`YYYY-MM-DD`, from its timestamp).
    pub day: String,
    /// The attribution in force on the entry's branch: every key its prompt recorded
    /// (`userId`, `orgId`, `teamId`, …), shared by the entries it covers.
    pub attribution: Arc<Attribution>,
    /// `provider/model` of the assistant message, or of the model in use on the branch for
    /// tool results, compactions and branch summaries.
    pub model: String,
    /// The entry's usage.
    pub usage: Usage,
    /// True for an assistant message (a provider turn).
    pub assistant_message: bool,
}

/// An attribution entry's keys and their string values.
pub type Attribution = BTreeMap<String, String>;

impl AttributedUsage {
    /// The value of one attribution key (`teamId`) on the entry's branch.
    pub fn attributed(&self, key: &str) -> Option<&str> {
        self.attribution.get(key).map(String::as_str)
    }

    /// `userId` of the attribution in force on the entry's branch.
    pub fn user(&self) -> Option<&str> {
        self.attributed(names::CTX_USER_ID)
    }

    /// `orgId` of the attribution in force on the entry's branch.
    pub fn org(&self) -> Option<&str> {
        self.attributed(names::CTX_ORG_ID)
    }
}

/// The string values of an attribution entry's `data` (other values are not attribution).
pub(super) fn attribution_of(data: &serde_json::Value) -> Attribution {
    let Some(object) = data.as_object() else { return Attribution::new() };
    object.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()
}

/// What is in force at an entry: inherited from its parent, changed by attribution entries,
/// model changes and assistant messages.
#[derive(Debug, Clone, Default)]
struct BranchState {
    attribution: Arc<Attribution>,
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
                Rc::new(BranchState { attribution: Arc::new(attribution_of(data)), model: inherited.model.clone() })
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
                attribution: state.attribution.clone(),
                model: state.model.clone().unwrap_or_else(|| "unknown".to_owned()),
                usage: *usage,
                assistant_message: matches!(entry.kind, EntryKind::Message { message: Message::Assistant(_) }),
            });
        }
        states.insert(&entry.id, state);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, StopReason};
    use crate::session::{Entry, SessionHeader};

    fn entry(id: &str, parent: Option<&str>, day: &str, kind: EntryKind) -> Entry {
        Entry { id: id.into(), parent_id: parent.map(Into::into), timestamp: format!("{day}T10:00:00.000Z"), kind }
    }

    fn attribution(user: &str, org: &str) -> EntryKind {
        EntryKind::Custom {
            custom_type: ATTRIBUTION_CUSTOM_TYPE.into(),
            data: serde_json::json!({ "userId": user, "orgId": org }),
        }
    }

    fn assistant(provider: &str, model: &str, input: u64) -> EntryKind {
        EntryKind::Message {
            message: Message::Assistant(AssistantMessage {
                content: Vec::new(),
                api: "faux".into(),
                provider: provider.into(),
                model: model.into(),
                usage: Usage::tokens(input, 1, 0, 0),
                stop_reason: StopReason::Stop,
                error_message: None,
                timestamp: 0,
            }),
        }
    }

    #[test]
    fn usage_is_attributed_through_the_tree_not_the_file_order() {
        let compaction = EntryKind::Compaction {
            summary: "s".into(),
            first_kept_entry_id: None,
            tokens_before: 100,
            usage: Some(Usage::tokens(5, 1, 0, 0)),
            retained_tail: None,
            details: None,
            from_hook: None,
        };
        let session = Session::from_parts(
            SessionHeader {
                kind: "session".into(),
                version: 3,
                id: "s".into(),
                timestamp: "2024-12-03T10:00:00.000Z".into(),
                cwd: String::new(),
                parent_session: None,
            },
            vec![
                entry("m", None, "2024-12-03", EntryKind::ModelChange { provider: "p".into(), model_id: "one".into() }),
                entry("a", Some("m"), "2024-12-03", attribution("alice", "acme")),
                entry("a1", Some("a"), "2024-12-03", assistant("p", "two", 10)),
                // A second branch from the root, for bob, written between alice's entries.
                entry("b", Some("m"), "2024-12-04", attribution("bob", "globex")),
                entry("b1", Some("b"), "2024-12-04", assistant("q", "three", 20)),
                // Back on alice's branch: her attribution and the model of her last turn.
                entry("c", Some("a1"), "2024-12-05", compaction),
            ],
        );
        let rows: Vec<_> = attributed_usage(&session)
            .into_iter()
            .map(|r| {
                (
                    r.day.clone(),
                    r.user().unwrap_or_default().to_owned(),
                    r.org().unwrap_or_default().to_owned(),
                    r.model.clone(),
                    r.usage.input,
                    r.assistant_message,
                )
            })
            .collect();
        let row = |day: &str, user: &str, org: &str, model: &str, input, turn| {
            (day.to_owned(), user.to_owned(), org.to_owned(), model.to_owned(), input, turn)
        };
        assert_eq!(
            rows,
            [
                row("2024-12-03", "alice", "acme", "p/two", 10, true),
                row("2024-12-04", "bob", "globex", "q/three", 20, true),
                row("2024-12-05", "alice", "acme", "p/two", 5, false),
            ]
        );
        let sum: u64 = attributed_usage(&session).iter().map(|r| r.usage.total_tokens).sum();
        assert_eq!(sum, session.totals().usage.total_tokens, "each usage counted once");
    }
}
