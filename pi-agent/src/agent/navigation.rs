//! Branch navigation: moving the session leaf, with an optional summary of the abandoned branch
//! (`pi.agent.branch_navigation`).

use std::sync::Mutex;

use pi_observe_core::{ContentKind, Payload, Span, names, trace_operation_with};
use tokio_util::sync::CancellationToken;

use crate::compaction;
use crate::events::AgentEvent;
use crate::message::Usage;
use crate::provider;
use crate::provider::ProviderError;
use crate::session::{Entry, EntryKind, SessionError, SessionWriter};

use super::{Agent, AgentError, AgentSink, Navigation, lock, report_failures};

impl Agent {
    /// Moves the session leaf to `target_id` (an earlier entry), optionally writing a summary of
    /// the abandoned branch as a `branch_summary` entry; the conversation continues from there.
    /// Runs `session_before_tree` (cancel, or supply the summary) and is traced as
    /// `pi.agent.branch_navigation` (with the summary request as a child).
    pub async fn navigate(
        &mut self,
        target_id: &str,
        summarize: bool,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<Navigation, AgentError> {
        let session = self.session.clone().ok_or(AgentError::NoSession)?;
        let ctx = self.hook_context(cancel);
        // The target is typed by a user or sent by a client: exported only when shaped like an id.
        let payload =
            || Payload::new().safe("summarize", summarize).safe("targetId", pi_observe_core::id_or_invalid(target_id));
        trace_operation_with(names::AGENT_BRANCH_NAVIGATION, payload, |span: Span| async move {
            let (old_leaf, abandoned) = abandoned_by(&session, target_id)?;
            let mut navigation = Navigation {
                moved: false,
                cancelled_by: None,
                abandoned_entries: abandoned.len(),
                summary: None,
                editor_text: None,
            };
            let event = crate::extensions::BeforeTreeEvent {
                old_leaf_id: old_leaf.clone(),
                target_id: target_id.to_owned(),
                summarize,
            };
            let decision = self.hooks.session_before(crate::extensions::hooks::SessionBeforeTree, event, &ctx).await;
            report_failures(&self.hooks, on_event);
            let supplied = match decision {
                Some((extension, decision)) if decision.cancel => {
                    span.record(|| {
                        Payload::new().safe("cancelledBy", pi_observe_core::identifier_or_invalid(&extension))
                    });
                    navigation.cancelled_by = Some(extension);
                    return Ok(navigation);
                }
                Some((_, decision)) => decision.summary,
                None => None,
            };
            let summary = match supplied {
                Some(summary) => Some((summary, None)),
                None if summarize && !abandoned.is_empty() => match self.summarize_branch(&abandoned, cancel).await {
                    Ok(summary) => Some(summary),
                    Err(error) => {
                        span.set_error(names::ERROR_BRANCH_SUMMARY_FAILED, error.to_string());
                        return Ok(navigation);
                    }
                },
                None => None,
            };
            navigation.editor_text = self.move_leaf(&session, target_id, old_leaf.as_deref(), summary.as_ref())?;
            navigation.moved = true;
            span.record(|| {
                let mut p = Payload::new()
                    .safe("abandonedEntries", navigation.abandoned_entries)
                    .safe("summarized", summary.is_some());
                if let Some((text, usage)) = &summary {
                    p = p.content(ContentKind::Completion, "summary", text.clone());
                    if let Some(usage) = usage {
                        p.merge(provider::usage_payload(usage));
                    }
                }
                p
            });
            navigation.summary = summary;
            let event = AgentEvent::SessionTree {
                old_leaf_id: old_leaf,
                new_leaf_id: lock(&session).leaf().map(str::to_owned),
                summarized: navigation.summary.is_some(),
            };
            self.emit(event, &ctx, on_event).await;
            Ok(navigation)
        })
        .await
    }

    /// A summary of the abandoned branch from the provider, with its usage.
    async fn summarize_branch(
        &self,
        abandoned: &[Entry],
        cancel: &CancellationToken,
    ) -> Result<(String, Option<Usage>), ProviderError> {
        let (messages, _) = compaction::context_from(abandoned.iter());
        let focus = "Summarize the work done on this branch; the conversation goes back to an earlier point.";
        let conversation = compaction::serialize_conversation(&messages);
        let outcome = self.summarize(provider::CallKind::BranchSummary, &conversation, None, Some(focus), cancel).await;
        match outcome.error {
            Some(error) => Err(error),
            None => Ok((outcome.message.text(), Some(outcome.message.usage))),
        }
    }

    /// Moves the leaf to `target_id`, appends the branch summary under it, and rebuilds the
    /// conversation from the new branch.
    fn move_leaf(
        &mut self,
        session: &Mutex<SessionWriter>,
        target_id: &str,
        old_leaf: Option<&str>,
        summary: Option<&(String, Option<Usage>)>,
    ) -> Result<Option<String>, AgentError> {
        // As upstream: a user message (or an extension's) is not kept — the leaf goes to its
        // parent and its text goes back to the editor, to be edited and sent again.
        let retyped = {
            let writer = lock(session);
            let target = writer.entries().iter().find(|e| e.id == target_id);
            match target.map(|e| (&e.kind, e.parent_id.clone())) {
                Some((EntryKind::Message { message: crate::message::Message::User(user) }, parent)) => {
                    Some((parent, user.content.text()))
                }
                Some((EntryKind::CustomMessage { content, .. }, parent)) => Some((parent, content.text())),
                _ => None,
            }
        };
        let new_leaf = match &retyped {
            Some((parent, _)) => parent.clone(),
            None => Some(target_id.to_owned()),
        };
        lock(session).set_leaf(new_leaf.as_deref())?;
        if let Some((text, usage)) = summary {
            let kind = EntryKind::BranchSummary {
                from_id: old_leaf.unwrap_or_default().to_owned(),
                summary: text.clone(),
                usage: *usage,
                details: None,
                from_hook: usage.is_none().then_some(true),
            };
            lock(session).append(kind)?;
        }
        let writer = lock(session);
        (self.messages, self.trust_usage_from) = compaction::context_from(writer.branch(writer.leaf()));
        Ok(retyped.map(|(_, text)| text))
    }
}

/// The current leaf, and the entries on its branch that are not on `target_id`'s.
fn abandoned_by(session: &Mutex<SessionWriter>, target_id: &str) -> Result<(Option<String>, Vec<Entry>), AgentError> {
    let writer = lock(session);
    if !writer.entries().iter().any(|e| e.id == target_id) {
        return Err(
            SessionError::UnknownEntry { path: writer.path().display().to_string(), id: target_id.to_owned() }.into()
        );
    }
    let keep: std::collections::HashSet<&str> = writer.branch(Some(target_id)).iter().map(|e| e.id.as_str()).collect();
    let abandoned =
        writer.branch(writer.leaf()).into_iter().filter(|e| !keep.contains(e.id.as_str())).cloned().collect();
    Ok((writer.leaf().map(str::to_owned), abandoned))
}
