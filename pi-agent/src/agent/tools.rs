//! Tool calls: preflight (`tool_call` hooks) in source order, concurrent execution, results
//! appended in source order (`pi.agent.tool_call`).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use pi_observe_core::{ContentKind, Payload, Span, names, trace_operation_with};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::events::AgentEvent;
use crate::extensions::{HookContext, Hooks, ToolCallEvent, ToolResultEvent};
use crate::message::{ContentBlock, Message, ToolResultMessage, Usage};
use crate::session::{EntryKind, SessionWriter};
use crate::time::now_millis;
use crate::tools::{SessionEnv, ToolContext, ToolError, ToolRegistry, exported_tool_name};

use super::{Agent, AgentError, AgentSink, lock, report_failures};

impl Agent {
    /// Executes the calls: first, in source order, `tool_execution_start` and the `tool_call`
    /// chain for each; then the tools run (concurrently unless configured otherwise), each as a
    /// `pi.agent.tool_call` that runs the `tool_result` chain and, in source order, emits
    /// `tool_execution_end`, runs `message_end` and appends its result to the session.
    pub(super) async fn run_tools(
        &self,
        calls: Vec<(String, String, Value)>,
        cancel: &CancellationToken,
        ctx: &HookContext,
        on_event: AgentSink<'_>,
    ) -> Result<Vec<(ToolResultMessage, bool)>, AgentError> {
        let tool_ctx = self.tool_context(cancel);
        let mut prepared = Vec::with_capacity(calls.len());
        for (id, name, args) in calls {
            let start = AgentEvent::ToolExecutionStart {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                args: args.clone(),
            };
            self.emit(start, ctx, on_event).await;
            let event = ToolCallEvent { tool_call_id: id.clone(), tool_name: name.clone(), input: args };
            let decision = self.hooks.tool_call(event, ctx).await;
            report_failures(&self.hooks, on_event);
            prepared.push((id, name, decision));
        }
        let order = Arc::new(AppendOrder::default());
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let mut handles = Vec::new();
        for (position, (id, name, decision)) in prepared.into_iter().enumerate() {
            let job = ToolJob {
                position,
                id,
                name,
                args: decision.input,
                blocked: decision.blocked,
                tools: self.tools.clone(),
                ctx: tool_ctx.clone(),
                hooks: self.hooks.clone(),
                hook_ctx: ctx.clone(),
                session: self.session.clone(),
                order: order.clone(),
                events: events_tx.clone(),
            };
            if self.config.parallel_tools {
                handles.push(pi_observe_core::spawn(job.run()));
            } else {
                let result = job.run().await;
                handles.push(pi_observe_core::spawn(async move { result }));
            }
        }
        drop(events_tx);
        while let Some(event) = events_rx.recv().await {
            on_event(event);
            report_failures(&self.hooks, on_event);
        }
        let mut results = Vec::with_capacity(handles.len());
        for handle in handles {
            results.push(match handle.await {
                Ok(result) => result?,
                // A tool task panicked: report it to the model as an error result.
                Err(join) => (crashed(&join), false),
            });
        }
        Ok(results)
    }

    /// What the tools of this turn run with: working directory, cancellation, session facts.
    pub(super) fn tool_context(&self, cancel: &CancellationToken) -> ToolContext {
        ToolContext {
            cwd: self.cwd.clone(),
            cancel: cancel.clone(),
            env: SessionEnv {
                expose: self.config.expose_session_environment,
                session_id: self.session_id(),
                session_file: self.session_file(),
                provider: self.model.provider.clone(),
                model: self.model.id.clone(),
                reasoning: self.config.reasoning.clone(),
            },
            updates: None,
            call_id: String::new(),
        }
    }
}

/// The error result of a tool task that panicked.
fn crashed(join: &tokio::task::JoinError) -> ToolResultMessage {
    ToolResultMessage {
        tool_call_id: String::new(),
        tool_name: String::new(),
        content: vec![ContentBlock::text(format!("tool crashed: {join}"))],
        details: None,
        usage: None,
        is_error: true,
        timestamp: now_millis(),
    }
}

/// Lets concurrently running tool calls append their results in source order.
#[derive(Default)]
struct AppendOrder {
    next: Mutex<usize>,
    turn: Notify,
}

impl AppendOrder {
    async fn wait_for(&self, position: usize) {
        loop {
            let notified = self.turn.notified();
            if *lock(&self.next) == position {
                return;
            }
            notified.await;
        }
    }

    fn done(&self, position: usize) {
        *lock(&self.next) = position + 1;
        self.turn.notify_waiters();
    }
}

struct ToolJob {
    position: usize,
    id: String,
    name: String,
    args: Value,
    blocked: Option<(String, String)>,
    tools: ToolRegistry,
    ctx: ToolContext,
    hooks: Arc<Hooks>,
    hook_ctx: HookContext,
    session: Option<Arc<Mutex<SessionWriter>>>,
    order: Arc<AppendOrder>,
    events: mpsc::UnboundedSender<AgentEvent>,
}

impl ToolJob {
    /// The result message, and whether the tool asked to end the run on it (`terminate`).
    async fn run(self) -> Result<(ToolResultMessage, bool), AgentError> {
        // The name the model asked for is safe only when it is a registered tool's (an
        // extension's tool name is exported only when identifier-shaped), checked only when
        // a payload is built.
        let registered = self.tools.get(&self.name).map(|tool| (tool.name(), tool.output_kind()));
        let (id, name, args) = (&self.id, &self.name, &self.args);
        let payload = || {
            let exported = registered.map_or(Cow::Borrowed(UNKNOWN_TOOL), |(name, _)| exported_tool_name(name));
            let mut p = Payload::new()
                .safe(names::TOOL_NAME, exported)
                .safe(names::TOOL_CALL_ID, pi_observe_core::identifier_or_invalid(id))
                .content_with(ContentKind::ToolArgs, names::TOOL_ARGS, || args.to_string());
            if registered.is_none() {
                p = p.content(ContentKind::ErrorText, REQUESTED_TOOL_NAME, name.clone());
            }
            p
        };
        let job = &self;
        trace_operation_with(names::AGENT_TOOL_CALL, payload, move |span: Span| async move {
            let (result, usage, terminate) = job.execute().await;
            job.record(&span, &result, registered, usage.as_ref());
            Ok((job.finish(result, usage).await?, terminate))
        })
        .await
    }

