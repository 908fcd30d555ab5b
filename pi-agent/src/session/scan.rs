//! Attributed usage of a session file read as a stream: one line at a time into a reused
//! buffer, each parsed only for what the report needs (ids, type, model, attribution, usage —
//! message content is skipped unread), so memory stays bounded by the number of entries, not
//! the file size. Gives the same rows as [`attributed_usage`](super::attributed_usage) over
//! [`read_session`](super::read_session).

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::entry::ATTRIBUTION_CUSTOM_TYPE;
use super::reader::{SessionError, TornTail};
use super::report::AttributedUsage;
use crate::message::Usage;

/// One line, as far as the report reads it.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, rename = "parentId", borrow)]
    parent_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(default, rename = "modelId", borrow)]
    model_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "customType", borrow)]
    custom_type: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(default, borrow)]
    message: Option<MessageLine<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct MessageLine<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(default, borrow)]
    provider: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    #[allow(dead_code)] // read past, never kept
    content: IgnoredAny,
}

/// What is in force on a branch: attribution and model (shared until they change).
#[derive(Debug, Default)]
struct State {
    user: Option<Rc<str>>,
    org: Option<Rc<str>>,
    model: Option<Rc<str>>,
}

/// Streams `path`, calling `each` with every usage-carrying entry, attributed through the entry
/// tree. A torn last line (a crash mid-append) is skipped and returned; any other bad line is an
/// error naming it.
pub fn scan_usage(path: &Path, each: impl FnMut(AttributedUsage)) -> Result<Option<TornTail>, SessionError> {
    scan_usage_counting(path, &AtomicU64::new(0), each)
}

/// [`scan_usage`] that adds the bytes it has read to `read` as it goes (for a progress display
/// on another thread).
pub fn scan_usage_counting(
    path: &Path,
    read: &AtomicU64,
    mut each: impl FnMut(AttributedUsage),
) -> Result<Option<TornTail>, SessionError> {
    let shown = path.display().to_string();
    let corrupt = |line: usize, reason: String| SessionError::Corrupt { path: shown.clone(), line, reason };
    let file = std::fs::File::open(path).map_err(|e| SessionError::io(path, e))?;
    if !file.metadata().map_err(|e| SessionError::io(path, e))?.is_file() {
        return Err(SessionError::NotAFile { path: shown });
    }
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
    // Keyed by a 64-bit hash of the entry id (8 bytes an entry instead of a string).
    let mut states: HashMap<u64, Rc<State>> = HashMap::new();
    let (mut buffer, mut number, mut offset, mut header) = (Vec::new(), 0usize, 0u64, false);
    loop {
        buffer.clear();
        let length = reader.read_until(b'\n', &mut buffer).map_err(|e| SessionError::io(path, e))?;
        if length == 0 {
            break;
        }
        read.fetch_add(length as u64, Ordering::Relaxed);
        number += 1;
        let start = offset;
        offset += length as u64;
        let terminated = buffer.last() == Some(&b'\n');
        let text = match std::str::from_utf8(&buffer) {
            Ok(text) => text.trim(),
            Err(_) if !terminated => return Ok(Some(TornTail { offset: start, line: number })),
            Err(e) => return Err(corrupt(number, format!("not UTF-8 ({e})"))),
        };
        if text.is_empty() {
            continue;
        }
        let line: Line<'_> = match serde_json::from_str(text) {
            Ok(line) => line,
            Err(_) if !terminated => return Ok(Some(TornTail { offset: start, line: number })),
            Err(e) => return Err(corrupt(number, format!("not a session entry ({e})"))),
        };
        if !header {
            if line.kind != "session" {
                return Err(SessionError::NoHeader { path: shown });
            }
            header = true;
            continue;
        }
        let Some(id) = line.id.as_deref() else { return Err(corrupt(number, "bad entry (no id)".into())) };
        let inherited = line.parent_id.as_deref().and_then(|p| states.get(&key(p))).cloned().unwrap_or_default();
        let (state, usage, assistant) = apply(&line, inherited);
        if let Some(usage) = usage {
            each(AttributedUsage {
                day: line.timestamp.as_deref().and_then(|t| t.get(..10)).unwrap_or("unknown").to_owned(),
                user: state.user.as_deref().map(str::to_owned),
                org: state.org.as_deref().map(str::to_owned),
                model: state.model.as_deref().unwrap_or("unknown").to_owned(),
                usage,
                assistant_message: assistant,
            });
        }
        states.insert(key(id), state);
    }
    if !header {
        return Err(SessionError::NoHeader { path: shown });
    }
    Ok(None)
}

/// A stable 64-bit key for an entry id (collisions are astronomically unlikely for the ids of
/// one session).
fn key(id: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(id)
}

/// The state after `line`, its usage (if it carries any) and whether it is an assistant message.
fn apply(line: &Line<'_>, inherited: Rc<State>) -> (Rc<State>, Option<Usage>, bool) {
    // Unchanged state is shared, not copied: most entries keep the branch's model and owner.
    let with_model = |model: String| {
        if inherited.model.as_deref() == Some(model.as_str()) {
            return inherited.clone();
        }
        Rc::new(State { user: inherited.user.clone(), org: inherited.org.clone(), model: Some(model.into()) })
    };
    match (line.kind.as_ref(), &line.message) {
        ("custom", _) if line.custom_type.as_deref() == Some(ATTRIBUTION_CUSTOM_TYPE) => {
            let get = |key: &str| line.data.as_ref().and_then(|d| d.get(key)).and_then(|v| v.as_str());
            let (user, org) = (get(pi_observe_core::names::CTX_USER_ID), get(pi_observe_core::names::CTX_ORG_ID));
            if inherited.user.as_deref() == user && inherited.org.as_deref() == org {
                return (inherited, None, false);
            }
            let state = State { user: user.map(Rc::from), org: org.map(Rc::from), model: inherited.model.clone() };
            (Rc::new(state), None, false)
        }
        ("model_change", _) => {
            let (provider, model) = (line.provider.as_deref().unwrap_or(""), line.model_id.as_deref().unwrap_or(""));
            (with_model(format!("{provider}/{model}")), None, false)
        }
        ("message", Some(message)) if message.role == "assistant" => {
            let (provider, model) = (message.provider.as_deref().unwrap_or(""), message.model.as_deref().unwrap_or(""));
            (with_model(format!("{provider}/{model}")), Some(message.usage.unwrap_or_default()), true)
        }
        ("message", Some(message)) if message.role == "toolResult" => (inherited, message.usage, false),
        ("compaction" | "branch_summary", _) => (inherited, line.usage, false),
        _ => (inherited, None, false),
    }
}
