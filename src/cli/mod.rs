//! The `pi` command: argument parsing and dispatch. Each subcommand owns its arguments; the
//! groups several share live in [`args`]; every sink is resolved, attached and finished by
//! [`sinks`]; errors and exit codes are [`error`].

mod args;
mod attribution;
pub mod config;
mod config_cmd;
mod demo;
mod error;
mod export;
mod extensions;
mod faux_script;
mod files;
mod images;
mod initial;
mod js_packages;
mod model_scope;
mod models_cmd;
mod modes;
mod observe;
mod output;
mod paths;
mod report;
mod report_data;
mod report_html;
mod run_state;
mod session_html;
mod sessions;
pub mod settings;
mod setup;
mod signals;
mod sinks;
mod tree;
mod trust_cmd;
mod tty_run;
mod typescript;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use args::{AgentArgs, Mode, ObserveArgs};
pub use error::CliError;

/// pi: a coding agent whose every prompt is a trace, attributed to the user and org that ran it.
#[derive(Debug, Parser)]
#[command(name = "pi", version, about, long_about = None, args_conflicts_with_subcommands = true,
          disable_version_flag = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print mode: send the messages in turn, print the answers and exit (also the mode when
    /// stdin is piped; its text goes before the first message).
    #[arg(short = 'p', long = "print")]
    print: bool,
    /// `text` (print the answer), `json` (print mode: one JSON line per agent event and per
    /// contract event) or `rpc` (upstream pi's RPC protocol on stdin/stdout; see docs/rpc.md).
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Messages, each a prompt in turn (`pi "fix the tests"`); `@FILE` arguments put the file's
    /// contents before the first message, as `<file name="…">` blocks.
    #[arg(value_name = "MESSAGES")]
    messages: Vec<String>,
    /// Print the version.
    #[arg(short = 'v', long = "version", action = clap::ArgAction::Version)]
    version: Option<bool>,
    /// List the models pi knows (upstream's catalogue, `models.json`, `--models`) with context,
    /// limits, prices per million tokens and whether they can run here; SEARCH filters by
    /// provider and id (each word's letters in order).
    #[arg(long = "list-models", value_name = "SEARCH", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["print", "messages"])]
    list_models: Option<String>,
    /// Write this session file as one HTML page and exit: to the first message argument, else
    /// `pi-session-<file name>.html` here (upstream's `--export <in> [out]`).
    #[arg(long, value_name = "SESSION", conflicts_with_all = ["print", "list_models"])]
    export: Option<std::path::PathBuf>,
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    observe: ObserveArgs,
}

// Parsed once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Offline demo: two users run a scripted multi-turn coding session on the faux provider with
    /// real tools in a scratch directory; prints the span tree and cost per user/org.
    Demo(demo::DemoArgs),
    /// Cost per user/org/model/day from session files: every assistant message, tool result with
    /// usage, compaction and branch summary counted exactly once.
    Report(report::ReportArgs),
    /// Replay session files as contract events into the adapters (backfill): one trace per
    /// prompt with turns, provider requests (usage, cost) and tool calls; ids derived from the
    /// session, so a replay is idempotent.
    Export(export::ExportArgs),
    /// The telemetry pipeline itself: `status` (configuration, last run, spool), `test` (a probe
    /// per sink), `flush` (deliver the spool now), `canary` (would this configuration leak?).
    Observe(observe::ObserveCommand),
    /// The effective configuration — settings files, flags, environment, managed policy —
    /// with the source of each value and what the policy capped (no secret values).
    Config(config_cmd::ConfigArgs),
    /// Trust a project (default: the current directory) so its `.pi/` settings, skills,
    /// prompt templates and extensions load; `--revoke` takes the trust back.
    Trust(trust_cmd::TrustArgs),
    /// A TypeScript file as JavaScript (the JavaScript host's module loader asks for it).
    #[command(hide = true)]
    StripTypes(typescript::StripTypesArgs),
    /// A program on the terminal in pi's process group (an extension's full-screen command).
    #[command(hide = true)]
    TtyRun(tty_run::TtyRunArgs),
}

