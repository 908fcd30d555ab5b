//! `/settings`: the common options of `~/.pi/agent/settings.json` in a list, each with its value
//! there; Enter moves an option to its next value and writes the file (the other keys kept as
//! they are). What the running session can take it takes at once; the rest applies at `/reload`.
//! `/scoped-models` keeps the file's `enabledModels` (what Ctrl+P cycles through) the same way.

use std::path::Path;

use serde_json::{Map, Value};

/// An option: its dotted key, the values it cycles through (none: the themes pi loaded), and the
/// value when unset.
struct Option_ {
    key: &'static str,
    values: &'static [&'static str],
    default: &'static str,
}

const OPTIONS: &[Option_] = &[
    Option_ {
        key: "defaultThinkingLevel",
        values: &["off", "minimal", "low", "medium", "high", "xhigh"],
        default: "off",
    },
    Option_ { key: "compaction.enabled", values: &["true", "false"], default: "true" },
    Option_ { key: "retry.enabled", values: &["true", "false"], default: "true" },
    Option_ { key: "exposeSessionEnvironment", values: &["true", "false"], default: "true" },
    Option_ { key: "steeringMode", values: &["one-at-a-time", "all"], default: "one-at-a-time" },
    Option_ { key: "followUpMode", values: &["one-at-a-time", "all"], default: "one-at-a-time" },
    Option_ { key: "theme", values: &[], default: "dark" },
];

/// `(label, key)` of each option, its value in `file` shown.
pub fn items(file: &Path) -> Vec<(String, String)> {
    let doc = read(file).unwrap_or_default();
    OPTIONS
        .iter()
        .map(|o| {
            let value = get(&doc, o.key).unwrap_or_else(|| format!("{} (default)", o.default));
            (format!("{:<28} {value}", o.key), o.key.to_owned())
        })
        .collect()
}

/// Moves `key` to its next value in `file` (`theme`: the next of `themes`) and writes it; the new
/// value.
pub fn cycle(file: &Path, key: &str, themes: &[String]) -> Result<String, String> {
    let option = OPTIONS.iter().find(|o| o.key == key).ok_or_else(|| format!("{key}: not an option here"))?;
    let values: Vec<&str> =
        if option.values.is_empty() { themes.iter().map(String::as_str).collect() } else { option.values.to_vec() };
    let mut doc = read(file)?;
    let current = get(&doc, key).unwrap_or_else(|| option.default.to_owned());
    let at = values.iter().position(|v| *v == current).map_or(0, |i| i + 1);
    let next = *values.get(at % values.len().max(1)).ok_or_else(|| format!("{key}: nothing to choose from"))?;
    let value = match next {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        text => Value::String(text.to_owned()),
    };
    set_key(&mut doc, key, value);
    write(file, doc)?;
    Ok(next.to_owned())
}

/// Sets `key` (dotted) to `value` in `file`, the other keys kept.
pub fn set(file: &Path, key: &str, value: Value) -> Result<(), String> {
    let mut doc = read(file)?;
    set_key(&mut doc, key, value);
    write(file, doc)
}

/// The global settings file (`~/.pi/agent/settings.json`) these lists edit.
pub fn global_file() -> Option<std::path::PathBuf> {
    crate::cli::paths::agent_dir().map(|dir| dir.join("settings.json"))
}

/// Writes `models` (`provider/id`, in cycle order) as `enabledModels` in `file`; `None` (every
/// model) removes the key.
pub fn save_enabled_models(file: &Path, models: Option<&[String]>) -> Result<(), String> {
    let mut doc = read(file)?;
    match models {
        Some(list) => doc.insert("enabledModels".into(), Value::from(list.to_vec())),
        None => doc.remove("enabledModels"),
    };
    write(file, doc)
}

fn write(file: &Path, doc: Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(&Value::Object(doc)).map_err(|e| e.to_string())?;
    std::fs::write(file, format!("{text}\n")).map_err(|e| format!("{}: {e}", file.display()))
}

/// The file as a JSON object (empty when it does not exist); one that is not is not touched.
fn read(file: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(format!("{}: not a JSON object; fix it by hand first", file.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("{}: {e}", file.display())),
    }
}

fn get(doc: &Map<String, Value>, key: &str) -> Option<String> {
    let mut parts = key.split('.');
    let mut value = doc.get(parts.next()?)?;
    for part in parts {
        value = value.get(part)?;
    }
    Some(match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn set_key(doc: &mut Map<String, Value>, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            doc.insert(key.to_owned(), value);
        }
        Some((head, rest)) => {
            let entry = doc.entry(head.to_owned()).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(inner) = entry {
                set_key(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_cycle_in_the_file_and_other_keys_stay() {
        let dir = std::env::temp_dir().join(format!("pi-settings-panel-{}", pi_observe::core::SpanId::random()));
        let file = dir.join("settings.json");
        assert!(items(&file)[1].0.contains("true (default)"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&file, r#"{"defaultModel": "gpt-4o", "compaction": {"reserveTokens": 1000}}"#).unwrap();
        assert_eq!(cycle(&file, "compaction.enabled", &[]).unwrap(), "false");
        assert_eq!(cycle(&file, "defaultThinkingLevel", &[]).unwrap(), "minimal");
        // The theme cycles through the themes pi loaded.
        let themes = ["dark".to_owned(), "light".to_owned(), "ocean".to_owned()];
        assert_eq!(cycle(&file, "theme", &themes).unwrap(), "light");
        assert_eq!(cycle(&file, "theme", &themes).unwrap(), "ocean");
        assert_eq!(cycle(&file, "theme", &themes).unwrap(), "dark");
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"defaultModel": "gpt-4o", "defaultThinkingLevel": "minimal", "theme": "dark",
                "compaction": {"reserveTokens": 1000, "enabled": false}})
        );
        assert!(items(&file)[1].0.ends_with("false"));
        save_enabled_models(&file, Some(&["faux/b".to_owned(), "faux/a".to_owned()])).unwrap();
        assert_eq!(crate::cli::model_scope::enabled_models_in(&file), ["faux/b", "faux/a"]);
        save_enabled_models(&file, None).unwrap();
        assert!(!std::fs::read_to_string(&file).unwrap().contains("enabledModels"));
        std::fs::write(&file, "[1]").unwrap();
        assert!(cycle(&file, "retry.enabled", &[]).unwrap_err().contains("not a JSON object"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
