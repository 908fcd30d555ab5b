//! Permission gate: an extension that blocks dangerous shell commands when no UI can ask the
//! user (print mode, CI), and lets everything else through.
//!
//! ```sh
//! cargo run --example permission_gate
//! ```
//!
//! The faux model asks for `rm -rf important` and `echo hello`; the gate blocks the first (the
//! model gets the reason as the tool's error result, the directory survives) and the second runs.
//! Every handler run is a `pi.agent.hook` span; the blocked tool's span says who blocked it.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;

use pi_observe::agent::extensions::{Extension, ExtensionApi, ToolCallResult, hooks};
use pi_observe::agent::model::Registry;
use pi_observe::agent::provider::{FauxProvider, FauxResponse};
use pi_observe::agent::tools::ToolRegistry;
use pi_observe::agent::{Agent, AgentConfig, PromptSource};
use pi_observe::core::testing::{CaptureSubscriber, spans_from_events};
use pi_observe::core::{Observability, names};
use tokio_util::sync::CancellationToken;

/// Blocks shell commands matching these fragments unless a UI could confirm them.
struct PermissionGate {
    dangerous: Vec<&'static str>,
}

impl Extension for PermissionGate {
    fn name(&self) -> &str {
        "permission-gate"
    }

    fn register(&self, api: &mut ExtensionApi<'_>) {
        let dangerous = self.dangerous.clone();
        api.on(hooks::ToolCall, move |event, ctx| {
            let dangerous = dangerous.clone();
            async move {
                if event.tool_name != "bash" {
                    return Ok(None);
                }
                let command = event.input["command"].as_str().unwrap_or_default();
                let Some(pattern) = dangerous.iter().find(|p| command.contains(**p)) else { return Ok(None) };
                if ctx.has_ui {
                    // An interactive front end would ask the user here.
                    return Ok(None);
                }
                Ok(Some(ToolCallResult::block(format!("`{pattern}` needs confirmation and no UI is available"))))
            }
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("pi-permission-gate-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("important"))?;

    let faux = Arc::new(FauxProvider::new());
    faux.push([
        FauxResponse::tools(
            Some("Cleaning up."),
            vec![
                ("bash", serde_json::json!({"command": "rm -rf important"})),
                ("bash", serde_json::json!({"command": "echo hello"})),
            ],
        ),
        FauxResponse::text("Done (one command was refused)."),
    ]);
    let model = Registry::builtin().find("faux", "faux-1").ok_or("no faux model")?.clone();
    let config = AgentConfig { source: PromptSource::Interactive, has_ui: false, ..AgentConfig::default() };
    let mut agent = Agent::new(faux, model, ToolRegistry::all_builtin(), None, config, dir.clone());
    agent.add_extension(&PermissionGate { dangerous: vec!["rm -rf", "sudo ", "mkfs", "dd if="] });

    let hub = Observability::new();
    let (capture, _subscription) = CaptureSubscriber::attach(&hub);
    let cancel = CancellationToken::new();
    let result = hub.scope(agent.prompt("tidy the workspace", &cancel, &mut |_| {})).await?;

    for message in agent.messages() {
        if let pi_observe::agent::message::Message::ToolResult(r) = message {
            let text = pi_observe::agent::message::joined_text(&r.content);
            println!("tool result ({}): error={} {}", r.tool_name, r.is_error, text.trim());
        }
    }
    for span in spans_from_events(&capture.take()) {
        if span.name == names::AGENT_HOOK || span.name == names::AGENT_TOOL_CALL {
            let attr = |k: &str| span.attributes.get(k).map(|v| format!("{v:?}")).unwrap_or_default();
            println!(
                "span {:<20} tool={} hook={} extension={} outcome={} blocked={} blockedBy={}",
                span.name,
                attr(names::TOOL_NAME),
                attr(names::HOOK_NAME),
                attr(names::EXTENSION_NAME),
                attr(names::HOOK_OUTCOME),
                attr(names::BLOCKED),
                attr(names::BLOCKED_BY),
            );
        }
    }
    println!("answer: {}", result.last_message.map(|m| m.text()).unwrap_or_default());
    let survived = dir.join("important").exists();
    std::fs::remove_dir_all(&dir)?;
    if !survived {
        return Err("the gate let rm -rf through".into());
    }
    println!("ok: `important/` survived");
    Ok(())
}