/// Parses arguments (one-line errors), runs, and maps the outcome to an exit code
/// ([`error`] lists them).
pub fn main() -> ExitCode {
    let cli = match parse_command_line() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // Asked once per TypeScript module an extension loads: nothing else to set up.
    if let Some(Command::StripTypes(args)) = &cli.command {
        return typescript::run(args);
    }
    if let Some(Command::TtyRun(args)) = &cli.command {
        return tty_run::run(args);
    }
    // Commands that run the agent or sinks: the secret scrubber compiles on a thread of its own
    // meanwhile, ready before the first tool call or record needs it.
    if matches!(&cli.command, None | Some(Command::Demo(_) | Command::Export(_) | Command::Observe(_))) {
        sinks::compile_scrubber_early();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            output::error(format_args!("pi: cannot start the async runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async move {
        // The project is the working directory (`--cwd` for a run); the managed policy and the
        // settings are read before anything else, and a broken managed policy stops every command.
        let project = match &cli.command {
            None => setup::cwd(cli.agent.cwd.as_deref())?,
            Some(Command::Config(args)) => setup::cwd(args.agent.cwd.as_deref())?,
            _ => setup::cwd(None)?,
        };
        let cfg = config::Config::load(&project)?;
        let storage = cfg.find(&config::keys::TRACE_DETAIL).map(|(detail, _)| detail);
        pi_agent::session::trace_storage_as_spans(storage == Some(settings::TraceDetail::Storage));
        match cli.command {
            Some(Command::Demo(args)) => demo::run(args, &cfg).await,
            Some(Command::Report(args)) => report::run(&args),
            Some(Command::Export(args)) => export::run(&args, &cfg),
            Some(Command::Observe(command)) => observe::run(&command, &cfg).await,
            Some(Command::Config(args)) => config_cmd::run(&args, &cfg),
            Some(Command::Trust(args)) => trust_cmd::run(&args, &cfg),
            Some(Command::StripTypes(args)) => Ok(typescript::run(&args)),
            Some(Command::TtyRun(args)) => Ok(tty_run::run(&args)),
            None if cli.export.is_some() => {
                let input = cli.export.as_deref().unwrap_or(std::path::Path::new(""));
                let out = cli.messages.first().map(std::path::Path::new);
                let path = session_html::export("--export", input, out, &project)?;
                output::line(format_args!("Exported to: {}", path.display()));
                Ok(ExitCode::SUCCESS)
            }
            None if cli.list_models.is_some() => {
                models_cmd::run(cli.list_models.as_deref().unwrap_or_default(), &cli.agent, &cfg)
            }
            None => run_agent(cli, &cfg).await,
        }
    });
    // Everything was written and flushed inside; a blocking read still waiting on stdin (RPC
    // mode, whose client may keep it open) must not hold the exit.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            output::error(format_args!("pi: {e}"));
            e.exit_code()
        }
    }
}

/// The command line (upstream's short flags expanded, extensions' flags set aside for them);
/// `Err` with the exit code once help, the version or a one-line usage error is printed.
fn parse_command_line() -> Result<Cli, ExitCode> {
    sinks::declare_settings();
    let command = sinks::with_sink_flags(<Cli as clap::CommandFactory>::command());
    let argv = args::expand_upstream_shorts(std::env::args_os().collect());
    let (argv, extension_flags) = extensions::split_extension_flags(&command, argv);
    extensions::set_extension_flags(extension_flags);
    let parsed = command.try_get_matches_from(argv).and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    parsed.map_err(|e| {
        use clap::error::ErrorKind;
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        let rendered = e.render().to_string();
        let first = rendered.lines().next().unwrap_or("invalid arguments").trim_start_matches("error: ");
        output::error(format_args!("pi: {first} (see pi --help)"));
        ExitCode::from(2)
    })
}

/// The agent in the mode upstream picks: `--mode rpc`; print mode for `-p`, `--mode json` or a
/// piped stdin; the interactive mode otherwise.
async fn run_agent(cli: Cli, cfg: &config::Config) -> Result<ExitCode, CliError> {
    use std::io::IsTerminal;
    js_packages::set_offline(cli.agent.offline);
    let mode = cli.mode.unwrap_or(Mode::Text);
    let interactive = mode == Mode::Text && !cli.print && std::io::stdin().is_terminal();
    if cli.agent.resume && !interactive {
        return Err(CliError::Usage(
            "-r/--resume picks a session in the interactive mode; elsewhere give --session PATH|ID or -c".into(),
        ));
    }
    if mode == Mode::Rpc {
        if cli.print {
            return Err(CliError::Usage("--mode rpc reads its prompts from stdin: drop -p".into()));
        }
        if !cli.messages.is_empty() {
            return Err(CliError::Usage("--mode rpc reads its prompts from stdin: drop the messages".into()));
        }
        return modes::rpc::run(&cli.agent, &cli.observe, cfg).await;
    }
    if !cli.agent.themes.is_empty() {
        // Only the terminal draws with them, but a theme given that cannot be read is a bad flag.
        setup::themes(&cli.agent, &setup::cwd(cli.agent.cwd.as_deref())?, cfg)?;
    }
    let piped = !std::io::stdin().is_terminal();
    let print = cli.print || mode == Mode::Json || piped;
    let stdin = if piped { initial::read_stdin(!cli.messages.is_empty())? } else { None };
    let initial = initial::messages(cli.messages, stdin, &setup::cwd(cli.agent.cwd.as_deref())?)?;
    if print && initial.messages.iter().all(|m| m.trim().is_empty()) {
        // Nothing runs, so no extension loads: an option only one could take is the culprit.
        extensions::check_extension_flags(&[])?;
        let how = match (mode, cli.print) {
            (Mode::Json, _) => "--mode json",
            (_, true) => "-p",
            _ => "print mode (stdin is not a terminal)",
        };
        return Err(CliError::Usage(format!(
            "{how}: no message to send: give one (pi -p \"…\"), an @file, or pipe one on stdin (the \
             interactive mode needs a terminal; programs use --mode rpc)"
        )));
    }
    if print {
        modes::print::run(&cli.agent, &cli.observe, mode, initial, cfg).await
    } else {
        modes::interactive::run(&cli.agent, &cli.observe, initial, cfg).await
    }
}
