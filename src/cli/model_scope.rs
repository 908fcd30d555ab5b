//! Upstream's model scope — the models Ctrl+P (and RPC `cycle_model`) cycles through: `--models`
//! patterns, else the settings' `enabledModels`.

use pi_agent::model::Registry;

use super::args::AgentArgs;
use super::config::Config;

/// Upstream's model scope, what Ctrl+P cycles through: the models that can run here matching
/// `--models` (comma-separated), else the settings' `enabledModels` — each pattern an id or
/// `provider/id` with `*` for any characters (an optional `:thinking` suffix ignored), in the
/// patterns' order. Empty when neither is set (cycling stays within the provider).
pub fn scoped_models(args: &AgentArgs, cfg: &Config, registry: &Registry) -> Vec<pi_agent::model::ModelInfo> {
    let patterns: Vec<String> = match &args.models {
        Some(list) => list.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect(),
        None => enabled_models(cfg),
    };
    matching(&patterns, registry)
}

/// The models that can run here matching `patterns` (as [`scoped_models`] reads them), in the
/// patterns' order.
pub fn matching(patterns: &[String], registry: &Registry) -> Vec<pi_agent::model::ModelInfo> {
    let mut scoped: Vec<pi_agent::model::ModelInfo> = Vec::new();
    for pattern in patterns {
        let pattern = pattern.split_once(':').map_or(pattern.as_str(), |(p, _)| p).to_ascii_lowercase();
        for model in registry.models() {
            let name =
                if pattern.contains('/') { format!("{}/{}", model.provider, model.id) } else { model.id.clone() };
            let ready = super::models_cmd::status(model, registry) == "ready";
            if ready && glob(&pattern, &name.to_ascii_lowercase()) && !scoped.iter().any(|m| m == model) {
                scoped.push(model.clone());
            }
        }
    }
    scoped
}

/// The settings' `enabledModels`: the managed policy's or the project's as read at start; the
/// global file's read now (`/scoped-models` changes it while pi runs).
fn enabled_models(cfg: &Config) -> Vec<String> {
    let global = cfg.agent_dir.as_ref().map(|dir| dir.join("settings.json"));
    match cfg.find_with(|file| file.doc.enabled_models.clone()) {
        Some((list, file)) if Some(&file.path) != global.as_ref() => list,
        _ => global.map(|path| enabled_models_in(&path)).unwrap_or_default(),
    }
}

/// The `enabledModels` entries of the settings file at `path` as it is now (none when it is
/// missing or not JSON).
pub fn enabled_models_in(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    listed(&doc)
}

/// The `enabledModels` strings of a settings document.
pub fn listed(doc: &serde_json::Value) -> Vec<String> {
    let list = doc.get("enabledModels").and_then(serde_json::Value::as_array);
    list.into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

/// `pattern` (with `*` for any characters) matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = parts.as_slice() else { return pattern == text };
    let Some(mut rest) = text.strip_prefix(first) else { return false };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_patterns_match_whole_names_with_stars() {
        assert!(glob("claude-*", "claude-sonnet-4-5"));
        assert!(glob("gpt-4o", "gpt-4o") && !glob("gpt-4o", "gpt-4o-mini"));
        assert!(glob("*mini*", "gpt-4o-mini-2024") && glob("a*b*c", "aXbYc") && !glob("a*b*c", "aXbY"));
        assert!(glob("openai/*", "openai/gpt-4o") && !glob("openai/*", "azure/gpt-4o"));
    }
}
