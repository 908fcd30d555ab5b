//! One prompt: input hooks, expansion, `before_agent_start`, then turns until the model stops
//! (`pi.agent.prompt`).

use std::sync::Arc;

use pi_observe_core::{ContentKind, Outcome, Payload, Span, names, trace_operation, trace_operation_with};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::compaction::CompactionReason;
use crate::events::AgentEvent;
use crate::extensions::{
    BeforeAgentStartEvent, HookContext, InjectedMessage, InputEvent, InputOutcome, SkillInfo, SystemPromptOptions,
};
use crate::message::{ContentBlock, Message, StopReason, Usage, UserContent, UserMessage};
use crate::provider;
use crate::session::{ATTRIBUTION_CUSTOM_TYPE, EntryKind, TRACE_CUSTOM_TYPE};

use super::{Agent, AgentError, AgentSink, PromptResult, QueueKind, report_failures};

impl Agent {
    /// Runs one prompt to completion (or abort), as a `pi.agent.prompt` operation.
    pub async fn prompt(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        self.prompt_with_images(text, Vec::new(), cancel, on_event).await
    }

    /// [`Agent::prompt`] with images attached to the user message (`ContentBlock::Image`
    /// blocks, after the text). A model that takes no images is refused before anything runs
    /// ([`AgentError::ImagesNotSupported`]).
    pub async fn prompt_with_images(
        &mut self,
        text: &str,
        images: Vec<ContentBlock>,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        if !images.is_empty() && !self.model.input.iter().any(|i| i == "image") {
            let model = format!("{}/{}", self.model.provider, self.model.id);
            return Err(AgentError::ImagesNotSupported { model });
        }
        // What extensions asked since the last write (e.g. `setActiveTools` in `session_start`)
        // holds for this prompt from its first hook on.
        self.append_extension_entries()?;
        let source = self.config.source;
        let image_count = images.len();
        let payload = self.prompt_payload(move |p| {
            p.safe(names::PROMPT_LENGTH, text.chars().count())
                .safe(names::IMAGE_COUNT, image_count)
                .safe(names::SOURCE, source.as_str())
                .content(ContentKind::Prompt, names::PROMPT_TEXT, text.to_owned())
        });
        let text = text.to_owned();
        trace_operation_with(names::AGENT_PROMPT, payload, move |span: Span| async move {
            self.queue.attach(Some(span.clone()));
            let result = self.run_prompt(text, images, cancel, on_event).await;
            self.queue.attach(None);
            if let Ok(PromptResult { handled_by: Some(extension), .. }) = &result {
                let exported = pi_observe_core::identifier_or_invalid(extension);
                span.record(|| Payload::new().safe("handled", true).safe(names::EXTENSION_NAME, exported));
            }
            record_outcome(&span, &result);
            result
        })
        .await
    }

    /// Upstream's `sendMessage(…, { triggerTurn: true })` on an idle agent: what extensions
    /// asked since the last write (their messages) is written, then the model is asked again —
    /// turns without a new user message — as a `pi.agent.prompt` operation (`resumed`).
    pub async fn resume(
        &mut self,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        self.append_extension_entries()?;
        let source = self.config.source;
        let payload = self.prompt_payload(move |p| p.safe("resumed", true).safe(names::SOURCE, source.as_str()));
        trace_operation_with(names::AGENT_PROMPT, payload, move |span: Span| async move {
            self.queue.attach(Some(span.clone()));
            let result = self.run_resumed(cancel, on_event).await;
            self.queue.attach(None);
            record_outcome(&span, &result);
            result
        })
        .await
    }

