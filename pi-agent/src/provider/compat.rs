//! What an OpenAI-compatible service accepts, as upstream configures it: a model's `compat`
//! flags (from the catalogue or `models.json`) over the quirks upstream detects from the
//! provider's name or base URL — data, not code per provider.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The flags of upstream's `OpenAICompletionsCompat` that change the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Compat {
    /// Sends `store: false`.
    pub supports_store: bool,
    /// A reasoning model's system prompt goes as the `developer` role.
    pub supports_developer_role: bool,
    /// Sends `reasoning_effort` for a thinking level.
    pub supports_reasoning_effort: bool,
    /// Thinking level → the effort value the service takes.
    pub reasoning_effort_map: std::collections::BTreeMap<String, String>,
    /// Sends `stream_options.include_usage`.
    pub supports_usage_in_streaming: bool,
    /// `max_completion_tokens` or `max_tokens`.
    pub max_tokens_field: String,
    /// Tool results carry the tool's `name`.
    pub requires_tool_result_name: bool,
    /// A user message may not follow a tool result directly: an assistant one goes between.
    pub requires_assistant_after_tool_result: bool,
    /// How thinking is switched on: `openai` (`reasoning_effort`), `zai` / `qwen`
    /// (`enable_thinking`), `qwen-chat-template` (`chat_template_kwargs`).
    pub thinking_format: String,
    /// Function definitions say `strict: false`.
    pub supports_strict_mode: bool,
    /// OpenRouter's `provider` routing preferences, sent as they are.
    pub open_router_routing: Option<Value>,
}

impl Default for Compat {
    fn default() -> Self {
        Compat {
            supports_store: true,
            supports_developer_role: true,
            supports_reasoning_effort: true,
            reasoning_effort_map: Default::default(),
            supports_usage_in_streaming: true,
            max_tokens_field: "max_completion_tokens".into(),
            requires_tool_result_name: false,
            requires_assistant_after_tool_result: false,
            thinking_format: "openai".into(),
            supports_strict_mode: true,
            open_router_routing: None,
        }
    }
}

/// Services that take neither `store` nor the `developer` role (upstream's "non-standard"),
/// by provider name or a piece of their base URL.
const NON_STANDARD: &[&str] = &[
    "cerebras",
    "cerebras.ai",
    "xai",
    "api.x.ai",
    "chutes.ai",
    "deepseek.com",
    "zai",
    "api.z.ai",
    "opencode",
    "opencode.ai",
];

/// Services without `reasoning_effort` (they think by another switch, or always).
const NO_REASONING_EFFORT: &[&str] = &["xai", "api.x.ai", "zai", "api.z.ai"];

/// Services thinking through `enable_thinking`.
const ZAI: &[&str] = &["zai", "api.z.ai"];

impl Compat {
    /// The flags for a model of `provider` at `base_url`: upstream's detection, then the
    /// model's own `compat` over it (unknown flags ignored).
    pub fn of(provider: &str, base_url: &str, id: &str, written: Option<&Value>) -> Compat {
        let matches = |list: &[&str]| list.iter().any(|m| provider == *m || base_url.contains(m));
        let mut compat = Compat::default();
        if matches(NON_STANDARD) {
            compat.supports_store = false;
            compat.supports_developer_role = false;
        }
        if matches(NO_REASONING_EFFORT) {
            compat.supports_reasoning_effort = false;
        }
        if matches(ZAI) {
            compat.thinking_format = "zai".into();
        }
        if base_url.contains("chutes.ai") {
            compat.max_tokens_field = "max_tokens".into();
        }
        if (provider == "groq" || base_url.contains("groq.com")) && id == "qwen/qwen3-32b" {
            for level in ["minimal", "low", "medium", "high", "xhigh"] {
                compat.reasoning_effort_map.insert(level.into(), "default".into());
            }
        }
        let Some(Value::Object(written)) = written else { return compat };
        let mut merged = serde_json::to_value(&compat).unwrap_or(Value::Null);
        if let Value::Object(fields) = &mut merged {
            for (key, value) in written {
                fields.insert(key.clone(), value.clone());
            }
        }
        serde_json::from_value(merged).unwrap_or(compat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstreams_detected_quirks_and_written_flags_combine() {
        let openai = Compat::of("openai", "https://api.openai.com/v1", "gpt-4o", None);
        assert_eq!(openai, Compat::default());
        let xai = Compat::of("xai", "https://api.x.ai/v1", "grok-4", None);
        assert!(!xai.supports_store && !xai.supports_developer_role && !xai.supports_reasoning_effort);
        let zai = Compat::of("custom", "https://api.z.ai/api/coding/paas/v4", "glm-4.6", None);
        assert_eq!(zai.thinking_format, "zai");
        let written = json!({"supportsDeveloperRole": false, "maxTokensField": "max_tokens", "unknownFlag": 1});
        let custom = Compat::of("ollama", "http://localhost:11434/v1", "llama", Some(&written));
        assert!(!custom.supports_developer_role && custom.supports_store);
        assert_eq!(custom.max_tokens_field, "max_tokens");
        let groq = Compat::of("groq", "https://api.groq.com/openai/v1", "qwen/qwen3-32b", None);
        assert_eq!(groq.reasoning_effort_map["high"], "default");
    }
}
