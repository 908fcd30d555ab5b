//! pi-observe: observability for coding agents.
//!
//! The umbrella package: re-exports the event contract ([`core`]), the agent runtime
//! ([`agent`]) and the adapters ([`otel`], [`sentry`], [`log`]), and ships the `pi` command,
//! the examples and the cross-crate tests.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use pi_agent as agent;
pub use pi_observe_core as core;
pub use pi_observe_log as log;
pub use pi_observe_otel as otel;
pub use pi_observe_sentry as sentry;
