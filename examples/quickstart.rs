//! Quickstart: two users run nested operations concurrently; every contract event is printed as
//! one JSON line, followed by the hub's self-telemetry.
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! The tree per user: `pi.agent.prompt` → `pi.agent.turn` → `pi.ai.provider.request` (with a
//! `first_token` point event and token usage recorded at the end) and two parallel
//! `pi.agent.tool_call`s in spawned tasks, each appending a session entry; one tool call fails.
//! Content (the prompt text) is attached as a Content-class field and, under the default policy,
//! never printed.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::time::Duration;

use pi_observe::core::{
    Attribution, ContentKind, ObsEvent, Observability, Payload, Span, names, record_event, spawn, trace_operation,
    trace_operation_with,
};

#[derive(Debug)]
struct ToolError(String);

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

async fn tool_call(tool: &'static str, call_id: String, fail: bool) -> Result<usize, ToolError> {
    let payload = Payload::new().safe(names::TOOL_NAME, tool).safe(names::TOOL_CALL_ID, call_id);
    trace_operation_with(names::AGENT_TOOL_CALL, payload, move |span: Span| async move {
        tokio::time::sleep(Duration::from_millis(if fail { 3 } else { 5 })).await;
        if fail {
            return Err(ToolError(format!("{tool}: no such file: notes.txt")));
        }
        let bytes = 128;
        span.record(Payload::new().safe(names::RESULT_BYTES, bytes).safe(names::IS_ERROR, false));
        trace_operation(names::AGENT_SESSION_APPEND_ENTRY, Payload::new().safe(names::ENTRY_TYPE, "message"), async {
            Ok::<_, ToolError>(())
        })
        .await?;
        Ok(bytes)
    })
    .await
}

async fn prompt(text: &'static str) -> Result<(), ToolError> {
    let payload = move || {
        Payload::new()
            .safe(names::SESSION_ID, "demo-session")
            .safe(names::PROVIDER, "faux")
            .safe(names::MODEL, "faux-1")
            .safe(names::PROMPT_LENGTH, text.len())
            .safe(names::SOURCE, "interactive")
            .content(ContentKind::Prompt, names::PROMPT_TEXT, text)
    };
    trace_operation(names::AGENT_PROMPT, payload, async move {
        trace_operation(names::AGENT_TURN, Payload::new().safe(names::TURN_INDEX, 0), async {
            let request =
                Payload::new().safe(names::API, "faux").safe(names::PROVIDER, "faux").safe(names::MODEL, "faux-1");
            trace_operation_with(names::PROVIDER_REQUEST, request, |span: Span| async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                record_event(names::PROVIDER_FIRST_TOKEN, Payload::new().safe(names::TIME_TO_FIRST_TOKEN_MS, 2));
                tokio::time::sleep(Duration::from_millis(4)).await;
                span.record(
                    Payload::new()
                        .safe(names::STOP_REASON, "toolUse")
                        .safe(names::INPUT_TOKENS, 812)
                        .safe(names::OUTPUT_TOKENS, 64)
                        .safe(names::TOTAL_TOKENS, 876)
                        .safe(names::COST_TOTAL, 0.00342),
                );
                Ok::<_, ToolError>(())
            })
            .await?;
            // Parallel tool calls in spawned tasks keep the user's context and their parent.
            let read = spawn(tool_call("read", "call_1".into(), false));
            let grep = spawn(tool_call("grep", "call_2".into(), true));
            let read = read.await.map_err(|e| ToolError(e.to_string()))?;
            let grep = grep.await.map_err(|e| ToolError(e.to_string()))?;
            let _ = (read?, grep.unwrap_or(0));
            Ok(())
        })
        .await
    })
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let hub = Observability::new();
    let subscription = hub.subscribe(|event: &ObsEvent| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", event.to_json());
    });

    let alice = Attribution::new().with(names::CTX_USER_ID, "alice").with(names::CTX_ORG_ID, "acme");
    let bob = Attribution::new().with(names::CTX_USER_ID, "bob").with(names::CTX_ORG_ID, "globex");
    let a = spawn(hub.run_with_context(alice, prompt("fix the failing test in src/lib.rs")));
    let b = spawn(hub.run_with_context(bob, prompt("explain src/main.rs")));
    let (a, b) = (a.await, b.await);
    for (user, result) in [("alice", a), ("bob", b)] {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("{user}: {e}"),
            Err(e) => eprintln!("{user}: task failed: {e}"),
        }
    }

    let _ = hub.flush(Duration::from_secs(1));
    subscription.cancel();
    eprintln!("\n{}", hub.stats());
}
