//! Session header and entries.

use serde::{Deserialize, Serialize};

use crate::message::{Message, Usage, UserContent};

/// `customType` of the `custom` entry that records the attribution context of a prompt
/// (`data` = the context map). Entries after it on the same branch are attributed to it.
pub const ATTRIBUTION_CUSTOM_TYPE: &str = "pi-observe.attribution";

/// `customType` of the `custom` entry that records the trace of a prompt (`data` =
/// `{"traceId": "<32 hex>"}`), written before its user message: an export links each prompt to
/// its trace.
pub const TRACE_CUSTOM_TYPE: &str = "pi-observe.trace";

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionHeader {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Format version (3).
    #[serde(default = "default_version")]
    pub version: u32,
    /// Session id.
    pub id: String,
    /// ISO-8601 creation time.
    pub timestamp: String,
    /// Working directory.
    #[serde(default)]
    pub cwd: String,
    /// The session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

fn default_version() -> u32 {
    1
}

/// One entry: the tree links plus its kind-specific fields. An entry this version does not
/// understand (a newer type, an unknown message role, fields of the wrong shape) is kept as
/// [`EntryKind::Unknown`] and written back exactly as it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// 8-hex id.
    pub id: String,
    /// Parent id; `None` for the first entry.
    pub parent_id: Option<String>,
    /// ISO-8601 time.
    pub timestamp: String,
    /// What the entry is.
    pub kind: EntryKind,
}

/// The typed form of an entry, for (de)serializing the known types.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Typed<K> {
    id: String,
    parent_id: Option<String>,
    timestamp: String,
    #[serde(flatten)]
    kind: K,
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.kind {
            EntryKind::Unknown(raw) => raw.serialize(serializer),
            kind => Typed {
                id: self.id.clone(),
                parent_id: self.parent_id.clone(),
                timestamp: self.timestamp.clone(),
                kind,
            }
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Entry::from_value(serde_json::Value::deserialize(deserializer)?))
    }
}

impl Entry {
    /// The entry a JSON object stands for: typed when this version knows its type and shape,
    /// else [`EntryKind::Unknown`] holding the object as it is.
    pub fn from_value(value: serde_json::Value) -> Entry {
        match serde_json::from_value::<Typed<EntryKind>>(value.clone()) {
            Ok(Typed { id, parent_id, timestamp, kind }) if !matches!(kind, EntryKind::Unknown(_)) => {
                Entry { id, parent_id, timestamp, kind }
            }
            _ => {
                let text = |key: &str| value.get(key).and_then(|v| v.as_str()).map(str::to_owned);
                Entry {
                    id: text("id").unwrap_or_default(),
                    parent_id: text("parentId"),
                    timestamp: text("timestamp").unwrap_or_default(),
                    kind: EntryKind::Unknown(value),
                }
            }
        }
    }

    /// True for an entry this version does not understand.
    pub fn is_unknown(&self) -> bool {
        matches!(self.kind, EntryKind::Unknown(_))
    }
}

