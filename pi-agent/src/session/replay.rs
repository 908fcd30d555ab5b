//! Backfill: a session's history as contract events, with deterministic ids.

use std::collections::HashMap;
use std::rc::Rc;

use pi_observe_core::{
    Attribution, ContentKind, ErrorInfo, EventKind, ObsEvent, Payload, SpanId, Timestamp, TraceId, names,
};

use super::entry::{ATTRIBUTION_CUSTOM_TYPE, Entry, EntryKind};
use super::reader::Session;
use crate::message::{Message, StopReason, Usage};
use crate::model::Registry;
use crate::provider::{model_names, response_model_of};
use crate::time::parse_iso8601;

/// Payload key marking records rebuilt from a session file (`true`), so backends can tell a
/// backfill from live telemetry.
pub const REPLAYED: &str = "replayed";

/// One span being rebuilt.
struct SpanRec {
    name: &'static str,
    trace: TraceId,
    span: SpanId,
    parent: Option<SpanId>,
    start_ms: i64,
    end_ms: i64,
    context: Attribution,
    start: Payload,
    end: Payload,
    error: Option<ErrorInfo>,
    children: Vec<usize>,
}

/// What is in force at an entry, inherited from its parent entry.
#[derive(Clone, Default)]
struct State {
    /// The prompt span this entry belongs to.
    prompt: Option<usize>,
    /// The turn span of the latest assistant message, and when its tools started.
    turn: Option<(usize, i64)>,
    turns: u32,
    last_ms: i64,
    attribution: Attribution,
    model: Option<(String, String)>,
}

/// The session's history as contract events: per prompt (user message) a `pi.agent.prompt`
/// trace with one `pi.agent.turn` per assistant message holding its `pi.ai.provider.request`
/// (model, stop reason, usage and cost) and its `pi.agent.tool_call`s; compactions as
/// `pi.agent.compaction` (inside the prompt they happened in, else their own trace) and branch
/// summaries as `pi.agent.branch_navigation`, both with their usage. Times come from the
/// entries; attribution from the session's attribution entries, through the entry tree.
///
/// Ids are derived from the session id and entry ids, so replaying the same file again yields
/// the same trace and span ids (an idempotent backfill). Every record carries `replayed=true`;
/// prompt and completion texts are content-class fields (exported only if captured). Every
/// name read from the file is classified exactly as a live run classifies it: the session id by
/// [`Session::exported_id`], API, provider and model by [`crate::provider::model_names`] against
/// `registry` (what a live run would have resolved them with), the response model by
/// [`crate::provider::response_model`]. Records come depth first: a span's start, its
/// children, its end.
pub fn replay(session: &Session, registry: &Registry) -> Vec<ObsEvent> {
    let mut replay = Replay {
        sid: &session.header.id,
        exported_sid: &session.exported_id,
        registry,
        spans: Vec::new(),
        roots: Vec::new(),
    };
    let mut states: HashMap<&str, Rc<State>> = HashMap::with_capacity(session.entries.len());
    for entry in &session.entries {
        let inherited = entry.parent_id.as_deref().and_then(|p| states.get(p)).cloned().unwrap_or_default();
        let mut st = (*inherited).clone();
        let at = entry_millis(entry).unwrap_or(st.last_ms);
        let here = Here { entry_id: &entry.id, at };
        match &entry.kind {
            EntryKind::Custom { custom_type, data } if custom_type == ATTRIBUTION_CUSTOM_TYPE => {
                st.attribution = data
                    .as_object()
                    .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
                    .unwrap_or_default();
            }
            EntryKind::ModelChange { provider, model_id } => st.model = Some((provider.clone(), model_id.clone())),
            EntryKind::Message { message: Message::User(user) } => replay.user(&here, &mut st, &user.content.text()),
            EntryKind::Message { message: Message::Assistant(reply) } => replay.assistant(&here, &mut st, reply),
            EntryKind::Message { message: Message::ToolResult(result) } => replay.tool_result(&here, &st, result),
            EntryKind::Compaction { usage, tokens_before, .. } => {
                let from = st.last_ms.min(at);
                let index = replay.span(&here, &st, names::AGENT_COMPACTION, "compaction", st.prompt, from);
                let span = &mut replay.spans[index];
                span.start.insert(names::TOKENS_BEFORE, *tokens_before, pi_observe_core::Class::Safe);
                if let Some(usage) = usage {
                    // No request span is rebuilt for the summary call: its usage is billed here.
                    span.end = usage_payload(Payload::new(), usage).safe(names::CALL_KIND, names::CALL_KIND_COMPACTION);
                }
            }
            EntryKind::BranchSummary { usage, .. } => {
                let from = st.last_ms.min(at);
                let index = replay.span(&here, &st, names::AGENT_BRANCH_NAVIGATION, "branch", None, from);
                if let Some(usage) = usage {
                    replay.spans[index].end =
                        usage_payload(Payload::new(), usage).safe(names::CALL_KIND, names::CALL_KIND_BRANCH_SUMMARY);
                }
            }
            _ => {}
        }
        // Enclosing spans last until their latest entry.
        for open in [st.prompt, st.turn.map(|(turn, _)| turn)].into_iter().flatten() {
            replay.spans[open].end_ms = replay.spans[open].end_ms.max(at);
        }
        st.last_ms = st.last_ms.max(at);
        states.insert(&entry.id, Rc::new(st));
    }
    let mut events = Vec::with_capacity(replay.spans.len() * 2);
    for root in &replay.roots {
        emit(&replay.spans, *root, &mut events);
    }
    events
}

