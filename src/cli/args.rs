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
    /// Continue the most recent session of this working directory (a new one if there is none).
    #[arg(short = 'c', long = "continue", conflicts_with_all = ["session", "no_session"])]
    pub continue_session: bool,
    /// Choose the session to continue from this project's sessions, in a picker (the
    /// interactive mode's `/resume`).
    #[arg(short = 'r', long = "resume", conflicts_with_all = ["session", "no_session", "continue_session"])]
    pub resume: bool,
    /// Fork this session (a file, or the start of a session id) into a new session file and
    /// continue there: the same entries, the new file's header naming it as `parentSession`.
    #[arg(long, value_name = "PATH|ID", conflicts_with_all = ["session", "no_session", "continue_session", "resume"])]
    pub fork: Option<PathBuf>,
    /// Where sessions are kept (over `PI_CODING_AGENT_SESSION_DIR` and the `sessionDir` setting).
    #[arg(long, value_name = "DIR")]
    pub session_dir: Option<PathBuf>,
    /// Comma-separated tools to enable (`read,write,edit,bash,ls,grep,find`), or `none`.
    #[arg(short = 't', long, value_name = "LIST")]
    pub tools: Option<String>,
    /// Working directory for tools (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Extra models / price overrides, added to `~/.pi/agent/models.json` (upstream's
    /// `{"providers": …}` shape, or a JSON array in the built-in table's shape).
    #[arg(long = "models-file", value_name = "PATH")]
    pub models_file: Option<PathBuf>,
    /// The models Ctrl+P cycles through (upstream's scope): comma-separated patterns of ids or
    /// `provider/id`, `*` for any characters, e.g. `claude-*,gpt-4o` (else the settings'
    /// `enabledModels`).
    #[arg(long, value_name = "PATTERNS")]
    pub models: Option<String>,
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
    #[arg(long = "skills", visible_alias = "skill", value_name = "DIR")]
    pub skills: Vec<PathBuf>,
    /// Extra prompt-templates directory (repeatable; also the settings' `prompts`, `.pi/prompts` of
    /// a trusted project and `~/.pi/agent/prompts`).
    #[arg(long = "prompt-templates", visible_alias = "prompt-template", value_name = "DIR")]
    pub prompt_templates: Vec<PathBuf>,
    /// Load a theme file, or a folder of them (repeatable; also the settings' `themes`, `.pi/themes`
    /// of a trusted project and `~/.pi/agent/themes`); the settings' `theme` names the one used.
    #[arg(long = "theme", value_name = "PATH")]
    pub themes: Vec<PathBuf>,
    /// Discover no themes (those given with `--theme` still load).
    #[arg(long)]
    pub no_themes: bool,
    /// No tools at all unless `--tools` names some (built-in and extensions' tools; `-nt`).
    #[arg(long)]
    pub no_tools: bool,
    /// No built-in tools unless `--tools` names some; extensions' tools stay (`-nbt`).
    #[arg(long)]
    pub no_builtin_tools: bool,
    /// Thinking level for models that reason (overrides the settings' `defaultThinkingLevel`).
    #[arg(long, value_name = "LEVEL", value_parser = ["off", "minimal", "low", "medium", "high", "xhigh"])]
    pub thinking: Option<String>,
    /// API key for the provider of this run (overrides its environment variable and
    /// `models.json`); sent only to that provider's server.
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,
    /// Replace the default system prompt: the text, or the contents of the file it names (skills
    /// and context files are still added). Without it: a trusted project's `.pi/SYSTEM.md`, else
    /// `~/.pi/agent/SYSTEM.md`.
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    /// Append to the system prompt: the text, or the contents of the file it names (repeatable).
    /// Without it: a trusted project's `.pi/APPEND_SYSTEM.md`, else `~/.pi/agent/APPEND_SYSTEM.md`.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Vec<String>,
    /// Load no extensions but those given with `-e` (`-ne`).
    #[arg(long)]
    pub no_extensions: bool,
    /// Discover no skills (those given with `--skills` still load; `-ns`).
    #[arg(long)]
    pub no_skills: bool,
    /// Discover no prompt templates (those given with `--prompt-templates` still load; `-np`).
    #[arg(long)]
    pub no_prompt_templates: bool,
    /// Load no `AGENTS.md` / `CLAUDE.md` context files (`-nc`; upstream's discovery: the agent
    /// folder's, then each folder's from the root down to the working directory).
    #[arg(long)]
    pub no_context_files: bool,
    /// Make no network request at start (upstream's `--offline`; also `PI_OFFLINE=1`): pi has no
    /// update check or install telemetry to skip, and upstream's extension packages are not
    /// installed from npm (an extension that needs them fails, naming the install command).
    #[arg(long)]
    pub offline: bool,
    /// Say at start what this run uses: model, tools, extensions, skills, prompt templates, session.
    #[arg(long)]
    pub verbose: bool,
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
    #[arg(long = "context", value_name = "KEY=VALUE", value_parser = crate::cli::sinks::parse_key_value)]
    pub context: Vec<(String, String)>,
    /// Write the raw contract events to this file (JSON lines).
    #[arg(long, value_name = "PATH")]
    pub events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    pub sinks: crate::cli::sinks::SinkArgs,
}

/// Upstream's multi-letter short options (`-nt`, `-nbt`, …) as the long options they stand for;
/// clap reads `-nt` as `-n -t`. Only whole arguments before `--` are rewritten.
pub fn expand_upstream_shorts(argv: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    const SHORTS: [(&str, &str); 6] = [
        ("-nt", "--no-tools"),
        ("-nbt", "--no-builtin-tools"),
        ("-ne", "--no-extensions"),
        ("-ns", "--no-skills"),
        ("-np", "--no-prompt-templates"),
        ("-nc", "--no-context-files"),
    ];
    let mut ended = false;
    argv.into_iter()
        .map(|arg| {
            ended |= arg == "--";
            let long = (!ended).then(|| SHORTS.iter().find(|(short, _)| arg == *short)).flatten();
            long.map_or(arg, |(_, long)| (*long).into())
        })
        .collect()
}