/// The entry types of format v3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryKind {
    /// A conversation message.
    Message {
        /// The message.
        message: Message,
    },
    /// The model changed.
    #[serde(rename_all = "camelCase")]
    ModelChange {
        /// Provider.
        provider: String,
        /// Model id.
        model_id: String,
    },
    /// The thinking level changed.
    #[serde(rename_all = "camelCase")]
    ThinkingLevelChange {
        /// New level.
        thinking_level: String,
    },
    /// Earlier context was summarized.
    #[serde(rename_all = "camelCase")]
    Compaction {
        /// The summary.
        summary: String,
        /// First entry kept verbatim (legacy form).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_kept_entry_id: Option<String>,
        /// Context tokens before.
        tokens_before: u64,
        /// Usage of the summary call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Retained messages after the compaction.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retained_tail: Option<Vec<Message>>,
        /// Implementation details.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
        /// Generated by an extension.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_hook: Option<bool>,
    },
    /// Summary of an abandoned branch.
    #[serde(rename_all = "camelCase")]
    BranchSummary {
        /// The entry the branch left from.
        from_id: String,
        /// The summary.
        summary: String,
        /// Usage of the summary call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// Implementation details.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
        /// Generated by an extension.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from_hook: Option<bool>,
    },
    /// Extension state (not in the LLM context).
    #[serde(rename_all = "camelCase")]
    Custom {
        /// Extension identifier.
        custom_type: String,
        /// Data.
        #[serde(default)]
        data: serde_json::Value,
    },
    /// Extension message (in the LLM context).
    #[serde(rename_all = "camelCase")]
    CustomMessage {
        /// Extension identifier.
        custom_type: String,
        /// Content.
        content: UserContent,
        /// Shown in the UI.
        display: bool,
        /// Metadata.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
    },
    /// A bookmark on an entry.
    #[serde(rename_all = "camelCase")]
    Label {
        /// Labelled entry.
        target_id: String,
        /// Label; `None` clears.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// Session metadata.
    SessionInfo {
        /// Display name.
        name: String,
    },
    /// An entry this version does not understand: the whole object as read, written back
    /// unchanged.
    #[serde(skip)]
    Unknown(serde_json::Value),
}

impl EntryKind {
    /// The `type` string.
    pub fn type_name(&self) -> &'static str {
        match self {
            EntryKind::Message { .. } => "message",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::BranchSummary { .. } => "branch_summary",
            EntryKind::Custom { .. } => "custom",
            EntryKind::CustomMessage { .. } => "custom_message",
            EntryKind::Label { .. } => "label",
            EntryKind::SessionInfo { .. } => "session_info",
            EntryKind::Unknown(_) => "unknown",
        }
    }

    /// Usage this entry adds to the session totals: assistant messages, tool results with nested
    /// usage, compaction and branch-summary calls. Each counted once.
    pub fn usage(&self) -> Option<&Usage> {
        match self {
            EntryKind::Message { message: Message::Assistant(m) } => Some(&m.usage),
            EntryKind::Message { message: Message::ToolResult(m) } => m.usage.as_ref(),
            EntryKind::Compaction { usage, .. } | EntryKind::BranchSummary { usage, .. } => usage.as_ref(),
            _ => None,
        }
    }
}

/// A random 8-hex entry id.
pub fn new_entry_id() -> String {
    pi_observe_core::SpanId::random().to_string()[..8].to_owned()
}

/// A random UUID-shaped session id.
pub fn new_session_id() -> String {
    let hex = pi_observe_core::TraceId::random().to_string();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_from_the_documented_examples() {
        for line in [
            r#"{"type":"model_change","id":"d4e5f6g7","parentId":"c3d4e5f6","timestamp":"2024-12-03T14:05:00.000Z","provider":"openai","modelId":"gpt-4o"}"#,
            r#"{"type":"compaction","id":"f6g7h8i9","parentId":"e5f6g7h8","timestamp":"2024-12-03T14:10:00.000Z","summary":"User discussed X","firstKeptEntryId":"c3d4e5f6","tokensBefore":50000}"#,
            r#"{"type":"custom","id":"h8i9j0k1","parentId":"g7h8i9j0","timestamp":"2024-12-03T14:20:00.000Z","customType":"my-extension","data":{"count":42}}"#,
            r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2024-12-03T14:00:01.000Z","message":{"role":"user","content":"Hello","timestamp":1}}"#,
            r#"{"type":"label","id":"j0k1l2m3","parentId":"i9j0k1l2","timestamp":"2024-12-03T14:30:00.000Z","targetId":"a1b2c3d4","label":"checkpoint-1"}"#,
            r#"{"type":"session_info","id":"k1l2m3n4","parentId":"j0k1l2m3","timestamp":"2024-12-03T14:35:00.000Z","name":"Refactor"}"#,
        ] {
            let entry: Entry = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let back: serde_json::Value = serde_json::to_value(&entry).unwrap();
            let orig: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(back, orig, "round trip of {line}");
        }
        assert_eq!(new_entry_id().len(), 8);
        assert_eq!(new_session_id().len(), 36);
    }
}
