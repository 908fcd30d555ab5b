//! Helpers shared by the workspace's end-to-end test crates: the `pi` binary with a clean
//! environment, scratch directories, a faux script that calls tools, and event/span readers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod replays;
pub mod rpc;
pub mod tui;

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
    // A piped stdin means print mode (upstream's rule) and is read to its end: tests give one
    // explicitly when they mean to.
    cmd.stdin(std::process::Stdio::null());
    cmd.env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SPOOL_DIR")
        .env_remove("PI_MANAGED_SETTINGS")
        .env_remove("PI_CODING_AGENT_SESSION_DIR");
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "TRACEPARENT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_SDK_DISABLED",
        "PI_USER_ID",
        "PI_ORG_ID",
        "PI_FAUX_SCRIPT",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// `--name value` in one call.
pub trait Flag {
    fn flag(&mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> &mut Self;
}

impl Flag for Command {
    fn flag(&mut self, name: &str, value: impl AsRef<std::ffi::OsStr>) -> &mut Self {
        self.arg(name).arg(value)
    }
}

/// Runs a command that must succeed (its stderr in the failure message) and returns its output.
pub trait Succeeds {
    fn succeeds(&mut self) -> std::process::Output;
}

impl Succeeds for Command {
    fn succeeds(&mut self) -> std::process::Output {
        let out = self.output().unwrap();
        assert!(out.status.success(), "{self:?}: {}", String::from_utf8_lossy(&out.stderr));
        out
    }
}

/// Writes `json` as the global settings of the agent directory `dir/agent`.
pub fn global_settings(dir: &Path, json: &str) {
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    std::fs::write(dir.join("agent/settings.json"), json).unwrap();
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

/// `(name, kind, name of the parent record)` of every contract record in an events file, in
/// order, leaving out the records named in `skip` (the parity tests' comparison).
pub fn contract_shape(path: &Path, skip: &[&str]) -> Vec<(String, String, String)> {
    let events = events(path);
    let names: std::collections::HashMap<_, _> =
        events.iter().filter_map(|e| Some((e.span_id?, e.name.to_string()))).collect();
    events
        .iter()
        .filter(|e| !skip.contains(&e.name.as_ref()))
        .map(|e| {
            let parent = e.parent_span_id.and_then(|p| names.get(&p).cloned()).unwrap_or_default();
            (e.name.to_string(), format!("{:?}", e.kind), parent)
        })
        .collect()
}

/// True while process `pid` runs (a zombie has finished).
pub fn running(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits (polling) until `path` holds a whole line written by a tool; returns it trimmed.
pub fn wait_for_line_in(path: &Path) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if let Ok(text) = std::fs::read_to_string(path)
            && text.ends_with('\n')
        {
            return text.trim().to_owned();
        }
        std::thread::yield_now();
    }
    panic!("{} never appeared", path.display());
}

/// Waits (polling) until none of `pids` runs; false if one still does after 30 s.
pub fn all_gone(pids: &[&str]) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while pids.iter().any(|p| running(p)) && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    !pids.iter().any(|p| running(p))
}

/// The value of a span attribute.
pub fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a Any> {
    span.attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).and_then(|v| v.value.as_ref())
}

/// Serves one OpenAI-compatible streaming response on 127.0.0.1:0 and returns what it received.
pub fn one_shot_openai_server() -> (String, std::thread::JoinHandle<String>) {
    let chunks = [
        r#"{"model":"llama-local","choices":[{"index":0,"delta":{"content":"Hello from"},"finish_reason":null}]}"#,
        r#"{"model":"llama-local","choices":[{"index":0,"delta":{"content":" loopback"},"finish_reason":"stop"}]}"#,
        r#"{"model":"llama-local","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}"#,
        "[DONE]",
    ];
    let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    let (base, handle) = one_shot_sse_server(body);
    (format!("{base}/v1"), handle)
}

/// Serves `body` as one `text/event-stream` response on 127.0.0.1:0 (base URL without a path)
/// and returns the request it received (request line, headers and body).
pub fn one_shot_sse_server(body: String) -> (String, std::thread::JoinHandle<String>) {
    one_shot_server("text/event-stream", body.into_bytes())
}

/// One AWS event-stream message (`:event-type` `event`), framed as Bedrock sends it.
pub fn aws_event(event: &str, payload: &str) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    let string = |v: &str| HeaderValue::String(v.to_owned().into());
    let message = Message::new(payload.as_bytes().to_vec())
        .add_header(Header::new(":message-type", string("event")))
        .add_header(Header::new(":event-type", string(event)));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
    out
}

/// Serves `body` with `content_type` as one response on 127.0.0.1:0 (base URL without a path)
/// and returns the request it received (request line, headers and body).
pub fn one_shot_server(content_type: &'static str, body: Vec<u8>) -> (String, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut socket, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n");
        socket.write_all(head.as_bytes()).unwrap();
        socket.write_all(&body).unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (base, handle)
}

/// The agent folder (kept in `target/`) with upstream's npm packages installed, as pi installs
/// them the first time an extension imports one (under pi's own lock, so concurrent tests wait).
pub fn upstream_agent() -> PathBuf {
    let agent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("upstream-agent");
    let probe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("upstream-probe.ts");
    std::fs::write(
        &probe,
        "import { Type } from \"@sinclair/typebox\";\nexport default function () { Type.Object({}); }\n",
    )
    .unwrap();
    pi().args(["-p", "hi", "--no-session", "--tools", "none"])
        .flag("-e", &probe)
        .env("PI_CODING_AGENT_DIR", &agent)
        .succeeds();
    agent
}
