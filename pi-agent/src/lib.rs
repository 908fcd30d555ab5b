//! The pi coding-agent runtime: LLM providers (OpenAI Chat Completions, Anthropic Messages,
//! scripted `faux`), the agent loop (prompt → turns → tools), extensions, the built-in tools, and JSONL sessions —
//! instrumented end to end through `pi-observe-core` only.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod agent;
pub mod compaction;
pub mod events;
pub mod extensions;
pub mod message;
pub mod model;
pub mod process;
pub mod provider;
pub mod resources;
pub mod session;
pub mod time;
pub mod tools;

pub use agent::{
    Agent, AgentConfig, AgentError, AgentSink, MessageQueue, Navigation, Pending, PromptResult, PromptSource,
    QueueKind, QueueMode, SwitchReason,
};
