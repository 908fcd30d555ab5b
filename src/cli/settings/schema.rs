//! The keys pi knows, with their types: upstream pi's settings (all of them, so a file written
//! for upstream produces no warnings), our `telemetry` section, and the managed-only `policy`
//! section. A known key with a wrong value is an error naming its path; an unknown key is kept
//! and listed so the caller can warn about it once (typo protection).

use serde_json::{Map, Value};

/// The type of a known key.
#[derive(Debug)]
pub enum Ty {
    /// Any string.
    Str,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// `true` / `false`.
    Bool,
    /// A whole number ≥ 0.
    Count,
    /// Any finite number ≥ 0.
    Number,
    /// A number from 0 to 1 (a sampling ratio).
    Ratio,
    /// A list of strings.
    Strs,
    /// Anything (kept as written; upstream's `packages` entries are strings or objects).
    Any,
    /// An object with these known keys; any other key is unknown.
    Obj(&'static [(&'static str, Ty)]),
    /// An object with these known keys; every other key holds a value of the given type.
    Open(&'static [(&'static str, Ty)], &'static Ty),
    /// `telemetry.sinks`: one object per sink, with the keys each sink declares
    /// ([`declare_sinks`]); a name no sink has is unknown.
    Sinks,
}

/// Every sink's settings object, by name, as the sinks declare them at start.
static SINKS: std::sync::OnceLock<Vec<(&'static str, &'static Ty)>> = std::sync::OnceLock::new();

/// Declares the sinks' settings (`telemetry.sinks.NAME`), once, before any settings file is read.
/// Until then every sink name is unknown.
pub fn declare_sinks(sinks: Vec<(&'static str, &'static Ty)>) {
    let _ = SINKS.set(sinks);
}

/// `enabled`, which every sink's settings have: on (or off) from the settings files.
pub const ENABLED: (&str, Ty) = ("enabled", Ty::Bool);

use Ty::{Any, Bool, Count, Number, Obj, OneOf, Open, Ratio, Str, Strs};

const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
const DELIVERY: &[&str] = &["all", "one-at-a-time"];

/// Upstream pi's `settings.json` keys (`packages/coding-agent/docs/settings.md`) plus the ones
/// later versions added, and our `telemetry`.
pub(crate) const SETTINGS: &[(&str, Ty)] = &[
    ("lastChangelogVersion", Str),
    ("defaultProvider", Str),
    ("defaultModel", Str),
    ("defaultThinkingLevel", OneOf(THINKING_LEVELS)),
    ("hideThinkingBlock", Bool),
    ("thinkingBudgets", Obj(&[("minimal", Count), ("low", Count), ("medium", Count), ("high", Count)])),
    ("transport", OneOf(&["sse", "websocket", "auto"])),
    ("steeringMode", OneOf(DELIVERY)),
    ("followUpMode", OneOf(DELIVERY)),
    ("theme", Str),
    ("quietStartup", Bool),
    ("collapseChangelog", Bool),
    ("doubleEscapeAction", OneOf(&["tree", "fork", "none"])),
    ("treeFilterMode", OneOf(&["default", "no-tools", "user-only", "labeled-only", "all"])),
    ("editorPaddingX", Count),
    ("autocompleteMaxVisible", Count),
    ("showHardwareCursor", Bool),
    ("compaction", Obj(&[("enabled", Bool), ("reserveTokens", Count), ("keepRecentTokens", Count)])),
    ("branchSummary", Obj(&[("reserveTokens", Count), ("skipPrompt", Bool)])),
    ("retry", Obj(&[("enabled", Bool), ("maxRetries", Count), ("baseDelayMs", Count), ("maxDelayMs", Count)])),
    ("terminal", Obj(&[("showImages", Bool), ("clearOnShrink", Bool)])),
    ("images", Obj(&[("autoResize", Bool), ("blockImages", Bool)])),
    ("shellPath", Str),
    ("shellCommandPrefix", Str),
    ("npmCommand", Strs),
    ("enabledModels", Strs),
    ("markdown", Obj(&[("codeBlockIndent", Str)])),
    ("packages", Any),
    ("extensions", Strs),
    ("skills", Strs),
    ("prompts", Strs),
    ("themes", Strs),
    ("enableSkillCommands", Bool),
    ("sessionDir", Str),
    ("exposeSessionEnvironment", Bool),
    ("telemetry", Obj(TELEMETRY)),
];

/// `capture`, which every sink's settings have: content kinds (or `all`).
pub const CAPTURE: (&str, Ty) = ("capture", Strs);

/// Our `telemetry` section.
const TELEMETRY: &[(&str, Ty)] = &[
    ("sinks", Ty::Sinks),
    ("redact", Strs),
    (
        "sampler",
        Obj(&[
            (
                "name",
                OneOf(&[
                    "always_on",
                    "always_off",
                    "traceidratio",
                    "parentbased_always_on",
                    "parentbased_always_off",
                    "parentbased_traceidratio",
                ]),
            ),
            ("arg", Ratio),
        ]),
    ),
    ("spool", Obj(&[("enabled", Bool), ("dir", Str), ("maxBytes", Count), ("maxAgeDays", Number)])),
    ("attribution", Open(&[("required", Strs)], &Str)),
];

/// The managed policy's own section (only read from the managed file).
const POLICY: (&str, Ty) = (
    "policy",
    Obj(&[
        ("allowedProviders", Strs),
        ("allowedModels", Strs),
        ("allowNonManagedExtensions", Bool),
        ("allowProjectResources", Bool),
    ]),
);