/// The entry being replayed: its id (for derived span ids) and its time.
struct Here<'a> {
    entry_id: &'a str,
    at: i64,
}

/// The spans rebuilt so far.
struct Replay<'a> {
    /// The session id, for deterministic trace and span ids.
    sid: &'a str,
    /// The session id as telemetry carries it.
    exported_sid: &'a str,
    registry: &'a Registry,
    spans: Vec<SpanRec>,
    roots: Vec<usize>,
}

impl Replay<'_> {
    /// A new span for the entry `here`, under `parent` (else the root of a trace of its own).
    fn span(
        &mut self,
        here: &Here<'_>,
        st: &State,
        name: &'static str,
        tag: &str,
        parent: Option<usize>,
        start_ms: i64,
    ) -> usize {
        let (trace, parent_span) = match parent {
            Some(p) => (self.spans[p].trace, Some(self.spans[p].span)),
            None => (trace_id(self.sid, here.entry_id), None),
        };
        let index = self.spans.len();
        self.spans.push(SpanRec {
            name,
            trace,
            span: span_id(self.sid, here.entry_id, tag),
            parent: parent_span,
            start_ms,
            end_ms: here.at.max(start_ms),
            context: st.attribution.clone(),
            start: Payload::new().safe(names::SESSION_ID, self.exported_sid.to_owned()).safe(REPLAYED, true),
            end: Payload::new(),
            error: None,
            children: Vec::new(),
        });
        match parent {
            Some(p) => self.spans[p].children.push(index),
            None => self.roots.push(index),
        }
        index
    }

    /// A user message starts a prompt trace.
    fn user(&mut self, here: &Here<'_>, st: &mut State, text: &str) {
        let index = self.span(here, st, names::AGENT_PROMPT, "prompt", None, here.at);
        let span = &mut self.spans[index];
        span.start.insert(names::PROMPT_LENGTH, text.chars().count(), pi_observe_core::Class::Safe);
        if let Some((provider, model)) = &st.model {
            let catalogued = self.registry.catalogued(provider, model);
            span.start.merge(model_names(None, provider, model, catalogued));
        }
        span.start.insert(names::PROMPT_TEXT, text.to_owned(), pi_observe_core::Class::Content(ContentKind::Prompt));
        st.prompt = Some(index);
        st.turn = None;
        st.turns = 0;
    }

    /// An assistant message is a turn with its provider request.
    fn assistant(&mut self, here: &Here<'_>, st: &mut State, reply: &crate::message::AssistantMessage) {
        let at = here.at;
        let prompt = match st.prompt {
            Some(prompt) => prompt,
            // A reply without a recorded prompt still gets a trace of its own.
            None => self.span(here, st, names::AGENT_PROMPT, "prompt", None, st.last_ms.min(at)),
        };
        // Never before the prompt, never after the reply (even with skewed clocks).
        let floor = self.spans[prompt].start_ms;
        let started = st.last_ms.max(floor).min(at.max(floor));
        let turn = self.span(here, st, names::AGENT_TURN, "turn", Some(prompt), started);
        self.spans[turn].start.insert(names::TURN_INDEX, st.turns, pi_observe_core::Class::Safe);
        let request = self.span(here, st, names::PROVIDER_REQUEST, "request", Some(turn), started);
        let span = &mut self.spans[request];
        let catalogued = self.registry.catalogued(&reply.provider, &reply.model);
        span.start.merge(model_names(Some(&reply.api), &reply.provider, &reply.model, catalogued));
        span.start = std::mem::take(&mut span.start).safe(names::CALL_KIND, names::CALL_KIND_TURN);
        span.end = usage_payload(Payload::new(), &reply.usage)
            .safe(names::RESPONSE_MODEL, response_model_of(catalogued, &reply.model, &reply.model))
            .safe(names::STOP_REASON, reply.stop_reason.as_str())
            .content(ContentKind::Completion, names::COMPLETION_TEXT, reply.text());
        span.error = match reply.stop_reason {
            StopReason::Error => Some(ErrorInfo::new(
                names::ERROR_PROVIDER,
                reply.error_message.clone().unwrap_or_else(|| "provider error".into()),
            )),
            StopReason::Aborted => {
                span.end.insert(names::ABORTED, true, pi_observe_core::Class::Safe);
                Some(ErrorInfo::new(names::ERROR_CANCELLED, ""))
            }
            _ => None,
        };
        st.prompt = Some(prompt);
        st.turn = Some((turn, at));
        st.turns += 1;
        st.model = Some((reply.provider.clone(), reply.model.clone()));
    }

    /// A tool result is a tool call inside the turn that asked for it.
    fn tool_result(&mut self, here: &Here<'_>, st: &State, result: &crate::message::ToolResultMessage) {
        let (parent, from) = match (st.turn, st.prompt) {
            (Some((turn, from)), _) => (Some(turn), from),
            (None, Some(prompt)) => (Some(prompt), st.last_ms),
            (None, None) => (None, here.at),
        };
        let tool = self.span(here, st, names::AGENT_TOOL_CALL, "tool", parent, from.min(here.at));
        let span = &mut self.spans[tool];
        span.start = std::mem::take(&mut span.start)
            .safe(names::TOOL_NAME, pi_observe_core::identifier_or_invalid(&result.tool_name))
            .safe(names::TOOL_CALL_ID, pi_observe_core::identifier_or_invalid(&result.tool_call_id));
        span.end = Payload::new().safe(names::IS_ERROR, result.is_error);
        if let Some(usage) = &result.usage {
            span.end =
                usage_payload(std::mem::take(&mut span.end), usage).safe(names::CALL_KIND, names::CALL_KIND_TOOL);
        }
        if result.is_error {
            span.error = Some(ErrorInfo::new(names::ERROR_TOOL, ""));
        }
    }
}

