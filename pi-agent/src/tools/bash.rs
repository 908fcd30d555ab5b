//! bash: runs a command with a timeout, an output cap, kill on abort, and the session
//! environment (`PI_*`, `TRACEPARENT`) — never the parent's telemetry credentials or API keys.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::{
    MAX_OUTPUT_BYTES, SessionEnv, Tool, ToolContext, ToolError, ToolFuture, ToolOutput, describe, str_arg, u64_arg,
};

/// Variables a child process gets from the session (and loses when `expose` is off).
pub const SESSION_VARS: [&str; 6] =
    ["PI_SESSION_ID", "PI_SESSION_FILE", "PI_PROVIDER", "PI_MODEL", "PI_REASONING_LEVEL", "TRACEPARENT"];

/// Runs shell commands.
#[derive(Debug, Clone)]
pub struct BashTool {
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// Longest timeout a call may ask for.
    pub max_timeout: Duration,
}

impl Default for BashTool {
    fn default() -> Self {
        BashTool { default_timeout: Duration::from_secs(120), max_timeout: Duration::from_secs(600) }
    }
}

/// True for variables a child must never inherit: OpenTelemetry settings (they carry exporter
/// credentials in `OTEL_EXPORTER_OTLP_HEADERS`), Sentry DSNs and API keys.
fn is_sensitive(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("OTEL_") || upper == "SENTRY_DSN" || upper.ends_with("_API_KEY") || upper.ends_with("_AUTH_TOKEN")
}

/// The environment of a child process: the parent's, minus sensitive variables and inherited
/// session variables, plus this session's variables when `env.expose` is on.
pub fn child_environment(env: &SessionEnv, traceparent: Option<String>) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| !is_sensitive(k) && !SESSION_VARS.contains(&k.as_str()))
        .collect();
    if env.expose {
        let mut set = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                vars.push((k.to_owned(), v));
            }
        };
        set("PI_SESSION_ID", env.session_id.clone());
        set("PI_SESSION_FILE", env.session_file.clone());
        set("PI_PROVIDER", Some(env.provider.clone()));
        set("PI_MODEL", Some(env.model.clone()));
        set("PI_REASONING_LEVEL", env.reasoning.clone());
        set("TRACEPARENT", traceparent);
    }
    vars
}

/// Keeps the last `MAX_OUTPUT_BYTES` of everything written, counting the total.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    total: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len();
        self.bytes.extend_from_slice(chunk);
        if self.bytes.len() > MAX_OUTPUT_BYTES {
            let excess = self.bytes.len() - MAX_OUTPUT_BYTES;
            self.bytes.drain(..excess);
        }
    }

    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.total > self.bytes.len() {
            format!("[output truncated: {} bytes, showing the last {}]\n{text}", self.total, self.bytes.len())
        } else {
            text
        }
    }
}

async fn pump(
    mut pipe: impl tokio::io::AsyncRead + Unpin,
    tail: Arc<Mutex<Tail>>,
    updates: Option<tokio::sync::mpsc::UnboundedSender<String>>,
) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tail.lock().unwrap_or_else(|e| e.into_inner()).push(&buf[..n]);
        if let Some(updates) = &updates {
            let _ = updates.send(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    }
}

/// Kills the command's whole process group (it runs as a group leader).
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid {
        crate::process::kill_group(pid);
    }
}

impl Tool for BashTool {
    describe!(
        "bash",
        "Run a bash command in the working directory. Returns stdout and stderr (last 50 KB). `timeout` in seconds.",
        {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer", "minimum": 1}}, "required": ["command"]}
    );
    fn output_kind(&self) -> pi_observe_core::ContentKind {
        pi_observe_core::ContentKind::ShellOutput
    }
    fn execute<'a>(&'a self, args: &'a Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = str_arg(args, "command")?;
            let timeout =
                u64_arg(args, "timeout")?.map_or(self.default_timeout, Duration::from_secs).min(self.max_timeout);
            let finished = run(command, ctx, Some(timeout)).await?;
            match finished.code {
                Some(0) => Ok(ToolOutput {
                    content: finished.output,
                    details: Some(json!({"exitCode": 0})),
                    usage: None,
                    terminate: false,
                }),
                Some(code) => Err(ToolError::Other(format!("{}\n[exit code {code}]", finished.output))),
                None => Err(ToolError::Other(format!("{}\n[killed by a signal]", finished.output))),
            }
        })
    }
}

/// How a shell command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// The last [`MAX_OUTPUT_BYTES`] of stdout and stderr, interleaved as written.
    pub output: String,
    /// Earlier output was cut.
    pub truncated: bool,
}

/// Runs `command` with `bash -c` in its own process group, in the context's directory and
/// environment; the group is killed on cancel (`Err(Aborted)`), on timeout, and when the command
/// exits (background processes would hold the pipes open).
pub async fn run(command: &str, ctx: &ToolContext, timeout: Option<Duration>) -> Result<Finished, ToolError> {
    let traceparent = pi_observe_core::current().traceparent().map(|tp| tp.to_string());
    let mut child = tokio::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(&ctx.cwd)
        .env_clear()
        .envs(child_environment(&ctx.env, traceparent))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::Other(format!("cannot start bash: {e}")))?;
    let pid = child.id();
    let tail = Arc::new(Mutex::new(Tail::default()));
    let readers = [
        child.stdout.take().map(|p| tokio::spawn(pump(p, tail.clone(), ctx.updates.clone()))),
        child.stderr.take().map(|p| tokio::spawn(pump(p, tail.clone(), ctx.updates.clone()))),
    ];
    let deadline = async {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let status = tokio::select! {
        () = ctx.cancel.cancelled() => {
            kill_group(pid);
            return Err(ToolError::Aborted);
        }
        () = deadline => {
            kill_group(pid);
            return Err(ToolError::Timeout(timeout.unwrap_or_default().as_secs()));
        }
        status = child.wait() => status.map_err(|e| ToolError::Other(format!("bash failed: {e}")))?,
    };
    kill_group(pid);
    for reader in readers.into_iter().flatten() {
        let _ = reader.await;
    }
    let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
    Ok(Finished { code: status.code(), output: tail.text(), truncated: tail.total > tail.bytes.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_variables_are_recognised() {
        for name in
            ["OTEL_EXPORTER_OTLP_HEADERS", "otel_service_name", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SENTRY_DSN"]
        {
            assert!(is_sensitive(name), "{name}");
        }
        for name in ["PATH", "HOME", "PI_MODEL", "LANG"] {
            assert!(!is_sensitive(name), "{name}");
        }
    }

    #[test]
    fn tail_keeps_the_end_and_says_so() {
        let mut t = Tail::default();
        t.push(&vec![b'a'; MAX_OUTPUT_BYTES]);
        t.push(b"END");
        let text = t.text();
        assert!(text.starts_with("[output truncated"));
        assert!(text.ends_with("END"));
    }
}
