//! pi-observe: observability for coding agents.
//!
//! The umbrella package: re-exports the event contract ([`core`]), the agent runtime
//! ([`agent`]) and the adapters ([`otel`], [`sentry`], [`log`]), and ships the `pi` command,
//! the examples and the cross-crate tests.
//!
//! The README's sample, compiled and run:
//!
//! ```
//! use pi_observe::core::{names, trace_operation, Attribution, ContentKind, ObsEvent, Observability, Payload};
//!
//! async fn traced_prompt() -> Result<(), std::io::Error> {
//!     let hub = Observability::new();
//!     let _sub = hub.subscribe(|e: &ObsEvent| println!("{}", e.to_json()));
//!
//!     let alice = Attribution::new().with(names::CTX_USER_ID, "alice").with(names::CTX_ORG_ID, "acme");
//!     let prompt = || {
//!         Payload::new()
//!             .safe(names::MODEL, "claude-sonnet-4")
//!             .content(ContentKind::Prompt, names::PROMPT_TEXT, "fix the bug") // dropped unless captured
//!     };
//!     hub.run_with_context(alice, trace_operation(names::AGENT_PROMPT, prompt, async { Ok(()) })).await
//! }
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! runtime.block_on(traced_prompt()).unwrap();
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use pi_agent as agent;
pub use pi_observe_core as core;
pub use pi_observe_log as log;
pub use pi_observe_otel as otel;
pub use pi_observe_sentry as sentry;
pub use pi_observe_spool as spool;