fn emit(spans: &[SpanRec], index: usize, out: &mut Vec<ObsEvent>) {
    let span = &spans[index];
    let millis = |ms: i64| Timestamp::from_unix_nanos(u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000));
    let record = |kind, at, payload: &Payload| {
        let mut event = ObsEvent::new(kind, span.name, span.trace);
        event.span_id = Some(span.span);
        event.parent_span_id = span.parent;
        event.timestamp = millis(at);
        event.context = span.context.clone();
        event.payload = payload.clone();
        event
    };
    out.push(record(EventKind::Start, span.start_ms, &span.start));
    for child in &span.children {
        emit(spans, *child, out);
    }
    // As live: the end record carries the start payload merged with what the end recorded.
    let mut payload = span.start.clone();
    payload.merge(span.end.clone());
    let mut end = record(if span.error.is_some() { EventKind::Error } else { EventKind::End }, span.end_ms, &payload);
    end.duration = Some(std::time::Duration::from_millis(u64::try_from(span.end_ms - span.start_ms).unwrap_or(0)));
    end.error = span.error.clone();
    out.push(end);
}

/// `payload` plus the contract's usage fields (the same as a live provider request's).
fn usage_payload(mut payload: Payload, usage: &Usage) -> Payload {
    payload.merge(crate::provider::usage_payload(usage));
    payload
}

/// When the entry happened: its message's own time, else the entry timestamp.
fn entry_millis(entry: &Entry) -> Option<i64> {
    match &entry.kind {
        EntryKind::Message { message } => Some(message.timestamp()),
        _ => None,
    }
    .filter(|ms| *ms > 0)
    .or_else(|| parse_iso8601(&entry.timestamp))
}

