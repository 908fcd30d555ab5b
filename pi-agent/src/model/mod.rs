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

/// Which wire protocol a model speaks: upstream pi's API names (its `KnownApi`) and pi's own
/// offline `faux`. pi has a client for the ones [`Api::spoken`] says; a model on another is
/// catalogued (named, priced, listed) but cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    /// OpenAI Chat Completions (also OpenAI-compatible servers).
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// OpenAI Responses (OpenAI's own models upstream).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Azure OpenAI's Responses API.
    #[serde(rename = "azure-openai-responses")]
    AzureOpenAiResponses,
    /// ChatGPT subscription (OAuth) Responses: not offered.
    #[serde(rename = "openai-codex-responses")]
    OpenAiCodexResponses,
    /// Anthropic Messages.
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    /// Amazon Bedrock's ConverseStream.
    #[serde(rename = "bedrock-converse-stream")]
    BedrockConverseStream,
    /// Google's Gemini API (`streamGenerateContent`).
    #[serde(rename = "google-generative-ai")]
    GoogleGenerativeAi,
    /// Gemini CLI subscription (OAuth): not offered.
    #[serde(rename = "google-gemini-cli")]
    GoogleGeminiCli,
    /// Google Vertex AI (Google Cloud credentials).
    #[serde(rename = "google-vertex")]
    GoogleVertex,
    /// Mistral's conversations (chat streaming) API.
    #[serde(rename = "mistral-conversations")]
    MistralConversations,
    /// The scripted offline provider.
    #[serde(rename = "faux")]
    Faux,
    /// A provider an extension registered (upstream's `pi.registerProvider` with its own
    /// `streamSimple`): the extension makes the request.
    #[serde(rename = "extension")]
    Extension,
}

impl Api {
    /// Every API, in upstream's order, `faux` last.
    pub const ALL: [Api; 11] = [
        Api::OpenAiCompletions,
        Api::OpenAiResponses,
        Api::AzureOpenAiResponses,
        Api::OpenAiCodexResponses,
        Api::AnthropicMessages,
        Api::BedrockConverseStream,
        Api::GoogleGenerativeAi,
        Api::GoogleGeminiCli,
        Api::GoogleVertex,
        Api::MistralConversations,
        Api::Faux,
    ];

    /// The JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenAiCompletions => "openai-completions",
            Api::OpenAiResponses => "openai-responses",
            Api::AzureOpenAiResponses => "azure-openai-responses",
            Api::OpenAiCodexResponses => "openai-codex-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::BedrockConverseStream => "bedrock-converse-stream",
            Api::GoogleGenerativeAi => "google-generative-ai",
            Api::GoogleGeminiCli => "google-gemini-cli",
            Api::GoogleVertex => "google-vertex",
            Api::MistralConversations => "mistral-conversations",
            Api::Faux => "faux",
            Api::Extension => "extension",
        }
    }

    /// The API named `name`, if it is one pi knows.
    pub fn parse(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.as_str() == name)
    }

    /// True when pi has a client for it (a model on another API is listed but cannot run).
    pub fn spoken(self) -> bool {
        SPOKEN.contains(&self)
    }

    /// The APIs pi has a client for.
    pub fn spoken_names() -> Vec<&'static str> {
        SPOKEN.iter().map(|api| api.as_str()).collect()
    }
}

/// Providers upstream reaches through a subscription login (OAuth), which pi does not offer:
/// their models are catalogued (listed, priced) but cannot run.
pub const LOGIN_PROVIDERS: &[&str] = &["github-copilot", "google-antigravity", "google-gemini-cli", "openai-codex"];

/// The APIs pi has a client for (one file each under `provider/`).
const SPOKEN: &[Api] = &[
    Api::OpenAiCompletions,
    Api::OpenAiResponses,
    Api::AzureOpenAiResponses,
    Api::AnthropicMessages,
    Api::BedrockConverseStream,
    Api::GoogleGenerativeAi,
    Api::MistralConversations,
    Api::Faux,
];

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
    /// Display name (`Claude Sonnet 4.5`), when the catalogue has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Provider name (`openai`, `anthropic`, `google`, `faux`, or any OpenAI-compatible name).
    pub provider: String,
    /// Wire protocol.
    pub api: Api,
    /// Context window in tokens.
    pub context_window: u64,
    /// Maximum output tokens.
    pub max_tokens: u64,
    /// Prices per million tokens; `None` when no price is known (usage is billed as unknown,
    /// never as zero).
    #[serde(default)]
    pub cost: Option<Pricing>,
    /// What it takes as input (`text`, `image`).
    #[serde(default = "text_only")]
    pub input: Vec<String>,
    /// Upstream's per-model compatibility flags for OpenAI-compatible servers
    /// (`supportsDeveloperRole`, `supportsReasoningEffort`, `maxTokensField`, …), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<serde_json::Value>,
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

