//! The cost of a `tool_call` handler round trip, side by side in one run (see BENCHMARKS.md):
//!
//! - `tool_call/rust_noop`: an in-process Rust extension whose handler has no opinion;
//! - `tool_call/process_noop`: the same no-op handler in a process extension (a Python script
//!   speaking the JSON-lines protocol): serialize the event, write a line, the other process
//!   parses and answers, read and match the reply. Goal: median ≤ 1 ms.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use pi_agent::extensions::process::{ProcessExtension, ProcessSpec};
use pi_agent::extensions::{HookContext, Hooks, ToolCallEvent, extension, hooks};
use pi_agent::model::Registry;
use serde_json::json;

const NOOP: &str = r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m["type"] == "hello":
        print(json.dumps({"type": "register", "protocol": 1, "name": "noop", "events": ["tool_call"]}), flush=True)
    elif m["type"] == "event":
        print(json.dumps({"type": "result", "id": m["id"], "result": None}), flush=True)
    elif m["type"] == "shutdown":
        break
"#;

fn round_trip(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let ctx = HookContext::detached(Registry::builtin().find("faux", "faux-1").unwrap().clone());
    let event =
        ToolCallEvent { tool_call_id: "c1".into(), tool_name: "bash".into(), input: json!({"command": "ls -la"}) };

    let mut rust = Hooks::new();
    rust.add(&extension("noop", |api| api.on(hooks::ToolCall, |_event, _ctx| async { Ok(None) })));

    let script = std::env::temp_dir().join(format!("pi-bench-noop-{}.py", std::process::id()));
    std::fs::write(&script, NOOP).unwrap();
    let mut spec = ProcessSpec::new("python3", &script, std::env::temp_dir());
    spec.args = vec![script.display().to_string()];
    let process = runtime.block_on(ProcessExtension::start(spec)).expect("python3 runs the no-op extension");
    let mut remote = Hooks::new();
    remote.add(&process);

    let mut group = c.benchmark_group("tool_call");
    group.bench_function("rust_noop", |b| {
        b.iter(|| runtime.block_on(rust.tool_call(black_box(event.clone()), &ctx)));
    });
    group.bench_function("process_noop", |b| {
        b.iter(|| runtime.block_on(remote.tool_call(black_box(event.clone()), &ctx)));
    });
    group.finish();
    runtime.block_on(process.shutdown());
    let _ = std::fs::remove_file(&script);
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
