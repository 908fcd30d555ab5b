//! Contract events as `tracing` events with flat fields.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, OnceLock};

use pi_observe_core::{EventKind, ObsEvent, Subscriber, Value};

use crate::setup::FieldText;
use tracing_core::callsite::{Callsite, Identifier};
use tracing_core::field::{Field, FieldSet, Value as TracingValue};
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

/// A field value for one dispatch, borrowed from the record where it can be.
enum FieldValue<'a> {
    Str(&'a str),
    Text(String),
    I64(i64),
    F64(f64),
    Bool(bool),
}

impl<'a> FieldValue<'a> {
    fn from_value(value: &'a Value) -> FieldValue<'a> {
        match value {
            Value::Str(s) => FieldValue::Str(s),
            Value::I64(v) => FieldValue::I64(*v),
            Value::F64(v) => FieldValue::F64(*v),
            Value::Bool(v) => FieldValue::Bool(*v),
            other => FieldValue::Text(pi_observe_core::value_to_json(other).to_string()),
        }
    }

    fn as_text(&self) -> FieldText<'_> {
        match self {
            FieldValue::Str(s) => FieldText::Str(s),
            FieldValue::Text(s) => FieldText::Str(s),
            FieldValue::I64(v) => FieldText::I64(*v),
            FieldValue::F64(v) => FieldText::F64(*v),
            FieldValue::Bool(v) => FieldText::Bool(*v),
        }
    }

    fn as_value(&self) -> &dyn TracingValue {
        match self {
            FieldValue::Str(s) => s,
            FieldValue::Text(s) => s,
            FieldValue::I64(v) => v,
            FieldValue::F64(v) => v,
            FieldValue::Bool(v) => v,
        }
    }
}

/// A field name as `prefix` + `key` (`payload.` + a payload key), so names need no allocation.
#[derive(Clone, Copy)]
struct Name<'a> {
    prefix: &'static str,
    key: &'a str,
}

impl Name<'_> {
    fn fixed(name: &'static str) -> Name<'static> {
        Name { prefix: "", key: name }
    }

    fn is(&self, whole: &str) -> bool {
        whole.len() == self.prefix.len() + self.key.len() && whole.starts_with(self.prefix) && whole.ends_with(self.key)
    }
}

impl Subscriber for TracingSubscriber {
    fn on_event(&self, event: &ObsEvent) {
        let level = self.level(event.kind);
        let trace = event.trace_id.hex();
        let span = event.span_id.map(|id| id.hex());
        let parent = event.parent_span_id.map(|id| id.hex());
        let mut nanos = itoa::Buffer::new();
        let mut duration_ns = itoa::Buffer::new();
        let mut fields: Vec<(Name<'_>, FieldValue<'_>)> = Vec::with_capacity(16);
        fields.extend([
            (Name::fixed("event.name"), FieldValue::Str(&event.name)),
            (Name::fixed("event.kind"), FieldValue::Str(event.kind.as_str())),
            (Name::fixed("trace_id"), FieldValue::Str(&trace)),
            (Name::fixed("time_unix_nano"), FieldValue::Str(nanos.format(event.timestamp.unix_nanos()))),
        ]);
        if let Some(span) = &span {
            fields.push((Name::fixed("span_id"), FieldValue::Str(span)));
        }
        if let Some(parent) = &parent {
            fields.push((Name::fixed("parent_span_id"), FieldValue::Str(parent)));
        }
        if let Some(duration) = event.duration {
            fields.push((Name::fixed("duration_ms"), FieldValue::F64(duration.as_secs_f64() * 1000.0)));
            fields.push((Name::fixed("duration_ns"), FieldValue::Str(duration_ns.format(duration.as_nanos()))));
        }
        if let Some(error) = &event.error {
            fields.push((Name::fixed("error.name"), FieldValue::Str(&error.name)));
            if let Some(message) = event.exportable_error_message() {
                fields.push((Name::fixed("error.message"), FieldValue::Str(message)));
            }
        }
        for (key, value) in event.context.iter() {
            fields.push((Name { prefix: "ctx.", key }, FieldValue::Str(value)));
        }
        for field in event.exportable_fields() {
            fields.push((Name { prefix: "payload.", key: &field.key }, FieldValue::from_value(&field.value)));
        }
        fields.truncate(MAX_FIELDS);
        let direct = fields.iter().map(|(name, value)| (name.prefix, name.key, value.as_text()));
        let at = std::time::Duration::from_nanos(event.timestamp.unix_nanos());
        if !crate::setup::write_direct(level, at, direct) {
            dispatch(level, &fields);
        }
    }

    /// Each event is handed to `tracing` as it comes: nothing is kept to finish. The installed
    /// JSON log writer (when that is the logger) holds their lines: it is asked to write them
    /// now — while other sinks finish — rather than when the logging's guard closes it.
    fn begin_shutdown(&self, _timeout: std::time::Duration) -> bool {
        crate::setup::flush_installed_soon();
        true
    }
}

/// One dynamically built callsite per (level, field names).
struct DynamicCallsite {
    metadata: OnceLock<Metadata<'static>>,
    /// The metadata's fields, in order (built once, borrowed by every dispatch).
    keys: OnceLock<Vec<Field>>,
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

/// A callsite with no fields at one level, for asking the filter about target [`TARGET`] at that
/// level ([`crate::setup::write_direct`]); never dispatched.
struct LevelSite(&'static Metadata<'static>);

impl Callsite for LevelSite {
    fn set_interest(&self, _: Interest) {}

