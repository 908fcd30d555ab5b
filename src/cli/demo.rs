//! `pi demo`: a scripted multi-turn coding session for two users on the faux provider, with real
//! tool executions in a scratch directory, traced to a local event file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pi_agent::harness::{Agent, AgentConfig, PromptResult};
use pi_agent::model::Registry;
use pi_agent::provider::{FauxProvider, FauxResponse};
use pi_agent::session::SessionWriter;
use pi_agent::tools::ToolRegistry;
use pi_observe::core::{Attribution, ObsEvent, Observability, names};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::run::{
    FLUSH_DEADLINE, LocalSinks, attach_log_json, attach_otlp, attach_sentry, attach_sinks, report_events,
    report_export, report_sentry,
};
use super::{CliError, DemoArgs, output, setup, tree};

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
                    vec![
                        ("write", json!({"path": "CHANGELOG.md", "content": "# Changelog\n\n- Fix add()\n"})),
                        ("find", json!({"pattern": "**/*.md"})),
                    ],
                ),
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
    let model = registry.default_for("faux").cloned().ok_or_else(|| CliError("faux model missing".into()))?;
    let faux = FauxProvider::new().chunk_chars(6).chunk_delay(Duration::from_millis(2));
    faux.push(script.responses);
    let session = SessionWriter::create(&sessions.join(format!("{}.jsonl", script.user)), &workspace)
        .map_err(|e| CliError(format!("session: {e}")))?;
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
        .map_err(|e| CliError(format!("session: {e}")))
}

pub async fn run(args: DemoArgs) -> Result<ExitCode, CliError> {
    let policies = setup::policies(&args.sinks.content)?;
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("pi-demo-{}", pi_observe::core::SpanId::random())),
    };
    let workspace = dir.join("workspace");
    let sessions = dir.join("sessions");
    let events_path = args.events_jsonl.unwrap_or_else(|| dir.join("events.jsonl"));
    let otlp = setup::otlp(&args.sinks.otlp)?;
    let sentry_config = setup::sentry(args.sinks.sentry.as_deref())?;
    setup::check_outputs(&[], &super::run::output_files(Some(&events_path), args.sinks.log_json.as_deref()))?;
    seed(&workspace).map_err(|e| CliError(format!("--dir {}: {e}", dir.display())))?;
    let flush_deadline = otlp.as_ref().and_then(|c| c.timeout).unwrap_or(FLUSH_DEADLINE);
    let hub = Observability::with_policy(policies.base.clone());
    let LocalSinks { mut subscriptions, events: events_file } =
        attach_sinks(&hub, &policies, Some(&events_path), false)?;
    let exporter = attach_otlp(&hub, &policies.otlp, otlp, &mut subscriptions)?;
    let sentry = attach_sentry(&hub, &policies.sentry, sentry_config, &mut subscriptions)?;
    let log_guard = attach_log_json(&hub, &policies.log, args.sinks.log_json.as_deref(), &mut subscriptions)?;
    let collected = Arc::new(Mutex::new(Vec::new()));
    let sink = collected.clone();
    let collector = hub.subscribe_arc(
        Arc::new(move |e: &ObsEvent| sink.lock().unwrap_or_else(|p| p.into_inner()).push(e.clone())),
        // The span tree printed on the terminal: safe fields only.
        Arc::new(policies.base),
    );

    let cancel = CancellationToken::new();
    let interrupted = super::run::abort_on_signals(&cancel)?;
    let mut tasks = Vec::new();
    for script in scripts() {
        let user = script.user;
        let run = run_user(hub.clone(), script, workspace.clone(), sessions.clone(), cancel.clone());
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
            Err(e) => return Err(CliError(format!("{user}: task failed: {e}"))),
        }
    }
    let _ = hub.shutdown(flush_deadline);
    report_events(events_file.as_deref());
    collector.cancel();
    drop(subscriptions);
    drop(log_guard);
    let events = std::mem::take(&mut *collected.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(signal) = interrupted.get() {
        return Ok(super::run::interrupted_exit(*signal));
    }

    output::text(format_args!("{}", tree::render_trees(&events)));
    output::line("");
    output::text(format_args!("{}", tree::render_costs(&events)));
    output::line("");
    output::line(format_args!("workspace: {}", workspace.display()));
    output::line(format_args!("sessions:  {}", sessions.display()));
    output::line(format_args!("events:    {} ({} records)", events_path.display(), events.len()));
    if let Some(otel) = &exporter {
        let mut traces: Vec<_> = events
            .iter()
            .filter(|e| e.kind == pi_observe::core::EventKind::Start && e.name == names::AGENT_PROMPT)
            .map(|e| e.trace_id)
            .collect();
        traces.dedup();
        report_export(otel, &traces);
    }
    if let Some(sentry) = &sentry {
        report_sentry(sentry);
    }
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
