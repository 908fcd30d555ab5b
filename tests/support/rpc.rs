//! `pi --mode rpc` as a client drives it: JSON commands on its stdin, every line it writes read
//! back as JSON.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::pi;

/// A running `pi --mode rpc` and every line it wrote so far.
pub struct Rpc {
    pub child: Child,
    stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<Value>,
    /// Every line read so far.
    pub seen: Vec<Value>,
    next_id: u64,
}

pub const PATIENCE: Duration = Duration::from_secs(30);

impl Rpc {
    pub fn start(dir: &Path, script: &Value, extra: &[&str]) -> Rpc {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let mut cmd = pi();
        cmd.args(["--mode", "rpc", "--faux-script"])
            .arg(&script_path)
            .args(["--cwd"])
            .arg(dir)
            .args(extra)
            .env("PI_CODING_AGENT_DIR", dir.join("agent"))
            .env("PI_CODING_AGENT_SESSION_DIR", dir.join("sessions"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.unwrap();
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Rpc { child, stdin, lines, seen: Vec::new(), next_id: 0 }
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a command with a fresh id and returns the id.
    pub fn send(&mut self, mut command: Value) -> String {
        self.next_id += 1;
        let id = format!("req-{}", self.next_id);
        command["id"] = json!(id);
        self.send_raw(&command.to_string());
        id
    }

    /// The next line matching `want` (every line read is kept in `seen`).
    pub fn wait_for(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within {PATIENCE:?}; saw:\n{}", lines(&self.seen)));
            self.seen.push(line.clone());
            if want(&line) {
                return line;
            }
        }
    }

    /// A line already read that matches `want`, else the next one that does.
    pub fn seen_or_wait(&mut self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        match self.seen.iter().find(|l| want(l)) {
            Some(line) => line.clone(),
            None => self.wait_for(what, want),
        }
    }

    /// The response to command `id` (well-formed: type, command, success, and data or error).
    pub fn response(&mut self, id: &str) -> Value {
        let response = self.wait_for(&format!("response {id}"), |l| l["id"] == id);
        assert_eq!(response["type"], "response", "{response}");
        assert!(response["command"].is_string(), "{response}");
        assert!(response["success"].is_boolean(), "{response}");
        if response["success"] == false {
            assert!(response["error"].as_str().is_some_and(|e| !e.is_empty()), "{response}");
        }
        response
    }

    /// Sends and waits for a successful response; returns its `data`.
    pub fn call(&mut self, command: Value) -> Value {
        let id = self.send(command);
        let response = self.response(&id);
        assert_eq!(response["success"], true, "{response}");
        response["data"].clone()
    }

    pub fn event(&mut self, kind: &str) -> Value {
        self.wait_for(kind, |l| l["type"] == kind)
    }

    /// Closes stdin and waits for the exit; returns the exit status and stderr.
    pub fn close(mut self) -> (std::process::ExitStatus, String, Vec<Value>) {
        drop(self.stdin.take());
        let deadline = Instant::now() + PATIENCE;
        while let Ok(line) = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            self.seen.push(line);
        }
        let out = self.child.wait_with_output().unwrap();
        (out.status, String::from_utf8_lossy(&out.stderr).into_owned(), self.seen)
    }
}

pub fn lines(values: &[Value]) -> String {
    values.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}
