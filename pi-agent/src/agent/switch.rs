//! Replacing the agent's session: a new one, another existing one (`resume`), or a fork of the
//! current branch — each asked of the extensions first (`session_before_switch`,
//! `session_before_fork`: the first cancel wins), then announced with `session_start` and its
//! reason and the session it replaced (upstream's lifecycle).

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError, AgentSink, lock, report_failures};
use crate::compaction;
use crate::extensions::{BeforeForkEvent, BeforeSwitchEvent, hooks};
use crate::session::SessionWriter;

/// Why the session is being replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchReason {
    /// A fresh session.
    New,
    /// An existing session.
    Resume,
}

impl SwitchReason {
    fn as_str(self) -> &'static str {
        match self {
            SwitchReason::New => "new",
            SwitchReason::Resume => "resume",
        }
    }
}

impl Agent {
    /// Replaces the session with `next` (a new or resumed one; `None` = no session). Returns
    /// `Ok(false)` when an extension cancelled (the agent keeps its session).
    pub async fn switch_session(
        &mut self,
        reason: SwitchReason,
        next: Option<SessionWriter>,
        on_event: AgentSink<'_>,
    ) -> Result<bool, AgentError> {
        let ctx = self.hook_context(&CancellationToken::new());
        let event = BeforeSwitchEvent {
            reason: reason.as_str().into(),
            target_session_file: next.as_ref().map(|s| s.path().display().to_string()),
        };
        let decision = self.hooks.session_before(hooks::SessionBeforeSwitch, event, &ctx).await;
        report_failures(&self.hooks, on_event);
        if decision.is_some_and(|(_, d)| d.cancel) {
            return Ok(false);
        }
        self.replace_session(next, reason.as_str(), on_event).await;
        Ok(true)
    }

    /// Forks the current session at `entry_id` into a new file at `path` (the branch up to that
    /// entry, `parentSession` = the current file) and continues there. `Ok(false)` when an
    /// extension cancelled.
    pub async fn fork(&mut self, entry_id: &str, path: &Path, on_event: AgentSink<'_>) -> Result<bool, AgentError> {
        let Some(current) = self.session.clone() else { return Err(AgentError::NoSession) };
        let ctx = self.hook_context(&CancellationToken::new());
        let event = BeforeForkEvent { entry_id: entry_id.to_owned() };
        let decision = self.hooks.session_before(hooks::SessionBeforeFork, event, &ctx).await;
        report_failures(&self.hooks, on_event);
        if decision.is_some_and(|(_, d)| d.cancel) {
            return Ok(false);
        }
        let fork = lock(&current).fork(entry_id, path, &self.cwd)?;
        self.replace_session(Some(fork), "fork", on_event).await;
        Ok(true)
    }

    async fn replace_session(&mut self, next: Option<SessionWriter>, reason: &'static str, on_event: AgentSink<'_>) {
        let previous = self.session_file();
        (self.messages, self.trust_usage_from) = match &next {
            Some(s) => compaction::context_from(s.branch(s.leaf())),
            None => (Vec::new(), 0),
        };
        self.session = next.map(|s| std::sync::Arc::new(std::sync::Mutex::new(s)));
        self.model_recorded = false;
        self.session_started = false;
        self.start_session_because(reason, previous, on_event).await;
    }
}
