//! What a job comes to: a typed result or a [`JobError`]. Front ends read the types; the RPC
//! mode serializes them at its edge (the field names are upstream's `RpcResponse` data).

use pi_agent::message::StopReason;
use serde::Serialize;
use serde_json::Value;

/// A job's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum JobOutput {
    /// Done, nothing to tell (`null`).
    Nothing,
    /// A prompt settled.
    Prompt { stop_reason: StopReason, turns: usize, error: Option<String> },
    /// An extension command ran (what it said to show).
    Command { output: Option<String> },
    /// A compaction: the summary entry written (`summary` null when nothing was summarized).
    Compacted {
        summary: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        first_kept_entry_id: Option<String>,
        tokens_before: u64,
        details: Value,
    },
    /// A fork before a user message: its text, or cancelled by an extension.
    Forked { text: String, cancelled: bool },
    /// A new or resumed session, or cancelled by an extension.
    Switched { cancelled: bool },
    /// What `/reload` loaded.
    Reloaded { extensions: usize, skills: usize, prompts: usize },
    /// The session's entries (file order) for the tree navigator, and the leaf.
    Tree { nodes: Vec<super::state::TreeNode>, leaf: Option<String> },
    /// The model now in use.
    Model(Value),
    /// The next model, with its thinking level.
    CycledModel { model: Value, thinking_level: String, is_scoped: bool },
    /// A shell command's output.
    Bash { output: String, exit_code: Option<i64>, cancelled: bool, truncated: bool },
    /// Where `/tree ID` left the leaf.
    Navigated {
        moved: bool,
        cancelled_by: Option<String>,
        abandoned_entries: usize,
        summarized: bool,
        /// The user message navigated to, for the editor (the leaf went to its parent).
        #[serde(skip_serializing_if = "Option::is_none")]
        editor_text: Option<String>,
    },
    /// The next thinking level.
    ThinkingLevel { level: &'static str },
    /// Where the session's HTML page was written.
    Exported { path: String },
}

impl JobOutput {
    /// True when a session job did what it was asked: a new or other session, a fork, a move in
    /// the tree (not cancelled by an extension).
    pub fn session_changed(&self) -> bool {
        matches!(
            self,
            JobOutput::Switched { cancelled: false }
                | JobOutput::Forked { cancelled: false, .. }
                | JobOutput::Navigated { moved: true, .. }
        )
    }
}

/// Why a job failed, in one line (no secret of pi's: names, paths the user gave, the agent's
/// own errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl From<String> for JobError {
    fn from(why: String) -> Self {
        JobError(why)
    }
}

impl From<&str> for JobError {
    fn from(why: &str) -> Self {
        JobError(why.to_owned())
    }
}

/// What a job comes to.
pub type JobResult = Result<JobOutput, JobError>;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn outputs_serialize_as_upstreams_response_data() {
        let data = |o: JobOutput| serde_json::to_value(o).unwrap();
        assert_eq!(data(JobOutput::Nothing), Value::Null);
        assert_eq!(data(JobOutput::Switched { cancelled: true }), json!({"cancelled": true}));
        let cycled =
            JobOutput::CycledModel { model: json!({"id": "m"}), thinking_level: "off".into(), is_scoped: false };
        assert_eq!(data(cycled), json!({"model": {"id": "m"}, "thinkingLevel": "off", "isScoped": false}));
        let compacted =
            JobOutput::Compacted { summary: None, first_kept_entry_id: None, tokens_before: 0, details: json!({}) };
        assert_eq!(data(compacted), json!({"summary": null, "tokensBefore": 0, "details": {}}));
    }
}
