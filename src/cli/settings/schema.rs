//! The keys pi knows, as types: upstream pi's settings (all of them, so a file written for
//! upstream produces no warnings), our `telemetry` section (each sink's part declared by the sink
//! itself), and the managed-only `policy` section. Each file is deserialized into
//! [`SettingsDoc`] when it is read: a known key with a wrong value is an error naming its key path
//! (serde's words, the path from `serde_path_to_error`); a key no type has is kept in the file
//! and listed (`serde_ignored`) so the caller can warn about it once (typo protection). Values
//! are then read layer by layer with their origin (`Settings::get`).

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde::de::{self, DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde_json::{Map, Value};

/// The outcome of a check: the file as types, and its unknown keys.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The known sections (`telemetry.sinks` is each sink's own, in `sinks`).
    pub doc: SettingsDoc,
    /// `telemetry.sinks`: each declared sink's settings as its own type.
    pub sinks: SinkSections,
    /// Dotted paths of unknown keys.
    pub unknown: Vec<String>,
}

/// What every sink's settings type (`telemetry.sinks.NAME`) has, for the code that handles every
/// sink alike (is it on in the files, what does it capture); the rest is read by the sink itself
/// through [`SettingsFile::sink`](super::SettingsFile::sink).
pub trait SinkSection: Any + Send + Sync + std::fmt::Debug {
    /// `enabled`: `false` turns off a sink a less binding file turned on.
    fn enabled(&self) -> Option<bool>;
    /// `capture`: the content kinds the sink may receive, as written (`all` allowed).
    fn capture(&self) -> Option<&[String]>;
}

/// Implements [`SinkSection`] for a sink's settings struct with the fields
/// `enabled: Option<bool>` and `capture: Option<Vec<String>>`.
macro_rules! sink_section {
    ($settings:ty) => {
        impl $crate::cli::settings::SinkSection for $settings {
            fn enabled(&self) -> Option<bool> {
                self.enabled
            }

            fn capture(&self) -> Option<&[String]> {
                self.capture.as_deref()
            }
        }
    };
}
pub(crate) use sink_section;

/// Each declared sink's settings in one file, by sink name.
#[derive(Debug, Clone, Default)]
pub struct SinkSections(BTreeMap<String, Arc<dyn SinkSection>>);

impl SinkSections {
    /// Sink `name`'s settings, when the file has them.
    pub fn get(&self, name: &str) -> Option<&dyn SinkSection> {
        self.0.get(name).map(|s| &**s)
    }
}

/// Checks a sink's settings object as `T`: `T` itself and the dotted paths of the keys `T` does
/// not have, or the first wrong value as `(key path, what is wrong)`. A sink declares
/// `check::<ItsSettings>` as its [`SinkCheck`].
pub fn check<T: SinkSection + DeserializeOwned>(value: &Value) -> Result<SinkChecked, (String, String)> {
    parse::<T>(value.clone()).map(|(section, unknown)| (Arc::new(section) as Arc<dyn SinkSection>, unknown))
}

/// A sink's settings as its type, and the keys it does not know.
pub type SinkChecked = (Arc<dyn SinkSection>, Vec<String>);

/// `value` as `T`, with the dotted paths of the keys `T` does not have; or the first wrong value
/// as `(key path, what is wrong)`.
fn parse<T: DeserializeOwned>(value: Value) -> Result<(T, Vec<String>), (String, String)> {
    let mut unknown = Vec::new();
    let mut note = |path: serde_ignored::Path<'_>| unknown.push(dotted(&path));
    let ignoring = serde_ignored::Deserializer::new(value, &mut note);
    match serde_path_to_error::deserialize::<_, T>(ignoring) {
        Ok(parsed) => Ok((parsed, unknown)),
        Err(e) => {
            let path = e.path().to_string();
            Err((if path == "." { String::new() } else { path }, reworded(&e.into_inner().to_string())))
        }
    }
}

/// serde's message as the settings' other errors say it: `expected …, found …`.
fn reworded(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some((found, expected)) = message.strip_prefix(prefix).and_then(|m| m.split_once(", expected ")) {
            return format!("expected {expected}, found {found}");
        }
    }
    if let Some((variant, expected)) =
        message.strip_prefix("unknown variant ").and_then(|m| m.split_once(", expected "))
    {
        return format!("expected {}, found {variant}", expected.replace('`', ""));
    }
    message.to_owned()
}

/// `a.b.c` for a path serde_ignored reports (its `Option` and newtype steps left out).
fn dotted(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    let join = |parent: &Path<'_>, key: &str| match dotted(parent) {
        parent if parent.is_empty() => key.to_owned(),
        parent => format!("{parent}.{key}"),
    };
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => join(parent, &index.to_string()),
        Path::Map { parent, key } => join(parent, key),
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => dotted(parent),
    }
}

