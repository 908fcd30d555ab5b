//! The model registry: ids, providers, APIs, limits and prices, shipped as data
//! (`data/models.json`) and extended by user files — upstream pi's `~/.pi/agent/models.json`
//! (`{"providers": {NAME: {baseUrl, api, apiKey, headers, models, modelOverrides}}}`, see
//! [`file`]) or a JSON array in the shipped table's shape (`--models`).
//!
//! Costs computed from these prices are **estimates**: providers bill from their own meters and
//! change prices; the table is a snapshot. `faux-1` carries nominal prices so demos show costs.

mod file;

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::message::{Cost, Usage};

/// The thinking levels pi knows (upstream's `ThinkingLevel`), from none to the most.
pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// `level` as one of [`THINKING_LEVELS`] — a name telemetry may carry as safe — or `"invalid"`
/// for anything else (a level set by an embedder or an extension is outside text).
pub fn thinking_level_name(level: &str) -> &'static str {
    THINKING_LEVELS.iter().find(|known| **known == level).copied().unwrap_or("invalid")
}

/// Which wire protocol a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Api {
    /// OpenAI Chat Completions (also OpenAI-compatible servers).
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// Anthropic Messages.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// The scripted offline provider.
    #[serde(rename = "faux")]
    Faux,
}

/// The API names upstream pi writes in sessions (its `KnownApi`), pi's own included: a fixed
/// vocabulary, safe to export as recorded.
pub const UPSTREAM_API_NAMES: &[&str] = &[
    "openai-completions",
    "openai-responses",
    "azure-openai-responses",
    "openai-codex-responses",
    "anthropic-messages",
    "bedrock-converse-stream",
    "google-generative-ai",
    "google-gemini-cli",
    "google-vertex",
    "mistral-conversations",
    "faux",
];

/// Whether a model's names come from pi's catalogue or a `models.json` (safe to export) or only
/// from what a user typed (`--model`, `/model`, RPC `set_model`: content).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Catalogued {
    /// Provider and model are catalogued.
    #[default]
    Model,
    /// The provider is catalogued, the model id is not.
    Provider,
    /// Neither is.
    Neither,
}

impl Api {
    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::AnthropicMessages => "anthropic-messages",
            Api::Faux => "faux",
        }
    }
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pricing {
    /// Fresh input.
    pub input: f64,
    /// Output.
    pub output: f64,
    /// Cache read.
    #[serde(default)]
    pub cache_read: f64,
    /// Cache write.
    #[serde(default)]
    pub cache_write: f64,
}

/// One model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// Model id as sent to the provider.
    pub id: String,
    /// Provider name (`openai`, `anthropic`, `faux`, or any OpenAI-compatible name).
    pub provider: String,
    /// Wire protocol.
    pub api: Api,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens.
    pub max_tokens: u64,
    /// Prices per million tokens.
    pub cost: Pricing,
    /// Base URL override for this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The model reasons (takes a thinking level); a level is only sent to models that do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning: bool,
    /// How to authenticate, from a `models.json` provider entry (values unresolved).
    #[serde(skip)]
    pub auth: Option<ProviderAuth>,
    /// Whether telemetry may carry the names as they are (a model from a table is catalogued).
    #[serde(skip)]
    pub catalogued: Catalogued,
}

/// A `models.json` provider's credentials as written: each value is a `!command` whose output
/// is the value, the name of an environment variable, or the literal value (upstream's value
/// resolution, done by [`resolve_value`] only for the model a run uses).
#[derive(Clone, Default, PartialEq)]
pub struct ProviderAuth {
    /// `apiKey`.
    pub api_key: Option<String>,
    /// `headers`.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ProviderAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderAuth")
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("headers", &self.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>())
            .finish()
    }
}

pub use file::resolve_value;

impl ModelInfo {
    /// Fills in the cost of `usage` from this model's prices.
    pub fn price(&self, usage: &mut Usage) {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let cost = Cost {
            input: per(usage.input, self.cost.input),
            output: per(usage.output, self.cost.output),
            cache_read: per(usage.cache_read, self.cost.cache_read),
            cache_write: per(usage.cache_write, self.cost.cache_write),
            total: 0.0,
        };
        usage.cost = Cost { total: cost.input + cost.output + cost.cache_read + cost.cache_write, ..cost };
    }

    /// A model not in the registry (e.g. on a local OpenAI-compatible server): no prices known.
    pub fn unknown(provider: &str, id: &str, api: Api) -> Self {
        ModelInfo {
            id: id.to_owned(),
            provider: provider.to_owned(),
            api,
            context_window: 128_000,
            max_tokens: 8192,
            cost: Pricing::default(),
            base_url: None,
            reasoning: false,
            auth: None,
            catalogued: Catalogued::Neither,
        }
    }
}

/// Why a model file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not JSON, or a value of the wrong type; `at` is `LINE:COL` or a key path.
    #[error("{path}:{at}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// `LINE:COL` of a syntax error, or the key path of a wrong value.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// The file is not a JSON array of models.
    #[error("{path}: not a model list ({source})")]
    Parse {
        /// The file.
        path: String,
        /// The JSON error.
        source: serde_json::Error,
    },
}

/// The set of known models, indexed by provider and id (a `models.json` of tens of thousands
/// of models loads in linear time).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    models: Vec<ModelInfo>,
    /// provider → id → index into `models`.
    index: HashMap<String, HashMap<String, usize>>,
}

const BUILTIN: &str = include_str!("../../data/models.json");

