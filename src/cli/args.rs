//! Argument groups shared by several commands (each subcommand owns the rest of its arguments).

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// How `pi` talks (`--mode`): what `pi -p` prints, or the RPC protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The answer as it streams.
    Text,
    /// One JSON line per agent event and per contract event.
    Json,
    /// Upstream pi's RPC protocol: JSON commands on stdin, responses and events on stdout.
    Rpc,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Provider: `openai`, `anthropic`, `faux`, or a name from `models.json` / `--models`.
    /// Default: the settings' `defaultProvider`, else `faux` unless an API key or `--base-url`
    /// is given.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model id (default: the settings' `defaultModel`, else the provider's first model).
    #[arg(long)]
    pub model: Option<String>,
    /// Base URL of an OpenAI-compatible (or Anthropic) endpoint, e.g. `http://127.0.0.1:8080/v1`.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Session file to continue or create.
    #[arg(long, value_name = "PATH", conflicts_with = "no_session")]
    pub session: Option<PathBuf>,
    /// Do not write a session file.
    #[arg(long)]
    pub no_session: bool,
    /// Comma-separated tools to enable (`read,write,edit,bash,ls,grep,find`), or `none`.
    #[arg(long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Working directory for tools (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra models / price overrides, added to `~/.pi/agent/models.json` (upstream's
    /// `{"providers": …}` shape, or a JSON array in the built-in table's shape).
    #[arg(long, value_name = "PATH")]
    pub models: Option<PathBuf>,
    /// Scripted responses for the faux provider (JSON array; see README).
    #[arg(long, value_name = "PATH", env = "PI_FAUX_SCRIPT")]
    pub faux_script: Option<PathBuf>,
    /// Do not give child processes `PI_*` / `TRACEPARENT` (and strip inherited ones).
    #[arg(long)]
    pub no_session_env: bool,
    /// Load an extension: an executable speaking pi's extension protocol, a folder with a
    /// `pi-extension.json` manifest, or a `.js`/`.mjs`/`.ts` file (repeatable; added to
    /// `~/.pi/agent/extensions/`, a trusted project's `.pi/extensions/` and the settings'
    /// `extensions`).
    #[arg(short = 'e', long = "extension", value_name = "PATH")]
    pub extensions: Vec<PathBuf>,
    /// Extra skills directory (repeatable; also the settings' `skills`, `.pi/skills` of a trusted
    /// project and `~/.pi/agent/skills`).
    #[arg(long = "skills", value_name = "DIR")]
    pub skills: Vec<PathBuf>,
    /// Extra prompt-templates directory (repeatable; also the settings' `prompts`, `.pi/prompts` of
    /// a trusted project and `~/.pi/agent/prompts`).
    #[arg(long = "prompt-templates", value_name = "DIR")]
    pub prompt_templates: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ObserveArgs {
    /// Attribution: user id (also `PI_USER_ID`); at most 256 bytes, no control characters.
    #[arg(long, value_name = "ID")]
    pub user: Option<String>,
    /// Attribution: organisation id (also `PI_ORG_ID`); at most 256 bytes, no control characters.
    #[arg(long, value_name = "ID")]
    pub org: Option<String>,
    /// Attribution: any `key=value` (repeatable), e.g. `--context teamId=core`.
    #[arg(long = "context", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub context: Vec<(String, String)>,
    /// Write the raw contract events to this file (JSON lines).
    #[arg(long, value_name = "PATH")]
    pub events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    pub sinks: SinkArgs,
}

/// Where contract records go besides the local files, and what content they may carry.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Send each prompt to Sentry as a transaction (errors as error events). Without a value:
    /// `SENTRY_DSN` (which alone also turns this on). `SENTRY_ENVIRONMENT`, `SENTRY_RELEASE`,
    /// `SENTRY_TRACES_SAMPLE_RATE` apply.
    #[arg(long, value_name = "DSN", num_args = 0..=1, default_missing_value = "")]
    pub sentry: Option<String>,
    /// Structured JSON-lines logs of every contract record (through `tracing`) to stderr, or to
    /// PATH; filtered by `PI_LOG` / `RUST_LOG` (default `info`).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "")]
    pub log_json: Option<String>,
    /// Where OTLP and Sentry batches that could not be delivered are kept for the next run
    /// (default `PI_SPOOL_DIR`, else `~/.pi/agent/spool`); bounded by `PI_SPOOL_MAX_BYTES`
    /// (64 MiB) and `PI_SPOOL_MAX_AGE_DAYS` (7).
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Keep nothing on disk: what cannot be delivered is dropped (and counted).
    #[arg(long, conflicts_with = "spool_dir")]
    pub no_spool: bool,
    #[command(flatten)]
    pub content: ContentArgs,
    #[command(flatten)]
    pub otlp: OtlpArgs,
}

/// OTLP export (also enabled by `OTEL_EXPORTER_OTLP_ENDPOINT` / `_TRACES_ENDPOINT`).
#[derive(Debug, Args)]
pub struct OtlpArgs {
    /// Export traces over OTLP; ENDPOINT is the collector base URL (e.g. `http://localhost:4318`)
    /// or a full `…/v1/traces` URL. Without a value: the `OTEL_*` variables, else localhost:4318.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "")]
    pub otlp: Option<String>,
    /// `http/protobuf` (default), `http/json` or `grpc`.
    #[arg(long, value_name = "PROTOCOL")]
    pub otlp_protocol: Option<String>,
    /// Extra OTLP request header `key=value` (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub otlp_header: Vec<(String, String)>,
    /// `service.name` resource attribute (default `pi`, or `OTEL_SERVICE_NAME`).
    #[arg(long, value_name = "NAME")]
    pub service_name: Option<String>,
    /// Attribute conventions: `genai` (default), `openinference` (Phoenix/Arize LLM views), `both`.
    #[arg(long, value_name = "PROFILE")]
    pub conventions: Option<String>,
    /// Attribution keys that become metric dimensions (default `orgId`; `userId` can explode
    /// cardinality). Comma-separated; `none` for no attribution dimensions.
    #[arg(long, value_name = "KEY,...", value_delimiter = ',')]
    pub metric_dims: Vec<String>,
    /// Also export every contract record as an OTLP log record correlated to its span.
    #[arg(long)]
    pub otlp_logs: bool,
}

/// What content each sink may receive.
#[derive(Debug, Args)]
pub struct ContentArgs {
    /// Opt in to content capture, per sink (repeatable). KINDS: prompt, completion, thinking,
    /// tool_args, tool_result, shell_output, file_content, provider_payload, header, error_text,
    /// or `all` (singular or plural). SINK: events (--events-jsonl), log (--log-json), json
    /// (--mode json), otlp, sentry, or the groups local (events, log, json), remote (otlp,
    /// sentry), all. A bare `--capture KINDS` means `local`: content reaches OTLP or Sentry only
    /// when named, e.g. `--capture otlp=prompt`. Errors are content: their text is `error_text`.
    /// Captured content is scrubbed of known secret formats, then `--redact`ed, then cut to 8 KiB.
    #[arg(long, value_name = "[SINK=]KIND,...")]
    pub capture: Vec<String>,
    /// Extra secret pattern (regex) scrubbed from captured content of every sink (repeatable;
    /// added to the built-in rules, never replacing them).
    #[arg(long, value_name = "REGEX")]
    pub redact: Vec<String>,
}

/// `KEY=VALUE` (the key trimmed and non-empty).
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}
