//! User redaction hooks.

use std::fmt;

use crate::payload::ContentKind;

/// Which field a [`Redactor`] is looking at.
#[derive(Debug, Clone, Copy)]
pub struct FieldRef<'a> {
    /// The event's name, e.g. `pi.agent.prompt`.
    pub event_name: &'a str,
    /// The payload key, e.g. `prompt`.
    pub key: &'a str,
    /// The content kind of the field.
    pub kind: ContentKind,
}

/// What a [`Redactor`] decided about one captured value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redaction {
    /// Export the value as it is.
    Keep,
    /// Export this instead.
    Replace(String),
    /// Do not export the field at all.
    Drop,
}

/// A redactor could not decide; the field is dropped (fail closed) and the failure counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactError(pub String);

impl fmt::Display for RedactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "redactor failed: {}", self.0)
    }
}

impl std::error::Error for RedactError {}

/// A user hook that sees every captured content value after the secret scrubber, in the order
/// redactors were added, and may rewrite or drop it. A redactor that errors or panics drops the
/// field (fail closed); the failure is counted, never propagated.
///
/// Closures `Fn(FieldRef<'_>, &str) -> Redaction` are redactors.
pub trait Redactor: Send + Sync + 'static {
    /// Decides what to export for `value`.
    fn redact(&self, field: FieldRef<'_>, value: &str) -> Result<Redaction, RedactError>;
}

impl<F> Redactor for F
where
    F: Fn(FieldRef<'_>, &str) -> Redaction + Send + Sync + 'static,
{
    fn redact(&self, field: FieldRef<'_>, value: &str) -> Result<Redaction, RedactError> {
        Ok(self(field, value))
    }
}