/// How a sink's settings object is checked and typed (`check::<ItsSettings>`).
pub type SinkCheck = fn(&Value) -> Result<SinkChecked, (String, String)>;

/// Every sink's settings check, by name, as the sinks declare them at start.
static SINKS: OnceLock<Vec<(&'static str, SinkCheck)>> = OnceLock::new();

/// Declares the sinks' settings (`telemetry.sinks.NAME`), once, before any settings file is read.
/// Until then every sink name is unknown.
pub fn declare_sinks(sinks: Vec<(&'static str, SinkCheck)>) {
    let _ = SINKS.set(sinks);
}

/// Checks a settings object (`managed`: the managed policy's file, which also knows `policy`).
pub(crate) fn check_settings(value: &Map<String, Value>, managed: bool) -> Result<Checked, (String, String)> {
    let mut object = value.clone();
    let mut unknown = Vec::new();
    // `policy` is the managed file's own section: anywhere else it is unknown.
    if !managed && object.remove("policy").is_some() {
        unknown.push("policy".into());
    }
    let sinks = object.get_mut("telemetry").and_then(Value::as_object_mut).and_then(|t| t.remove("sinks"));
    let (doc, in_doc) = parse::<SettingsDoc>(Value::Object(object))?;
    unknown.extend(in_doc);
    let sinks = match sinks {
        Some(sinks) => check_sinks(&sinks, &mut unknown)?,
        None => SinkSections::default(),
    };
    Ok(Checked { doc, sinks, unknown })
}

/// `telemetry.sinks`: each name a sink declared, checked and typed by that sink; the others are
/// added to `unknown`.
fn check_sinks(sinks: &Value, unknown: &mut Vec<String>) -> Result<SinkSections, (String, String)> {
    const AT: &str = "telemetry.sinks";
    let Some(sinks) = sinks.as_object() else {
        return Err((AT.into(), format!("expected an object, found {}", describe(sinks))));
    };
    let declared = SINKS.get().map(Vec::as_slice).unwrap_or_default();
    let mut sections = BTreeMap::new();
    for (name, value) in sinks {
        let at = |key: &str| if key.is_empty() { format!("{AT}.{name}") } else { format!("{AT}.{name}.{key}") };
        match declared.iter().find(|(n, _)| n == name) {
            _ if value.is_null() => {}
            Some((_, check)) => {
                let (section, in_sink) = check(value).map_err(|(key, why)| (at(&key), why))?;
                unknown.extend(in_sink.iter().map(|k| at(k)));
                sections.insert(name.clone(), section);
            }
            None => unknown.push(at("")),
        }
    }
    Ok(SinkSections(sections))
}

/// "a string", "an array", … for messages.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A settings file as upstream pi documents it (`docs/settings.md`, plus the keys later
/// versions added) and our `telemetry` section; `null` anywhere means "not set here". Read to
/// check a file; the values themselves are looked up layer by layer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // the fields are the schema: deserializing checks them
pub(crate) struct SettingsDoc {
    last_changelog_version: Option<String>,
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    pub default_thinking_level: Option<ThinkingLevel>,
    hide_thinking_block: Option<bool>,
    thinking_budgets: Option<ThinkingBudgets>,
    transport: Option<Transport>,
    steering_mode: Option<Delivery>,
    follow_up_mode: Option<Delivery>,
    pub theme: Option<String>,
    quiet_startup: Option<bool>,
    collapse_changelog: Option<bool>,
    double_escape_action: Option<DoubleEscapeAction>,
    tree_filter_mode: Option<TreeFilterMode>,
    editor_padding_x: Option<Count>,
    autocomplete_max_visible: Option<Count>,
    show_hardware_cursor: Option<bool>,
    pub compaction: Option<Compaction>,
    branch_summary: Option<BranchSummary>,
    pub retry: Option<Retry>,
    terminal: Option<Terminal>,
    images: Option<Images>,
    shell_path: Option<String>,
    shell_command_prefix: Option<String>,
    npm_command: Option<Vec<String>>,
    pub enabled_models: Option<Vec<String>>,
    markdown: Option<Markdown>,
    /// Upstream's `packages` entries are strings or objects: kept as written.
    packages: Option<Value>,
    pub extensions: Option<super::Extensions>,
    pub skills: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub themes: Option<Vec<String>>,
    enable_skill_commands: Option<bool>,
    pub session_dir: Option<String>,
    pub expose_session_environment: Option<bool>,
    pub telemetry: Option<Telemetry>,
    /// The managed policy's own section (only read from the managed file).
    pub policy: Option<Policy>,
}

/// A thinking level (`off` … `xhigh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ThinkingLevel {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

#[derive(Debug, Clone, Deserialize)]
#[allow(dead_code)]
struct ThinkingBudgets {
    minimal: Option<Count>,
    low: Option<Count>,
    medium: Option<Count>,
    high: Option<Count>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Transport {
    Sse,
    Websocket,
    Auto,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Delivery {
    All,
    OneAtATime,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DoubleEscapeAction {
    Tree,
    Fork,
    None,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum TreeFilterMode {
    Default,
    NoTools,
    UserOnly,
    LabeledOnly,
    All,
}

/// `compaction`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Compaction {
    pub enabled: Option<bool>,
    pub reserve_tokens: Option<Count>,
    pub keep_recent_tokens: Option<Count>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct BranchSummary {
    reserve_tokens: Option<Count>,
    skip_prompt: Option<bool>,
}

/// `retry`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Retry {
    pub enabled: Option<bool>,
    pub max_retries: Option<Count>,
    pub base_delay_ms: Option<Count>,
    pub max_delay_ms: Option<Count>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Terminal {
    show_images: Option<bool>,
    clear_on_shrink: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Images {
    auto_resize: Option<bool>,
    block_images: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Markdown {
    code_block_indent: Option<String>,
}

/// Our `telemetry` section (its `sinks` are checked by each sink, see [`declare_sinks`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Telemetry {
    pub redact: Option<Vec<String>>,
    /// `"storage"`: session storage as spans (default: events on the operation).
    pub trace_detail: Option<TraceDetail>,
    /// `telemetry.metrics`: what metrics are split by.
    pub metrics: Option<MetricsSettings>,
    pub sampler: Option<Sampler>,
    pub spool: Option<Spool>,
    pub attribution: Option<Attribution>,
}

/// `telemetry.sampler`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Sampler {
    pub name: Option<SamplerName>,
    pub arg: Option<Ratio>,
}

/// `telemetry.metrics`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MetricsSettings {
    /// The metric dimensions (as `--metric-dims` takes them); `telemetry.sinks.otlp.metricDims`
    /// wins when both are set.
    pub dimensions: Option<Vec<String>>,
}

/// `telemetry.traceDetail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TraceDetail {
    /// The operations, with session storage as events on them.
    Default,
    /// Session storage as spans too.
    Storage,
}

/// A sampler's name, as `OTEL_TRACES_SAMPLER` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SamplerName {
    AlwaysOn,
    AlwaysOff,
    Traceidratio,
    ParentbasedAlwaysOn,
    ParentbasedAlwaysOff,
    ParentbasedTraceidratio,
}

/// `telemetry.spool`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Spool {
    pub enabled: Option<bool>,
    pub dir: Option<String>,
    pub max_bytes: Option<Count>,
    pub max_age_days: Option<Number>,
}

/// `telemetry.attribution`: `required` (a list of keys), and any attribution key as a string
/// (its value) or as `KEYCommand` (a command printing it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Attribution {
    /// `required`, when set.
    pub required: Option<Vec<String>>,
    /// Every other key as written (`orgId`, `userIdCommand`, …), in file order; `null` ones left out.
    pub values: Vec<(String, String)>,
}

impl Attribution {
    /// The value written for `key` (`orgId`, `orgIdCommand`).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

impl<'de> Deserialize<'de> for Attribution {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Attribution;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of attribution keys")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Attribution, A::Error> {
                let mut attribution = Attribution::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "required" {
                        attribution.required = map.next_value::<Option<Vec<String>>>()?;
                    } else if let Some(value) = map.next_value::<Option<String>>()? {
                        attribution.values.push((key, value));
                    }
                }
                Ok(attribution)
            }
        }
        d.deserialize_map(Keys)
    }
}

