//! A bounded, crash-safe disk spool for telemetry a sink could not deliver.
//!
//! An exporter that gives up on a batch — the receiver is down, stalled, or answering 5xx, or
//! the process is exiting — hands the batch's wire bytes (exactly what it would have sent) to
//! [`Spool::write`]. A later process (the next `pi` run, or `pi observe flush`) lists what is
//! waiting with [`Spool::pending`], [claims](Pending::claim) a batch, sends the bytes, and calls
//! [`Claimed::delivered`].
//!
//! - **One file per batch**, written to a temporary name and renamed into place: a crash (even
//!   SIGKILL) while spooling leaves either the whole batch or nothing. New batches are not
//!   synced (as durable as the session they came from; a power cut's torn batch is set aside,
//!   counted).
//! - **Exactly once between processes**: a claim is an exclusive advisory lock on the file,
//!   taken without waiting, plus a check that the file is still linked; a batch is removed only
//!   after its delivery was acknowledged. A process that dies mid-delivery releases its lock.
//! - **Bounded**: [`SpoolConfig::max_bytes`] and [`SpoolConfig::max_age`]; past them the oldest
//!   batches go first, counted by reason ([`SpoolStats`]).
//! - **Credentials are not stored**: a batch refused with 401/403 keeps only a
//!   [`fingerprint`] of the headers that were refused, so it waits until they change.
//! - A torn or unreadable file is set aside (renamed `*.unreadable`), counted, and named once.
//!
//! The crate knows nothing about OTLP or Sentry: [`BatchMeta`] says where a batch was going.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod deliver;
mod store;

pub use batch::{BatchMeta, fingerprint};
pub use deliver::{Attempt, SpoolDelivery};
pub use store::{Claimed, Pending, Spool, SpoolConfig, SpoolStats, SpoolStatus};
