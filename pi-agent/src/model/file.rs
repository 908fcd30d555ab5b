//! Upstream pi's `models.json` (`packages/coding-agent/docs/models.md`):
//!
//! ```json
//! { "providers": {
//!     "ollama": { "baseUrl": "http://localhost:11434/v1", "api": "openai-completions",
//!                 "apiKey": "OLLAMA_KEY", "headers": { "x-team": "!cat ~/.team" },
//!                 "models": [ { "id": "llama3.1:8b", "contextWindow": 128000,
//!                               "cost": { "input": 0, "output": 0 } } ] },
//!     "anthropic": { "baseUrl": "https://proxy.example.com/v1",
//!                    "modelOverrides": { "claude-sonnet-4-5": { "maxTokens": 32000 } } } } }
//! ```
//!
//! A provider entry's `baseUrl`, `apiKey` and `headers` apply to all its models, the built-in
//! ones included; `models` are upserted by id; `modelOverrides` change built-in models field by
//! field (unknown ids ignored). `name`, `reasoning`, `input` and `compat` (the provider's, or
//! the model's own) are kept; `authHeader` is accepted. A provider or model on an API pi has no
//! client for is kept (listed as unavailable) and said once ([`Registry::warnings`]); one on an
//! API name pi does not know is skipped with a warning. Either way every other provider works.
//! A model without `cost` has no known price: its usage is billed as unknown, not zero.

use serde_json::{Map, Value};

use super::{Api, ModelInfo, Pricing, ProviderAuth, Registry};

/// A wrong value: (key path, what is wrong).
type Wrong = (String, String);

fn wrong(path: &[&str], message: impl Into<String>) -> Wrong {
    (path.join("."), message.into())
}

/// Applies an upstream `models.json` object to `registry`.
pub(super) fn apply(mut registry: Registry, value: &Value) -> Result<Registry, Wrong> {
    let Some(providers) = value.get("providers") else {
        return Err(wrong(&["providers"], "expected a \"providers\" object (upstream's models.json shape)"));
    };
    let providers = providers.as_object().ok_or_else(|| wrong(&["providers"], "expected an object"))?;
    for (name, entry) in providers {
        let entry = entry.as_object().ok_or_else(|| wrong(&["providers", name], "expected an object"))?;
        let provider = match ProviderEntry::parse(name, entry)? {
            Parsed::Entry(provider) => provider,
            Parsed::UnknownApi(api) => {
                registry.warnings.push(format!(
                    "providers.{name}: api {api:?} is not one pi knows ({}): provider skipped",
                    super::UPSTREAM_API_NAMES.join(", ")
                ));
                continue;
            }
        };
        if let Some(api) = provider.api.filter(|api| !api.spoken()) {
            registry.warnings.push(unspoken(name, api));
        }
        // Provider-wide settings reach the built-in models of this provider.
        registry.for_provider(name, |model| {
            if provider.base_url.is_some() {
                model.base_url = provider.base_url.clone();
            }
            if provider.auth.is_some() {
                model.auth = provider.auth.clone();
            }
        });
        if let Some(overrides) = provider.field("modelOverrides") {
            apply_overrides(&mut registry, &provider, overrides)?;
        }
        if let Some(models) = provider.field("models") {
            add_models(&mut registry, &provider, models)?;
        }
    }
    Ok(registry)
}

/// One entry of `providers`: its name, the provider-wide settings, and the object itself.
struct ProviderEntry<'a> {
    name: &'a str,
    entry: &'a Map<String, Value>,
    base_url: Option<String>,
    api: Option<Api>,
    auth: Option<ProviderAuth>,
    compat: Option<Value>,
}

/// A provider entry, or the API name it declares that pi does not know.
enum Parsed<'a> {
    Entry(ProviderEntry<'a>),
    UnknownApi(String),
}

/// The warning for a provider (or model) on an API pi knows by name but has no client for.
fn unspoken(at: &str, api: Api) -> String {
    if matches!(api, Api::OpenAiCodexResponses | Api::GoogleGeminiCli) {
        return format!(
            "providers.{at}: the {} API needs a subscription login (OAuth), which pi does not offer: its models are listed, not run",
            api.as_str()
        );
    }
    format!(
        "providers.{at}: pi has no client for the {} API yet (it speaks {}): its models are listed, not run",
        api.as_str(),
        Api::spoken_names().join(", ")
    )
}

