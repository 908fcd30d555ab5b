//! Audit log: the tutorial extension that counts turns, numbers every file read, and writes an
//! audit summary when the session shuts down.
//!
//! ```sh
//! cargo run --example audit_log
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Arc, Mutex};

use pi_observe::agent::events::AgentEvent;
use pi_observe::agent::extensions::{Extension, ExtensionApi, hooks};
use pi_observe::agent::model::Registry;
use pi_observe::agent::provider::{FauxProvider, FauxResponse};
use pi_observe::agent::tools::ToolRegistry;
use pi_observe::agent::{Agent, AgentConfig};
use pi_observe::core::Observability;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Audit {
    turns: u64,
    reads: Vec<String>,
    lines: Vec<String>,
}

/// Counts turns, numbers reads, writes the log to `path` on `session_shutdown`.
struct AuditLog {
    path: std::path::PathBuf,
    state: Arc<Mutex<Audit>>,
}

impl Extension for AuditLog {
    fn name(&self) -> &str {
        "audit-log"
    }

    fn register(&self, api: &mut ExtensionApi<'_>) {
        let state = self.state.clone();
        api.on(hooks::Notify::TurnEnd, move |_, _| {
            let state = state.clone();
            async move {
                let mut audit = state.lock().map_err(|_| "audit state poisoned")?;
                audit.turns += 1;
                Ok(None)
            }
        });
        let state = self.state.clone();
        api.on(hooks::ToolCall, move |event, _| {
            let state = state.clone();
            async move {
                if event.tool_name == "read" {
                    let mut audit = state.lock().map_err(|_| "audit state poisoned")?;
                    let path = event.input["path"].as_str().unwrap_or("?").to_owned();
                    let n = audit.reads.len() + 1;
                    audit.lines.push(format!("read #{n}: {path}"));
                    audit.reads.push(path);
                }
                Ok(None)
            }
        });
        let (state, path) = (self.state.clone(), self.path.clone());
        api.on(hooks::Notify::SessionShutdown, move |_, ctx| {
            let (state, path) = (state.clone(), path.clone());
            async move {
                let audit = state.lock().map_err(|_| "audit state poisoned")?;
                let mut log = audit.lines.join("\n");
                log.push_str(&format!(
                    "\nsession {}: {} turns, {} reads\n",
                    ctx.session.id().unwrap_or_else(|| "(none)".into()),
                    audit.turns,
                    audit.reads.len()
                ));
                std::fs::write(&path, log)?;
                Ok(None)
            }
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("pi-audit-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("a.txt"), "alpha\n")?;
    std::fs::write(dir.join("b.txt"), "beta\n")?;
    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(None, vec![("read", serde_json::json!({"path": "a.txt"}))]),
        FauxResponse::tools(None, vec![("read", serde_json::json!({"path": "b.txt"}))]),
        FauxResponse::text("Both files read."),
    ]);
    let model = Registry::builtin().find("faux", "faux-1").ok_or("no faux model")?.clone();
    let mut agent = Agent::new(faux, model, ToolRegistry::all_builtin(), None, AgentConfig::default(), dir.clone());
    let log_path = dir.join("audit.log");
    agent.add_extension(&AuditLog { path: log_path.clone(), state: Default::default() });

    let hub = Observability::new();
    let cancel = CancellationToken::new();
    let mut errors = Vec::new();
    let mut sink = |event: AgentEvent| {
        if let AgentEvent::ExtensionError { .. } = event {
            errors.push(event);
        }
    };
    hub.scope(async {
        agent.prompt("read both files", &cancel, &mut sink).await?;
        agent.shutdown(&mut sink).await;
        Ok::<_, pi_observe::agent::AgentError>(())
    })
    .await?;
    let log = std::fs::read_to_string(&log_path)?;
    print!("{log}");
    std::fs::remove_dir_all(&dir)?;
    if !errors.is_empty() || !log.contains("read #2: b.txt") || !log.contains("3 turns, 2 reads") {
        return Err(format!("unexpected audit log ({errors:?}):\n{log}").into());
    }
    println!("ok");
    Ok(())
}
