//! The sink flags every command with sinks takes: `--sentry`, `--otlp…`, `--capture`, `--redact`
//! and the spool's, and those a sink declares in its own file (the log sink's `--log-json`, added by its kind's `flags`), read back through
//! [`DeclaredFlags`].

use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches};

/// Where contract records go besides the local files, and what content they may carry.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Send each prompt to Sentry as a transaction (errors as error events). Without a value:
    /// `SENTRY_DSN` (which alone also turns this on). `SENTRY_ENVIRONMENT`, `SENTRY_RELEASE`,
    /// `SENTRY_TRACES_SAMPLE_RATE` apply.
    #[arg(long, value_name = "DSN", num_args = 0..=1, default_missing_value = "")]
    pub sentry: Option<String>,
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
    /// The flags sinks declare in their own files.
    #[command(flatten)]
    pub declared: DeclaredFlags,
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
    /// The dimensions metrics are split by, as span attribute names (`organization.id`,
    /// `user.id`, `session.id`) or attribution keys (`orgId`, `userId`, `teamId`…); default
    /// `organization.id` (`user.id` can explode cardinality). Comma-separated; `none` for none.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
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

/// The flags the sinks of the list declare themselves (each kind's `flags`), as parsed: a sink reads its own by id. The group of `SinkArgs` is how
/// [`with_sink_flags`](super::with_sink_flags) finds the commands that take them.
#[derive(Debug, Clone, Default)]
pub struct DeclaredFlags(ArgMatches);

impl DeclaredFlags {
    /// The parsed command line: a sink reads the flags it declared by their ids (clap's
    /// `get_one`, `get_flag`, `get_many`).
    pub fn matches(&self) -> &ArgMatches {
        &self.0
    }
}

impl FromArgMatches for DeclaredFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(DeclaredFlags(matches.clone()))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0 = matches.clone();
        Ok(())
    }
}

/// The declared flags themselves are added where the command line is built
/// ([`with_sink_flags`](super::with_sink_flags)): this only reads them back.
impl Args for DeclaredFlags {
    fn augment_args(cmd: Command) -> Command {
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        cmd
    }
}

/// `KEY=VALUE` (the key trimmed and non-empty).
pub fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}