    /// Runs the tool (or reports the block, or the unknown tool), forwarding partial output as
    /// `tool_execution_update` while it runs (these may interleave across tools), then runs the
    /// `tool_result` hooks.
    async fn execute(&self) -> (ToolResultEvent, Option<Usage>, bool) {
        let (updates_tx, mut updates_rx) = mpsc::unbounded_channel::<String>();
        let (id, name, args) = (&self.id, &self.name, &self.args);
        let execute = async move {
            let ctx = ToolContext { updates: Some(updates_tx), call_id: id.clone(), ..self.ctx.clone() };
            match &self.blocked {
                Some((_, reason)) => ((reason.clone(), None, true, None), false),
                None => match self.tools.get(name) {
                    Some(tool) => match tool.execute(args, &ctx).await {
                        Ok(out) => ((out.content, out.details, false, out.usage), out.terminate),
                        Err(error) => ((error.to_string(), None, true, None), false),
                    },
                    None => ((ToolError::UnknownTool(name.clone()).to_string(), None, true, None), false),
                },
            }
        };
        let forward_updates = async {
            while let Some(output) = updates_rx.recv().await {
                let update =
                    AgentEvent::ToolExecutionUpdate { tool_call_id: id.clone(), tool_name: name.clone(), output };
                self.hooks.notify(&update, &self.hook_ctx).await;
                let _ = self.events.send(update);
            }
        };
        let (((text, details, is_error, usage), terminate), ()) = tokio::join!(execute, forward_updates);
        let result = ToolResultEvent {
            tool_call_id: id.clone(),
            tool_name: name.clone(),
            input: args.clone(),
            content: vec![ContentBlock::text(text)],
            details,
            is_error,
        };
        (self.hooks.tool_result(result, &self.hook_ctx).await, usage, terminate)
    }

    /// The end attributes: safe facts, the output under its own content kind, and on failure the
    /// error type (the text, from the tool or an extension, is error text).
    fn record(
        &self,
        span: &Span,
        result: &ToolResultEvent,
        registered: Option<(&str, ContentKind)>,
        usage: Option<&Usage>,
    ) {
        let output_kind = registered.map_or(ContentKind::ToolResult, |(_, kind)| kind);
        let text = crate::message::joined_text(&result.content);
        span.record(|| {
            let mut p = Payload::new()
                .safe(names::IS_ERROR, result.is_error)
                .safe(names::RESULT_BYTES, text.len())
                .safe(names::BLOCKED, self.blocked.is_some())
                .content(output_kind, crate::tools::output_key(output_kind), text.clone());
            if let Some((extension, _)) = &self.blocked {
                p = p.safe(names::BLOCKED_BY, pi_observe_core::identifier_or_invalid(extension));
            }
            if let Some(usage) = usage {
                // Model work the tool did itself: billed here, once, as a tool call.
                p.merge(crate::provider::usage_payload(usage).safe(names::CALL_KIND, names::CALL_KIND_TOOL));
            }
            p
        });
        if result.is_error {
            let kind = match (&self.blocked, registered) {
                (Some(_), _) => names::ERROR_BLOCKED,
                (None, None) => names::ERROR_UNKNOWN_TOOL,
                (None, Some(_)) => names::ERROR_TOOL,
            };
            span.set_error(kind, first_line(&text));
        }
    }

    /// In source order: `tool_execution_end`, the result message's events and hooks, persistence.
    async fn finish(&self, result: ToolResultEvent, usage: Option<Usage>) -> Result<ToolResultMessage, AgentError> {
        let message = ToolResultMessage {
            tool_call_id: self.id.clone(),
            tool_name: self.name.clone(),
            content: result.content,
            details: result.details,
            usage,
            is_error: result.is_error,
            timestamp: now_millis(),
        };
        self.order.wait_for(self.position).await;
        let notify = |event: AgentEvent| async move {
            self.hooks.notify(&event, &self.hook_ctx).await;
            let _ = self.events.send(event);
        };
        notify(AgentEvent::ToolExecutionEnd {
            tool_call_id: self.id.clone(),
            tool_name: self.name.clone(),
            is_error: message.is_error,
        })
        .await;
        notify(AgentEvent::MessageStart { role: "toolResult".into() }).await;
        let message = match self.hooks.message_end(Message::ToolResult(message.clone()), &self.hook_ctx).await {
            Message::ToolResult(replaced) => replaced,
            _ => message,
        };
        let _ = self.events.send(AgentEvent::MessageEnd { message: Message::ToolResult(message.clone()) });
        let appended = match &self.session {
            Some(session) => {
                lock(session).append(EntryKind::Message { message: Message::ToolResult(message.clone()) }).map(|_| ())
            }
            None => Ok(()),
        };
        self.order.done(self.position);
        appended?;
        Ok(message)
    }
}

/// The safe tool name of a call to a tool that is not registered (the requested name is content).
const UNKNOWN_TOOL: &str = "unknown";

/// Error-text payload key of the tool name a model asked for that is not registered.
const REQUESTED_TOOL_NAME: &str = "requestedToolName";

/// The first line of a message, for error summaries.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}
