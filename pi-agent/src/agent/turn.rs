//! One turn: context, the provider request with the extensions' decisions, the assistant
//! message, then its tool calls (`pi.agent.turn`).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::compaction;
use crate::events::{AgentEvent, Delta};
use crate::extensions::{HookContext, ProviderHeadersEvent, ProviderResponseEvent};
use crate::message::{AssistantMessage, Message, StopReason, Usage};
use crate::provider::{self, ProviderError, ProviderRequest, RequestControl, StreamEvent};
use crate::session::EntryKind;

use super::{Agent, AgentError, AgentSink, report_failures};

impl Agent {
    pub(super) async fn run_turn(
        &mut self,
        turn_index: usize,
        system_prompt: Option<String>,
        retry_on_overflow: bool,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<TurnResult, AgentError> {
        self.emit(AgentEvent::TurnStart { turn_index }, ctx, on_event).await;
        let messages = self.hooks.context(self.messages.clone(), ctx).await;
        report_failures(&self.hooks, on_event);
        let mut request = ProviderRequest {
            model: self.model.clone(),
            system_prompt,
            messages,
            tools: self.tools.specs(),
            reasoning: self.config.reasoning.clone(),
            session_id: self.exported_session_id(),
            control: RequestControl::default(),
            call_kind: provider::CallKind::Turn,
        };
        request.control = self.request_control(&request, ctx, on_event).await;
        self.emit(AgentEvent::MessageStart { role: "assistant".into() }, ctx, on_event).await;
        let outcome = self.stream(&request, cancel, ctx, on_event).await;
        report_failures(&self.hooks, on_event);
        let message = match self.finalize(Message::Assistant(outcome.message.clone()), ctx, on_event).await {
            Message::Assistant(message) => message,
            // `message_end` keeps roles.
            _ => outcome.message,
        };
        if retry_on_overflow && outcome.error.as_ref().is_some_and(compaction::is_context_overflow) {
            // Not persisted: the caller compacts and retries this turn (or persists it if it cannot).
            self.emit(AgentEvent::TurnEnd { turn_index }, ctx, on_event).await;
            let usage = message.usage;
            return Ok(TurnResult { message, usage, continue_loop: false, error: outcome.error, overflowed: true });
        }
        self.append(EntryKind::Message { message: Message::Assistant(message.clone()) })?;
        self.messages.push(Message::Assistant(message.clone()));
        let mut usage = message.usage;

        let calls = message.tool_calls();
        let mut continue_loop = message.stop_reason == StopReason::ToolUse && !calls.is_empty();
        if continue_loop {
            let results = self.run_tools(calls, cancel, ctx, &mut *on_event).await?;
            // Every tool of the turn asked to end on its result: no further model call.
            continue_loop = !results.iter().all(|(_, terminate)| *terminate);
            for (result, _) in results {
                if let Some(u) = &result.usage {
                    usage.add(u);
                }
                self.messages.push(Message::ToolResult(result));
            }
        }
        self.append_extension_entries()?;
        self.emit(AgentEvent::TurnEnd { turn_index }, ctx, on_event).await;
        let aborted = cancel.is_cancelled();
        Ok(TurnResult {
            message,
            usage,
            continue_loop: continue_loop && !aborted,
            error: outcome.error,
            overflowed: false,
        })
    }

    /// The provider request: stream deltas go to the sink as they arrive and, in order, to
    /// `message_update` handlers on this task while the request runs.
    async fn stream(
        &self,
        request: &ProviderRequest,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> provider::RequestOutcome {
        let (updates_tx, mut updates_rx) = mpsc::unbounded_channel::<AgentEvent>();
        let wants_updates = self.hooks.has(crate::extensions::hooks::Notify::MessageUpdate);
        let sink: AgentSink<'_> = &mut *on_event;
        // Owns the sender: dropping it when the request is done ends the delivery loop.
        let mut forward = move |event: StreamEvent| {
            let delta = match event {
                StreamEvent::TextDelta(text) => Delta::Text { text },
                StreamEvent::ThinkingDelta(text) => Delta::Thinking { text },
                StreamEvent::ToolCallStart { id, name, .. } => {
                    Delta::ToolCallStart { tool_call_id: id, tool_name: name }
                }
                StreamEvent::ToolCallDelta { index, delta } => Delta::ToolCallArgs { index, text: delta },
                StreamEvent::Start | StreamEvent::ToolCallEnd { .. } | StreamEvent::Done { .. } => return,
                StreamEvent::Retry { attempt, max_attempts, delay, error } => {
                    let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                    return sink(AgentEvent::AutoRetryStart { attempt, max_attempts, delay_ms, error_message: error });
                }
                StreamEvent::RetryEnd { success, attempts, error } => {
                    return sink(AgentEvent::AutoRetryEnd { success, attempt: attempts, final_error: error });
                }
            };
            let update = AgentEvent::MessageUpdate { delta };
            if wants_updates {
                let _ = updates_tx.send(update.clone());
            }
            sink(update);
        };
        let hooks = self.hooks.clone();
        let deliver_updates = async {
            while let Some(update) = updates_rx.recv().await {
                hooks.notify(&update, ctx).await;
            }
        };
        let requested = async {
            let outcome =
                provider::request(self.provider.as_ref(), request, &self.config.retry, cancel, &mut forward).await;
            drop(forward);
            outcome
        };
        let (outcome, ()) = tokio::join!(requested, deliver_updates);
        outcome
    }

    pub(super) fn over_threshold(&self) -> bool {
        let settings = &self.config.compaction;
        settings.enabled
            && compaction::context_tokens(&self.messages, self.trust_usage_from)
                > self.model.context_window.saturating_sub(settings.reserve_tokens)
    }

    /// Runs `before_provider_headers` and `before_provider_request` once for this request (its
    /// retries reuse the result) and wires `after_provider_response`.
    pub(super) async fn request_control(
        &self,
        request: &ProviderRequest,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> RequestControl {
        use crate::extensions::hooks;
        let mut control = RequestControl::default();
        if self.hooks.has(hooks::BeforeProviderHeaders) {
            let event = ProviderHeadersEvent {
                provider: self.model.provider.clone(),
                model: self.model.id.clone(),
                headers: self.provider.default_headers().into_iter().collect(),
            };
            control.headers = self.hooks.before_provider_headers(event, ctx).await;
        }
        if self.hooks.has(hooks::BeforeProviderRequest) {
            let payload = self.provider.payload(request);
            control.payload = Some(self.hooks.before_provider_request(payload, ctx).await);
        }
        if self.hooks.has(hooks::AfterProviderResponse) {
            let (hooks, ctx) = (self.hooks.clone(), ctx.clone());
            control.on_response = Some(Arc::new(move |status, headers| {
                let (hooks, ctx) = (hooks.clone(), ctx.clone());
                Box::pin(
                    async move { hooks.after_provider_response(ProviderResponseEvent { status, headers }, &ctx).await },
                )
            }));
        }
        report_failures(&self.hooks, on_event);
        control
    }
}

pub(super) struct TurnResult {
    pub(super) message: AssistantMessage,
    pub(super) usage: Usage,
    pub(super) continue_loop: bool,
    pub(super) error: Option<ProviderError>,
    /// The provider rejected the context as too long and the message was not persisted.
    pub(super) overflowed: bool,
}
