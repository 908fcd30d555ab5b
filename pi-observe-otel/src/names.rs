//! Attribute keys, values and environment variables used by the OTel adapter.
//!
//! GenAI attributes follow the OpenTelemetry GenAI semantic conventions pinned at
//! [`GENAI_SEMCONV_VERSION`] (own constants, so an upstream rename cannot silently change what
//! we export). OpenInference keys follow the OpenInference spec used by Arize Phoenix.

/// The GenAI semantic-conventions version these keys follow by default: v1.41.0, the last
/// release of `open-telemetry/semantic-conventions` that carries the GenAI conventions (from
/// v1.42.0 they live in their own repository, without tagged releases).
pub const GENAI_SEMCONV_VERSION: &str = "1.41.0";
/// `schema_url` of the resource and scope with the pinned names.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";
/// `schema_url` with `OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`: the GenAI
/// development schema in use downstream (its one difference here: cache writes are
/// `gen_ai.usage.cache_write.input_tokens`).
pub const SCHEMA_URL_LATEST: &str = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev";
/// The `OTEL_SEMCONV_STABILITY_OPT_IN` value that selects [`SCHEMA_URL_LATEST`].
pub const GEN_AI_LATEST_EXPERIMENTAL: &str = "gen_ai_latest_experimental";
/// The contract's operation name on spans whose name follows the GenAI conventions
/// (`chat gpt-4o` is `pi.ai.provider.request`).
pub const PI_OPERATION: &str = "pi.operation";
/// The agent's name (`gen_ai.agent.name`, and the `invoke_agent` span name).
pub const AGENT_NAME: &str = "pi";
/// `error.type`: the error's type from pi's vocabulary, on failed spans.
pub const ERROR_TYPE: &str = "error.type";
/// `gen_ai.input.messages` (captured content only).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (captured content only).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `gen_ai.system_instructions` (captured content only).
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// `gen_ai.tool.definitions` (captured content only).
pub const GEN_AI_TOOL_DEFINITIONS: &str = "gen_ai.tool.definitions";
/// `gen_ai.tool.call.arguments` (captured content only).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (captured content only).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// OpenInference `input.value`.
pub const INPUT_VALUE: &str = "input.value";
/// OpenInference `input.mime_type`.
pub const INPUT_MIME_TYPE: &str = "input.mime_type";
/// OpenInference `output.value`.
pub const OUTPUT_VALUE: &str = "output.value";
/// OpenInference `llm.input_messages` (prefix of `.{i}.message.role|content`).
pub const LLM_INPUT_MESSAGES: &str = "llm.input_messages";
/// OpenInference `llm.output_messages` (prefix of `.{i}.message.role|content`).
pub const LLM_OUTPUT_MESSAGES: &str = "llm.output_messages";
/// OpenInference `tool.parameters`.
pub const TOOL_PARAMETERS: &str = "tool.parameters";
/// `server.address` (provider requests).
pub const SERVER_ADDRESS: &str = "server.address";
/// `server.port` (provider requests).
pub const SERVER_PORT: &str = "server.port";
/// `gen_ai.agent.name`.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.usage.cache_write.input_tokens` (the newer spelling of cache creation).
pub const GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: &str = "gen_ai.usage.cache_write.input_tokens";

/// Prefix of the contract's safe payload keys on spans (`pi.model`, `pi.inputTokens`, …).
pub const PI_PREFIX: &str = "pi.";
/// Prefix of attribution-context keys (`pi.context.userId`, …).
pub const PI_CONTEXT_PREFIX: &str = "pi.context.";
/// Set on spans that were still open at shutdown and exported as ended-at-shutdown.
pub const PI_INCOMPLETE: &str = "pi.incomplete";

/// Conventional user id.
pub const USER_ID: &str = "user.id";
/// Organisation id (not a semconv key; ours, see `docs/architecture.md`).
pub const ORGANIZATION_ID: &str = "organization.id";

/// `gen_ai.operation.name`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";

