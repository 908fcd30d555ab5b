//! Compaction: threshold, overflow and manual, with the summary request and the extensions'
//! say (`pi.agent.compaction`).

use pi_observe_core::{ContentKind, Payload, Span, names, trace_operation_with};
use tokio_util::sync::CancellationToken;

use crate::compaction::{self, CompactionReason};
use crate::events::AgentEvent;
use crate::extensions::HookContext;
use crate::message::{Message, Usage};
use crate::provider::{self, ProviderRequest, RequestControl};
use crate::session::EntryKind;

use super::{Agent, AgentError, AgentSink, report_failures};

impl Agent {
    /// Compacts the conversation now (what `/compact [instructions]` does). Returns whether it
    /// compacted (not: cancelled by an extension, nothing old enough to summarize, or the
    /// summary request failed — each reported as `session_compact_failed`).
    pub async fn compact(
        &mut self,
        instructions: Option<&str>,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<bool, AgentError> {
        let ctx = self.hook_context(cancel);
        let compacted =
            self.run_compaction(CompactionReason::Manual, false, instructions, cancel, &ctx, on_event).await?;
        Ok(compacted.is_some())
    }

    /// One compaction as a `pi.agent.compaction` operation; `Some(summary usage)` when it
    /// compacted.
    pub(super) async fn run_compaction(
        &mut self,
        reason: CompactionReason,
        will_retry: bool,
        instructions: Option<&str>,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Option<Usage>, AgentError> {
        let payload =
            || Payload::new().safe(names::COMPACTION_REASON, reason.as_str()).safe(names::WILL_RETRY, will_retry);
        on_event(AgentEvent::CompactionStart { reason: reason.as_str().into() });
        trace_operation_with(names::AGENT_COMPACTION, payload, |span: Span| async move {
            let tokens_before = compaction::context_tokens(&self.messages, self.trust_usage_from);
            let (previous, start, cut) = self.compaction_range();
            if cut <= start {
                return self
                    .compaction_failed(&span, reason, "nothing old enough to summarize".into(), ctx, on_event)
                    .await;
            }
            let to_summarize = self.messages[start..cut].to_vec();
            let kept = self.messages[cut..].to_vec();
            let before = crate::extensions::BeforeCompactEvent {
                reason: reason.as_str().into(),
                tokens_before,
                messages_to_summarize: to_summarize.clone(),
                kept_messages: kept.len(),
                will_retry,
                previous_summary: previous.clone(),
                custom_instructions: instructions.map(str::to_owned),
            };
            let supplied = match self.before_compact(before, ctx, &mut *on_event).await {
                Ok(supplied) => supplied,
                Err(extension) => {
                    return self
                        .compaction_failed(&span, reason, format!("cancelled by extension {extension}"), ctx, on_event)
                        .await;
                }
            };
            let (summary, usage, from_extension) = match supplied {
                Some(summary) => (summary, None, true),
                None => {
                    let conversation = compaction::serialize_conversation(&to_summarize);
                    let outcome = self
                        .summarize(
                            provider::CallKind::Compaction,
                            &conversation,
                            previous.as_deref(),
                            instructions,
                            cancel,
                        )
                        .await;
                    if let Some(error) = outcome.error {
                        return self
                            .compaction_failed(&span, reason, format!("summary request failed: {error}"), ctx, on_event)
                            .await;
                    }
                    (outcome.message.text(), Some(outcome.message.usage), false)
                }
            };
            let tokens_after =
                self.replace_with_summary(&summary, usage, tokens_before, kept, from_extension.then_some(true))?;
            span.record(|| {
                let mut p = Payload::new()
                    .safe(names::TOKENS_BEFORE, tokens_before)
                    .safe(names::TOKENS_AFTER, tokens_after)
                    .safe("summarizedMessages", to_summarize.len())
                    .safe("fromExtension", from_extension)
                    .content(ContentKind::Completion, "summary", summary.clone());
                p.merge(usage.as_ref().map(provider::usage_payload).unwrap_or_default());
                p
            });
            let event = AgentEvent::SessionCompact {
                reason: reason.as_str().into(),
                summary,
                will_retry,
                tokens_before,
                tokens_after,
                from_extension,
            };
            self.emit(event, ctx, on_event).await;
            Ok(Some(usage.unwrap_or_default()))
        })
        .await
    }

    /// Asks the `session_before_compact` handlers: `Err(extension)` when one cancelled the
    /// compaction, else the summary one of them supplied, if any.
    async fn before_compact(
        &mut self,
        event: crate::extensions::BeforeCompactEvent,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Option<String>, String> {
        let decision = self.hooks.session_before(crate::extensions::hooks::SessionBeforeCompact, event, ctx).await;
        report_failures(&self.hooks, on_event);
        match decision {
            Some((extension, decision)) if decision.cancel => Err(extension),
            decision => Ok(decision.and_then(|(_, decision)| decision.summary)),
        }
    }

    /// Persists the compaction and makes the conversation its summary plus the kept messages;
    /// returns the context size after.
    fn replace_with_summary(
        &mut self,
        summary: &str,
        usage: Option<Usage>,
        tokens_before: u64,
        kept: Vec<Message>,
        from_hook: Option<bool>,
    ) -> Result<u64, AgentError> {
        self.append(EntryKind::Compaction {
            summary: summary.to_owned(),
            first_kept_entry_id: None,
            tokens_before,
            usage,
            retained_tail: Some(kept.clone()),
            details: None,
            from_hook,
        })?;
        self.messages = vec![compaction::summary_message(summary)];
        self.messages.extend(kept);
        self.trust_usage_from = self.messages.len();
        Ok(compaction::context_tokens(&self.messages, self.trust_usage_from))
    }

    /// The previous summary (if the conversation starts with one), where the messages to
    /// summarize start, and where the kept recent messages start.
    fn compaction_range(&self) -> (Option<String>, usize, usize) {
        let (previous, start) = match self.messages.first().and_then(compaction::summary_of) {
            Some(previous) => (Some(previous), 1),
            None => (None, 0),
        };
        let cut = compaction::find_cut(&self.messages, self.config.compaction.keep_recent_tokens).max(start);
        let cut = if cut == start {
            // Everything counts as recent, yet compaction was asked for (or the context is
            // too big): keep only from the last message boundary.
            compaction::find_cut(&self.messages, 1).max(start)
        } else {
            cut
        };
        (previous, start, cut)
    }

    /// One summarization request (compaction and branch summaries): the conversation as text,
    /// the previous summary if any, optional focus instructions; no tools.
    pub(super) async fn summarize(
        &self,
        call_kind: provider::CallKind,
        conversation: &str,
        previous: Option<&str>,
        instructions: Option<&str>,
        cancel: &CancellationToken,
    ) -> provider::RequestOutcome {
        let request = ProviderRequest {
            model: self.model.clone(),
            system_prompt: Some(compaction::SUMMARY_SYSTEM_PROMPT.into()),
            messages: vec![Message::user(compaction::summary_instructions(conversation, previous, instructions))],
            tools: Vec::new(),
            reasoning: None,
            session_id: None,
            control: RequestControl::default(),
            call_kind,
        };
        provider::request(self.provider.as_ref(), &request, &self.config.retry, cancel, &mut |_| {}).await
    }

    /// Marks the compaction span failed and emits `session_compact_failed`.
    pub(super) async fn compaction_failed(
        &self,
        span: &Span,
        reason: CompactionReason,
        error: String,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Option<Usage>, AgentError> {
        span.set_error(names::ERROR_COMPACTION_FAILED, error.clone());
        self.emit(AgentEvent::SessionCompactFailed { reason: reason.as_str().into(), error }, ctx, on_event).await;
        Ok(None)
    }
}
