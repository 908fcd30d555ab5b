//! Turns pi-observe events into Sentry transactions, spans, error events and breadcrumbs.
//!
//! [`SentrySubscriber`] buffers each trace and, when its root operation (normally
//! `pi.agent.prompt`) settles, sends one transaction whose spans are every descendant at its
//! true depth with the contract's ids and timestamps — built by hand, because Sentry's public
//! span API cannot set ids and times for nested spans — so Sentry and OTLP traces line up.
//! Redaction happened in core before any of this: only what the subscriber's content policy let
//! through can reach an envelope, and secrets never do.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
pub mod convert;
mod subscriber;
#[cfg(feature = "testing")]
pub mod testing;
mod transport;

pub use config::{ConfigError, SentryConfig, deliver_spooled, probe};
pub use subscriber::{SentryStats, SentrySubscriber};
pub use transport::{EnvelopeCapture, FIRST_ANSWER_PATIENCE};