impl<'a> ProviderEntry<'a> {
    fn parse(name: &'a str, entry: &'a Map<String, Value>) -> Result<Parsed<'a>, Wrong> {
        let mut provider = ProviderEntry { name, entry, base_url: None, api: None, auth: None, compat: None };
        provider.base_url = provider.text("baseUrl")?;
        provider.api = match provider.text("api")? {
            Some(api) => match Api::parse(&api) {
                Some(api) => Some(api),
                None => return Ok(Parsed::UnknownApi(api)),
            },
            None => None,
        };
        provider.compat = provider.field("compat").cloned();
        let mut auth = ProviderAuth { api_key: provider.text("apiKey")?, headers: Vec::new() };
        if let Some(headers) = provider.field("headers") {
            let headers = headers.as_object().ok_or_else(|| wrong(&provider.at(&["headers"]), "expected an object"))?;
            for (header, value) in headers {
                let value =
                    value.as_str().ok_or_else(|| wrong(&provider.at(&["headers", header]), "expected a string"))?;
                auth.headers.push((header.clone(), value.to_owned()));
            }
        }
        provider.auth = (auth.api_key.is_some() || !auth.headers.is_empty()).then_some(auth);
        Ok(Parsed::Entry(provider))
    }

    /// `providers.NAME` followed by `rest`, as a key path.
    fn at<'k>(&'k self, rest: &[&'k str]) -> Vec<&'k str> {
        let mut path = vec!["providers", self.name];
        path.extend_from_slice(rest);
        path
    }

    /// A field that is set (`null` counts as unset).
    fn field(&self, key: &str) -> Option<&'a Value> {
        self.entry.get(key).filter(|v| !v.is_null())
    }

    fn text(&self, key: &str) -> Result<Option<String>, Wrong> {
        match self.field(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(wrong(&self.at(&[key]), "expected a string")),
        }
    }
}

/// `modelOverrides`: built-in models changed field by field (unknown ids ignored).
fn apply_overrides(registry: &mut Registry, provider: &ProviderEntry<'_>, overrides: &Value) -> Result<(), Wrong> {
    let overrides =
        overrides.as_object().ok_or_else(|| wrong(&provider.at(&["modelOverrides"]), "expected an object"))?;
    for (id, o) in overrides {
        let path = provider.at(&["modelOverrides", id]);
        let o = o.as_object().ok_or_else(|| wrong(&path, "expected an object"))?;
        if let Some(model) = registry.find_mut(provider.name, id) {
            if let Some(reasoning) = o.get("reasoning").and_then(Value::as_bool) {
                model.reasoning = reasoning;
            }
            limits_and_cost(model, o, &path)?;
        }
    }
    Ok(())
}

/// `models`: added to the registry, or replacing the model with the same id.
fn add_models(registry: &mut Registry, provider: &ProviderEntry<'_>, models: &Value) -> Result<(), Wrong> {
    let models = models.as_array().ok_or_else(|| wrong(&provider.at(&["models"]), "expected a list"))?;
    // Once per provider, not per model: the file loads in linear time.
    let provider_api = provider.api.or_else(|| registry.default_for(provider.name).map(|d| d.api));
    for (i, m) in models.iter().enumerate() {
        let index = i.to_string();
        let path = provider.at(&["models", &index]);
        let key = |field: &'static str| [path.as_slice(), &[field]].concat();
        let m = m.as_object().ok_or_else(|| wrong(&path, "expected an object"))?;
        let id = match m.get("id") {
            Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
            _ => return Err(wrong(&key("id"), "expected a model id")),
        };
        let api = match (m.get("api").and_then(Value::as_str), provider_api) {
            (Some(a), _) => match Api::parse(a) {
                Some(api) => {
                    if !api.spoken() && provider.api != Some(api) {
                        registry.warnings.push(unspoken(&format!("{}.models.{index}", provider.name), api));
                    }
                    api
                }
                None => {
                    registry.warnings.push(format!(
                        "providers.{}.models.{index}: api {a:?} is not one pi knows: model skipped",
                        provider.name
                    ));
                    continue;
                }
            },
            (None, Some(api)) => api,
            (None, None) => {
                return Err(wrong(&provider.at(&["api"]), "expected the provider's api (e.g. openai-completions)"));
            }
        };
        let mut model = ModelInfo {
            id,
            name: m.get("name").and_then(Value::as_str).map(str::to_owned),
            provider: provider.name.to_owned(),
            api,
            context_window: 128_000,
            max_tokens: 16_384,
            cost: None,
            input: match m.get("input").and_then(Value::as_array) {
                Some(kinds) => kinds.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
                None => vec!["text".to_owned()],
            },
            compat: m.get("compat").or(provider.compat.as_ref()).cloned(),
            base_url: provider.base_url.clone(),
            reasoning: m.get("reasoning").and_then(Value::as_bool).unwrap_or(false),
            auth: provider.auth.clone(),
            catalogued: super::Catalogued::Model,
        };
        limits_and_cost(&mut model, m, &path)?;
        registry.upsert(model);
    }
    Ok(())
}