/// The managed policy's own section.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Policy {
    pub allowed_providers: Option<Vec<String>>,
    pub allowed_models: Option<Vec<String>>,
    pub allow_non_managed_extensions: Option<bool>,
    pub allow_project_resources: Option<bool>,
}

/// A whole number ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Count(pub u64);

/// Any finite number ≥ 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(pub f64);

/// A number from 0 to 1 (a sampling ratio).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio(pub f64);

impl SamplerName {
    /// As `OTEL_TRACES_SAMPLER` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SamplerName::AlwaysOn => "always_on",
            SamplerName::AlwaysOff => "always_off",
            SamplerName::Traceidratio => "traceidratio",
            SamplerName::ParentbasedAlwaysOn => "parentbased_always_on",
            SamplerName::ParentbasedAlwaysOff => "parentbased_always_off",
            SamplerName::ParentbasedTraceidratio => "parentbased_traceidratio",
        }
    }
}

impl ThinkingLevel {
    /// As settings and the agent spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
        }
    }
}

/// Accepts finite numbers ≥ 0 (at most `max`), saying `expected` otherwise.
struct NumberVisitor {
    expected: &'static str,
    max: Option<f64>,
}

impl Visitor<'_> for NumberVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.expected)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        self.visit_f64(v as f64)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        if v < 0 { Err(E::invalid_value(Unexpected::Signed(v), &self)) } else { self.visit_f64(v as f64) }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        if v.is_finite() && v >= 0.0 && self.max.is_none_or(|max| v <= max) {
            Ok(v)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A whole number as JSON writes it: `8192`, not `8192.0`.
        struct Whole;
        impl Visitor<'_> for Whole {
            type Value = u64;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a whole number ≥ 0")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
                Ok(v)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
                u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
            }
        }
        d.deserialize_any(Whole).map(Count)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberVisitor { expected: "a number ≥ 0", max: None }).map(Number)
    }
}