    fn metadata(&self) -> &Metadata<'_> {
        self.0
    }
}

macro_rules! level_site {
    ($site:ident, $meta:ident, $level:expr) => {
        static $site: LevelSite = LevelSite(&$meta);
        static $meta: Metadata<'static> = Metadata::new(
            "pi_observe event",
            TARGET,
            $level,
            None,
            None,
            None,
            FieldSet::new(&[], Identifier(&$site)),
            Kind::EVENT,
        );
    };
}

level_site!(ERROR_SITE, ERROR_METADATA, Level::ERROR);
level_site!(INFO_SITE, INFO_METADATA, Level::INFO);
level_site!(DEBUG_SITE, DEBUG_METADATA, Level::DEBUG);

/// The field-less metadata of target [`TARGET`] at `level` (the bridge's levels: error, info,
/// debug; anything else as debug).
pub(crate) fn level_metadata(level: Level) -> &'static Metadata<'static> {
    match level {
        Level::ERROR => &ERROR_METADATA,
        Level::INFO => &INFO_METADATA,
        _ => &DEBUG_METADATA,
    }
}

/// A layout already built: its level, whole field names and callsite.
struct Layout {
    level: Level,
    names: Vec<String>,
    site: &'static DynamicCallsite,
}

/// Layouts by a hash of (level, names); a lookup borrows the names and allocates nothing.
type Layouts = HashMap<u64, Vec<Layout>>;

fn layout_hash(level: Level, names: &[Name<'_>]) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    level.hash(&mut hasher);
    for name in names {
        hasher.write(name.prefix.as_bytes());
        hasher.write(name.key.as_bytes());
        hasher.write_u8(0xff);
    }
    hasher.finish()
}

fn callsite(level: Level, names: &[Name<'_>]) -> Option<&'static DynamicCallsite> {
    static LAYOUTS: OnceLock<Mutex<(Layouts, usize)>> = OnceLock::new();
    let hash = layout_hash(level, names);
    let mut guard = LAYOUTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    let (layouts, count) = &mut *guard;
    let same = |layout: &&Layout| {
        layout.level == level
            && layout.names.len() == names.len()
            && layout.names.iter().zip(names).all(|(whole, name)| name.is(whole))
    };
    if let Some(layout) = layouts.get(&hash).and_then(|bucket| bucket.iter().find(same)) {
        return Some(layout.site);
    }
    if *count >= MAX_CALLSITES {
        return None;
    }
    let site: &'static DynamicCallsite =
        Box::leak(Box::new(DynamicCallsite { metadata: OnceLock::new(), keys: OnceLock::new() }));
    let whole: Vec<String> = names.iter().map(|n| format!("{}{}", n.prefix, n.key)).collect();
    let field_names: &'static [&'static str] = Box::leak(
        whole.iter().map(|n| &*Box::leak(n.clone().into_boxed_str())).collect::<Vec<&'static str>>().into_boxed_slice(),
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
    let _ = site.keys.set(site.metadata().fields().iter().collect());
    tracing_core::callsite::register(site);
    layouts.entry(hash).or_default().push(Layout { level, names: whole, site });
    *count += 1;
    Some(site)
}

/// The fixed fields every event has (used when the layout table is full).
const FIXED: usize = 4;

fn dispatch(level: Level, fields: &[(Name<'_>, FieldValue<'_>)]) {
    let mut names = [Name::fixed(""); MAX_FIELDS];
    for (slot, (name, _)) in names.iter_mut().zip(fields) {
        *slot = *name;
    }
    let (site, fields) = match callsite(level, &names[..fields.len()]) {
        Some(site) => (site, fields),
        None => match callsite(level, &names[..FIXED.min(fields.len())]) {
            Some(site) => (site, &fields[..FIXED.min(fields.len())]),
            None => return,
        },
    };
    let metadata = site.metadata();
    if !tracing_core::dispatcher::get_default(|d| d.enabled(metadata)) {
        return;
    }
    let Some(keys) = site.keys.get() else { return };
    // `ValueSet` takes a fixed-size array: the smallest size that holds the fields is used.
    match fields.len() {
        0..=16 => dispatch_sized::<16>(metadata, keys, fields),
        17..=32 => dispatch_sized::<32>(metadata, keys, fields),
        _ => dispatch_sized::<MAX_FIELDS>(metadata, keys, fields),
    }
}

fn dispatch_sized<const N: usize>(
    metadata: &'static Metadata<'static>,
    keys: &[Field],
    fields: &[(Name<'_>, FieldValue<'_>)],
) {
    let Some(first) = keys.first() else { return };
    // Unused slots repeat the first field with no value, which visitors skip.
    let mut values: [(&Field, Option<&dyn TracingValue>); N] = [(first, None); N];
    for (slot, (key, (_, value))) in values.iter_mut().zip(keys.iter().zip(fields)) {
        *slot = (key, Some(value.as_value()));
    }
    Event::dispatch(metadata, &metadata.fields().value_set(&values));
}
