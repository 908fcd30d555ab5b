//! Item 12: clear errors for the rest of the audit's bad inputs.

use super::*;
use crate::support::Flag;
use crate::support::global_settings;

/// A regular file where a directory is expected.
fn a_file(d: &Path) -> std::path::PathBuf {
    let file = d.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    file
}

/// Runs `cmd`, which must be refused as a usage error (exit 2) with one stderr text naming
/// every one of `needles`; returns that stderr.
fn refused(cmd: Command, needles: &[&str]) -> String {
    let (code, err) = finished(cmd);
    assert_eq!(code, Some(2), "{err}");
    for needle in needles {
        assert!(err.contains(needle), "{needle:?} not named: {err}");
    }
    err
}

#[test]
fn item_12_a_fifo_as_the_managed_policy_is_refused_not_waited_on() {
    let d = scratch("audit-fifo-policy");
    let fifo = d.join("policy.fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let mut cmd = print_run(&d);
    cmd.arg("--no-session").env("PI_MANAGED_SETTINGS", &fifo);
    refused(cmd, &["policy.fifo", "not a regular file"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_an_agent_dir_that_is_a_file_names_the_variable() {
    let d = scratch("audit-agent-file");
    let file = a_file(&d);
    let mut cmd = print_run(&d);
    cmd.env("PI_CODING_AGENT_DIR", &file);
    refused(cmd, &["PI_CODING_AGENT_DIR", "is not a directory"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_session_dir_setting_that_is_a_file_names_the_setting_and_its_file() {
    let d = scratch("audit-session-dir");
    let file = a_file(&d);
    std::fs::create_dir_all(d.join("agent")).unwrap();
    let settings = d.join("agent/settings.json");
    std::fs::write(&settings, serde_json::json!({"sessionDir": file}).to_string()).unwrap();
    let err = refused(print_run(&d), &["sessionDir", &settings.display().to_string()]);
    assert!(!err.contains("--session"), "the flag was not given: {err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_spool_dir_that_is_a_file_is_refused_up_front() {
    let d = scratch("audit-spool-file");
    let file = a_file(&d);
    let mut cmd = print_run(&d);
    cmd.args(["--no-session", "--otlp", &Receiver::down_endpoint()]).arg("--spool-dir").arg(&file);
    refused(cmd, &["--spool-dir", "is not a directory"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_the_sampler_ratio_is_checked_whether_or_not_otlp_is_on() {
    let d = scratch("audit-sampler");
    global_settings(&d, r#"{"telemetry": {"sampler": {"arg": 5}}}"#);
    for otlp in [false, true] {
        let mut cmd = print_run(&d);
        cmd.arg("--no-session");
        if otlp {
            cmd.args(["--otlp", &Receiver::down_endpoint()]);
        }
        let (code, err) = finished(cmd);
        assert_eq!(code, Some(2), "otlp {otlp}: {err}");
        assert!(err.contains("telemetry.sampler.arg") && err.contains("between 0 and 1"), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_faux_with_a_base_url_is_refused() {
    let d = scratch("audit-faux-base");
    let mut cmd = print_run(&d);
    cmd.args(["--no-session", "--base-url", "http://127.0.0.1:9/v1"]);
    refused(cmd, &["--base-url", "faux"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_a_partial_session_id_finds_its_file_or_says_it_matches_none() {
    let d = scratch("audit-partial-id");
    // A first run creates a session in the default folder.
    let (code, err) = finished(print_run(&d));
    assert_eq!(code, Some(0), "{err}");
    let sessions: Vec<_> = walk(&d.join("agent/sessions"));
    assert_eq!(sessions.len(), 1);
    let header: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&sessions[0]).unwrap().lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_owned();
    // The start of its id resumes it.
    let mut resume = print_run(&d);
    resume.args(["--session", &id[..8]]);
    let (code, err) = finished(resume);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(walk(&d.join("agent/sessions")).len(), 1, "no new session");
    assert!(std::fs::read_to_string(&sessions[0]).unwrap().lines().count() > 4, "appended to");
    // An id that matches nothing is an error, not a new file named after it.
    let mut missing = print_run(&d);
    missing.args(["--session", "ffffeeee"]);
    refused(missing, &["ffffeeee", "no session"]);
    assert!(!d.join("ffffeeee").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|x| x == "jsonl") {
            out.push(path);
        }
    }
    out
}

#[test]
fn item_12_rpc_lines_that_are_not_utf8_get_a_parse_error() {
    use std::io::Write;
    let d = scratch("audit-rpc-utf8");
    let mut child = pi_in(&d)
        .args(["--mode", "rpc", "--provider", "faux", "--no-session"])
        .flag("--cwd", &d)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"type\":\"get_state\",\"id\":\"a\xff\xfeb\"}\n{\"type\":\"get_state\",\"id\":\"ok\"}\n")
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["type"] == "response")
        .collect();
    let parse = lines.iter().find(|v| v["command"] == "parse").expect("a parse error response");
    assert_eq!(parse["success"], false);
    assert!(parse.get("id").is_none(), "no id read from mangled text: {parse}");
    assert!(parse["error"].as_str().unwrap().contains("not UTF-8"), "{parse}");
    assert!(lines.iter().any(|v| v["id"] == "ok" && v["success"] == true), "the next line still runs");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn item_12_an_extension_writing_to_stdout_keeps_the_protocol_intact() {
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!("skipped: no node on PATH");
        return;
    }
    let d = scratch("audit-ext-stdout");
    let ext = d.join("noisy.mjs");
    std::fs::write(
        &ext,
        r#"export default function (pi) {
  process.stdout.write("NOISE not a protocol line\n");
  console.log("more noise");
  pi.on("tool_call", async () => { process.stdout.write("{\"type\":\"bogus\"}\n"); return undefined; });
}
"#,
    )
    .unwrap();
    let mut cmd = pi_in(&d);
    cmd.args(["-p", "check", "--provider", "faux", "--no-session"])
        .flag("--cwd", &d)
        .flag("--faux-script", faux_script(&d))
        .flag("-e", &ext)
        .flag("--events-jsonl", d.join("events.jsonl"));
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("noisy"), "the extension was reported as failing: {err}");
    // Its tool_call handler ran and let both tools through (a broken pipe would block them).
    let events = support::events(&d.join("events.jsonl"));
    let tool_call_hooks = events.iter().filter(|e| {
        e.name == "pi.agent.hook"
            && e.kind == pi_observe::core::EventKind::Start
            && e.payload.get("hookName").is_some_and(|h| h.to_string().contains("tool_call"))
    });
    assert_eq!(tool_call_hooks.count(), 2, "one tool_call hook per tool");
    assert!(!events.iter().any(|e| e.name == "pi.agent.hook" && e.kind == pi_observe::core::EventKind::Error));
    let blocked = events.iter().filter(|e| e.payload.get("blocked").is_some_and(|b| b.to_string() == "true"));
    assert_eq!(blocked.count(), 0);
    let log = std::fs::read_to_string(d.join("agent/logs/extensions/noisy.log")).unwrap();
    assert!(log.contains("NOISE not a protocol line") && log.contains("more noise"), "{log}");
    std::fs::remove_dir_all(&d).unwrap();
}
