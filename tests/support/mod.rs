//! Helpers shared by the workspace's end-to-end test crates: the `pi` binary with a clean
//! environment, scratch directories, a faux script that calls tools, and event/span readers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use pi_observe::core::ObsEvent;

/// The `pi` binary, without provider keys or OTLP settings inherited from the environment, and
/// with an agent directory of its own (so nothing is spooled into the real `~/.pi/agent`).
pub fn pi() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
    let agent = std::env::temp_dir().join(format!("pi-test-agent-{}", pi_observe::core::SpanId::random()));
    cmd.env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SPOOL_DIR")
        .env_remove("PI_MANAGED_SETTINGS")
        .env_remove("PI_CODING_AGENT_SESSION_DIR");
    for var in
        ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TRACEPARENT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"]
    {
        cmd.env_remove(var);
    }
    cmd
}

/// A fresh scratch directory named after the test.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pi-otel-{name}-{}", pi_observe::core::SpanId::random()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A faux script: one turn calling `ls` and `bash`, then a final answer.
pub fn faux_script(dir: &Path) -> PathBuf {
    let script = dir.join("script.json");
    let steps = serde_json::json!([
        {"text": "Checking.", "tools": [{"name": "ls", "arguments": {}}, {"name": "bash", "arguments": {"command": "echo hi"}}]},
        {"text": "All good."}
    ]);
    std::fs::write(&script, steps.to_string()).unwrap();
    script
}

/// The contract events a `--events-jsonl` file holds.
pub fn events(path: &Path) -> Vec<ObsEvent> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| ObsEvent::from_json(l).unwrap()).collect()
}

/// The value of a span attribute.
pub fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}
