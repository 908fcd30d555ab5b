//! Content policy: which content kinds a sink receives, and how captured content is scrubbed,
//! redacted and truncated before any subscriber sees it.

mod redactor;
mod scrub;

use std::borrow::Cow;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

pub use redactor::{FieldRef, RedactError, Redaction, Redactor};
pub use scrub::{REDACTED, ScrubError, Scrubber};

use crate::event::{ErrorInfo, ObsEvent};
use crate::names;
use crate::payload::{Class, ContentKind, Payload, Value};
use crate::stats::Stats;

/// Default size limit of one captured field, in bytes.
pub const DEFAULT_MAX_FIELD_BYTES: usize = 8 * 1024;
/// Default size limit of an error message, in bytes.
pub const DEFAULT_MAX_ERROR_BYTES: usize = 1024;

/// What a sink may receive.
///
/// The default captures no content and never secrets: only [`Class::Safe`] fields pass, and an
/// error keeps only its type name (error messages are [`ContentKind::ErrorText`]; when captured
/// they are cut to [`DEFAULT_MAX_ERROR_BYTES`]). Capture is opt-in per
/// [`ContentKind`]; captured text passes through the [`Scrubber`], then each [`Redactor`] in
/// order, then the size limit (with a `…[truncated N bytes]` marker).
///
/// ```
/// use pi_observe_core::{ContentKind, ContentPolicy, Redaction};
///
/// let policy = ContentPolicy::default()
///     .capture(ContentKind::Prompt)
///     .redactor(|_field: pi_observe_core::FieldRef<'_>, value: &str| {
///         if value.contains("internal") { Redaction::Drop } else { Redaction::Keep }
///     })
///     .max_field_bytes(4096);
/// assert!(policy.captures(ContentKind::Prompt));
/// assert!(!policy.captures(ContentKind::ToolResult));
/// ```
#[derive(Clone)]
pub struct ContentPolicy {
    capture: u16,
    scrubber: Scrubber,
    redactors: Vec<Arc<dyn Redactor>>,
    max_field_bytes: usize,
    max_error_bytes: usize,
}

impl Default for ContentPolicy {
    fn default() -> Self {
        ContentPolicy {
            capture: 0,
            scrubber: Scrubber::default(),
            redactors: Vec::new(),
            max_field_bytes: DEFAULT_MAX_FIELD_BYTES,
            max_error_bytes: DEFAULT_MAX_ERROR_BYTES,
        }
    }
}

impl fmt::Debug for ContentPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let captured: Vec<_> = ContentKind::ALL.into_iter().filter(|k| self.captures(*k)).collect();
        f.debug_struct("ContentPolicy")
            .field("capture", &captured)
            .field("scrub_rules", &self.scrubber.rule_names().count())
            .field("redactors", &self.redactors.len())
            .field("max_field_bytes", &self.max_field_bytes)
            .field("max_error_bytes", &self.max_error_bytes)
            .finish()
    }
}

impl ContentPolicy {
    /// Captures no content (the default).
    pub fn safe_only() -> Self {
        Self::default()
    }

    /// Also capture content of `kind`.
    pub fn capture(mut self, kind: ContentKind) -> Self {
        self.capture |= kind.bit();
        self
    }

    /// Capture every content kind (secrets are still never exported).
    pub fn capture_all(self) -> Self {
        ContentKind::ALL.into_iter().fold(self, Self::capture)
    }

    /// Capture these kinds (in addition to those already captured).
    pub fn capture_kinds(self, kinds: impl IntoIterator<Item = ContentKind>) -> Self {
        kinds.into_iter().fold(self, Self::capture)
    }

    /// True when content of `kind` is captured.
    pub fn captures(&self, kind: ContentKind) -> bool {
        self.capture & kind.bit() != 0
    }

    /// Replaces the secret scrubber (e.g. one extended with [`Scrubber::with_pattern`]).
    pub fn scrubber(mut self, scrubber: Scrubber) -> Self {
        self.scrubber = scrubber;
        self
    }

    /// Adds a redaction hook, run after the scrubber and earlier hooks.
    pub fn redactor(mut self, redactor: impl Redactor) -> Self {
        self.redactors.push(Arc::new(redactor));
        self
    }

    /// Size limit of one captured field in bytes (default 8 KiB).
    pub fn max_field_bytes(mut self, bytes: usize) -> Self {
        self.max_field_bytes = bytes;
        self
    }

    /// Size limit of an error message in bytes (default 1 KiB).
    pub fn max_error_bytes(mut self, bytes: usize) -> Self {
        self.max_error_bytes = bytes;
        self
    }

    #[cfg(test)]
    pub(crate) fn apply(&self, mut event: ObsEvent, stats: &Stats) -> ObsEvent {
        self.apply_in_place(&mut event, stats);
        event
    }