impl<'de> Deserialize<'de> for Ratio {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberVisitor { expected: "a ratio between 0 and 1", max: Some(1.0) }).map(Ratio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GLOBAL: bool = false;
    const MANAGED: bool = true;

    /// The OTLP sink's settings, as a sink would declare them.
    fn declare() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Otlp {
            enabled: Option<bool>,
            endpoint: Option<String>,
            headers: Option<std::collections::BTreeMap<String, Option<String>>>,
        }
        impl SinkSection for Otlp {
            fn enabled(&self) -> Option<bool> {
                self.enabled
            }
            fn capture(&self) -> Option<&[String]> {
                None
            }
        }
        declare_sinks(vec![("otlp", check::<Otlp>)]);
    }

    fn run(json: &str, managed: bool) -> Result<Vec<String>, (String, String)> {
        declare();
        let Value::Object(map) = serde_json::from_str(json).unwrap() else { panic!() };
        check_settings(&map, managed).map(|c| c.unknown)
    }

    #[test]
    fn upstream_keys_pass_and_unknown_keys_are_listed_with_their_path() {
        let unknown = run(
            r#"{"defaultProvider":"anthropic","compaction":{"enabled":true,"reserveTokens":8192,"extra":1},
                "packages":["a",{"source":"b"}],"defaultThinkingLevel":"high","telemetery":{},
                "telemetry":{"sinks":{"otlp":{"endpiont":"x","headers":{"authorization":"Bearer ${T}"}},"otpl":{}},
                             "attribution":{"orgId":"acme","userIdCommand":"git config user.email","required":["userId"]}}}"#,
            GLOBAL,
        )
        .unwrap();
        assert_eq!(
            unknown,
            ["compaction.extra", "telemetery", "telemetry.sinks.otlp.endpiont", "telemetry.sinks.otpl"]
        );
    }

    #[test]
    fn wrong_values_name_the_key_path() {
        let (key, expected) = run(r#"{"telemetry":{"spool":{"maxBytes":"big"}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.spool.maxBytes");
        assert_eq!(expected, "expected a whole number ≥ 0, found string \"big\"");
        let (key, expected) = run(r#"{"defaultThinkingLevel":"max"}"#, GLOBAL).unwrap_err();
        assert_eq!(
            (key.as_str(), expected.contains("expected one of off, minimal")),
            ("defaultThinkingLevel", true),
            "{expected}"
        );
        let (key, _) = run(r#"{"telemetry":{"attribution":{"orgId":7}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.attribution.orgId");
        let (key, expected) = run(r#"{"telemetry":{"sampler":{"arg":1.5}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.sampler.arg");
        assert!(expected.contains("a ratio between 0 and 1"), "{expected}");
        let (key, _) = run(r#"{"telemetry":{"sinks":{"otlp":{"enabled":"yes"}}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.sinks.otlp.enabled");
        assert!(
            run(r#"{"compaction":{"reserveTokens":null},"theme":null}"#, GLOBAL).unwrap().is_empty(),
            "null is unset"
        );
    }

    #[test]
    fn policy_is_known_only_in_the_managed_file() {
        assert_eq!(run(r#"{"policy":{"allowProjectResources":false}}"#, GLOBAL).unwrap(), ["policy"]);
        assert!(run(r#"{"policy":{"allowProjectResources":false}}"#, MANAGED).unwrap().is_empty());
        assert!(run(r#"{"policy":{"allowProjectResources":"no"}}"#, MANAGED).is_err());
    }
}
