//! The pi observability event contract.
//!
//! A small, vendor-neutral core that the pi agent runtime emits through and that adapters
//! (OpenTelemetry, Sentry, `tracing` logs) subscribe to:
//!
//! - [`ObsEvent`]: `start` / `end` / `error` / `event` records with trace id, span id, parent,
//!   nanosecond timestamps, monotonic durations, the attribution context and a typed,
//!   classified [`Payload`];
//! - [`Observability`]: the hub — subscribers, per-subscriber [`ContentPolicy`], self-telemetry;
//!   [`Background`] runs a subscriber that does real work per record on a thread of its own;
//! - [`trace_operation`] and friends: paired records for every operation, also on `Err`, panic
//!   and cancellation, with the attribution context carried along async chains
//!   ([`run_with_context`], [`spawn`], [`ContextExt::in_current_context`]);
//! - W3C [`TraceParent`] in and out;
//! - with feature `testing`, the [`testing`] kit: capture subscriber, tree assertions and the
//!   adapter conformance suite.
//!
//! When nobody listens, instrumentation costs one relaxed atomic load and builds no payload.
//!
//! ```
//! use pi_observe_core::{names, run_with_context, trace_operation, Attribution, Observability, Payload};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let hub = Observability::new();
//! let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
//! let sink = events.clone();
//! let _sub = hub.subscribe(move |e: &pi_observe_core::ObsEvent| sink.lock().unwrap().push(e.clone()));
//!
//! let alice = Attribution::new().with(names::CTX_USER_ID, "alice").with(names::CTX_ORG_ID, "acme");
//! hub.run_with_context(alice, trace_operation(names::AGENT_PROMPT, Payload::new(), async {
//!     trace_operation(names::AGENT_TURN, (), async { Ok::<_, std::io::Error>(()) }).await
//! }))
//! .await
//! .unwrap();
//!
//! let events = events.lock().unwrap();
//! assert_eq!(events.len(), 4);
//! assert_eq!(events[1].parent_span_id, events[0].span_id);
//! assert!(events.iter().all(|e| e.context.get("userId") == Some("alice")));
//! # });
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod attribution;
mod background;
pub mod canary;
mod class;
mod clock;
mod config_error;
mod context;
mod delivery;
mod event;
mod hub;
mod ids;
pub mod names;
mod operation;
mod payload;
mod policy;
mod private_files;
mod probe;
mod running;
mod shared;
mod span;
mod stats;
mod subscriber;
mod telemetry_thread;
mod traceparent;

#[cfg(feature = "testing")]
pub mod testing;

pub use attribution::Attribution;
pub use background::Background;
pub use config_error::ConfigError;
pub use context::{
    ContextExt, ObsContext, Scoped, current, run_with_context, run_with_context_sync, run_with_traceparent, spawn,
    spawn_blocking, spawn_thread, with_current,
};
pub use event::{ErrorInfo, EventKind, ObsEvent, Timestamp, ValueJson, value_from_json, value_to_json};
pub use hub::{HubSlot, Scope, Subscription, WeakObservability};
pub use ids::{IdHex, InvalidId, SpanId, TraceId};
pub use operation::{
    Operation, Outcome, record, record_event, trace_operation, trace_operation_sync, trace_operation_with,
};
pub use payload::{Class, ContentKind, Field, Payload, PayloadIntoIter, PayloadSource, Value};
pub use policy::{
    ContentPolicy, DEFAULT_MAX_ERROR_BYTES, DEFAULT_MAX_FIELD_BYTES, ERROR_MESSAGE_KEY, FieldRef, REDACTED,
    RedactError, Redaction, Redactor, ScrubError, Scrubber, id_or_invalid, identifier_or_invalid, truncate,
};
pub use private_files::{
    append_whole, create_private_dir_all, create_private_parent, exit_between_appends, private_file_options,
    write_private,
};
pub use probe::{ProbeOutcome, is_loopback_host};
pub use shared::{Observability, Status};
pub use span::Span;
pub use stats::{DropReason, StatsSnapshot};
pub use subscriber::{Starts, Subscriber, SubscriberError, WithoutPayloads};
pub use telemetry_thread::spawn_telemetry_thread;
pub use traceparent::TraceParent;