/// A stable 64-bit hash (FNV-1a, then a SplitMix64 finaliser so the bits are uniform — trace
/// sampling reads them): the same on every machine and Rust version.
fn stable_hash(seed: u64, parts: &[&str]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ seed;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn trace_id(session: &str, entry: &str) -> TraceId {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&stable_hash(1, &[session, entry]).to_be_bytes());
    bytes[8..].copy_from_slice(&stable_hash(2, &[session, entry]).to_be_bytes());
    TraceId::from_bytes(bytes).unwrap_or_else(TraceId::random)
}

fn span_id(session: &str, entry: &str, tag: &str) -> SpanId {
    SpanId::from_bytes(stable_hash(3, &[session, entry, tag]).to_be_bytes()).unwrap_or_else(SpanId::random)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays must keep their ids across versions of this crate (a backfill run twice, months
    /// apart, must not duplicate traces): the derivation is pinned here.
    #[test]
    fn derived_ids_are_pinned() {
        let trace = trace_id("3fbf046b-87b8-0b75-51a1-7495ac82f541", "a1b2c3d4").to_string();
        let span = span_id("3fbf046b-87b8-0b75-51a1-7495ac82f541", "a1b2c3d4", "prompt").to_string();
        assert_eq!((trace.len(), span.len()), (32, 16));
        assert_eq!(trace, PINNED_TRACE);
        assert_eq!(span, PINNED_SPAN);
        assert_ne!(span_id("s", "e", "turn"), span_id("s", "e", "request"));
        assert_ne!(trace_id("s", "e1"), trace_id("s", "e2"));
    }

    #[test]
    fn skewed_clocks_and_missing_prompts_neither_panic_nor_break_pairing() {
        let lines = [
            r#"{"type":"model_change","id":"m0","parentId":null,"timestamp":"2024-12-03T14:00:00.000Z","provider":"faux","modelId":"faux-1"}"#,
            r#"{"type":"message","id":"u1","parentId":"m0","timestamp":"2024-12-03T14:00:05.000Z","message":{"role":"user","content":"hi","timestamp":1733234405000}}"#,
            // The reply claims to be older than the prompt.
            r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2024-12-03T14:00:01.000Z","message":{"role":"assistant","content":[],"api":"faux","provider":"faux","model":"faux-1","usage":{"input":3,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":4,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1733234401000}}"#,
            // A tool result whose turn is on another branch, and a compaction with no prompt.
            r#"{"type":"message","id":"t1","parentId":"m0","timestamp":"not a time","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[],"isError":true,"timestamp":0}}"#,
            r#"{"type":"compaction","id":"c1","parentId":"m0","timestamp":"2024-12-03T14:10:00.000Z","summary":"s","tokensBefore":10}"#,
        ];
        let entries = lines.iter().map(|l| serde_json::from_str::<Entry>(l).unwrap()).collect();
        let header =
            serde_json::from_str(r#"{"type":"session","version":3,"id":"s1","timestamp":"2024-12-03T14:00:00.000Z"}"#)
                .unwrap();
        let session = Session::from_parts(header, entries);
        let events = replay(&session, &Registry::builtin());
        pi_observe_core::testing::assert_paired(&events);
        let starts: HashMap<SpanId, &ObsEvent> =
            events.iter().filter(|e| e.kind == EventKind::Start).map(|e| (e.span_id.unwrap(), e)).collect();
        for start in starts.values() {
            if let Some(parent) = start.parent_span_id {
                assert!(start.timestamp >= starts[&parent].timestamp, "{} starts before its parent", start.name);
            }
        }
        let names: Vec<_> = events.iter().filter(|e| e.kind == EventKind::Start).map(|e| e.name.to_string()).collect();
        assert_eq!(
            names,
            [
                names::AGENT_PROMPT,
                names::AGENT_TURN,
                names::PROVIDER_REQUEST,
                names::AGENT_TOOL_CALL,
                names::AGENT_COMPACTION
            ]
        );
        assert!(events.iter().any(|e| e.kind == EventKind::Error && e.name == names::AGENT_TOOL_CALL));
    }

    const PINNED_TRACE: &str = "4be3c39e9ed50b16937e6d351a1ec16e";
    const PINNED_SPAN: &str = "37f59ac567b687bd";
}