/// `contextWindow`, `maxTokens` and `cost` (partial: missing prices stay as they are, or 0 when
/// the model had none).
fn limits_and_cost(model: &mut ModelInfo, fields: &Map<String, Value>, path: &[&str]) -> Result<(), Wrong> {
    fn at<'a>(path: &[&'a str], key: &'a str) -> Vec<&'a str> {
        let mut p = path.to_vec();
        p.push(key);
        p
    }
    for (key, slot) in [("contextWindow", &mut model.context_window), ("maxTokens", &mut model.max_tokens)] {
        if let Some(v) = fields.get(key) {
            *slot = v.as_u64().ok_or_else(|| wrong(&at(path, key), "expected a whole number ≥ 0"))?;
        }
    }
    if let Some(cost) = fields.get("cost").filter(|c| !c.is_null()) {
        let cost = cost.as_object().ok_or_else(|| wrong(&at(path, "cost"), "expected an object"))?;
        let prices = model.cost.get_or_insert_with(Pricing::default);
        for (key, slot) in [
            ("input", &mut prices.input),
            ("output", &mut prices.output),
            ("cacheRead", &mut prices.cache_read),
            ("cacheWrite", &mut prices.cache_write),
        ] {
            if let Some(v) = cost.get(key) {
                let mut p = at(path, "cost");
                p.push(key);
                *slot = v.as_f64().filter(|n| *n >= 0.0).ok_or_else(|| wrong(&p, "expected a price ≥ 0"))?;
            }
        }
    }
    Ok(())
}

/// Upstream's value resolution for `apiKey` and header values: `!command` runs the command
/// (`sh -c`) and uses its trimmed output; otherwise the value names an environment variable
/// when one by that name is set, else it is the literal value.
pub fn resolve_value(raw: &str) -> Result<String, String> {
    if let Some(command) = raw.strip_prefix('!') {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("`{command}` could not start ({e})"))?;
        if !output.status.success() {
            return Err(format!("`{command}` failed ({})", output.status));
        }
        let value = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        return if value.is_empty() { Err(format!("`{command}` printed nothing")) } else { Ok(value) };
    }
    let is_name = !raw.is_empty() && raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match std::env::var(raw) {
        Ok(value) if is_name && !value.is_empty() => Ok(value),
        _ => Ok(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_json(json: &str) -> Result<Registry, Wrong> {
        apply(Registry::builtin(), &serde_json::from_str(json).unwrap())
    }

    #[test]
    fn providers_add_models_reach_builtin_ones_and_override_fields() {
        let r = apply_json(
            r#"{"providers": {
                "ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions", "apiKey": "ollama",
                           "models": [{"id": "llama3.1:8b", "name": "Llama", "reasoning": false, "cost": {"input": 0.5}}]},
                "anthropic": {"baseUrl": "https://proxy.example/v1", "headers": {"x-team": "core"},
                              "modelOverrides": {"claude-sonnet-4-5": {"maxTokens": 1000, "cost": {"output": 1}}, "nope": {}}}}}"#,
        )
        .unwrap();
        let llama = r.find("ollama", "llama3.1:8b").unwrap();
        assert_eq!((llama.api, llama.base_url.as_deref()), (Api::OpenAiCompletions, Some("http://localhost:11434/v1")));
        assert_eq!(llama.cost.unwrap().input, 0.5);
        assert_eq!(llama.auth.as_ref().unwrap().api_key.as_deref(), Some("ollama"));
        let sonnet = r.find("anthropic", "claude-sonnet-4-5").unwrap();
        let prices = sonnet.cost.unwrap();
        assert_eq!((sonnet.max_tokens, prices.output, prices.input), (1000, 1.0, 3.0));
        assert_eq!(sonnet.base_url.as_deref(), Some("https://proxy.example/v1"));
        let haiku = r.find("anthropic", "claude-haiku-4-5").unwrap();
        assert_eq!(haiku.auth.as_ref().unwrap().headers, [("x-team".to_owned(), "core".to_owned())]);
    }

    #[test]
    fn wrong_values_name_their_key_path() {
        let err = apply_json(
            r#"{"providers": {"x": {"api": "openai-completions", "models": [{"id": "m", "maxTokens": "many"}]}}}"#,
        )
        .unwrap_err();
        assert_eq!(err.0, "providers.x.models.0.maxTokens");
        let err = apply_json(r#"{"providers": {"new": {"models": [{"id": "m"}]}}}"#).unwrap_err();
        assert_eq!(err.0, "providers.new.api");
        assert_eq!(apply_json(r#"{"models": []}"#).unwrap_err().0, "providers");
    }

    #[test]
    fn values_resolve_from_commands_variables_or_literals() {
        assert_eq!(resolve_value("!printf ' k-1 \\n'").unwrap(), "k-1");
        assert!(resolve_value("!exit 3").is_err());
        assert_eq!(resolve_value("PATH").unwrap(), std::env::var("PATH").unwrap());
        assert_eq!(resolve_value("sk-literal-value").unwrap(), "sk-literal-value");
        assert_eq!(resolve_value("PI_SURELY_UNSET_VARIABLE_42").unwrap(), "PI_SURELY_UNSET_VARIABLE_42");
    }
}
