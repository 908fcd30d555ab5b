//! Contract events as `tracing` events with flat fields.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use pi_observe_core::{EventKind, ObsEvent, Subscriber, Value};
use tracing_core::callsite::{Callsite, Identifier};
use tracing_core::field::{FieldSet, Value as TracingValue};
use tracing_core::metadata::Kind;
use tracing_core::subscriber::Interest;
use tracing_core::{Event, Level, Metadata};

/// The target of every event this bridge emits.
pub const TARGET: &str = "pi_observe";

/// Fields beyond this many (payload and context keys together) are left out of one event.
const MAX_FIELDS: usize = 64;

/// Distinct field layouts (callsites) kept; events with a new layout beyond this are emitted with
/// the fixed fields only.
const MAX_CALLSITES: usize = 1024;

/// Which level `start`/`end` records get (`error` records are always ERROR, `event` records INFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpanLevel {
    /// `start`/`end` at DEBUG (the default: one INFO line per point event and ERROR per failure).
    #[default]
    Debug,
    /// `start`/`end` at INFO.
    Info,
}

/// A [`Subscriber`] that turns every contract event into one `tracing` event, target
/// `pi_observe`, with flat fields: `event.name`, `event.kind`, `trace_id`, `span_id`,
/// `parent_span_id`, `time_unix_nano`, `duration_ms` (end/error), `error.name` and
/// `error.message` (error), `ctx.<key>` for the attribution context and `payload.<key>` for every
/// exportable payload field (content only if the hub's policy for this subscriber captured it;
/// never secrets). Arrays are written as JSON text.
///
/// `tracing` needs static field names; each distinct layout of names gets one callsite, built once
/// and kept for the life of the process (bounded by [`MAX_CALLSITES`]).
///
/// ```
/// use pi_observe_core::{names, trace_operation_sync, Observability, Payload};
/// use pi_observe_log::TracingSubscriber;
///
/// let hub = Observability::new();
/// let _subscription = hub.subscribe(TracingSubscriber::new());
/// hub.in_scope(|| {
///     trace_operation_sync(names::AGENT_TOOL_CALL, Payload::new().safe(names::TOOL_NAME, "read"), |_| ())
/// });
/// ```
#[derive(Debug, Clone, Default)]
pub struct TracingSubscriber {
    span_level: SpanLevel,
}

impl TracingSubscriber {
    /// `start`/`end` at DEBUG.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the level of `start`/`end` records.
    pub fn span_level(mut self, level: SpanLevel) -> Self {
        self.span_level = level;
        self
    }

    fn level(&self, kind: EventKind) -> Level {
        match (kind, self.span_level) {
            (EventKind::Error, _) => Level::ERROR,
            (EventKind::Event, _) | (_, SpanLevel::Info) => Level::INFO,
            (EventKind::Start | EventKind::End, SpanLevel::Debug) => Level::DEBUG,
        }
    }
}

/// A field value owned for the duration of one dispatch.
enum Owned {
    Str(String),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl Owned {
    fn from_value(value: &Value) -> Owned {
        match value {
            Value::Str(s) => Owned::Str(s.to_string()),
            Value::I64(v) => Owned::I64(*v),
            Value::F64(v) => Owned::F64(*v),
            Value::Bool(v) => Owned::Bool(*v),
            other => Owned::Str(pi_observe_core::value_to_json(other).to_string()),
        }
    }

    fn as_value(&self) -> &dyn TracingValue {
        match self {
            Owned::Str(s) => s,
            Owned::I64(v) => v,
            Owned::F64(v) => v,
            Owned::Bool(v) => v,
        }
    }
}

impl Subscriber for TracingSubscriber {
    fn on_event(&self, event: &ObsEvent) {
        let level = self.level(event.kind);
        let mut fields: Vec<(String, Owned)> = vec![
            ("event.name".into(), Owned::Str(event.name.to_string())),
            ("event.kind".into(), Owned::Str(event.kind.as_str().into())),
            ("trace_id".into(), Owned::Str(event.trace_id.to_string())),
            ("time_unix_nano".into(), Owned::Str(event.timestamp.unix_nanos().to_string())),
        ];
        if let Some(span) = event.span_id {
            fields.push(("span_id".into(), Owned::Str(span.to_string())));
        }
        if let Some(parent) = event.parent_span_id {
            fields.push(("parent_span_id".into(), Owned::Str(parent.to_string())));
        }
        if let Some(duration) = event.duration {
            fields.push(("duration_ms".into(), Owned::F64(duration.as_secs_f64() * 1000.0)));
            fields.push(("duration_ns".into(), Owned::Str(duration.as_nanos().to_string())));
        }
        if let Some(error) = &event.error {
            fields.push(("error.name".into(), Owned::Str(error.name.clone())));
            if let Some(message) = event.exportable_error_message() {
                fields.push(("error.message".into(), Owned::Str(message.to_owned())));
            }
        }
        for (key, value) in event.context.iter() {
            fields.push((format!("ctx.{key}"), Owned::Str(value.to_owned())));
        }
        for field in event.exportable_fields() {
            fields.push((format!("payload.{}", field.key), Owned::from_value(&field.value)));
        }
        fields.truncate(MAX_FIELDS);
        dispatch(level, &fields);
    }
}

/// One dynamically built callsite per (level, field names).
struct DynamicCallsite {
    metadata: OnceLock<Metadata<'static>>,
}

impl Callsite for DynamicCallsite {
    fn set_interest(&self, _: Interest) {}

