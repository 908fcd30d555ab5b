//! `pi demo`: a scripted multi-turn coding session for two users on the faux provider, with real
//! tool executions in a scratch directory, traced to a local event file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;
use pi_agent::{Agent, AgentConfig, PromptResult};
use pi_observe::core::{Attribution, ObsEvent, Observability, names};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::config::Config;
use super::sinks::SinkSetup;
use super::{CliError, files, output, signals, tree};

/// `pi demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Scratch directory (default: a new one under the system temp dir).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Where to write the contract events (default: `<dir>/events.jsonl`).
    #[arg(long, value_name = "PATH")]
    pub events_jsonl: Option<PathBuf>,
    #[command(flatten)]
    pub sinks: super::sinks::SinkArgs,
}

/// A fake credential placed in a file the demo agent reads: it must never reach telemetry
/// unscrubbed.
pub const DEMO_SECRET: &str = "sk-demo-DoNotLeakThis0123456789";

fn seed(workspace: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(workspace.join("src"))?;
    std::fs::create_dir_all(workspace.join("notes"))?;
    std::fs::write(
        workspace.join("src/lib.rs"),
        "/// Adds two numbers.\npub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )?;
    std::fs::write(workspace.join("README.md"), "# calc\n\nA tiny library used by the pi demo.\n")?;
    std::fs::write(workspace.join("notes/todo.txt"), "TODO: fix add()\nTODO: start a changelog\n")?;
    std::fs::write(workspace.join("notes/credentials.txt"), format!("deploy key for staging: {DEMO_SECRET}\n"))?;
    Ok(())
}

struct Script {
    user: &'static str,
    org: &'static str,
    prompt: &'static str,
    responses: Vec<FauxResponse>,
}

fn scripts() -> Vec<Script> {
    vec![
        Script {
            user: "alice",
            org: "acme",
            prompt: "The add() function in src/lib.rs is wrong. Fix it and check the result.",
            responses: vec![
                FauxResponse::tools(
                    Some("Let me look at the project first."),
                    vec![("ls", json!({})), ("read", json!({"path": "src/lib.rs"}))],
                ),
                FauxResponse::tools(
                    Some("add() subtracts; fixing it."),
                    vec![("edit", json!({"path": "src/lib.rs", "oldText": "a - b", "newText": "a + b"}))],
                ),
                FauxResponse::tools(
                    None,
                    vec![("bash", json!({"command": "grep -n 'a + b' src/lib.rs && echo check-ok"}))],
                ),
                FauxResponse::text("Fixed: add() now returns a + b, and the check passes."),
            ],
        },
        Script {
            user: "bob",
            org: "globex",
            prompt: "Summarize the open notes and start a CHANGELOG.md.",
            responses: vec![
                FauxResponse::tools(
                    Some("Reading the notes."),
                    vec![
                        ("grep", json!({"pattern": "TODO", "path": "notes"})),
                        ("read", json!({"path": "notes/credentials.txt"})),
                    ],
                ),
                FauxResponse::tools(
                    None,
                    vec![("write", json!({"path": "CHANGELOG.md", "content": "# Changelog\n\n- Fix add()\n"}))],
                ),
                // After the write, not beside it: parallel, `find` would race it.
                FauxResponse::tools(None, vec![("find", json!({"pattern": "**/*.md"}))]),
                FauxResponse::text("Two TODOs: fix add() and start a changelog. CHANGELOG.md is started."),
            ],
        },
    ]
}

async fn run_user(
    hub: Observability,
    script: Script,
    workspace: PathBuf,
    sessions: PathBuf,
    cancel: CancellationToken,
) -> Result<PromptResult, CliError> {
    let registry = Registry::builtin();
    let model = registry.default_for("faux").cloned().ok_or_else(|| CliError::Usage("faux model missing".into()))?;
    let faux = FauxProvider::new().chunk_chars(6).chunk_delay(Duration::from_millis(2));
    faux.push(script.responses);
    let session = SessionWriter::create(&sessions.join(format!("{}.jsonl", script.user)), &workspace)
        .map_err(|e| CliError::Usage(format!("session: {e}")))?;
    let mut agent = Agent::new(
        Arc::new(faux),
        model,
        ToolRegistry::all_builtin(),
        Some(session),
        AgentConfig::default(),
        workspace,
    );
    let who = Attribution::new().with(names::CTX_USER_ID, script.user).with(names::CTX_ORG_ID, script.org);
    let mut ignore = |_| {};
    hub.run_with_context(who, agent.prompt(script.prompt, &cancel, &mut ignore))
        .await
        .map_err(|e| CliError::Failure(format!("session: {e}")))
}

pub async fn run(args: DemoArgs, cfg: &Config) -> Result<ExitCode, CliError> {
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("pi-demo-{}", pi_observe::core::SpanId::random())),
    };
    let (workspace, sessions) = (dir.join("workspace"), dir.join("sessions"));
    let events_path = args.events_jsonl.unwrap_or_else(|| dir.join("events.jsonl"));
    let sink_setup = SinkSetup::resolve(&args.sinks, Some(&events_path), cfg)?;
    files::check_outputs(&[], &sink_setup.output_files())?;
    // Each user works in a checkout of their own (`workspace/alice`, `workspace/bob`): two people
    // do not share one working tree, and the run is the same every time.
    for script in scripts() {
        seed(&workspace.join(script.user)).map_err(|e| CliError::Usage(format!("--dir {}: {e}", dir.display())))?;
    }
    let hub = sink_setup.hub();
    // The span tree printed on the terminal: safe fields only.
    let terminal_policy = Arc::new(sink_setup.policies.base.clone());
    let sinks = sink_setup.attach(&hub, false)?;
    let collected = Arc::new(Mutex::new(Vec::new()));
    let sink = collected.clone();
    let collector = hub.subscribe_arc(
        Arc::new(move |e: &ObsEvent| sink.lock().unwrap_or_else(|p| p.into_inner()).push(e.clone())),
        terminal_policy,
    );

    let cancel = CancellationToken::new();
    let interrupted = signals::abort_on(&cancel)?;
    let failed = run_users(&hub, &workspace, &sessions, &cancel).await?;
    let events = std::mem::take(&mut *collected.lock().unwrap_or_else(|p| p.into_inner()));
    collector.cancel();
    let mut traces: Vec<_> = events
        .iter()
        .filter(|e| e.kind == pi_observe::core::EventKind::Start && e.name == names::AGENT_PROMPT)
        .map(|e| e.trace_id)
        .collect();
    traces.dedup();
    sinks.finish("demo", &traces);
    if let Some(signal) = interrupted.get() {
        return Ok(signals::exit(*signal));
    }
    output::text(format_args!("{}", tree::render_trees(&events)));
    output::line("");
    output::text(format_args!("{}", tree::render_costs(&events)));
    output::line("");
    output::line(format_args!("workspace: {}", workspace.display()));
    output::line(format_args!("sessions:  {}", sessions.display()));
    output::line(format_args!("events:    {} ({} records)", events_path.display(), events.len()));
    let stats = hub.stats();
    output::line(format_args!(
        "pipeline:  {} emitted, {} delivered, {} dropped, {} content fields withheld",
        stats.emitted,
        stats.delivered,
        stats.dropped_total(),
        stats.fields_withheld
    ));
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Runs every scripted user concurrently and prints each answer; true when one of them failed.
async fn run_users(
    hub: &Observability,
    workspace: &Path,
    sessions: &Path,
    cancel: &CancellationToken,
) -> Result<bool, CliError> {
    let mut tasks = Vec::new();
    for script in scripts() {
        let user = script.user;
        let run = run_user(hub.clone(), script, workspace.join(user), sessions.to_owned(), cancel.clone());
        tasks.push((user, tokio::spawn(run)));
    }
    let mut failed = false;
    for (user, task) in tasks {
        match task.await {
            Ok(Ok(result)) if result.error.is_none() => {
                let answer = result.last_message.map(|m| m.text()).unwrap_or_default();
                output::line(format_args!("{user}: {answer}"));
            }
            Ok(Ok(result)) => {
                failed = true;
                output::error(format_args!("pi: {user}: {}", result.error.map(|e| e.to_string()).unwrap_or_default()));
            }
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(CliError::Failure(format!("{user}: task failed: {e}"))),
        }
    }
    Ok(failed)
}