    async fn run_resumed(
        &mut self,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        self.start_session(&mut *on_event).await;
        let mut result = PromptResult {
            stop_reason: StopReason::Stop,
            last_message: None,
            usage: Usage::default(),
            turns: 0,
            error: None,
            handled_by: None,
        };
        let system_prompt = self.base_system_prompt();
        let ctx = HookContext { system_prompt: system_prompt.as_deref().map(Arc::from), ..self.hook_context(cancel) };
        self.emit(AgentEvent::AgentStart, &ctx, on_event).await;
        self.run_turns(&mut result, system_prompt, cancel, &ctx, on_event).await?;
        if cancel.is_cancelled() {
            result.stop_reason = StopReason::Aborted;
        }
        self.emit(AgentEvent::AgentEnd { stop_reason: result.stop_reason, usage: result.usage }, &ctx, on_event).await;
        self.emit(AgentEvent::AgentSettled, &ctx, on_event).await;
        Ok(result)
    }

    /// What a `pi.agent.prompt` span carries: the model's names, `fields`, then the session id
    /// (built only when a sink asks for the payload).
    fn prompt_payload<'a, F>(&self, fields: F) -> impl FnOnce() -> Payload + Send + 'a
    where
        F: FnOnce(Payload) -> Payload + Send + 'a,
    {
        let session_id = self.exported_session_id();
        let model = &self.model;
        let (provider_name, model_id, catalogued) = (model.provider.clone(), model.id.clone(), model.catalogued);
        move || {
            let p = fields(provider::model_names(None, &provider_name, &model_id, catalogued));
            match session_id {
                Some(id) => p.safe(names::SESSION_ID, id),
                None => p,
            }
        }
    }

    /// The system prompt before `before_agent_start`, in upstream's order: the configured
    /// prompt, the project's context files, the skills, then today's date and the working
    /// directory. `None` when there is no configured prompt and nothing to add.
    fn base_system_prompt(&self) -> Option<String> {
        let added = format!("{}{}", self.resources.context_section(), self.resources.system_prompt_section());
        let prompt = match &self.config.system_prompt {
            Some(prompt) => format!("{prompt}{added}"),
            None if !added.is_empty() => added.trim_start().to_owned(),
            None => return None,
        };
        let date = crate::time::date(crate::time::now_millis());
        Some(format!("{prompt}\nCurrent date: {date}\nCurrent working directory: {}", self.cwd.display()))
    }

    pub(super) async fn run_prompt(
        &mut self,
        text: String,
        images: Vec<ContentBlock>,
        cancel: &CancellationToken,
        on_event: AgentSink<'_>,
    ) -> Result<PromptResult, AgentError> {
        self.start_session(&mut *on_event).await;
        let ctx = self.hook_context(cancel);
        let mut result = PromptResult {
            stop_reason: StopReason::Stop,
            last_message: None,
            usage: Usage::default(),
            turns: 0,
            error: None,
            handled_by: None,
        };
        let input = InputEvent { text, images: images.len(), source: self.config.source };
        let text = match self.hooks.input(input, &ctx).await {
            InputOutcome::Continue(text) => text,
            InputOutcome::Handled { extension } => {
                report_failures(&self.hooks, on_event);
                result.handled_by = Some(extension);
                return Ok(result);
            }
        };
        report_failures(&self.hooks, on_event);
        if let Some(instructions) = manual_compaction(&text) {
            let compacted =
                self.run_compaction(CompactionReason::Manual, false, instructions, cancel, &ctx, on_event).await?;
            if let Some(usage) = compacted {
                result.usage.add(&usage);
            }
            return Ok(result);
        }
        let (text, injected, system_prompt) = self.before_start(text, &ctx, on_event).await;
        let ctx = HookContext { system_prompt: system_prompt.as_deref().map(Arc::from), ..ctx };
        self.emit(AgentEvent::AgentStart, &ctx, on_event).await;
        self.record_start((text, images), &injected, &ctx, on_event).await?;
        self.run_turns(&mut result, system_prompt, cancel, &ctx, on_event).await?;
        if cancel.is_cancelled() {
            result.stop_reason = StopReason::Aborted;
        }
        self.emit(AgentEvent::AgentEnd { stop_reason: result.stop_reason, usage: result.usage }, &ctx, on_event).await;
        self.emit(AgentEvent::AgentSettled, &ctx, on_event).await;
        Ok(result)
    }