fn text_only() -> Vec<String> {
    vec!["text".to_owned()]
}

impl ModelInfo {
    /// Fills in the cost of `usage` from this model's prices; without prices the cost is
    /// unknown ([`Cost::unknown`]), not zero — unless there were no tokens to bill.
    pub fn price(&self, usage: &mut Usage) {
        let Some(prices) = self.cost else {
            let billed = usage.input + usage.output + usage.cache_read + usage.cache_write > 0;
            usage.cost = Cost { unknown: billed, ..Cost::default() };
            return;
        };
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        let cost = Cost {
            input: per(usage.input, prices.input),
            output: per(usage.output, prices.output),
            cache_read: per(usage.cache_read, prices.cache_read),
            cache_write: per(usage.cache_write, prices.cache_write),
            total: 0.0,
            unknown: false,
        };
        usage.cost = Cost { total: cost.input + cost.output + cost.cache_read + cost.cache_write, ..cost };
    }

    /// True when pi can run it: it has a client for its API, and the provider needs no
    /// subscription login ([`LOGIN_PROVIDERS`]).
    pub fn runnable(&self) -> bool {
        self.api.spoken() && !self.needs_login()
    }

    /// True for a provider reached only through a subscription login pi does not offer.
    pub fn needs_login(&self) -> bool {
        LOGIN_PROVIDERS.contains(&self.provider.as_str())
    }

    /// A model not in the registry (e.g. on a local OpenAI-compatible server): no prices known.
    pub fn unknown(provider: &str, id: &str, api: Api) -> Self {
        ModelInfo {
            id: id.to_owned(),
            name: None,
            provider: provider.to_owned(),
            api,
            context_window: 128_000,
            max_tokens: 8192,
            cost: None,
            input: text_only(),
            compat: None,
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
    /// provider → its default model id (upstream's `defaultModelPerProvider`), in upstream's
    /// order (the order a provider is picked in when only its key is set).
    defaults: Vec<(String, String)>,
    /// provider → the environment variable its API key is read from.
    api_key_vars: HashMap<String, String>,
    /// Where the shipped catalogue came from and its date.
    pub stamp: CatalogueStamp,
    /// What loading user files skipped or cannot run, one line each (the caller says them).
    pub warnings: Vec<String>,
}

/// Where the shipped catalogue came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct CatalogueStamp {
    /// The upstream repository (`badlogic/pi-mono`).
    pub source: String,
    /// Its commit, when generated from git.
    #[serde(default)]
    pub commit: Option<String>,
    /// The date of that commit (`YYYY-MM-DD`).
    pub date: String,
}

/// The shipped catalogue (`data/models.json`, generated by `scripts/gen-models.mjs` from
/// upstream pi's model list).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Catalogue {
    #[serde(flatten)]
    stamp: CatalogueStamp,
    defaults: serde_json::Map<String, serde_json::Value>,
    api_key_vars: HashMap<String, String>,
    models: Vec<ModelInfo>,
}

const BUILTIN: &str = include_str!("../../data/models.json");

/// pi's own offline model, with nominal prices so demos show costs.
fn faux_model() -> ModelInfo {
    ModelInfo {
        id: "faux-1".into(),
        name: Some("Faux".into()),
        provider: "faux".into(),
        api: Api::Faux,
        context_window: 128_000,
        max_tokens: 8192,
        cost: Some(Pricing { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 }),
        // It "sees" images (as a fixed size), so the image path runs offline too.
        input: vec!["text".into(), "image".into()],
        compat: None,
        base_url: None,
        reasoning: false,
        auth: None,
        catalogued: Catalogued::Model,
    }
}

impl Registry {
    /// The built-in catalogue, and the offline `faux` model. Parsed once per process (the table
    /// is ~800 models; a run asks for it several times as it starts), then cloned.
    pub fn builtin() -> Self {
        static PARSED: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
        PARSED.get_or_init(Registry::parse_builtin).clone()
    }

    fn parse_builtin() -> Self {
        // The shipped table is covered by a test; an error here would be a packaging bug.
        let catalogue: Option<Catalogue> = serde_json::from_str(BUILTIN).ok();
        let mut registry = Registry::default();
        if let Some(catalogue) = catalogue {
            registry.defaults = catalogue
                .defaults
                .into_iter()
                .filter_map(|(provider, id)| Some((provider, id.as_str()?.to_owned())))
                .collect();
            registry.api_key_vars = catalogue.api_key_vars;
            registry.stamp = catalogue.stamp;
            for mut model in catalogue.models {
                // The catalogue writes "" where the base URL comes from elsewhere (Azure).
                model.base_url = model.base_url.filter(|url| !url.is_empty());
                registry.upsert(model);
            }
        }
        registry.upsert(faux_model());
        registry
    }