    fn metadata(&self) -> &Metadata<'_> {
        // Set right after the callsite is leaked, before it is registered or used.
        self.metadata.get().unwrap_or(&FALLBACK_METADATA)
    }
}

/// The callsite of [`FALLBACK_METADATA`] (never dispatched).
struct Fallback;

static FALLBACK: Fallback = Fallback;

static FALLBACK_METADATA: Metadata<'static> = Metadata::new(
    "pi_observe event",
    TARGET,
    Level::INFO,
    None,
    None,
    None,
    FieldSet::new(&[], Identifier(&FALLBACK)),
    Kind::EVENT,
);

impl Callsite for Fallback {
    fn set_interest(&self, _: Interest) {}

    fn metadata(&self) -> &Metadata<'_> {
        &FALLBACK_METADATA
    }
}

type Layouts = HashMap<(Level, Vec<String>), &'static DynamicCallsite>;

fn callsite(level: Level, names: Vec<String>) -> Option<&'static DynamicCallsite> {
    static LAYOUTS: OnceLock<Mutex<Layouts>> = OnceLock::new();
    let mut layouts = LAYOUTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (level, names);
    if let Some(site) = layouts.get(&key) {
        return Some(site);
    }
    if layouts.len() >= MAX_CALLSITES {
        return None;
    }
    let site: &'static DynamicCallsite = Box::leak(Box::new(DynamicCallsite { metadata: OnceLock::new() }));
    let field_names: &'static [&'static str] = Box::leak(
        key.1.iter().map(|n| &*Box::leak(n.clone().into_boxed_str())).collect::<Vec<&'static str>>().into_boxed_slice(),
    );
    let metadata = Metadata::new(
        "pi_observe event",
        TARGET,
        level,
        Some(file!()),
        Some(line!()),
        Some(module_path!()),
        FieldSet::new(field_names, Identifier(site)),
        Kind::EVENT,
    );
    let _ = site.metadata.set(metadata);
    tracing_core::callsite::register(site);
    layouts.insert(key, site);
    Some(site)
}

/// The fixed fields every event has (used when the layout table is full).
const FIXED: usize = 4;

fn dispatch(level: Level, fields: &[(String, Owned)]) {
    let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
    let (site, fields) = match callsite(level, names) {
        Some(site) => (site, fields),
        None => match callsite(level, fields[..FIXED].iter().map(|(n, _)| n.clone()).collect()) {
            Some(site) => (site, &fields[..FIXED]),
            None => return,
        },
    };
    let metadata = site.metadata();
    if !tracing_core::dispatcher::get_default(|d| d.enabled(metadata)) {
        return;
    }
    let field_set = metadata.fields();
    let keys: Vec<tracing_core::field::Field> = field_set.iter().collect();
    let Some(first) = keys.first() else { return };
    // `ValueSet` takes a fixed-size array: unused slots repeat the first field with no value,
    // which visitors skip.
    let mut values: [(&tracing_core::field::Field, Option<&dyn TracingValue>); MAX_FIELDS] =
        [(first, None); MAX_FIELDS];
    for (slot, (key, (_, value))) in values.iter_mut().zip(keys.iter().zip(fields)) {
        *slot = (key, Some(value.as_value()));
    }
    let value_set = field_set.value_set(&values);
    Event::dispatch(metadata, &value_set);
}
