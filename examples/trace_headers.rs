//! Trace headers: an extension that tags every provider request with a per-request header
//! carrying the prompt's trace id, through `before_provider_headers` — so an LLM gateway's logs
//! can be joined with the trace. The hook runs once per request; retries reuse its headers.
//!
//! ```sh
//! cargo run --example trace_headers
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pi_observe::agent::extensions::{Extension, HeaderPatch, extension, hooks};
use pi_observe::agent::model::Registry;
use pi_observe::agent::provider::{FauxProvider, FauxResponse, ProviderError};
use pi_observe::agent::tools::ToolRegistry;
use pi_observe::agent::{Agent, AgentConfig};
use pi_observe::core::{Observability, current};
use tokio_util::sync::CancellationToken;

/// Adds `x-pi-trace-id` (the current trace) and `x-pi-request` (a counter) to each request. An
/// extension without configuration can be a closure (`permission_gate` implements the trait).
fn trace_headers() -> impl Extension {
    let requests = Arc::new(AtomicU64::new(0));
    extension("trace-headers", move |api| {
        let requests = requests.clone();
        api.on(hooks::BeforeProviderHeaders, move |_event, _ctx| {
            let n = requests.fetch_add(1, Ordering::Relaxed) + 1;
            // The handler runs inside the prompt's trace: read its id from the context.
            let trace_id = current().trace_id().map(|t| t.to_string()).unwrap_or_default();
            async move {
                Ok(Some(HeaderPatch::from([
                    ("x-pi-trace-id".to_owned(), Some(trace_id)),
                    ("x-pi-request".to_owned(), Some(n.to_string())),
                ])))
            }
        });
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let faux = Arc::new(FauxProvider::new());
    let busy = ProviderError::Http { status: 503, message: "busy".into(), retry_after: None };
    faux.push([
        FauxResponse::tools(None, vec![("ls", serde_json::json!({}))]),
        FauxResponse::error(busy),
        FauxResponse::text("Listed."),
    ]);
    let model = Registry::builtin().find("faux", "faux-1").ok_or("no faux model")?.clone();
    let cwd = std::env::current_dir()?;
    let mut agent = Agent::new(faux.clone(), model, ToolRegistry::all_builtin(), None, AgentConfig::default(), cwd);
    agent.add_extension(&trace_headers());

    let hub = Observability::new();
    let _subscription = hub.subscribe(|_: &pi_observe::core::ObsEvent| {});
    let cancel = CancellationToken::new();
    hub.scope(agent.prompt("what is here?", &cancel, &mut |_| {})).await?;

    let sent = faux.sent();
    for (attempt, request) in sent.iter().enumerate() {
        println!("attempt {attempt}: {:?}", request.headers);
    }
    // Two requests (turns); the second was retried once after a 503 and kept its header.
    let tags: Vec<_> = sent.iter().map(|r| r.headers.get("x-pi-request").cloned().unwrap_or_default()).collect();
    if tags != ["1", "2", "2"] || sent.iter().any(|r| r.headers.get("x-pi-trace-id").is_none_or(|t| t.len() != 32)) {
        return Err(format!("unexpected headers: {tags:?}").into());
    }
    println!("ok: one header set per request, reused by its retry");
    Ok(())
}
