//! The hooks, their events and their results.

use super::*;

macro_rules! hook {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $event:ty, $output:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $ty;
        impl Hook for $ty {
            type Event = $event;
            type Output = $output;
            fn name(self) -> &'static str {
                $name
            }
        }
    };
}

hook!(
    /// `input`: raw user input, before skill/template expansion.
    Input, "input", InputEvent, InputAction
);
hook!(
    /// `before_agent_start`: inject messages, chain the system prompt.
    BeforeAgentStart, "before_agent_start", BeforeAgentStartEvent, BeforeAgentStartResult
);
hook!(
    /// `context`: replace the messages sent for this provider call.
    Context, "context", ContextEvent, Vec<Message>
);
hook!(
    /// `before_provider_headers`: patch the request headers.
    BeforeProviderHeaders, "before_provider_headers", ProviderHeadersEvent, HeaderPatch
);
hook!(
    /// `before_provider_request`: replace the provider payload.
    BeforeProviderRequest, "before_provider_request", ProviderRequestEvent, Value
);
hook!(
    /// `after_provider_response`: status and headers, before the body is read.
    AfterProviderResponse, "after_provider_response", ProviderResponseEvent, ()
);
hook!(
    /// `tool_call`: block a tool or change its input.
    ToolCall, "tool_call", ToolCallEvent, ToolCallResult
);
hook!(
    /// `tool_result`: patch a tool's result.
    ToolResult, "tool_result", ToolResultEvent, ToolResultPatch
);
hook!(
    /// `message_end`: replace a finalized message before it is persisted.
    MessageEnd, "message_end", MessageEndEvent, Message
);
hook!(
    /// `session_before_compact`: cancel a compaction or supply its summary.
    SessionBeforeCompact, "session_before_compact", BeforeCompactEvent, BeforeResult
);
hook!(
    /// `session_before_tree`: cancel a branch navigation or supply its summary.
    SessionBeforeTree, "session_before_tree", BeforeTreeEvent, BeforeResult
);

hook!(
    /// `session_before_switch`: cancel replacing the session (new or resume).
    SessionBeforeSwitch, "session_before_switch", BeforeSwitchEvent, BeforeResult
);
hook!(
    /// `session_before_fork`: cancel a fork.
    SessionBeforeFork, "session_before_fork", BeforeForkEvent, BeforeResult
);
hook!(
    /// `user_bash`: run the user's shell command in pi's place.
    UserBash, "user_bash", UserBashEvent, UserBashResult
);

/// Notifications: handlers observe, their results are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    /// `session_start`: the agent's session is ready (before the first prompt).
    SessionStart,
    /// `agent_start`.
    AgentStart,
    /// `turn_start`.
    TurnStart,
    /// `turn_end`.
    TurnEnd,
    /// `message_start`.
    MessageStart,
    /// `message_update` (assistant stream deltas).
    MessageUpdate,
    /// `tool_execution_start`.
    ToolExecutionStart,
    /// `tool_execution_update`.
    ToolExecutionUpdate,
    /// `tool_execution_end`.
    ToolExecutionEnd,
    /// `agent_end`.
    AgentEnd,
    /// `agent_settled`: the prompt is over and everything it wrote is persisted.
    AgentSettled,
    /// `session_compact`.
    SessionCompact,
    /// `session_compact_failed`.
    SessionCompactFailed,
    /// `session_tree`: the session leaf moved.
    SessionTree,
    /// `session_shutdown`.
    SessionShutdown,
    /// `model_select`.
    ModelSelect,
    /// `thinking_level_select`.
    ThinkingLevelSelect,
}

impl Hook for Notify {
    type Event = AgentEvent;
    type Output = ();
    fn name(self) -> &'static str {
        match self {
            Notify::SessionStart => "session_start",
            Notify::AgentStart => "agent_start",
            Notify::TurnStart => "turn_start",
            Notify::TurnEnd => "turn_end",
            Notify::MessageStart => "message_start",
            Notify::MessageUpdate => "message_update",
            Notify::ToolExecutionStart => "tool_execution_start",
            Notify::ToolExecutionUpdate => "tool_execution_update",
            Notify::ToolExecutionEnd => "tool_execution_end",
            Notify::AgentEnd => "agent_end",
            Notify::AgentSettled => "agent_settled",
            Notify::SessionCompact => "session_compact",
            Notify::SessionCompactFailed => "session_compact_failed",
            Notify::SessionTree => "session_tree",
            Notify::SessionShutdown => "session_shutdown",
            Notify::ModelSelect => "model_select",
            Notify::ThinkingLevelSelect => "thinking_level_select",
        }
    }
}

impl Notify {
    /// The notification an agent event is delivered as (`message_end` is not one: its
    /// handlers run as the [`MessageEnd`] chain before the message is persisted).
    pub fn of(event: &AgentEvent) -> Option<Notify> {
        Some(match event {
            AgentEvent::SessionStart { .. } => Notify::SessionStart,
            AgentEvent::AgentStart => Notify::AgentStart,
            AgentEvent::TurnStart { .. } => Notify::TurnStart,
            AgentEvent::TurnEnd { .. } => Notify::TurnEnd,
            AgentEvent::MessageStart { .. } => Notify::MessageStart,
            AgentEvent::MessageUpdate { .. } => Notify::MessageUpdate,
            AgentEvent::ToolExecutionStart { .. } => Notify::ToolExecutionStart,
            AgentEvent::ToolExecutionUpdate { .. } => Notify::ToolExecutionUpdate,
            AgentEvent::ToolExecutionEnd { .. } => Notify::ToolExecutionEnd,
            AgentEvent::AgentEnd { .. } => Notify::AgentEnd,
            AgentEvent::AgentSettled => Notify::AgentSettled,
            AgentEvent::SessionShutdown => Notify::SessionShutdown,
            AgentEvent::SessionCompact { .. } => Notify::SessionCompact,
            AgentEvent::SessionCompactFailed { .. } => Notify::SessionCompactFailed,
            AgentEvent::SessionTree { .. } => Notify::SessionTree,
            AgentEvent::ModelSelect { .. } => Notify::ModelSelect,
            AgentEvent::ThinkingLevelSelect { .. } => Notify::ThinkingLevelSelect,
            AgentEvent::MessageEnd { .. }
            | AgentEvent::ExtensionError { .. }
            | AgentEvent::QueueUpdate { .. }
            | AgentEvent::CompactionStart { .. }
            | AgentEvent::AutoRetryStart { .. }
            | AgentEvent::AutoRetryEnd { .. } => return None,
        })
    }
}