    /// Applies the policy to one event for delivery, in place: drops secrets and uncaptured
    /// content, scrubs, redacts and truncates captured content, scrubs and truncates the error
    /// message. All-safe payloads stay shared with the operation's other records.
    pub(crate) fn apply_in_place(&self, event: &mut ObsEvent, stats: &Stats) {
        event.captured = self.capture;
        // All-safe payloads (the common case) stay shared with the operation's other records.
        let all_safe = event.payload.iter().all(|field| field.class == Class::Safe);
        if !all_safe {
            self.filter_fields(&event.name, &mut event.payload, stats);
        }
        if let Some(error) = &mut event.error {
            self.filter_error(&event.name, error, stats);
        }
    }

    /// Errors are content: the name must be a type name (else [`names::ERROR_GENERIC`]); the
    /// message is [`ContentKind::ErrorText`], withheld unless captured, then scrubbed, redacted
    /// and cut to the error size limit.
    fn filter_error(&self, event_name: &str, error: &mut ErrorInfo, stats: &Stats) {
        if !is_type_name(&error.name) || !matches!(self.scrubber.scrub(&error.name), Cow::Borrowed(_)) {
            error.name = names::ERROR_GENERIC.to_owned();
            stats.fields_redacted.fetch_add(1, Relaxed);
        }
        if error.message.is_empty() {
            return;
        }
        if !self.captures(ContentKind::ErrorText) {
            error.message.clear();
            stats.fields_withheld.fetch_add(1, Relaxed);
            return;
        }
        let at = FieldRef { event_name, key: ERROR_MESSAGE_KEY, kind: ContentKind::ErrorText };
        let mut text = Cow::Owned(std::mem::take(&mut error.message));
        if self.filter_text(at, &mut text, stats) {
            error.message = text.into_owned();
            if truncate(&mut error.message, self.max_error_bytes) {
                stats.fields_truncated.fetch_add(1, Relaxed);
            }
        }
    }

    /// Drops secrets and uncaptured content; scrubs, redacts and truncates captured content.
    fn filter_fields(&self, event_name: &str, payload: &mut Payload, stats: &Stats) {
        payload.fields_mut().retain_mut(|field| {
            let kind = match field.class {
                Class::Safe => return true,
                Class::Secret => {
                    stats.fields_withheld.fetch_add(1, Relaxed);
                    return false;
                }
                Class::Content(kind) if !self.captures(kind) => {
                    stats.fields_withheld.fetch_add(1, Relaxed);
                    return false;
                }
                Class::Content(kind) => kind,
            };
            let at = FieldRef { event_name, key: &field.key, kind };
            match &mut field.value {
                Value::Str(text) => self.filter_text(at, text, stats),
                Value::StrArray(items) => items.iter_mut().all(|item| {
                    let mut text = Cow::Owned(std::mem::take(item));
                    let keep = self.filter_text(at, &mut text, stats);
                    *item = text.into_owned();
                    keep
                }),
                // Numbers and booleans carry no text to scrub.
                _ => true,
            }
        });
    }

    /// Scrubs, redacts and truncates one captured string in place; false = drop the field.
    fn filter_text(&self, at: FieldRef<'_>, text: &mut Cow<'static, str>, stats: &Stats) -> bool {
        let mut changed = false;
        if let Cow::Owned(clean) = self.scrubber.scrub(text) {
            *text = Cow::Owned(clean);
            changed = true;
        }
        for redactor in &self.redactors {
            match catch_unwind(AssertUnwindSafe(|| redactor.redact(at, text))) {
                Ok(Ok(Redaction::Keep)) => {}
                Ok(Ok(Redaction::Replace(new))) => {
                    *text = Cow::Owned(new);
                    changed = true;
                }
                Ok(Ok(Redaction::Drop)) => {
                    stats.fields_dropped.fetch_add(1, Relaxed);
                    return false;
                }
                Ok(Err(_)) | Err(_) => {
                    stats.redactor_failures.fetch_add(1, Relaxed);
                    stats.fields_dropped.fetch_add(1, Relaxed);
                    return false;
                }
            }
        }
        if changed {
            stats.fields_redacted.fetch_add(1, Relaxed);
        }
        if text.len() > self.max_field_bytes && truncate(text.to_mut(), self.max_field_bytes) {
            stats.fields_truncated.fetch_add(1, Relaxed);
        }
        true
    }
}

/// `value` when it is shaped like an identifier pi can export as safe (a model id, a tool call id:
/// at most 128 characters from `A-Z a-z 0-9 . _ : / @ + -`, and no known secret format), else
/// `"invalid"`. For the few identifiers pi receives from outside and exports as safe fields.
pub fn identifier_or_invalid(value: &str) -> String {
    let shaped = !value.is_empty()
        && value.len() <= 128
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '@' | '+' | '-'));
    if shaped && matches!(Scrubber::default().scrub(value), std::borrow::Cow::Borrowed(_)) {
        value.to_owned()
    } else {
        "invalid".to_owned()
    }
}

