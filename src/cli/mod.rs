//! Argument parsing, configuration from flags and environment, and dispatch.

mod demo;
mod export;
mod faux_script;
mod output;
mod report;
mod run;
mod setup;
mod tree;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// One line for every user-facing failure: `pi: <culprit>: <what is wrong>`.
#[derive(Debug)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for CliError {
    fn from(e: E) -> Self {
        CliError(e.to_string())
    }
}

/// pi: a coding agent whose every prompt is a trace, attributed to the user and org that ran it.
#[derive(Debug, Parser)]
#[command(name = "pi", version, about, long_about = None, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Run one prompt and print the answer (print mode).
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    print: Option<String>,
    /// Output: `text` (the answer) or `json` (one JSON line per agent event and per contract event).
    #[arg(long, value_enum, default_value_t = Mode::Text)]
    mode: Mode,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    observe: ObserveArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct AgentArgs {
    /// Provider: `openai`, `anthropic`, `faux`, or a name from `--models`. Default: `faux`
    /// unless an API key or `--base-url` is given.
    #[arg(long)]
    provider: Option<String>,
    /// Model id (default: the provider's first model).
    #[arg(long)]
    model: Option<String>,
    /// Base URL of an OpenAI-compatible (or Anthropic) endpoint, e.g. `http://127.0.0.1:8080/v1`.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Session file to continue or create.
    #[arg(long, value_name = "PATH", conflicts_with = "no_session")]
    session: Option<PathBuf>,
    /// Do not write a session file.
    #[arg(long)]
    no_session: bool,
    /// Comma-separated tools to enable (`read,write,edit,bash,ls,grep,find`), or `none`.
    #[arg(long, value_name = "LIST")]
    tools: Option<String>,
    /// Working directory for tools (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Extra models / price overrides (JSON array, same shape as the built-in table).
    #[arg(long, value_name = "PATH")]
    models: Option<PathBuf>,
    /// Scripted responses for the faux provider (JSON array; see README).
    #[arg(long, value_name = "PATH", env = "PI_FAUX_SCRIPT")]
    faux_script: Option<PathBuf>,
    /// Do not give child processes `PI_*` / `TRACEPARENT` (and strip inherited ones).
    #[arg(long)]
    no_session_env: bool,
    /// Extra skills directory (repeatable; `.pi/skills` and `~/.pi/agent/skills` are always searched).
    #[arg(long = "skills", value_name = "DIR")]
    skills: Vec<PathBuf>,
    /// Extra prompt-templates directory (repeatable; `.pi/prompts` and `~/.pi/agent/prompts` are always searched).
    #[arg(long = "prompt-templates", value_name = "DIR")]
    prompt_templates: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct ObserveArgs {
    /// Attribution: user id (also `PI_USER_ID`); at most 256 bytes, no control characters.
    #[arg(long, value_name = "ID")]
    user: Option<String>,
    /// Attribution: organisation id (also `PI_ORG_ID`); at most 256 bytes, no control characters.
    #[arg(long, value_name = "ID")]
    org: Option<String>,
    /// Attribution: any `key=value` (repeatable), e.g. `--context teamId=core`.
    #[arg(long = "context", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    context: Vec<(String, String)>,
    /// Write the raw contract events to this file (JSON lines).
    #[arg(long, value_name = "PATH")]
    events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    sinks: SinkArgs,
}

/// Where contract records go besides the local files, and what content they may carry.
#[derive(Debug, Args)]
struct SinkArgs {
    /// Send each prompt to Sentry as a transaction (errors as error events). Without a value:
    /// `SENTRY_DSN` (which alone also turns this on). `SENTRY_ENVIRONMENT`, `SENTRY_RELEASE`,
    /// `SENTRY_TRACES_SAMPLE_RATE` apply.
    #[arg(long, value_name = "DSN", num_args = 0..=1, default_missing_value = "")]
    sentry: Option<String>,
    /// Structured JSON-lines logs of every contract record (through `tracing`) to stderr, or to
    /// PATH; filtered by `PI_LOG` / `RUST_LOG` (default `info`).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = "")]
    log_json: Option<String>,
    #[command(flatten)]
    content: ContentArgs,
    #[command(flatten)]
    otlp: OtlpArgs,
}

/// OTLP export (also enabled by `OTEL_EXPORTER_OTLP_ENDPOINT` / `_TRACES_ENDPOINT`).
#[derive(Debug, Args)]
struct OtlpArgs {
    /// Export traces over OTLP; ENDPOINT is the collector base URL (e.g. `http://localhost:4318`)
    /// or a full `…/v1/traces` URL. Without a value: the `OTEL_*` variables, else localhost:4318.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "")]
    otlp: Option<String>,
    /// `http/protobuf` (default), `http/json` or `grpc`.
    #[arg(long, value_name = "PROTOCOL")]
    otlp_protocol: Option<String>,
    /// Extra OTLP request header `key=value` (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_key_value)]
    otlp_header: Vec<(String, String)>,
    /// `service.name` resource attribute (default `pi`, or `OTEL_SERVICE_NAME`).
    #[arg(long, value_name = "NAME")]
    service_name: Option<String>,
    /// Attribute conventions: `genai` (default), `openinference` (Phoenix/Arize LLM views), `both`.
    #[arg(long, value_name = "PROFILE")]
    conventions: Option<String>,
    /// Attribution keys that become metric dimensions (default `orgId`; `userId` can explode
    /// cardinality). Comma-separated; `none` for no attribution dimensions.
    #[arg(long, value_name = "KEY,...", value_delimiter = ',')]
    metric_dims: Vec<String>,
    /// Also export every contract record as an OTLP log record correlated to its span.
    #[arg(long)]
    otlp_logs: bool,
}

/// What content each sink may receive.
#[derive(Debug, Args)]
struct ContentArgs {
    /// Opt in to content capture, per sink (repeatable). KINDS: prompt, completion, thinking,
    /// tool_args, tool_result, shell_output, file_content, provider_payload, header, error_text,
    /// or `all` (singular or plural). SINK: events (--events-jsonl), log (--log-json), json
    /// (--mode json), otlp, sentry, or the groups local (events, log, json), remote (otlp,
    /// sentry), all. A bare `--capture KINDS` means `local`: content reaches OTLP or Sentry only
    /// when named, e.g. `--capture otlp=prompt`. Errors are content: their text is `error_text`.
    /// Captured content is scrubbed of known secret formats, then `--redact`ed, then cut to 8 KiB.
    #[arg(long, value_name = "[SINK=]KIND,...")]
    capture: Vec<String>,
    /// Extra secret pattern (regex) scrubbed from captured content of every sink (repeatable;
    /// added to the built-in rules, never replacing them).
    #[arg(long, value_name = "REGEX")]
    redact: Vec<String>,
}

// Parsed once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Offline demo: two users run a scripted multi-turn coding session on the faux provider with
    /// real tools in a scratch directory; prints the span tree and cost per user/org.
    Demo(DemoArgs),
    /// Cost per user/org/model/day from session files: every assistant message, tool result with
    /// usage, compaction and branch summary counted exactly once.
    Report(ReportArgs),
    /// Replay session files as contract events into the adapters (backfill): one trace per
    /// prompt with turns, provider requests (usage, cost) and tool calls; ids derived from the
    /// session, so a replay is idempotent.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// Session files or directories (searched for `*.jsonl`); default `~/.pi/agent/sessions`.
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Write the replayed contract events as JSON lines to PATH.
    #[arg(long, value_name = "PATH")]
    events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    sinks: SinkArgs,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// Session files or directories (searched for `*.jsonl`); default `~/.pi/agent/sessions`.
    #[arg(value_name = "PATH")]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: ReportFormat,
    /// Group by these dimensions (comma-separated: day, user, org, model; default all four).
    #[arg(long, value_name = "DIMS")]
    by: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ReportFormat {
    Table,
    Csv,
    Json,
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Scratch directory (default: a new one under the system temp dir).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Where to write the contract events (default: `<dir>/events.jsonl`).
    #[arg(long, value_name = "PATH")]
    events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    sinks: SinkArgs,
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Parses arguments (one-line errors), runs, and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return ExitCode::SUCCESS;
            }
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
            output::error(format_args!("pi: {first} (see pi --help)"));
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            output::error(format_args!("pi: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async move {
        match cli.command {
            Some(Command::Demo(args)) => demo::run(args).await,
            Some(Command::Report(args)) => report::run(&args),
            Some(Command::Export(args)) => export::run(&args),
            None => match cli.print.clone() {
                Some(prompt) => run::run(&cli, &prompt).await,
                None => Err(CliError("nothing to do: give -p PROMPT, or run `pi demo` (see pi --help)".into())),
            },
        }
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            output::error(format_args!("pi: {e}"));
            ExitCode::from(2)
        }
    }
}
