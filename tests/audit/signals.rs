//! Items 7–9: hangups, signals and process groups — nothing lost, nothing left running.

use super::*;
use crate::support::Flag;
use crate::support::global_settings;

/// True while process `pid` runs (a zombie has finished).
fn alive(pid: &str) -> bool {
    support::running(pid)
}

/// Waits (polling) until `path` holds `n` whole lines; returns them.
fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= n && text.ends_with('\n') {
            return lines;
        }
        assert!(std::time::Instant::now() < deadline, "{} never got {n} lines", path.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn item_9_nothing_an_extension_the_js_host_or_an_attribution_command_started_outlives_pi() {
    let d = scratch("audit-orphans");
    let pids = d.join("pids.txt");
    // A process extension that leaves a background child running.
    let ext = d.join("spawner.sh");
    std::fs::write(
        &ext,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! >> {pids}\nwhile IFS= read -r line; do\n  case \"$line\" in\n    *'\"type\":\"hello\"'*) printf '%s\\n' '{{\"type\":\"register\",\"protocol\":1,\"name\":\"spawner\",\"events\":[\"tool_call\"]}}' ;;\n    *'\"type\":\"event\"'*) id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9][0-9]*\\)}}$/\\1/p'); printf '{{\"type\":\"result\",\"id\":%s,\"result\":null}}\\n' \"$id\" ;;\n  esac\ndone\n",
            pids = pids.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ext, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut extensions = vec![ext];
    // A JavaScript extension whose host starts a child of its own.
    let node = Command::new("node").arg("--version").output().is_ok();
    if node {
        let js = d.join("spawner.mjs");
        std::fs::write(
            &js,
            format!(
                "import {{ spawn }} from 'node:child_process';\nimport {{ appendFileSync }} from 'node:fs';\nexport default function (pi) {{\n  const c = spawn('sleep', ['300'], {{ stdio: 'ignore' }});\n  appendFileSync({:?}, c.pid + '\\n');\n}}\n",
                pids.display().to_string()
            ),
        )
        .unwrap();
        extensions.push(js);
    } else {
        eprintln!("node not on PATH: the JavaScript host part is skipped");
    }
    // An attribution command that leaves a background child and answers.
    global_settings(
        &d,
        serde_json::json!({"telemetry": {"attribution": {
            "userIdCommand": format!("sleep 300 & echo $! >> {}; echo alice@acme", pids.display())
        }}})
        .to_string()
        .as_str(),
    );
    let mut cmd = pi_in(&d);
    cmd.args(["-p", "check", "--provider", "faux", "--no-session"])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d));
    for ext in &extensions {
        cmd.arg("-e").arg(ext);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let started = wait_lines(&pids, extensions.len() + 1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while started.iter().any(|p| alive(p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let left: Vec<&String> = started.iter().filter(|p| alive(p)).collect();
    for pid in &left {
        let _ = Command::new("kill").args(["-9", pid]).status();
    }
    assert!(left.is_empty(), "processes outlived pi: {left:?} of {started:?}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_9_an_attribution_command_that_prints_too_much_is_named_as_such() {
    let d = scratch("audit-attr-cap");
    global_settings(&d, r#"{"telemetry": {"attribution": {"userIdCommand": "yes alice@acme | head -c 100000"}}}"#);
    let (code, err) = finished(print_run(&d));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("printed more than 4096 bytes"), "{err}");
    assert!(!err.contains("took longer"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi` (interactive) on the slave side of a fresh pseudo-terminal, its master non-blocking.
struct Pty {
    master: Option<std::fs::File>,
    child: std::process::Child,
    screen: Vec<u8>,
}

impl Pty {
    fn spawn(mut cmd: Command) -> Pty {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = std::fs::OpenOptions::new().read(true).write(true).open(name.to_str().unwrap()).unwrap();
        rustix::io::ioctl_fionbio(&master, true).unwrap();
        let child = cmd
            .env("TERM", "xterm-256color")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .unwrap();
        Pty { master: Some(std::fs::File::from(master)), child, screen: Vec::new() }
    }

    /// Reads what pi wrote so far.
    fn pump(&mut self) {
        use std::io::Read;
        let Some(master) = &mut self.master else { return };
        let mut buf = [0u8; 8192];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            self.screen.extend_from_slice(&buf[..n]);
        }
    }

    fn type_text(&mut self, text: &str) {
        use std::io::Write;
        self.master.as_mut().unwrap().write_all(text.as_bytes()).unwrap();
    }

    /// Pumps until `done` holds (30 s at most).
    fn until(&mut self, what: &str, done: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            self.pump();
            let screen = String::from_utf8_lossy(&self.screen).into_owned();
            if done(&screen) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what} never happened: {screen}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits for pi to exit (30 s at most): its exit code and how long it took.
    fn wait(&mut self) -> (Option<i32>, std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            self.pump();
            if let Some(status) = self.child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                if let Some(signal) = status.signal() {
                    eprintln!("pi was killed by signal {signal}");
                }
                return (status.code(), start.elapsed());
            }
            if start.elapsed() > std::time::Duration::from_secs(30) {
                self.child.kill().unwrap();
                panic!("pi kept running");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// The `sleep 60` processes (the long tool call) still running in `dir` once any that were
/// just killed had 10 s to go.
fn sleepers_in(dir: &Path) -> Vec<String> {
    let find = || -> Vec<String> {
        let sleeping = Command::new("pgrep").args(["-f", "^sleep 60$"]).output().unwrap();
        String::from_utf8_lossy(&sleeping.stdout)
            .lines()
            .filter(|pid| alive(pid) && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
            .map(str::to_owned)
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut left = find();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = find();
    }
    left
}

/// Every start record has its end in `events`, and every line is whole JSON.
fn records_complete(events: &Path) {
    let text = std::fs::read_to_string(events).unwrap();
    assert!(text.ends_with('\n'), "a torn last line");
    let events = support::events(events);
    let starts = events.iter().filter(|e| e.kind == pi_observe::core::EventKind::Start).count();
    let ends = events
        .iter()
        .filter(|e| matches!(e.kind, pi_observe::core::EventKind::End | pi_observe::core::EventKind::Error))
        .count();
    assert!(starts > 0);
    assert_eq!(starts, ends, "every span ended");
}

fn interactive(d: &Path, name: &str) -> Command {
    let script = d.join("script.json");
    // A long tool call keeps the prompt running when the terminal goes.
    std::fs::write(
        &script,
        serde_json::json!([{"text": "Working.", "tools": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}, {"text": "Done."}]).to_string(),
    )
    .unwrap();
    let mut cmd = pi_in(d);
    cmd.args(["--provider", "faux"])
        .flag("--cwd", d)
        .flag("--faux-script", &script)
        .flag("--session", d.join(format!("{name}.jsonl")))
        .flag("--events-jsonl", d.join(format!("{name}-events.jsonl")));
    cmd
}

#[test]
fn item_7_a_terminal_that_goes_away_ends_pi_with_129_and_every_record_written() {
    let d = scratch("audit-hangup");
    // The pseudo-terminal's master closes while a tool runs (tmux killed, SSH dropped).
    let mut pty = Pty::spawn(interactive(&d, "eof"));
    pty.until("the footer", |screen| screen.contains("faux-1"));
    pty.type_text("run the long thing\r");
    let session = d.join("eof.jsonl");
    pty.until("the tool call", |_| std::fs::read_to_string(&session).unwrap_or_default().contains("sleep 60"));
    pty.master = None;
    let (code, took) = pty.wait();
    eprintln!("exited {took:?} after the terminal went away");
    assert_eq!(code, Some(129));
    records_complete(&d.join("eof-events.jsonl"));
    assert!(std::fs::read_to_string(&session).unwrap().ends_with('\n'));

    assert!(sleepers_in(&d).is_empty(), "the tool's sleep outlived pi");

    // SIGHUP (the terminal's controlling process told it hung up): the same ending.
    let mut pty = Pty::spawn(interactive(&d, "hup"));
    let session = d.join("hup.jsonl");
    pty.until("the footer", |screen| screen.contains("faux-1"));
    pty.type_text("run the long thing\r");
    pty.until("the tool call", |_| std::fs::read_to_string(&session).unwrap_or_default().contains("sleep 60"));
    assert!(Command::new("kill").args(["-HUP", &pty.child.id().to_string()]).status().unwrap().success());
    let (code, took) = pty.wait();
    eprintln!("exited {took:?} after SIGHUP");
    assert_eq!(code, Some(129));
    records_complete(&d.join("hup-events.jsonl"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// `pi --mode rpc` on the long-tool script, its stdin and stdout piped (stdin held open).
fn rpc(d: &Path) -> std::process::Child {
    let script = d.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!([{"text": "Working.", "tools": [{"name": "bash", "arguments": {"command": "sleep 60"}}]}, {"text": "Done."}]).to_string(),
    )
    .unwrap();
    pi_in(d)
        .args(["--mode", "rpc", "--provider", "faux"])
        .flag("--cwd", d)
        .flag("--faux-script", &script)
        .flag("--session", d.join("rpc.jsonl"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads stdout lines until one satisfies `want`.
fn read_until(lines: &mut impl Iterator<Item = std::io::Result<String>>, want: impl Fn(&serde_json::Value) -> bool) {
    for line in lines.by_ref() {
        let value: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap_or_default();
        if want(&value) {
            return;
        }
    }
    panic!("stdout ended first");
}

/// `pi --mode rpc` in `d`, prompted into its long-running tool (the prompt's
/// `tool_execution_start` read): the child, its stdin and the rest of its stdout.
fn rpc_in_a_long_tool(
    d: &Path,
) -> (std::process::Child, std::process::ChildStdin, std::io::Lines<std::io::BufReader<std::process::ChildStdout>>) {
    use std::io::{BufRead, Write};
    let mut child = rpc(d);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    stdin.write_all(b"{\"type\":\"prompt\",\"id\":\"p\",\"message\":\"run the long thing\"}\n").unwrap();
    stdin.flush().unwrap();
    read_until(&mut lines, |v| v["type"] == "tool_execution_start");
    (child, stdin, lines)
}

#[test]
fn item_8_rpc_mode_ends_on_sigint_sigterm_and_sighup_while_the_client_keeps_stdin_open() {
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let d = scratch("audit-rpc-signal");
        let (mut child, stdin, _lines) = rpc_in_a_long_tool(&d);
        assert!(
            Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap().success()
        );
        let (code, took) = exit_of(&mut child);
        eprintln!("SIG{signal}: exited in {took:?}");
        assert_eq!(code, Some(128 + number), "SIG{signal}");
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(err.contains(&format!("aborted by SIG{signal}")), "{err}");
        let ours = sleepers_in(&d);
        assert!(ours.is_empty(), "the tool's sleep outlived pi: {ours:?}");
        drop(stdin);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn item_8_a_client_that_closes_pis_stdout_ends_the_run() {
    use std::io::Write;
    let d = scratch("audit-rpc-epipe");
    let (mut child, mut stdin, lines) = rpc_in_a_long_tool(&d);
    drop(lines); // the client stops reading: pi's next line meets EPIPE
    // The next line pi writes (a response) meets the closed pipe.
    stdin.write_all(b"{\"type\":\"get_state\",\"id\":\"s\"}\n").unwrap();
    stdin.flush().unwrap();
    let (code, took) = exit_of(&mut child);
    eprintln!("exited in {took:?} after the client closed stdout");
    assert_eq!(code, Some(1));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(err.lines().filter(|l| l.contains("closed stdout")).count(), 1, "{err}");
    let session = std::fs::read_to_string(d.join("rpc.jsonl")).unwrap();
    assert!(session.ends_with('\n'), "whole lines");
    drop(stdin);
    std::fs::remove_dir_all(&d).unwrap();
}