/// pi's provider name as the GenAI conventions spell it for `gen_ai.provider.name`
/// (`amazon-bedrock` → `aws.bedrock`, `google` → `gcp.gemini`, `mistral` → `mistral_ai`, …);
/// a provider the conventions do not list keeps pi's name (which `pi.provider` always carries).
pub fn genai_provider_name(provider: &str) -> &str {
    match provider {
        "azure-openai-responses" | "azure" => "azure.ai.openai",
        "google" => "gcp.gemini",
        "google-vertex" => "gcp.vertex_ai",
        "google-gemini-cli" | "google-antigravity" => "gcp.gen_ai",
        "amazon-bedrock" => "aws.bedrock",
        "mistral" => "mistral_ai",
        "xai" => "x_ai",
        other => other,
    }
}
/// `gen_ai.request.model`.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.response.model`.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// `gen_ai.usage.input_tokens` (all prompt tokens, cached ones included).
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.usage.cache_creation.input_tokens`.
pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
/// `gen_ai.response.finish_reasons`.
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.conversation.id`.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.tool.name`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";

/// `gen_ai.operation.name` values.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// Chat completion.
pub const OP_CHAT: &str = "chat";
/// Tool execution.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";

/// `openinference.span.kind`.
pub const OPENINFERENCE_SPAN_KIND: &str = "openinference.span.kind";
/// `llm.model_name`.
pub const LLM_MODEL_NAME: &str = "llm.model_name";
/// `llm.provider`.
pub const LLM_PROVIDER: &str = "llm.provider";
/// `llm.token_count.prompt`.
pub const LLM_TOKEN_COUNT_PROMPT: &str = "llm.token_count.prompt";
/// `llm.token_count.completion`.
pub const LLM_TOKEN_COUNT_COMPLETION: &str = "llm.token_count.completion";
/// `llm.token_count.total`.
pub const LLM_TOKEN_COUNT_TOTAL: &str = "llm.token_count.total";
/// `llm.cost.prompt`: USD for the prompt (input and cache tokens).
pub const LLM_COST_PROMPT: &str = "llm.cost.prompt";
/// `llm.cost.completion`: USD for the output tokens.
pub const LLM_COST_COMPLETION: &str = "llm.cost.completion";
/// `llm.cost.total`.
pub const LLM_COST_TOTAL: &str = "llm.cost.total";
/// `openinference.project.name`: the Phoenix project traces land in (resource attribute).
pub const OPENINFERENCE_PROJECT_NAME: &str = "openinference.project.name";
/// `session.id`.
pub const SESSION_ID: &str = "session.id";
/// `tool.name`.
pub const TOOL_NAME: &str = "tool.name";

/// Resource: `service.name`.
pub const SERVICE_NAME: &str = "service.name";
/// `service.version`.
pub const SERVICE_VERSION: &str = "service.version";
/// `service.instance.id`: one per process.
pub const SERVICE_INSTANCE_ID: &str = "service.instance.id";
/// `deployment.environment.name`.
pub const DEPLOYMENT_ENVIRONMENT_NAME: &str = "deployment.environment.name";
/// Default `service.name`.
pub const DEFAULT_SERVICE_NAME: &str = "pi";

/// Environment variables read by [`crate::OtlpConfig::from_env`].
pub mod env {
    /// Disables the SDK (`true`).
    pub const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
    /// `gen_ai_latest_experimental` selects the newest GenAI names.
    pub const SEMCONV_STABILITY_OPT_IN: &str = "OTEL_SEMCONV_STABILITY_OPT_IN";
    /// Base endpoint (`/v1/traces` is appended for HTTP).
    pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
    /// Traces endpoint, used verbatim.
    pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
    /// `grpc`, `http/protobuf` or `http/json`.
    pub const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
    /// Traces protocol.
    pub const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
    /// `key=value,…` headers.
    pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
    /// Traces headers.
    pub const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
    /// Export timeout in milliseconds.
    pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
    /// Traces export timeout in milliseconds.
    pub const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
    /// `gzip` or `none`.
    pub const COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
    /// Traces compression.
    pub const TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
    /// PEM file of the CA certificate(s) trusted for the collector's TLS certificate (instead of
    /// the system roots).
    pub const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
    /// Traces CA certificate file.
    pub const TRACES_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE";
    /// PEM file of the client certificate for mutual TLS.
    pub const CLIENT_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE";
    /// Traces client certificate file.
    pub const TRACES_CLIENT_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE";
    /// PEM file of the client certificate's private key for mutual TLS.
    pub const CLIENT_KEY: &str = "OTEL_EXPORTER_OTLP_CLIENT_KEY";
    /// Traces client key file.
    pub const TRACES_CLIENT_KEY: &str = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY";
    /// `service.name`.
    pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
    /// `key=value,…` resource attributes.
    pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
    /// Sampler name.
    pub const TRACES_SAMPLER: &str = "OTEL_TRACES_SAMPLER";
    /// Sampler argument.
    pub const TRACES_SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
    /// Queue capacity (spans).
    pub const BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
    /// Batch size (spans).
    pub const BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";
    /// Delay between batches in milliseconds.
    pub const BSP_SCHEDULE_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";
    /// Export timeout in milliseconds.
    pub const BSP_EXPORT_TIMEOUT: &str = "OTEL_BSP_EXPORT_TIMEOUT";
    /// `otlp` or `none`.
    pub const METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
    /// Metrics endpoint, used verbatim.
    pub const METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
    /// `otlp` or `none` (logs are off unless this or code turns them on).
    pub const LOGS_EXPORTER: &str = "OTEL_LOGS_EXPORTER";
    /// Logs endpoint, used verbatim.
    pub const LOGS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT";
    /// Metric export interval in milliseconds.
    pub const METRIC_EXPORT_INTERVAL: &str = "OTEL_METRIC_EXPORT_INTERVAL";
    /// `cumulative` (default), `delta` or `lowmemory`.
    pub const METRICS_TEMPORALITY_PREFERENCE: &str = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
    /// `otlp` (default), `none` or `console`.
    pub const TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
    /// `true`: a gRPC endpoint given without a scheme is plain text (default: TLS).
    pub const INSECURE: &str = "OTEL_EXPORTER_OTLP_INSECURE";
    /// Traces-only [`INSECURE`].
    pub const TRACES_INSECURE: &str = "OTEL_EXPORTER_OTLP_TRACES_INSECURE";
    /// Metrics-only headers.
    pub const METRICS_HEADERS: &str = "OTEL_EXPORTER_OTLP_METRICS_HEADERS";
    /// Logs-only headers.
    pub const LOGS_HEADERS: &str = "OTEL_EXPORTER_OTLP_LOGS_HEADERS";
    /// Metrics-only protocol (must be HTTP when traces are, gRPC when traces are).
    pub const METRICS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL";
    /// Logs-only protocol (same rule).
    pub const LOGS_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL";
    /// Metrics-only timeout (ms).
    pub const METRICS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT";
    /// Logs-only timeout (ms).
    pub const LOGS_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT";
    /// Metrics-only compression.
    pub const METRICS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION";
    /// Logs-only compression.
    pub const LOGS_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION";
    /// Metrics-only CA certificate file.
    pub const METRICS_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE";
    /// Logs-only CA certificate file.
    pub const LOGS_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE";
}

#[cfg(test)]
mod tests {
    use super::genai_provider_name;

    #[test]
    fn providers_take_the_conventions_names_and_others_keep_pis() {
        let mapped: Vec<&str> =
            ["openai", "azure-openai-responses", "google", "amazon-bedrock", "mistral", "xai", "groq", "openrouter"]
                .into_iter()
                .map(genai_provider_name)
                .collect();
        assert_eq!(
            mapped,
            ["openai", "azure.ai.openai", "gcp.gemini", "aws.bedrock", "mistral_ai", "x_ai", "groq", "openrouter"]
        );
    }
}