/// The outcome of a check: the unknown keys.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Dotted paths of unknown keys.
    pub unknown: Vec<String>,
}

/// Checks every known key of a settings object (`managed`: the managed policy's file, which also
/// knows `policy`); `Err((key path, expected))` for the first wrong value.
pub(crate) fn check_settings(value: &Map<String, Value>, managed: bool) -> Result<Checked, (String, String)> {
    let mut checked = Checked::default();
    let mut path = Vec::new();
    for (key, v) in value {
        path.push(key.as_str());
        let ty = SETTINGS.iter().chain(managed.then_some(&POLICY)).find(|(k, _)| k == key);
        match ty {
            Some((_, ty)) => check(v, ty, &mut path, &mut checked)?,
            None => checked.unknown.push(key.clone()),
        }
        path.pop();
    }
    Ok(checked)
}

fn check<'a>(
    value: &'a Value,
    ty: &Ty,
    path: &mut Vec<&'a str>,
    checked: &mut Checked,
) -> Result<(), (String, String)> {
    let wrong =
        |path: &[&str], expected: String| Err((path.join("."), format!("{expected}, found {}", describe(value))));
    match ty {
        // `null` means "not set here" (a lower file's value applies).
        _ if value.is_null() => Ok(()),
        Any => Ok(()),
        Str if value.is_string() => Ok(()),
        Str => wrong(path, "expected a string".into()),
        OneOf(allowed) if value.as_str().is_some_and(|s| allowed.contains(&s)) => Ok(()),
        OneOf(allowed) => wrong(path, format!("expected one of {}", allowed.join(", "))),
        Bool if value.is_boolean() => Ok(()),
        Bool => wrong(path, "expected true or false".into()),
        Count if value.as_u64().is_some() => Ok(()),
        Count => wrong(path, "expected a whole number ≥ 0".into()),
        Number if value.as_f64().is_some_and(|n| n >= 0.0) => Ok(()),
        Number => wrong(path, "expected a number ≥ 0".into()),
        Ratio if value.as_f64().is_some_and(|n| (0.0..=1.0).contains(&n)) => Ok(()),
        Ratio => wrong(path, "expected a ratio between 0 and 1".into()),
        Strs if value.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => Ok(()),
        Strs => wrong(path, "expected a list of strings".into()),
        Ty::Sinks => {
            let Some(object) = value.as_object() else { return wrong(path, "expected an object".into()) };
            let declared = SINKS.get().map(Vec::as_slice).unwrap_or_default();
            for (name, v) in object {
                path.push(name.as_str());
                match declared.iter().find(|(n, _)| n == name) {
                    Some((_, ty)) => check(v, ty, path, checked)?,
                    None => checked.unknown.push(path.join(".")),
                }
                path.pop();
            }
            Ok(())
        }
        Obj(fields) | Open(fields, _) => {
            let Some(object) = value.as_object() else { return wrong(path, "expected an object".into()) };
            for (key, v) in object {
                path.push(key.as_str());
                match (fields.iter().find(|(k, _)| k == key), ty) {
                    (Some((_, field)), _) => check(v, field, path, checked)?,
                    (None, Open(_, rest)) => check(v, rest, path, checked)?,
                    (None, _) => checked.unknown.push(path.join(".")),
                }
                path.pop();
            }
            Ok(())
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The OTLP sink's settings, as a sink would declare them.
    fn declare() {
        const OTLP: Ty = Obj(&[ENABLED, ("endpoint", Str), ("headers", Open(&[], &Str)), CAPTURE]);
        declare_sinks(vec![("otlp", &OTLP)]);
    }

    const GLOBAL: bool = false;
    const MANAGED: bool = true;

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
                "telemetry":{"sinks":{"otlp":{"endpiont":"x","headers":{"authorization":"Bearer ${T}"}}},
                             "attribution":{"orgId":"acme","userIdCommand":"git config user.email","required":["userId"]}}}"#,
            GLOBAL,
        )
        .unwrap();
        assert_eq!(unknown, ["compaction.extra", "telemetery", "telemetry.sinks.otlp.endpiont"]);
    }

    #[test]
    fn wrong_values_name_the_key_path() {
        let (key, expected) = run(r#"{"telemetry":{"spool":{"maxBytes":"big"}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.spool.maxBytes");
        assert_eq!(expected, "expected a whole number ≥ 0, found a string");
        let (key, expected) = run(r#"{"defaultThinkingLevel":"max"}"#, GLOBAL).unwrap_err();
        assert_eq!((key.as_str(), expected.contains("off, minimal")), ("defaultThinkingLevel", true));
        let (key, _) = run(r#"{"telemetry":{"attribution":{"orgId":7}}}"#, GLOBAL).unwrap_err();
        assert_eq!(key, "telemetry.attribution.orgId");
    }

    #[test]
    fn policy_is_known_only_in_the_managed_file() {
        assert_eq!(run(r#"{"policy":{"allowProjectResources":false}}"#, GLOBAL).unwrap(), ["policy"]);
        assert!(run(r#"{"policy":{"allowProjectResources":false}}"#, MANAGED).unwrap().is_empty());
        assert!(run(r#"{"policy":{"allowProjectResources":"no"}}"#, MANAGED).is_err());
    }
}