/// `value` when it is shaped like an id pi or upstream pi mints — a UUID, 1 to 64 hex digits,
/// or a short id of up to 16 letters, digits, `_` or `-` (entry ids such as `a1b2c3d4`) — and
/// matches no secret format, else `"invalid"`. For ids pi did not mint itself: session and entry
/// ids read from a file, typed by a user or sent by an RPC client.
pub fn id_or_invalid(value: &str) -> String {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let uuid = value.len() == 36 && value.split('-').map(str::len).eq([8, 4, 4, 4, 12]) && value.split('-').all(hex);
    let hex_id = (1..=64).contains(&value.len()) && hex(value);
    let short =
        (1..=16).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if (uuid || hex_id || short) && matches!(Scrubber::default().scrub(value), std::borrow::Cow::Borrowed(_)) {
        value.to_owned()
    } else {
        "invalid".to_owned()
    }
}

/// The key a [`Redactor`] sees for an error message.
pub const ERROR_MESSAGE_KEY: &str = "error.message";

/// True for a type-like error name: an ASCII letter, then up to 63 letters, digits or `_.:-`.
fn is_type_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// Cuts `text` to at most `max` bytes (on a char boundary) including a `…[truncated N bytes]`
/// marker; returns true when it cut.
pub fn truncate(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut keep = max;
    loop {
        let marker = format!("…[truncated {} bytes]", text.len() - keep);
        let budget = max.saturating_sub(marker.len());
        if budget >= keep || keep == 0 {
            text.truncate(keep);
            text.push_str(&marker);
            return true;
        }
        keep = floor_char_boundary(text, budget);
    }
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    (0..=index.min(text.len())).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{ErrorInfo, EventKind};
    use crate::ids::TraceId;
    use crate::payload::Payload;
    use proptest::prelude::*;

    fn event(payload: Payload) -> ObsEvent {
        let mut e = ObsEvent::new(EventKind::Start, "pi.test", TraceId::random());
        e.payload = payload;
        e
    }

    #[test]
    fn default_policy_keeps_only_safe_fields() {
        let stats = Stats::default();
        let out = ContentPolicy::default().apply(
            event(
                Payload::new()
                    .safe("model", "m")
                    .content(ContentKind::Prompt, "prompt", "hello")
                    .secret("apiKey", "sk-abcdefghijklmnopqrstu"),
            ),
            &stats,
        );
        assert_eq!(out.payload.len(), 1);
        assert!(out.payload.get("model").is_some());
        assert!(out.payload.get("prompt").is_none());
        assert!(out.payload.get("apiKey").is_none());
        assert_eq!(stats.snapshot().fields_withheld, 2);
    }

    #[test]
    fn only_events_that_passed_a_policy_export_content() {
        let raw = event(Payload::new().safe("a", 1).content(ContentKind::Prompt, "p", "x").secret("s", "y"));
        let keys = |e: &ObsEvent| e.exportable_fields().map(|f| f.key.to_string()).collect::<Vec<_>>();
        assert_eq!(keys(&raw), ["a"], "content that skipped the policy is not exportable");
        let through = ContentPolicy::default().capture(ContentKind::Prompt).apply(raw, &Stats::default());
        assert_eq!(keys(&through), ["a", "p"]);
    }

    #[test]
    fn secrets_are_withheld_even_when_everything_is_captured() {
        let stats = Stats::default();
        let out = ContentPolicy::default().capture_all().apply(event(Payload::new().secret("apiKey", "plain")), &stats);
        assert!(out.payload.is_empty());
    }

    #[test]
    fn captured_content_is_scrubbed_then_redacted_then_truncated() {
        let stats = Stats::default();
        let policy = ContentPolicy::default()
            .capture(ContentKind::Prompt)
            .redactor(|_: FieldRef<'_>, v: &str| Redaction::Replace(v.replace("alice", "<user>")))
            .max_field_bytes(60);
        let text = format!("alice key sk-abcdefghijklmnopqrstuvwx {}", "x".repeat(100));
        let out = policy.apply(event(Payload::new().content(ContentKind::Prompt, "prompt", text)), &stats);
        let value = out.payload.get("prompt").unwrap().as_str().unwrap();
        assert!(value.starts_with("<user> key [REDACTED]"), "{value}");
        assert!(value.len() <= 60, "{value}");
        assert!(value.contains("…[truncated"));
        let s = stats.snapshot();
        assert_eq!((s.fields_redacted, s.fields_truncated), (1, 1));
    }

    #[test]
    fn failing_or_panicking_redactors_drop_the_field() {
        struct Failing;
        impl Redactor for Failing {
            fn redact(&self, _: FieldRef<'_>, _: &str) -> Result<Redaction, RedactError> {
                Err(RedactError("backend down".into()))
            }
        }
        for policy in [
            ContentPolicy::default().capture_all().redactor(Failing),
            ContentPolicy::default().capture_all().redactor(|_: FieldRef<'_>, _: &str| -> Redaction { panic!("boom") }),
        ] {
            let stats = Stats::default();
            let out = policy
                .apply(event(Payload::new().safe("n", 1).content(ContentKind::ToolResult, "result", "data")), &stats);
            assert!(out.payload.get("result").is_none());
            assert!(out.payload.get("n").is_some());
            let s = stats.snapshot();
            assert_eq!((s.redactor_failures, s.fields_dropped), (1, 1));
        }
    }

    #[test]
    fn error_messages_are_withheld_by_default_and_keep_only_the_type() {
        let stats = Stats::default();
        let mut e = event(Payload::new());
        e.error = Some(ErrorInfo::new("ToolError", "DB_PASSWORD=hunter2 in /home/alice/project"));
        let out = ContentPolicy::default().apply(e, &stats);
        assert_eq!(out.error, Some(ErrorInfo::new("ToolError", "")));
        assert_eq!(out.exportable_error_message(), None);
        assert_eq!(stats.snapshot().fields_withheld, 1);
    }

    #[test]
    fn only_identifier_shaped_values_without_secrets_pass_as_safe_ids() {
        for id in ["gpt-4o-2024-08-06", "claude-sonnet-4@20250514", "call_abc123", "toolu_01A", "org/model:free"] {
            assert_eq!(identifier_or_invalid(id), id);
        }
        for text in ["", "two words", "x\ny", "DB_PASSWORD=hunter2", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"] {
            assert_eq!(identifier_or_invalid(text), "invalid", "{text:?}");
        }
        assert_eq!(identifier_or_invalid(&"a".repeat(129)), "invalid");
    }

    #[test]
    fn ids_from_outside_keep_their_shape_or_read_invalid() {
        for id in ["0193a6f0-7c1e-7d2a-9b3c-4d5e6f708192", "a1b2c3d4", "d4e5f6g7", "u1", &"f".repeat(64)] {
            assert_eq!(id_or_invalid(id), id);
        }
        for id in [
            "sk-ant-api03-Xy9Lq2Wm8Nz4Rt6Vb1Kc3Jh5Gf7Dd0SaPp",
            "",
            "has space",
            "0193a6f0-7c1e-7d2a-9b3c-4d5e6f70819z",
            "a-very-long-name-that-is-not-an-id",
            &"f".repeat(65),
            "ghp_R4nd0mT0k3nV4lu3Xq9Zw8Yv7Ut6Sr5Qp4",
        ] {
            assert_eq!(id_or_invalid(id), "invalid", "{id:?}");
        }
    }

    #[test]
    fn error_names_that_are_not_type_names_become_error() {
        for name in ["two words", "DB_PASSWORD=hunter2", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "", "1x"] {
            let mut e = event(Payload::new());
            e.error = Some(ErrorInfo::new(name, "m"));
            let out = ContentPolicy::default().capture_all().apply(e, &Stats::default());
            assert_eq!(out.error.unwrap().name, "Error", "{name:?}");
        }
    }

    #[test]
    fn captured_error_messages_are_scrubbed_redacted_and_truncated() {
        let stats = Stats::default();
        let mut e = event(Payload::new());
        e.error =
            Some(ErrorInfo::new("HttpStatus", format!("401 for key sk-abcdefghijklmnopqrstuvwx {}", "y".repeat(5000))));
        let policy = ContentPolicy::default()
            .capture(ContentKind::ErrorText)
            .redactor(|f: FieldRef<'_>, v: &str| Redaction::Replace(format!("{}:{}:{v}", f.key, f.kind.as_str())));
        let out = policy.apply(e, &stats);
        let message = out.exportable_error_message().unwrap();
        assert!(message.starts_with("error.message:error_text:401 for key [REDACTED]"), "{message}");
        assert!(!message.contains("abcdefghijklmnop"));
        assert!(message.len() <= DEFAULT_MAX_ERROR_BYTES);
    }

    proptest! {
        #[test]
        fn truncate_respects_the_limit_and_char_boundaries(s in "\\PC{0,300}", max in 0usize..200) {
            let mut t = s.clone();
            let cut = truncate(&mut t, max);
            prop_assert_eq!(cut, s.len() > max);
            if cut {
                // Below the marker's own size the marker alone is kept.
                prop_assert!(t.len() <= max.max(32));
                prop_assert!(t.contains("…[truncated"));
            } else {
                prop_assert_eq!(t, s);
            }
        }
    }
}