impl Registry {
    /// The built-in table.
    pub fn builtin() -> Self {
        // The shipped table is covered by a test; an error here would be a packaging bug.
        let mut registry = Registry::default();
        for model in serde_json::from_str::<Vec<ModelInfo>>(BUILTIN).unwrap_or_default() {
            registry.upsert(model);
        }
        registry
    }

    /// The table with the models of a user file added or replaced (same `provider` and `id`
    /// replaces): upstream's `{"providers": …}` object or an array of models in the shipped
    /// table's shape. A malformed file is an error with `FILE:LINE:COL` or the key path.
    pub fn with_overrides(mut self, path: &Path) -> Result<Self, ModelsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ModelsError::Read { path: shown.clone(), source })?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            let message = e.to_string();
            let message = message.split(" at line ").next().unwrap_or(&message).to_owned();
            ModelsError::Invalid { path: shown.clone(), at: format!("{}:{}", e.line(), e.column()), message }
        })?;
        if value.is_object() {
            return file::apply(self, &value).map_err(|(key, message)| ModelsError::Invalid {
                path: shown,
                at: key,
                message,
            });
        }
        let extra: Vec<ModelInfo> =
            serde_json::from_value(value).map_err(|source| ModelsError::Parse { path: shown, source })?;
        for model in extra {
            self.upsert(model);
        }
        Ok(self)
    }

    /// Adds `model`, replacing one with the same provider and id.
    fn upsert(&mut self, model: ModelInfo) {
        let ids = self.index.entry(model.provider.clone()).or_default();
        match ids.get(&model.id) {
            Some(&at) => self.models[at] = model,
            None => {
                ids.insert(model.id.clone(), self.models.len());
                self.models.push(model);
            }
        }
    }

    /// Where the model with this provider and id is in `models`.
    fn position(&self, provider: &str, id: &str) -> Option<usize> {
        self.index.get(provider)?.get(id).copied()
    }

    /// Calls `f` on each model of one provider.
    fn for_provider(&mut self, provider: &str, mut f: impl FnMut(&mut ModelInfo)) {
        for &at in self.index.get(provider).into_iter().flat_map(HashMap::values) {
            f(&mut self.models[at]);
        }
    }

    /// The model with this provider and id, mutably.
    fn find_mut(&mut self, provider: &str, id: &str) -> Option<&mut ModelInfo> {
        self.position(provider, id).map(|at| &mut self.models[at])
    }

    /// Whether this provider and model id are in the table.
    pub fn catalogued(&self, provider: &str, id: &str) -> Catalogued {
        match self.index.get(provider) {
            Some(ids) if ids.contains_key(id) => Catalogued::Model,
            Some(_) => Catalogued::Provider,
            None => Catalogued::Neither,
        }
    }

    /// The model with this provider and id.
    pub fn find(&self, provider: &str, id: &str) -> Option<&ModelInfo> {
        self.position(provider, id).map(|at| &self.models[at])
    }

    /// The first model of a provider (its default).
    pub fn default_for(&self, provider: &str) -> Option<&ModelInfo> {
        self.index.get(provider)?.values().min().map(|&at| &self.models[at])
    }

    /// All models.
    pub fn models(&self) -> &[ModelInfo] {
        &self.models
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_has_every_provider() {
        let registry: Vec<ModelInfo> = serde_json::from_str(BUILTIN).unwrap();
        assert!(registry.len() >= 9);
        let r = Registry::builtin();
        for provider in ["openai", "anthropic", "faux"] {
            assert!(r.default_for(provider).is_some(), "{provider}");
        }
    }

    #[test]
    fn cost_is_priced_per_bucket() {
        let model = Registry::builtin().find("anthropic", "claude-sonnet-4-5").unwrap().clone();
        let mut usage = Usage::tokens(1_000_000, 100_000, 2_000_000, 10_000);
        model.price(&mut usage);
        assert!((usage.cost.input - 3.0).abs() < 1e-9);
        assert!((usage.cost.output - 1.5).abs() < 1e-9);
        assert!((usage.cost.cache_read - 0.6).abs() < 1e-9);
        assert!((usage.cost.cache_write - 0.0375).abs() < 1e-9);
        assert!((usage.cost.total - 5.1375).abs() < 1e-9);
    }

    #[test]
    fn overrides_replace_and_add_models_and_bad_files_name_themselves() {
        let dir = std::env::temp_dir().join(format!("pi-models-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("models.json");
        std::fs::write(&file, r#"[{"id":"gpt-4o","provider":"openai","api":"openai-completions","contextWindow":1,"maxTokens":1,"cost":{"input":9,"output":9}},
            {"id":"llama","provider":"local","api":"openai-completions","contextWindow":8192,"maxTokens":1024,"cost":{"input":0,"output":0},"baseUrl":"http://127.0.0.1:8080/v1"}]"#).unwrap();
        let r = Registry::builtin().with_overrides(&file).unwrap();
        assert_eq!(r.find("openai", "gpt-4o").unwrap().cost.input, 9.0);
        assert_eq!(r.find("local", "llama").unwrap().base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        std::fs::write(&file, "[").unwrap();
        let err = Registry::builtin().with_overrides(&file).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}:1:1: ", file.display())), "{err}");
        std::fs::write(&file, "[{}]").unwrap();
        let err = Registry::builtin().with_overrides(&file).unwrap_err().to_string();
        assert!(err.starts_with(&file.display().to_string()) && err.contains("not a model list"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