    /// Expands `/skill:name` and `/template` input, builds the system prompt (with the skills
    /// section) and runs `before_agent_start`: the text, the injected messages, the system prompt.
    async fn before_start(
        &mut self,
        text: String,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> (String, Vec<InjectedMessage>, Option<String>) {
        let text = match self.resources.expand(&text) {
            Some(expansion) => expansion.text().to_owned(),
            None => text,
        };
        let system_prompt = self.base_system_prompt();
        let system_prompt_options = SystemPromptOptions {
            cwd: self.cwd.display().to_string(),
            selected_tools: self.tools.specs().into_iter().map(|t| t.name).collect(),
            custom_prompt: self.config.system_prompt.clone(),
            skills: self
                .resources
                .skills
                .iter()
                .map(|s| SkillInfo {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    file_path: s.path.display().to_string(),
                })
                .collect(),
        };
        let start = BeforeAgentStartEvent { prompt: text.clone(), system_prompt, system_prompt_options };
        let (injected, system_prompt) = self.hooks.before_agent_start(start, ctx).await;
        report_failures(&self.hooks, on_event);
        (text, injected, system_prompt)
    }

    /// Persists what starts the prompt: the model (once), the attribution, the user message and
    /// the messages extensions injected.
    async fn record_start(
        &mut self,
        (text, images): (String, Vec<ContentBlock>),
        injected: &[InjectedMessage],
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<(), AgentError> {
        self.append_extension_entries()?;
        if !self.model_recorded {
            self.append(EntryKind::ModelChange {
                provider: self.model.provider.clone(),
                model_id: self.model.id.clone(),
            })?;
            self.model_recorded = true;
        }
        let attribution = pi_observe_core::current().attribution().clone();
        // An empty attribution is recorded too when the branch's last one named someone, so
        // this prompt's usage is not attributed to them (`pi report` reads it from the tree).
        if !attribution.is_empty() || self.branch_attributed() {
            let data: serde_json::Map<String, Value> =
                attribution.iter().map(|(k, v)| (k.to_owned(), Value::String(v.to_owned()))).collect();
            self.append(EntryKind::Custom { custom_type: ATTRIBUTION_CUSTOM_TYPE.into(), data: Value::Object(data) })?;
        }
        if let Some(trace) = pi_observe_core::current().trace_id() {
            let data = serde_json::json!({ "traceId": trace.to_string() });
            self.append(EntryKind::Custom { custom_type: TRACE_CUSTOM_TYPE.into(), data })?;
        }
        self.emit(AgentEvent::MessageStart { role: "user".into() }, ctx, on_event).await;
        let user = if images.is_empty() {
            Message::user(text)
        } else {
            let mut blocks = vec![ContentBlock::text(text)];
            blocks.extend(images);
            Message::User(UserMessage { content: UserContent::Blocks(blocks), timestamp: crate::time::now_millis() })
        };
        let user = self.finalize(user, ctx, on_event).await;
        self.append(EntryKind::Message { message: user.clone() })?;
        self.messages.push(user);
        for message in injected {
            self.append(crate::extensions::injected_entry(message))?;
            self.messages.push(crate::extensions::injected_as_user(message));
        }
        Ok(())
    }

    /// Turns until the model stops, compacting before a turn over the threshold and once after
    /// a context overflow (then the turn is retried).
    async fn run_turns(
        &mut self,
        result: &mut PromptResult,
        system_prompt: Option<String>,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<(), AgentError> {
        let mut overflow_retried = false;
        // Messages typed while the agent was starting go in before the first request.
        let mut queued = self.queue.take(QueueKind::Steer);
        for turn_index in 0..self.config.max_turns {
            // What extensions read of the context (its size, queued messages) as this turn starts.
            let turn_ctx = HookContext {
                context_tokens: self.context_tokens(),
                pending_messages: self.has_pending_messages(),
                ..ctx.clone()
            };
            let ctx = &turn_ctx;
            if !queued.is_empty() {
                self.deliver_queued(std::mem::take(&mut queued), ctx, on_event).await?;
            }
            if self.over_threshold() {
                let compacted =
                    self.run_compaction(CompactionReason::Threshold, false, None, cancel, ctx, on_event).await?;
                if let Some(usage) = compacted {
                    result.usage.add(&usage);
                }
            }
            result.turns = turn_index + 1;
            let retry_on_overflow = self.config.compaction.enabled && !overflow_retried;
            let turn = trace_operation(
                names::AGENT_TURN,
                Payload::new().safe(names::TURN_INDEX, turn_index),
                self.run_turn(turn_index, system_prompt.clone(), retry_on_overflow, cancel, ctx, &mut *on_event),
            )
            .await?;
            if turn.overflowed {
                // The provider said the context is too long: compact, then retry the turn once.
                overflow_retried = true;
                let compacted =
                    self.run_compaction(CompactionReason::Overflow, true, None, cancel, ctx, on_event).await?;
                if let Some(usage) = compacted {
                    result.usage.add(&usage);
                    continue;
                }
                // Compaction failed: the error stands, and is persisted like any other.
                self.append(EntryKind::Message { message: Message::Assistant(turn.message.clone()) })?;
                self.messages.push(Message::Assistant(turn.message.clone()));
            }
            result.usage.add(&turn.usage);
            result.stop_reason = turn.message.stop_reason;
            result.error = turn.error;
            result.last_message = Some(turn.message);
            if cancel.is_cancelled() || matches!(result.stop_reason, StopReason::Error | StopReason::Aborted) {
                break;
            }
            // Steering after every turn; follow-ups only where the agent would stop.
            queued = self.queue.take(QueueKind::Steer);
            if !turn.continue_loop && queued.is_empty() {
                queued = self.queue.take(QueueKind::FollowUp);
                if queued.is_empty() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Puts queued messages into the conversation as user messages (persisted, and reported
    /// with `message_start`/`message_end` and a `queue_update`), expanding skills and templates.
    async fn deliver_queued(
        &mut self,
        texts: Vec<String>,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<(), AgentError> {
        for text in texts {
            let text = match self.resources.expand(&text) {
                Some(expansion) => expansion.text().to_owned(),
                None => text,
            };
            self.emit(AgentEvent::MessageStart { role: "user".into() }, ctx, on_event).await;
            let user = self.finalize(Message::user(text), ctx, on_event).await;
            self.append(EntryKind::Message { message: user.clone() })?;
            self.messages.push(user);
        }
        let pending = self.queue.pending();
        self.emit(AgentEvent::QueueUpdate { steering: pending.steering, follow_up: pending.follow_up }, ctx, on_event)
            .await;
        Ok(())
    }
}

/// `/compact [instructions]`: `Some(instructions)` (possibly empty → `None` inside).
fn manual_compaction(text: &str) -> Option<Option<&str>> {
    let rest = text.trim().strip_prefix("/compact")?;
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        return None;
    }
    Some(Some(rest.trim()).filter(|r| !r.is_empty()))
}

/// A prompt's outcome on its span: usage, stop reason, turns, and the error status.
fn record_outcome(span: &Span, result: &Result<PromptResult, AgentError>) {
    if let Ok(result) = result {
        span.record(|| {
            provider::usage_payload(&result.usage)
                .safe(names::STOP_REASON, result.stop_reason.as_str())
                .safe(names::ABORTED, result.stop_reason == StopReason::Aborted)
                .safe("turns", result.turns)
        });
        if let Some(error) = result.error_info() {
            span.set_status(pi_observe_core::Status::Error(error));
        }
    }
}