    /// The first provider, in upstream's order, whose API key variable is set (`is_set`), among
    /// those pi can run: the provider a run uses when none is named.
    pub fn provider_with_key(&self, is_set: impl Fn(&str) -> bool) -> Option<&str> {
        self.defaults.iter().map(|(provider, _)| provider.as_str()).find(|provider| {
            let runnable = self.default_for(provider).is_some_and(ModelInfo::runnable);
            runnable && self.api_key_var(provider).is_some_and(&is_set)
        })
    }

    /// The environment variable provider `provider`'s API key is read from, as upstream reads
    /// it (`OPENAI_API_KEY`, `GEMINI_API_KEY`, `OPENROUTER_API_KEY`, …).
    pub fn api_key_var(&self, provider: &str) -> Option<&str> {
        match provider {
            "anthropic" => Some("ANTHROPIC_API_KEY"),
            _ => self.api_key_vars.get(provider).map(String::as_str),
        }
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

    /// A provider's default model: upstream's choice when the catalogue has it, else the
    /// provider's first model.
    pub fn default_for(&self, provider: &str) -> Option<&ModelInfo> {
        let ids = self.index.get(provider)?;
        let chosen = self.defaults.iter().find(|(p, _)| p == provider).and_then(|(_, id)| ids.get(id));
        chosen.or_else(|| ids.values().min()).map(|&at| &self.models[at])
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
    fn the_catalogue_parses_with_every_api_priced_and_a_default_per_provider() {
        let catalogue: Catalogue = serde_json::from_str(BUILTIN).unwrap();
        assert!(catalogue.models.len() >= 700, "{}", catalogue.models.len());
        assert!(catalogue.stamp.date.len() == 10 && !catalogue.stamp.source.is_empty());
        for api in Api::ALL.into_iter().filter(|api| *api != Api::Faux) {
            assert!(catalogue.models.iter().any(|m| m.api == api), "{api:?}");
        }
        assert!(catalogue.models.iter().all(|m| m.cost.is_some()), "every catalogued model has prices");
        let r = Registry::builtin();
        for (provider, id) in &catalogue.defaults {
            let id = id.as_str().unwrap();
            if let Some(default) = r.default_for(provider) {
                assert!(default.id == id || r.find(provider, id).is_none(), "{provider}");
            }
        }
        assert_eq!(r.provider_with_key(|var| var == "GEMINI_API_KEY"), Some("google"));
        assert_eq!(r.provider_with_key(|var| var == "GEMINI_API_KEY" || var == "ANTHROPIC_API_KEY"), Some("anthropic"));
        assert_eq!(r.provider_with_key(|_| false), None);
        assert_eq!(r.default_for("anthropic").unwrap().id, "claude-opus-4-6");
        assert_eq!(r.default_for("faux").unwrap().id, "faux-1");
        assert_eq!(r.api_key_var("google"), Some("GEMINI_API_KEY"));
        assert_eq!(r.api_key_var("anthropic"), Some("ANTHROPIC_API_KEY"));
    }

    #[test]
    fn every_catalogued_model_bills_tokens_times_its_published_price() {
        let catalogue: Catalogue = serde_json::from_str(BUILTIN).unwrap();
        let registry = Registry::builtin();
        for published in &catalogue.models {
            let model = registry.find(&published.provider, &published.id).unwrap();
            let prices = published.cost.unwrap();
            let mut usage = Usage::tokens(1_234_567, 89_012, 3_456_789, 12_345);
            model.price(&mut usage);
            let expected = (1_234_567.0 * prices.input
                + 89_012.0 * prices.output
                + 3_456_789.0 * prices.cache_read
                + 12_345.0 * prices.cache_write)
                / 1e6;
            assert!((usage.cost.total - expected).abs() < 1e-9, "{}/{}", published.provider, published.id);
            assert!(!usage.cost.unknown);
        }
    }

    #[test]
    fn a_model_without_prices_costs_unknown_not_zero() {
        let model = ModelInfo::unknown("local", "llama", Api::OpenAiCompletions);
        let mut usage = Usage::tokens(1000, 10, 0, 0);
        model.price(&mut usage);
        assert!(usage.cost.unknown);
        assert_eq!(usage.cost.total, 0.0);
        let mut nothing = Usage::tokens(0, 0, 0, 0);
        model.price(&mut nothing);
        assert!(!nothing.cost.unknown, "no tokens, nothing to bill");
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
        assert_eq!(r.find("openai", "gpt-4o").unwrap().cost.unwrap().input, 9.0);
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
